//! Unit tests of `config.rs`.

use super::*;

#[test]
fn librdkafka_names_and_spellings_mean_the_same() {
    let mut c = ProducerConfig::default();
    for (k, v) in [
        ("message.timeout.ms", "90000"),
        ("queue.buffering.max.ms", "7"),
        ("queue.buffering.max.kbytes", "2048"),
        ("request.required.acks", "ALL"),
        ("compression.codec", "lz4"),
        ("message.max.bytes", "2000000"),
        ("message.send.max.retries", "3"),
        ("enable.idempotence", "1"),
        ("allow.auto.create.topics", "no"),
    ] {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    assert_eq!(c.delivery_timeout, Duration::from_secs(90));
    assert_eq!(c.linger, Duration::from_millis(7));
    assert_eq!(c.buffer_memory, 2048 * 1024);
    assert_eq!(c.acks, Acks::All);
    assert_eq!(c.compression, Compression::Lz4);
    assert_eq!(c.max_request_size, 2_000_000);
    assert_eq!(c.retries, 3);
    assert_eq!(c.enable_idempotence, Some(true));
    assert!(!c.allow_auto_create_topics);
}

/// As the Java client: `retries=0` turns the default idempotence off,
/// and contradicts an explicit `enable.idempotence=true` or a
/// `transactional.id`.
#[test]
fn retries_zero_rules_out_idempotence() {
    let mut c = ProducerConfig::default();
    c.set("bootstrap.servers", "localhost:9092").unwrap();
    assert!(c.idempotent());
    c.set("retries", "0").unwrap();
    assert!(!c.idempotent(), "off by default with retries=0");
    c.validate().unwrap();
    c.set("enable.idempotence", "true").unwrap();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("retries > 0"));
    let mut t = ProducerConfig::default();
    t.set("bootstrap.servers", "localhost:9092").unwrap();
    t.set("transactional.id", "x").unwrap();
    t.set("retries", "0").unwrap();
    assert!(t
        .validate()
        .unwrap_err()
        .to_string()
        .contains("retries > 0"));
}

/// KIP-390's per-codec levels, by their Java names: each codec's range
/// (gzip and lz4 also take -1, the default); a level out of range is
/// refused naming the property and the range.
#[test]
fn compression_levels_take_each_codecs_range() {
    let mut c = ProducerConfig::default();
    for (name, ok, bad) in [
        ("compression.gzip.level", [1, 9], [0, 10]),
        ("compression.lz4.level", [1, 17], [0, 18]),
        ("compression.zstd.level", [-131072, 22], [-131073, 23]),
    ] {
        for v in ok {
            c.set(name, &v.to_string())
                .unwrap_or_else(|e| panic!("{name}={v}: {e}"));
        }
        for v in bad {
            let e = c.set(name, &v.to_string()).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            let range = format!("between {} and {}", ok[0], ok[1]);
            assert!(e.contains(&range), "{e}");
        }
    }
    assert_eq!(
        (c.gzip_level, c.lz4_level, c.zstd_level),
        (Some(9), Some(17), Some(22))
    );
    c.set("compression.gzip.level", "-1").unwrap();
    assert_eq!(c.gzip_level, None, "-1 is the default");
    c.set("compression.zstd.level", "-1").unwrap();
    assert_eq!(c.zstd_level, Some(-1), "a fast zstd level, not the default");
    assert!(c.set("compression.zstd.level", "high").is_err());
}

