//! Why a produce call did not take a record. Both errors hand every
//! record they did not take back to the caller.

use crate::record::Record;

/// A record the producer did not accept; it is handed back (boxed, so
/// that a produce call's `Result` is two words: every accepted record's
/// call returns through several layers, and a result as large as a
/// record would be moved at each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// `buffer.memory` is full (only from `try_produce`).
    #[error("producer queue is full (buffer.memory)")]
    QueueFull(Box<Record>),
    /// The topic's metadata is not known yet (only from `try_produce`,
    /// which cannot wait for it); a fetch has been started.
    #[error("metadata for the topic is not available yet")]
    MetadataNotReady(Box<Record>),
    /// The producer is closed.
    #[error("producer is closed")]
    Closed(Box<Record>),
    /// A transactional producer takes records only inside an open
    /// transaction: none is open (call `begin_transaction`), or it is
    /// being committed or aborted, or it can only be aborted (a record or
    /// a coordinator step of it failed: call `abort_transaction`), or the
    /// producer was fenced.
    #[error("no open transaction takes records now: call begin_transaction (or, with one under way, it is being committed or aborted, must be aborted with abort_transaction, or the producer was fenced)")]
    NoTransaction(Box<Record>),
}

impl ProduceError {
    /// The record, handed back.
    pub fn into_record(self) -> Record {
        match self {
            ProduceError::QueueFull(r)
            | ProduceError::MetadataNotReady(r)
            | ProduceError::Closed(r)
            | ProduceError::NoTransaction(r) => *r,
        }
    }

    /// The record, borrowed.
    pub fn record(&self) -> &Record {
        match self {
            ProduceError::QueueFull(r)
            | ProduceError::MetadataNotReady(r)
            | ProduceError::Closed(r)
            | ProduceError::NoTransaction(r) => r,
        }
    }

    /// The record, in place.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn record_mut(&mut self) -> &mut Record {
        match self {
            ProduceError::QueueFull(r)
            | ProduceError::MetadataNotReady(r)
            | ProduceError::Closed(r)
            | ProduceError::NoTransaction(r) => r,
        }
    }
}

/// Why [`crate::Subscriber::produce_batch`] or [`crate::Producer::produce_batch`]
/// stopped before the end of its records. Nothing is lost: the records
/// before the failed one were taken (each gets its report, as from
/// `produce`), the failed one is in `reason`, and the rest are handed back
/// untouched.
#[derive(Debug, thiserror::Error)]
#[error("{reason} (after {accepted} record(s) of the batch were taken)")]
#[non_exhaustive]
pub struct BatchRejected {
    /// Records taken before the failure.
    pub accepted: usize,
    /// Why the next record was not taken; it holds that record.
    pub reason: ProduceError,
    /// The records after it, in order, not taken.
    pub rest: Vec<Record>,
}

impl BatchRejected {
    /// A batch call stopped at `reason`, after taking `accepted` records;
    /// `rest` (not taken) is handed back.
    pub(crate) fn new(
        accepted: usize,
        reason: ProduceError,
        rest: std::vec::IntoIter<Record>,
    ) -> BatchRejected {
        BatchRejected {
            accepted,
            reason,
            rest: rest.collect(),
        }
    }
}

/// A bounded wait ([`crate::Producer::flush_timeout`],
/// [`crate::Producer::close_timeout`]) ran out with records still
/// unreported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("records were still unreported after {0:?}")]
#[non_exhaustive]
pub struct TimedOut(pub std::time::Duration);
