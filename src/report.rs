//! Delivery reports: exactly one per produced message (unless it was
//! produced fire-and-forget), success or failure, delivered to whoever
//! produced it.

use std::fmt;
use std::time::Duration;

use crate::kafka_error::BrokerError;

use crate::record::{Record, Topic};

/// A record the broker has (or, with `acks=0`, that was sent): where it
/// was written, as the Java client's `RecordMetadata`. The record itself is
/// not handed back on success (only a failure hands it back), so a
/// producer keeps no copy of a record besides its encoded one in a batch;
/// [`Delivered::opaque`] carries the application's own tag to match the
/// report to its context.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivered {
    /// The topic it was written to.
    pub topic: Topic,
    /// The partition it was written to.
    pub partition: i32,
    /// Its offset; `None` with `acks=0`, where the broker does not say.
    pub offset: Option<i64>,
    /// The record's timestamp: the broker's log-append time when the topic
    /// uses it, otherwise the create time the record was sent with.
    pub timestamp: i64,
    /// Produce requests it took (1 unless retried).
    pub attempts: u32,
    /// Time from being accepted by the producer to this report.
    pub latency: Duration,
    /// The record's [`Record::opaque`] tag.
    pub opaque: u64,
}

/// Why a record could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The record is larger than `max.request.size` allows.
    RecordTooLarge,
    /// The topic does not exist (and was not created within `max.block.ms`).
    UnknownTopic,
    /// The explicit partition does not exist in the topic.
    UnknownPartition,
    /// `delivery.timeout.ms` passed before the record was acknowledged.
    Timeout,
    /// The broker answered with this error: one not retriable, or a
    /// retriable one after `retries` or `delivery.timeout.ms` ran out
    /// (except OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier batch not yet
    /// acknowledged: the batch only waited, and fails [`Timeout`] once
    /// `delivery.timeout.ms` passes).
    ///
    /// [`Timeout`]: ErrorKind::Timeout
    Broker(BrokerError),
    /// The producer was closed or dropped before the record was sent.
    Cancelled,
    /// A compression codec failed.
    Compression,
    /// The producer was full: `buffer.memory`, and for `Produce` messages
    /// also as many bytes of them waiting for it.
    QueueFull,
    /// SASL authentication failed (wrong password, unknown user, a
    /// mechanism the listener does not enable).
    Authentication,
    /// TLS refused the connection (an untrusted CA, a certificate for
    /// another host name, an alert from the broker): records waiting for
    /// it fail at once. A handshake the peer merely cut (a broker
    /// restarting, a load balancer with no healthy backend, a plaintext
    /// listener closing on the TLS hello) is a lost connection, retried
    /// until `delivery.timeout.ms`.
    Tls,
    /// The record belonged to a transaction that was aborted before it was
    /// sent (`abort_transaction`), or the transaction could not commit
    /// because some of its records failed.
    Aborted,
    /// The transactional producer was fenced: a newer producer with the
    /// same `transactional.id` started, or the coordinator aborted a
    /// transaction that outlived `transaction.timeout.ms`. The producer can
    /// no longer be used.
    Fenced,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::RecordTooLarge => f.write_str("record too large"),
            ErrorKind::UnknownTopic => f.write_str("unknown topic"),
            ErrorKind::UnknownPartition => f.write_str("unknown partition"),
            ErrorKind::Timeout => f.write_str("delivery timed out"),
            // Kafka's name, as operators grep for it: MESSAGE_TOO_LARGE (10).
            ErrorKind::Broker(e) => write!(f, "broker error {e}"),
            ErrorKind::Cancelled => f.write_str("cancelled"),
            ErrorKind::Compression => f.write_str("compression failed"),
            ErrorKind::QueueFull => f.write_str("producer queue full"),
            ErrorKind::Authentication => f.write_str("authentication failed"),
            ErrorKind::Tls => f.write_str("TLS failed"),
            ErrorKind::Aborted => f.write_str("transaction aborted"),
            ErrorKind::Fenced => f.write_str("producer fenced"),
        }
    }
}

/// A record that could not be delivered, with the record handed back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
#[non_exhaustive]
pub struct DeliveryError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Details, for people.
    pub message: String,
    /// The partition it was assigned, if it got that far.
    pub partition: Option<i32>,
    /// Produce requests tried.
    pub attempts: u32,
    /// The record, handed back unchanged (with the `opentelemetry`
    /// feature, with the `traceparent` header Courier gave it, if any).
    /// Boxed, so that a report, success or failure, stays small to move.
    pub record: Box<Record>,
}

