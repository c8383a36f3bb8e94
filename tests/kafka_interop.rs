//! Courier against Apache Kafka 4.1.1, the reference broker, with what it
//! wrote read back by clients that share no code with it: Kafka's Java
//! console consumer and producer, its log-segment dumper, and the rdkafka
//! consumer.
//!
//! Two clusters per test binary, each started once on first use
//! (`KafkaCluster::shared`): one broker, and three brokers (RF 3). Every
//! test makes its own topics, named with a random suffix.
//!
//! Checked:
//! - all four report paths (`send`, a subscription, an actor through the
//!   `Produce` message and `produce_to`, fire and forget): each record once
//!   in the log, each report naming where its record is;
//! - all five codecs: Java decodes Courier's batches (and the dumper shows
//!   each stored batch with that codec and a valid CRC); keys, values,
//!   offsets and create times match the delivery reports;
//! - acks 0, 1 and all: every record in the log exactly once;
//! - headers (repeated keys, empty and null values), null keys and values,
//!   and explicit partitions, read back by rdkafka;
//! - keyed records sit where Java's own producer puts the same keys;
//! - a LogAppendTime topic: the report carries the broker's time;
//! - a record over the topic's `max.message.bytes` fails with the broker's
//!   MESSAGE_TOO_LARGE while its neighbours are delivered, whether it
//!   travels in a batch of its own or shares one (which Courier then
//!   splits);
//! - the idempotent producer with 5 requests in flight on 3 brokers: every
//!   record once, in order per key, and the stored batches carry one
//!   producer id with gapless sequences;
//! - records reach a new leader after the old one is SIGKILLed (this test
//!   starts a 3-broker cluster of its own);
//! - the harness itself: brokers die with the test binary, and outlive the
//!   test thread that started them;
//! - `courier_kafka::admin` and the CLI's `topic create|describe|delete` and
//!   `cluster`, each result checked with Kafka's own tools (TopicCommand,
//!   ConfigCommand, ClusterTool, MetadataQuorumCommand), not read back
//!   through Courier: topic ids, leaders, replicas and ISR on RF 3,
//!   partition counts, deletion, topic configs and their sources, the
//!   cluster id and the active controller.
//!
//! Run: `cargo test --test kafka_interop` (needs `bash scripts/install-tools.sh`).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use courier_kafka::partitioner::partition_for_key;
use courier_kafka::record::Header;
use courier_kafka::BrokerError;
use courier_kafka::{DeliveryReport, ErrorKind, Producer, Record, ReportMode};
use futures::StreamExt;
use support::kafka::{process_state, JavaRecord, KafkaCluster};
use support::read_back;

/// How long the Java console consumer waits for a record before giving up.
const IDLE: Duration = Duration::from_secs(30);

/// `name` with a random suffix: tests share a cluster.
fn unique(name: &str) -> String {
    format!("{name}-{:08x}", fastrand::u32(..))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Produces `records` through one subscription and returns every report
/// that subscription received (the stream ends once all are in).
/// Produces `records` through one subscription and returns every report,
/// with the records as produced, each tagged (`Record::opaque`) with its
/// place among them: a success report carries the tag (not the record),
/// so `produced[d.opaque]` is the record a report is about. A failure
/// hands its record back, which must be the one produced.
async fn produce_all(
    producer: &Producer,
    records: Vec<Record>,
) -> (Vec<DeliveryReport>, Vec<Record>) {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.opaque(i as u64))
        .collect();
    let produced = records.clone();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    let produce = async move {
        for r in records {
            sub.produce(r).await.expect("accepted");
        }
    };
    let collect = async {
        let mut got = Vec::new();
        while let Some(r) = stream.next().await {
            got.push(r);
        }
        got
    };
    let ((), got) = tokio::join!(produce, collect);
    for r in &got {
        if let Some(back) = r.failed_record() {
            assert_eq!(
                back, &produced[back.opaque as usize],
                "handed back as produced"
            );
        }
    }
    (got, produced)
}

fn text(b: Option<&bytes::Bytes>) -> Option<String> {
    b.map(|b| String::from_utf8(b.to_vec()).expect("UTF-8"))
}

// ---------------------------------------------------------------------------
// One broker.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_is_decoded_by_java() {
    const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
    const PER_CODEC: usize = 200;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("codecs");
    kafka.create_topic(&topic, 5, 1, &[]).await;

    // One producer per codec, each writing to its own partition.
    let mut reports = Vec::new();
    for (p, codec) in CODECS.iter().enumerate() {
        let producer = Producer::builder()
            .bootstrap(&kafka.bootstrap())
            .set("compression.type", codec)
            .set("linger.ms", "20")
            .build()
            .unwrap();
        let records = (0..PER_CODEC)
            .map(|i| {
                // Repetitive text, so every codec shrinks the batch (Courier
                // sends a batch uncompressed when compressing does not pay).
                let value = format!("{codec}-{i} {}", "courier writes, kafka reads; ".repeat(8));
                Record::to(topic.as_str())
                    .partition(p as i32)
                    .key(format!("key-{i}"))
                    .value(value)
            })
            .collect();
        let (got, produced) = produce_all(&producer, records).await;
        assert_eq!(got.len(), PER_CODEC, "{codec}: one report per record");
        reports.extend(got.into_iter().map(|r| {
            let record = produced[r.opaque() as usize].clone();
            (r, record)
        }));
        producer.close().await;
    }

    let java = kafka.console_consume(&topic, CODECS.len() * PER_CODEC, IDLE);
    assert_eq!(java.len(), CODECS.len() * PER_CODEC);
    let mut by_value: HashMap<String, &JavaRecord> = HashMap::new();
    for r in &java {
        let v = r.value.clone().expect("a value");
        assert!(
            by_value.insert(v, r).is_none(),
            "a record twice in the log: {r:?}"
        );
    }
    for (report, record) in &reports {
        let DeliveryReport::Delivered(d) = report else {
            panic!("failed: {report:?}")
        };
        let value = text(record.value.as_ref()).unwrap();
        let codec = value.split('-').next().unwrap();
        let j = by_value
            .get(&value)
            .unwrap_or_else(|| panic!("{codec}: Java did not read {value:?}"));
        assert_eq!(
            (j.partition, Some(j.offset)),
            (d.partition, d.offset),
            "{codec}: where the report says"
        );
        assert_eq!(j.key, text(record.key.as_ref()), "{codec}: key");
        assert_eq!(j.timestamp_type, "CreateTime", "{codec}");
        assert_eq!(j.timestamp, d.timestamp, "{codec}: create time");
        assert!(j.headers.is_empty(), "{codec}: no headers");
    }

    // The log holds batches of the asked-for codec, which Kafka's own CRC
    // check accepts, and nothing else.
    let dumped = kafka.dump_log(&topic);
    for (p, codec) in CODECS.iter().enumerate() {
        let batches = &dumped[&(p as i32, 0)];
        assert!(!batches.is_empty(), "{codec}: no batches on disk");
        for b in batches {
            assert_eq!(&b.codec, codec, "{codec}: stored batch {b:?}");
            assert!(b.crc_valid, "{codec}: CRC of stored batch {b:?}");
        }
        let stored: i64 = batches.iter().map(|b| b.count).sum();
        assert_eq!(stored, PER_CODEC as i64, "{codec}: records on disk");
    }
}

