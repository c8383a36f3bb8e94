//! Producer interceptors (`ProducerBuilder::interceptor`) on the testing
//! double, which runs the real producer's report paths: every record,
//! whichever way it was produced (`submit`, a subscription one by one and
//! in batches, an actor through `produce_to` and the `Produce` message,
//! fire and forget one by one and in batches), is seen by `on_send` once
//! and by `on_report` once, with the report its target gets, also when it
//! fails: refused by the broker, timed out, too large, for a topic or
//! partition that does not exist, cancelled at close, aborted with its
//! transaction. A panicking interceptor loses no report and doubles none.
//! The same on Apache Kafka is in `tests/kafka_interop.rs`.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use courier_kafka::record::Header;
use courier_kafka::testing::{MockBroker, Verdict};
use courier_kafka::{
    BrokerError, DeliveryReport, ErrorKind, Produce, Producer, ProducerInterceptor, Record,
    ReportMode,
};
use futures::StreamExt;
use support::until;

/// An actix system on a paused tokio runtime: waits for `max.block.ms`
/// and time-outs take no real time.
fn paused_system() -> actix::SystemRunner {
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a paused runtime")
    })
}

/// How a report ended: where the record went, or why it failed.
type Outcome = Result<(i32, Option<i64>), ErrorKind>;

fn outcome(r: &DeliveryReport) -> (u64, Outcome) {
    match r {
        DeliveryReport::Delivered(d) => (d.opaque, Ok((d.partition, d.offset))),
        DeliveryReport::Failed(e) => (e.record.opaque, Err(e.kind)),
    }
}

/// Counts what it sees, and stamps each record with an `audited` header
/// naming its tag (replacing one already there).
#[derive(Default)]
struct Audit {
    sent: Mutex<Vec<u64>>,
    seen: Mutex<Vec<(u64, Outcome)>>,
}

impl ProducerInterceptor for Audit {
    fn on_send(&self, record: &Record) -> Option<Record> {
        self.sent.lock().unwrap().push(record.opaque);
        let mut r = record.clone();
        r.headers.retain(|h| h.key != "audited");
        r.headers.push(Header {
            key: "audited".into(),
            value: Some(record.opaque.to_string().into()),
        });
        Some(r)
    }

    fn on_report(&self, report: &DeliveryReport) {
        self.seen.lock().unwrap().push(outcome(report));
    }
}

impl Audit {
    /// How often `on_send` and `on_report` saw each tag.
    fn counts(&self) -> (HashMap<u64, usize>, HashMap<u64, Vec<Outcome>>) {
        let mut sent = HashMap::new();
        for t in self.sent.lock().unwrap().iter() {
            *sent.entry(*t).or_insert(0) += 1;
        }
        let mut seen: HashMap<u64, Vec<Outcome>> = HashMap::new();
        for (t, o) in self.seen.lock().unwrap().iter() {
            seen.entry(*t).or_default().push(*o);
        }
        (sent, seen)
    }
}

/// The tag `Audit` stamped on a record as written (the tag itself is never
/// sent).
fn audited(record: &Record) -> Option<u64> {
    let h = record.headers.iter().find(|h| h.key == "audited")?;
    std::str::from_utf8(h.value.as_deref()?).ok()?.parse().ok()
}

/// Panics in `on_send` for even tags (and adds a `panicky` header for odd
/// ones), and in every `on_report`.
struct Panicky;

impl ProducerInterceptor for Panicky {
    fn on_send(&self, record: &Record) -> Option<Record> {
        assert!(record.opaque % 2 == 1, "planted on_send panic");
        Some(record.clone().header("panicky", "yes"))
    }

    fn on_report(&self, _: &DeliveryReport) {
        panic!("planted on_report panic");
    }
}

/// Keeps every report it receives.
struct Collector(Arc<Mutex<Vec<DeliveryReport>>>);

impl actix::Actor for Collector {
    type Context = actix::Context<Self>;
}

impl actix::Handler<DeliveryReport> for Collector {
    type Result = ();
    fn handle(&mut self, r: DeliveryReport, _: &mut actix::Context<Self>) {
        self.0.lock().unwrap().push(r);
    }
}

