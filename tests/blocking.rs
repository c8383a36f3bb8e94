//! The blocking calls (`send_blocking`, `flush_blocking`, `close_blocking`,
//! `DeliveryFuture::wait`) from plain threads with no async runtime, on a
//! Tansu broker started here: every record once in the log, read back by
//! the rdkafka consumer; a timed-out send hands back its still-pending
//! record, whose one report comes later; on the producer's own actor
//! thread the calls refuse at once instead of waiting for themselves.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use courier_kafka::{BlockingSendError, DeliveryReport, Producer, Record};
use support::Tansu;

fn broker_with_topic(topic: &str, partitions: i32) -> Tansu {
    let broker = Tansu::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(support::create_topic(
        &broker.bootstrap(),
        topic,
        partitions,
    ));
    broker
}

/// Four threads, none in a runtime, each sending 250 records one at a time
/// and blocking for each report: 1,000 distinct positions, and the log
/// holds each value once.
#[test]
fn plain_threads_send_and_each_record_is_written_once() {
    let broker = broker_with_topic("blocking", 3);
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .build()
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let p = producer.clone();
            std::thread::spawn(move || {
                (0..250)
                    .map(|i| {
                        let d = p
                            .send_blocking(
                                Record::to("blocking")
                                    .key(format!("{t}-{i}"))
                                    .value(format!("{t}-{i}")),
                                Duration::from_secs(30),
                            )
                            .unwrap();
                        (d.partition, d.offset.expect("acks=all: an offset"))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let positions: BTreeSet<(i32, i64)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(positions.len(), 1000, "one position per record");
    producer.flush_blocking(Duration::from_secs(10)).unwrap();
    producer.close_blocking(Duration::from_secs(10)).unwrap();
    let read = support::read_all(&broker.bootstrap(), "blocking", 3, 1000);
    let values: BTreeSet<Vec<u8>> = read.iter().filter_map(|r| r.value.clone()).collect();
    assert_eq!(read.len(), 1000, "no duplicates");
    assert_eq!(values.len(), 1000);
    let at: BTreeSet<(i32, i64)> = read.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(at, positions, "the reports named where each record is");
    // Closed: a blocking send hands the record back untaken.
    match producer.send_blocking(Record::to("blocking").value("late"), Duration::from_secs(1)) {
        Err(BlockingSendError::Rejected(e)) => {
            assert_eq!(e.into_record().value.as_deref(), Some(&b"late"[..]))
        }
        other => panic!("{other:?}"),
    }
}

/// The broker stops answering: the blocking send returns after its
/// timeout with the record still pending; once the broker is back, the
/// handed-back future yields its one report (delivered, once in the log).
#[test]
fn a_timed_out_send_hands_back_the_pending_record() {
    let broker = broker_with_topic("blocking-timeout", 1);
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .build()
        .unwrap();
    producer
        .send_blocking(
            Record::to("blocking-timeout").value("warm"),
            Duration::from_secs(30),
        )
        .unwrap();
    broker.pause();
    let pending = match producer.send_blocking(
        Record::to("blocking-timeout").value("paused"),
        Duration::from_millis(300),
    ) {
        Err(BlockingSendError::TimedOut(_, pending)) => pending,
        other => panic!("expected a timeout: {other:?}"),
    };
    // Still nothing while the broker is paused.
    let pending = pending
        .wait(Duration::from_millis(200))
        .expect_err("no report while the broker is paused");
    broker.resume();
    match pending.wait(Duration::from_secs(60)) {
        Ok(DeliveryReport::Delivered(d)) => assert_eq!(d.offset, Some(1)),
        other => panic!("{other:?}"),
    }
    producer.close_blocking(Duration::from_secs(10)).unwrap();
    let read = support::read_all(&broker.bootstrap(), "blocking-timeout", 1, 2);
    assert_eq!(read.len(), 2, "each record once");
}

/// A producer started inside an actix system runs its actors on that
/// system's thread: a blocking call there would wait for itself, so it
/// refuses at once (the record handed back) and the async calls still work.
#[test]
fn blocking_calls_refuse_on_the_actor_thread() {
    let broker = broker_with_topic("blocking-actor", 1);
    let bootstrap = broker.bootstrap();
    actix::System::new().block_on(async move {
        let p = Producer::builder().bootstrap(&bootstrap).start().unwrap();
        match p.send_blocking(
            Record::to("blocking-actor").value("x"),
            Duration::from_secs(5),
        ) {
            Err(BlockingSendError::OnActorThread(r)) => {
                assert_eq!(r.value.as_deref(), Some(&b"x"[..]))
            }
            other => panic!("{other:?}"),
        }
        assert!(p.flush_blocking(Duration::from_secs(5)).is_err());
        assert!(p.close_blocking(Duration::from_secs(5)).is_err());
        // Nothing was closed: the async path delivers.
        p.send(Record::to("blocking-actor").value("y"))
            .await
            .unwrap();
        p.close().await;
    });
}
