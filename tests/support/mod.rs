//! Shared test support: real brokers started per test, and an independent
//! reader (the rdkafka consumer) to check what Courier wrote.
//!
//! Every broker is started on a free port by the test that needs it and is
//! stopped when its guard drops, also when the test fails.

#![allow(dead_code)]

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
        let bin = std::env::var_os("COURIER_TANSU")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/tansu"));
        assert!(
            bin.exists(),
            "Tansu not found at {}; run `bash scripts/install-tools.sh` (scripts/test.sh does)",
            bin.display()
        );
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!("courier-tansu-{port}.log"));
            let out = std::fs::File::create(&log).expect("create Tansu log");
            let url = format!("tcp://127.0.0.1:{port}");
            let child = Command::new(&bin)
                .args([
                    "broker",
                    "--listener-url",
                    &url,
                    "--advertised-listener-url",
                    &url,
                ])
                .args(["--storage-engine", "memory://tansu/"])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("spawn Tansu");
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
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
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

    /// The broker's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
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
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "courier-test-reader")
        .set("enable.auto.commit", "false")
        .set("api.version.request", "true")
        .set("log_level", "3")
        .create()
        .expect("create rdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
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
            Some(Ok(m)) => {
                let headers = m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(ReadRecord {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(|k| k.to_vec()),
                    value: m.payload().map(|v| v.to_vec()),
                    headers,
                    timestamp: m.timestamp().to_millis().unwrap_or(-1),
                });
            }
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Creates `topic` through Courier's own connection (CreateTopics).
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    courier::admin::create_topic(bootstrap, topic, partitions, 1)
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
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "courier-test-positions")
        .set("enable.auto.commit", "false")
        .set("log_level", "3")
        .create()
        .expect("create rdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
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
                out.insert(
                    pos,
                    ReadRecord {
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(|k| k.to_vec()),
                        value: m.payload().map(|v| v.to_vec()),
                        headers: Vec::new(),
                        timestamp: m.timestamp().to_millis().unwrap_or(-1),
                    },
                );
            }
        }
    }
    out
}
