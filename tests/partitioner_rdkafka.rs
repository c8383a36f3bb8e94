//! Cross-check of Courier's keyed partitioning against librdkafka's
//! `murmur2_random` partitioner (the Java-compatible one): 10,000 random keys
//! produced through rust-rdkafka to a mock cluster, each record's partition
//! taken from rdkafka's delivery report and compared with
//! `courier_kafka::partitioner::partition_for_key`.

use std::sync::Mutex;
use std::time::Duration;

use courier_kafka::partitioner::partition_for_key;
use rdkafka::config::ClientConfig;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
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

#[test]
fn keyed_partitions_match_librdkafka_murmur2_for_10000_random_keys() {
    let cluster = rdkafka::mocking::MockCluster::new(3).expect("mock cluster");
    let mut rng = fastrand::Rng::with_seed(0xC0FFEE);
    for partitions in [7, 12] {
        let topic = format!("murmur2-{partitions}");
        cluster
            .create_topic(&topic, partitions, 1)
            .expect("create topic");
        let producer: BaseProducer<Collect> = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5")
            .create_with_context(Collect::default())
            .expect("rdkafka producer");

        // Keys of every length from 1 to 64 bytes, random content.
        let keys: Vec<Vec<u8>> = (0..10_000)
            .map(|i| {
                let len = 1 + i % 64;
                (0..len).map(|_| rng.u8(..)).collect()
            })
            .collect();
        for (i, key) in keys.iter().enumerate() {
            let mut rec = BaseRecord::with_opaque_to(&topic, Box::new(i))
                .key(key)
                .payload("");
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
        assert_eq!(delivered.len(), keys.len(), "every record delivered");
        let mut used = std::collections::HashSet::new();
        for (i, partition) in delivered {
            assert_eq!(
                partition,
                partition_for_key(&keys[i], partitions),
                "key {:02x?} with {partitions} partitions",
                keys[i]
            );
            used.insert(partition);
        }
        assert_eq!(
            used.len(),
            partitions as usize,
            "keys spread over every partition"
        );
    }
}