/// A new producer's first record on Apache Kafka waits for no retry
/// backoff: its topic's metadata is asked for while the producer's first
/// (bootstrap) metadata request is under way, and is asked for again as
/// soon as that one is answered, as the Java client's
/// `requestUpdateForNewTopics` does, not `retry.backoff.ms` later. With
/// every backoff an hour long, a record that waited for one would hang.
/// (Tansu answers the first request before the topic is asked for;
/// `tests/faults.rs` checks the same there.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_record_on_kafka_waits_for_no_backoff() {
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("first-record");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    // A fresh broker may answer the first InitProducerId with
    // COORDINATOR_LOAD_IN_PROGRESS, which is retried after a backoff (as
    // Java does): one producer at the defaults first.
    let warm = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    warm.send(Record::to(topic.as_str()).value("warm"))
        .await
        .unwrap();
    warm.close().await;
    for _ in 0..3 {
        let producer = Producer::builder()
            .bootstrap(&kafka.bootstrap())
            .set("retry.backoff.ms", "3600000")
            .set("retry.backoff.max.ms", "3600000")
            .build()
            .unwrap();
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            producer.send(Record::to(topic.as_str()).value("first")),
        )
        .await
        .expect("the first record waited for a backoff");
        assert!(sent.unwrap().offset.is_some());
        producer.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_reports_the_brokers_time() {
    const N: usize = 50;
    // Long before any broker clock: a report carrying it cannot pass as
    // the broker's time.
    const CREATE_TIME: i64 = 1_000_000_000_000;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("log-append-time");
    kafka
        .create_topic(&topic, 1, 1, &[("message.timestamp.type", "LogAppendTime")])
        .await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    let records = (0..N)
        .map(|i| {
            Record::to(topic.as_str())
                .value(format!("lat-{i}"))
                .timestamp(CREATE_TIME + i as i64)
        })
        .collect();
    let before = now_ms();
    let (reports, produced) = produce_all(&producer, records).await;
    let after = now_ms();
    producer.close().await;
    assert_eq!(reports.len(), N);

    let java = kafka.console_consume(&topic, N, IDLE);
    let at: HashMap<i64, &JavaRecord> = java.iter().map(|r| (r.offset, r)).collect();
    for report in reports {
        let d = report.into_result().expect("delivered");
        let record = &produced[d.opaque as usize];
        let create = record.timestamp.expect("create time set");
        let j = at[&d.offset.expect("an offset")];
        assert_eq!(j.value, text(record.value.as_ref()));
        assert_eq!(j.timestamp_type, "LogAppendTime");
        assert_eq!(
            d.timestamp, j.timestamp,
            "the report carries the stored time"
        );
        assert_ne!(d.timestamp, create, "not the create time sent");
        // Same machine, same clock (the broker may round to the batch).
        assert!(
            (before - 1000..=after + 1000).contains(&d.timestamp),
            "{} is not between {before} and {after}",
            d.timestamp
        );
    }
}

/// Produces 4 small records, one of `BIG` bytes, and 4 small ones again, all
/// at once, to a topic whose `max.message.bytes` is 2000, with
/// `batch.size` as given; returns the delivered records by offset and the
/// failures as (value prefix, kind, attempts), after checking that the log
/// holds exactly the delivered ones.
async fn produce_around_a_big_record(
    batch_size: &str,
) -> (BTreeMap<i64, String>, Vec<(String, ErrorKind, u32)>) {
    const BIG: usize = 5000;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("too-large");
    kafka
        .create_topic(&topic, 1, 1, &[("max.message.bytes", "2000")])
        .await;
    // max.request.size (1 MiB) lets the big record through the producer;
    // only the broker refuses it. The long linger makes one batch of the
    // small records before and one after, at least.
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("linger.ms", "100")
        .set("batch.size", batch_size)
        .build()
        .unwrap();
    let mut records = Vec::new();
    for i in 0..4 {
        records.push(Record::to(topic.as_str()).value(format!("small-{i}")));
    }
    records.push(Record::to(topic.as_str()).value(format!("big-{BIG} {}", "x".repeat(BIG))));
    for i in 4..8 {
        records.push(Record::to(topic.as_str()).value(format!("small-{i}")));
    }
    let (reports, produced) = produce_all(&producer, records).await;
    producer.close().await;
    assert_eq!(reports.len(), 9, "one report per record");

    let mut delivered = BTreeMap::new();
    let mut failed = Vec::new();
    for r in reports {
        let value = text(produced[r.opaque() as usize].value.as_ref()).unwrap();
        match r {
            DeliveryReport::Delivered(d) => {
                delivered.insert(d.offset.unwrap(), value);
            }
            DeliveryReport::Failed(e) => {
                failed.push((value[..value.len().min(9)].to_string(), e.kind, e.attempts))
            }
        }
    }
    if !delivered.is_empty() {
        let java = kafka.console_consume(&topic, delivered.len(), IDLE);
        let stored: BTreeMap<i64, String> = java
            .iter()
            .map(|r| (r.offset, r.value.clone().unwrap()))
            .collect();
        assert_eq!(
            stored, delivered,
            "the log holds what was reported delivered"
        );
    }
    let end = kafka.end_offsets(&topic, 1);
    assert_eq!(end, vec![delivered.len() as i64], "and nothing else");
    (delivered, failed)
}

/// The broker's MESSAGE_TOO_LARGE reaches the big record's report, is not
/// retried, and touches no other batch. The big record is over
/// `batch.size`, so it travels in a batch of its own (as in the Java
/// client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_over_max_message_bytes_fails_alone_with_the_brokers_error() {
    only_the_big_record_fails("1024", 1).await;
}

/// Produces the big record among 8 small ones with `batch_size`: only the
/// big one fails, with MESSAGE_TOO_LARGE, after `attempts` attempts.
async fn only_the_big_record_fails(batch_size: &str, attempts: u32) {
    let (delivered, failed) = produce_around_a_big_record(batch_size).await;
    assert_eq!(
        failed,
        vec![(
            "big-5000 ".to_string(),
            ErrorKind::Broker(BrokerError::MessageTooLarge),
            attempts
        )],
        "only the big record fails, after {attempts} attempt(s)"
    );
    assert_eq!(delivered.len(), 8, "its 8 neighbours are delivered");
}

/// The same with the Java client's default `batch.size` (16384), where the
/// big record shares a batch with its neighbours: the broker refuses the whole batch
/// (its size is over `max.message.bytes`). Courier splits it into one
/// batch per record, so only the big record fails (at its second attempt)
/// and its 8 neighbours are delivered. (librdkafka fails all 9; the Java
/// client splits into batches of `batch.size`, here the same batch again,
/// and loops until `delivery.timeout.ms`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_over_max_message_bytes_fails_alone_in_a_shared_batch() {
    only_the_big_record_fails("16384", 2).await;
}

