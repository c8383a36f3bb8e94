//! Retry actors on librdkafka's mock cluster: injected errors cleared
//! part-way (with two retry actors, one per topic, one of them
//! dead-lettering), an outage longer than `delivery.timeout.ms`, and a
//! subscriber that reads slowly. Every message gets exactly one final
//! outcome, checked against the topics read back.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use courier_kafka::retry::{GiveUp, RetryActor, RetryOn, RetryOutcome, RetryPolicy};
use courier_kafka::{Producer, Record};
use futures::StreamExt;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

type Mock = MockCluster<'static, DefaultProducerContext>;

fn mock(topics: &[&str]) -> Mock {
    let m = MockCluster::new(3).unwrap();
    for t in topics {
        m.create_topic(t, 3, 1).unwrap();
    }
    m
}

/// The value of the record an outcome is about: a failure hands the
/// record back; a success carries its tag, which the tests set to the
/// number in the value (prefixed by the topic's letter for orders and
/// payments).
fn value(o: &RetryOutcome) -> String {
    let r = match o {
        RetryOutcome::Delivered { delivered, .. } => {
            let prefix = match &*delivered.topic {
                "orders" => "o",
                "payments" => "p",
                _ => "",
            };
            return format!("{prefix}{}", delivered.opaque);
        }
        RetryOutcome::DeadLettered { error, .. } | RetryOutcome::Failed { error, .. } => {
            &error.record
        }
    };
    let v = String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap();
    assert!(
        v.ends_with(&r.opaque.to_string()),
        "{v} is tagged {}",
        r.opaque
    );
    v
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Producer {
    let mut b = Producer::builder()
        .bootstrap(bootstrap)
        .set("linger.ms", "5")
        .set("retry.backoff.ms", "20")
        .set("reconnect.backoff.ms", "20")
        .set("reconnect.backoff.max.ms", "200");
    for (k, v) in extra {
        b = b.set(k, v);
    }
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_cleared_part_way_end_delivered_or_dead_lettered_once() {
    let m = mock(&["orders", "payments", "payments.dlq"]);
    let p = producer(&m.bootstrap_servers(), &[]);
    // Two retry actors on one producer: orders retries until delivered;
    // payments does not retry and dead-letters.
    let (orders, mut orders_out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .retry_on(RetryOn::All)
            .max_attempts(20)
            .backoff(Duration::from_millis(50), Duration::from_millis(500))
            .build(),
        10_000,
    );
    let (payments, mut payments_out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .retry_on(RetryOn::All)
            .max_attempts(1)
            .dead_letter_topic("payments.dlq")
            .build(),
        10_000,
    );
    let n = 1000;
    for i in 0..n {
        if i == n / 2 {
            // Non-retriable for the producer: only the retry actors save
            // these. The next 6 Produce requests fail, then it clears.
            m.request_errors(
                RDKafkaApiKey::Produce,
                &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 6],
            );
        }
        orders
            .produce(
                Record::to("orders")
                    .key(format!("o{i}"))
                    .value(format!("o{i}"))
                    .opaque(i as u64),
            )
            .await
            .unwrap();
        payments
            .produce(
                Record::to("payments")
                    .key(format!("p{i}"))
                    .value(format!("p{i}"))
                    .opaque(i as u64),
            )
            .await
            .unwrap();
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    drop((orders.clone(), payments.clone()));
    let mut got_orders = Vec::new();
    while got_orders.len() < n {
        got_orders.push(
            tokio::time::timeout(Duration::from_secs(60), orders_out.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let mut got_payments = Vec::new();
    while got_payments.len() < n {
        got_payments.push(
            tokio::time::timeout(Duration::from_secs(60), payments_out.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    // Exactly one outcome each.
    let ov: HashSet<String> = got_orders.iter().map(value).collect();
    let pv: HashSet<String> = got_payments.iter().map(value).collect();
    assert_eq!((ov.len(), pv.len()), (n, n));
    assert!(
        got_orders.iter().all(RetryOutcome::is_delivered),
        "orders retries until delivered"
    );
    assert!(orders.stats().recovered() > 0, "some orders needed a retry");
    let mut dead = HashSet::new();
    for o in &got_payments {
        match o {
            RetryOutcome::Delivered { .. } => {}
            RetryOutcome::DeadLettered {
                reason,
                dead_letter,
                ..
            } => {
                assert_eq!(*reason, GiveUp::AttemptsExhausted);
                assert_eq!(dead_letter.topic.as_str(), "payments.dlq");
                dead.insert(value(o));
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        !dead.is_empty(),
        "the injected errors dead-lettered some payments"
    );
    assert_eq!(payments.stats().dead_lettered(), dead.len() as u64);

    // The topics, read back: each order once; each payment once in
    // payments or in the dead-letter topic, with the headers.
    let b = m.bootstrap_servers();
    let orders_log = support::read_all(&b, "orders", 3, n);
    let ol: Vec<String> = orders_log
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    assert_eq!(ol.iter().collect::<HashSet<_>>().len(), n);
    let pay_log = support::read_all(&b, "payments", 3, n - dead.len());
    let dlq_log = support::read_back(&b, "payments.dlq", 3, dead.len(), Duration::from_secs(30));
    let mut where_: HashMap<String, &str> = HashMap::new();
    for r in &pay_log {
        assert!(where_
            .insert(
                String::from_utf8(r.value.clone().unwrap()).unwrap(),
                "payments"
            )
            .is_none());
    }
    for r in &dlq_log {
        let v = String::from_utf8(r.value.clone().unwrap()).unwrap();
        assert!(
            where_.insert(v.clone(), "dlq").is_none(),
            "{v} in both places"
        );
        let h: HashMap<&str, String> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), String::from_utf8(v.clone().unwrap()).unwrap()))
            .collect();
        assert_eq!(h["courier.original.topic"], "payments");
        assert!(h.contains_key("courier.original.partition"));
        assert!(
            h["courier.error"].contains("TOPIC_AUTHORIZATION_FAILED"),
            "{}",
            h["courier.error"]
        );
        assert_eq!(h["courier.attempts"], "1");
        assert!(h["courier.first.failure.ms"].parse::<i64>().unwrap() > 0);
    }
    assert_eq!(where_.len(), n, "every payment is somewhere, once");
    for v in &dead {
        assert_eq!(where_[v], "dlq");
    }
    p.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_delivery_timeout_is_ridden_out() {
    let m = mock(&["outage"]);
    let p = producer(
        &m.bootstrap_servers(),
        &[
            ("delivery.timeout.ms", "1500"),
            ("request.timeout.ms", "500"),
        ],
    );
    let (retry, mut out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .max_attempts(50)
            .backoff(Duration::from_millis(200), Duration::from_secs(1))
            .deadline(Duration::from_secs(60))
            .build(),
        10_000,
    );
    p.send(Record::to("outage").value("warm")).await.unwrap();
    for b in 1..=3 {
        m.broker_down(b).unwrap();
    }
    let n = 300;
    for i in 0..n {
        retry
            .produce(
                Record::to("outage")
                    .key(format!("{i}"))
                    .value(format!("{i}"))
                    .opaque(i as u64),
            )
            .await
            .unwrap();
    }
    // Down for twice the delivery timeout: the producer gives up on every
    // record; the retry actor must not.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(retry.stats().waiting() > 0 || retry.stats().retried() > 0);
    for b in 1..=3 {
        m.broker_up(b).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < n {
        got.push(
            tokio::time::timeout(Duration::from_secs(60), out.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(
        got.iter().all(RetryOutcome::is_delivered),
        "{:?}",
        got.iter().find(|o| !o.is_delivered())
    );
    let attempts: Vec<u32> = got
        .iter()
        .map(|o| match o {
            RetryOutcome::Delivered { attempts, .. } => *attempts,
            _ => 0,
        })
        .collect();
    assert!(
        attempts.iter().all(|a| *a >= 2),
        "each record outlived one delivery timeout"
    );
    let log = support::read_all(&m.bootstrap_servers(), "outage", 3, n + 1);
    let values: HashSet<_> = log.iter().map(|r| r.value.clone()).collect();
    for i in 0..n {
        assert!(
            values.contains(&Some(i.to_string().into_bytes())),
            "record {i} in the log"
        );
    }
    p.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_bounds_memory_and_loses_nothing() {
    let m = mock(&["slow-reader"]);
    let p = producer(&m.bootstrap_servers(), &[]);
    let capacity = 50;
    let (retry, mut out) =
        RetryActor::start_with_stream(p.clone(), RetryPolicy::builder().build(), capacity);
    let n = 2000;
    let writer = {
        let retry = retry.clone();
        tokio::spawn(async move {
            for i in 0..n {
                retry
                    .produce(
                        Record::to("slow-reader")
                            .value(format!("{i}"))
                            .opaque(i as u64),
                    )
                    .await
                    .unwrap();
            }
        })
    };
    let mut got = HashSet::new();
    let started = Instant::now();
    while got.len() < n {
        let o = tokio::time::timeout(Duration::from_secs(60), out.next())
            .await
            .unwrap()
            .unwrap();
        assert!(o.is_delivered());
        assert!(got.insert(value(&o)), "one outcome per record");
        if got.len() % 100 == 0 {
            // Read slowly; the producer side must wait, not pile up.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let stats = p.stats();
            assert!(
                stats.in_flight <= capacity as u64,
                "outstanding {} > bound {capacity}",
                stats.in_flight
            );
        }
    }
    writer.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(120));
    p.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_retry_actor_reports_every_record_it_holds() {
    let m = mock(&["stopped"]);
    let p = producer(
        &m.bootstrap_servers(),
        &[
            ("delivery.timeout.ms", "1000"),
            ("request.timeout.ms", "500"),
        ],
    );
    let (retry, mut out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .max_attempts(100)
            .backoff(Duration::from_secs(5), Duration::from_secs(5))
            .build(),
        10_000,
    );
    p.send(Record::to("stopped").value("warm")).await.unwrap();
    for b in 1..=3 {
        m.broker_down(b).unwrap();
    }
    let n = 100;
    for i in 0..n {
        retry
            .produce(Record::to("stopped").value(format!("{i}")).opaque(i as u64))
            .await
            .unwrap();
    }
    // Wait until every record failed once and waits for its next attempt.
    let deadline = Instant::now() + Duration::from_secs(30);
    while retry.stats().waiting() < n {
        assert!(
            Instant::now() < deadline,
            "records never reached the retry actor"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    retry.stop();
    let mut got = HashSet::new();
    while got.len() < n {
        let o = tokio::time::timeout(Duration::from_secs(10), out.next())
            .await
            .unwrap()
            .unwrap();
        match &o {
            RetryOutcome::Failed {
                reason: GiveUp::Stopped,
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(got.insert(value(&o)), "one outcome each");
    }
    p.close().await;
}

/// With its outcome stream dropped, nobody will free the handle's bound:
/// producing through the handle returns `Closed` with the record at once
/// instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_outcome_stream_stops_producing_instead_of_hanging() {
    let m = mock(&["unread"]);
    let p = producer(&m.bootstrap_servers(), &[]);
    let (retry, out) = RetryActor::start_with_stream(p.clone(), RetryPolicy::builder().build(), 1);
    drop(out);
    for i in 0..2 {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            retry.produce(Record::to("unread").value(format!("{i}")).opaque(i as u64)),
        )
        .await
        .expect("produce must not hang");
        match r {
            Err(courier_kafka::ProduceError::Closed(record)) => {
                assert_eq!(record.value.as_deref(), Some(format!("{i}").as_bytes()))
            }
            other => panic!("record {i}: {other:?}"),
        }
    }
    p.close().await;
}

/// Stopping under traffic (issue: outcomes lost when the actor stopped
/// while reports were on their way): with a 300 ms round trip, 100 records
/// produced through the handle and `stop` called at once, every record
/// still gets exactly one outcome. Records on their first attempt get their
/// real one (delivered, or a failure made final as `Stopped`, which says
/// whether the record may have been written); the handle refuses new
/// records once stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_under_traffic_gives_every_record_its_outcome() {
    let topic = "stop-under-traffic";
    let m = mock(&[topic]);
    let p = producer(&m.bootstrap_servers(), &[("linger.ms", "20")]);
    p.send(Record::to(topic).value("warm")).await.unwrap();
    for b in 1..=3 {
        m.broker_round_trip_time(b, Duration::from_millis(300))
            .unwrap();
    }
    // The next Produce request is refused outright (not retriable for the
    // producer; the retry actor would retry, but it is stopping).
    m.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD],
    );
    let (retry, mut out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .retry_on(RetryOn::All)
            .backoff(Duration::from_millis(10), Duration::from_millis(10))
            .build(),
        10_000,
    );
    // Two waves, so that the refused request cannot hold them all.
    let n = 100;
    for i in 0..n {
        if i == n / 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        retry
            .produce(Record::to(topic).value(format!("{i}")).opaque(i as u64))
            .await
            .unwrap();
    }
    retry.stop();
    match retry.produce(Record::to(topic).value("late")).await {
        Err(courier_kafka::ProduceError::Closed(r)) => {
            assert_eq!(r.value.as_deref(), Some(&b"late"[..]))
        }
        other => panic!("a stopped handle accepted a record: {other:?}"),
    }
    let mut outcomes = HashMap::new();
    while let Some(o) = tokio::time::timeout(Duration::from_secs(30), out.next())
        .await
        .expect("outcomes keep coming, then the stream ends")
    {
        assert!(outcomes.insert(value(&o), o).is_none(), "one outcome each");
    }
    assert_eq!(outcomes.len(), n, "every record has its outcome");
    let mut delivered = HashSet::new();
    let mut refused = HashSet::new();
    for (v, o) in &outcomes {
        match o {
            RetryOutcome::Delivered { attempts: 1, .. } => {
                delivered.insert(v.clone());
            }
            RetryOutcome::Failed {
                reason: GiveUp::Stopped,
                error,
                ..
            } => {
                assert_eq!(error.attempts, 1, "{error}");
                assert!(
                    !error.may_have_been_written(),
                    "refused outright, so not written: {error}"
                );
                refused.insert(v.clone());
            }
            other => panic!("{v}: {other:?}"),
        }
    }
    assert!(
        !refused.is_empty(),
        "the injected errors failed some records"
    );
    assert!(!delivered.is_empty(), "{:?}", outcomes.values().next());
    // The log agrees: every delivered record is there, no refused one.
    let log = support::read_all(&m.bootstrap_servers(), topic, 3, delivered.len() + 1);
    let in_log: HashSet<String> = log
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    for v in &delivered {
        assert!(in_log.contains(v), "delivered {v} is in the log");
    }
    for v in &refused {
        assert!(!in_log.contains(v), "refused {v} is not in the log");
    }
    p.close().await;
}

/// The default policy retries only what can succeed later: a record for a
/// topic that does not exist fails at once (`NotRetried`, one attempt),
/// while a timeout is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_does_not_retry_what_cannot_succeed() {
    let m = mock(&["exists"]);
    let p = producer(
        &m.bootstrap_servers(),
        &[
            ("allow.auto.create.topics", "false"),
            ("max.block.ms", "500"),
        ],
    );
    let (retry, mut out) =
        RetryActor::start_with_stream(p.clone(), RetryPolicy::builder().build(), 100);
    let started = Instant::now();
    retry
        .produce(Record::to("missing").value("m"))
        .await
        .unwrap();
    let o = tokio::time::timeout(Duration::from_secs(30), out.next())
        .await
        .unwrap()
        .unwrap();
    match &o {
        RetryOutcome::Failed {
            reason: GiveUp::NotRetried,
            attempts: 1,
            error,
            ..
        } => assert_eq!(
            error.kind,
            courier_kafka::ErrorKind::UnknownTopic,
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    // One max.block.ms, not five attempts' worth with backoff.
    assert!(started.elapsed() < Duration::from_secs(5));
    p.close().await;
}

/// An actor that produces with itself as `reply_to` and hands each failed
/// report to a retry actor from its (non-async) handler.
struct Forwarder {
    retry: courier_kafka::retry::RetryHandle,
    delivered_first_time: usize,
}

impl actix::Actor for Forwarder {
    type Context = actix::Context<Self>;
}

impl actix::Handler<courier_kafka::DeliveryReport> for Forwarder {
    type Result = ();
    fn handle(&mut self, report: courier_kafka::DeliveryReport, _: &mut actix::Context<Self>) {
        match report {
            courier_kafka::DeliveryReport::Delivered(_) => self.delivered_first_time += 1,
            courier_kafka::DeliveryReport::Failed(e) => self
                .retry
                .retry_failed(e)
                .expect("the retry actor takes it"),
        }
    }
}

/// `RetryHandle::retry_failed` from an actor's report handler: with
/// `retries=0` every record whose first attempt meets an injected
/// retriable error fails, is forwarded, and the retry actor delivers it;
/// every record ends once (a first-time delivery or one outcome), each in
/// the log once. After `stop`, a forwarded failure is handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_forwarded_from_an_actor_handler_are_retried_once_each() {
    let m = mock(&["forwarded"]);
    let p = producer(
        &m.bootstrap_servers(),
        &[("retries", "0"), ("enable.idempotence", "false")],
    );
    p.send(Record::to("forwarded").value("warm")).await.unwrap();
    let (retry, mut out) = RetryActor::start_with_stream(
        p.clone(),
        RetryPolicy::builder()
            .backoff(Duration::from_millis(20), Duration::from_millis(100))
            .build(),
        1000,
    );
    m.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 4],
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let (for_actor, handle) = (p.clone(), retry.clone());
    std::thread::spawn(move || {
        let sys = actix::System::new();
        sys.block_on(async move {
            let me = actix::Actor::start(Forwarder {
                retry: handle,
                delivered_first_time: 0,
            });
            for i in 0..300 {
                for_actor
                    .produce_to(
                        Record::to("forwarded")
                            .key(format!("{i}"))
                            .value(format!("{i}"))
                            .opaque(i as u64),
                        me.clone().recipient(),
                    )
                    .await
                    .unwrap();
            }
            for_actor.flush().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let first = me.send(Count).await.expect("the forwarder is up");
            let _ = tx.send(first);
        });
    });
    let first_time = tokio::task::spawn_blocking(move || rx.recv().unwrap())
        .await
        .unwrap();
    let forwarded = 300 - first_time;
    assert!(
        forwarded > 0,
        "the injected errors failed some first attempts"
    );
    let mut outcomes = HashSet::new();
    for _ in 0..forwarded {
        let o = tokio::time::timeout(Duration::from_secs(30), out.next())
            .await
            .expect("an outcome per forwarded failure")
            .unwrap();
        assert!(o.is_delivered(), "{o:?}");
        assert!(outcomes.insert(value(&o)), "one outcome each: {o:?}");
    }
    p.flush().await;
    let read = support::read_all(&m.bootstrap_servers(), "forwarded", 3, 301);
    let values: Vec<_> = read.iter().filter_map(|r| r.value.clone()).collect();
    let unique: HashSet<_> = values.iter().collect();
    assert_eq!(values.len(), 301, "each record once (and warm)");
    assert_eq!(unique.len(), 301);
    // Stopped: a forwarded failure comes back to the caller.
    retry.stop();
    m.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS],
    );
    let e = p.send(Record::to("forwarded").value("x")).await;
    let failure = match e {
        Err(e) => e,
        Ok(d) => panic!("{d:?}"),
    };
    let back = retry
        .retry_failed(failure)
        .expect_err("handed back after stop");
    assert_eq!(back.record.value.as_deref(), Some(&b"x"[..]));
    p.close().await;
}

/// How many records the forwarder saw delivered on their first attempt.
struct Count;

impl actix::Message for Count {
    type Result = usize;
}

impl actix::Handler<Count> for Forwarder {
    type Result = usize;
    fn handle(&mut self, _: Count, _: &mut actix::Context<Self>) -> usize {
        self.delivered_first_time
    }
}

/// Every `RetryHandle` dropped while records are on their first attempt
/// and waiting for retries: every record still gets exactly one outcome,
/// and the outcome stream ends once the last one is out (the actor lets go
/// of itself only when nothing is outstanding). Ten rounds, each with
/// injected retriable errors so that some records wait in the actor.
/// This guards the actor's own-address mechanism (a version that never
/// lets go hangs the stream; one that lets go early loses outcomes); the
/// race it closes (a report arriving between actix's empty-mailbox check
/// and its stop) was never reproduced, and the old code passes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_with_records_in_flight_keeps_every_outcome() {
    let topic = "dropped-handle";
    let m = mock(&[topic]);
    let p = producer(
        &m.bootstrap_servers(),
        &[("retries", "0"), ("enable.idempotence", "false")],
    );
    p.send(Record::to(topic).value("warm")).await.unwrap();
    let n = 200;
    for round in 0..10 {
        let (retry, mut out) = RetryActor::start_with_stream(
            p.clone(),
            RetryPolicy::builder()
                .backoff(Duration::from_millis(10), Duration::from_millis(50))
                .build(),
            10_000,
        );
        m.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 3],
        );
        for i in 0..n {
            let v = round * n + i;
            retry
                .produce(Record::to(topic).value(format!("{v}")).opaque(v as u64))
                .await
                .unwrap();
        }
        drop(retry);
        let mut got = HashSet::new();
        while let Some(o) = tokio::time::timeout(Duration::from_secs(30), out.next())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the outcome stream never ends"))
        {
            assert!(o.is_delivered(), "round {round}: {o:?}");
            assert!(got.insert(value(&o)), "round {round}: twice: {o:?}");
        }
        assert_eq!(got.len(), n, "round {round}: one outcome per record");
    }
    p.close().await;
}