impl DeliveryError {
    /// A failure of `record` for `kind`, with `message` for people; no
    /// partition, no attempt (set `partition` and `attempts` after, as
    /// they apply). For code that reports on Courier's behalf: a wrapper,
    /// a command-line tool, a test of a retry actor.
    pub fn new(kind: ErrorKind, message: impl Into<String>, record: Record) -> DeliveryError {
        DeliveryError {
            kind,
            message: message.into(),
            partition: None,
            attempts: 0,
            record: Box::new(record),
        }
    }

    /// Whether the record may be in the log despite this failure, so that
    /// producing it again may write it twice. True when it was sent
    /// (`attempts > 0`) and no answer said the broker refused it: a
    /// timeout, a producer closed while the answer was awaited, an error
    /// that comes after the leader's append (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    /// REQUEST_TIMED_OUT, NETWORK_EXCEPTION), its transaction aborted while
    /// it waited to be sent again (written, then, in the aborted
    /// transaction, which no read_committed reader sees), or any error
    /// after more than one attempt (an earlier attempt's fate is unknown).
    /// False when the record was never sent or its one attempt was refused
    /// outright (one exception, on the safe side: a timeout says true, even
    /// for a batch whose one attempt was refused out of order while it
    /// waited behind an earlier one).
    pub fn may_have_been_written(&self) -> bool {
        if self.attempts == 0 {
            return false;
        }
        match self.kind {
            ErrorKind::Timeout | ErrorKind::Cancelled | ErrorKind::Aborted => true,
            ErrorKind::Broker(
                BrokerError::NotEnoughReplicasAfterAppend
                | BrokerError::RequestTimedOut
                | BrokerError::NetworkException,
            ) => true,
            ErrorKind::Broker(_) => self.attempts > 1,
            _ => false,
        }
    }
}

/// One delivery report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryReport {
    /// The record was delivered.
    Delivered(Delivered),
    /// The record was not delivered.
    Failed(DeliveryError),
}

impl DeliveryReport {
    /// True for [`DeliveryReport::Delivered`].
    pub fn is_delivered(&self) -> bool {
        matches!(self, DeliveryReport::Delivered(_))
    }

    /// The record, when this report hands it back (a failure).
    pub fn failed_record(&self) -> Option<&Record> {
        match self {
            DeliveryReport::Delivered(_) => None,
            DeliveryReport::Failed(e) => Some(&e.record),
        }
    }

    /// The record's topic.
    pub fn topic(&self) -> Topic {
        match self {
            DeliveryReport::Delivered(d) => d.topic,
            DeliveryReport::Failed(e) => e.record.topic,
        }
    }

    /// The record's [`Record::opaque`] tag.
    pub fn opaque(&self) -> u64 {
        match self {
            DeliveryReport::Delivered(d) => d.opaque,
            DeliveryReport::Failed(e) => e.record.opaque,
        }
    }

    /// As a `Result`.
    pub fn into_result(self) -> Result<Delivered, DeliveryError> {
        match self {
            DeliveryReport::Delivered(d) => Ok(d),
            DeliveryReport::Failed(e) => Err(e),
        }
    }
}

impl actix::Message for DeliveryReport {
    type Result = ();
}

/// Which reports a subscription receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportMode {
    /// Every report, success and failure.
    All,
    /// Failures only. Successful records cost no report. The
    /// subscription's bound still counts every record until its outcome
    /// is known (see [`crate::Producer::subscribe`]).
    ErrorsOnly,
}

#[cfg(test)]
mod tests {
    /// A broker's refusal reads as operators grep for it: Kafka's name
    /// and the code, also for a code Courier has no variant of.
    #[test]
    fn a_broker_error_prints_kafkas_name() {
        let kind = ErrorKind::Broker(crate::kafka_error::BrokerError::MessageTooLarge);
        assert_eq!(kind.to_string(), "broker error MESSAGE_TOO_LARGE (10)");
        let other = ErrorKind::Broker(crate::kafka_error::BrokerError::Other(70));
        assert_eq!(
            other.to_string(),
            "broker error FETCH_SESSION_ID_NOT_FOUND (70)"
        );
    }

    use super::*;

    /// A report is small to move: a success carries where its record went
    /// (not the record), a failure its record boxed. (A report carrying
    /// the 128-byte record was 176 bytes.)
    #[test]
    fn a_report_is_small() {
        assert_eq!(std::mem::size_of::<Delivered>(), 64);
        assert_eq!(std::mem::size_of::<DeliveryReport>(), 64);
    }
}
