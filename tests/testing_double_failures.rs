//! `courier_kafka::testing::MockBroker`'s failures beyond a record's own
//! verdict, each through the producer's real report paths: connections
//! dropped with requests in flight (written or not), the broker down and
//! back, slow answers, a transaction's end answered with errors or timed
//! out by the coordinator, and InitProducerId refused or retried. Each
//! test counts the reports: exactly one per record, with its `ErrorKind`.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use courier_kafka::testing::{Answer, MockBroker, Request, TxnState, Verdict};
use courier_kafka::{
    BrokerError, DeliveryReport, ErrorKind, Producer, ProducerBuilder, Record, ReportMode,
    TransactionError,
};
use futures::StreamExt;
use support::until;

/// An actix system on a paused tokio runtime: time moves only when every
/// task waits, straight to the next timer, so that a test waits out
/// `delivery.timeout.ms` or a latency without waiting.
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

fn quick() -> ProducerBuilder {
    Producer::builder()
        .set("linger.ms", "0")
        .set("retry.backoff.ms", "1")
        .set("reconnect.backoff.ms", "1")
        .set("reconnect.backoff.max.ms", "10")
}

/// Produces `values` through a subscription, closes the producer, and
/// returns every report, by value; each record must get exactly one.
async fn one_report_each(
    producer: &Producer,
    values: &[&str],
    between: impl std::future::Future<Output = ()>,
) -> HashMap<String, DeliveryReport> {
    let (sub, stream) = producer.subscribe(ReportMode::All);
    for (i, v) in values.iter().enumerate() {
        let r = Record::to("t").value(v.to_string()).opaque(i as u64);
        sub.produce(r).await.unwrap();
    }
    drop(sub);
    between.await;
    producer.flush().await;
    let reports: Vec<DeliveryReport> = stream.collect().await;
    let mut by_value = HashMap::new();
    for r in reports {
        let i = match &r {
            DeliveryReport::Delivered(d) => d.opaque,
            DeliveryReport::Failed(e) => e.record.opaque,
        };
        let v = values[i as usize].to_string();
        assert!(
            by_value.insert(v.clone(), r).is_none(),
            "two reports for {v}"
        );
    }
    assert_eq!(
        by_value.len(),
        values.len(),
        "a report for each: {by_value:?}"
    );
    by_value
}

fn answers(broker: &MockBroker, value: &str) -> Vec<Answer> {
    broker
        .history()
        .iter()
        .filter(|a| text(a.record.value.as_ref()) == value)
        .map(|a| a.answer)
        .collect()
}

fn disconnects(producer: &Producer) -> u64 {
    producer
        .stats()
        .brokers
        .get(&0)
        .map_or(0, |b| b.disconnects)
}

/// A connection dropped with a request in flight: the request loses its
/// answer, the producer reconnects and sends it again. Not written
/// before the drop, it is written once; written before it
/// (`disconnect_after_writing`), an idempotent producer's retry is a
/// duplicate the broker recognises and any other's is written twice.
#[tokio::test]
async fn a_dropped_connection_loses_the_answer_and_the_producer_sends_again() {
    for idempotent in [false, true] {
        for written in [false, true] {
            let case = format!("idempotent {idempotent}, written {written}");
            let broker = MockBroker::new().topic("t", 1);
            broker.script(
                |r| r.value.as_deref() == Some(&b"held"[..]),
                [Verdict::Hold],
            );
            let producer = broker
                .build(quick().set("enable.idempotence", &idempotent.to_string()))
                .unwrap();
            let b = broker.clone();
            let reports = one_report_each(&producer, &["held"], async move {
                until("held", || b.held() == 1).await;
                let lost = if written {
                    b.disconnect_after_writing()
                } else {
                    b.disconnect()
                };
                assert_eq!(lost, 1);
            })
            .await;
            let DeliveryReport::Delivered(d) = &reports["held"] else {
                panic!("{case}: {:?}", reports["held"]);
            };
            assert_eq!(d.attempts, 2, "{case}");
            let expected = match (written, idempotent) {
                (false, _) => vec![Answer::NoAnswer, Answer::Written { offset: 0 }],
                (true, true) => vec![
                    Answer::Written { offset: 0 },
                    Answer::Duplicate { offset: 0 },
                ],
                (true, false) => vec![Answer::Written { offset: 0 }, Answer::Written { offset: 1 }],
            };
            assert_eq!(answers(&broker, "held"), expected, "{case}");
            assert_eq!(d.offset, Some(if written && !idempotent { 1 } else { 0 }));
            assert_eq!(disconnects(&producer), 1, "{case}");
            producer.close().await;
        }
    }
}

