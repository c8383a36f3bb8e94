//! Every message the actors exchange, in one place.

use actix::{Message, Recipient};
use bytes::Bytes;
use kafka_protocol::messages::MetadataResponse;
use std::collections::HashMap;

use crate::idempotence::FetchError;
use crate::record::{Record, Topic};
use crate::report::{DeliveryReport, ErrorKind};

/// Produce one record; its report goes to `reply_to`.
///
/// Send it to the producer's [`crate::Producer::actor`] address. Each
/// message is one actor hop (about 500 ns here); for throughput, the
/// `Producer` handle methods append without any actor hop.
#[derive(Debug)]
pub struct Produce {
    /// The record.
    pub record: Record,
    /// Where the one delivery report for it goes.
    pub reply_to: Recipient<DeliveryReport>,
}

impl Message for Produce {
    type Result = ();
}

/// Drain ready batches now (a batch was opened or filled, a flush began,
/// or metadata changed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wake;

impl Message for Wake {
    type Result = ();
}

/// Ask one broker for metadata.
#[derive(Debug, Clone)]
pub(crate) struct FetchMetadata {
    pub topics: Vec<Topic>,
}

impl Message for FetchMetadata {
    type Result = Result<MetadataResponse, String>;
}

/// Get a producer id (or bump the epoch of `bump_from`) through this
/// broker: InitProducerId.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InitProducer {
    pub bump_from: Option<(i64, i16)>,
}

impl Message for InitProducer {
    type Result = Result<(i64, i16), FetchError>;
}

/// Partitions with batches are waiting to join the open transaction
/// (`Transactions::wanted`): the transaction actor adds them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddPartitionsWanted;

impl Message for AddPartitionsWanted {
    type Result = ();
}

/// Any request through this broker's connection, built for the version
/// agreed with the broker (capped at `max`); answered with the decoded
/// response and the version used. For the transaction actor, whose
/// requests (FindCoordinator, AddPartitionsToTxn, EndTxn, …) are rare.
pub(crate) struct Ask<R> {
    pub api: crate::protocol::ApiKey,
    pub max: i16,
    pub build: Box<dyn FnOnce(i16) -> R + Send>,
}

impl<R> std::fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask").field("api", &self.api).finish()
    }
}

impl<R> Message for Ask<R>
where
    R: kafka_protocol::protocol::Request + 'static,
    R::Response: Send + 'static,
{
    type Result = Result<(i16, R::Response), String>;
}

/// Get the transactional producer an id (or bump its epoch) at its
/// transaction coordinator: the supervisor asks the transaction actor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InitTransactional {
    pub bump_from: Option<(i64, i16)>,
}

impl Message for InitTransactional {
    type Result = Result<(i64, i16), FetchError>;
}

/// End transaction `generation` at the coordinator (EndTxn), retrying what
/// is retriable up to `max.block.ms`; once it has ended, the answer is how
/// it ended (a second commit of it learns the first one's outcome).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EndTransaction {
    pub commit: bool,
    pub generation: u64,
    /// For an abort: whether to send EndTxn, and whether to bump the
    /// epoch after it (`Transactions::abort_plan`).
    pub plan: crate::transaction::AbortPlan,
}

impl Message for EndTransaction {
    type Result = Result<(), crate::transaction::TransactionError>;
}

/// Add a consumer group's offsets to the open transaction
/// (AddOffsetsToTxn, then TxnOffsetCommit at the group coordinator).
#[derive(Debug, Clone)]
pub(crate) struct SendOffsets {
    pub offsets: Vec<(Topic, i32, i64)>,
    pub group: crate::transaction::GroupMetadata,
}

impl Message for SendOffsets {
    type Result = Result<(), crate::transaction::TransactionError>;
}

/// The idempotent producer needs an id (or an epoch bump): the supervisor
/// starts one when it is due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnsureProducerId;

impl Message for EnsureProducerId {
    type Result = ();
}

/// A response frame read by the connection's reader task.
#[derive(Debug)]
pub(crate) struct ResponseFrame {
    pub generation: u64,
    pub frame: Bytes,
}

impl Message for ResponseFrame {
    type Result = ();
}

/// The connection's reader or writer task failed.
#[derive(Debug)]
pub(crate) struct ConnectionLost {
    pub generation: u64,
    pub error: String,
}

impl Message for ConnectionLost {
    type Result = ();
}

/// Stop this connection actor: its partitions moved away, or the broker
/// left the cluster. In-flight batches go back to their queues.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retire;

impl Message for Retire {
    type Result = ();
}

/// Wakes a supervisor whose tick sleeps (nothing left to report): a batch
/// opened, or one of its actors is gone (`Alarm`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rouse;

