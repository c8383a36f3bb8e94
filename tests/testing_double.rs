//! `courier_kafka::testing::MockBroker`, the producer double: no broker, no
//! socket. Each report path (`send`, `submit`, a subscription's `produce`
//! and `produce_batch`, `produce_to`, the `Produce` message) gets exactly
//! one report per record, with the outcome the script gave it (delivered,
//! refused, retried then delivered, retried until `retries` ran out, timed
//! out); held records report only once released; closing with held
//! records gives each exactly one report; the history is what was
//! produced. And the retry actor of `examples/actor_subscriber.rs`, run
//! against the double with every record's first attempt refused.

mod support;

use support::until;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use courier_kafka::testing::{Answer, MockBroker, TxnState, Verdict};
use courier_kafka::BrokerError;
use courier_kafka::{
    DeliveryFuture, DeliveryReport, ErrorKind, Produce, Producer, ProducerBuilder, Record,
    ReportMode,
};
use futures::{FutureExt, StreamExt};

#[path = "../examples/actor_subscriber.rs"]
#[allow(dead_code)]
mod actor_subscriber;

/// Forwards every report it receives to a channel.
struct Collector(std::sync::mpsc::Sender<DeliveryReport>);

impl actix::Actor for Collector {
    type Context = actix::Context<Self>;
}

impl actix::Handler<DeliveryReport> for Collector {
    type Result = ();
    fn handle(&mut self, r: DeliveryReport, _: &mut actix::Context<Self>) {
        let _ = self.0.send(r);
    }
}

/// A collector on an actix system of its own: its recipient, the system
/// and the channel's receiving end.
fn collector() -> (
    actix::Recipient<DeliveryReport>,
    actix::System,
    std::sync::mpsc::Receiver<DeliveryReport>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let sys = actix::System::new();
        sys.block_on(async move {
            use actix::Actor;
            let addr = Collector(tx).start();
            addr_tx
                .send((addr.recipient(), actix::System::current()))
                .unwrap();
        });
        sys.run().ok();
    });
    let (recipient, sys) = addr_rx.recv().unwrap();
    (recipient, sys, rx)
}

/// Takes `count` reports from `rx` (each within a generous bound), then
/// checks that no more come.
fn take(rx: &std::sync::mpsc::Receiver<DeliveryReport>, count: usize) -> Vec<DeliveryReport> {
    let mut got = Vec::new();
    for _ in 0..count {
        got.push(rx.recv_timeout(Duration::from_secs(20)).expect("a report"));
    }
    if let Ok(extra) = rx.recv_timeout(Duration::from_millis(100)) {
        panic!("a report too many: {extra:?}");
    }
    got
}

/// An idempotent producer's settings for the double: batches go at once,
/// retries after 1 ms.
fn idempotent() -> ProducerBuilder {
    Producer::builder()
        .set("linger.ms", "0")
        .set("enable.idempotence", "true")
        .set("retry.backoff.ms", "1")
}

/// Scripts `verdicts` for the record whose value is `value`.
fn script_value(
    broker: &MockBroker,
    value: &'static str,
    verdicts: impl IntoIterator<Item = Verdict>,
) {
    broker.script(
        move |r| r.value.as_deref() == Some(value.as_bytes()),
        verdicts,
    );
}

/// Each arrival at the double: value, answer, epoch and sequence.
fn stamped_history(broker: &MockBroker) -> Vec<(String, Answer, i16, i32)> {
    broker
        .history()
        .iter()
        .map(|a| {
            let s = a.stamp.expect("stamped");
            (text(a.record.value.as_ref()), a.answer, s.epoch, s.sequence)
        })
        .collect()
}

/// An actix system on a paused tokio runtime: time moves only when every
/// task waits, so nothing runs between two steps of the test that do not
/// await.
fn paused_system() -> actix::SystemRunner {
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a paused runtime")
    })
}

fn text(b: Option<&bytes::Bytes>) -> String {
    String::from_utf8(b.expect("a value").to_vec()).expect("UTF-8")
}

/// What the script below makes of record `i`: (delivered, attempts, the
/// failure's kind).
fn expected(i: usize) -> (bool, u32, Option<ErrorKind>) {
    match i % 5 {
        0 => (true, 1, None),
        1 => (
            false,
            1,
            Some(ErrorKind::Broker(BrokerError::InvalidRecord)),
        ),
        2 | 3 => (true, 2, None),
        _ => (
            false,
            3,
            Some(ErrorKind::Broker(BrokerError::NotEnoughReplicas)),
        ),
    }
}

fn index(value: &str) -> usize {
    value.rsplit('-').next().unwrap().parse().unwrap()
}

/// Scripts by the number at the end of each value: `i % 5` = 0 written,
/// 1 refused INVALID_RECORD (not retriable), 2 refused NOT_ENOUGH_REPLICAS
/// once (retried, then written), 3 timed out once (retried, then written),
/// 4 refused NOT_ENOUGH_REPLICAS every time (reported once `retries=2` are
/// used up, after 3 attempts).
fn script(broker: &MockBroker) {
    let by = |k: usize| move |r: &Record| index(&text(r.value.as_ref())) % 5 == k;
    broker.script_always(by(1), Verdict::Fail(BrokerError::InvalidRecord));
    broker.script_always(by(4), Verdict::Fail(BrokerError::NotEnoughReplicas));
    for (k, verdict) in [
        (2, Verdict::Fail(BrokerError::NotEnoughReplicas)),
        (3, Verdict::TimeOut),
    ] {
        let seen = Mutex::new(HashSet::new());
        broker.script_always(
            move |r| by(k)(r) && seen.lock().unwrap().insert(r.value.clone()),
            verdict,
        );
    }
}