/// The codec the producer compresses with: compression.type at its own
/// level, else librdkafka's compression.level, else the default; a
/// compression.level out of the chosen codec's range is refused at
/// build, naming it and the range.
#[test]
fn compression_level_applies_to_the_chosen_codec() {
    let base = || {
        let mut c = ProducerConfig::default();
        c.set("bootstrap.servers", "localhost:9092").unwrap();
        c
    };
    let mut c = base();
    assert_eq!(c.codec(), Codec::from(Compression::None));
    c.set("compression.type", "zstd").unwrap();
    c.set("compression.gzip.level", "2").unwrap();
    assert_eq!(
        c.codec(),
        Compression::Zstd.into(),
        "gzip's level is not zstd's"
    );
    c.set("compression.zstd.level", "7").unwrap();
    assert_eq!(c.codec(), Compression::Zstd.at_level(7));

    let mut c = base();
    c.set("compression.level", "9").unwrap();
    c.set("compression.codec", "gzip").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Gzip.at_level(9));
    c.set("compression.level", "-1").unwrap();
    assert_eq!(c.codec(), Compression::Gzip.into());

    let mut c = base();
    c.set("compression.type", "gzip").unwrap();
    c.set("compression.level", "12").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("compression.level") && e.contains("between 1 and 9"),
        "{e}"
    );
    c.set("compression.type", "lz4").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Lz4.at_level(12));
    c.set("compression.lz4.level", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("contradicts compression.lz4.level"), "{e}");
    c.set("compression.lz4.level", "12").unwrap();
    c.validate().unwrap();

    let mut c = base();
    c.set("compression.type", "snappy").unwrap();
    c.set("compression.level", "0").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Snappy.into());
    c.set("compression.level", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("snappy has no levels"), "{e}");
    let e = c.set("compression.level", "x").unwrap_err().to_string();
    assert!(e.contains("compression.level"), "{e}");
}

#[test]
fn record_bound_and_idle_connections() {
    let mut c = ProducerConfig::default();
    assert_eq!(c.queue_buffering_max_messages, 1_000_000);
    assert_eq!(c.connections_max_idle, Some(Duration::from_secs(540)));
    c.set("queue.buffering.max.messages", "100000").unwrap();
    assert_eq!(c.queue_buffering_max_messages, 100_000);
    let e = c
        .set("queue.buffering.max.messages", "0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("queue.buffering.max.messages"), "{e}");
    c.set("connections.max.idle.ms", "300").unwrap();
    assert_eq!(c.connections_max_idle, Some(Duration::from_millis(300)));
    c.set("connections.max.idle.ms", "0").unwrap();
    assert_eq!(c.connections_max_idle, None, "0: never, as librdkafka");
    assert!(c.set("connections.max.idle.ms", "-1").is_err());
}

/// `metadata.max.idle.ms`: Java's default (5 minutes) and lower bound
/// (5 s).
#[test]
fn metadata_idle_bound() {
    let mut c = ProducerConfig::default();
    assert_eq!(c.metadata_max_idle, Duration::from_secs(300));
    c.set("metadata.max.idle.ms", "5000").unwrap();
    assert_eq!(c.metadata_max_idle, Duration::from_secs(5));
    let e = c
        .set("metadata.max.idle.ms", "4999")
        .unwrap_err()
        .to_string();
    assert!(e.contains("metadata.max.idle.ms"), "{e}");
}

#[test]
fn an_unknown_name_suggests_the_closest_known_one() {
    let mut c = ProducerConfig::default();
    let e = c.set("lingr.ms", "5").unwrap_err().to_string();
    assert!(e.contains("did you mean \"linger.ms\""), "{e}");
    let e = c
        .set("queue.buffering.max.msec", "5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean \"queue.buffering.max.ms\""), "{e}");
    let e = c.set("completely.different", "5").unwrap_err().to_string();
    assert!(!e.contains("did you mean"), "{e}");
}

/// `sasl.jaas.config` as providers write it: PLAIN and SCRAM give the
/// user name and password (PLAIN also the mechanism, when not set), the
/// OAUTHBEARER module's unsecured options give the unsecured JWT; a module
/// that does not serve `sasl.mechanism`, or one Courier does not speak, is
/// an error naming it.
#[test]
fn jaas_config_sets_the_sasl_credentials() {
    let mut c = ProducerConfig::default();
    c.set("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY' password='SECRET';").unwrap();
    assert_eq!(c.security.sasl_mechanism, Some(Mechanism::Plain));
    assert_eq!(c.security.sasl_username.as_deref(), Some("KEY"));
    assert_eq!(
        c.security.sasl_password.as_ref().map(Secret::expose),
        Some("SECRET")
    );

    let mut c = ProducerConfig::default();
    c.set("bootstrap.servers", "h:9092").unwrap();
    c.set("security.protocol", "SASL_SSL").unwrap();
    c.set("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("sasl.mechanism"),
        "SCRAM needs its variant named: {e}"
    );
    c.set("sasl.mechanism", "SCRAM-SHA-512").unwrap();
    c.validate().unwrap();
    c.set("sasl.mechanism", "PLAIN").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("ScramLoginModule does not serve sasl.mechanism=PLAIN"),
        "{e}"
    );

    let mut c = ProducerConfig::default();
    c.set("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\";").unwrap();
    assert_eq!(c.security.sasl_mechanism, Some(Mechanism::OAuthBearer));
    assert!(c.security.oauthbearer_unsecure_jwt);
    assert_eq!(
        c.security.oauthbearer_config.as_deref(),
        Some("principal=alice")
    );

    let e = ProducerConfig::default()
        .set(
            "sasl.jaas.config",
            "software.amazon.msk.auth.iam.IAMLoginModule required;",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("IAMLoginModule is not supported"), "{e}");
    let e = ProducerConfig::default()
        .set(
            "sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username='x';",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs username and password"), "{e}");
}

