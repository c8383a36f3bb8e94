//! What the double answers, and what it keeps of each arrival: the
//! public `Verdict`, `Answer`, `Arrival` and `Stamp`.

use super::txn::TxnState;
use crate::kafka_error::BrokerError;
use crate::protocol::ApiKey;
use crate::record::Record;

/// The scripted broker's id: it leads every partition.
pub(crate) const BROKER_ID: i32 = 0;

/// What the broker does with one record each time it arrives (once per
/// attempt: a record the producer retries arrives again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Written: the next offset of its partition, reported delivered.
    Deliver,
    /// Refused with this error code, as a broker's Produce response would:
    /// the producer retries a retriable one (NOT_ENOUGH_REPLICAS,
    /// NOT_LEADER_OR_FOLLOWER, …) within `retries` and
    /// `delivery.timeout.ms`, splits a batch refused MESSAGE_TOO_LARGE,
    /// and reports any other failed (`ErrorKind::Broker`).
    Fail(BrokerError),
    /// No answer: the request times out (as when `request.timeout.ms`
    /// passes with no response), now. The producer counts the attempt and
    /// retries it, or reports `ErrorKind::Timeout` once `retries` or
    /// `delivery.timeout.ms` are used up.
    TimeOut,
    /// Not answered until the test releases it
    /// (`MockBroker::complete_next`, `error_next`, `release_next`,
    /// `release_all`). Meanwhile the record is in flight, as if the broker
    /// were slow: `flush` and `close` wait for it, `close_timeout` and
    /// dropping the producer report it `Cancelled` ("may or may not have
    /// been written"), and after `request.timeout.ms` its request times
    /// out and is retried.
    Hold,
    /// Written (the next offset of its partition, as `Deliver`), but the
    /// answer is lost: the request times out, as when a connection drops
    /// after the broker wrote the batch and before its response arrived.
    /// The producer retries it: an idempotent producer's retry is a
    /// duplicate the broker recognises (`Answer::Duplicate`), any other's
    /// is written again.
    LoseAnswer,
    /// The connection drops as the request arrives, as when a socket is
    /// lost (a broker restarting, a load balancer's idle cut, a network
    /// blip): the record is not written, and every other request of the
    /// producer in flight loses its answer with it (held records too;
    /// see `MockBroker::disconnect`). The producer takes its
    /// lost-connection path: the requests go back to their queues (each
    /// counted as an attempt), it reconnects after `reconnect.backoff.ms`
    /// and sends them again, or reports `ErrorKind::Timeout` once
    /// `retries` or `delivery.timeout.ms` are used up.
    Disconnect,
}

/// A request other than Produce that the double answers, for scripting
/// its errors ([`MockBroker::script_request`](crate::testing::MockBroker::script_request)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Request {
    /// FindCoordinator: where a transactional producer's coordinator is.
    FindCoordinator,
    /// InitProducerId: an idempotent producer's id and epoch (and each
    /// epoch bump), or a transactional producer's from its coordinator.
    InitProducerId,
    /// AddPartitionsToTxn: partitions join the open transaction.
    AddPartitionsToTxn,
    /// EndTxn: the transaction's commit or abort.
    EndTxn,
    /// AddOffsetsToTxn: a consumer group's offsets join the transaction.
    AddOffsetsToTxn,
    /// TxnOffsetCommit: the group's offsets, at its coordinator.
    TxnOffsetCommit,
}

impl Request {
    pub(crate) fn api(self) -> ApiKey {
        match self {
            Request::FindCoordinator => ApiKey::FindCoordinator,
            Request::InitProducerId => ApiKey::InitProducerId,
            Request::AddPartitionsToTxn => ApiKey::AddPartitionsToTxn,
            Request::EndTxn => ApiKey::EndTxn,
            Request::AddOffsetsToTxn => ApiKey::AddOffsetsToTxn,
            Request::TxnOffsetCommit => ApiKey::TxnOffsetCommit,
        }
    }
}

/// What became of one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Held (`Verdict::Hold`): not answered yet.
    Held,
    /// Written at this offset of its partition (whether or not the
    /// producer heard so: `Verdict::LoseAnswer`).
    Written {
        /// Its offset.
        offset: i64,
    },
    /// An idempotent producer's retry of a batch already written (its
    /// earlier answer lost): not written again, answered with the offset
    /// it holds.
    Duplicate {
        /// The offset it was written at.
        offset: i64,
    },
    /// Refused with this error code.
    Refused(BrokerError),
    /// Never answered: its request timed out (scripted, or a held record
    /// past `request.timeout.ms`), or the producer gave up on it (closed
    /// or dropped while it was held).
    NoAnswer,
}

/// One record as it reached the broker: one entry per attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The record as the producer wrote it into its batch, read back from
    /// the batch's bytes: its topic, its partition (`Some`, as chosen by
    /// the producer's partitioner), key, value, headers and create time
    /// (`Some`).
    pub record: Record,
    /// The producer's attempt: 1 for the first request that carried it.
    pub attempt: u32,
    /// What the broker answered (updated when a held record is released).
    pub answer: Answer,
    /// The idempotent producer's stamp on it; `None` without idempotence.
    pub stamp: Option<Stamp>,
    /// A transactional producer's record, once written: whether its
    /// transaction is open, committed or aborted (what a read_committed
    /// reader sees); `None` for any other.
    pub txn: Option<TxnState>,
}

/// An idempotent producer's stamp on one record, as its batch carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The producer id the broker handed out.
    pub producer_id: i64,
    /// Its epoch (0 at first; each bump adds one).
    pub epoch: i16,
    /// The record's sequence in its partition.
    pub sequence: i32,
}