/// The ways a record is produced here, by the tag's high byte.
const PATHS: u64 = 6;
const SUBMIT: u64 = 0;
const SUBSCRIBED: u64 = 1;
const ACTOR: u64 = 2;
const FIRE: u64 = 3;
const FIRE_BATCH: u64 = 4;
const SUBSCRIBED_BATCH: u64 = 5;

fn tag(path: u64, i: u64) -> u64 {
    path << 8 | i
}

/// Produces each of `records` (built for a tag) through every path, and
/// returns, by tag, the reports their targets got (none for fire and
/// forget), once `settle` (run after producing: releases, a close) is done.
async fn every_path(
    producer: &Producer,
    records: &[&dyn Fn(u64) -> Record],
    settle: impl std::future::Future<Output = ()>,
) -> HashMap<u64, DeliveryReport> {
    use actix::Actor;
    let n = records.len() as u64;
    let acted = Arc::new(Mutex::new(Vec::new()));
    let actor = Collector(acted.clone()).start();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    let mut futures = Vec::new();
    for i in 0..n {
        let rec = |path| records[i as usize](tag(path, i));
        futures.push((tag(SUBMIT, i), producer.submit(rec(SUBMIT)).await.unwrap()));
        sub.produce(rec(SUBSCRIBED)).await.unwrap();
        if i % 2 == 0 {
            producer
                .produce_to(rec(ACTOR), actor.clone().recipient())
                .await
                .unwrap();
        } else {
            producer.actor().do_send(Produce {
                record: rec(ACTOR),
                reply_to: actor.clone().recipient(),
            });
        }
        producer.produce(rec(FIRE)).await.unwrap();
    }
    let batch = |path| (0..n).map(|i| records[i as usize](tag(path, i))).collect();
    producer.produce_batch(batch(FIRE_BATCH)).await.unwrap();
    sub.produce_batch(batch(SUBSCRIBED_BATCH)).await.unwrap();
    drop(sub);
    settle.await;
    let mut reports = HashMap::new();
    let mut add = |r: DeliveryReport| {
        let t = r.opaque();
        assert!(reports.insert(t, r).is_none(), "two reports for {t:#x}");
    };
    for (t, f) in futures {
        let r = match f.await {
            Ok(d) => DeliveryReport::Delivered(d),
            Err(e) => DeliveryReport::Failed(e),
        };
        assert_eq!(r.opaque(), t);
        add(r);
    }
    for r in stream.collect::<Vec<_>>().await {
        add(r);
    }
    until("the actor's reports", || {
        acted.lock().unwrap().len() >= n as usize
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    for r in acted.lock().unwrap().drain(..) {
        add(r);
    }
    assert_eq!(
        reports.len() as u64,
        4 * n,
        "one report each, on the 4 paths with one"
    );
    reports
}

/// Checks that each of `n` records of every path was seen once by
/// `on_send` and once by `on_report`, with its target's report when it
/// has one, and returns what `on_report` saw for each.
fn seen_once_each(
    audit: &Audit,
    n: u64,
    reports: &HashMap<u64, DeliveryReport>,
) -> HashMap<u64, Outcome> {
    let (sent, seen) = audit.counts();
    let mut got = HashMap::new();
    for path in 0..PATHS {
        for i in 0..n {
            let t = tag(path, i);
            assert_eq!(sent.get(&t), Some(&1), "on_send once for {t:#x}");
            let o = seen
                .get(&t)
                .unwrap_or_else(|| panic!("no on_report for {t:#x}"));
            assert_eq!(o.len(), 1, "on_report once for {t:#x}: {o:?}");
            if let Some(r) = reports.get(&t) {
                assert_eq!(outcome(r).1, o[0], "on_report saw {t:#x}'s own report");
            }
            got.insert(t, o[0]);
        }
    }
    assert_eq!(sent.len() as u64, PATHS * n, "nothing else sent");
    assert_eq!(seen.len() as u64, PATHS * n, "nothing else reported");
    got
}

/// Records that fail every way a record can, and ones delivered, through
/// every report path: each is seen by `on_send` once and by `on_report`
/// once, with the report its target gets (kind, or partition and offset);
/// fire-and-forget records too. What `on_send` changed reached the
/// broker. After `close`, a refused `send` (its `Err` is a report) is seen;
/// a refused `produce` (handed back, no report) is not.
#[test]
fn every_failure_on_every_path_is_seen_once_with_its_report() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 2).auto_create_topics(None);
        broker.script_always(
            |r| r.value.as_deref() == Some(&b"refused"[..]),
            Verdict::Fail(BrokerError::InvalidRecord),
        );
        broker.script_always(
            |r| r.value.as_deref() == Some(&b"late"[..]),
            Verdict::TimeOut,
        );
        broker.script_always(|r| r.value.as_deref() == Some(&b"held"[..]), Verdict::Hold);
        let audit = Arc::new(Audit::default());
        let producer = broker
            .start(
                Producer::builder()
                    .set("linger.ms", "0")
                    .set("retries", "0")
                    .set("max.block.ms", "200")
                    .set("max.request.size", "4096")
                    .interceptor(audit.clone()),
            )
            .unwrap();
        let value =
            |v: &'static str| move |t: u64| Record::to("t").key(format!("k{t}")).value(v).opaque(t);
        let ok = value("ok");
        let refused = value("refused");
        let late = value("late");
        let held = value("held");
        let big = |t: u64| Record::to("t").value("x".repeat(10_000)).opaque(t);
        let nowhere = |t: u64| Record::to("missing").value("v").opaque(t);
        let beyond = |t: u64| Record::to("t").partition(7).value("v").opaque(t);
        let kinds: [&dyn Fn(u64) -> Record; 7] =
            [&ok, &refused, &late, &big, &nowhere, &beyond, &held];
        let want = [
            None,
            Some(ErrorKind::Broker(BrokerError::InvalidRecord)),
            Some(ErrorKind::Timeout),
            Some(ErrorKind::RecordTooLarge),
            Some(ErrorKind::UnknownTopic),
            Some(ErrorKind::UnknownPartition),
            Some(ErrorKind::Cancelled),
        ];
        let b = broker.clone();
        let p = producer.clone();
        let reports = every_path(&producer, &kinds, async move {
            // Every path's held record is in flight; close cancels them.
            until("held records", || b.held() >= PATHS as usize).await;
            let _ = p.close_timeout(Duration::from_millis(100)).await;
        })
        .await;
        let seen = seen_once_each(&audit, kinds.len() as u64, &reports);
        for (t, o) in &seen {
            let want = want[(t & 0xff) as usize];
            assert_eq!(o.err(), want, "{t:#x}: {o:?}");
        }
        // What on_send changed is what the broker wrote: each path's ok
        // record (kind 0), stamped with its own tag.
        let mut stamped: Vec<u64> = broker
            .written()
            .iter()
            .map(|a| audited(&a.record).expect("stamped by on_send"))
            .collect();
        stamped.sort();
        let want: Vec<u64> = (0..PATHS).map(|p| tag(p, 0)).collect();
        assert_eq!(stamped, want);
        // Refused after close: `send`'s error is a report, seen; a
        // record `produce` hands back is not.
        let before = audit.seen.lock().unwrap().len();
        let e = producer
            .send(Record::to("t").value("late").opaque(1 << 40))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Cancelled);
        assert!(producer
            .produce(Record::to("t").value("v").opaque(2 << 40))
            .await
            .is_err());
        let after: Vec<_> = audit.seen.lock().unwrap()[before..].to_vec();
        assert_eq!(after, [(1 << 40, Err(ErrorKind::Cancelled))]);
    });
}

