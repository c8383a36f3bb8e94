//! The actor producer end to end, on Tansu and on librdkafka's 3-broker mock
//! cluster: 100,000 keyed and keyless records across 6 partitions, every
//! report read from a subscription stream, then everything read back by an
//! independent client (the rdkafka consumer).
//!
//! Checked: exactly one report per record; every success report's
//! (partition, offset) holds exactly that record in the log; keyed records
//! sit on the Java-compatible partition; one subscriber's reports for one
//! partition arrive in offset order.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use courier_kafka::partitioner::partition_for_key;
use courier_kafka::{DeliveryReport, Producer, Record, ReportMode};
use futures::StreamExt;
use support::{read_back, Cluster};

const RECORDS: usize = 100_000;
const PARTITIONS: i32 = 6;

async fn run(cluster: Cluster) {
    let topic = "producer-e2e";
    cluster.create_topic(topic, PARTITIONS).await;
    let producer = Producer::builder()
        .bootstrap(&cluster.bootstrap())
        .set("linger.ms", "5")
        .build()
        .unwrap();
    let (sub, mut reports) = producer.subscribe(ReportMode::All);

    let produce = async move {
        for i in 0..RECORDS {
            let mut r = Record::to(topic)
                .value(format!("value-{i}"))
                .opaque(i as u64);
            if i % 2 == 0 {
                r = r.key(format!("key-{}", i % 1000));
            }
            sub.produce(r).await.expect("accepted");
        }
        // Dropping the subscriber ends the stream after the last report.
    };
    let collect = async {
        let mut got = Vec::with_capacity(RECORDS);
        while let Some(r) = reports.next().await {
            got.push(r);
        }
        got
    };
    let ((), got) = tokio::join!(produce, collect);
    producer.close().await;

    assert_eq!(got.len(), RECORDS, "exactly one report per record");
    let mut seen = vec![false; RECORDS];
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    let mut placed: HashMap<(i32, i64), usize> = HashMap::new();
    for r in &got {
        let DeliveryReport::Delivered(d) = r else {
            panic!("failed report: {r:?}")
        };
        // The record's tag is its number (a success report carries the
        // tag, not the record).
        let i = d.opaque as usize;
        assert!(!seen[i], "duplicate report for record {i}");
        seen[i] = true;
        let offset = d.offset.expect("acks=all reports an offset");
        if i % 2 == 0 {
            let key = format!("key-{}", i % 1000);
            assert_eq!(
                d.partition,
                partition_for_key(key.as_bytes(), PARTITIONS),
                "keyed record {i}"
            );
        }
        let prev = last_offset.insert(d.partition, offset);
        assert!(
            prev.is_none_or(|p| p < offset),
            "offsets in order for partition {}",
            d.partition
        );
        assert!(
            placed.insert((d.partition, offset), i).is_none(),
            "two reports claim one offset"
        );
    }

    let log = read_back(
        &cluster.bootstrap(),
        topic,
        PARTITIONS,
        RECORDS,
        Duration::from_secs(120),
    );
    assert_eq!(log.len(), RECORDS);
    for rec in &log {
        let i = placed[&(rec.partition, rec.offset)];
        assert_eq!(
            rec.value.as_deref(),
            Some(format!("value-{i}").as_bytes()),
            "log at {}/{}",
            rec.partition,
            rec.offset
        );
        let want_key = (i % 2 == 0).then(|| format!("key-{}", i % 1000).into_bytes());
        assert_eq!(rec.key, want_key);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_records_on_tansu() {
    run(Cluster::tansu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_records_on_the_mock_cluster() {
    run(Cluster::mock(3)).await;
}
