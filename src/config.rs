//! Producer settings, named as the Java client and librdkafka name them:
//! [`PROPERTIES`] are the names taken, and [`ALIASES`] maps librdkafka's
//! names for the same settings to them (`queue.buffering.max.kbytes` is
//! `buffer.memory` in KiB). An unknown name is
//! [`ConfigError::UnknownProperty`], whose message suggests the closest
//! known name or alias (strsim's Jaro–Winkler, above 0.85).
//!
//! Every value is parsed and checked when it is set, and the first bad one
//! is reported by [`crate::ProducerBuilder::build`] as a [`ConfigError`] that
//! names the property. Cross-property rules (for example
//! `delivery.timeout.ms >= linger.ms + request.timeout.ms`, as the Java
//! client enforces) are checked at build time.

use std::path::PathBuf;
use std::time::Duration;

use crate::partitioner::Partitioning;

mod elsewhere;
mod file;
mod jaas;
mod oauthbearer;
mod secret;
mod security;
mod value;

use crate::protocol::record_batch::{Codec, Compression};
use crate::protocol::sasl::Mechanism;
/// A SASL mechanism Courier speaks (`sasl.mechanism`).
pub use crate::protocol::sasl::Mechanism as SaslMechanism;
pub use oauthbearer::{OAuthBearerMethod, OidcConfig};
pub use secret::Secret;
pub use security::{SecurityConfig, SecurityProtocol};
use value::Value;

/// A bad producer setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A property name Courier does not know (the message suggests the
    /// closest known name).
    #[error("unknown producer property {0:?}{hint}", hint = did_you_mean(.0))]
    UnknownProperty(String),
    /// A value that does not parse or is out of range.
    #[error("invalid value {value:?} for {property}: {reason}")]
    InvalidValue {
        /// The property.
        property: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two properties that contradict each other.
    #[error("{0}")]
    Inconsistent(String),
    /// A properties file that cannot be read or parsed (the message names
    /// it).
    #[error("cannot read {0}")]
    Unreadable(String),
    /// `ProducerBuilder::start` was called outside a running actix system;
    /// `build` starts the producer on a thread of its own instead.
    #[error("start() needs a running actix system (inside actix::System or #[actix_web::main]); use build() from plain tokio code or any other thread")]
    NoActixSystem,
    /// `ProducerBuilder::build_on` was given an [`ActorThread`](crate::ActorThread)
    /// whose actix system had been stopped.
    #[error("build_on() was given an ActorThread whose actix system has stopped")]
    ActorThreadStopped,
}

/// Acknowledgements the producer asks for (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: the broker sends no response; reports say "sent", with no
    /// offset.
    None,
    /// `acks=1`: the leader has written the record.
    Leader,
    /// `acks=all` (or `-1`): every in-sync replica has it.
    All,
}

