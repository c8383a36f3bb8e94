//! First end-to-end proof, below the actors: negotiate versions, create a
//! 3-partition topic, send Produce requests built from our own record
//! batches, and read everything back with an independent client (the
//! rdkafka consumer). Keys, values, headers, timestamps and per-partition
//! order must all come back equal, for every codec, on Tansu and on
//! librdkafka's 3-broker mock cluster, and for every codec with levels at
//! a low and a high level (`compression.<codec>.level`) on Tansu.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use courier_kafka::connection::{Connection, ConnectionOptions};
use courier_kafka::protocol::messages::create_topics_request::CreatableTopic;
use courier_kafka::protocol::messages::metadata_request::MetadataRequestTopic;
use courier_kafka::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use courier_kafka::protocol::messages::{
    BrokerId, CreateTopicsRequest, MetadataRequest, ProduceRequest, TopicName,
};
use courier_kafka::protocol::record_batch::{BatchBuilder, Codec, Compression, ProducerStamp};
use courier_kafka::record::Header;
use kafka_protocol::protocol::StrBytes;
use support::{read_back, ReadRecord, Tansu};

const PARTITIONS: i32 = 3;
const PER_PARTITION: usize = 1000;
const BATCH_SIZE: usize = 16 * 1024;

struct Sent {
    partition: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
    timestamp: i64,
}

fn records_for(partition: i32) -> Vec<Sent> {
    let base = 1_700_000_000_000i64 + partition as i64 * 1_000_000;
    (0..PER_PARTITION)
        .map(|i| Sent {
            partition,
            // Every 10th key and 17th value is null, to cover nulls.
            key: (i % 10 != 0).then(|| format!("key-{partition}-{i}").into_bytes()),
            value: (i % 17 != 0).then(|| {
                let mut v = format!("value-{partition}-{i}-").into_bytes();
                v.extend(std::iter::repeat_n(b'x', i % 200));
                v
            }),
            headers: if i % 3 == 0 {
                vec![
                    Header {
                        key: "seq".into(),
                        value: Some(Bytes::from(i.to_string())),
                    },
                    Header {
                        key: "null-header".into(),
                        value: None,
                    },
                ]
            } else {
                Vec::new()
            },
            // Out of order within a batch on purpose: deltas may be negative.
            timestamp: base + (i as i64 * 7) % 1000,
        })
        .collect()
}