/// Other clients' settings: accepted and listed once when they mean
/// nothing to the producer; refused, with the reason, when dropping them
/// would change what it does; unknown (with a suggestion) when no client
/// knows them.
#[test]
fn other_clients_settings_are_ignored_refused_or_unknown() {
    let mut c = ProducerConfig::default();
    for (k, v) in [
        ("session.timeout.ms", "45000"),
        (
            "key.serializer",
            "org.apache.kafka.common.serialization.StringSerializer",
        ),
        ("schema.registry.url", "https://sr.example.com"),
        ("debug", "broker,topic"),
        ("session.timeout.ms", "30000"),
        ("interceptor.classes", ""),
        (
            "partitioner.class",
            "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
        ),
    ] {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    assert_eq!(
        c.ignored_properties(),
        [
            "session.timeout.ms",
            "key.serializer",
            "schema.registry.url",
            "debug",
            "interceptor.classes",
            "partitioner.class"
        ]
    );
    for (k, v, why) in [
        (
            "interceptor.classes",
            "com.example.Audit",
            "ProducerBuilder::interceptor",
        ),
        (
            "partitioner.class",
            "org.apache.kafka.clients.producer.RoundRobinPartitioner",
            "Partitioner",
        ),
        ("ssl.key.password", "pw", "unencrypted"),
        (
            "sasl.client.callback.handler.class",
            "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
            "MSK IAM",
        ),
        ("api.version.request", "false", "API versions"),
        (
            "enable.ssl.certificate.verification",
            "false",
            "not supported",
        ),
    ] {
        let e = c.set(k, v).unwrap_err().to_string();
        assert!(e.contains(k) && e.contains(why), "{k}={v}: {e}");
    }
    c.set("api.version.request", "true").unwrap();
    c.set("enable.ssl.certificate.verification", "true")
        .unwrap();
    let e = c.set("sesion.timeout.ms", "1").unwrap_err().to_string();
    assert!(e.contains("did you mean \"session.timeout.ms\""), "{e}");
}

/// librdkafka's settings users commonly set, with their meaning here.
#[test]
fn librdkafka_settings_take_their_meaning() {
    let mut c = ProducerConfig::default();
    c.set("max.in.flight", "3").unwrap();
    assert_eq!(c.max_in_flight, 3);
    c.set("socket.timeout.ms", "7000").unwrap();
    assert_eq!(c.request_timeout, Duration::from_secs(7));
    c.set("topic.metadata.refresh.interval.ms", "60000")
        .unwrap();
    assert_eq!(c.metadata_max_age, Duration::from_secs(60));
    c.set("topic.metadata.refresh.interval.ms", "-1").unwrap();
    assert!(c.metadata_max_age > Duration::from_secs(86_400 * 20));
    c.set("broker.address.family", "v4").unwrap();
    assert_eq!(c.broker_address_family, AddressFamily::V4);
    assert!(c.set("broker.address.family", "ipx").is_err());
    c.set("metadata.broker.list", "a:1,b:2").unwrap();
    assert_eq!(c.bootstrap_servers, ["a:1", "b:2"]);
    for k in [
        "log.connection.close",
        "statistics.interval.ms",
        "delivery.report.only.error",
    ] {
        c.set(k, "1").unwrap();
    }
    assert_eq!(
        c.ignored_properties(),
        [
            "log.connection.close",
            "statistics.interval.ms",
            "delivery.report.only.error"
        ]
    );
}

/// Java's timeout rule for Java's name, librdkafka's (none) for
/// librdkafka's, whichever was set last.
#[test]
fn the_timeout_rule_follows_the_name_used() {
    let mut c = ProducerConfig::default();
    c.set("bootstrap.servers", "h:9092").unwrap();
    c.set("message.timeout.ms", "30000").unwrap();
    c.validate().expect("librdkafka's common setting");
    c.set("delivery.timeout.ms", "30000").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("as the Java client requires") && e.contains("message.timeout.ms"),
        "{e}"
    );
}

