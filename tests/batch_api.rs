//! The batch APIs on Tansu: `Subscriber::produce_batch` with reports read
//! through `ReportStream::next_batch`, and `Producer::produce_batch` with
//! no reports.
//!
//! Checked: exactly one report per record (an oversized record in each
//! batch fails alone, handed back); the log holds exactly the reported
//! records at the reported positions; keyed records sit on the Java
//! partition and explicit partitions are kept; within a partition, records
//! are in produce order; a batch refused part-way hands back what it did
//! not take; each report hands back the record's own tag (`Record::opaque`).

mod support;

use std::collections::{HashMap, HashSet};

use courier_kafka::partitioner::partition_for_key;
use courier_kafka::{DeliveryReport, ErrorKind, ProduceError, Producer, Record, ReportMode};
use support::{read_all, Tansu};

const CALLS: usize = 20;
const PER_CALL: usize = 1000;

/// The tag ([`Record::opaque`]) record `i` carries to its report.
fn tag(i: usize) -> u64 {
    i as u64 * 7 + 1
}

/// Record `i` of the run: mostly keyless to `batch-a`, some keyed, some to
/// an explicit partition of `batch-b`, and one too large for a request;
/// each tagged with [`tag`].
fn record(i: usize) -> Record {
    let value = format!("v{i}");
    let r = match i % 10 {
        3 => Record::to("batch-a")
            .key(format!("k{}", i % 97))
            .value(value),
        7 => Record::to("batch-b").partition((i % 3) as i32).value(value),
        9 if i % PER_CALL == 999 => Record::to("batch-a").value(vec![b'x'; 2 << 20]),
        _ => Record::to("batch-a").value(value),
    };
    r.opaque(tag(i))
}

fn index_of(r: &Record) -> Option<usize> {
    let v = std::str::from_utf8(r.value.as_deref()?).ok()?;
    v.strip_prefix('v')?.parse().ok()
}

/// What a run's subscription bounds.
#[derive(Clone, Copy)]
enum Bound {
    /// `subscribe_with_capacity`: records.
    Records(usize),
    /// `subscribe_with_memory`: bytes.
    Memory(usize),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_batches_report_every_record_once_in_partition_order() {
    // A bound well under one call's records: produce_batch must wait for
    // the reader part-way through each call.
    batches_report_every_record_once(Bound::Records(500)).await;
}

/// The same with a bound in bytes: about 900 of these records (each
/// weighs its key and value plus its 64-byte owed entry), and the
/// oversized record (2 MiB, refused) weighs the whole bound, so it is
/// taken alone; every permit comes back, or the stream would not end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bound_reports_every_record_once_too() {
    batches_report_every_record_once(Bound::Memory(64 << 10)).await;
}

