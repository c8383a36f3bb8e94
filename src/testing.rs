//! A producer double for testing applications: the real [`Producer`],
//! with a scripted in-process broker ([`MockBroker`]) behind it instead
//! of a Kafka cluster. No broker, no socket, no network.
//!
//! The code under test keeps the types it uses in production: it gets a
//! [`Producer`] (built by the test from a `MockBroker`) and calls `send`,
//! `submit`, `subscribe` and a [`Subscriber`](crate::Subscriber)'s
//! `produce` and `produce_batch`, `produce_to`, the
//! [`Produce`](crate::Produce) actor message, or a
//! [`RetryActor`](crate::retry::RetryActor) on top, as it would against a
//! cluster. The test decides, per record, what the broker answers, and
//! reads back what reached it:
//!
//! - **Auto-complete** (the default, as Java's `MockProducer`): every
//!   record is written at the next offset of its partition. Partitions
//!   are chosen by the producer's own partitioner (murmur2 for keys,
//!   sticky otherwise, or a custom one), from the partition count the test
//!   gives each topic ([`MockBroker::topic`]); a topic it did not name is
//!   created on first use with one partition, unless
//!   [`auto_create_topics`](MockBroker::auto_create_topics)`(None)` or the
//!   producer's `allow.auto.create.topics=false` say otherwise (then a
//!   record to it fails `UnknownTopic` after `max.block.ms`, as against a
//!   cluster without it).
//! - **Scripts** ([`MockBroker::script`], [`script_next`](MockBroker::script_next),
//!   [`script_always`](MockBroker::script_always)): records a predicate
//!   matches get the next of its [`Verdict`]s each time they reach the
//!   broker (once per attempt: a record the producer retries arrives again
//!   and takes the next verdict): [`Verdict::Deliver`],
//!   [`Verdict::Fail`] with any broker error code, [`Verdict::TimeOut`],
//!   [`Verdict::LoseAnswer`] (written, but the answer lost),
//!   [`Verdict::Disconnect`] (the connection drops as it arrives), or
//!   [`Verdict::Hold`]. Failures are what the producer would get from
//!   a broker, and it treats them the same way: a retriable code
//!   (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, …) is retried within
//!   `retries` and `delivery.timeout.ms`, with `retry.backoff.ms`, then
//!   reported; MESSAGE_TOO_LARGE splits a batch of several records; any
//!   other code is reported at once (`ErrorKind::Broker`).
//! - **Manual mode** ([`auto_complete`](MockBroker::auto_complete)`(false)`)
//!   holds every record no script decides, in arrival order, until the
//!   test answers it: [`complete_next`](MockBroker::complete_next),
//!   [`error_next`](MockBroker::error_next),
//!   [`release_next`](MockBroker::release_next),
//!   [`release_all`](MockBroker::release_all). A held record is in flight,
//!   as with a slow broker: `flush` and `close` wait for it;
//!   `close_timeout` and dropping the last handle report it `Cancelled`
//!   ("may or may not have been written"); after `request.timeout.ms` its
//!   request times out and the producer retries it.
//! - **History** ([`MockBroker::history`]): every record as it reached
//!   the broker, read back from the batch the producer encoded (topic,
//!   partition, key, value, headers, create time), with its attempt and
//!   the answer it got; [`MockBroker::written`] is the log a consumer
//!   would read.
//! - **Idempotence**, when the producer sets `enable.idempotence=true`
//!   (the double's producer runs without it otherwise): the double hands
//!   out a producer id and epochs, and checks each batch's sequences as a
//!   Kafka broker does. A retry of a batch already written is answered
//!   with the offset it holds ([`Answer::Duplicate`]) and not written
//!   again; a sequence out of order is refused
//!   OUT_OF_ORDER_SEQUENCE_NUMBER. Each arrival carries its [`Stamp`].
//!   [`MockBroker::forget_producers`] drops that state, as a broker does
//!   after `producer.id.expiration.ms`.
//! - **Transactions**, when the producer sets `transactional.id`: the
//!   double is its transaction coordinator too (FindCoordinator,
//!   InitProducerId, AddPartitionsToTxn, EndTxn, AddOffsetsToTxn,
//!   TxnOffsetCommit, answered as Kafka's coordinator answers them, over
//!   the same request and response bytes). A newer producer with the same
//!   id fences the older and aborts what it left open; each written
//!   record's [`Arrival::txn`] says whether its transaction is open,
//!   committed or aborted ([`TxnState`]), which is what a read_committed
//!   consumer would see. [`MockBroker::script_coordinator`] answers the
//!   next coordinator requests with errors (loading, moved, busy, or
//!   refusals for good), and [`MockBroker::script_request`] the next
//!   requests of one kind ([`Request::EndTxn`]: a commit answered
//!   PRODUCER_FENCED, say). The coordinator aborts a transaction open
//!   longer than the producer's `transaction.timeout.ms`, bumping the
//!   epoch, as Kafka's does ([`MockBroker::expire_transactions`] does it
//!   now): the producer that left it is fenced.
//! - **Producer-id errors**: [`MockBroker::script_request`] with
//!   [`Request::InitProducerId`] answers an idempotent or transactional
//!   producer's InitProducerId with errors: retriable ones
//!   (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) are tried
//!   again after `retry.backoff.ms`; authorization errors refuse the
//!   producer (an idempotent producer's records fail with the cause, a
//!   transactional producer's `init_transactions` fails fatally).
//! - **Connections**: [`MockBroker::disconnect`] drops every producer's
//!   connection: the requests in flight lose their answers (written
//!   first with [`disconnect_after_writing`](MockBroker::disconnect_after_writing)),
//!   and each producer takes the path a connection actor takes when its
//!   socket is lost: the requests go back to their queues (an attempt
//!   each), it reconnects after `reconnect.backoff.ms` and sends them
//!   again (with idempotence, a retry of a written batch is a
//!   [`Answer::Duplicate`]; without, it is written twice), and the
//!   disconnect counts in [`Producer::stats`].
//!   [`go_down`](MockBroker::go_down) is an outage: connections drop and
//!   reconnecting fails (the backoff growing to
//!   `reconnect.backoff.max.ms`) until [`come_back`](MockBroker::come_back);
//!   records wait and fail `ErrorKind::Timeout` after
//!   `delivery.timeout.ms`, or are delivered once it is back; a
//!   transaction's requests fail to connect until `max.block.ms`
//!   (`TransactionError::TimedOut`).
//! - **Slow answers**: [`MockBroker::set_latency`] delays every answer
//!   (Produce and coordinator requests); one later than
//!   `request.timeout.ms` times out instead. The delays are on tokio's
//!   clock: a test on a paused runtime
//!   (`tokio::runtime::Builder::start_paused`, with
//!   [`MockBroker::start`]) waits out a latency, a backoff or
//!   `delivery.timeout.ms` without waiting.
//!
//! ```
//! use courier_kafka::BrokerError;
//! use courier_kafka::testing::{Answer, MockBroker, Verdict};
//! use courier_kafka::{ErrorKind, Producer, Record};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), courier_kafka::Error> {
//! let broker = MockBroker::new().topic("orders", 3);
//! // The first record with key "k2" is refused, not retriable: reported failed.
//! broker.script(
//!     |r| r.key.as_deref() == Some(&b"k2"[..]),
//!     [Verdict::Fail(BrokerError::RecordListTooLarge)],
//! );
//! let producer = broker.build(Producer::builder().set("linger.ms", "0"))?;
//!
//! let delivered = producer.send(Record::to("orders").key("k1").value("a")).await?;
//! assert_eq!(delivered.offset, Some(0));
//! let failed = producer.send(Record::to("orders").key("k2").value("b")).await.unwrap_err();
//! assert_eq!(failed.kind, ErrorKind::Broker(BrokerError::RecordListTooLarge));
//! assert_eq!(failed.record.value.as_deref(), Some(&b"b"[..])); // handed back
//!
//! // What reached the broker, attempt by attempt.
//! let history = broker.history();
//! assert_eq!(history.len(), 2);
//! assert_eq!(history[0].answer, Answer::Written { offset: 0 });
//! assert_eq!(history[1].answer, Answer::Refused(BrokerError::RecordListTooLarge));
//! producer.close().await;
//! # Ok(()) }
//! ```
//!
//! # How it is built, and why
//!
//! The double replaces only what touches the network: the connection
//! actors and the metadata actor. A `MockBroker`'s producer is made by
//! the real [`ProducerBuilder`] (settings
//! validated as usual) and runs the real supervisor, accumulator,
//! batching (`linger.ms`, `batch.size`, compression), routing and report
//! streams; a scripted broker actor stands where the connection actors
//! stand, drains the partition queues as they do, and answers each batch
//! through the same code a Produce response goes through. So a test
//! through the double exercises the report paths an application relies
//! on, exactly one report per record included, not a model of them. A
//! batch whose records get different verdicts is split into one batch per
//! record first (as for MESSAGE_TOO_LARGE), and so is a held one.
//!
//! Connection-level failures are the double's network, not a socket: a
//! dropped connection is noticed by the scripted broker actor as a
//! connection actor notices a lost socket, with the same effects (the
//! requests in flight back in their queues through the engine's
//! `retry_or_fail`, a disconnect counted, a reconnect after the same
//! `reconnect.backoff.ms` backoff); nothing is sent until it has
//! reconnected.
//!
//! What it does not do: `max.in.flight.requests.per.connection` without
//! idempotence (each batch is a request of its own); more than one broker
//! (so no leader moving to another broker, no partition whose leader
//! alone is down); TLS and SASL (handshakes, certificates, credentials,
//! re-authentication); and the socket itself (a connect that hangs until
//! `socket.connection.setup.timeout.ms`, a partial write, a corrupt
//! frame). Use a real broker (the crate's own tests use Tansu,
//! librdkafka's mock cluster and Apache Kafka) for those.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::actors::scripted::Script;
pub use crate::actors::scripted::{Answer, Arrival, Request, Stamp, TxnState, Verdict};
/// Fault-injection builds only: the batches of a topic whose name starts
/// with this fail to compress (with any codec but `none`), as a codec
/// library's error would make them, so that a test can follow the reports
/// of a compression failure.
#[cfg(feature = "fault-injection")]
pub use crate::batching::FAIL_COMPRESSION_TOPIC;
use crate::config::ConfigError;
use crate::kafka_error::BrokerError;
use crate::producer::{Producer, ProducerBuilder};
use crate::record::{Record, Topic};