/// `Verdict::Disconnect`: the connection drops as a record arrives; it and
/// the producer's other request in flight (a held record) are lost
/// unwritten and sent again, each written once. With `retries=0` the
/// lost requests fail `Timeout` instead, and may have been written.
#[tokio::test]
async fn a_scripted_disconnect_loses_every_request_in_flight() {
    for retries in ["2", "0"] {
        let broker = MockBroker::new().topic("t", 1);
        broker.script(
            |r| r.value.as_deref() == Some(&b"first"[..]),
            [Verdict::Hold],
        );
        broker.script(
            |r| r.value.as_deref() == Some(&b"second"[..]),
            [Verdict::Disconnect],
        );
        let producer = broker.build(quick().set("retries", retries)).unwrap();
        let (sub, stream) = producer.subscribe(ReportMode::All);
        sub.produce(Record::to("t").value("first")).await.unwrap();
        until("first held", || broker.held() == 1).await;
        sub.produce(Record::to("t").value("second")).await.unwrap();
        drop(sub);
        producer.flush().await;
        let reports: Vec<DeliveryReport> = stream.collect().await;
        assert_eq!(reports.len(), 2, "{reports:?}");
        assert_eq!(broker.held(), 0);
        for r in &reports {
            match (retries, r) {
                ("2", DeliveryReport::Delivered(d)) => assert_eq!(d.attempts, 2),
                ("0", DeliveryReport::Failed(e)) => {
                    assert_eq!((e.kind, e.attempts), (ErrorKind::Timeout, 1), "{e}");
                    assert!(e.may_have_been_written(), "{e}");
                }
                _ => panic!("retries {retries}: {r:?}"),
            }
        }
        let written = broker.written().len();
        assert_eq!(written, if retries == "2" { 2 } else { 0 });
        assert_eq!(answers(&broker, "second")[0], Answer::NoAnswer);
        // Noticed by the producer's broker actor (at once when it sends
        // again; else at its next look).
        until("the disconnect counted", || disconnects(&producer) == 1).await;
        producer.close().await;
        assert_eq!(disconnects(&producer), 1);
    }
}

/// An outage (`go_down`) longer than `delivery.timeout.ms`: records wait
/// (nothing reaches the broker) and fail `Timeout`, handed back; once the
/// broker is back (`come_back`) they are produced again and delivered.
/// An outage shorter than that: they are delivered once it is over.
#[test]
fn records_fail_timeout_in_a_long_outage_and_are_delivered_after_a_short_one() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        let producer = broker
            .start(
                quick()
                    .set("enable.idempotence", "true")
                    .set("delivery.timeout.ms", "5000")
                    .set("request.timeout.ms", "1000")
                    .set("reconnect.backoff.max.ms", "1000"),
            )
            .unwrap();
        producer
            .send(Record::to("t").value("before"))
            .await
            .unwrap();
        assert_eq!(broker.go_down(), 0);
        let values = ["a", "b", "c"];
        let reports = one_report_each(&producer, &values, async {
            // Well past delivery.timeout.ms (paused time: no wait).
            tokio::time::sleep(Duration::from_secs(10)).await;
        })
        .await;
        let mut again = Vec::new();
        for v in values {
            let DeliveryReport::Failed(e) = &reports[v] else {
                panic!("{v}: {:?}", reports[v]);
            };
            assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
            again.push((*e.record).clone());
        }
        assert_eq!(broker.history().len(), 1, "nothing reached the broker");
        broker.come_back();
        for r in again {
            let d = producer.send(r).await.unwrap();
            assert_eq!(d.attempts, 1);
        }
        // A short outage: delivered once it is over, each once.
        broker.go_down();
        let b = broker.clone();
        let reports = one_report_each(&producer, &["d", "e"], async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert_eq!(
                b.history().len(),
                4,
                "nothing reached the broker while down"
            );
            b.come_back();
        })
        .await;
        for v in ["d", "e"] {
            assert!(matches!(reports[v], DeliveryReport::Delivered(_)), "{v}");
        }
        let log: Vec<String> = broker
            .written()
            .iter()
            .map(|a| text(a.record.value.as_ref()))
            .collect();
        assert_eq!(log, ["before", "a", "b", "c", "d", "e"]);
        assert_eq!(disconnects(&producer), 2);
        producer.close().await;
    });
}