/// The Java client's store settings: PEM files are read as Courier's own
/// settings; a JKS or PKCS12 store (Java's default type is JKS) is refused
/// with how to convert it.
#[test]
fn java_stores_are_read_as_pem_or_refused() {
    let mut c = ProducerConfig::default();
    c.set("bootstrap.servers", "h:9092").unwrap();
    c.set("security.protocol", "SSL").unwrap();
    c.set("ssl.truststore.location", "/etc/kafka/truststore.jks")
        .unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("JKS") && e.contains("keytool"), "{e}");
    c.set("ssl.truststore.type", "PEM").unwrap();
    c.validate().unwrap();
    assert_eq!(
        c.security.ca_location.as_deref(),
        Some(std::path::Path::new("/etc/kafka/truststore.jks"))
    );
    c.set("ssl.keystore.location", "client.p12").unwrap();
    c.set("ssl.keystore.type", "PKCS12").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("PKCS12") && e.contains("openssl"), "{e}");
    c.set("ssl.keystore.type", "pem").unwrap();
    c.validate().unwrap();
    assert_eq!(c.security.key_location, c.security.certificate_location);
}

/// `client.dns.lookup` and the setup time-out's maximum are real
/// properties now: parsed, checked, and not listed as ignored.
#[test]
fn dns_lookup_and_the_setup_timeout_maximum_are_set() {
    let mut c = ProducerConfig::default();
    assert_eq!(c.client_dns_lookup, DnsLookup::UseAllDnsIps);
    assert_eq!(c.connection_setup_timeout_max, Duration::from_secs(30));
    c.set(
        "client.dns.lookup",
        "resolve_canonical_bootstrap_servers_only",
    )
    .unwrap();
    c.set("socket.connection.setup.timeout.max.ms", "5000")
        .unwrap();
    assert_eq!(
        c.client_dns_lookup,
        DnsLookup::ResolveCanonicalBootstrapServersOnly
    );
    assert_eq!(c.connection_setup_timeout_max, Duration::from_secs(5));
    assert!(
        c.ignored_properties().is_empty(),
        "{:?}",
        c.ignored_properties()
    );
    // Java 2.x's `default` is gone since 3.0, as there.
    let e = c
        .set("client.dns.lookup", "default")
        .unwrap_err()
        .to_string();
    assert!(e.contains("use_all_dns_ips"), "{e}");
    assert!(c
        .set("socket.connection.setup.timeout.max.ms", "0")
        .is_err());
}

/// KIP-794's three properties, with the Java client's defaults.
#[test]
fn the_partitioners_properties_are_set() {
    let mut c = ProducerConfig::default();
    assert!(c.partitioner_adaptive);
    assert_eq!(c.partitioner_availability_timeout, None);
    assert!(!c.partitioner_ignore_keys);
    c.set("partitioner.adaptive.partitioning.enable", "false")
        .unwrap();
    c.set("partitioner.availability.timeout.ms", "250").unwrap();
    c.set("partitioner.ignore.keys", "true").unwrap();
    assert!(!c.partitioner_adaptive);
    assert_eq!(
        c.partitioner_availability_timeout,
        Some(Duration::from_millis(250))
    );
    assert!(c.partitioner_ignore_keys);
    assert!(
        c.ignored_properties().is_empty(),
        "{:?}",
        c.ignored_properties()
    );
    c.set("partitioner.availability.timeout.ms", "0").unwrap();
    assert_eq!(c.partitioner_availability_timeout, None, "0 is off");
    let e = c
        .set("partitioner.ignore.keys", "sometimes")
        .unwrap_err()
        .to_string();
    assert!(e.contains("partitioner.ignore.keys"), "{e}");
}
