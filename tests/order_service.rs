//! An application's test written against the producer double, as a user
//! of the crate would write it: only the public API (`courier_kafka::
//! testing`, `Producer`, its reports), no broker.
//!
//! The application is a small order service. It writes each order and
//! its audit event in one transaction; when its producer is fenced (a
//! newer instance, or a transaction the coordinator timed out) it builds
//! a new producer and writes the order again. It sends notifications
//! without a transaction, and keeps those that could not be delivered (a
//! broker outage) to send again once the broker is back.

use std::time::Duration;

use courier_kafka::testing::{MockBroker, Request, TxnState, Verdict};
use courier_kafka::{BrokerError, DeliveryFuture, ErrorKind, Producer, Record, TransactionError};

// ---------------------------------------------------------------------
// The application.
// ---------------------------------------------------------------------

/// How the service gets a producer: from the cluster in production, from
/// a `MockBroker` in its tests.
type MakeProducer = Box<dyn Fn(&str) -> Producer>;

#[derive(Debug, PartialEq)]
enum PlaceError {
    /// The coordinator could not be reached in time: try later.
    Unavailable,
    /// Something the service cannot fix.
    Failed(String),
}

struct OrderService {
    make: MakeProducer,
    /// The transactional producer for orders.
    orders: Producer,
    /// The producer for notifications (idempotent, no transaction).
    notifications: Producer,
    /// Notifications not delivered, to send again.
    parked: Vec<Record>,
    /// Producers built for orders, the first included.
    generations: usize,
}

impl OrderService {
    async fn new(make: MakeProducer) -> OrderService {
        let orders = make("orders");
        orders.init_transactions().await.expect("init");
        let notifications = make("notifications");
        OrderService {
            make,
            orders,
            notifications,
            parked: Vec::new(),
            generations: 1,
        }
    }

    /// Writes the order and its audit event atomically, once.
    async fn place(&mut self, id: &str, body: &str) -> Result<(), PlaceError> {
        for _ in 0..3 {
            match self.try_place(id, body).await {
                Ok(()) => return Ok(()),
                // Fenced: this producer can do nothing more. A new one
                // (its init aborts what the old one left open) writes
                // the order again.
                Err(TransactionError::Fatal {
                    kind: ErrorKind::Fenced,
                    ..
                }) => self.replace_producer().await,
                Err(TransactionError::Abortable { kind, .. }) => {
                    match self.orders.abort_transaction().await {
                        // Not delivered in time (the broker is away):
                        // the order waits for a later call.
                        Ok(()) if kind == ErrorKind::Timeout => {
                            return Err(PlaceError::Unavailable)
                        }
                        Ok(()) => {}
                        // The abort finds the producer fenced (the
                        // coordinator timed the transaction out).
                        Err(TransactionError::Fatal {
                            kind: ErrorKind::Fenced,
                            ..
                        }) => self.replace_producer().await,
                        Err(e) => return Err(PlaceError::Failed(e.to_string())),
                    }
                }
                Err(TransactionError::TimedOut(_)) => return Err(PlaceError::Unavailable),
                Err(e) => return Err(PlaceError::Failed(e.to_string())),
            }
        }
        Err(PlaceError::Failed("gave up after 3 attempts".into()))
    }

    async fn try_place(&mut self, id: &str, body: &str) -> Result<(), TransactionError> {
        self.orders.begin_transaction()?;
        for topic in ["orders", "audit"] {
            let record = Record::to(topic)
                .key(id.to_string())
                .value(body.to_string());
            if let Err(e) = self.orders.send(record).await {
                // A record of the transaction failed: it cannot commit.
                return Err(TransactionError::Abortable {
                    kind: e.kind,
                    message: e.message,
                });
            }
        }
        self.orders.commit_transaction().await
    }

    async fn replace_producer(&mut self) {
        let old = std::mem::replace(&mut self.orders, (self.make)("orders"));
        old.close().await;
        self.generations += 1;
        self.orders.init_transactions().await.expect("init");
    }

    /// Sends a notification; its report comes back through the future.
    async fn notify(&self, text: &str) -> DeliveryFuture {
        self.notifications
            .submit(Record::to("notifications").value(text.to_string()))
            .await
            .expect("taken")
    }

    /// What became of sent notifications: the ones not delivered are
    /// parked (handed back by their reports).
    async fn settle(&mut self, sent: Vec<DeliveryFuture>) -> usize {
        let mut delivered = 0;
        for f in sent {
            match f.await {
                Ok(_) => delivered += 1,
                Err(e) => self.parked.push(*e.record),
            }
        }
        delivered
    }

    /// Sends the parked notifications again.
    async fn send_parked(&mut self) -> usize {
        let mut sent = Vec::new();
        for r in std::mem::take(&mut self.parked) {
            sent.push(self.notifications.submit(r).await.expect("taken"));
        }
        self.settle(sent).await
    }

    async fn close(self) {
        self.orders.close().await;
        self.notifications.close().await;
    }
}

// ---------------------------------------------------------------------
// Its tests.
// ---------------------------------------------------------------------

/// The service's producers, built against `broker`.
fn producers_from(broker: &MockBroker) -> MakeProducer {
    let broker = broker.clone();
    Box::new(move |role| {
        let builder = Producer::builder()
            .set("linger.ms", "0")
            .set("delivery.timeout.ms", "5000")
            .set("request.timeout.ms", "1000")
            .set("max.block.ms", "2000");
        let builder = if role == "orders" {
            builder.set("transactional.id", "order-service")
        } else {
            builder.set("enable.idempotence", "true")
        };
        broker.start(builder).expect("settings")
    })
}