/// A producer built while the broker is down gets no producer id and
/// sends nothing; its records go once the broker is back.
#[test]
fn a_producer_started_during_an_outage_waits_for_the_broker() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        broker.go_down();
        let producer = broker
            .start(quick().set("enable.idempotence", "true"))
            .unwrap();
        let pending = producer.submit(Record::to("t").value("x")).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(broker.history().is_empty());
        broker.come_back();
        let d = pending.await.unwrap();
        assert_eq!((d.offset, d.attempts), (Some(0), 1));
        assert!(broker.history()[0].stamp.is_some());
        producer.close().await;
    });
}

/// Slow answers (`set_latency`): each answer comes after the latency, the
/// record in flight meanwhile (a drop loses it like any other); an answer
/// later than `request.timeout.ms` times out instead, and the retry is
/// delivered once the broker is quick again.
#[test]
fn slow_answers_come_late_or_time_out() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        let producer = broker
            .start(quick().set("request.timeout.ms", "1000"))
            .unwrap();
        broker.set_latency(Duration::from_millis(300));
        let slow = producer
            .submit(Record::to("t").value("slow"))
            .await
            .unwrap();
        let mut slow = Box::pin(slow);
        // Not answered before the latency has passed (paused time).
        let early = tokio::time::timeout(Duration::from_millis(150), &mut slow).await;
        assert!(early.is_err(), "answered early: {early:?}");
        assert_eq!(answers(&broker, "slow"), [Answer::Held]);
        assert_eq!(broker.held(), 0, "not the test's to release");
        let d = slow.await.unwrap();
        assert_eq!((d.offset, d.attempts), (Some(0), 1));

        // Later than request.timeout.ms: timed out, then retried.
        broker.set_latency(Duration::from_secs(5));
        let b = broker.clone();
        let reports = one_report_each(&producer, &["late"], async move {
            until("late timed out", || {
                answers(&b, "late").first() == Some(&Answer::NoAnswer)
            })
            .await;
            b.set_latency(Duration::ZERO);
        })
        .await;
        let DeliveryReport::Delivered(d) = &reports["late"] else {
            panic!("{:?}", reports["late"]);
        };
        assert!(d.attempts >= 2, "{d:?}");
        assert_eq!(
            answers(&broker, "late").last(),
            Some(&Answer::Written { offset: 1 })
        );

        // A drop while the answer is on its way loses it.
        broker.set_latency(Duration::from_millis(300));
        let b = broker.clone();
        let reports = one_report_each(&producer, &["dropped"], async move {
            until("on its way", || answers(&b, "dropped") == [Answer::Held]).await;
            assert_eq!(b.disconnect(), 1);
        })
        .await;
        assert!(matches!(reports["dropped"], DeliveryReport::Delivered(_)));
        assert_eq!(
            answers(&broker, "dropped"),
            [Answer::NoAnswer, Answer::Written { offset: 2 }]
        );
        producer.close().await;
    });
}

fn transactional(id: &str) -> ProducerBuilder {
    quick().set("transactional.id", id)
}

fn txn_states(broker: &MockBroker, value: &str) -> Vec<Option<TxnState>> {
    broker
        .written()
        .iter()
        .filter(|a| a.record.value.as_deref() == Some(value.as_bytes()))
        .map(|a| a.txn)
        .collect()
}

fn fatal_kind(e: &TransactionError) -> ErrorKind {
    match e {
        TransactionError::Fatal { kind, .. } => *kind,
        e => panic!("not fatal: {e:?}"),
    }
}

