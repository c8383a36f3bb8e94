//! Bad input gets a clear error and loses nothing: malformed, truncated and
//! oversized frames from a broker, an unknown topic, an unreachable
//! bootstrap. (Oversized records and bad config values are covered in
//! `producer_lifecycle.rs`.)

mod support;

use std::time::{Duration, Instant};

use courier_kafka::{DeliveryReport, ErrorKind, Producer, Record, ReportMode};
use futures::StreamExt;
use support::{read_all, ProxiedTansu, ProxyFault, Tansu};

const N: usize = 1500;

/// The process's peak virtual memory (`VmPeak`), in bytes: a reservation
/// of a claimed length shows here even when its pages are never touched
/// (and so never count in the resident size).
fn peak_virtual_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmPeak:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmPeak line");
    kb * 1024
}

/// A broken Produce response: the connection is dropped, the batches are
/// retried on a new one, and (idempotence on) the log holds each record
/// once. No panic, no hang, no huge allocation: the process's peak virtual
/// memory grows by less than 1.5 GiB, where reserving the 2 GiB claim adds
/// 2 GiB (checked by adding such a reservation: 2,664 MiB of growth, the
/// rest being thread stacks and malloc arenas of the tests running
/// alongside).
async fn survives(fault: ProxyFault, topic: &str) {
    let peak_before = peak_virtual_memory();
    let cluster = ProxiedTansu::start();
    let b = cluster.proxy.bootstrap();
    support::create_topic(&b, topic, 2).await;
    let producer = Producer::builder()
        .bootstrap(&b)
        .set("linger.ms", "2")
        .set("retry.backoff.ms", "20")
        .set("reconnect.backoff.ms", "20")
        .build()
        .unwrap();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    for i in 0..N {
        if i == N / 2 {
            cluster.proxy.arm(fault);
        }
        sub.produce(
            Record::to(topic)
                .key(format!("k{}", i % 5))
                .value(i.to_string()),
        )
        .await
        .unwrap();
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    drop(sub);
    let mut delivered = 0;
    while let Some(r) = stream.next().await {
        assert!(r.is_delivered(), "{fault:?}: {r:?}");
        delivered += 1;
    }
    assert_eq!(delivered, N);
    assert_eq!(
        cluster
            .proxy
            .applied
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "{fault:?} applied"
    );
    producer.close().await;
    let log = read_all(&b, topic, 2, N);
    assert_eq!(log.len(), N, "{fault:?}: each record once");
    let grown = peak_virtual_memory().saturating_sub(peak_before);
    assert!(
        grown < 3 << 29,
        "{fault:?}: peak virtual memory grew by {} MiB",
        grown >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_response_body() {
    survives(ProxyFault::GarbageBody, "garbage").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_claiming_two_gigabytes() {
    survives(ProxyFault::HugeLength, "huge").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_response() {
    survives(ProxyFault::Truncate, "truncated").await;
}

#[tokio::test]
async fn unknown_topic_fails_after_max_block_not_a_hang() {
    let broker = Tansu::start();
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .set("allow.auto.create.topics", "false")
        .set("max.block.ms", "1500")
        .build()
        .unwrap();
    let started = Instant::now();
    let err = producer
        .send(Record::to("no-such-topic").value("v"))
        .await
        .expect_err("the topic does not exist");
    assert_eq!(err.kind, ErrorKind::UnknownTopic, "{err}");
    assert!(err.message.contains("max.block.ms"), "{}", err.message);
    assert!(
        err.message.contains("the cluster does not have it"),
        "{}",
        err.message
    );
    assert_eq!(err.record.value.as_deref(), Some(&b"v"[..]));
    assert!(started.elapsed() < Duration::from_secs(30), "hang guard");
    producer.close().await;
}

#[tokio::test]
async fn unreachable_bootstrap_reports_failures_and_never_hangs() {
    let port = support::free_port(); // nobody listens here
    let producer = Producer::builder()
        .bootstrap(&format!("127.0.0.1:{port}"))
        .set("max.block.ms", "1000")
        .set("reconnect.backoff.max.ms", "100")
        .build()
        .unwrap();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    // Concurrently: each produce waits up to max.block.ms for metadata.
    let produces = (0..20).map(|i| sub.produce(Record::to("t").value(format!("{i}"))));
    for r in futures::future::join_all(produces).await {
        r.unwrap();
    }
    drop(sub);
    let reports: Vec<_> = tokio::time::timeout(Duration::from_secs(30), stream.collect::<Vec<_>>())
        .await
        .expect("no hang");
    assert_eq!(reports.len(), 20, "one failure report per record");
    for r in reports {
        let DeliveryReport::Failed(e) = r else {
            panic!("{r:?}")
        };
        // The cause is that no broker answers, not a missing topic: a
        // Timeout (retriable), naming the address and the socket error.
        assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
        assert!(e.message.contains("no broker answered"), "{e}");
        assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
        assert!(e.message.to_lowercase().contains("refused"), "{e}");
    }
    tokio::time::timeout(Duration::from_secs(10), producer.close())
        .await
        .expect("close does not hang either");
}
