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
//!   test thread that started them.
//!
//! Run: `cargo test --test kafka_interop` (needs `bash scripts/install-tools.sh`).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use courier::partitioner::partition_for_key;
use courier::record::Header;
use courier::{DeliveryReport, ErrorKind, Producer, Record, ReportMode};
use futures::StreamExt;
use kafka_protocol::error::ResponseError;
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
async fn produce_all(producer: &Producer, records: Vec<Record>) -> Vec<DeliveryReport> {
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
    got
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
        let got = produce_all(&producer, records).await;
        assert_eq!(got.len(), PER_CODEC, "{codec}: one report per record");
        reports.extend(got);
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
    for report in &reports {
        let DeliveryReport::Delivered(d) = report else {
            panic!("failed: {report:?}")
        };
        let value = text(d.record.value.as_ref()).unwrap();
        let codec = value.split('-').next().unwrap();
        let j = by_value
            .get(&value)
            .unwrap_or_else(|| panic!("{codec}: Java did not read {value:?}"));
        assert_eq!(
            (j.partition, Some(j.offset)),
            (d.partition, d.offset),
            "{codec}: where the report says"
        );
        assert_eq!(j.key, text(d.record.key.as_ref()), "{codec}: key");
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
    let reports = produce_all(&producer, records).await;
    let after = now_ms();
    producer.close().await;
    assert_eq!(reports.len(), N);

    let java = kafka.console_consume(&topic, N, IDLE);
    let at: HashMap<i64, &JavaRecord> = java.iter().map(|r| (r.offset, r)).collect();
    for report in reports {
        let d = report.into_result().expect("delivered");
        let create = d.record.timestamp.expect("create time set");
        let j = at[&d.offset.expect("an offset")];
        assert_eq!(j.value, text(d.record.value.as_ref()));
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
    let reports = produce_all(&producer, records).await;
    producer.close().await;
    assert_eq!(reports.len(), 9, "one report per record");

    let mut delivered = BTreeMap::new();
    let mut failed = Vec::new();
    for r in reports {
        let value = text(r.record().value.as_ref()).unwrap();
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
            ErrorKind::Broker(ResponseError::MessageTooLarge),
            attempts
        )],
        "only the big record fails, after {attempts} attempt(s)"
    );
    assert_eq!(delivered.len(), 8, "its 8 neighbours are delivered");
}

/// The same with the default `batch.size` (16384), where the big record
/// shares a batch with its neighbours: the broker refuses the whole batch
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
        let reports = produce_all(&producer, records).await;
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
            let value = d.record.value.as_ref().unwrap().to_vec();
            assert!(
                values.contains(&value),
                "acks={acks}: {value:?} is in the log"
            );
            assert_eq!(
                d.partition,
                partition_for_key(d.record.key.as_ref().unwrap(), PARTITIONS)
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
    let reports = produce_all(&producer, records).await;
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
        let i: usize = std::str::from_utf8(d.record.headers[0].value.as_ref().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(seen.insert(i), "one report for record {i}");
        assert_eq!(d.partition, (i % 3) as i32, "the explicit partition");
        let stored = at[&(d.partition, d.offset.unwrap())];
        assert_eq!(stored.key, d.record.key.as_ref().map(|k| k.to_vec()), "{i}");
        assert_eq!(
            stored.value,
            d.record.value.as_ref().map(|v| v.to_vec()),
            "{i}"
        );
        let want: Vec<(String, Option<Vec<u8>>)> = d
            .record
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
    let reports = produce_all(&producer, records).await;
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
        let key = text(d.record.key.as_ref()).unwrap();
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
    let reports = produce_all(&producer, records).await;
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
        assert_eq!(at[&pos].value.as_deref(), d.record.value.as_deref());
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
    let reports = produce_all(&producer, records).await;
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
    use courier::connection::{Connection, ConnectionOptions};
    use courier::protocol::message::{decode_response, encode_request};
    use courier::protocol::messages::ApiVersionsRequest;
    use courier::protocol::versions::SUPPORTED;
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
                    .value(format!("{p}-{i}")),
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
        let value = text(r.record().value.as_ref()).unwrap();
        let p: i32 = value.split('-').next().unwrap().parse().unwrap();
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
    let reports = produce_all(&producer, records).await;
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