/// EndTxn answered with errors (`script_request(Request::EndTxn, …)`):
/// retriable ones are retried and the commit goes through; a fencing one
/// fails the commit fatally (`Fenced`), and the transaction stays open at
/// the coordinator until a new producer with the same id aborts it; a
/// code the commit cannot go on from fails it fatally with that code.
#[tokio::test]
async fn end_txn_errors_go_through_commit_transaction() {
    let broker = MockBroker::new().topic("t", 1);
    let producer = broker.build(transactional("orders")).unwrap();
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    producer.send(Record::to("t").value("one")).await.unwrap();
    broker.script_request(
        Request::EndTxn,
        [
            BrokerError::ConcurrentTransactions,
            BrokerError::CoordinatorLoadInProgress,
            BrokerError::NotCoordinator,
        ],
    );
    producer.commit_transaction().await.unwrap();
    assert_eq!(txn_states(&broker, "one"), [Some(TxnState::Committed)]);

    for (error, kind) in [
        (BrokerError::ProducerFenced, ErrorKind::Fenced),
        (BrokerError::InvalidProducerEpoch, ErrorKind::Fenced),
        (
            BrokerError::TransactionalIdAuthorizationFailed,
            ErrorKind::Broker(BrokerError::TransactionalIdAuthorizationFailed),
        ),
    ] {
        let producer = broker.build(transactional("orders")).unwrap();
        producer.init_transactions().await.unwrap();
        producer.begin_transaction().unwrap();
        let (sub, stream) = producer.subscribe(ReportMode::All);
        sub.produce(Record::to("t").value("two")).await.unwrap();
        drop(sub);
        producer.flush().await;
        broker.script_request(Request::EndTxn, [error]);
        let e = producer.commit_transaction().await.unwrap_err();
        assert_eq!(fatal_kind(&e), kind, "{error:?}: {e}");
        // The record's one report came when it was written.
        let reports: Vec<DeliveryReport> = stream.collect().await;
        assert_eq!(reports.len(), 1);
        // The producer takes nothing more.
        assert!(producer.begin_transaction().is_err());
        producer.close().await;
    }
    // Each fenced producer's transaction stayed open until the next
    // producer's init aborted it.
    let after = broker.build(transactional("orders")).unwrap();
    after.init_transactions().await.unwrap();
    assert_eq!(
        txn_states(&broker, "two"),
        [Some(TxnState::Aborted); 3],
        "every fenced producer's record aborted"
    );
    after.close().await;
}

/// The coordinator aborts a transaction open longer than
/// `transaction.timeout.ms` and bumps the epoch (`expire_transactions`,
/// or the timeout passing on paused time), and what the producer wrote
/// in it is aborted. A batch the producer sends after is refused
/// INVALID_PRODUCER_EPOCH (reported `Fenced`) and makes the transaction
/// abortable: the commit says so, and the abort's EndTxn, answered
/// PRODUCER_FENCED, fails fatally (`Fenced`). With nothing sent after, the
/// commit's EndTxn is answered PRODUCER_FENCED at once.
#[test]
fn a_transaction_timed_out_by_the_coordinator_fences_its_producer() {
    paused_system().block_on(async {
        for expired_by_test in [true, false] {
            let broker = MockBroker::new().topic("t", 1);
            let producer = broker
                .start(transactional("slow-txn").set("transaction.timeout.ms", "2000"))
                .unwrap();
            producer.init_transactions().await.unwrap();
            producer.begin_transaction().unwrap();
            producer.send(Record::to("t").value("early")).await.unwrap();
            let end = if expired_by_test {
                assert_eq!(broker.expire_transactions(), 1);
                assert_eq!(txn_states(&broker, "early"), [Some(TxnState::Aborted)]);
                let e = producer
                    .send(Record::to("t").value("late"))
                    .await
                    .unwrap_err();
                assert_eq!(e.kind, ErrorKind::Fenced, "{e}");
                assert_eq!(
                    answers(&broker, "late"),
                    [Answer::Refused(BrokerError::InvalidProducerEpoch)]
                );
                let e = producer.commit_transaction().await.unwrap_err();
                assert!(
                    matches!(
                        e,
                        TransactionError::Abortable {
                            kind: ErrorKind::Fenced,
                            ..
                        }
                    ),
                    "{e:?}"
                );
                producer.abort_transaction().await.unwrap_err()
            } else {
                tokio::time::sleep(Duration::from_secs(3)).await;
                producer.commit_transaction().await.unwrap_err()
            };
            assert_eq!(fatal_kind(&end), ErrorKind::Fenced, "{end}");
            assert!(end.to_string().contains("transaction.timeout.ms"), "{end}");
            assert_eq!(txn_states(&broker, "early"), [Some(TxnState::Aborted)]);
            assert!(producer.begin_transaction().is_err());
            producer.close().await;
        }
    });
}