impl Acks {
    /// The value in a Produce request.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// The most `buffer.memory` a new batch takes at first (less when room
/// for a few records like its first is less, or `batch.size` is smaller;
/// more only when its first record needs more). It takes more, doubling
/// up to `batch.size`, as it fills, so a large `batch.size` does not pin
/// memory for partitions that get little. 4 KiB, a quarter of Java's
/// batch size: with Java's 16 KiB, a keyed producer on a topic of 1,000
/// partitions held the whole default `buffer.memory` in batches of one or
/// two records each; at 4 KiB for every batch, one on 10,000 partitions
/// held it in about 8,000.
pub(crate) const INITIAL_RESERVATION: usize = 4 * 1024;

/// All producer settings, with the Java client's defaults unless noted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// `bootstrap.servers`: `host:port` list.
    pub bootstrap_servers: Vec<String>,
    /// `client.id` (default `courier`).
    pub client_id: String,
    /// `linger.ms` (default 5 ms, as librdkafka and Kafka 4.0).
    pub linger: Duration,
    /// `batch.size` in bytes (default 1000000, as librdkafka; the Java
    /// client's is 16384). A batch holds `buffer.memory` for what it
    /// has written, not for `batch.size`: it starts with room for a few
    /// records like its first (at most 4 KiB), takes more as it fills, and
    /// once sealed holds its encoded bytes only, so the larger default
    /// costs a lightly used partition nothing. The limit matters where a
    /// partition gets more than a few hundred KiB within `linger.ms`, or
    /// while its batches wait for a request slot because the broker is
    /// the limit; there fewer, larger batches cost the broker less CPU a
    /// record. Keyless records stay on a partition for up to this many
    /// bytes (KIP-794) ([`crate::guide::configuration`]).
    pub batch_size: usize,
    /// `batch.num.messages` (librdkafka's name): records per batch at most
    /// (default 10000, as librdkafka). Each record awaiting its report
    /// holds about 180 bytes besides its bytes in the batch, which
    /// `buffer.memory` does not count; this bounds that per batch when
    /// records are small.
    pub batch_num_messages: usize,
    /// `max.request.size` in bytes (default 1048576).
    pub max_request_size: usize,
    /// `acks` (default all).
    pub acks: Acks,
    /// `compression.type` (default none).
    pub compression: Compression,
    /// `compression.gzip.level` (Java, KIP-390): 1 to 9; `None` (or -1,
    /// Java's default) is the codec's default, 6.
    pub gzip_level: Option<i32>,
    /// `compression.lz4.level` (Java, KIP-390): 1 to 17; `None` is Java's
    /// default 9, which Java and Courier encode with LZ4's fast compressor
    /// (any other level uses liblz4 at that level: 3 and up is its
    /// high-compression mode, which gains nothing past 12).
    pub lz4_level: Option<i32>,
    /// `compression.zstd.level` (Java, KIP-390): -131072 to 22; `None` is
    /// zstd's default, 3.
    pub zstd_level: Option<i32>,
    /// `compression.level` (librdkafka's): the level of the codec
    /// `compression.type` chooses, checked against that codec's range at
    /// build; `None` (or -1) is the codec's default. A codec's own
    /// `compression.<codec>.level` set to another value contradicts it.
    pub compression_level: Option<i32>,
    /// `request.timeout.ms` (default 30 s).
    pub request_timeout: Duration,
    /// `delivery.timeout.ms` (default 120 s): the bound on a record's time
    /// from produce to report.
    pub delivery_timeout: Duration,
    /// `max.in.flight.requests.per.connection` (default 5).
    pub max_in_flight: usize,
    /// `buffer.memory` in bytes (default 32 MiB).
    pub buffer_memory: usize,
    /// `queue.buffering.max.messages` (librdkafka's; default 1000000):
    /// the most records buffered, appended and not yet settled (sent and
    /// answered, or failed), beside `buffer.memory`'s bound on bytes. A
    /// produce call waits for room up to `max.block.ms`; `try_produce`
    /// returns `QueueFull` with the record. Batches take their records'
    /// room in chunks (`batching::reservation`), so the bound can be met
    /// a little early, never passed.
    pub queue_buffering_max_messages: usize,
    /// `max.block.ms` (default 60 s): how long a produce call may wait for
    /// metadata or buffer room.
    pub max_block: Duration,
    /// `retry.backoff.ms` (default 100 ms).
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms` (default 1 s).
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.ms` (default 50 ms).
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms` (default 1 s).
    pub reconnect_backoff_max: Duration,
    /// `metadata.max.age.ms` (default 5 min).
    pub metadata_max_age: Duration,
    /// `metadata.max.idle.ms` (default 5 min, at least 5 s, as Java): a
    /// topic nothing has been produced to for this long, with nothing
    /// queued or in flight, is dropped from the metadata the producer
    /// keeps and asks for; the next record to it waits for its metadata
    /// again.
    pub metadata_max_idle: Duration,
    /// `socket.connection.setup.timeout.ms` (default 10 s): how long the
    /// first attempt to connect to one address may take (TCP, TLS,
    /// ApiVersions and SASL together). Each failed attempt doubles it for
    /// the next, up to `socket.connection.setup.timeout.max.ms`, with
    /// 20 % jitter, as in Java; a connection made resets it.
    pub connection_setup_timeout: Duration,
    /// `metadata.recovery.strategy` (default `rebootstrap`, as the Java
    /// client 4.x and librdkafka): what to do when no broker the producer
    /// knows answers metadata requests.
    pub metadata_recovery: MetadataRecovery,
    /// `enable.metrics.push` (default true, as the Java client and
    /// librdkafka): push the producer's metrics to a broker when the
    /// cluster has a client metrics subscription that asks for them
    /// (KIP-714).
    pub enable_metrics_push: bool,
    /// `metadata.recovery.rebootstrap.trigger.ms` (default 5 min, KIP-1102):
    /// with `rebootstrap`, go back to `bootstrap.servers` after this long
    /// without a metadata answer, even while some known broker still
    /// accepts connections.
    pub rebootstrap_trigger: Duration,
    /// `socket.connection.setup.timeout.max.ms` (default 30 s, as Java):
    /// the most `socket.connection.setup.timeout.ms` grows to. Below the
    /// first timeout, it is the timeout (Java's `ExponentialBackoff` does
    /// the same).
    pub connection_setup_timeout_max: Duration,
    /// `client.dns.lookup` (default `use_all_dns_ips`): how broker host
    /// names become addresses (see [`DnsLookup`]).
    pub client_dns_lookup: DnsLookup,
    /// `enable.idempotence`: `None` means the Java default (on, unless
    /// `acks` or `max.in.flight.requests.per.connection` rule it out).
    pub enable_idempotence: Option<bool>,
    /// `allow.auto.create.topics` (default true): whether Metadata requests
    /// may create a missing topic on brokers that allow it.
    pub allow_auto_create_topics: bool,
    /// `transactional.id`: makes the producer transactional (records are
    /// taken only inside `begin_transaction` … `commit_transaction`);
    /// implies `enable.idempotence`.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (default 60 s, as in the Java client): the
    /// coordinator aborts a transaction open longer than this.
    pub transaction_timeout: Duration,
    /// `retries` (librdkafka: `message.send.max.retries`; default
    /// 2147483647, as both): how many times a batch is sent again after a
    /// retriable failure (an error the broker says is retriable, a lost
    /// connection, a request timeout) before it fails with that error;
    /// `delivery.timeout.ms` bounds it in time either way. The idempotent
    /// producer needs at least 1 (with 0 it is off by default, and
    /// `enable.idempotence=true` is refused).
    pub retries: u32,
    /// `socket.keepalive.enable` (librdkafka's name; default false, as
    /// there): TCP keepalive on broker connections.
    pub socket_keepalive: bool,
    /// `connections.max.idle.ms` (default 540000, 9 minutes, as the Java
    /// client; `None` is 0, librdkafka's "never"): a broker connection on
    /// which nothing was sent or received for this long, with nothing in
    /// flight, is closed, and made again when there is something to send.
    /// Java's default closes it before the broker's own idle limit (10
    /// minutes by default) would, so it is not lost under a request.
    pub connections_max_idle: Option<Duration>,
    /// `partitioner` (librdkafka's property and values; default
    /// `murmur2_random`, the Java client's placement): how the built-in
    /// partitioner places a record with no partition. rust-rdkafka's
    /// default is `consistent_random`; set it to keep keys where a
    /// rust-rdkafka producer put them. A partitioner given to
    /// `ProducerBuilder::partitioner` replaces it.
    pub partitioner: Partitioning,
    /// `partitioner.adaptive.partitioning.enable` (the Java client's;
    /// default true, KIP-794): when the built-in partitioner moves a
    /// topic's keyless records to another partition, it draws the next
    /// with weights from the partitions' queue lengths, so partitions
    /// whose leader is slow get fewer. False: uniformly among the
    /// partitions with a leader.
    pub partitioner_adaptive: bool,
    /// `partitioner.availability.timeout.ms` (the Java client's; default
    /// 0, off): with the adaptive choice, the partitions of a broker that
    /// has had a batch waiting this long without taking one are left out
    /// of the next choices until it takes one.
    pub partitioner_availability_timeout: Option<Duration>,
    /// `partitioner.ignore.keys` (the Java client's; default false): keyed
    /// records are placed as keyless ones are (sticky), not by their key.
    /// Only the built-in partitioner reads it.
    pub partitioner_ignore_keys: bool,
    /// `broker.address.family` (librdkafka's; default any): which of a
    /// broker host name's addresses connections use.
    pub broker_address_family: AddressFamily,
    /// `security.protocol`, `ssl.*` and `sasl.*`.
    pub security: SecurityConfig,
    /// Properties other Kafka clients know that mean nothing to Courier's
    /// producer: accepted, and named in one warning when it starts.
    ignored: Vec<String>,
    /// Whether the delivery timeout was last set by librdkafka's name,
    /// `message.timeout.ms`: then librdkafka's rule holds (a request is
    /// bounded by what is left of its records' time), not Java's
    /// (`delivery.timeout.ms` at least `linger.ms` + `request.timeout.ms`).
    librdkafka_timeout: bool,
}

/// `metadata.recovery.strategy`: what the producer does when no broker it
/// knows answers metadata requests (KIP-899).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MetadataRecovery {
    /// `rebootstrap` (the default): connect to `bootstrap.servers` again,
    /// resolving their names afresh, and take the brokers their answer
    /// names (a cluster replaced behind the same names is found).
    #[default]
    Rebootstrap,
    /// `none`: keep asking the brokers last known.
    None,
}

/// `client.dns.lookup`: how a broker's host name becomes the addresses a
/// connection tries. Either way the name is looked up again on every
/// connect attempt, and every address of the answer (of
/// `broker.address.family`) is tried in turn before the attempt fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DnsLookup {
    /// `use_all_dns_ips` (the default, as in Java): the name's addresses.
    #[default]
    UseAllDnsIps,
    /// `resolve_canonical_bootstrap_servers_only`: a bootstrap server's
    /// name is first replaced by the canonical name (reverse lookup) of
    /// each of its addresses, and those names are resolved and connected
    /// to (and checked by TLS); brokers named by metadata are resolved as
    /// under `use_all_dns_ips`.
    ResolveCanonicalBootstrapServersOnly,
}

/// `broker.address.family`: which addresses of a broker's host name to
/// connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AddressFamily {
    /// `any` (the default): every address, in the resolver's order.
    #[default]
    Any,
    /// `v4`: IPv4 addresses only.
    V4,
    /// `v6`: IPv6 addresses only.
    V6,
}

impl AddressFamily {
    /// Whether connections may use `addr`.
    pub fn admits(self, addr: &std::net::SocketAddr) -> bool {
        match self {
            AddressFamily::Any => true,
            AddressFamily::V4 => addr.is_ipv4(),
            AddressFamily::V6 => addr.is_ipv6(),
        }
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            bootstrap_servers: Vec::new(),
            client_id: "courier".into(),
            linger: Duration::from_millis(5),
            batch_size: 1_000_000,
            batch_num_messages: 10_000,
            max_request_size: 1_048_576,
            acks: Acks::All,
            compression: Compression::None,
            gzip_level: None,
            lz4_level: None,
            zstd_level: None,
            compression_level: None,
            request_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            max_in_flight: 5,
            buffer_memory: 32 * 1024 * 1024,
            queue_buffering_max_messages: 1_000_000,
            max_block: Duration::from_secs(60),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            metadata_max_age: Duration::from_secs(300),
            metadata_max_idle: Duration::from_secs(300),
            connection_setup_timeout: Duration::from_secs(10),
            metadata_recovery: MetadataRecovery::Rebootstrap,
            rebootstrap_trigger: Duration::from_secs(300),
            connection_setup_timeout_max: Duration::from_secs(30),
            client_dns_lookup: DnsLookup::UseAllDnsIps,
            enable_metrics_push: true,
            enable_idempotence: None,
            allow_auto_create_topics: true,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            retries: i32::MAX as u32,
            socket_keepalive: false,
            connections_max_idle: Some(Duration::from_secs(540)),
            partitioner: Partitioning::default(),
            partitioner_adaptive: true,
            partitioner_availability_timeout: None,
            partitioner_ignore_keys: false,
            broker_address_family: AddressFamily::Any,
            security: SecurityConfig::default(),
            ignored: Vec::new(),
            librdkafka_timeout: false,
        }
    }
}

/// A property's setter: parses the value and sets the field.
type Setter = fn(&mut ProducerConfig, Value<'_>) -> Result<(), String>;

/// The property table, one source for [`ProducerConfig::set`],
/// [`PROPERTIES`] and the "did you mean" of an unknown name: each entry
/// is the names a property answers to and what it sets.
macro_rules! properties {
    ($( [$($name:literal),+] => |$c:ident, $v:ident| $set:expr; )*) => {
        const TABLE: &[(&[&str], Setter)] = &[
            $( (&[$($name),+], |$c, $v| { $set; Ok(()) }), )*
        ];

        /// Every property name [`ProducerConfig::set`] accepts.
        pub const PROPERTIES: &[&str] = &[$($($name),+),*];
    };
}

properties! {
    ["bootstrap.servers"] => |c, v| c.bootstrap_servers = v.servers()?;
    ["client.id"] => |c, v| c.client_id = v.text();
    ["linger.ms"] => |c, v| c.linger = v.ms(0)?;
    ["batch.size"] => |c, v| c.batch_size = v.int(1, i32::MAX as u64)? as usize;
    ["batch.num.messages"] => |c, v| c.batch_num_messages = v.int(1, 1_000_000)? as usize;
    ["max.request.size"] => |c, v| c.max_request_size = v.int(1024, i32::MAX as u64)? as usize;
    ["acks"] => |c, v| c.acks = v.one_of(
        &[("0", Acks::None), ("1", Acks::Leader), ("all", Acks::All), ("-1", Acks::All)],
        "expected 0, 1, all or -1",
    )?;
    ["compression.type"] => |c, v| c.compression = v.0.parse().map_err(
        |e: crate::protocol::record_batch::UnknownCompression| e.to_string(),
    )?;
    ["compression.gzip.level"] => |c, v| c.gzip_level = v.level(Compression::Gzip)?;
    ["compression.lz4.level"] => |c, v| c.lz4_level = v.level(Compression::Lz4)?;
    ["compression.zstd.level"] => |c, v| c.zstd_level = v.level(Compression::Zstd)?;
    // Checked against the codec's range at build, when compression.type
    // is known.
    ["compression.level"] => |c, v| c.compression_level = {
        let n: i32 = v.0.parse().map_err(|_| "expected an integer".to_string())?;
        (n != -1).then_some(n)
    };
    ["request.timeout.ms"] => |c, v| c.request_timeout = v.ms(1)?;
    ["delivery.timeout.ms"] => |c, v| c.delivery_timeout = v.ms(1)?;
    ["max.in.flight.requests.per.connection"] => |c, v| c.max_in_flight = v.int(1, 1_000)? as usize;
    ["buffer.memory"] => |c, v| c.buffer_memory = v.int(1024, (u32::MAX >> 1) as u64)? as usize;
    ["queue.buffering.max.messages"] => |c, v| {
        c.queue_buffering_max_messages = v.int(1, i32::MAX as u64)? as usize
    };
    ["max.block.ms"] => |c, v| c.max_block = v.ms(0)?;
    ["retry.backoff.ms"] => |c, v| c.retry_backoff = v.ms(0)?;
    ["retry.backoff.max.ms"] => |c, v| c.retry_backoff_max = v.ms(0)?;
    ["reconnect.backoff.ms"] => |c, v| c.reconnect_backoff = v.ms(0)?;
    ["reconnect.backoff.max.ms"] => |c, v| c.reconnect_backoff_max = v.ms(0)?;
    ["metadata.max.age.ms"] => |c, v| c.metadata_max_age = v.ms(1)?;
    ["metadata.max.idle.ms"] => |c, v| c.metadata_max_idle = v.ms(5_000)?;
    ["socket.connection.setup.timeout.ms"] => |c, v| c.connection_setup_timeout = v.ms(1)?;
    ["metadata.recovery.strategy"] => |c, v| c.metadata_recovery = v.one_of(
        &[("rebootstrap", MetadataRecovery::Rebootstrap), ("none", MetadataRecovery::None)],
        "expected rebootstrap or none",
    )?;
    ["metadata.recovery.rebootstrap.trigger.ms"] => |c, v| c.rebootstrap_trigger = v.ms(0)?;
    ["socket.connection.setup.timeout.max.ms"] => |c, v| c.connection_setup_timeout_max = v.ms(1)?;
    ["client.dns.lookup"] => |c, v| c.client_dns_lookup = v.one_of(
        &[
            ("use_all_dns_ips", DnsLookup::UseAllDnsIps),
            ("resolve_canonical_bootstrap_servers_only", DnsLookup::ResolveCanonicalBootstrapServersOnly),
        ],
        "expected use_all_dns_ips or resolve_canonical_bootstrap_servers_only",
    )?;
    ["enable.metrics.push"] => |c, v| c.enable_metrics_push = v.boolean()?;
    ["enable.idempotence"] => |c, v| c.enable_idempotence = Some(v.boolean()?);
    ["allow.auto.create.topics"] => |c, v| c.allow_auto_create_topics = v.boolean()?;
    ["transactional.id"] => |c, v| c.transactional_id = (!v.0.is_empty()).then(|| v.text());
    ["transaction.timeout.ms"] => |c, v| c.transaction_timeout = v.ms(1)?;
    ["retries"] => |c, v| c.retries = v.int(0, i32::MAX as u64)? as u32;
    ["socket.keepalive.enable"] => |c, v| c.socket_keepalive = v.boolean()?;
    ["connections.max.idle.ms"] => |c, v| c.connections_max_idle = {
        let idle = v.ms(0)?;
        (!idle.is_zero()).then_some(idle)
    };
    ["partitioner"] => |c, v| c.partitioner = v.0.parse()?;
    ["partitioner.adaptive.partitioning.enable"] => |c, v| c.partitioner_adaptive = v.boolean()?;
    ["partitioner.availability.timeout.ms"] => |c, v| c.partitioner_availability_timeout = {
        let t = v.ms(0)?;
        (!t.is_zero()).then_some(t)
    };
    ["partitioner.ignore.keys"] => |c, v| c.partitioner_ignore_keys = v.boolean()?;
    ["broker.address.family"] => |c, v| c.broker_address_family = v.one_of(
        &[("any", AddressFamily::Any), ("v4", AddressFamily::V4), ("v6", AddressFamily::V6)],
        "expected any, v4 or v6",
    )?;
    ["topic.metadata.refresh.interval.ms"] => |c, v| c.metadata_max_age = match v.0 {
        // librdkafka's "no periodic refresh": refreshes still happen when
        // a leader moves or a topic is new.
        "-1" => Duration::from_millis(i32::MAX as u64),
        _ => v.ms(1)?,
    };
    ["api.version.request"] => |_c, v| if !v.boolean()? {
        return Err("Courier always asks brokers for their API versions (brokers older than Kafka 0.10 are not supported)".into());
    };
    ["enable.ssl.certificate.verification"] => |_c, v| if !v.boolean()? {
        return Err("turning off the broker certificate check is not supported; trust the broker's CA with ssl.ca.location, or set ssl.endpoint.identification.algorithm=none to skip the host name check only".into());
    };
    ["security.protocol"] => |c, v| c.security.protocol = v.one_of(
        &[
            ("PLAINTEXT", SecurityProtocol::Plaintext),
            ("SSL", SecurityProtocol::Ssl),
            ("SASL_PLAINTEXT", SecurityProtocol::SaslPlaintext),
            ("SASL_SSL", SecurityProtocol::SaslSsl),
        ],
        "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )?;
    ["ssl.ca.location"] => |c, v| c.security.ca_location = Some(PathBuf::from(v.0));
    ["ssl.ca.pem"] => |c, v| c.security.ca_pem = Some(v.text());
    ["ssl.certificate.location"] => |c, v| c.security.certificate_location = Some(PathBuf::from(v.0));
    ["ssl.certificate.pem"] => |c, v| c.security.certificate_pem = Some(v.text());
    ["ssl.key.location"] => |c, v| c.security.key_location = Some(PathBuf::from(v.0));
    ["ssl.key.pem"] => |c, v| c.security.key_pem = Some(Secret(v.text()));
    ["ssl.endpoint.identification.algorithm"] => |c, v| c.security.verify_hostname = v.one_of(
        &[("https", true), ("none", false), ("", false)],
        "expected https or none",
    )?;
    ["sasl.mechanism", "sasl.mechanisms"] => |c, v| c.security.sasl_mechanism = Some(
        Mechanism::parse(v.0).ok_or_else(|| {
            "expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI is not supported)"
                .to_string()
        })?,
    );
    ["sasl.username"] => |c, v| c.security.sasl_username = Some(v.text());
    ["sasl.password"] => |c, v| c.security.sasl_password = Some(Secret(v.text()));
    ["enable.sasl.oauthbearer.unsecure.jwt"] => |c, v| c.security.oauthbearer_unsecure_jwt = v.boolean()?;
    ["sasl.oauthbearer.config"] => |c, v| c.security.oauthbearer_config = Some(v.text());
    // OIDC (config/oauthbearer.rs).
    ["sasl.oauthbearer.method"] => |c, v| c.security.oidc.method = v.one_of(
        &[("default", OAuthBearerMethod::Default), ("oidc", OAuthBearerMethod::Oidc)],
        "expected default or oidc",
    )?;
    ["sasl.oauthbearer.token.endpoint.url"] => |c, v| c.security.oidc.token_endpoint_url = (!v.0.is_empty()).then(|| v.text());
    ["sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.id"] => |c, v| c.security.oidc.client_id = Some(v.text());
    ["sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.secret"] => |c, v| c.security.oidc.client_secret = Some(Secret(v.text()));
    ["sasl.oauthbearer.scope"] => |c, v| c.security.oidc.scope = (!v.0.is_empty()).then(|| v.text());
    ["sasl.oauthbearer.header.urlencode"] => |c, v| c.security.oidc.header_urlencode = v.boolean()?;
    ["sasl.login.refresh.buffer.seconds"] => |c, v| c.security.oidc.refresh_buffer = Duration::from_secs(v.int(0, 3600)?);
    ["sasl.login.retry.backoff.ms"] => |c, v| c.security.oidc.retry_backoff = v.ms(0)?;
    ["sasl.login.retry.backoff.max.ms"] => |c, v| c.security.oidc.retry_backoff_max = v.ms(0)?;
    ["sasl.login.connect.timeout.ms"] => |c, v| c.security.oidc.connect_timeout = v.ms(1)?;
    ["sasl.login.read.timeout.ms"] => |c, v| c.security.oidc.read_timeout = v.ms(1)?;
    ["https.ca.location"] => |c, v| c.security.oidc.https_ca_location = Some(PathBuf::from(v.0));
    ["https.ca.pem"] => |c, v| c.security.oidc.https_ca_pem = Some(v.text());
    ["sasl.jaas.config"] => |c, v| c.set_jaas(v.0)?;
    // Java's OIDC login handler (KIP-768), which the token endpoint's URL
    // already selects here; any other class cannot load.
    ["sasl.login.callback.handler.class"] => |_c, v| if !v.0.is_empty() && !OIDC_LOGIN_HANDLERS.contains(&v.0) {
        return Err("Java classes cannot load into Courier: AWS MSK IAM and Kerberos are not supported; an OAUTHBEARER token comes from sasl.oauthbearer.token.endpoint.url (OIDC) or a courier_kafka::security::TokenProvider".into());
    };
    ["ssl.truststore.location"] => |c, v| {
        c.security.ca_location = Some(PathBuf::from(v.0));
        c.security.java_stores.truststore = true;
    };
    ["ssl.truststore.type"] => |c, v| c.security.java_stores.truststore_type = Some(v.text());
    ["ssl.truststore.certificates"] => |c, v| c.security.ca_pem = Some(v.text());
    ["ssl.keystore.location"] => |c, v| {
        c.security.certificate_location = Some(PathBuf::from(v.0));
        c.security.key_location = Some(PathBuf::from(v.0));
        c.security.java_stores.keystore = true;
    };
    ["ssl.keystore.type"] => |c, v| c.security.java_stores.keystore_type = Some(v.text());
    ["ssl.keystore.certificate.chain"] => |c, v| c.security.certificate_pem = Some(v.text());
    ["ssl.keystore.key"] => |c, v| c.security.key_pem = Some(Secret(v.text()));
}

/// The properties in `text`, a Java properties file's contents, in the
/// order given (a name given twice appears twice; set in turn, the later
/// wins), as the Java client reads a `client.properties`: `#` and `!`
/// comments, `=`, `:` or a space between name and value, `\` at the end of
/// a line to continue it, and Java's escapes.
///
/// ```
/// let props = courier_kafka::config::read_properties(
///     "# Confluent Cloud\nbootstrap.servers=pkc-1.example.com:9092\n\
///      sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n  \
///      required username='KEY' password='SECRET';\n",
/// )
/// .unwrap();
/// assert_eq!(props[0], ("bootstrap.servers".into(), "pkc-1.example.com:9092".into()));
/// assert!(props[1].1.ends_with("required username='KEY' password='SECRET';"));
/// ```
pub fn read_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    file::read(text).map_err(ConfigError::Unreadable)
}