/// A scripted in-process broker, for building [`Producer`]s that need no
/// cluster (see the [module documentation](self)).
///
/// Cheap to clone: clones share the script, the topics and the history.
/// Several producers built from one `MockBroker` share its log (offsets)
/// and script, as producers sharing a cluster do.
#[derive(Debug, Clone, Default)]
pub struct MockBroker {
    script: Arc<Script>,
}

impl MockBroker {
    /// A broker that writes every record (auto-complete) and creates a
    /// topic it does not have on first use, with one partition.
    pub fn new() -> MockBroker {
        MockBroker::default()
    }

    /// With `topic` of `partitions` partitions (or grown to that many: a
    /// topic never shrinks, as in Kafka). Also at any time through
    /// [`create_topic`](Self::create_topic).
    pub fn topic(self, topic: &str, partitions: i32) -> MockBroker {
        self.create_topic(topic, partitions);
        self
    }

    /// Topics the broker does not have are created on first use with
    /// `Some(partitions)`, or never (`None`: a record to one fails
    /// `UnknownTopic` once `max.block.ms` has passed).
    pub fn auto_create_topics(self, partitions: Option<i32>) -> MockBroker {
        self.script.set_auto_create(partitions);
        self
    }

    /// `true` (the default): records no script decides are written at
    /// once. `false`: they are held until the test answers them
    /// ([`complete_next`](Self::complete_next) and its siblings), as with
    /// Java's `MockProducer(autoComplete = false)`.
    pub fn auto_complete(self, on: bool) -> MockBroker {
        self.set_default(if on { Verdict::Deliver } else { Verdict::Hold });
        self
    }