/// Checks one path's reports: one per record, each with its scripted
/// outcome, each delivered one where the broker's log has it.
fn check_reports(
    path: &str,
    n: usize,
    reports: Vec<DeliveryReport>,
    log: &HashMap<String, (i32, i64)>,
) {
    assert_eq!(reports.len(), n, "{path}: one report per record");
    let mut seen = HashSet::new();
    for r in reports {
        let value = support::tagged_value(&r);
        assert!(value.starts_with(path), "{path} got {value}'s report");
        assert!(
            seen.insert(value.clone()),
            "{path}: two reports for {value}"
        );
        let (delivered, attempts, kind) = expected(index(&value));
        match r {
            DeliveryReport::Delivered(d) => {
                assert!(delivered, "{value} delivered: {d:?}");
                assert_eq!(d.attempts, attempts, "{value}");
                let at = log.get(&value).copied();
                assert_eq!(at, Some((d.partition, d.offset.unwrap())), "{value}");
            }
            DeliveryReport::Failed(e) => {
                assert!(!delivered, "{value} failed: {e}");
                assert_eq!((Some(e.kind), e.attempts), (kind, attempts), "{value}: {e}");
                assert!(!log.contains_key(&value), "{value} failed but written");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_report_path_gets_one_report_per_record_with_its_scripted_outcome() {
    let broker = MockBroker::new().topic("t", 4);
    script(&broker);
    let producer = broker
        .build(
            Producer::builder()
                .set("linger.ms", "2")
                .set("retries", "2")
                .set("retry.backoff.ms", "1")
                .set("retry.backoff.max.ms", "5"),
        )
        .unwrap();
    let n = 40;
    let rec = |path: &str, i: usize| {
        support::tagged_record("t", &format!("{path}-{i}"), false).key(format!("k{}", i % 7))
    };

    // send and submit
    let sends = futures::future::join_all((0..n).map(|i| producer.send(rec("send", i))));
    let mut submitted = Vec::new();
    for i in 0..n {
        submitted.push(producer.submit(rec("submit", i)).await.unwrap());
    }
    // a subscription, one by one and in a batch call
    let (sub, stream) = producer.subscribe(ReportMode::All);
    for i in 0..n {
        sub.produce(rec("sub", i)).await.unwrap();
    }
    sub.produce_batch((0..n).map(|i| rec("batch", i)).collect())
        .await
        .unwrap();
    drop(sub);
    // actors: produce_to and the Produce message
    let (to, system, actor_reports) = collector();
    for i in 0..n {
        producer.produce_to(rec("to", i), to.clone()).await.unwrap();
        // `send`, not `do_send`: handled (taken) before the close below.
        producer
            .actor()
            .send(Produce {
                record: rec("msg", i),
                reply_to: to.clone(),
            })
            .await
            .unwrap();
    }
    // fire and forget: no reports, but in the log
    producer
        .produce_batch((0..n).map(|i| rec("ff", i)).collect())
        .await
        .unwrap();

    let send_reports: Vec<DeliveryReport> = sends
        .await
        .into_iter()
        .map(|r| match r {
            Ok(d) => DeliveryReport::Delivered(d),
            Err(e) => DeliveryReport::Failed(e),
        })
        .collect();
    let mut submit_reports = Vec::new();
    for f in submitted {
        submit_reports.push(match f.await {
            Ok(d) => DeliveryReport::Delivered(d),
            Err(e) => DeliveryReport::Failed(e),
        });
    }
    producer.close().await;
    let stream_reports: Vec<DeliveryReport> = stream.collect().await;
    let mut by_path: HashMap<String, Vec<DeliveryReport>> = HashMap::new();
    for r in stream_reports {
        let value = support::tagged_value(&r);
        by_path
            .entry(value.split('-').next().unwrap().into())
            .or_default()
            .push(r);
    }
    // Every actor report has arrived once the producer is closed; none
    // may come after.
    let mut actor_paths: HashMap<String, Vec<DeliveryReport>> = HashMap::new();
    for r in take(&actor_reports, 2 * n) {
        let value = support::tagged_value(&r);
        actor_paths
            .entry(value.split('-').next().unwrap().into())
            .or_default()
            .push(r);
    }
    system.stop();

    // The log: each record written at most once, offsets 0.. per partition.
    let written = broker.written();
    let mut log = HashMap::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    for a in &written {
        let Answer::Written { offset } = a.answer else {
            unreachable!()
        };
        let p = a.record.partition.unwrap();
        assert_eq!(offset, *next.entry(p).or_default(), "offsets contiguous");
        *next.get_mut(&p).unwrap() += 1;
        let value = text(a.record.value.as_ref());
        assert!(
            log.insert(value.clone(), (p, offset)).is_none(),
            "{value} written twice"
        );
    }
    check_reports("send", n, send_reports, &log);
    check_reports("submit", n, submit_reports, &log);
    check_reports("sub", n, by_path.remove("sub").unwrap_or_default(), &log);
    check_reports(
        "batch",
        n,
        by_path.remove("batch").unwrap_or_default(),
        &log,
    );
    check_reports("to", n, actor_paths.remove("to").unwrap_or_default(), &log);
    check_reports(
        "msg",
        n,
        actor_paths.remove("msg").unwrap_or_default(),
        &log,
    );
    assert!(by_path.is_empty() && actor_paths.is_empty());
    // The history: every attempt of every record, fire-and-forget ones too.
    let mut attempts: HashMap<String, Vec<u32>> = HashMap::new();
    for a in broker.history() {
        attempts
            .entry(text(a.record.value.as_ref()))
            .or_default()
            .push(a.attempt);
    }
    for path in ["send", "submit", "sub", "batch", "to", "msg", "ff"] {
        for i in 0..n {
            let got = attempts.remove(&format!("{path}-{i}"));
            let want: Vec<u32> = (1..=expected(i).1).collect();
            assert_eq!(got, Some(want), "{path}-{i}");
        }
    }
    assert!(attempts.is_empty(), "{attempts:?}");
}

#[tokio::test]
async fn auto_complete_partitions_with_the_real_partitioner_and_history_matches() {
    let broker = MockBroker::new().topic("keyed", 6);
    let producer = broker.build(Producer::builder()).unwrap();
    let n = 300;
    let mut reports = Vec::new();
    for i in 0..n {
        let r = Record::to("keyed")
            .key(format!("key-{}", i % 17))
            .value(format!("v-{i}"))
            .header("h", format!("{i}"));
        reports.push(producer.submit(r).await.unwrap());
    }
    // explicit partitions too
    let d = producer
        .send(Record::to("keyed").value("explicit").partition(5))
        .await
        .unwrap();
    assert_eq!(d.partition, 5);
    for (i, f) in reports.into_iter().enumerate() {
        let d = f.await.unwrap();
        let key = format!("key-{}", i % 17);
        assert_eq!(
            d.partition,
            courier_kafka::partitioner::partition_for_key(key.as_bytes(), 6),
            "{key}"
        );
    }
    producer.close().await;
    let history = broker.history();
    assert_eq!(history.len(), n + 1);
    assert!(history.iter().all(|a| a.attempt == 1));
    // Per partition, produce order and contiguous offsets; headers kept.
    let mut last: HashMap<i32, (i64, usize)> = HashMap::new();
    for a in broker.written() {
        let Answer::Written { offset } = a.answer else {
            unreachable!()
        };
        let p = a.record.partition.unwrap();
        let value = text(a.record.value.as_ref());
        if value == "explicit" {
            continue;
        }
        let i = index(&value);
        assert_eq!(
            a.record.headers[0].value.as_deref(),
            Some(i.to_string().as_bytes())
        );
        if let Some((o, j)) = last.get(&p) {
            assert_eq!(offset, o + 1);
            assert!(i > *j, "partition {p}: v-{i} after v-{j}");
        }
        last.insert(p, (offset, i));
    }
    // A topic the broker does not have is created on first use, 1 partition.
    let d = producer_for(&broker)
        .send(Record::to("fresh").value("x"))
        .await
        .unwrap();
    assert_eq!((d.partition, d.offset), (0, Some(0)));
    assert_eq!(broker.partitions("fresh"), Some(1));
}

fn producer_for(broker: &MockBroker) -> Producer {
    broker.build(Producer::builder()).unwrap()
}

#[tokio::test]
async fn held_records_report_only_after_their_release() {
    let broker = MockBroker::new().topic("t", 1).auto_complete(false);
    let producer = broker
        .build(
            Producer::builder()
                .set("linger.ms", "0")
                .set("retry.backoff.ms", "1"),
        )
        .unwrap();
    let mut futures = Vec::new();
    for i in 0..4 {
        futures.push(
            producer
                .submit(Record::to("t").value(format!("v-{i}")))
                .await
                .unwrap(),
        );
    }
    until("4 held", || broker.held() == 4).await;
    // Held: in flight, no report, and a flush waits.
    let flush = producer.flush();
    futures::pin_mut!(flush);
    assert!(flush.as_mut().now_or_never().is_none());
    for f in &mut futures {
        assert!(f.now_or_never().is_none(), "a held record was reported");
    }
    assert!(broker.complete_next());
    let d = (&mut futures[0]).await.unwrap();
    assert_eq!((d.offset, d.attempts), (Some(0), 1));
    // Refused, not retriable: reported failed, the record handed back.
    assert!(broker.error_next(BrokerError::InvalidRecord));
    let e = (&mut futures[1]).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Broker(BrokerError::InvalidRecord));
    assert_eq!(e.record.value.as_deref(), Some(&b"v-1"[..]));
    // Refused, retriable: retried, and held again (the default holds).
    assert!(broker.error_next(BrokerError::NotEnoughReplicas));
    assert!((&mut futures[2]).now_or_never().is_none());
    until("v-2 back, held", || broker.held() == 2).await;
    assert_eq!(broker.release_all(Verdict::Deliver), 2);
    let d2 = (&mut futures[2]).await.unwrap();
    let d3 = (&mut futures[3]).await.unwrap();
    // v-3 arrived before v-2's retry, so it was released first.
    assert_eq!((d3.offset, d3.attempts), (Some(1), 1));
    assert_eq!((d2.offset, d2.attempts), (Some(2), 2));
    flush.await;
    assert!(!broker.complete_next(), "nothing held");
    let answers: Vec<_> = broker
        .history()
        .iter()
        .map(|a| (text(a.record.value.as_ref()), a.answer))
        .collect();
    assert_eq!(
        answers,
        vec![
            ("v-0".into(), Answer::Written { offset: 0 }),
            ("v-1".into(), Answer::Refused(BrokerError::InvalidRecord)),
            (
                "v-2".into(),
                Answer::Refused(BrokerError::NotEnoughReplicas)
            ),
            ("v-3".into(), Answer::Written { offset: 1 }),
            ("v-2".into(), Answer::Written { offset: 2 }),
        ]
    );
    producer.close().await;
}

/// `close_timeout` with records held: each gets exactly one report,
/// `Cancelled`, "may have been written", on every path; the streams end.
/// A plain `close` waits for held records, and completes once they are
/// released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_with_held_records_reports_each_exactly_once() {
    let broker = MockBroker::new().topic("t", 3).auto_complete(false);
    let producer = broker
        .build(Producer::builder().set("linger.ms", "0"))
        .unwrap();
    let n = 10;
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let p = producer.clone();
            tokio::spawn(async move { p.send(Record::to("t").value(format!("send-{i}"))).await })
        })
        .collect();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    for i in 0..n {
        sub.produce(Record::to("t").value(format!("sub-{i}")))
            .await
            .unwrap();
    }
    drop(sub);
    let (to, system, actor_reports) = collector();
    for i in 0..n {
        producer.actor().do_send(Produce {
            record: Record::to("t").value(format!("msg-{i}")),
            reply_to: to.clone(),
        });
    }
    until("every record held", || broker.held() == 3 * n).await;
    assert!(producer
        .close_timeout(Duration::from_millis(20))
        .await
        .is_err());
    let mut all = Vec::new();
    for s in sends {
        all.push(DeliveryReport::Failed(s.await.unwrap().unwrap_err()));
    }
    all.extend(stream.collect::<Vec<_>>().await);
    all.extend(take(&actor_reports, n));
    system.stop();
    assert_eq!(all.len(), 3 * n);
    let mut seen = HashSet::new();
    for r in all {
        let DeliveryReport::Failed(e) = r else {
            panic!("{r:?}")
        };
        assert_eq!(e.kind, ErrorKind::Cancelled, "{e}");
        assert!(e.may_have_been_written(), "{e}");
        assert!(seen.insert(text(e.record.value.as_ref())));
    }
    assert_eq!(broker.held(), 0);
    assert!(broker
        .history()
        .iter()
        .all(|a| a.answer == Answer::NoAnswer));

    // close() waits for held records, then reports them as answered.
    let producer = broker
        .build(Producer::builder().set("linger.ms", "0"))
        .unwrap();
    let pending = producer
        .submit(Record::to("t").value("late"))
        .await
        .unwrap();
    until("held", || broker.held() == 1).await;
    let closing = tokio::spawn({
        let p = producer.clone();
        async move { p.close().await }
    });
    assert!(broker.complete_next());
    closing.await.unwrap();
    assert!(pending.await.is_ok());

    // The last handle dropped with a record held: Cancelled, once.
    let producer = broker
        .build(Producer::builder().set("linger.ms", "0"))
        .unwrap();
    let pending = producer
        .submit(Record::to("t").value("dropped"))
        .await
        .unwrap();
    until("held", || broker.held() == 1).await;
    drop(producer);
    let e = pending.await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Cancelled);
    assert_eq!(broker.held(), 0);
}

