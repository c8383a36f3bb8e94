//! A `close()` abandoned half-way (its future dropped, say by a timeout)
//! must not leak the producer: when the last handle goes, the actor tree
//! still stops and its thread ends. Its own test binary, because it counts
//! the process's `courier-actors` threads.

use std::time::{Duration, Instant};

mod support;

use courier_kafka::{Producer, Record};
use futures::StreamExt;
use support::Tansu;

/// Threads of this process named `courier-actors` (one per producer built
/// with `build()`).
fn actor_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.trim() == "courier-actors")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_close_still_stops_the_actor_tree() {
    let before = actor_threads();
    let broker = Tansu::start();
    support::create_topic(&broker.bootstrap(), "t", 1).await;
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .set("delivery.timeout.ms", "120000")
        .build()
        .unwrap();
    assert_eq!(actor_threads(), before + 1, "build() starts one thread");
    producer
        .send(Record::to("t").value("first"))
        .await
        .expect("delivered while the broker runs");
    // The broker goes away: the next record sits in a batch no one can
    // take, so close() cannot finish its flush; give up on it.
    drop(broker);
    let (sub, mut reports) = producer.subscribe(courier_kafka::ReportMode::All);
    sub.produce(Record::to("t").value("second")).await.unwrap();
    drop(sub);
    let abandoned = tokio::time::timeout(Duration::from_millis(300), producer.close()).await;
    assert!(
        abandoned.is_err(),
        "close could not finish with the broker gone"
    );
    drop(producer);
    // No handle is left: the record is reported Cancelled at once (not
    // timed out after delivery.timeout.ms), and the stream ends.
    let report = tokio::time::timeout(Duration::from_secs(30), reports.next())
        .await
        .expect("the pending record is reported")
        .expect("one report");
    match report {
        courier_kafka::DeliveryReport::Failed(e) => {
            assert_eq!(e.kind, courier_kafka::ErrorKind::Cancelled, "{e}")
        }
        other => panic!("{other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(30), reports.next())
        .await
        .expect("the stream ends");
    assert!(end.is_none(), "one report only: {end:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while actor_threads() > before {
        assert!(
            Instant::now() < deadline,
            "the courier-actors thread still runs 30 s after the last handle went"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