async fn batches_report_every_record_once(bound: Bound) {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "batch-a", 6).await;
    support::create_topic(&tansu.bootstrap(), "batch-b", 3).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .set("linger.ms", "5")
        .set("batch.size", "16384")
        .build()
        .unwrap();
    let (sub, mut reports) = match bound {
        Bound::Records(n) => producer.subscribe_with_capacity(ReportMode::All, n),
        Bound::Memory(bytes) => producer.subscribe_with_memory(ReportMode::All, bytes),
    };
    let produce = async move {
        for c in 0..CALLS {
            let batch = (c * PER_CALL..(c + 1) * PER_CALL).map(record).collect();
            sub.produce_batch(batch).await.expect("every record taken");
        }
    };
    let collect = async {
        let mut got = Vec::new();
        let mut batches = 0;
        while let Some(batch) = reports.next_batch().await {
            let n = batch.len();
            assert!(n > 0, "a batch is never empty");
            let before = got.len();
            got.extend(batch);
            assert_eq!(got.len() - before, n, "len() matches what iterates");
            batches += 1;
        }
        (got, batches)
    };
    let ((), (got, batches)) = tokio::join!(produce, collect);
    producer.close().await;

    assert_eq!(got.len(), CALLS * PER_CALL, "exactly one report per record");
    assert!(batches < got.len(), "reports arrive several to a batch");
    let mut placed: HashMap<(String, i32, i64), usize> = HashMap::new();
    let mut seen = HashSet::new();
    let mut too_large = 0;
    for r in &got {
        match r {
            DeliveryReport::Delivered(d) => {
                // A success report carries the record's tag, not the
                // record: the tag names it.
                let i = ((d.opaque - 1) / 7) as usize;
                assert_eq!(d.opaque, tag(i), "a record's tag");
                assert!(seen.insert(i), "two reports for record {i}");
                let produced = record(i);
                assert_eq!(d.topic, produced.topic, "record {i}");
                if let Some(k) = &produced.key {
                    assert_eq!(d.partition, partition_for_key(k, 6), "record {i}");
                }
                if let Some(p) = produced.partition {
                    assert_eq!(d.partition, p, "record {i}");
                }
                let at = (d.topic.to_string(), d.partition, d.offset.unwrap());
                assert!(placed.insert(at, i).is_none(), "two records at one offset");
            }
            DeliveryReport::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::RecordTooLarge, "{e}");
                assert_eq!(e.record.value.as_ref().map(|v| v.len()), Some(2 << 20));
                let i = (e.record.opaque - 1) / 7;
                assert_eq!(e.record.opaque, tag(i as usize), "a failure keeps its tag");
                assert_eq!(i as usize % PER_CALL, 999, "the oversized record's tag");
                too_large += 1;
            }
        }
    }
    assert_eq!(too_large, CALLS, "one oversized record per call");

    for (topic, partitions) in [("batch-a", 6), ("batch-b", 3)] {
        let expected = placed.keys().filter(|k| k.0 == topic).count();
        let log = read_all(&tansu.bootstrap(), topic, partitions, expected);
        assert_eq!(
            log.len(),
            expected,
            "{topic}: the log holds what was reported"
        );
        let mut last: HashMap<i32, usize> = HashMap::new();
        for rec in &log {
            let i = placed[&(topic.to_string(), rec.partition, rec.offset)];
            assert_eq!(rec.value.as_deref(), Some(format!("v{i}").as_bytes()));
            let prev = last.insert(rec.partition, i);
            assert!(
                prev.is_none_or(|p| p < i),
                "{topic}/{}: record {i} after {prev:?}, out of produce order",
                rec.partition
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_batches_without_reports_and_refusals_hand_back_the_rest() {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "batch-quiet", 4).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .set("linger.ms", "5")
        .build()
        .unwrap();
    for c in 0..10 {
        let batch = (c * 1000..(c + 1) * 1000)
            .map(|i| Record::to("batch-quiet").value(format!("v{i}")))
            .collect();
        producer.produce_batch(batch).await.expect("taken");
    }
    producer.flush().await;
    let stats = producer.stats();
    assert_eq!((stats.delivered, stats.failed), (10_000, 0));
    let log = read_all(&tansu.bootstrap(), "batch-quiet", 4, 10_000);
    let values: HashSet<_> = log.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!((log.len(), values.len()), (10_000, 10_000));

    let (sub, _reports) = producer.subscribe(ReportMode::All);
    producer.close().await;
    let batch = (0..5)
        .map(|i| Record::to("batch-quiet").value(format!("late{i}")))
        .collect();
    let refused = sub.produce_batch(batch).await.expect_err("closed");
    assert_eq!(refused.accepted, 0);
    let ProduceError::Closed(first) = &refused.reason else {
        panic!("{:?}", refused.reason)
    };
    assert_eq!(first.value.as_deref(), Some(&b"late0"[..]));
    let rest: Vec<_> = refused
        .rest
        .iter()
        .map(|r| r.value.as_deref().unwrap().to_vec())
        .collect();
    assert_eq!(rest, [b"late1", b"late2", b"late3", b"late4"]);
}

/// A batch refused part-way, not at its first record: a subscription with
/// room for three unread reports takes three records of five, the fourth
/// waits for room, and when the stream is dropped (nobody will read) the
/// call ends with `accepted: 3`, the fourth record in the reason and the
/// fifth handed back. The three taken are in the log, the other two not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_refused_part_way_hands_back_exactly_what_it_did_not_take() {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "batch-part", 1).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .build()
        .unwrap();
    let (sub, stream) = producer.subscribe_with_capacity(ReportMode::All, 3);
    let batch: Vec<Record> = (0..5)
        .map(|i| Record::to("batch-part").value(format!("v{i}")))
        .collect();
    let refused = refused_once_nobody_reads(sub, stream, batch, "the fourth record").await;
    assert_eq!(refused.accepted, 3);
    let ProduceError::Closed(fourth) = &refused.reason else {
        panic!("{:?}", refused.reason)
    };
    assert_eq!(index_of(fourth), Some(3));
    let rest: Vec<_> = refused.rest.iter().map(index_of).collect();
    assert_eq!(rest, [Some(4)]);
    producer.close().await;
    let log = read_all(&tansu.bootstrap(), "batch-part", 1, 3);
    let logged: Vec<_> = log
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    assert_eq!(logged, ["v0", "v1", "v2"]);
}

/// Produces `batch` through `sub` with nobody reading `stream`: the call
/// must still be waiting for room (`waiting`, which record) after half a
/// second; then the stream is dropped, and the call must end, refused
/// part-way.
async fn refused_once_nobody_reads(
    sub: courier_kafka::Subscriber,
    stream: courier_kafka::ReportStream,
    batch: Vec<Record>,
    waiting: &str,
) -> courier_kafka::BatchRejected {
    let call = tokio::spawn(async move { sub.produce_batch(batch).await });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!call.is_finished(), "{waiting} waits for room");
    drop(stream);
    tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the call ends once nobody can read")
        .unwrap()
        .expect_err("refused part-way")
}