impl Message for Rouse {
    type Result = ();
}

/// Held by each actor the supervisor restarts, and dropped with it (after
/// a panic, or a stop): it rouses the supervisor, whose tick then finds
/// and restarts a dead actor even while the producer is idle and the tick
/// sleeps. Not `Clone`: one per actor.
#[derive(Debug)]
pub(crate) struct Alarm(pub(crate) Option<actix::WeakRecipient<Rouse>>);

impl Drop for Alarm {
    fn drop(&mut self) {
        if let Some(r) = self.0.as_ref().and_then(|r| r.upgrade()) {
            r.do_send(Rouse);
        }
    }
}

/// Stop the partitioner (producer shutdown: its topic waits are answered
/// `Cancelled`), or the transaction or telemetry actor (the supervisor
/// has stopped). Exchanges already handed to the runtime (an
/// `EndTransaction` under way) run on and answer; timers and loops of
/// the actor's own end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopActor;

impl Message for StopActor {
    type Result = ();
}

/// Whether the telemetry actor holds a subscription (lib tests only).
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct TelemetrySubscribed;

#[cfg(test)]
impl Message for TelemetrySubscribed {
    type Result = bool;
}

/// Fail every in-flight batch with `Cancelled` (producer dropped).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CancelInFlight;

impl Message for CancelInFlight {
    type Result = ();
}

/// KIP-794: a sticky partition moved; the partitioner actor weighs the
/// partitions of the topics that moved (`Engine::want_weights`), once per
/// refresh period however many moves ask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WeighPartitions;

impl Message for WeighPartitions {
    type Result = ();
}

/// Wait until `topic`'s metadata is known, up to `max.block.ms`.
#[derive(Debug, Clone)]
pub(crate) struct EnsureTopic {
    pub topic: Topic,
}

impl Message for EnsureTopic {
    /// `Err` names the kind and, for people, why: the topic does not
    /// exist, or no broker answered. `None`: the partitioner went away
    /// before it answered (it died): ask its successor.
    type Result = Option<Result<(), (ErrorKind, String)>>;
}

/// A connection failed TLS or authentication: retrying will not mend it
/// until the settings or the cluster change, so what waits fails now with
/// this cause (and reconnects go on, backing off).
#[derive(Debug, Clone)]
pub(crate) struct SecurityFailed {
    pub kind: ErrorKind,
    pub message: String,
}

impl Message for SecurityFailed {
    type Result = ();
}

/// Refresh metadata soon (a leader moved, a connection broke).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefreshMetadata;

impl Message for RefreshMetadata {
    type Result = ();
}

/// No broker the producer knows answers metadata requests any more
/// (`metadata.recovery.strategy=rebootstrap`, KIP-899 and KIP-1102): the
/// supervisor connects to `bootstrap.servers` again, resolving their names
/// afresh, so that a cluster replaced behind the same names is found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rebootstrap;

impl Message for Rebootstrap {
    type Result = ();
}

/// Produce answers named the new leaders of partitions a broker refused
/// (KIP-951): the partitioner actor moves them in the metadata if the
/// hints are newer than what it holds, and asks for metadata only if some
/// hint could not be used.
#[derive(Debug, Clone)]
pub(crate) struct LeaderHints {
    pub hints: Vec<crate::metadata::LeaderHint>,
    /// The answer's `NodeEndpoints`: (broker id, `host:port`).
    pub endpoints: Vec<(i32, String)>,
}

impl Message for LeaderHints {
    type Result = ();
}

/// The broker set from the latest metadata.
#[derive(Debug, Clone)]
pub(crate) struct BrokersChanged {
    pub brokers: HashMap<i32, String>,
}

impl Message for BrokersChanged {
    type Result = ();
}

/// Stop the producer. With `cancel`, every record not yet acknowledged is
/// reported `Cancelled`; without, the caller has flushed already.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shutdown {
    pub cancel: bool,
}

impl Message for Shutdown {
    type Result = ();
}

/// Panic inside the connection actor's handler (fault-injection builds only).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct InjectPanic;

#[cfg(feature = "fault-injection")]
impl Message for InjectPanic {
    type Result = ();
}

/// Panic inside the transaction actor's handler (fault-injection builds
/// only).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct InjectTransactionPanic;

#[cfg(feature = "fault-injection")]
impl Message for InjectTransactionPanic {
    type Result = ();
}

/// Panic while handling the next Produce response, holding its batches
/// (fault-injection builds only): the last line of defence's test.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct InjectResponsePanic;

#[cfg(feature = "fault-injection")]
impl Message for InjectResponsePanic {
    type Result = ();
}