/// An interceptor that panics in `on_send` (every other record) and in
/// every `on_report`, ahead of one that does not: every record still gets
/// exactly one report on its path, the second interceptor sees each once,
/// and a record goes on as the first interceptor left it (changed where it
/// returned, unchanged where it panicked), with the second's change.
#[test]
fn a_panicking_interceptor_loses_no_report_and_doubles_none() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 3);
        broker.script_always(
            |r| r.value.as_deref() == Some(&b"refused"[..]),
            Verdict::Fail(BrokerError::InvalidRecord),
        );
        let audit = Arc::new(Audit::default());
        let producer = broker
            .start(
                Producer::builder()
                    .set("linger.ms", "1")
                    .interceptor(Panicky)
                    .interceptor(audit.clone()),
            )
            .unwrap();
        let ok = |t: u64| Record::to("t").value("ok").opaque(t);
        let refused = |t: u64| Record::to("t").value("refused").opaque(t);
        let kinds: Vec<&dyn Fn(u64) -> Record> = (0..20)
            .map(|i| {
                if i % 5 == 4 {
                    &refused as &dyn Fn(u64) -> Record
                } else {
                    &ok
                }
            })
            .collect();
        let p = producer.clone();
        let reports = every_path(&producer, &kinds, async move { p.flush().await }).await;
        producer.close().await;
        let seen = seen_once_each(&audit, kinds.len() as u64, &reports);
        for (t, o) in &seen {
            let refused = (t & 0xff) % 5 == 4;
            assert_eq!(o.is_err(), refused, "{t:#x}: {o:?}");
        }
        let written = broker.written();
        assert_eq!(written.len() as u64, PATHS * 16);
        for a in written {
            let t = audited(&a.record).expect("stamped by the second interceptor");
            let panicky = a.record.headers.iter().any(|h| h.key == "panicky");
            assert_eq!(panicky, t % 2 == 1, "{t:#x}: {:?}", a.record);
        }
    });
}