/// A bound in bytes holds large records to what it has room for: with
/// 1 MiB and records of 600 KB (each weighing that and its entry), the second waits
/// while the first's report is unread (a bound of 10,000 records would
/// not have held it); with nobody left to read, the call hands back the
/// two it did not take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bound_holds_large_records_until_their_reports_are_read() {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "batch-large", 1).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .build()
        .unwrap();
    let (sub, stream) = producer.subscribe_with_memory(ReportMode::All, 1 << 20);
    let large = |i: usize| {
        let mut v = format!("v{i}").into_bytes();
        v.resize(600_000, b'.');
        Record::to("batch-large").value(v)
    };
    let batch = (0..3).map(large).collect();
    let refused = refused_once_nobody_reads(sub, stream, batch, "the second record").await;
    assert_eq!(refused.accepted, 1);
    let first_refused = refused.reason.record();
    assert_eq!(
        first_refused.value.as_ref().map(|v| &v[..2]),
        Some(&b"v1"[..])
    );
    assert_eq!(refused.rest.len(), 1, "the third handed back too");
    producer.close().await;
    let log = read_all(&tansu.bootstrap(), "batch-large", 1, 1);
    assert_eq!(log.len(), 1, "only the first was written");
}

/// One record at a time, the same bound: `try_produce` finds no room for
/// a second large record while the first's report is unread, and room
/// again once it is read; the stream ends after the last report (every
/// permit given back: one too few or too many and it would not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bound_frees_room_as_reports_are_read() {
    use futures::StreamExt;
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "one-large", 1).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .build()
        .unwrap();
    let (sub, mut stream) = producer.subscribe_with_memory(ReportMode::All, 1 << 20);
    // The topic's metadata first (try_produce does not wait for it).
    sub.produce(Record::to("one-large").value("warm-up"))
        .await
        .unwrap();
    assert!(stream.next().await.expect("a report").is_delivered());
    let large = || Record::to("one-large").value(vec![b'.'; 600_000]);
    for round in 0..3 {
        if let Err(e) = sub.try_produce(large()) {
            panic!("round {round}: no room for one: {e}");
        }
        match sub.try_produce(large()) {
            Err(ProduceError::QueueFull(r)) => assert_eq!(r.value.unwrap().len(), 600_000),
            Err(e) => panic!("round {round}: {e}"),
            Ok(()) => panic!("round {round}: a second large record fit"),
        }
        let report = stream.next().await.expect("a report");
        assert!(report.is_delivered(), "{report:?}");
    }
    // Small records after large ones: many fit at once.
    for i in 0..1000 {
        sub.try_produce(Record::to("one-large").value(format!("v{i}")))
            .expect("small records fit");
    }
    drop(sub);
    let rest = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut rest = 0;
        while let Some(r) = stream.next().await {
            assert!(r.is_delivered(), "{r:?}");
            rest += 1;
        }
        rest
    })
    .await
    .expect("the stream ends: every permit came back");
    assert_eq!(rest, 1000, "one report each, then the end");
    producer.close().await;
}