/// What a read_committed consumer reads of `topic`: (key, value) of
/// every committed record, in log order.
fn committed(broker: &MockBroker, topic: &str) -> Vec<(String, String)> {
    broker
        .written()
        .into_iter()
        .filter(|a| a.record.topic.as_str() == topic && a.txn == Some(TxnState::Committed))
        .map(|a| {
            let s = |b: Option<bytes::Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
            (s(a.record.key), s(a.record.value))
        })
        .collect()
}

fn on_paused_time(test: impl std::future::Future<Output = ()>) {
    let system = actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    });
    system.block_on(test);
}

#[test]
fn orders_are_committed_with_their_audit_events() {
    on_paused_time(async {
        let broker = MockBroker::new().topic("orders", 3).topic("audit", 1);
        let mut service = OrderService::new(producers_from(&broker)).await;
        service.place("o-1", "2 books").await.unwrap();
        service.place("o-2", "1 lamp").await.unwrap();
        let both = vec![
            ("o-1".to_string(), "2 books".to_string()),
            ("o-2".to_string(), "1 lamp".to_string()),
        ];
        let mut orders = committed(&broker, "orders");
        orders.sort();
        assert_eq!(orders, both);
        assert_eq!(committed(&broker, "audit"), both);
        service.close().await;
    });
}

/// The commit is answered PRODUCER_FENCED: the service builds a new
/// producer, whose init aborts the first attempt, and the order is
/// committed once.
#[test]
fn a_fenced_producer_is_replaced_and_the_order_committed_once() {
    on_paused_time(async {
        let broker = MockBroker::new().topic("orders", 1).topic("audit", 1);
        let mut service = OrderService::new(producers_from(&broker)).await;
        broker.script_request(Request::EndTxn, [BrokerError::ProducerFenced]);
        service.place("o-3", "a chair").await.unwrap();
        assert_eq!(service.generations, 2);
        let once = vec![("o-3".to_string(), "a chair".to_string())];
        assert_eq!(committed(&broker, "orders"), once);
        assert_eq!(committed(&broker, "audit"), once);
        let aborted = broker
            .written()
            .iter()
            .filter(|a| a.txn == Some(TxnState::Aborted))
            .count();
        assert_eq!(aborted, 2, "the fenced attempt's order and audit event");
        service.close().await;
    });
}

/// The coordinator times the transaction out while the order is being
/// written (`expire_transactions`, as after `transaction.timeout.ms`):
/// the audit event, sent under the old epoch, is refused, the abort finds
/// the producer fenced, and the service writes the order again with a new
/// producer; the first attempt's order is aborted.
#[test]
fn a_transaction_the_coordinator_timed_out_is_written_again() {
    on_paused_time(async {
        let broker = MockBroker::new().topic("orders", 1).topic("audit", 1);
        // The first audit event waits at the broker until the test has
        // expired the transaction.
        broker.script(|r| r.topic.as_str() == "audit", [Verdict::Hold]);
        let mut service = OrderService::new(producers_from(&broker)).await;
        let b = broker.clone();
        let coordinator = actix::spawn(async move {
            while b.held() == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let expired = b.expire_transactions();
            assert!(b.complete_next());
            expired
        });
        service.place("o-4", "a desk").await.unwrap();
        assert_eq!(coordinator.await.unwrap(), 1);
        assert_eq!(service.generations, 2);
        let once = vec![("o-4".to_string(), "a desk".to_string())];
        assert_eq!(committed(&broker, "orders"), once);
        assert_eq!(committed(&broker, "audit"), once);
        let aborted: Vec<&str> = broker
            .written()
            .iter()
            .filter(|a| a.txn == Some(TxnState::Aborted))
            .map(|a| a.record.topic.as_str())
            .collect();
        assert_eq!(aborted, ["orders"]);
        service.close().await;
    });
}

/// A broker outage longer than `delivery.timeout.ms`: the notifications
/// fail (`Timeout`) and are parked, each once; orders cannot be placed
/// (the coordinator is unreachable). Once the broker is back, the parked
/// notifications are delivered, each written once, and orders go again.
#[test]
fn an_outage_parks_notifications_and_they_are_sent_once_it_is_over() {
    on_paused_time(async {
        let broker = MockBroker::new()
            .topic("orders", 1)
            .topic("audit", 1)
            .topic("notifications", 2);
        let mut service = OrderService::new(producers_from(&broker)).await;
        let first = service.notify("welcome").await;
        assert_eq!(service.settle(vec![first]).await, 1);

        broker.go_down();
        let mut sent = Vec::new();
        for text in ["shipped o-1", "shipped o-2", "shipped o-3"] {
            sent.push(service.notify(text).await);
        }
        assert_eq!(service.settle(sent).await, 0);
        assert_eq!(service.parked.len(), 3, "one failure report each");
        assert_eq!(
            service.place("o-5", "a rug").await,
            Err(PlaceError::Unavailable)
        );

        broker.come_back();
        assert_eq!(service.send_parked().await, 3);
        assert!(service.parked.is_empty());
        let mut notes: Vec<String> = broker
            .written()
            .iter()
            .filter(|a| a.record.topic.as_str() == "notifications")
            .map(|a| String::from_utf8(a.record.value.clone().unwrap().to_vec()).unwrap())
            .collect();
        notes.sort();
        assert_eq!(
            notes,
            ["shipped o-1", "shipped o-2", "shipped o-3", "welcome"]
        );
        // Placing resumes.
        service.place("o-5", "a rug").await.unwrap();
        assert_eq!(
            committed(&broker, "orders"),
            [("o-5".to_string(), "a rug".to_string())]
        );
        service.close().await;
    });
}
