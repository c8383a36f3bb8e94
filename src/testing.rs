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
//!   [`Verdict::LoseAnswer`] (written, but the answer lost), or
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
//!   refusals for good).
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
//! What it does not do: `max.in.flight.requests.per.connection` without idempotence
//! (each batch is a request of its own), and connection-level failures
//! (lost sockets, TLS, SASL). Use a real broker (the crate's own tests use Tansu, librdkafka's mock cluster
//! and Apache Kafka) for those.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::actors::scripted::Script;
pub use crate::actors::scripted::{Answer, Arrival, Stamp, TxnState, Verdict};
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
