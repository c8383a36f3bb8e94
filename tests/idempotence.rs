//! The idempotent producer against Tansu and Apache Kafka, each behind a
//! proxy that drops the connection instead of relaying a Produce response:
//! the broker wrote the batch, the producer never heard, and retries it.
//! With idempotence (the default, with 5 requests in flight) the log holds
//! every record exactly once and in order per key; without it, the same
//! fault leaves duplicates — which shows the check can fail.

mod support;

use std::collections::HashMap;

use courier_kafka::{Producer, Record, ReportMode};
use futures::StreamExt;
use support::kafka::KafkaCluster;
use support::{free_port, read_all, FaultProxy, ProxiedTansu, ProxyFault};

const N: usize = 3000;

/// A broker behind a fault proxy; clients are told the proxy's address.
enum Proxied {
    Tansu(ProxiedTansu),
    Kafka(KafkaCluster, FaultProxy),
}

impl Proxied {
    async fn start(kafka: bool, topic: &str) -> Proxied {
        if !kafka {
            let t = ProxiedTansu::start();
            support::create_topic(&t.proxy.bootstrap(), topic, 3).await;
            return Proxied::Tansu(t);
        }
        let port = free_port();
        let cluster = KafkaCluster::start_advertising(port);
        let proxy = FaultProxy::start(port, cluster.address(0));
        cluster.create_topic(topic, 3, 1, &[]).await;
        Proxied::Kafka(cluster, proxy)
    }

    fn proxy(&self) -> &FaultProxy {
        match self {
            Proxied::Tansu(t) => &t.proxy,
            Proxied::Kafka(_, p) => p,
        }
    }

    /// Everything the topic's log holds.
    fn log(&self, topic: &str, at_least: usize) -> Vec<support::ReadRecord> {
        let b = self.proxy().bootstrap();
        match self {
            // Tansu's high watermarks lag: read until the log is quiet.
            Proxied::Tansu(_) => read_all(&b, topic, 3, at_least),
            Proxied::Kafka(k, _) => k.read_log(topic, 3),
        }
    }
}

async fn run(
    idempotent: bool,
    kafka: bool,
) -> (Vec<support::ReadRecord>, Option<(i64, i16)>, usize) {
    let topic = if idempotent { "idem-on" } else { "idem-off" };
    let cluster = Proxied::start(kafka, topic).await;
    let b = cluster.proxy().bootstrap();
    let producer = Producer::builder()
        .bootstrap(&b)
        .set(
            "enable.idempotence",
            if idempotent { "true" } else { "false" },
        )
        .set("linger.ms", "2")
        .set("retry.backoff.ms", "20")
        .set("reconnect.backoff.ms", "20")
        .build()
        .unwrap();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    for i in 0..N {
        if i == N / 3 || i == 2 * N / 3 {
            cluster.proxy().arm(ProxyFault::DropResponse);
        }
        sub.produce(
            Record::to(topic)
                .key(format!("k{}", i % 10))
                .value(i.to_string()),
        )
        .await
        .unwrap();
        if i % 50 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    drop(sub);
    let mut reports = 0;
    while let Some(r) = stream.next().await {
        assert!(r.is_delivered(), "{r:?}");
        reports += 1;
    }
    assert_eq!(reports, N, "one report per record");
    let pid = producer.producer_id();
    producer.close().await;
    let applied = cluster
        .proxy()
        .applied
        .load(std::sync::atomic::Ordering::SeqCst);
    (cluster.log(topic, N), pid, applied)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_cause_no_duplicates_or_reordering_with_idempotence() {
    check_exactly_once_in_order(run(true, false).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_cause_no_duplicates_or_reordering_on_kafka() {
    check_exactly_once_in_order(run(true, true).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_idempotence_the_same_fault_duplicates_records_on_kafka() {
    check_duplicates(run(false, true).await);
}

fn check_exactly_once_in_order(
    (log, pid, applied): (Vec<support::ReadRecord>, Option<(i64, i16)>, usize),
) {
    assert!(applied >= 1, "the proxy dropped a Produce response");
    let (id, epoch) = pid.expect("the broker assigned a producer id");
    assert!(id >= 0 && epoch >= 0);
    assert_eq!(log.len(), N, "every record exactly once in the log");
    let mut last: HashMap<Vec<u8>, usize> = HashMap::new();
    for r in &log {
        let i: usize = std::str::from_utf8(r.value.as_ref().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        let prev = last.insert(r.key.clone().unwrap(), i);
        assert!(prev.is_none_or(|p| p < i), "order per key kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_idempotence_the_same_fault_duplicates_records() {
    check_duplicates(run(false, false).await);
}

fn check_duplicates((log, pid, applied): (Vec<support::ReadRecord>, Option<(i64, i16)>, usize)) {
    assert!(applied >= 1);
    assert_eq!(pid, None);
    assert!(
        log.len() > N,
        "a retried, already-written batch is written twice ({} records)",
        log.len()
    );
}