async fn connect(addr: &str) -> Connection {
    Connection::connect(addr, &ConnectionOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

/// Creates the topic, finds each partition's leader, and produces every
/// record in batches of up to `BATCH_SIZE`, in order, with acks=all.
/// Returns the bytes of every batch sent, added up.
async fn produce_all(
    bootstrap: &str,
    topic: &str,
    codec: Codec,
    sent: &[Vec<Sent>],
    create_with_request: bool,
) -> usize {
    let first = bootstrap.split(',').next().expect("a bootstrap address");
    let mut boot = connect(first).await;
    if create_with_request {
        create_topic(&mut boot, topic).await;
    }
    produce_to_leaders(&mut boot, topic, codec, sent).await
}

async fn create_topic(boot: &mut Connection, topic: &str) {
    let mut create = CreateTopicsRequest::default();
    let mut t = CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.num_partitions = PARTITIONS;
    t.replication_factor = 1;
    create.topics.push(t);
    create.timeout_ms = 10_000;
    let resp = boot.request(&create).await.expect("CreateTopics");
    assert_eq!(
        resp.topics[0].error_code, 0,
        "CreateTopics: {:?}",
        resp.topics[0]
    );
}

async fn produce_to_leaders(
    boot: &mut Connection,
    topic: &str,
    codec: Codec,
    sent: &[Vec<Sent>],
) -> usize {
    let mut bytes = 0;
    let mut md = MetadataRequest::default();
    let mut mt = MetadataRequestTopic::default();
    mt.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    md.topics = Some(vec![mt]);
    let mut leaders: HashMap<i32, BrokerId> = HashMap::new();
    let mut addrs = HashMap::new();
    for _ in 0..50 {
        let resp = boot.request(&md).await.expect("Metadata");
        for b in &resp.brokers {
            addrs.insert(b.node_id, format!("{}:{}", b.host, b.port));
        }
        leaders = resp.topics[0]
            .partitions
            .iter()
            .filter(|p| p.error_code == 0 && p.leader_id.0 >= 0)
            .map(|p| (p.partition_index, p.leader_id))
            .collect();
        if leaders.len() == PARTITIONS as usize {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leaders.len(), PARTITIONS as usize, "leaders for {topic}");

    let label = label(codec);
    let mut conns: HashMap<BrokerId, Connection> = HashMap::new();
    for (partition, records) in sent.iter().enumerate() {
        let partition = partition as i32;
        let leader = leaders[&partition];
        let conn = match conns.entry(leader) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(connect(&addrs[&leader]).await)
            }
        };
        let mut batches = Vec::new();
        let mut builder = BatchBuilder::new(BATCH_SIZE, codec);
        for r in records {
            let append = |b: &mut BatchBuilder| {
                b.try_append(
                    r.timestamp,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                )
            };
            if append(&mut builder).is_err() {
                let full = std::mem::replace(&mut builder, BatchBuilder::new(BATCH_SIZE, codec));
                batches.push(full.finish(ProducerStamp::NONE).unwrap());
                append(&mut builder).expect("a record fits an empty batch");
            }
        }
        batches.push(builder.finish(ProducerStamp::NONE).unwrap());
        assert!(
            batches.len() > 1,
            "the test should cover several batches per partition"
        );

        let mut next_offset = 0;
        for batch in batches {
            assert!(batch.len() <= BATCH_SIZE);
            assert_eq!(
                batch.compression(),
                codec.compression,
                "{label}: compressed"
            );
            bytes += batch.len();
            let mut req = ProduceRequest::default();
            req.acks = -1;
            req.timeout_ms = 10_000;
            let mut td = TopicProduceData::default();
            td.name = TopicName(StrBytes::from_string(topic.to_string()));
            let mut pd = PartitionProduceData::default();
            pd.index = partition;
            pd.records = Some(batch.bytes().clone());
            td.partition_data.push(pd);
            req.topic_data.push(td);
            let resp = conn.request(&req).await.expect("Produce");
            let p = &resp.responses[0].partition_responses[0];
            assert_eq!(
                p.error_code, 0,
                "Produce to {topic}/{partition} with {label}: {p:?}"
            );
            assert_eq!(
                p.base_offset, next_offset,
                "offsets are contiguous per partition"
            );
            next_offset += batch.record_count() as i64;
        }
    }
    bytes
}

/// A codec's name, with its level when it has one.
fn label(codec: Codec) -> String {
    match codec.level {
        Some(level) => format!("{} level {level}", codec.compression),
        None => codec.compression.to_string(),
    }
}

fn check(sent: &[Vec<Sent>], got: &[ReadRecord], codec: &str) {
    let mut got_by_partition: HashMap<i32, Vec<&ReadRecord>> = HashMap::new();
    for r in got {
        got_by_partition.entry(r.partition).or_default().push(r);
    }
    for records in sent {
        let partition = records[0].partition;
        let read = &got_by_partition[&partition];
        assert_eq!(
            read.len(),
            records.len(),
            "{codec}: count in partition {partition}"
        );
        for (i, (s, r)) in records.iter().zip(read).enumerate() {
            let ctx = format!("{codec}: partition {partition} record {i}");
            assert_eq!(r.offset, i as i64, "{ctx}: offset order");
            assert_eq!(r.key, s.key, "{ctx}: key");
            assert_eq!(r.value, s.value, "{ctx}: value");
            assert_eq!(r.timestamp, s.timestamp, "{ctx}: timestamp");
            let want_headers: Vec<_> = s
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                .collect();
            assert_eq!(r.headers, want_headers, "{ctx}: headers");
        }
    }
}

/// Runs every codec against one cluster. `create` makes the topic out of
/// band when the broker has no CreateTopics API (librdkafka's mock cluster).
fn run_all_codecs(bootstrap: &str, create: Option<&dyn Fn(&str)>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for codec in Compression::ALL {
        let topic = format!("wire-e2e-{codec}");
        if let Some(create) = create {
            create(&topic);
        }
        let sent: Vec<Vec<Sent>> = (0..PARTITIONS).map(records_for).collect();
        rt.block_on(produce_all(
            bootstrap,
            &topic,
            codec.into(),
            &sent,
            create.is_none(),
        ));
        let got = read_back(
            bootstrap,
            &topic,
            PARTITIONS,
            PARTITIONS as usize * PER_PARTITION,
            Duration::from_secs(60),
        );
        check(&sent, &got, codec.name());
    }
}

#[test]
fn every_codec_round_trips_through_tansu() {
    let broker = Tansu::start();
    run_all_codecs(&broker.bootstrap(), None);
}

/// KIP-390 levels reach the encoder: every codec with levels, at a low and
/// a high one, writes batches rdkafka reads back exactly, and the high
/// level's batches are smaller on these (compressible) records.
#[test]
fn every_codec_level_round_trips_through_tansu_and_a_higher_level_compresses_more() {
    let broker = Tansu::start();
    let bootstrap = broker.bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (codec, low, high) in [
        (Compression::Gzip, 1, 9),
        (Compression::Lz4, 1, 17),
        (Compression::Zstd, -5, 19),
    ] {
        let mut sizes = Vec::new();
        for level in [low, high] {
            let codec = codec.at_level(level);
            let topic = format!("wire-e2e-{}-level-{level}", codec.compression);
            let sent: Vec<Vec<Sent>> = (0..PARTITIONS).map(records_for).collect();
            let bytes = rt.block_on(produce_all(&bootstrap, &topic, codec, &sent, true));
            let got = read_back(
                &bootstrap,
                &topic,
                PARTITIONS,
                PARTITIONS as usize * PER_PARTITION,
                Duration::from_secs(60),
            );
            check(&sent, &got, &label(codec));
            sizes.push(bytes);
        }
        assert!(
            sizes[1] < sizes[0],
            "{codec}: level {high} wrote {} bytes, level {low} {}",
            sizes[1],
            sizes[0]
        );
        eprintln!(
            "{codec}: level {low} {} bytes, level {high} {} bytes",
            sizes[0], sizes[1]
        );
    }
}

#[test]
fn every_codec_round_trips_through_the_mock_cluster() {
    let cluster = rdkafka::mocking::MockCluster::new(3).expect("mock cluster");
    let create = |topic: &str| {
        cluster
            .create_topic(topic, PARTITIONS, 1)
            .expect("create topic")
    };
    run_all_codecs(&cluster.bootstrap_servers(), Some(&create));
}