// ---------------------------------------------------------------------------
// Three brokers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_one_and_all_each_write_every_record_once() {
    const N: usize = 300;
    const PARTITIONS: i32 = 3;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    for acks in ["0", "1", "all"] {
        let topic = unique(&format!("acks-{acks}"));
        kafka.create_topic(&topic, PARTITIONS, 3, &[]).await;
        let producer = Producer::builder()
            .bootstrap(&kafka.bootstrap())
            .set("acks", acks)
            .build()
            .unwrap();
        let records = (0..N)
            .map(|i| {
                Record::to(topic.as_str())
                    .key(format!("k{}", i % 17))
                    .value(format!("acks{acks}-{i}"))
            })
            .collect();
        let (reports, produced) = produce_all(&producer, records).await;
        producer.close().await;
        assert_eq!(reports.len(), N, "acks={acks}: one report per record");

        if acks != "all" {
            // The high watermark moves once the followers have the
            // records, which acks 0 and 1 do not wait for (nor, with
            // acks=0, for the leader's append): let it catch up. The count
            // below still fails on a lost or doubled record.
            kafka.wait_for_records(&topic, PARTITIONS, N);
        }
        let log = kafka.read_log(&topic, PARTITIONS);
        assert_eq!(log.len(), N, "acks={acks}: exactly {N} records in the log");
        let at: HashMap<(i32, i64), Option<Vec<u8>>> = log
            .iter()
            .map(|r| ((r.partition, r.offset), r.value.clone()))
            .collect();
        let values: HashSet<Vec<u8>> = log.iter().filter_map(|r| r.value.clone()).collect();
        assert_eq!(values.len(), N, "acks={acks}: every value once");
        for report in reports {
            let d = report.into_result().expect("delivered");
            let record = &produced[d.opaque as usize];
            let value = record.value.as_ref().unwrap().to_vec();
            assert!(
                values.contains(&value),
                "acks={acks}: {value:?} is in the log"
            );
            assert_eq!(
                d.partition,
                partition_for_key(record.key.as_ref().unwrap(), PARTITIONS)
            );
            match (acks, d.offset) {
                ("0", None) => {}
                ("0", Some(o)) => panic!("acks=0 cannot know an offset, reported {o}"),
                (_, None) => panic!("acks={acks}: no offset reported"),
                (_, Some(o)) => assert_eq!(
                    at[&(d.partition, o)].as_ref(),
                    Some(&value),
                    "acks={acks}: the record at the reported offset"
                ),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_nulls_and_explicit_partitions_read_back_by_rdkafka() {
    const N: usize = 120;
    const PARTITIONS: i32 = 3;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let topic = unique("headers");
    kafka.create_topic(&topic, PARTITIONS, 3, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    let records = (0..N)
        .map(|i| {
            let mut r = Record::to(topic.as_str()).partition((i % 3) as i32);
            if i % 4 != 0 {
                r = r.key(format!("hk-{i}"));
            }
            if i % 5 != 0 {
                r = r.value(format!("hv-{i}"));
            } else {
                // Null value: the index goes in a header instead.
            }
            r = r.header("index", i.to_string());
            if i % 2 == 0 {
                r = r
                    .header("dup", "first")
                    .header("empty", "")
                    .header("dup", "second");
                r.headers.push(Header {
                    key: "null".into(),
                    value: None,
                });
            }
            r
        })
        .collect();
    let (reports, produced) = produce_all(&producer, records).await;
    producer.close().await;
    assert_eq!(reports.len(), N);

    let log = read_back(
        &kafka.bootstrap(),
        &topic,
        PARTITIONS,
        N,
        Duration::from_secs(60),
    );
    assert_eq!(log.len(), N);
    let at: HashMap<(i32, i64), &support::ReadRecord> =
        log.iter().map(|r| ((r.partition, r.offset), r)).collect();
    let mut seen = HashSet::new();
    for report in reports {
        let d = report.into_result().expect("delivered");
        let record = &produced[d.opaque as usize];
        let i: usize = std::str::from_utf8(record.headers[0].value.as_ref().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(seen.insert(i), "one report for record {i}");
        assert_eq!(d.partition, (i % 3) as i32, "the explicit partition");
        let stored = at[&(d.partition, d.offset.unwrap())];
        assert_eq!(stored.key, record.key.as_ref().map(|k| k.to_vec()), "{i}");
        assert_eq!(
            stored.value,
            record.value.as_ref().map(|v| v.to_vec()),
            "{i}"
        );
        let want: Vec<(String, Option<Vec<u8>>)> = record
            .headers
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        assert_eq!(stored.headers, want, "headers of {i}, in order");
        assert_eq!(stored.timestamp, d.timestamp, "{i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_land_where_javas_producer_puts_them() {
    const KEYS: usize = 400;
    const PARTITIONS: i32 = 7;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let ours = unique("murmur2-courier");
    let theirs = unique("murmur2-java");
    kafka.create_topic(&ours, PARTITIONS, 1, &[]).await;
    kafka.create_topic(&theirs, PARTITIONS, 1, &[]).await;
    // Every length from 0 to 40 bytes (murmur2's tail cases), multi-byte
    // UTF-8 included. The empty key is a key: murmur2 hashes it.
    let keys: Vec<String> = (0..KEYS)
        .map(|i| match i {
            0 => String::new(),
            _ if i % 3 == 0 => format!("ключ-{i}"),
            _ => format!("{i}-{}", "k".repeat(i % 41)),
        })
        .collect();

    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    let records = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            Record::to(ours.as_str())
                .key(k.clone())
                .value(format!("v-{i}"))
        })
        .collect();
    let (reports, produced) = produce_all(&producer, records).await;
    producer.close().await;
    let java_input: Vec<(String, String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), format!("v-{i}")))
        .collect();
    kafka.console_produce(&theirs, &java_input);

    let partition_of = |topic: &str| -> HashMap<String, i32> {
        read_back(
            &kafka.bootstrap(),
            topic,
            PARTITIONS,
            KEYS,
            Duration::from_secs(60),
        )
        .into_iter()
        .map(|r| (String::from_utf8(r.key.unwrap()).unwrap(), r.partition))
        .collect()
    };
    let stored_ours = partition_of(&ours);
    let stored_java = partition_of(&theirs);
    assert_eq!(stored_java.len(), KEYS, "Java wrote every key once");
    assert_eq!(reports.len(), KEYS);
    let mut spread = HashSet::new();
    for report in reports {
        let d = report.into_result().expect("delivered");
        let key = text(produced[d.opaque as usize].key.as_ref()).unwrap();
        assert_eq!(
            stored_ours[&key], d.partition,
            "{key:?}: stored where reported"
        );
        assert_eq!(
            stored_java[&key], d.partition,
            "{key:?}: where Java's producer puts it"
        );
        assert_eq!(partition_for_key(key.as_bytes(), PARTITIONS), d.partition);
        spread.insert(d.partition);
    }
    assert_eq!(spread.len(), PARTITIONS as usize, "every partition used");
}

/// KIP-794 on Kafka: keyless records sent one at a time (each batch goes
/// at its linger with one record) stay on a partition for `batch.size`
/// bytes (2,000 here: about eight 200-byte records), then move; with
/// `partitioner.ignore.keys` one key's records do the same. Every record
/// is read back where its report says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_partitions_move_after_batch_size_bytes_on_kafka() {
    const PARTITIONS: i32 = 6;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let topic = unique("kip794");
    kafka.create_topic(&topic, PARTITIONS, 1, &[]).await;
    let mut placed = HashMap::new();
    for ignore_keys in ["false", "true"] {
        let producer = Producer::builder()
            .bootstrap(&kafka.bootstrap())
            .set("batch.size", "2000")
            .set("partitioner.ignore.keys", ignore_keys)
            .build()
            .unwrap();
        let mut partitions = Vec::new();
        for i in 0..48 {
            let mut r = Record::to(topic.as_str())
                .value(format!("{ignore_keys}-{i:03}-{}", "x".repeat(190)));
            if ignore_keys == "true" {
                r = r.key("one-key");
            }
            let d = producer.send(r).await.expect("delivered");
            placed.insert(format!("{ignore_keys}-{i:03}"), d.partition);
            partitions.push(d.partition);
        }
        producer.close().await;
        let mut runs = vec![1usize];
        for w in partitions.windows(2) {
            if w[0] == w[1] {
                *runs.last_mut().unwrap() += 1;
            } else {
                runs.push(1);
            }
        }
        // A move may draw the same partition again: a run is one stay or
        // more. The first and last runs may be cut short.
        let inner = &runs[1..runs.len().saturating_sub(1)];
        assert!(
            runs.len() >= 4 && inner.iter().all(|r| *r >= 6),
            "ignore.keys={ignore_keys}: runs {runs:?} of {partitions:?}"
        );
    }
    let stored = read_back(
        &kafka.bootstrap(),
        &topic,
        PARTITIONS,
        96,
        Duration::from_secs(60),
    );
    assert_eq!(stored.len(), 96, "each record once");
    for r in stored {
        let value = String::from_utf8(r.value.unwrap()).unwrap();
        let tag = &value[..value.len() - 191];
        assert_eq!(placed[tag], r.partition, "{tag} stored where reported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_writes_each_record_once_in_order_on_three_replicas() {
    const N: usize = 20_000;
    const KEYS: usize = 60;
    const PARTITIONS: i32 = 3;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let topic = unique("idempotent");
    kafka
        .create_topic(&topic, PARTITIONS, 3, &[("min.insync.replicas", "2")])
        .await;
    // Small batches and a short linger keep five requests in flight per
    // connection.
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("max.in.flight.requests.per.connection", "5")
        .set("batch.size", "2048")
        .set("linger.ms", "1")
        .build()
        .unwrap();
    let records = (0..N)
        .map(|i| {
            let k = i % KEYS;
            Record::to(topic.as_str())
                .key(format!("key-{k}"))
                .value(format!("key-{k} {}", i / KEYS))
        })
        .collect();
    let (reports, produced) = produce_all(&producer, records).await;
    let (producer_id, epoch) = producer.producer_id().expect("idempotent by default");
    producer.close().await;
    assert_eq!(reports.len(), N, "one report per record");

    let log = kafka.read_log(&topic, PARTITIONS);
    assert_eq!(log.len(), N, "no duplicates in the log");
    let at: HashMap<(i32, i64), &support::ReadRecord> =
        log.iter().map(|r| ((r.partition, r.offset), r)).collect();
    let mut reported = HashSet::new();
    for report in &reports {
        let DeliveryReport::Delivered(d) = report else {
            panic!("failed: {report:?}")
        };
        let pos = (d.partition, d.offset.unwrap());
        assert!(reported.insert(pos), "two reports name {pos:?}");
        assert_eq!(
            at[&pos].value.as_deref(),
            produced[d.opaque as usize].value.as_deref()
        );
    }
    // Per key, the log holds 0, 1, 2, ... in offset order.
    let mut next: HashMap<Vec<u8>, usize> = HashMap::new();
    for r in &log {
        let value = String::from_utf8(r.value.clone().unwrap()).unwrap();
        let (key, seq) = value.split_once(' ').unwrap();
        assert_eq!(r.key.as_deref(), Some(key.as_bytes()));
        let want = next.entry(key.as_bytes().to_vec()).or_default();
        assert_eq!(
            seq.parse::<usize>().unwrap(),
            *want,
            "{key}: in order, once"
        );
        *want += 1;
    }
    assert_eq!(next.len(), KEYS);

    // On every replica: one producer id and epoch, sequences from 0 with no
    // gap, offsets with no gap, and the same batches as the other replicas.
    let dumped = kafka.dump_log(&topic);
    for p in 0..PARTITIONS {
        let replicas: BTreeMap<i32, &Vec<_>> = dumped
            .iter()
            .filter(|((partition, _), _)| *partition == p)
            .map(|((_, broker), batches)| (*broker, batches))
            .collect();
        assert_eq!(replicas.len(), 3, "partition {p} on three brokers");
        let first = *replicas.values().next().unwrap();
        assert!(
            first.len() > 1,
            "partition {p}: many batches ({})",
            first.len()
        );
        for (broker, batches) in &replicas {
            assert_eq!(*batches, first, "partition {p}: broker {broker} differs");
            let (mut sequence, mut offset) = (0, 0);
            for b in batches.iter() {
                assert_eq!((b.producer_id, b.producer_epoch), (producer_id, epoch));
                assert_eq!(b.base_sequence, sequence, "partition {p}: {b:?}");
                assert_eq!(b.base_offset, offset, "partition {p}: {b:?}");
                assert_eq!(i64::from(b.last_sequence - b.base_sequence) + 1, b.count);
                assert!(b.crc_valid);
                sequence = b.last_sequence + 1;
                offset = b.last_offset + 1;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Found while building the harness.

/// A partition's leader is killed (SIGKILL, so no clean shutdown); after
/// `broker.session.timeout.ms` (4 s here) the controller fences it and
/// moves leadership to another replica. Courier must find the new leader
/// and deliver. It used to fetch metadata once, when the connection
/// dropped (before the fencing, so it still named the dead leader), and
/// never again while its reconnects to the dead broker failed: the records
/// waited for `metadata.max.age.ms` (5 min) and timed out. Now every failed
/// connect asks for metadata, as the Java client does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_reach_the_new_leader_after_the_old_one_is_killed() {
    const N: usize = 20;
    let kafka = KafkaCluster::start(3);
    let topic = unique("failover");
    kafka.create_topic(&topic, 1, 3, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("request.timeout.ms", "10000")
        .set("delivery.timeout.ms", "30000")
        .build()
        .unwrap();
    producer
        .send(Record::to(topic.as_str()).value("before"))
        .await
        .expect("delivered before the kill");
    let leader = kafka.leader(&topic, 0).await;
    kafka.kill(leader);
    let records = (0..N)
        .map(|i| Record::to(topic.as_str()).value(format!("after-{i}")))
        .collect();
    let (reports, _) = produce_all(&producer, records).await;
    producer.close().await;
    let failed: Vec<String> = reports
        .iter()
        .filter_map(|r| match r {
            DeliveryReport::Failed(e) => Some(e.message.clone()),
            DeliveryReport::Delivered(_) => None,
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {N} failed: {:?}",
        failed.len(),
        failed.first()
    );
    assert_ne!(kafka.leader(&topic, 0).await, leader, "a new leader");
    assert_eq!(kafka.end_offsets(&topic, 1), vec![N as i64 + 1]);
}

// ---------------------------------------------------------------------------
// The harness itself.

/// The harness promises that every JVM dies with the test binary, also
/// for a `static` cluster that is never dropped, and that a broker outlives
/// the (short-lived) test thread that started it. This runs the test binary
/// again as a child that starts a shared cluster from a thread that then
/// ends, checks the broker still runs, and exits; then the broker must go.
#[test]
fn brokers_die_with_the_test_binary_and_outlive_the_thread_that_started_them() {
    if std::env::var_os("COURIER_KAFKA_CHILD").is_some() {
        let (pid, address) = std::thread::spawn(|| {
            let kafka = KafkaCluster::shared(1);
            (kafka.pid(0).unwrap(), kafka.address(0))
        })
        .join()
        .unwrap();
        assert!(
            std::net::TcpStream::connect(&address).is_ok(),
            "the broker died with the thread that started it"
        );
        println!("KAFKA_PID {pid}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "brokers_die_with_the_test_binary_and_outlive_the_thread_that_started_them",
            "--nocapture",
        ])
        .env("COURIER_KAFKA_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("KAFKA_PID "))
        .unwrap_or_else(|| panic!("no KAFKA_PID in:\n{stdout}"))
        .parse()
        .unwrap();
    // Dead: gone, or a zombie nobody has reaped yet.
    let alive = || process_state(pid).is_some_and(|s| s != 'Z');
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "broker {pid} outlived its test binary"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Courier agrees with Apache Kafka on each API's version: the newest both
/// speak. The broker's ranges are read here from a raw ApiVersions v3
/// exchange on a socket of the test's own, not from Courier's negotiation,
/// and the expected choice is computed from them and Courier's table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_negotiated_from_the_brokers_api_versions() {
    use bytes::BytesMut;
    use courier_kafka::connection::{Connection, ConnectionOptions};
    use courier_kafka::protocol::message::{decode_response, encode_request};
    use courier_kafka::protocol::messages::ApiVersionsRequest;
    use courier_kafka::protocol::versions::SUPPORTED;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let kafka = KafkaCluster::shared(1);
    let addr = kafka.address(0);
    let conn = Connection::connect(&addr, &ConnectionOptions::default())
        .await
        .expect("connect");
    let agreed = *conn.versions();

    let mut socket = tokio::net::TcpStream::connect(&addr).await.expect("socket");
    let mut buf = BytesMut::new();
    let req = ApiVersionsRequest::default()
        .with_client_software_name(kafka_protocol::protocol::StrBytes::from_static_str("test"))
        .with_client_software_version(kafka_protocol::protocol::StrBytes::from_static_str("1"));
    encode_request(&mut buf, 7, None, 3, &req).expect("encode");
    socket.write_all(&buf).await.expect("write");
    let len = socket.read_i32().await.expect("length") as usize;
    let mut frame = vec![0u8; len];
    socket.read_exact(&mut frame).await.expect("frame");
    let (correlation, resp) =
        decode_response::<ApiVersionsRequest>(bytes::Bytes::from(frame), 3).expect("decode");
    assert_eq!((correlation, resp.error_code), (7, 0));

    let mut checked = 0;
    for s in SUPPORTED {
        let broker = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == s.api as i16)
            .map(|k| (k.min_version, k.max_version));
        let want = broker
            .map(|(lo, hi)| (s.min.max(lo), s.max.min(hi)))
            .filter(|(lo, hi)| lo <= hi)
            .map(|(_, hi)| hi);
        assert_eq!(
            agreed.get(s.api),
            want,
            "{:?}: Courier speaks {}..={}, Kafka {broker:?}",
            s.api,
            s.min,
            s.max
        );
        checked += 1;
        eprintln!("{:?}: Kafka {broker:?}, agreed v{want:?}", s.api);
    }
    assert_eq!(checked, SUPPORTED.len());
    // Kafka 4.1.1 speaks every version Courier does.
    assert_eq!(agreed.produce, 12);
}

/// All four ways to produce, on Apache Kafka, in one topic: `send().await`,
/// a subscription, an actor (the `Produce` message and `produce_to`), and
/// fire and forget. Each record is in the log exactly once, each report
/// names where its record is, and each path got exactly its own reports
/// (`support::paths::every_report_path`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_report_path_on_kafka() {
    const PARTITIONS: i32 = 3;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("paths");
    kafka.create_topic(&topic, PARTITIONS, 1, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("linger.ms", "5")
        .build()
        .unwrap();
    support::paths::every_report_path(producer, &topic, 200, || kafka.read_log(&topic, PARTITIONS))
        .await;
}

/// Where a report said its record went, or why it failed.
type Outcome = Result<(i32, Option<i64>), ErrorKind>;

/// Stamps each record with a `lineage` header naming its tag (replacing
/// one already there), and keeps, by tag, every report `on_report` saw.
#[derive(Default)]
struct Lineage {
    seen: std::sync::Mutex<HashMap<u64, Vec<Outcome>>>,
}

impl courier_kafka::ProducerInterceptor for Lineage {
    fn on_send(&self, record: &Record) -> Option<Record> {
        let mut r = record.clone();
        r.headers.retain(|h| h.key != "lineage");
        Some(r.header("lineage", record.opaque.to_string()))
    }

    fn on_report(&self, report: &DeliveryReport) {
        let outcome = match report {
            DeliveryReport::Delivered(d) => Ok((d.partition, d.offset)),
            DeliveryReport::Failed(e) => Err(e.kind),
        };
        let mut seen = self.seen.lock().unwrap();
        seen.entry(report.opaque()).or_default().push(outcome);
    }
}

/// Panics in `on_send` for every 25th record (and marks the others with a
/// `flaky` header), and in `on_report` for the record after each of those.
struct Flaky;

impl courier_kafka::ProducerInterceptor for Flaky {
    fn on_send(&self, record: &Record) -> Option<Record> {
        assert!(record.opaque % 25 != 0, "planted on_send panic");
        Some(record.clone().header("flaky", "yes"))
    }

    fn on_report(&self, report: &DeliveryReport) {
        assert!(report.opaque() % 25 != 1, "planted on_report panic");
    }
}

/// Producer interceptors on Apache Kafka, through every report path
/// (`support::paths::every_report_path`: `send`, a subscription, an actor,
/// fire and forget) plus the blocking `send_blocking` and a record the
/// broker refuses MESSAGE_TOO_LARGE, sent and fire-and-forget: the rdkafka
/// consumer finds each record with the headers `on_send` added (none from
/// an interceptor that panicked for it, and every path's checks still
/// hold: nothing lost, nothing doubled), and `on_report` saw each record
/// exactly once, at the partition and offset where the reader found it,
/// or with the broker's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptors_change_records_and_see_every_report_once_on_kafka() {
    const PARTITIONS: i32 = 3;
    const N: usize = 100;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("intercepted");
    let small = unique("intercepted-small");
    kafka.create_topic(&topic, PARTITIONS, 1, &[]).await;
    kafka
        .create_topic(&small, 1, 1, &[("max.message.bytes", "2000")])
        .await;
    let lineage = std::sync::Arc::new(Lineage::default());
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("linger.ms", "5")
        .interceptor(Flaky)
        .interceptor(lineage.clone())
        .build()
        .unwrap();
    // Refused by the broker: one report each, the broker's error.
    let big = |tag: u64| {
        Record::to(small.as_str())
            .value("x".repeat(5000))
            .opaque(tag)
    };
    let e = producer.send(big(1 << 40)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Broker(BrokerError::MessageTooLarge));
    producer.produce(big(2 << 40)).await.unwrap();
    let blocking = producer.clone();
    let small_topic = small.clone();
    let d = tokio::task::spawn_blocking(move || {
        let r = Record::to(small_topic.as_str())
            .value("blocking")
            .opaque(3 << 40);
        blocking
            .send_blocking(r, Duration::from_secs(60))
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap()
    .expect("delivered");
    producer.flush().await;

    let mut log = Vec::new();
    support::paths::every_report_path(producer, &topic, N, || {
        log = kafka.read_log(&topic, PARTITIONS);
        log.clone()
    })
    .await;

    let seen = lineage.seen.lock().unwrap().clone();
    let failed = Err(ErrorKind::Broker(BrokerError::MessageTooLarge));
    assert_eq!(seen[&(1 << 40)], [failed]);
    assert_eq!(seen[&(2 << 40)], [failed]);
    assert_eq!(seen[&(3 << 40)], [Ok((d.partition, d.offset))]);
    let small_log = kafka.read_log(&small, 1);
    assert_eq!(small_log.len(), 1, "only the blocking record");
    let header = |r: &support::ReadRecord, key: &str| {
        r.headers
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.clone())
            .map(|v| String::from_utf8(v).unwrap())
    };
    assert_eq!(
        header(&small_log[0], "lineage").as_deref(),
        Some("3298534883328")
    );
    assert_eq!(log.len(), 4 * N);
    for r in log.iter().chain(&small_log) {
        let tag: u64 = header(r, "lineage")
            .expect("on_send's header, read back by rdkafka")
            .parse()
            .unwrap();
        assert_eq!(
            seen.get(&tag).map(Vec::as_slice),
            Some(&[Ok((r.partition, Some(r.offset)))][..]),
            "on_report saw {tag:#x} once, where the reader found it"
        );
        let flaky = header(r, "flaky");
        assert_eq!(flaky.is_none(), tag % 25 == 0, "{tag:#x}: {flaky:?}");
    }
    assert_eq!(seen.len(), 4 * N + 3, "no report of anything else");
}

/// A topic deleted and re-created with fewer partitions (6, then 4) while
/// records wait for it: those placed on partitions 4 and 5, which no
/// longer exist, fail at once with `UnknownPartition` (the new topic id
/// tells Courier it is a new topic), not after `delivery.timeout.ms`
/// (120 s by default) as timeouts; those on 0 to 3 are delivered to the
/// new topic; `close` returns promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_for_partitions_gone_with_a_recreated_topic_fail_at_once() {
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let topic = unique("recreated");
    kafka.create_topic(&topic, 6, 3, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    for p in 0..6 {
        let d = producer
            .send(Record::to(topic.as_str()).partition(p).value("before"))
            .await
            .expect("delivered before the deletion");
        assert_eq!(d.partition, p);
    }
    kafka.delete_topic(&topic);
    // Produced while Courier still sees six partitions: the broker's
    // UNKNOWN_TOPIC_OR_PARTITION sends them back to their queues.
    let (sub, stream) = producer.subscribe(ReportMode::All);
    for p in 0..6 {
        for i in 0..10 {
            sub.produce(
                Record::to(topic.as_str())
                    .partition(p)
                    .value(format!("{p}-{i}"))
                    .opaque(p as u64),
            )
            .await
            .expect("accepted");
        }
    }
    drop(sub);
    let deadline = Instant::now() + Duration::from_secs(60);
    while kafka.partition_count(&topic) != 0 {
        assert!(Instant::now() < deadline, "{topic} never went away");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    kafka.create_topic(&topic, 4, 3, &[]).await;
    let started = Instant::now();
    let reports = tokio::time::timeout(Duration::from_secs(60), stream.collect::<Vec<_>>())
        .await
        .expect("every report well within delivery.timeout.ms");
    assert_eq!(reports.len(), 60, "one report per record");
    for r in &reports {
        // The tag is the partition the record named.
        let p = r.opaque() as i32;
        let value = format!("{r:?}");
        match r {
            DeliveryReport::Delivered(d) if p < 4 => assert_eq!(d.partition, p),
            DeliveryReport::Failed(e) if p >= 4 => {
                assert_eq!(e.kind, ErrorKind::UnknownPartition, "{value}: {e}");
                assert!(e.message.contains("re-created"), "{value}: {e}");
            }
            other => panic!("{value}: {other:?}"),
        }
    }
    tokio::time::timeout(Duration::from_secs(10), producer.close())
        .await
        .expect("close does not wait for the gone partitions");
    eprintln!("reports {:?} after the re-creation", started.elapsed());
    let log = kafka.read_log(&topic, 4);
    assert_eq!(log.len(), 40, "the new topic holds the 40 records for 0..4");
}

/// `batch.size` above `max.request.size` (4 MiB against the default
/// 1 MiB) with a long linger: batches are capped so that each fits a
/// request, and no record needs a second attempt (uncapped, a 4 MiB batch
/// made a request the broker refused with MESSAGE_TOO_LARGE).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_size_over_max_request_size_is_capped_to_fit() {
    const N: usize = 30_000;
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let topic = unique("big-batches");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("batch.size", "4194304")
        .set("linger.ms", "500")
        .build()
        .unwrap();
    let value = "v".repeat(100);
    let records = (0..N)
        .map(|i| Record::to(topic.as_str()).value(format!("{i:06}{value}")))
        .collect();
    let (reports, _) = produce_all(&producer, records).await;
    producer.close().await;
    assert_eq!(reports.len(), N);
    for r in &reports {
        match r {
            DeliveryReport::Delivered(d) => assert_eq!(d.attempts, 1, "{d:?}"),
            DeliveryReport::Failed(e) => panic!("{e}"),
        }
    }
    assert_eq!(kafka.read_log(&topic, 1).len(), N);
}

/// A broker that comes back at another address under the same id (it
/// advertised port A through one relay, then port B through another):
/// Courier retires the old connection actor, which lets go of its
/// requests, before it starts one for the new address, so every record is
/// delivered once and in key order; with relay A gone, later records go
/// through B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_moves_to_another_address_keeps_every_record_once() {
    use support::{free_port, FaultProxy};
    let (port_a, port_b) = (free_port(), free_port());
    let kafka = KafkaCluster::start_advertising(port_a);
    let _logs = kafka.logs_on_panic();
    let proxy_a = FaultProxy::start(port_a, kafka.address(0));
    let _proxy_b = FaultProxy::start(port_b, kafka.address(0));
    let topic = unique("moved");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let producer = Producer::builder()
        .bootstrap(&format!("127.0.0.1:{port_a}"))
        .set("metadata.max.age.ms", "1000")
        .build()
        .unwrap();
    const N: usize = 6_000;
    let rec = |i: usize| {
        Record::to(topic.as_str())
            .key(format!("k{}", i % 11))
            .value(format!("{i}"))
    };
    let (sub, stream) = producer.subscribe(ReportMode::All);
    let reader = tokio::spawn(stream.collect::<Vec<DeliveryReport>>());
    for i in 0..N / 2 {
        sub.produce(rec(i)).await.unwrap();
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if i == N / 4 {
            kafka.readvertise(0, port_b);
        }
    }
    producer.flush().await;
    // The old address is gone for good: the rest must use the new one.
    drop(proxy_a);
    for i in N / 2..N {
        sub.produce(rec(i)).await.unwrap();
    }
    drop(sub);
    let reports = tokio::time::timeout(Duration::from_secs(120), reader)
        .await
        .expect("every report")
        .unwrap();
    producer.close().await;
    assert_eq!(reports.len(), N, "one report per record");
    for r in &reports {
        assert!(r.is_delivered(), "{r:?}");
    }
    let log = kafka.read_log(&topic, 3);
    assert_eq!(log.len(), N, "each record once");
    let mut last: HashMap<Vec<u8>, usize> = HashMap::new();
    for r in &log {
        let i: usize = std::str::from_utf8(r.value.as_deref().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        if let Some(prev) = last.insert(r.key.clone().unwrap(), i) {
            assert!(prev < i, "key order broken at record {i}");
        }
    }
}

// ---------------------------------------------------------------------------
// Admin (`courier_kafka::admin` and the CLI's `topic` and `cluster`), each checked
// against what Kafka's own tools report.

/// How long a change may take to reach the broker a tool asks.
const PROPAGATION: Duration = Duration::from_secs(60);

/// One partition as `kafka-topics.sh --describe` prints it: (partition,
/// leader or -1, replicas, ISR), and the whole line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JavaPartition {
    partition: i32,
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    line: String,
}

/// `kafka-topics.sh --describe --topic TOPIC` (`TopicCommand`), parsed.
#[derive(Debug, Clone)]
struct JavaTopic {
    header: String,
    topic_id: String,
    partitions: Vec<JavaPartition>,
}

/// The `Key: value` fields of one tab-separated TopicCommand line.
fn topic_command_fields(line: &str) -> HashMap<String, String> {
    line.split('\t')
        .filter_map(|f| f.trim().split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn broker_ids(list: &str) -> Vec<i32> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or_else(|_| panic!("broker id {s:?}")))
        .collect()
}

fn java_describe(kafka: &KafkaCluster, topic: &str) -> JavaTopic {
    let out = kafka.run(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &kafka.bootstrap(),
            "--describe",
            "--topic",
            topic,
        ],
    );
    let mut header = None;
    let mut partitions = Vec::new();
    for line in out.lines() {
        let f = topic_command_fields(line);
        if f.get("Topic").map(String::as_str) != Some(topic) {
            continue;
        }
        if let Some(p) = f.get("Partition") {
            partitions.push(JavaPartition {
                partition: p.parse().unwrap(),
                leader: f["Leader"].parse().unwrap_or(-1),
                replicas: broker_ids(&f["Replicas"]),
                isr: broker_ids(&f["Isr"]),
                line: line.to_string(),
            });
        } else {
            header = Some((line.to_string(), f["TopicId"].clone()));
        }
    }
    let (header, topic_id) = header.unwrap_or_else(|| panic!("no topic line in:\n{out}"));
    partitions.sort_by_key(|p| p.partition);
    JavaTopic {
        header,
        topic_id,
        partitions,
    }
}

/// `kafka-topics.sh --list`.
fn java_topics(kafka: &KafkaCluster) -> HashSet<String> {
    kafka
        .run(
            "org.apache.kafka.tools.TopicCommand",
            &["--bootstrap-server", &kafka.bootstrap(), "--list"],
        )
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Polls `kafka-topics.sh --list` until `topic` is gone from it.
fn wait_until_java_lists_no(kafka: &KafkaCluster, topic: &str) {
    let deadline = Instant::now() + PROPAGATION;
    while java_topics(kafka).contains(topic) {
        assert!(Instant::now() < deadline, "Kafka still lists {topic}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kafka-configs.sh --describe --entity-type topics --entity-name TOPIC`
/// (`ConfigCommand`, with `--all` for every config): name → (value, the
/// source of the value in effect: its first synonym's, empty when the
/// line lists none).
fn java_configs(
    kafka: &KafkaCluster,
    topic: &str,
    all: bool,
) -> BTreeMap<String, (String, String)> {
    let b = kafka.bootstrap();
    let mut args = vec![
        "--bootstrap-server",
        b.as_str(),
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
    ];
    if all {
        args.push("--all");
    }
    let out = kafka.run("kafka.admin.ConfigCommand", &args);
    let mut configs = BTreeMap::new();
    for line in out.lines() {
        let Some((pair, rest)) = line.trim_start().split_once(" sensitive=") else {
            continue;
        };
        let (name, value) = pair.split_once('=').expect("NAME=VALUE");
        let source = rest
            .split_once("synonyms={")
            .and_then(|(_, s)| s.split_once(':'))
            .map_or(String::new(), |(s, _)| s.to_string());
        configs.insert(name.to_string(), (value.to_string(), source));
    }
    configs
}

/// The topic's own (dynamic) configs as ConfigCommand reports them.
fn java_topic_configs(kafka: &KafkaCluster, topic: &str) -> BTreeMap<String, String> {
    java_configs(kafka, topic, false)
        .into_iter()
        .map(|(k, (v, _))| (k, v))
        .collect()
}

/// Polls ConfigCommand until the topic's own configs are `want`.
fn wait_for_java_topic_configs(kafka: &KafkaCluster, topic: &str, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let got = java_topic_configs(kafka, topic);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: Kafka reports configs {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kafka-cluster.sh cluster-id` (`ClusterTool`).
fn java_cluster_id(kafka: &KafkaCluster) -> String {
    let out = kafka.run(
        "org.apache.kafka.tools.ClusterTool",
        &["cluster-id", "--bootstrap-server", &kafka.bootstrap()],
    );
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Cluster ID: "))
        .unwrap_or_else(|| panic!("no cluster id in:\n{out}"))
        .trim()
        .to_string()
}

/// The active controller as `kafka-metadata-quorum.sh describe --status`
/// (`MetadataQuorumCommand`) reports it: the quorum's leader.
fn java_quorum_leader(kafka: &KafkaCluster) -> i32 {
    let out = kafka.run(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        &[
            "--bootstrap-server",
            &kafka.bootstrap(),
            "describe",
            "--status",
        ],
    );
    out.lines()
        .find_map(|l| l.trim().strip_prefix("LeaderId:"))
        .unwrap_or_else(|| panic!("no LeaderId in:\n{out}"))
        .trim()
        .parse()
        .unwrap()
}

/// Courier's `describe_topic` and Kafka's TopicCommand, polled until they
/// agree (the broker each asks may learn a change a moment apart) and the
/// topic has `partitions` partitions, each with a leader.
async fn described_alike(
    kafka: &KafkaCluster,
    topic: &str,
    partitions: usize,
) -> (courier_kafka::admin::TopicDescription, JavaTopic) {
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let ours = courier_kafka::admin::describe_topic(&kafka.bootstrap(), topic).await;
        let java = java_describe(kafka, topic);
        let same = ours.as_ref().is_ok_and(|d| {
            d.partitions.len() == partitions
                && java.partitions.len() == partitions
                && d.topic_id.as_deref() == Some(java.topic_id.as_str())
                && d.partitions.iter().zip(&java.partitions).all(|(o, j)| {
                    o.partition == j.partition
                        && o.leader == Some(j.leader)
                        && o.replicas == j.replicas
                        && o.isr == j.isr
                })
        });
        if same {
            return (ours.unwrap(), java);
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: Courier describes {ours:?}, Kafka {java:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// create (also `create_topic_if_missing`), describe, add partitions and
/// delete through `courier_kafka::admin` on 3 brokers, each result checked with
/// Kafka's TopicCommand: the topic id, every partition's leader, replicas
/// (3 of them) and ISR; the partition count after growing; the topic gone
/// after deleting. Refusals are matched by name: TOPIC_ALREADY_EXISTS,
/// INVALID_PARTITIONS, UNKNOWN_TOPIC_OR_PARTITION.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_topic_calls_agree_with_kafkas_topic_command() {
    use courier_kafka::admin;
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let b = kafka.bootstrap();
    let topic = unique("admin-topic");

    assert!(!java_topics(kafka).contains(&topic));
    assert!(
        admin::create_topic_if_missing(&b, &topic, 3, 3)
            .await
            .unwrap(),
        "created by this call"
    );
    assert!(
        !admin::create_topic_if_missing(&b, &topic, 3, 3)
            .await
            .unwrap(),
        "there already"
    );
    let exists = admin::create_topic(&b, &topic, 3, 3).await.unwrap_err();
    assert!(exists.is_topic_exists(), "{exists}");
    assert!(!exists.is_unknown_topic());
    assert_eq!(exists.broker_error(), Some(BrokerError::TopicAlreadyExists));

    let (ours, java) = described_alike(kafka, &topic, 3).await;
    assert_eq!(ours.name, topic);
    assert!(!ours.internal);
    for p in &ours.partitions {
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        assert_eq!(replicas, vec![0, 1, 2], "{p:?}");
        assert!(p.replicas.contains(&p.leader.unwrap()), "{p:?}");
    }
    eprintln!("{}\n{:?}", java.header, java.partitions);

    admin::create_partitions(&b, &topic, 5).await.unwrap();
    let (ours, _) = described_alike(kafka, &topic, 5).await;
    assert_eq!(ours.partitions.last().unwrap().partition, 4);
    let shrink = admin::create_partitions(&b, &topic, 2).await.unwrap_err();
    assert_eq!(
        shrink.broker_error(),
        Some(BrokerError::InvalidPartitions),
        "{shrink}"
    );
    assert_eq!(java_describe(kafka, &topic).partitions.len(), 5);

    admin::delete_topic(&b, &topic).await.unwrap();
    wait_until_java_lists_no(kafka, &topic);
    let deadline = Instant::now() + PROPAGATION;
    loop {
        match admin::describe_topic(&b, &topic).await {
            Err(e) if e.is_unknown_topic() => break,
            other => assert!(Instant::now() < deadline, "after delete: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let again = admin::delete_topic(&b, &topic).await.unwrap_err();
    assert!(again.is_unknown_topic(), "{again}");
    let grow = admin::create_partitions(&b, &topic, 6).await.unwrap_err();
    assert!(grow.is_unknown_topic(), "{grow}");
}

/// Topic configs: set at creation, described, and changed incrementally
/// (set two, delete one) through `courier_kafka::admin`, checked with Kafka's
/// ConfigCommand: the topic's own configs after each step, and every
/// config's value and source as `--all` lists them. A bad value is refused
/// as a whole (INVALID_CONFIG, nothing changed); an unknown topic is
/// `is_unknown_topic`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_topic_configs_agree_with_kafkas_config_command() {
    use courier_kafka::admin::{self, AdminOptions, ConfigOp, ConfigSource};
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let b = kafka.bootstrap();
    let topic = unique("admin-configs");

    admin::create_topic_with_configs(
        &AdminOptions::default(),
        &b,
        &topic,
        1,
        1,
        &[("cleanup.policy", "compact"), ("retention.ms", "123456")],
    )
    .await
    .unwrap();
    wait_for_java_topic_configs(
        kafka,
        &topic,
        &[("cleanup.policy", "compact"), ("retention.ms", "123456")],
    );

    // Every config, value and source, as ConfigCommand --all has them.
    let ours = admin::describe_topic_config(&b, &topic).await.unwrap();
    let java = java_configs(kafka, &topic, true);
    let ours_map: BTreeMap<String, (String, String)> = ours
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                (
                    c.value.clone().unwrap_or_else(|| "null".into()),
                    c.source.java_name().to_string(),
                ),
            )
        })
        .collect();
    assert!(java.len() > 20, "ConfigCommand --all: {java:?}");
    // ConfigCommand names a value's source through its first synonym, and
    // prints none for configs no broker config stands behind.
    let ours_map: BTreeMap<String, (String, String)> = ours_map
        .into_iter()
        .map(|(k, (v, source))| {
            let shown = java.get(&k).is_some_and(|(_, s)| !s.is_empty());
            (k, (v, if shown { source } else { String::new() }))
        })
        .collect();
    assert_eq!(ours_map, java);
    let own: Vec<&str> = ours
        .iter()
        .filter(|c| c.source == ConfigSource::DynamicTopic)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(own, ["cleanup.policy", "retention.ms"]);
    assert!(ours.iter().any(|c| c.is_default()));

    admin::alter_topic_config(
        &b,
        &topic,
        &[
            ConfigOp::set("retention.ms", "3600000"),
            ConfigOp::set("max.message.bytes", "2000000"),
            ConfigOp::delete("cleanup.policy"),
        ],
    )
    .await
    .unwrap();
    wait_for_java_topic_configs(
        kafka,
        &topic,
        &[
            ("max.message.bytes", "2000000"),
            ("retention.ms", "3600000"),
        ],
    );
    let after = admin::describe_topic_config(&b, &topic).await.unwrap();
    let entry = |name: &str| after.iter().find(|c| c.name == name).unwrap().clone();
    assert_eq!(entry("retention.ms").value.as_deref(), Some("3600000"));
    assert_eq!(entry("retention.ms").source, ConfigSource::DynamicTopic);
    assert_eq!(entry("cleanup.policy").value.as_deref(), Some("delete"));
    assert_eq!(entry("cleanup.policy").source, ConfigSource::Default);

    // All or nothing: a bad value refuses the whole change.
    let bad = admin::alter_topic_config(
        &b,
        &topic,
        &[
            ConfigOp::set("segment.ms", "600000"),
            ConfigOp::set("retention.ms", "not-a-number"),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        bad.broker_error(),
        Some(BrokerError::InvalidConfig),
        "{bad}"
    );
    assert_eq!(
        java_topic_configs(kafka, &topic),
        BTreeMap::from([
            ("max.message.bytes".to_string(), "2000000".to_string()),
            ("retention.ms".to_string(), "3600000".to_string()),
        ])
    );

    let missing = unique("admin-missing");
    let e = admin::alter_topic_config(&b, &missing, &[ConfigOp::set("retention.ms", "1")])
        .await
        .unwrap_err();
    assert!(e.is_unknown_topic(), "{e}");
    let e = admin::describe_topic_config(&b, &missing)
        .await
        .unwrap_err();
    assert!(e.is_unknown_topic(), "{e}");
}

/// `describe_cluster` on 3 brokers: the ids and addresses the harness gave
/// the brokers, the active controller MetadataQuorumCommand reports, the
/// cluster id Kafka's ClusterTool reports, and the admin APIs agreed at
/// Kafka 4.1.1's versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_describe_cluster_agrees_with_kafkas_cluster_tool() {
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let c = courier_kafka::admin::describe_cluster(&kafka.bootstrap())
        .await
        .unwrap();
    assert_eq!(
        c.cluster_id.as_deref(),
        Some(java_cluster_id(kafka).as_str())
    );
    let ids: Vec<i32> = c.brokers.iter().map(|b| b.id).collect();
    assert_eq!(ids, kafka.broker_ids());
    for b in &c.brokers {
        assert_eq!(format!("{}:{}", b.host, b.port), kafka.address(b.id));
        assert_eq!(b.rack, None);
    }
    assert_eq!(c.controller, Some(java_quorum_leader(kafka)));
    // The first bootstrap address that answered: broker 0's unless its
    // connection failed (a fresh-clone CI run under load once got broker
    // 1's).
    assert!(
        kafka
            .broker_ids()
            .iter()
            .any(|id| kafka.address(*id) == c.bootstrap_broker),
        "{} is none of the brokers' addresses",
        c.bootstrap_broker
    );
    let v = |api: &str| {
        c.api_versions
            .iter()
            .find(|v| v.api == api)
            .unwrap_or_else(|| panic!("{api} not listed"))
            .version
    };
    assert_eq!(
        (
            v("DeleteTopics"),
            v("CreatePartitions"),
            v("DescribeConfigs"),
            v("IncrementalAlterConfigs"),
            v("DescribeQuorum")
        ),
        (Some(6), Some(3), Some(4), Some(1), Some(2))
    );
}

/// Runs the built `courier` binary.
fn courier_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run courier")
}

fn stdout_of(out: &std::process::Output, args: &[&str]) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "courier {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The CLI on 3 brokers: `topic create --config` (the configs as
/// ConfigCommand reports them), `topic describe` (each line a prefix of
/// TopicCommand's; `--json` with the same leaders, replicas and ISR),
/// `cluster` (brokers, MetadataQuorumCommand's controller, ClusterTool's
/// cluster id, agreed versions; `--json`), `topic delete` (gone from TopicCommand's list);
/// an unknown topic exits 1 for describe and delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_topic_describe_delete_and_cluster_agree_with_kafkas_tools() {
    let kafka = KafkaCluster::shared(3);
    let _logs = kafka.logs_on_panic();
    let b = kafka.bootstrap();
    let topic = unique("cli-admin");

    let args = [
        "topic",
        "create",
        "-b",
        &b,
        &topic,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=7777",
        "--config",
        "cleanup.policy=compact",
    ];
    stdout_of(&courier_cli(&args), &args);
    wait_for_java_topic_configs(
        kafka,
        &topic,
        &[("cleanup.policy", "compact"), ("retention.ms", "7777")],
    );

    // Text: the header and each partition line start as TopicCommand's.
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let args = ["topic", "describe", "-b", &b, &topic];
        let out = courier_cli(&args);
        let java = java_describe(kafka, &topic);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let lines: Vec<&str> = text.lines().collect();
        let alike = out.status.success()
            && java.partitions.len() == 2
            && lines.len() == 3
            && java.header.starts_with(lines[0])
            && java
                .partitions
                .iter()
                .zip(&lines[1..])
                .all(|(j, ours)| j.line.starts_with(ours) && j.leader >= 0);
        if alike {
            assert!(
                lines[0].ends_with("PartitionCount: 2\tReplicationFactor: 3"),
                "{text}"
            );
            // JSON: the same partitions.
            let args = ["topic", "describe", "-b", &b, &topic, "--json"];
            let json = stdout_of(&courier_cli(&args), &args);
            assert!(
                json.contains(&format!("\"topic_id\": \"{}\"", java.topic_id)),
                "{json}"
            );
            let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
            let want: Vec<String> = java
                .partitions
                .iter()
                .map(|p| {
                    format!(
                        "{{\"partition\": {}, \"leader\": {}, \"replicas\": [{}], \"isr\": [{}], \"offline_replicas\": []}}",
                        p.partition,
                        p.leader,
                        ids(&p.replicas),
                        ids(&p.isr)
                    )
                })
                .collect();
            // Otherwise leadership moved between the reads: read again.
            if want.iter().all(|w| json.contains(w)) {
                break;
            }
            eprintln!("describe --json: {json}, want {want:?}");
        }
        assert!(
            Instant::now() < deadline,
            "courier describes:\n{text}\nKafka: {java:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let args = ["cluster", "-b", &b];
    let text = stdout_of(&courier_cli(&args), &args);
    assert!(
        text.lines()
            .any(|l| l == format!("Cluster ID: {}", java_cluster_id(kafka))),
        "{text}"
    );
    for id in kafka.broker_ids() {
        let line = format!("Broker {id}: {} (rack: none)", kafka.address(id));
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    let controller: i32 = text
        .lines()
        .find_map(|l| l.strip_prefix("Controller: "))
        .expect("a controller line")
        .parse()
        .unwrap();
    assert_eq!(controller, java_quorum_leader(kafka));
    for line in [
        "  Produce: v12",
        "  DeleteTopics: v6",
        "  IncrementalAlterConfigs: v1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    let args = ["cluster", "-b", &b, "--json"];
    let json = stdout_of(&courier_cli(&args), &args);
    assert!(
        json.starts_with('{') && json.trim_end().ends_with('}'),
        "{json}"
    );
    for part in [
        format!("\"cluster_id\": \"{}\"", java_cluster_id(kafka)),
        format!("\"controller\": {controller}"),
        format!(
            "{{\"id\": 0, \"host\": \"127.0.0.1\", \"port\": {}, \"rack\": null}}",
            kafka.address(0).rsplit_once(':').unwrap().1
        ),
        "\"Produce\": 12".to_string(),
        "\"CreatePartitions\": 3".to_string(),
    ] {
        assert!(json.contains(&part), "{part} in {json}");
    }

    let args = ["topic", "delete", "-b", &b, &topic];
    let text = stdout_of(&courier_cli(&args), &args);
    assert_eq!(text.trim(), format!("deleted topic {topic}"));
    wait_until_java_lists_no(kafka, &topic);
    let again = courier_cli(&args);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let missing = courier_cli(&["topic", "describe", "-b", &b, &topic]);
        let stderr = String::from_utf8_lossy(&missing.stderr);
        if missing.status.code() == Some(1) && stderr.contains("UNKNOWN_TOPIC_OR_PARTITION") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "describe after delete: {:?} {stderr}",
            missing.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A topic name Kafka does not allow (a space, a `!`, `..`) is refused by
/// the broker's Metadata answer with INVALID_TOPIC_EXCEPTION; the record
/// fails with that error at once, as in the Java client, instead of
/// waiting out `max.block.ms` and failing `Timeout` (which said the topic
/// might yet appear). The record is handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_name_kafka_does_not_allow_fails_with_the_brokers_error() {
    let kafka = KafkaCluster::shared(1);
    let _logs = kafka.logs_on_panic();
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("max.block.ms", "20000")
        .build()
        .unwrap();
    for name in ["not a topic!", ".."] {
        let e = producer
            .send(Record::to(name).value("v"))
            .await
            .expect_err("no such topic can exist");
        assert_eq!(
            e.kind,
            ErrorKind::Broker(BrokerError::InvalidTopicException),
            "{name:?}: {e}"
        );
        assert_eq!(e.record.topic.as_str(), name);
        assert_eq!(e.record.value.as_deref(), Some(&b"v"[..]));
    }
    producer.close().await;
}