#[tokio::test]
async fn a_missing_topic_fails_unknown_topic_or_waits_for_its_creation() {
    let broker = MockBroker::new().auto_create_topics(None);
    let producer = broker
        .build(Producer::builder().set("max.block.ms", "50"))
        .unwrap();
    let e = producer
        .send(Record::to("missing").value("x"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownTopic, "{e}");
    assert!(broker.history().is_empty());
    let producer = broker
        .build(Producer::builder().set("max.block.ms", "60000"))
        .unwrap();
    let waiting = tokio::spawn({
        let p = producer.clone();
        async move { p.send(Record::to("later").value("y")).await }
    });
    broker.create_topic("later", 2);
    let d = waiting.await.unwrap().unwrap();
    assert_eq!(d.offset, Some(0));
    producer.close().await;
}

/// A failure hands its record back as it was produced, although the
/// producer keeps only the batch's encoded (here compressed) copy: key,
/// value, headers and tag read back from the batch, the partition and
/// timestamp only where the record named them. Records of every shape,
/// through every report path, each refused by the broker.
#[tokio::test]
async fn a_refused_record_comes_back_as_it_was_produced() {
    let broker = MockBroker::new().topic("t", 3);
    broker.script_always(|_| true, Verdict::Fail(BrokerError::InvalidRecord));
    let producer = broker
        .build(
            Producer::builder()
                .set("compression.type", "lz4")
                .set("linger.ms", "20"),
        )
        .unwrap();
    let shape = |i: u64| {
        let mut r = Record::to("t").opaque(i);
        if i % 2 == 0 {
            r = r.key(format!("key-{i}"));
        }
        if i % 3 != 0 {
            // Repetitive, so lz4 shrinks the batch (kept compressed).
            r = r.value(format!("value-{i} {}", "abc".repeat(40)));
        }
        if i % 4 == 0 {
            r = r.header("h", format!("{i}")).header("empty", "");
            r.headers.push(courier_kafka::Header {
                key: "null".into(),
                value: None,
            });
        }
        if i % 5 == 0 {
            r = r.partition((i % 3) as i32);
        }
        if i % 7 == 0 {
            r = r.timestamp(1_700_000_000_000 + i as i64);
        }
        r
    };
    let (sub, stream) = producer.subscribe(ReportMode::All);
    sub.produce_batch((0..60).map(shape).collect())
        .await
        .unwrap();
    for i in 60..80 {
        sub.produce(shape(i)).await.unwrap();
    }
    drop(sub);
    let sends = futures::future::join_all((80..90).map(|i| producer.send(shape(i)))).await;
    producer.close().await;
    let mut reports: Vec<DeliveryReport> = stream.collect().await;
    reports.extend(sends.into_iter().map(|r| match r {
        Ok(d) => DeliveryReport::Delivered(d),
        Err(e) => DeliveryReport::Failed(e),
    }));
    assert_eq!(reports.len(), 90, "one report per record");
    let mut seen = HashSet::new();
    for r in reports {
        let DeliveryReport::Failed(e) = r else {
            panic!("delivered against a broker refusing everything: {r:?}")
        };
        assert_eq!(e.kind, ErrorKind::Broker(BrokerError::InvalidRecord), "{e}");
        assert!(seen.insert(e.record.opaque), "one report each");
        assert_eq!(*e.record, shape(e.record.opaque), "handed back as produced");
    }
}

/// A record of a batch that was split (here by the double, whose verdicts
/// differ within the batch, through the producer's own `Accumulator::split`
/// as for MESSAGE_TOO_LARGE) and that then fails comes back as it was
/// produced, read back from its own part, not from the batch it was split
/// from: the part's offset delta is 0 whatever the record's place was.
#[tokio::test]
async fn a_record_failing_after_a_split_comes_back_as_it_was_produced() {
    let broker = MockBroker::new().topic("t", 1);
    script_value(&broker, "v-3", [Verdict::Fail(BrokerError::InvalidRecord)]);
    let producer = broker
        .build(
            Producer::builder()
                .set("linger.ms", "60000")
                .set("compression.type", "zstd"),
        )
        .unwrap();
    let shape = |i: u64| {
        Record::to("t")
            .key(format!("k{i}"))
            .value(format!("v-{i}"))
            .header("n", i.to_string())
            .timestamp(1_700_000_000_000 + i as i64)
            .opaque(i)
    };
    let (sub, stream) = producer.subscribe(ReportMode::All);
    sub.produce_batch((0..5).map(shape).collect())
        .await
        .unwrap();
    drop(sub);
    producer.close().await;
    let reports: Vec<_> = stream.collect().await;
    let arrivals = broker.history().len();
    assert_eq!(arrivals, 5, "one batch of five, split, each part once");
    assert_eq!(reports.len(), 5, "one report per record");
    let mut failed = 0;
    for r in reports {
        match r {
            DeliveryReport::Delivered(d) => assert_ne!(d.opaque, 3, "{d:?}"),
            DeliveryReport::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::Broker(BrokerError::InvalidRecord), "{e}");
                assert_eq!(*e.record, shape(3), "handed back as produced");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 1);
}

/// A batch refused MESSAGE_TOO_LARGE as a whole is split by the producer
/// (as against a broker) and each record goes on its own.
#[tokio::test]
async fn message_too_large_splits_the_batch_as_a_broker_refusal_does() {
    let broker = MockBroker::new().topic("t", 1);
    broker.script_next([Verdict::Fail(BrokerError::MessageTooLarge); 5]);
    let producer = broker
        .build(Producer::builder().set("linger.ms", "60000"))
        .unwrap();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    sub.produce_batch(
        (0..5)
            .map(|i| Record::to("t").value(format!("v-{i}")))
            .collect(),
    )
    .await
    .unwrap();
    drop(sub);
    producer.close().await;
    let reports: Vec<_> = stream.collect().await;
    assert_eq!(reports.len(), 5);
    for (i, r) in reports.into_iter().enumerate() {
        let DeliveryReport::Delivered(d) = r else {
            panic!("{r:?}")
        };
        assert_eq!((d.offset, d.attempts), (Some(i as i64), 2));
    }
    let answers: Vec<_> = broker.history().iter().map(|a| a.answer).collect();
    assert_eq!(
        &answers[..5],
        &[Answer::Refused(BrokerError::MessageTooLarge); 5]
    );
    assert_eq!(answers.len(), 10);
}

/// The retry actor of `examples/actor_subscriber.rs`, driven through the
/// double: every record's first attempt is refused NOT_ENOUGH_REPLICAS
/// (`retries=0`, so the producer reports it), the example's auditor hands
/// each failure to its retry actor, whose second attempt is written. One
/// final outcome per record; each record written once.
#[test]
fn the_example_retry_actor_retries_each_refused_record_once() {
    let broker = MockBroker::new().topic("events", 3);
    let seen = Mutex::new(HashSet::new());
    broker.script_always(
        move |r| seen.lock().unwrap().insert(r.value.clone()),
        Verdict::Fail(BrokerError::NotEnoughReplicas),
    );
    let n = 50;
    let b = broker.clone();
    let tally = actor_subscriber::audit(
        move || async move { Ok(b.start(Producer::builder().set("retries", "0"))?) },
        n,
    )
    .unwrap();
    assert_eq!(
        tally,
        actor_subscriber::Tally {
            delivered: n,
            failed: 0,
            retried: n
        }
    );
    let mut arrivals: HashMap<String, Vec<Answer>> = HashMap::new();
    for a in broker.history() {
        arrivals
            .entry(text(a.record.value.as_ref()))
            .or_default()
            .push(a.answer);
    }
    assert_eq!(arrivals.len(), n);
    for (value, answers) in arrivals {
        assert_eq!(answers.len(), 2, "{value}: {answers:?}");
        assert_eq!(answers[0], Answer::Refused(BrokerError::NotEnoughReplicas));
        assert!(matches!(answers[1], Answer::Written { .. }), "{value}");
    }
}

/// A subscription's produce handle keeps its own view of the metadata (the
/// snapshot, and the entry of the topic it last produced to): it follows
/// every change. Records alternate between two topics (each must land in
/// its own, at the partition it named); a partition past the topic's count
/// fails `UnknownPartition`, and the same partition is taken once the
/// topic has grown to include it; a topic created later is produced to;
/// a clone of the handle, and the original used again, see the same.
#[tokio::test]
async fn a_subscriptions_metadata_view_follows_every_change() {
    let broker = MockBroker::new().topic("a", 2).topic("b", 3);
    let producer = broker
        .build(Producer::builder().set("linger.ms", "0"))
        .unwrap();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    // Alternating topics, each record to the last partition of its topic.
    for i in 0..20u64 {
        let (topic, p) = if i % 2 == 0 { ("a", 1) } else { ("b", 2) };
        sub.produce(
            Record::to(topic)
                .partition(p)
                .value(format!("{i}"))
                .opaque(i),
        )
        .await
        .unwrap();
    }
    for i in 0..20u64 {
        let DeliveryReport::Delivered(d) = stream.next().await.expect("a report") else {
            panic!("record {i} failed");
        };
        let (topic, p) = if d.opaque % 2 == 0 {
            ("a", 1)
        } else {
            ("b", 2)
        };
        assert_eq!(
            (d.topic.as_str(), d.partition),
            (topic, p),
            "record {}",
            d.opaque
        );
    }
    let history = broker.history();
    assert_eq!(history.len(), 20);
    for arrival in &history {
        let i: u64 = text(arrival.record.value.as_ref()).parse().unwrap();
        let want = if i % 2 == 0 {
            ("a", Some(1))
        } else {
            ("b", Some(2))
        };
        assert_eq!(
            (arrival.record.topic.as_str(), arrival.record.partition),
            want,
            "record {i} landed elsewhere"
        );
    }
    // Partition 3 of "a" does not exist yet.
    sub.produce(Record::to("a").partition(3).value("early"))
        .await
        .unwrap();
    match stream.next().await.expect("a report") {
        DeliveryReport::Failed(e) => assert_eq!(e.kind, ErrorKind::UnknownPartition, "{e}"),
        DeliveryReport::Delivered(d) => panic!("delivered to a partition that is not there: {d:?}"),
    }
    // Grown to 4: the same handle (and a clone made before) take it.
    let clone = sub.clone();
    broker.create_topic("a", 4);
    broker.create_topic("c", 1);
    sub.produce(Record::to("a").partition(3).value("grown"))
        .await
        .unwrap();
    clone
        .produce(Record::to("c").value("new topic"))
        .await
        .unwrap();
    clone
        .produce(Record::to("a").partition(3).value("grown, clone"))
        .await
        .unwrap();
    for _ in 0..3 {
        match stream.next().await.expect("a report") {
            DeliveryReport::Delivered(d) => {
                assert!(
                    matches!((d.topic.as_str(), d.partition), ("a", 3) | ("c", 0)),
                    "{d:?}"
                )
            }
            DeliveryReport::Failed(e) => panic!("after the topic grew: {e}"),
        }
    }
    drop((sub, clone));
    assert!(stream.next().await.is_none(), "one report per record");
    producer.close().await;
}

/// Reading one stream both ways: report by report (`next`), then the rest
/// of what has arrived as a batch (`next_batch`), then by report again.
/// Every report comes once, in produce order (one partition), including
/// those of the chunk `next` was part-way through when `next_batch` took
/// over.
#[tokio::test]
async fn a_stream_read_by_report_and_by_batch_in_turn_gives_each_report_once_in_order() {
    let broker = MockBroker::new().topic("t", 1);
    let producer = broker
        .build(Producer::builder().set("batch.size", "1024"))
        .unwrap();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    let mut read = Vec::new();
    let tag = |r: &DeliveryReport| match r {
        DeliveryReport::Delivered(d) => d.opaque,
        DeliveryReport::Failed(e) => panic!("{e}"),
    };
    for round in 0..3u64 {
        for i in 0..100 {
            let n = round * 100 + i;
            sub.produce(Record::to("t").value(format!("value {n:>12}")).opaque(n))
                .await
                .unwrap();
        }
        producer.flush().await;
        // A few by report: part-way into the first batch's reports.
        for _ in 0..3 {
            read.push(tag(&stream.next().await.expect("a report")));
        }
        // The rest of what arrived, as a batch: the part-read chunk first.
        let batch = stream.next_batch().await.expect("reports");
        read.extend(batch.map(|r| tag(&r)));
        assert_eq!(read.len() as u64, (round + 1) * 100, "round {round}");
    }
    drop(sub);
    assert!(stream.next().await.is_none());
    assert_eq!(read, (0..300).collect::<Vec<u64>>());
    producer.close().await;
}

/// One `Subscriber` shared by several threads at once (in an `Arc`): a
/// call that finds the handle's metadata view in use reads the shared
/// metadata instead. Every record gets one report, delivered where it
/// named; after the topic grows, records to the new partition are taken
/// from every thread.
#[test]
fn a_subscriber_shared_by_threads_reports_every_record_once() {
    const THREADS: u64 = 4;
    const EACH: u64 = 2_000;
    let broker = MockBroker::new().topic("t", 3);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let producer = runtime.block_on(async { broker.build(Producer::builder()).unwrap() });
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    let sub = std::sync::Arc::new(sub);
    let produce_all = |first: u64, partitions: i32| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let sub = sub.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        let n = first + t * EACH + i;
                        let r = Record::to("t")
                            .partition((n % partitions as u64) as i32)
                            .value(format!("{n}"))
                            .opaque(n);
                        futures::executor::block_on(sub.produce(r)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    };
    produce_all(0, 3);
    broker.create_topic("t", 6);
    produce_all(THREADS * EACH, 6);
    drop(sub);
    let total = 2 * THREADS * EACH;
    let mut seen = HashSet::new();
    runtime.block_on(async {
        while let Some(r) = stream.next().await {
            let DeliveryReport::Delivered(d) = r else {
                panic!("failed: {r:?}");
            };
            let partitions = if d.opaque < THREADS * EACH { 3 } else { 6 };
            assert_eq!(
                d.partition as u64,
                d.opaque % partitions,
                "record {}",
                d.opaque
            );
            assert!(seen.insert(d.opaque), "record {} reported twice", d.opaque);
        }
    });
    assert_eq!(seen.len() as u64, total, "one report per record");
    assert_eq!(broker.history().len() as u64, total);
    runtime.block_on(producer.close());
}

/// `Verdict::LoseAnswer`: the broker writes the batch and the producer
/// never hears so. Without idempotence its retry is written again; with
/// it, the broker recognises the retry and answers with the first copy's
/// offset.
#[tokio::test]
async fn a_lost_answer_is_written_twice_without_idempotence_and_once_with_it() {
    for idempotent in [false, true] {
        let broker = MockBroker::new().topic("t", 1);
        broker.script_next([Verdict::LoseAnswer]);
        let producer = broker
            .build(
                Producer::builder()
                    .set("linger.ms", "0")
                    .set("enable.idempotence", &idempotent.to_string())
                    .set("request.timeout.ms", "50")
                    .set("retry.backoff.ms", "1"),
            )
            .unwrap();
        let d = producer.send(Record::to("t").value("once")).await.unwrap();
        assert_eq!(d.attempts, 2, "idempotent: {idempotent}");
        producer.close().await;
        let answers: Vec<Answer> = broker.history().iter().map(|a| a.answer).collect();
        let stamps: Vec<_> = broker.history().iter().map(|a| a.stamp).collect();
        if idempotent {
            assert_eq!(
                answers,
                [
                    Answer::Written { offset: 0 },
                    Answer::Duplicate { offset: 0 }
                ]
            );
            assert_eq!(d.offset, Some(0));
            assert_eq!(broker.written().len(), 1);
            let first = stamps[0].expect("stamped");
            assert_eq!((first.epoch, first.sequence), (0, 0));
            assert_eq!(stamps[1], stamps[0], "a retry keeps its stamp");
        } else {
            assert_eq!(
                answers,
                [Answer::Written { offset: 0 }, Answer::Written { offset: 1 }]
            );
            assert_eq!(d.offset, Some(1));
            assert_eq!(broker.written().len(), 2);
            assert_eq!(stamps, [None, None]);
        }
    }
}

/// `forget_producers`: the broker drops the producer's state, as Kafka
/// does after `producer.id.expiration.ms` without traffic. The retry of a
/// batch written before (its answer lost) is then written again, as on
/// Kafka, and the producer goes on under the same epoch: its next
/// sequence is taken, with no gap seen and no bump.
///
/// On a paused clock (time moves only when every task waits), so that
/// nothing runs between the answer lost and the forgetting.
#[test]
fn after_the_broker_forgets_the_producer_a_retry_is_written_again_and_the_epoch_holds() {
    let system = paused_system();
    system.block_on(forgotten_producer());
}

async fn forgotten_producer() {
    let broker = MockBroker::new().topic("t", 1);
    script_value(&broker, "lost", [Verdict::Hold]);
    let producer = broker.start(idempotent()).unwrap();
    producer.send(Record::to("t").value("first")).await.unwrap();
    let lost = producer
        .submit(Record::to("t").value("lost"))
        .await
        .unwrap();
    while broker.held() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Written, its answer lost (the producer retries after its backoff);
    // the broker forgets before the retry comes.
    assert!(broker.release_next(Verdict::LoseAnswer));
    broker.forget_producers();
    let d = lost.await.unwrap();
    assert_eq!((d.offset, d.attempts), (Some(2), 2));
    let after = producer.send(Record::to("t").value("after")).await.unwrap();
    assert_eq!((after.offset, after.attempts), (Some(3), 1));
    producer.close().await;
    let seen = stamped_history(&broker);
    assert_eq!(
        seen,
        [
            ("first".into(), Answer::Written { offset: 0 }, 0, 0),
            ("lost".into(), Answer::Written { offset: 1 }, 0, 1),
            ("lost".into(), Answer::Written { offset: 2 }, 0, 1),
            ("after".into(), Answer::Written { offset: 3 }, 0, 2),
        ]
    );
}

/// A record refused for good leaves a hole in its partition's sequences:
/// the next batch is refused OUT_OF_ORDER_SEQUENCE_NUMBER, the producer
/// bumps its epoch, and the batch goes again from sequence 0.
#[tokio::test]
async fn after_a_hole_in_the_sequences_the_producer_bumps_its_epoch_and_starts_at_zero() {
    let broker = MockBroker::new().topic("t", 1);
    script_value(
        &broker,
        "refused",
        [Verdict::Fail(BrokerError::RecordListTooLarge)],
    );
    let producer = broker.build(idempotent()).unwrap();
    producer.send(Record::to("t").value("first")).await.unwrap();
    let e = producer
        .send(Record::to("t").value("refused"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Broker(BrokerError::RecordListTooLarge));
    let d = producer.send(Record::to("t").value("after")).await.unwrap();
    assert_eq!((d.offset, d.attempts), (Some(1), 2));
    producer.close().await;
    let seen = stamped_history(&broker);
    assert_eq!(
        seen,
        [
            ("first".into(), Answer::Written { offset: 0 }, 0, 0),
            (
                "refused".into(),
                Answer::Refused(BrokerError::RecordListTooLarge),
                0,
                1
            ),
            (
                "after".into(),
                Answer::Refused(BrokerError::OutOfOrderSequenceNumber),
                0,
                2
            ),
            ("after".into(), Answer::Written { offset: 1 }, 1, 0),
        ]
    );
}

/// Two epoch bumps in a row, asked for by two partitions, strand no
/// batch: each waiting batch is stamped under the epoch current when it
/// is sent. (Found in review of a version that kept the stamps of
/// batches across a bump: p3, left stamped under epoch 0, could never be
/// sent once a second bump came, and failed Timeout at
/// `delivery.timeout.ms` without ever being written.)
#[tokio::test]
async fn a_second_bump_strands_no_batch_stamped_under_the_first_epoch() {
    let broker = MockBroker::new().topic("t", 2);
    for refused in ["p1", "r2"] {
        script_value(
            &broker,
            refused,
            [Verdict::Fail(BrokerError::RecordListTooLarge)],
        );
    }
    script_value(&broker, "p2", [Verdict::Hold, Verdict::Hold]);
    let producer = broker
        .build(
            idempotent()
                .set("request.timeout.ms", "30000")
                .set("delivery.timeout.ms", "60000")
                .set("retry.backoff.max.ms", "5"),
        )
        .unwrap();
    let rec = |v: &str, p: i32| Record::to("t").value(v.to_string()).partition(p);
    let refused_out_of_order = |value: &'static str| {
        let broker = broker.clone();
        move || {
            broker.history().iter().any(|a| {
                text(a.record.value.as_ref()) == value
                    && a.answer == Answer::Refused(BrokerError::OutOfOrderSequenceNumber)
            })
        }
    };
    // Partition 1: a hole (p1) before p2, which is held; p3 behind it is
    // refused out of order.
    producer.send(rec("p0", 1)).await.unwrap();
    producer.send(rec("p1", 1)).await.unwrap_err();
    let p2 = producer.submit(rec("p2", 1)).await.unwrap();
    until("p2 held", || broker.held() == 1).await;
    let p3 = producer.submit(rec("p3", 1)).await.unwrap();
    until("p3 refused", refused_out_of_order("p3")).await;
    // p2 answered: out of order and the oldest, so a bump to epoch 1; sent
    // again under it, and held again.
    assert!(broker.release_next(Verdict::Deliver));
    until("p2 held under epoch 1", || {
        broker.held() == 1
            && broker
                .history()
                .iter()
                .rev()
                .find(|a| text(a.record.value.as_ref()) == "p2")
                .and_then(|a| a.stamp)
                .is_some_and(|s| s.epoch == 1)
    })
    .await;
    // Partition 0: a hole under epoch 1, so a second bump (after p2).
    producer.send(rec("r1", 0)).await.unwrap();
    producer.send(rec("r2", 0)).await.unwrap_err();
    let r3 = producer.submit(rec("r3", 0)).await.unwrap();
    until("r3 refused", refused_out_of_order("r3")).await;
    assert!(broker.release_next(Verdict::Deliver));
    let timed = |f| tokio::time::timeout(std::time::Duration::from_secs(10), f);
    let r3 = timed(r3).await.expect("r3 reported").unwrap();
    let p2 = timed(p2).await.expect("p2 reported").unwrap();
    let p3 = timed(p3)
        .await
        .expect("p3 reported without waiting for delivery.timeout.ms")
        .unwrap();
    producer.close().await;
    assert_eq!((p2.offset, p3.offset), (Some(1), Some(2)));
    assert_eq!(r3.offset, Some(1));
}

fn transactional(id: &str) -> ProducerBuilder {
    Producer::builder()
        .set("linger.ms", "0")
        .set("transactional.id", id)
        .set("retry.backoff.ms", "1")
}

/// What a read_committed reader would see of the record with `value`:
/// the transaction state of each copy written.
fn txn_states(broker: &MockBroker, value: &str) -> Vec<Option<TxnState>> {
    broker
        .written()
        .iter()
        .filter(|a| a.record.value.as_deref() == Some(value.as_bytes()))
        .map(|a| a.txn)
        .collect()
}

/// A transactional producer against the double: the double is its
/// coordinator too. A committed transaction's records are committed, an
/// aborted one's aborted, and nothing is sent outside a transaction.
#[tokio::test]
async fn the_double_coordinates_transactions_committed_and_aborted() {
    let broker = MockBroker::new().topic("t", 2);
    let producer = broker.build(transactional("tx-1")).unwrap();
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    let mut kept = Vec::new();
    for (k, v) in [("a", "kept-1"), ("b", "kept-2")] {
        kept.push(
            producer
                .submit(Record::to("t").key(k).value(v))
                .await
                .unwrap(),
        );
    }
    producer.commit_transaction().await.unwrap();
    for f in kept {
        f.await.expect("delivered with its transaction");
    }
    producer.begin_transaction().unwrap();
    let d = producer
        .send(Record::to("t").key("a").value("dropped"))
        .await;
    assert!(d.is_ok(), "written before the abort: {d:?}");
    producer.abort_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send(Record::to("t").value("kept-3"))
        .await
        .unwrap();
    producer.commit_transaction().await.unwrap();
    producer.close().await;
    for v in ["kept-1", "kept-2", "kept-3"] {
        assert_eq!(txn_states(&broker, v), [Some(TxnState::Committed)], "{v}");
    }
    assert_eq!(txn_states(&broker, "dropped"), [Some(TxnState::Aborted)]);
    // One producer id; the abort bumped no epoch (nothing failed).
    let stamps: HashSet<(i64, i16)> = broker
        .history()
        .iter()
        .map(|a| a.stamp.map(|s| (s.producer_id, s.epoch)).expect("stamped"))
        .collect();
    assert_eq!(stamps.len(), 1, "{stamps:?}");
}

/// A second producer with the same `transactional.id` fences the first:
/// the double's coordinator aborts what the first left open, and the
/// first's commit fails, fenced, with nothing of it committed.
#[tokio::test]
async fn a_newer_producer_fences_the_older_at_the_doubles_coordinator() {
    let broker = MockBroker::new().topic("t", 1);
    let older = broker.build(transactional("tx-2")).unwrap();
    older.init_transactions().await.unwrap();
    older.begin_transaction().unwrap();
    older.send(Record::to("t").value("older")).await.unwrap();
    let newer = broker.build(transactional("tx-2")).unwrap();
    newer.init_transactions().await.unwrap();
    assert_eq!(txn_states(&broker, "older"), [Some(TxnState::Aborted)]);
    let e = older.commit_transaction().await.unwrap_err();
    assert!(
        matches!(
            e,
            courier_kafka::TransactionError::Fatal {
                kind: ErrorKind::Fenced,
                ..
            }
        ),
        "{e:?}"
    );
    newer.begin_transaction().unwrap();
    newer.send(Record::to("t").value("newer")).await.unwrap();
    newer.commit_transaction().await.unwrap();
    assert_eq!(txn_states(&broker, "newer"), [Some(TxnState::Committed)]);
    older.close().await;
    newer.close().await;
}

/// A transactional record written with its answer lost, then its
/// transaction aborted while it waits to be sent again: its failure is
/// `Aborted` and says it may have been written (it is, in the aborted
/// transaction, which no read_committed reader sees). Found by the seeded
/// simulation: the report said it was never sent.
///
/// On a paused clock, so that the abort comes before the retry.
#[test]
fn an_aborted_record_sent_before_may_have_been_written() {
    let system = paused_system();
    system.block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        script_value(&broker, "lost", [Verdict::Hold]);
        let producer = broker.start(transactional("tx-3")).unwrap();
        producer.init_transactions().await.unwrap();
        producer.begin_transaction().unwrap();
        let lost = producer
            .submit(Record::to("t").value("lost"))
            .await
            .unwrap();
        while broker.held() == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(broker.release_next(Verdict::LoseAnswer));
        producer.abort_transaction().await.unwrap();
        let e = lost.await.unwrap_err();
        assert_eq!((e.kind, e.attempts), (ErrorKind::Aborted, 1), "{e}");
        assert!(e.may_have_been_written(), "{e}");
        assert_eq!(txn_states(&broker, "lost"), [Some(TxnState::Aborted)]);
        producer.close().await;
    });
}