/// The properties in the file at `path` ([`read_properties`]); an
/// unreadable file is an error naming it.
pub fn read_properties_file(
    path: impl AsRef<std::path::Path>,
) -> Result<Vec<(String, String)>, ConfigError> {
    file::read_file(path.as_ref()).map_err(ConfigError::Unreadable)
}

impl SecurityConfig {
    /// SASL's mechanism and credentials, each TLS file given once, a
    /// certificate with its key, the Java stores' types and the JAAS login
    /// module's mechanism.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        self.problem().map_err(ConfigError::Inconsistent)
    }
}

/// The Java client's OIDC login callback handler, by its Kafka 3.x and
/// 4.x class names.
const OIDC_LOGIN_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

/// librdkafka's names that mean the same as a Java name Courier takes
/// (`(alias, name)`); `queue.buffering.max.kbytes` is `buffer.memory` in
/// KiB. So a rust-rdkafka config map carries over. (librdkafka's own
/// settings with no Java twin, such as `queue.buffering.max.messages` and
/// `compression.level`, are in [`PROPERTIES`].)
pub const ALIASES: &[(&str, &str)] = &[
    ("message.timeout.ms", "delivery.timeout.ms"),
    ("queue.buffering.max.ms", "linger.ms"),
    ("queue.buffering.max.kbytes", "buffer.memory"),
    ("request.required.acks", "acks"),
    ("compression.codec", "compression.type"),
    ("message.max.bytes", "max.request.size"),
    ("message.send.max.retries", "retries"),
    ("max.in.flight", "max.in.flight.requests.per.connection"),
    ("metadata.broker.list", "bootstrap.servers"),
    ("socket.timeout.ms", "request.timeout.ms"),
];

