//! Cross-check of Courier's `partitioner` property against librdkafka's
//! partitioners: for every value librdkafka takes, and several partition
//! counts, the same keys are produced through rust-rdkafka and through
//! Courier (a real producer, configured by the property) to one mock
//! cluster, and each record's partition is taken from each client's
//! delivery report. Where the key decides the partition, both clients and
//! `Partitioning::key_partition` agree on every key; where it does not
//! (`random`, an empty key under `consistent_random`, no key), both spread
//! records over the partitions.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use courier_kafka::partitioner::Partitioning;
use courier_kafka::{Producer, Record};
use rdkafka::config::ClientConfig;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _, ProducerContext};
use rdkafka::ClientContext;

#[derive(Default)]
struct Collect {
    delivered: Mutex<Vec<(usize, i32)>>,
}

impl ClientContext for Collect {}

impl ProducerContext for Collect {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, index: Self::DeliveryOpaque) {
        let msg = result.as_ref().expect("rdkafka delivery failed");
        self.delivered
            .lock()
            .unwrap()
            .push((*index, msg.partition()));
    }
}

/// Keys of every length from 0 to 48 bytes (so some empty), random
/// content, then records with no key.
fn keys(rng: &mut fastrand::Rng, n: usize) -> Vec<Option<Vec<u8>>> {
    let mut keys: Vec<Option<Vec<u8>>> = (0..n)
        .map(|i| Some((0..i % 49).map(|_| rng.u8(..)).collect()))
        .collect();
    keys.extend((0..50).map(|_| None));
    keys
}

/// Each key's partition as rdkafka, with `partitioner=value`, places it.
fn rdkafka_partitions(
    bootstrap: &str,
    topic: &str,
    value: &str,
    keys: &[Option<Vec<u8>>],
) -> Vec<i32> {
    let producer: BaseProducer<Collect> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("partitioner", value)
        .set("linger.ms", "5")
        .create_with_context(Collect::default())
        .expect("rdkafka producer");
    for (i, key) in keys.iter().enumerate() {
        let mut rec = BaseRecord::with_opaque_to(topic, Box::new(i)).payload("");
        if let Some(k) = key {
            rec = rec.key(k);
        }
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    producer.poll(Duration::from_millis(10));
                    rec = back;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    let delivered = producer.context().delivered.lock().unwrap().clone();
    assert_eq!(
        delivered.len(),
        keys.len(),
        "rdkafka delivered every record"
    );
    let mut partitions = vec![-1; keys.len()];
    for (i, p) in delivered {
        partitions[i] = p;
    }
    partitions
}

/// Each key's partition as Courier, with `partitioner=value`, places it.
fn courier_partitions(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    topic: &str,
    value: &str,
    keys: &[Option<Vec<u8>>],
) -> Vec<i32> {
    rt.block_on(async {
        let producer = Producer::builder()
            .bootstrap(bootstrap)
            .set("partitioner", value)
            .build()
            .expect("courier producer");
        let sends = keys.iter().map(|key| {
            let mut record = Record::to(topic).value("");
            if let Some(k) = key {
                record = record.key(k.clone());
            }
            producer.send(record)
        });
        let reports = futures::future::join_all(sends).await;
        producer.close().await;
        reports
            .into_iter()
            .map(|r| r.expect("courier delivered every record").partition)
            .collect()
    })
}

#[test]
fn every_librdkafka_partitioner_places_keys_as_rdkafka_does() {
    let cluster = rdkafka::mocking::MockCluster::new(3).expect("mock cluster");
    let bootstrap = cluster.bootstrap_servers();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(0xC0FFEE);
    for (value, partitioning) in Partitioning::ALL {
        for partitions in [1, 6, 7, 12] {
            let keys = keys(&mut rng, 2_000);
            let topic = format!("{value}-{partitions}");
            cluster
                .create_topic(&topic, partitions, 1)
                .expect("create topic");
            let theirs = rdkafka_partitions(&bootstrap, &topic, value, &keys);
            let ours = courier_partitions(&rt, &bootstrap, &topic, value, &keys);
            let (mut decided, mut spread_theirs, mut spread_ours) =
                (0, HashSet::new(), HashSet::new());
            for (i, key) in keys.iter().enumerate() {
                let want = key
                    .as_deref()
                    .and_then(|k| partitioning.key_partition(k, partitions));
                match want {
                    Some(p) => {
                        decided += 1;
                        assert_eq!(
                            theirs[i], p,
                            "{value}, {partitions} partitions: rdkafka placed key {key:02x?}"
                        );
                        assert_eq!(
                            ours[i], p,
                            "{value}, {partitions} partitions: Courier placed key {key:02x?}"
                        );
                    }
                    None => {
                        assert!(
                            (0..partitions).contains(&theirs[i])
                                && (0..partitions).contains(&ours[i])
                        );
                        spread_theirs.insert(theirs[i]);
                        spread_ours.insert(ours[i]);
                    }
                }
            }
            if partitioning == Partitioning::Random {
                assert_eq!(decided, 0, "random: no key decides a partition");
                assert_eq!(
                    spread_theirs.len(),
                    partitions as usize,
                    "rdkafka's random spreads"
                );
                assert_eq!(
                    spread_ours.len(),
                    partitions as usize,
                    "Courier's random spreads"
                );
            } else {
                // Every key but the empty ones of consistent_random.
                let empty = keys
                    .iter()
                    .filter(|k| k.as_deref() == Some(&[][..]))
                    .count();
                let want = if partitioning == Partitioning::ConsistentRandom {
                    2_000 - empty
                } else {
                    2_000
                };
                assert_eq!(decided, want, "{value}");
            }
        }
    }
}

/// Courier's default is the Java client's placement, not librdkafka's:
/// the same keys land elsewhere under `consistent_random` (what a
/// rust-rdkafka program gets by default), which is why the property
/// exists.
#[test]
fn the_default_is_murmur2_and_differs_from_rdkafkas_default() {
    assert_eq!(Partitioning::default(), Partitioning::Murmur2Random);
    let moved = (0..100)
        .map(|i| format!("key-{i}"))
        .filter(|k| {
            Partitioning::default().key_partition(k.as_bytes(), 6)
                != Partitioning::ConsistentRandom.key_partition(k.as_bytes(), 6)
        })
        .count();
    assert!(moved > 50, "{moved} of 100 keys move");
}