/// Coordinator errors a cluster answers while a coordinator loads, moves
/// or finishes the previous transaction (`script_coordinator`): the
/// producer retries each (finding the coordinator again after
/// NOT_COORDINATOR), and the transaction commits. The errors answer one
/// request each, in order: the refusal for good scripted last fails the
/// next transaction only once the others were used.
#[tokio::test]
async fn coordinator_errors_on_the_way_are_retried_and_the_transaction_commits() {
    let broker = MockBroker::new().topic("t", 1);
    broker.script_coordinator([
        BrokerError::CoordinatorLoadInProgress,
        BrokerError::NotCoordinator,
        BrokerError::CoordinatorNotAvailable,
    ]);
    let producer = broker.build(transactional("tx-4")).unwrap();
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    // AddPartitionsToTxn, then EndTxn, each refused once first.
    broker.script_coordinator([BrokerError::ConcurrentTransactions]);
    producer.send(Record::to("t").value("first")).await.unwrap();
    broker.script_coordinator([BrokerError::ConcurrentTransactions]);
    producer.commit_transaction().await.unwrap();
    assert_eq!(txn_states(&broker, "first"), [Some(TxnState::Committed)]);
    // A coordinator that refuses the transactional id for good: fatal.
    broker.script_coordinator([BrokerError::TransactionalIdAuthorizationFailed]);
    producer.begin_transaction().unwrap();
    producer
        .send(Record::to("t").value("second"))
        .await
        .unwrap_err();
    producer.close().await;
}