/// ", did you mean \"…\"?" for a name close to a known one (or an alias).
fn did_you_mean(name: &str) -> String {
    let known = PROPERTIES
        .iter()
        .chain(ALIASES.iter().map(|(a, _)| a))
        .chain(elsewhere::JAVA_CLIENT)
        .chain(elsewhere::LIBRDKAFKA);
    let best = known
        .map(|k| (strsim::jaro_winkler(name, k), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((score, k)) if score > 0.85 => format!(", did you mean {k:?}?"),
        _ => String::new(),
    }
}

impl ProducerConfig {
    /// Sets one property by its Java/librdkafka name.
    ///
    /// ```
    /// use courier_kafka::config::{ConfigError, ProducerConfig};
    /// let mut c = ProducerConfig::default();
    /// c.set("linger.ms", "20").unwrap();
    /// assert_eq!(c.linger.as_millis(), 20);
    /// let err = c.set("acks", "2").unwrap_err();
    /// assert!(err.to_string().contains("acks"));
    /// assert!(matches!(c.set("lingr.ms", "1"), Err(ConfigError::UnknownProperty(_))));
    /// ```
    pub fn set(&mut self, property: &str, value: &str) -> Result<(), ConfigError> {
        let v = Value(value.trim());
        let invalid = |reason| ConfigError::InvalidValue {
            property: property.to_string(),
            value: value.to_string(),
            reason,
        };
        let named = if property == "queue.buffering.max.kbytes" {
            // librdkafka's buffer.memory, in KiB.
            v.int(1, (u32::MAX >> 1) as u64 / 1024).map(|kib| {
                self.buffer_memory = (kib * 1024) as usize;
            })
        } else {
            let name = ALIASES
                .iter()
                .find(|(alias, _)| *alias == property)
                .map_or(property, |(_, name)| name);
            let Some((_, set)) = TABLE.iter().find(|(names, _)| names.contains(&name)) else {
                return self.set_elsewhere(property, value);
            };
            set(self, v)
        };
        named.map_err(invalid)?;
        match property {
            "message.timeout.ms" => self.librdkafka_timeout = true,
            "delivery.timeout.ms" => self.librdkafka_timeout = false,
            _ => {}
        }
        Ok(())
    }

    /// A property Courier does not set: refused with the reason when
    /// losing it would change what the producer does, accepted (and named
    /// in the warning [`ignored_properties`](Self::ignored_properties)
    /// feeds) when another Kafka client knows it, else unknown.
    fn set_elsewhere(&mut self, property: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(reason) = elsewhere::refusal(property, value) {
            return Err(ConfigError::InvalidValue {
                property: property.to_string(),
                value: value.to_string(),
                reason,
            });
        }
        if !elsewhere::known_elsewhere(property) {
            return Err(ConfigError::UnknownProperty(property.to_string()));
        }
        if !self.ignored.iter().any(|p| p == property) {
            self.ignored.push(property.to_string());
        }
        Ok(())
    }

    /// The properties set that other Kafka clients know and Courier's
    /// producer does not use (consumer settings, serializer classes,
    /// librdkafka's `debug`, …), in the order first set. The producer
    /// names them in one warning when it starts.
    ///
    /// ```
    /// use courier_kafka::config::ProducerConfig;
    /// let mut c = ProducerConfig::default();
    /// c.set("key.serializer", "org.apache.kafka.common.serialization.StringSerializer").unwrap();
    /// c.set("session.timeout.ms", "45000").unwrap();
    /// assert_eq!(c.ignored_properties(), ["key.serializer", "session.timeout.ms"]);
    /// assert!(c.set("sesion.timeout.ms", "45000").is_err()); // no client knows it
    /// ```
    pub fn ignored_properties(&self) -> &[String] {
        &self.ignored
    }

    /// Logs the one warning naming [`ignored_properties`](Self::ignored_properties),
    /// if there are any.
    pub(crate) fn warn_ignored(&self) {
        if self.ignored.is_empty() {
            return;
        }
        let hints: Vec<&str> = self
            .ignored
            .iter()
            .filter_map(|p| elsewhere::hint(p))
            .collect();
        tracing::warn!(
            "these properties were supplied but mean nothing to Courier's producer, and are ignored: {}{}{}",
            self.ignored.join(", "),
            if hints.is_empty() { "" } else { ". " },
            hints.join("; ")
        );
    }

    /// `sasl.jaas.config`: the login module's user name and password
    /// (PLAIN, SCRAM), or its unsecured-JWT principal (OAUTHBEARER).
    fn set_jaas(&mut self, text: &str) -> Result<(), String> {
        let j = jaas::parse(text)?;
        let sec = &mut self.security;
        match j.module.as_str() {
            jaas::PLAIN | jaas::SCRAM => {
                let (Some(user), Some(password)) = (j.option("username"), j.option("password"))
                else {
                    return Err(format!("{} needs username and password options", j.module));
                };
                sec.sasl_username = Some(user.to_string());
                sec.sasl_password = Some(Secret(password.to_string()));
                if j.module == jaas::PLAIN && sec.sasl_mechanism.is_none() {
                    sec.sasl_mechanism = Some(Mechanism::Plain);
                }
            }
            jaas::OAUTHBEARER => {
                if let Some(sub) = j.option("unsecuredLoginStringClaim_sub") {
                    sec.oauthbearer_unsecure_jwt = true;
                    let life = j
                        .option("unsecuredLoginLifetimeSeconds")
                        .map(|l| format!(" lifeSeconds={l}"))
                        .unwrap_or_default();
                    sec.oauthbearer_config = Some(format!("principal={sub}{life}"));
                }
                // KIP-768's options, beside sasl.oauthbearer.token.endpoint.url.
                if let Some(id) = j.option("clientId") {
                    sec.oidc.client_id = Some(id.to_string());
                }
                if let Some(secret) = j.option("clientSecret") {
                    sec.oidc.client_secret = Some(Secret(secret.to_string()));
                }
                if let Some(scope) = j.option("scope") {
                    sec.oidc.scope = Some(scope.to_string());
                }
                if sec.sasl_mechanism.is_none() {
                    sec.sasl_mechanism = Some(Mechanism::OAuthBearer);
                }
            }
            other => {
                return Err(format!(
                    "login module {other} is not supported (Courier speaks {}, {} and {})",
                    jaas::PLAIN,
                    jaas::SCRAM,
                    jaas::OAUTHBEARER
                ))
            }
        }
        sec.jaas_module = Some(j.module);
        Ok(())
    }

    /// Whether the delivery timeout came through librdkafka's name
    /// (`message.timeout.ms`), so that librdkafka's rule bounds requests.
    pub(crate) fn librdkafka_timeout(&self) -> bool {
        self.librdkafka_timeout
    }

    /// Whether the producer runs idempotent: as set, or by default when
    /// `acks=all` and at most 5 requests in flight (the Java rule).
    pub fn idempotent(&self) -> bool {
        self.transactional_id.is_some()
            || self
                .enable_idempotence
                .unwrap_or(self.acks == Acks::All && self.max_in_flight <= 5 && self.retries > 0)
    }

    /// The codec `compression.type` chooses, at its level: the codec's own
    /// `compression.<codec>.level`, else `compression.level`, else its
    /// default (`None`). lz4 at 9, Java's default, is LZ4's fast
    /// compressor, as in the Java client.
    pub(crate) fn codec(&self) -> Codec {
        let own = match self.compression {
            Compression::Gzip => self.gzip_level,
            Compression::Lz4 => self.lz4_level,
            Compression::Zstd => self.zstd_level,
            Compression::None | Compression::Snappy => None,
        };
        let level = own.or(self.compression.levels().and(self.compression_level));
        Codec {
            compression: self.compression,
            level,
        }
    }

    /// `compression.level` against the range of the codec
    /// `compression.type` chooses, and against that codec's own level.
    fn check_compression_level(&self) -> Result<(), ConfigError> {
        let Some(n) = self.compression_level else {
            return Ok(());
        };
        let codec = self.compression;
        let bad = |reason: String| ConfigError::InvalidValue {
            property: "compression.level".into(),
            value: n.to_string(),
            reason,
        };
        let Some(range) = codec.levels() else {
            // librdkafka's "only 0 for snappy": accepted, and meaningless.
            if n == 0 {
                return Ok(());
            }
            return Err(bad(format!(
                "compression.type {codec} has no levels (only -1 or 0)"
            )));
        };
        if !range.contains(&n) {
            return Err(bad(format!(
                "must be between {} and {} for compression.type {codec}, or -1 (the codec's default)",
                range.start(),
                range.end()
            )));
        }
        let own = match codec {
            Compression::Gzip => self.gzip_level,
            Compression::Lz4 => self.lz4_level,
            _ => self.zstd_level,
        };
        if let Some(own) = own.filter(|own| *own != n) {
            return Err(ConfigError::Inconsistent(format!(
                "compression.level ({n}) contradicts compression.{codec}.level ({own}); set one"
            )));
        }
        Ok(())
    }

    /// Checks the rules that involve more than one property.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_compression_level()?;
        if self.transactional_id.is_some() {
            if self.enable_idempotence == Some(false) {
                return Err(ConfigError::Inconsistent(
                    "transactional.id requires enable.idempotence (leave it unset or true)".into(),
                ));
            }
            self.check_idempotent_settings("transactional.id")?;
        }
        if self.enable_idempotence == Some(true) {
            self.check_idempotent_settings("enable.idempotence=true")?;
        }
        if self.bootstrap_servers.is_empty() {
            return Err(ConfigError::InvalidValue {
                property: "bootstrap.servers".into(),
                value: String::new(),
                reason: "at least one broker address is required".into(),
            });
        }
        self.check_times()?;
        // A batch starts with min(batch.size, INITIAL_RESERVATION) of it.
        if self.buffer_memory < self.batch_size.min(INITIAL_RESERVATION) {
            return Err(ConfigError::Inconsistent(format!(
                "buffer.memory ({}) must be at least batch.size ({}) or {INITIAL_RESERVATION}, whichever is smaller",
                self.buffer_memory, self.batch_size
            )));
        }
        self.security.check()
    }

    /// What an idempotent producer needs (as the Java client checks it),
    /// for the error naming `what` asked for one.
    fn check_idempotent_settings(&self, what: &str) -> Result<(), ConfigError> {
        let needs = |rule: &str| Err(ConfigError::Inconsistent(format!("{what} requires {rule}")));
        if self.acks != Acks::All {
            return needs("acks=all");
        }
        if self.max_in_flight > 5 {
            return needs("max.in.flight.requests.per.connection <= 5");
        }
        if self.retries == 0 {
            return needs("retries > 0");
        }
        Ok(())
    }

    /// The time settings against each other: a record's delivery timeout
    /// covers its linger and one request, and each backoff's cap is at
    /// least its start.
    fn check_times(&self) -> Result<(), ConfigError> {
        // Java's rule, for Java's name; librdkafka's message.timeout.ms
        // has none (each request is bounded by its records' time left).
        if !self.librdkafka_timeout && self.delivery_timeout < self.linger + self.request_timeout {
            return Err(ConfigError::Inconsistent(format!(
                "delivery.timeout.ms ({} ms) must be at least linger.ms + request.timeout.ms ({} ms), \
                 as the Java client requires; librdkafka's message.timeout.ms has no such rule \
                 (a request is cut short when its records' time runs out): set that name to \
                 have librdkafka's",
                self.delivery_timeout.as_millis(),
                (self.linger + self.request_timeout).as_millis()
            )));
        }
        if self.retry_backoff_max < self.retry_backoff {
            return Err(ConfigError::Inconsistent(
                "retry.backoff.max.ms must be at least retry.backoff.ms".into(),
            ));
        }
        if self.reconnect_backoff_max < self.reconnect_backoff {
            return Err(ConfigError::Inconsistent(
                "reconnect.backoff.max.ms must be at least reconnect.backoff.ms".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