/// A transaction's records that fail with its abort (sent once, their
/// answer lost, then the transaction aborted while they wait to be sent
/// again) are each seen once by `on_report`, `Aborted`, fire-and-forget
/// ones included; the next transaction's records are seen delivered.
#[test]
fn records_failed_by_an_abort_are_each_seen_once() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        broker.script(
            |r| r.value.as_deref() == Some(&b"lost"[..]),
            [Verdict::Hold; 3],
        );
        let audit = Arc::new(Audit::default());
        let producer = broker
            .start(
                Producer::builder()
                    .set("linger.ms", "0")
                    .set("transactional.id", "tx-icpt")
                    .set("retry.backoff.ms", "1")
                    .interceptor(audit.clone()),
            )
            .unwrap();
        producer.init_transactions().await.unwrap();
        producer.begin_transaction().unwrap();
        let (sub, stream) = producer.subscribe(ReportMode::All);
        let lost = |t: u64| Record::to("t").value("lost").opaque(t);
        let submitted = producer.submit(lost(1)).await.unwrap();
        sub.produce(lost(2)).await.unwrap();
        producer.produce(lost(3)).await.unwrap();
        until("three held", || broker.held() == 3).await;
        while broker.release_next(Verdict::LoseAnswer) {}
        producer.abort_transaction().await.unwrap();
        producer.begin_transaction().unwrap();
        sub.produce(Record::to("t").value("kept").opaque(4))
            .await
            .unwrap();
        producer
            .produce(Record::to("t").value("kept").opaque(5))
            .await
            .unwrap();
        producer.commit_transaction().await.unwrap();
        drop(sub);
        let e = submitted.await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Aborted);
        let streamed: Vec<_> = stream.map(|r| outcome(&r)).collect().await;
        producer.close().await;
        let (sent, seen) = audit.counts();
        assert_eq!(sent.len(), 5);
        assert!(sent.values().all(|n| *n == 1), "{sent:?}");
        for t in 1..=3 {
            assert_eq!(seen[&t], [Err(ErrorKind::Aborted)], "{t}");
        }
        for t in 4..=5 {
            assert_eq!(seen[&t].len(), 1, "{t}");
            assert!(seen[&t][0].is_ok(), "{t}: {:?}", seen[&t]);
        }
        assert_eq!(seen.len(), 5);
        for (t, o) in streamed {
            assert_eq!(seen[&t], [o], "the stream's report of {t} is the one seen");
        }
    });
}