/// A batch refused OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier one still
/// in flight, whose `delivery.timeout.ms` passes while it waits, fails
/// `Timeout` with the cause in its message: the broker lost nothing, the
/// batch only waited (as the Java client's expired batch). The earlier
/// batch, answered after that, is delivered, and nothing is bumped. (A
/// three-broker Kafka run with two brokers down reported thousands of
/// records `Broker(OutOfOrderSequenceNumber)`, which tells a reader a batch
/// was lost.)
///
/// On a paused clock, so that both requests are held when the later
/// batch's delivery timeout passes.
#[test]
fn a_batch_that_times_out_behind_an_unacknowledged_one_reports_a_timeout() {
    let system = paused_system();
    system.block_on(timed_out_behind());
}

/// The timeline of the timed-out-behind tests. request.timeout.ms 1 s,
/// delivery.timeout.ms 1.5 s, backoff 50 ms. "earlier": held from 0 (times
/// out at 1 s), sent again at 1.05 s and held. "later": refused out of
/// order at 0 (nothing past "first" is written), held from 0.05 s (times
/// out at 1.05 s), sent again at 1.1 s and held. At 1.6 s both are held
/// and "later"'s deadline has passed.
fn behind_timeline(broker: &MockBroker, builder: ProducerBuilder) -> Producer {
    script_value(broker, "earlier", [Verdict::Hold, Verdict::Hold]);
    script_value(
        broker,
        "later",
        [Verdict::Deliver, Verdict::Hold, Verdict::Hold],
    );
    broker
        .start(
            builder
                .set("request.timeout.ms", "1000")
                .set("delivery.timeout.ms", "1500")
                .set("retry.backoff.ms", "50")
                .set("retry.backoff.max.ms", "50"),
        )
        .unwrap()
}