/// InitProducerId answered with errors (`script_request`): retriable ones
/// are tried again and the producer gets its id; an authorization error
/// refuses it: an idempotent producer's waiting records fail with it, a
/// transactional producer's `init_transactions` fails fatally.
#[tokio::test]
async fn init_producer_id_errors_are_retried_or_refuse_the_producer() {
    let retriable = [
        BrokerError::CoordinatorLoadInProgress,
        BrokerError::ConcurrentTransactions,
        BrokerError::NotCoordinator,
    ];
    // Idempotent: retried, then stamped with the id.
    let broker = MockBroker::new().topic("t", 1);
    broker.script_request(Request::InitProducerId, retriable);
    let producer = broker
        .build(quick().set("enable.idempotence", "true"))
        .unwrap();
    let reports = one_report_each(&producer, &["a", "b"], async {}).await;
    assert!(reports
        .values()
        .all(|r| matches!(r, DeliveryReport::Delivered(_))));
    assert!(broker.history().iter().all(|a| a.stamp.is_some()));
    producer.close().await;
    // Idempotent: refused.
    let broker = MockBroker::new().topic("t", 1);
    broker.script_request(
        Request::InitProducerId,
        [BrokerError::ClusterAuthorizationFailed; 50],
    );
    let producer = broker
        .build(quick().set("enable.idempotence", "true"))
        .unwrap();
    let reports = one_report_each(&producer, &["c", "d"], async {}).await;
    for r in reports.values() {
        let DeliveryReport::Failed(e) = r else {
            panic!("{r:?}")
        };
        assert_eq!(
            e.kind,
            ErrorKind::Broker(BrokerError::ClusterAuthorizationFailed),
            "{e}"
        );
        assert!(!e.may_have_been_written(), "{e}");
    }
    assert!(broker.history().is_empty());
    producer.close().await;
    // Transactional: retried, then refused.
    let broker = MockBroker::new().topic("t", 1);
    broker.script_request(Request::InitProducerId, retriable);
    let producer = broker.build(transactional("ids")).unwrap();
    producer.init_transactions().await.unwrap();
    producer.close().await;
    broker.script_request(
        Request::InitProducerId,
        [BrokerError::TransactionalIdAuthorizationFailed],
    );
    let producer = broker.build(transactional("ids")).unwrap();
    let e = producer.init_transactions().await.unwrap_err();
    assert_eq!(
        fatal_kind(&e),
        ErrorKind::Broker(BrokerError::TransactionalIdAuthorizationFailed),
        "{e}"
    );
    producer.close().await;
}

/// A transactional producer during an outage: `commit_transaction` cannot
/// reach the coordinator and times out after `max.block.ms`
/// (`TransactionError::TimedOut`); called again once the broker is back,
/// it commits.
#[test]
fn a_commit_during_an_outage_times_out_and_resumes() {
    paused_system().block_on(async {
        let broker = MockBroker::new().topic("t", 1);
        let producer = broker
            .start(transactional("outage").set("max.block.ms", "3000"))
            .unwrap();
        producer.init_transactions().await.unwrap();
        producer.begin_transaction().unwrap();
        producer.send(Record::to("t").value("x")).await.unwrap();
        broker.go_down();
        let e = producer.commit_transaction().await.unwrap_err();
        assert!(matches!(e, TransactionError::TimedOut(_)), "{e:?}");
        assert_eq!(txn_states(&broker, "x"), [Some(TxnState::Open)]);
        broker.come_back();
        producer.commit_transaction().await.unwrap();
        assert_eq!(txn_states(&broker, "x"), [Some(TxnState::Committed)]);
        producer.close().await;
    });
}
