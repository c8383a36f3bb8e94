//! Shared test support: real brokers started per test, and an independent
//! reader (the rdkafka consumer) to check what Courier wrote.
//!
//! Every broker is started on a free port by the test that needs it and is
//! stopped when its guard drops, also when the test fails.

#![allow(dead_code)]

pub mod idp;
pub mod kafka;
pub mod paths;
pub mod registry;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Tansu broker process with in-memory storage, killed on drop.
pub struct Tansu {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Tansu {
    /// Starts Tansu on a free port and waits until it accepts connections.
    ///
    /// The binary comes from `COURIER_TANSU`, or `.tools/bin/tansu` as
    /// `scripts/install-tools.sh` installs it.
    pub fn start() -> Tansu {
        Self::start_with(None)
    }

    /// Starts Tansu advertising `advertised` (`host:port`) instead of its
    /// own address, for a proxy in front of it; `{port}` in it is the
    /// port Tansu listens on (`"kafka.test:{port}"`: a name for itself).
    pub fn start_advertising(advertised: &str) -> Tansu {
        Self::start_with(Some(advertised))
    }

    /// Stops the broker (SIGSTOP) and keeps its port: nothing is answered
    /// from now on, and no other test's broker can start on the port (as
    /// one could after a kill, when tests run side by side).
    #[allow(dead_code)]
    pub fn pause(&self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let r = unsafe { libc::kill(self.child.id() as i32, libc::SIGSTOP) };
        assert_eq!(r, 0, "SIGSTOP to Tansu");
        // kill(2) returns once the signal is queued; every thread of the
        // process stops only as the kernel gets to it. Wait until each is
        // stopped ('T' in /proc/<pid>/task/*/stat), or a test that pauses
        // and then produces may find the broker still answering (seen in
        // CI: five records delivered in a millisecond after the pause).
        let tasks = format!("/proc/{}/task", self.child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stopped = std::fs::read_dir(&tasks)
                .map(|dir| {
                    dir.flatten().all(|t| {
                        std::fs::read_to_string(t.path().join("stat"))
                            .ok()
                            .and_then(|stat| {
                                // The state follows the command's ")".
                                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                                Some(state == 'T' || state == 't')
                            })
                            .unwrap_or(true)
                    })
                })
                .unwrap_or(true);
            if stopped {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Tansu did not stop after SIGSTOP"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets a paused broker run again (SIGCONT).
    #[allow(dead_code)]
    pub fn resume(&self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let r = unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
        assert_eq!(r, 0, "SIGCONT to Tansu");
    }

    /// Kills the broker with SIGKILL and starts a new one (empty: memory
    /// storage) on the same port.
    pub fn kill9_and_restart(&mut self) {
        let _ = self.child.kill(); // SIGKILL on Unix
        let _ = self.child.wait();
        let url = format!("tcp://127.0.0.1:{}", self.port);
        for _ in 0..50 {
            self.child = spawn_tansu(&url, &url, &self.log);
            if self.wait_ready(Duration::from_secs(5)) {
                return;
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("Tansu did not restart on port {}", self.port);
    }

    fn start_with(advertised: Option<&str>) -> Tansu {
        let bin = tansu_bin();

        assert!(
            bin.exists(),
            "Tansu not found at {}; run `bash scripts/install-tools.sh` (scripts/test.sh does)",
            bin.display()
        );
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!("courier-tansu-{port}.log"));
            let url = format!("tcp://127.0.0.1:{port}");
            // `{port}` in `advertised` stands for the port Tansu listens on.
            let advertised_url = advertised.map_or(url.clone(), |a| {
                format!("tcp://{}", a.replace("{port}", &port.to_string()))
            });
            let child = spawn_tansu(&url, &advertised_url, &log);
            let mut broker = Tansu { child, port, log };
            if broker.wait_ready(Duration::from_secs(15)) {
                return broker;
            }
            // The port was taken between probing and binding; try another.
            drop(broker);
        }
        panic!("Tansu did not start after 5 attempts");
    }

    fn wait_ready(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if answers_api_versions(self.port) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// `host:port` of the broker.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's process id (the benches read its CPU time from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The broker's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Whether a broker on `port` answers an ApiVersions request (v0, no
/// client id): a listening socket alone is not enough, since a broker
/// still starting up (more likely on a loaded machine) may accept a
/// connection and then reset it (a test's first admin call failed with
/// "Connection reset by peer" in one CI run).
fn answers_api_versions(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    // size 10; api key 18, version 0, correlation id 1, client id null.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    let mut head = [0u8; 8];
    s.write_all(&request).is_ok()
        && s.read_exact(&mut head).is_ok()
        && i32::from_be_bytes([head[0], head[1], head[2], head[3]]) > 4
        && head[4..8] == [0, 0, 0, 1]
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Starts a Tansu process with memory storage, logging to `log`.
fn spawn_tansu(listener: &str, advertised: &str, log: &std::path::Path) -> Child {
    let out = std::fs::File::create(log).expect("create Tansu log");
    Command::new(tansu_bin())
        .args([
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            advertised,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn Tansu")
}

fn tansu_bin() -> PathBuf {
    std::env::var_os("COURIER_TANSU")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/bin/tansu"))
}

/// The repository's root (where `.tools` and `docs` are), whichever of the
/// workspace's packages includes this module: the root package's tests,
/// or the side-by-side benches' own package in `benches/side-by-side`.
/// Waits (a generous bound, not a timing claim) until `cond` holds.
#[allow(dead_code)] // not every test binary waits so
pub async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub fn repo_root() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|dir| dir.join("tests/support/mod.rs").is_file())
        .unwrap_or(here)
        .to_path_buf()
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// A record as an independent client read it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

/// Reads `expected` records from `topic` (partitions `0..partitions`) with
/// the rdkafka consumer, from the beginning; panics after `limit` if fewer
/// arrive. Results are grouped by partition in offset order.
pub fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    limit: Duration,
) -> Vec<ReadRecord> {
    read_back_with(bootstrap, &[], topic, partitions, expected, limit)
}

/// [`read_back`] with extra rdkafka settings for the consumer (a secured
/// listener's `security.protocol`, `sasl.*`, `ssl.ca.location`).
pub fn read_back_with(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topic: &str,
    partitions: i32,
    expected: usize,
    limit: Duration,
) -> Vec<ReadRecord> {
    let consumer = reader(bootstrap, settings, topic, partitions);
    let deadline = Instant::now() + limit;
    let mut out = Vec::with_capacity(expected);
    while out.len() < expected {
        assert!(
            Instant::now() < deadline,
            "read back only {} of {expected} records from {topic} within {limit:?}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(e)) => panic!("consumer error: {e}"),
            Some(Ok(m)) => out.push(ReadRecord::from_message(&m)),
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Every record the rdkafka consumer (with extra `settings`, say
/// `isolation.level=read_committed`) reads from `topic` until none has
/// come for `idle`; by partition and offset. For logs whose size is not
/// known in advance (a read_committed view skips aborted records).
pub fn read_until_quiet(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topic: &str,
    partitions: i32,
    idle: Duration,
) -> Vec<ReadRecord> {
    let consumer = reader(bootstrap, settings, topic, partitions);
    let mut out = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < idle {
        match consumer.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(e)) => panic!("consumer error: {e}"),
            Some(Ok(m)) => {
                last = Instant::now();
                out.push(ReadRecord::from_message(&m));
            }
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Reads `expected` records from `topic` (partitions `0..partitions`) with
/// the rdkafka consumer, from the beginning, handing each to `f` as it
/// comes (nothing is kept: for logs too large to hold); panics after
/// `limit` if fewer arrive.
pub fn for_each_read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    limit: Duration,
    f: impl FnMut(ReadRecord),
) {
    for_each_read_back_with(bootstrap, &[], topic, partitions, expected, limit, f)
}

/// [`for_each_read_back`] with reader `settings` (librdkafka's names:
/// security.protocol, sasl.*, ssl.*), to read over a secured listener.
pub fn for_each_read_back_with(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topic: &str,
    partitions: i32,
    expected: usize,
    limit: Duration,
    mut f: impl FnMut(ReadRecord),
) {
    let consumer = reader(bootstrap, settings, topic, partitions);
    let deadline = Instant::now() + limit;
    let mut n = 0;
    while n < expected {
        assert!(
            Instant::now() < deadline,
            "read back only {n} of {expected} records from {topic} within {limit:?}"
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(e)) => panic!("consumer error: {e}"),
            Some(Ok(m)) => {
                n += 1;
                f(ReadRecord::from_message(&m));
            }
        }
    }
}

/// An rdkafka consumer assigned to every partition of `topic`, from the
/// beginning: the independent reader all the read-back helpers use.
fn reader(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topic: &str,
    partitions: i32,
) -> rdkafka::consumer::BaseConsumer {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "courier-test-reader")
        .set("enable.auto.commit", "false")
        .set("log_level", "3");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config.create().expect("create rdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
    consumer
}

impl ReadRecord {
    fn from_message(m: &rdkafka::message::BorrowedMessage<'_>) -> ReadRecord {
        use rdkafka::message::{Headers, Message};
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                    .collect()
            })
            .unwrap_or_default();
        ReadRecord {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(|k| k.to_vec()),
            value: m.payload().map(|v| v.to_vec()),
            headers,
            timestamp: m.timestamp().to_millis().unwrap_or(-1),
        }
    }
}

/// Creates `topic` through Courier's own connection (CreateTopics).
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    courier_kafka::admin::create_topic(bootstrap, topic, partitions, 1)
        .await
        .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
}

/// A cluster to run a test against: Tansu, or librdkafka's mock cluster.
pub enum Cluster {
    Tansu(Tansu),
    Mock(rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>),
}

impl Cluster {
    pub fn tansu() -> Cluster {
        Cluster::Tansu(Tansu::start())
    }

    pub fn mock(brokers: i32) -> Cluster {
        Cluster::Mock(rdkafka::mocking::MockCluster::new(brokers).expect("mock cluster"))
    }

    pub fn bootstrap(&self) -> String {
        match self {
            Cluster::Tansu(t) => t.bootstrap(),
            Cluster::Mock(m) => m.bootstrap_servers(),
        }
    }

    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        match self {
            Cluster::Tansu(t) => create_topic(&t.bootstrap(), topic, partitions).await,
            Cluster::Mock(m) => m.create_topic(topic, partitions, 1).expect("create topic"),
        }
    }
}

/// Reads `topic` until every wanted (partition, offset) has been seen,
/// returning those records. Extra records (say, duplicates from retries
/// without idempotence) are read past, not counted.
pub fn read_positions(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    wanted: std::collections::HashSet<(i32, i64)>,
    limit: Duration,
) -> std::collections::HashMap<(i32, i64), ReadRecord> {
    use rdkafka::message::Message;
    let consumer = reader(bootstrap, &[], topic, partitions);
    let deadline = Instant::now() + limit;
    let mut out = std::collections::HashMap::new();
    while out.len() < wanted.len() {
        assert!(
            Instant::now() < deadline,
            "found only {} of {} reported positions in {topic}",
            out.len(),
            wanted.len()
        );
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let pos = (m.partition(), m.offset());
            if wanted.contains(&pos) {
                out.insert(pos, ReadRecord::from_message(&m));
            }
        }
    }
    out
}

/// What the fault proxy does to the next response frame it relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProxyFault {
    /// Relay everything.
    None = 0,
    /// Drop the connection instead of relaying the next response: the
    /// broker did the work, the client never hears of it.
    DropResponse = 1,
    /// Replace the next response body with garbage of the same length.
    GarbageBody = 2,
    /// Send a length prefix claiming 2 GiB, then close.
    HugeLength = 3,
    /// Send half of the next response, then close.
    Truncate = 4,
}

/// A TCP proxy in front of a broker that can break one response on demand.
pub struct FaultProxy {
    pub port: u16,
    fault: std::sync::Arc<std::sync::atomic::AtomicU8>,
    /// Faults applied so far.
    pub applied: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Metadata answers still to relay with an empty broker list
    /// (`omit_brokers`).
    omit_brokers: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The topics each Metadata request named, in order (`None`: all).
    metadata_requests: MetadataRequests,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

type MetadataRequests = std::sync::Arc<std::sync::Mutex<Vec<Option<Vec<String>>>>>;

impl FaultProxy {
    /// Listens on `port` and relays to `upstream`.
    pub fn start(port: u16, upstream: String) -> FaultProxy {
        use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind proxy");
        listener.set_nonblocking(true).unwrap();
        let fault = Arc::new(AtomicU8::new(0));
        let applied = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let omit_brokers = Arc::new(AtomicUsize::new(0));
        let metadata_requests = MetadataRequests::default();
        let (f, a, s, o, m) = (
            fault.clone(),
            applied.clone(),
            stop.clone(),
            omit_brokers.clone(),
            metadata_requests.clone(),
        );
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let (c_read, s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let apis = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
                let apis2 = apis.clone();
                let m = m.clone();
                std::thread::spawn(move || relay_requests(c_read, s_write, &apis2, &m));
                let faults = ResponseFaults {
                    fault: f.clone(),
                    applied: a.clone(),
                    omit_brokers: o.clone(),
                };
                std::thread::spawn(move || relay_responses(server, client, &faults, &apis));
            }
        });
        FaultProxy {
            port,
            fault,
            applied,
            omit_brokers,
            metadata_requests,
            stop,
        }
    }

    /// The topics each Metadata request through the proxy named, oldest
    /// first (`None` for a request for all topics).
    pub fn metadata_requests(&self) -> Vec<Option<Vec<String>>> {
        self.metadata_requests.lock().unwrap().clone()
    }

    /// Relays the next `n` Metadata answers, on any connection, with no
    /// broker in them (topics and leaders as the broker gave them): what a
    /// client sees from a broker whose view of the cluster lags, or during
    /// a KRaft broker's fencing.
    pub fn omit_brokers(&self, n: usize) {
        self.omit_brokers
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Metadata answers still to be stripped of their brokers.
    pub fn brokers_to_omit(&self) -> usize {
        self.omit_brokers.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Breaks the next Produce response on any connection.
    pub fn arm(&self, fault: ProxyFault) {
        self.fault
            .store(fault as u8, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Each request's API key and version, by correlation id.
type ApiByCorrelation = std::sync::Mutex<std::collections::HashMap<i32, (i16, i16)>>;

/// What `relay_responses` breaks, shared by a proxy's connections.
struct ResponseFaults {
    fault: std::sync::Arc<std::sync::atomic::AtomicU8>,
    applied: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    omit_brokers: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// The topics a Metadata request body (after the length prefix) of
/// `version` names; `None` when it asks for all.
fn metadata_topics(body: &[u8], version: i16) -> Option<Vec<String>> {
    use kafka_protocol::messages::{MetadataRequest, RequestHeader};
    use kafka_protocol::protocol::{Decodable, HeaderVersion};
    let mut buf = bytes::Bytes::copy_from_slice(body);
    RequestHeader::decode(&mut buf, MetadataRequest::header_version(version)).expect("header");
    let request = MetadataRequest::decode(&mut buf, version).expect("metadata request");
    request.topics.map(|topics| {
        topics
            .into_iter()
            .filter_map(|t| t.name.map(|n| n.0.to_string()))
            .collect()
    })
}

/// A Metadata response body (after the length prefix) of `version`, with
/// its broker list emptied.
fn without_brokers(body: &[u8], version: i16) -> Vec<u8> {
    use kafka_protocol::messages::{MetadataResponse, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
    let header_version = MetadataResponse::header_version(version);
    let mut buf = bytes::Bytes::copy_from_slice(body);
    let header = ResponseHeader::decode(&mut buf, header_version).expect("response header");
    let mut response = MetadataResponse::decode(&mut buf, version).expect("metadata response");
    response.brokers.clear();
    let mut out = bytes::BytesMut::new();
    header.encode(&mut out, header_version).unwrap();
    response.encode(&mut out, version).unwrap();
    out.to_vec()
}

/// Client to broker: relays request frames, noting each one's API key by
/// correlation id, so faults can target Produce responses only.
fn relay_requests(
    mut client: std::net::TcpStream,
    mut server: std::net::TcpStream,
    apis: &ApiByCorrelation,
    metadata_requests: &MetadataRequests,
) {
    use std::io::{Read, Write};
    loop {
        let mut len = [0u8; 4];
        if client.read_exact(&mut len).is_err() {
            break;
        }
        let mut body = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
        if client.read_exact(&mut body).is_err() || body.len() < 8 {
            break;
        }
        let api = i16::from_be_bytes([body[0], body[1]]);
        let version = i16::from_be_bytes([body[2], body[3]]);
        let correlation = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
        apis.lock().unwrap().insert(correlation, (api, version));
        if api == 3 {
            metadata_requests
                .lock()
                .unwrap()
                .push(metadata_topics(&body, version));
        }
        if server
            .write_all(&len)
            .and_then(|_| server.write_all(&body))
            .is_err()
        {
            break;
        }
    }
    let _ = server.shutdown(std::net::Shutdown::Both);
}

fn relay_responses(
    mut server: std::net::TcpStream,
    mut client: std::net::TcpStream,
    faults: &ResponseFaults,
    apis: &ApiByCorrelation,
) {
    let ResponseFaults {
        fault,
        applied,
        omit_brokers,
    } = faults;
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let close = |c: &std::net::TcpStream, s: &std::net::TcpStream| {
        let _ = c.shutdown(std::net::Shutdown::Both);
        let _ = s.shutdown(std::net::Shutdown::Both);
    };
    loop {
        let mut len = [0u8; 4];
        if server.read_exact(&mut len).is_err() {
            break close(&client, &server);
        }
        let n = i32::from_be_bytes(len) as usize;
        let mut body = vec![0u8; n];
        if server.read_exact(&mut body).is_err() {
            break close(&client, &server);
        }
        let correlation = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let api = apis.lock().unwrap().remove(&correlation);
        let is_produce = api.is_some_and(|(key, _)| key == 0);
        if let Some((3, version)) = api {
            let strip = omit_brokers
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if strip {
                body = without_brokers(&body, version);
                len = i32::try_from(body.len()).unwrap().to_be_bytes();
            }
        }
        let f = if is_produce {
            fault.swap(0, Ordering::SeqCst)
        } else {
            0
        };
        if f != 0 {
            applied.fetch_add(1, Ordering::SeqCst);
        }
        match f {
            1 => break close(&client, &server),
            2 => {
                // Keep the correlation id, so the client matches it and then
                // fails to decode the rest.
                for (i, b) in body.iter_mut().enumerate().skip(4) {
                    *b = (i as u8).wrapping_mul(151) ^ 0xa5;
                }
            }
            3 => {
                let _ = client.write_all(&0x7fff_fff0i32.to_be_bytes());
                let _ = client.write_all(&body[..body.len().min(16)]);
                break close(&client, &server);
            }
            4 => {
                let _ = client.write_all(&len);
                let _ = client.write_all(&body[..body.len() / 2]);
                break close(&client, &server);
            }
            _ => {}
        }
        if client
            .write_all(&len)
            .and_then(|_| client.write_all(&body))
            .is_err()
        {
            break close(&client, &server);
        }
    }
}

/// Tansu advertising a proxy's address, so every connection (metadata
/// included) goes through the proxy.
pub struct ProxiedTansu {
    pub proxy: FaultProxy,
    _broker: Tansu,
}

impl ProxiedTansu {
    pub fn start() -> ProxiedTansu {
        let proxy_port = free_port();
        let broker = Tansu::start_advertising(&format!("127.0.0.1:{proxy_port}"));
        let proxy = FaultProxy::start(proxy_port, broker.bootstrap());
        ProxiedTansu {
            proxy,
            _broker: broker,
        }
    }
}

/// Every record of `topic`: at least `at_least` of them, then whatever else
/// arrives until the log has been quiet for two seconds (Tansu's reported
/// high watermarks are not reliable enough to stop on).
pub fn read_all(bootstrap: &str, topic: &str, partitions: i32, at_least: usize) -> Vec<ReadRecord> {
    let consumer = reader(bootstrap, &[], topic, partitions);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Instant::now();
    let mut out = Vec::new();
    while out.len() < at_least || last.elapsed() < Duration::from_secs(2) {
        assert!(
            Instant::now() < deadline,
            "read only {} of at least {at_least}",
            out.len()
        );
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            last = Instant::now();
            out.push(ReadRecord::from_message(&m));
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Values tagged so far: a tag is its value's index here.
static TAGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A record of `topic` whose value (and key, when `keyed`) is `value`,
/// tagged (`Record::opaque`) so that its report names it: a success report
/// carries the record's tag, not the record.
pub fn tagged_record(topic: &str, value: &str, keyed: bool) -> courier_kafka::Record {
    let tag = {
        let mut tags = TAGS.lock().unwrap();
        tags.push(value.to_string());
        tags.len() as u64 - 1
    };
    let r = courier_kafka::Record::to(topic)
        .value(value.to_string())
        .opaque(tag);
    if keyed {
        r.key(value.to_string())
    } else {
        r
    }
}

/// The value of the record a report is about (one made by
/// `tagged_record`): found by its tag, and for a failure, which hands
/// the record back, checked against the value handed back.
pub fn tagged_value(r: &courier_kafka::DeliveryReport) -> String {
    let value = TAGS.lock().unwrap()[r.opaque() as usize].clone();
    if let Some(record) = r.failed_record() {
        assert_eq!(
            record.value.as_deref(),
            Some(value.as_bytes()),
            "the record handed back is the one produced"
        );
    }
    value
}

/// A relay in front of a broker that passes each connection's first
/// `answered` response frames (ApiVersions, say) and then goes silent:
/// requests still reach the broker, its answers are read and dropped, and
/// the sockets stay open (a black-holed flow, as a NAT or middlebox that
/// lost its state leaves one). Counts the connections it accepted.
pub struct SilentRelay {
    pub port: u16,
    pub accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentRelay {
    pub fn start(upstream: String, answered: usize) -> SilentRelay {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, s) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                count.fetch_add(1, Ordering::SeqCst);
                client.set_nonblocking(false).unwrap();
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let (mut c_read, mut s_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_read, &mut s_write);
                });
                let (mut server, mut client) = (server, client);
                std::thread::spawn(move || {
                    let mut passed = 0;
                    loop {
                        let mut len = [0u8; 4];
                        if server.read_exact(&mut len).is_err() {
                            break;
                        }
                        let mut body = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
                        if server.read_exact(&mut body).is_err() {
                            break;
                        }
                        if passed < answered {
                            passed += 1;
                            if client
                                .write_all(&len)
                                .and_then(|_| client.write_all(&body))
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                });
            }
        });
        SilentRelay {
            port,
            accepted,
            stop,
        }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for SilentRelay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A relay in front of `upstream` (tokio, on the caller's runtime) that
/// for its first `drop_for` accepts each connection and closes it at once
/// (a load balancer with no healthy backend, a broker going down), then
/// relays. Counts the connections it accepted and those it dropped.
pub struct DroppingRelay {
    pub port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl DroppingRelay {
    pub async fn start(upstream: String, drop_for: Duration) -> DroppingRelay {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepted, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, d) = (accepted.clone(), dropped.clone());
        let drop_until = Instant::now() + drop_for;
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::SeqCst);
                if Instant::now() < drop_until {
                    d.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        DroppingRelay {
            port,
            accepted,
            dropped,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn dropped(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A TCP relay whose upstream can be changed: each new connection goes to
/// the upstream of the moment (connections already open stay where they
/// are, and die with their broker).
pub struct SwitchRelay {
    port: u16,
    upstream: std::sync::Arc<std::sync::Mutex<String>>,
}

impl SwitchRelay {
    pub async fn start(upstream: String) -> SwitchRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = std::sync::Arc::new(std::sync::Mutex::new(upstream));
        let to = upstream.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let target = to.lock().unwrap().clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        SwitchRelay { port, upstream }
    }

    pub fn switch_to(&self, upstream: String) {
        *self.upstream.lock().unwrap() = upstream;
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}