/// Runs `behind_timeline`: sends "first", submits "earlier" and "later",
/// and at 1.6 s answers "later" first (out of order, behind "earlier",
/// past its deadline), then "earlier" (written). Returns their futures.
async fn held_behind(broker: &MockBroker, producer: &Producer) -> (DeliveryFuture, DeliveryFuture) {
    producer.send(Record::to("t").value("first")).await.unwrap();
    let earlier = producer
        .submit(Record::to("t").value("earlier"))
        .await
        .unwrap();
    while broker.held() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let later = producer
        .submit(Record::to("t").value("later"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(broker.held(), 2, "both in flight at 1.6 s");
    assert_eq!(broker.release_all_newest_first(Verdict::Deliver), 2);
    (earlier, later)
}

async fn timed_out_behind() {
    let broker = MockBroker::new().topic("t", 1);
    let producer = behind_timeline(&broker, idempotent());
    let (earlier, later) = held_behind(&broker, &producer).await;
    let e = later.await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{}", e.message);
    assert!(
        e.message.contains("behind") && e.message.contains("OutOfOrderSequenceNumber"),
        "the message names the wait and the broker's answer: {}",
        e.message
    );
    assert!(e.may_have_been_written());
    let d = earlier.await.unwrap();
    assert_eq!(d.offset, Some(1));
    producer.close().await;
    let seen = stamped_history(&broker);
    assert!(
        seen.iter().all(|(_, _, epoch, _)| *epoch == 0),
        "no epoch bump: {seen:?}"
    );
    assert!(
        seen.iter()
            .filter(|(v, ..)| v == "later")
            .all(|(_, a, ..)| !matches!(a, Answer::Written { .. })),
        "\"later\" was never written: {seen:?}"
    );
}

/// The same wait in a transaction: the batch behind the unacknowledged
/// one reports a timeout, the earlier one is written, and the commit
/// fails abortable naming the failed record; the abort leaves none of the
/// transaction's records committed, and the next transaction commits.
#[test]
fn a_transactional_batch_that_times_out_behind_an_unacknowledged_one_makes_the_commit_abortable() {
    let system = paused_system();
    system.block_on(transactional_timed_out_behind());
}

async fn transactional_timed_out_behind() {
    let broker = MockBroker::new().topic("t", 1);
    let producer = behind_timeline(&broker, transactional("tx-behind"));
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    let (earlier, later) = held_behind(&broker, &producer).await;
    let e = later.await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{}", e.message);
    assert!(e.message.contains("behind"), "{}", e.message);
    earlier.await.expect("written before the commit");
    match producer.commit_transaction().await {
        // The commit names the failed record; its report says why.
        Err(courier_kafka::TransactionError::Abortable { kind, message }) => {
            assert_eq!(kind, ErrorKind::Aborted, "{message}");
            assert!(message.contains("1 record(s)"), "{message}");
        }
        other => panic!("the commit must fail abortable: {other:?}"),
    }
    producer.abort_transaction().await.unwrap();
    for v in ["first", "earlier"] {
        assert_eq!(txn_states(&broker, v), [Some(TxnState::Aborted)], "{v}");
    }
    assert!(txn_states(&broker, "later").is_empty(), "never written");
    producer.begin_transaction().unwrap();
    producer.send(Record::to("t").value("next")).await.unwrap();
    producer.commit_transaction().await.unwrap();
    assert_eq!(txn_states(&broker, "next"), [Some(TxnState::Committed)]);
    producer.close().await;
}

/// Answers that overtake each other (`release_all_newest_first`): with
/// idempotence, the later batch of a partition reaches the log first and
/// is refused OUT_OF_ORDER_SEQUENCE_NUMBER while the earlier one is still
/// in flight; the producer retries it behind the earlier one, with no
/// epoch bump, and the log keeps produce order.
#[tokio::test]
async fn overtaking_answers_keep_produce_order_without_a_bump() {
    let broker = MockBroker::new().topic("t", 1);
    script_value(&broker, "second", [Verdict::Hold]);
    script_value(&broker, "third", [Verdict::Hold]);
    let producer = broker.build(idempotent()).unwrap();
    producer.send(Record::to("t").value("first")).await.unwrap();
    let second = producer
        .submit(Record::to("t").value("second"))
        .await
        .unwrap();
    let third = producer
        .submit(Record::to("t").value("third"))
        .await
        .unwrap();
    let started = Instant::now();
    while broker.held() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "both held");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(broker.release_all_newest_first(Verdict::Deliver), 2);
    let (second, third) = (second.await.unwrap(), third.await.unwrap());
    assert_eq!((second.offset, third.offset), (Some(1), Some(2)));
    assert_eq!(third.attempts, 2, "refused out of order once");
    producer.close().await;
    let seen = stamped_history(&broker);
    assert_eq!(
        seen,
        [
            ("first".into(), Answer::Written { offset: 0 }, 0, 0),
            ("second".into(), Answer::Written { offset: 1 }, 0, 1),
            (
                "third".into(),
                Answer::Refused(BrokerError::OutOfOrderSequenceNumber),
                0,
                2
            ),
            ("third".into(), Answer::Written { offset: 2 }, 0, 2),
        ]
    );
}