    /// The verdict for records no script decides (`Deliver` unless changed).
    pub fn set_default(&self, verdict: Verdict) {
        self.script.set_default(verdict);
    }

    /// Creates `topic` with `partitions` partitions, or grows it to that
    /// many; producers see the change at once.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.script.set_topic(Topic::from(topic), partitions);
    }

    /// The partition count of `topic`, if the broker has it.
    pub fn partitions(&self, topic: &str) -> Option<i32> {
        self.script.topics().get(&Topic::from(topic)).copied()
    }

    /// Records `matches` accepts get `verdicts`, one per arrival, in order;
    /// once they are used up, later scripts or the default decide. Scripts
    /// are tried in the order they were added; the first that matches a
    /// record and has a verdict left decides. The record `matches` sees
    /// is the one that reached the broker: its partition and create time
    /// are set.
    pub fn script(
        &self,
        matches: impl Fn(&Record) -> bool + Send + Sync + 'static,
        verdicts: impl IntoIterator<Item = Verdict>,
    ) -> &Self {
        self.script.add_rule(
            Box::new(matches),
            verdicts.into_iter().collect::<VecDeque<_>>(),
            None,
        );
        self
    }

    /// The next records to arrive, whatever they are, get `verdicts`, one
    /// each (a script that matches every record).
    pub fn script_next(&self, verdicts: impl IntoIterator<Item = Verdict>) -> &Self {
        self.script(|_| true, verdicts)
    }

    /// Every arrival of a record `matches` accepts gets `verdict`, for as
    /// long as the script stands (say, a poison record always refused).
    pub fn script_always(
        &self,
        matches: impl Fn(&Record) -> bool + Send + Sync + 'static,
        verdict: Verdict,
    ) -> &Self {
        self.script
            .add_rule(Box::new(matches), VecDeque::new(), Some(verdict));
        self
    }

    /// Removes every script (the default then decides every record).
    pub fn clear_scripts(&self) {
        self.script.clear_rules();
    }

    /// Builds `builder`'s producer against this broker, with its actors on
    /// a thread of their own, as [`ProducerBuilder::build`] does.
    /// `bootstrap.servers` may be left out; any setting `build` refuses is
    /// refused.
    pub fn build(&self, builder: ProducerBuilder) -> Result<Producer, ConfigError> {
        builder.scripted(self.script.clone(), true)
    }

    /// Like [`build`](Self::build), with the actors in the current actix
    /// system, as [`ProducerBuilder::start`] does (call it from inside
    /// one).
    pub fn start(&self, builder: ProducerBuilder) -> Result<Producer, ConfigError> {
        builder.scripted(self.script.clone(), false)
    }

    /// Every record that reached the broker, in arrival order: one entry
    /// per attempt, with the answer it got so far (as Java's
    /// `MockProducer::history`, but after partitioning and batching).
    pub fn history(&self) -> Vec<Arrival> {
        self.script.history()
    }

    /// The log: every record written, by topic, partition and offset.
    pub fn written(&self) -> Vec<Arrival> {
        let mut log: Vec<Arrival> = self
            .history()
            .into_iter()
            .filter(|a| matches!(a.answer, Answer::Written { .. }))
            .collect();
        log.sort_by_key(|a| {
            let offset = match a.answer {
                Answer::Written { offset } => offset,
                _ => unreachable!("filtered above"),
            };
            (a.record.topic, a.record.partition, offset)
        });
        log
    }

    /// Records held now (not answered yet).
    pub fn held(&self) -> usize {
        self.script.held()
    }

    /// Writes the oldest held record (Java's `completeNext`); false when
    /// none is held.
    pub fn complete_next(&self) -> bool {
        self.release_next(Verdict::Deliver)
    }

    /// Refuses the oldest held record with `error` (Java's `errorNext`), as
    /// a broker's response would: retriable codes are retried; false when
    /// none is held.
    pub fn error_next(&self, error: BrokerError) -> bool {
        self.release_next(Verdict::Fail(error))
    }

    /// Answers the oldest held record with `verdict` (`Hold` holds it
    /// again, behind the others); false when none is held. Its report is
    /// routed before this returns, unless the answer leads to a retry.
    pub fn release_next(&self, verdict: Verdict) -> bool {
        self.script.release(1, verdict, false) == 1
    }

    /// Answers every held record with `verdict`, oldest first; returns how
    /// many there were.
    pub fn release_all(&self, verdict: Verdict) -> usize {
        self.script.release(usize::MAX, verdict, false)
    }

    /// Answers every held record with `verdict`, newest first (as answers
    /// that overtake each other across connections); returns how many
    /// there were. With idempotence, a later batch of a partition written
    /// before an earlier one is refused OUT_OF_ORDER_SEQUENCE_NUMBER, as
    /// by a Kafka broker.
    pub fn release_all_newest_first(&self, verdict: Verdict) -> usize {
        self.script.release(usize::MAX, verdict, true)
    }

    /// Answers the next transaction-coordinator requests of a
    /// transactional producer (FindCoordinator, InitProducerId,
    /// AddPartitionsToTxn, EndTxn, AddOffsetsToTxn, TxnOffsetCommit), one
    /// each, with `errors` instead of their result: the request changes
    /// nothing, as when a coordinator is loading
    /// (COORDINATOR_LOAD_IN_PROGRESS), has moved (NOT_COORDINATOR), or
    /// still completes the previous transaction (CONCURRENT_TRANSACTIONS).
    /// The producer handles each as it would from a cluster.
    pub fn script_coordinator(&self, errors: impl IntoIterator<Item = BrokerError>) {
        self.script
            .script_coordinator(errors.into_iter().map(i16::from));
    }

    /// Answers the next `request`s (of any producer built from this
    /// broker), one each, with `errors` instead of their result: the
    /// request changes nothing. Unlike
    /// [`script_coordinator`](Self::script_coordinator), which answers
    /// whatever coordinator request comes next, this waits for that
    /// request, and it reaches an idempotent producer's InitProducerId
    /// too (which is not a coordinator request). The producer handles
    /// each answer as it would from a cluster: for InitProducerId,
    /// COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS or
    /// NOT_COORDINATOR are tried again after `retry.backoff.ms`, while
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED or
    /// CLUSTER_AUTHORIZATION_FAILED refuse the producer (an idempotent
    /// producer's records fail with it; a transactional producer's
    /// `init_transactions` fails fatally); for EndTxn, a retriable code is
    /// retried, PRODUCER_FENCED or INVALID_PRODUCER_EPOCH fence the
    /// producer (`ErrorKind::Fenced`), and a code no rule names fails the
    /// commit fatally, as Kafka's clients treat an unexpected EndTxn
    /// answer.
    pub fn script_request(&self, request: Request, errors: impl IntoIterator<Item = BrokerError>) {
        self.script
            .script_request(request, errors.into_iter().map(i16::from));
    }

    /// The coordinator aborts every open transaction now, as Kafka's
    /// does with one open longer than the producer's
    /// `transaction.timeout.ms` (which the double also does on its own,
    /// checking at each transactional request, so a test on paused time
    /// can let the timeout pass instead). The abort bumps the epoch, so
    /// that the producer that left the transaction is fenced: its next
    /// batch is refused INVALID_PRODUCER_EPOCH and its commit fails
    /// (`ErrorKind::Fenced`), as on Kafka. Its records written so far
    /// are aborted ([`TxnState::Aborted`]). Returns how many transactions
    /// it aborted.
    pub fn expire_transactions(&self) -> usize {
        self.script.expire_transactions()
    }

    /// Drops every producer's connection, as a broker restart, a load
    /// balancer's cut or a network blip does: the requests in flight
    /// (held records, slow answers on their way) lose their answers and
    /// are not written; the producers take their lost-connection path
    /// (the requests go back to their queues, counted as an attempt, and
    /// are sent again once they have reconnected, after
    /// `reconnect.backoff.ms`; each counts a disconnect in
    /// [`Producer::stats`]). Returns how many requests were lost. A
    /// record sent again is written once; see
    /// [`disconnect_after_writing`](Self::disconnect_after_writing) for
    /// requests the broker wrote before the connection dropped.
    pub fn disconnect(&self) -> usize {
        self.script.drop_connections(
            None,
            false,
            "connection to broker 0 lost (MockBroker::disconnect)",
        )
    }

    /// As [`disconnect`](Self::disconnect), but the broker wrote the
    /// requests in flight before the connection dropped (their answers
    /// are lost): sent again, an idempotent producer's record is
    /// recognised as a duplicate ([`Answer::Duplicate`]) and written
    /// once; any other's is written twice, as on Kafka.
    pub fn disconnect_after_writing(&self) -> usize {
        self.script.drop_connections(
            None,
            true,
            "connection to broker 0 lost (MockBroker::disconnect_after_writing)",
        )
    }

    /// The broker goes down (an outage): every connection drops, as with
    /// [`disconnect`](Self::disconnect), and until
    /// [`come_back`](Self::come_back) nothing is answered: producers fail
    /// to reconnect (their backoff growing to `reconnect.backoff.max.ms`),
    /// so records wait in their queues and fail `ErrorKind::Timeout` once
    /// `delivery.timeout.ms` passes; transactional requests fail to
    /// connect and are retried until `max.block.ms` (then
    /// `TransactionError::TimedOut`); an idempotent producer gets no id;
    /// a topic producers have not seen is not learnt (`UnknownTopic`
    /// after `max.block.ms`). Returns how many requests were lost.
    pub fn go_down(&self) -> usize {
        self.script.go_down()
    }

    /// The broker is back after [`go_down`](Self::go_down): producers
    /// reconnect at their next attempt and send what waits.
    pub fn come_back(&self) {
        self.script.come_back();
    }

    /// Every answer (to a Produce request, and to a transactional
    /// producer's coordinator requests) comes `latency` after the
    /// request, as from a slow broker; `Duration::ZERO` (the default)
    /// answers at once. A request whose answer would come after
    /// `request.timeout.ms` times out instead (not written), and is
    /// retried. Meanwhile the request is in flight: `flush` waits for it,
    /// a disconnect loses it. Held records ([`Verdict::Hold`]) wait for
    /// the test, whatever the latency. The delay is on tokio's clock, so
    /// a test on a paused runtime does not wait for it.
    pub fn set_latency(&self, latency: Duration) {
        self.script.set_latency(latency);
    }

    /// Forgets every idempotent producer's state, as a Kafka broker does
    /// when `producer.id.expiration.ms` passes without traffic or when
    /// retention deletes the segments that held it: each producer's next
    /// batch in each partition is taken whatever its sequence (no gap is
    /// seen), and a retry of a batch written before is written again
    /// (nothing left to recognise it by).
    pub fn forget_producers(&self) {
        self.script.forget_producers();
    }

    /// Writes every held record; returns how many there were.
    pub fn complete_all(&self) -> usize {
        self.release_all(Verdict::Deliver)
    }
}
