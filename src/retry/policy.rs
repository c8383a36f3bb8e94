//! What a retry actor retries, how often and how long (`RetryPolicy`,
//! built with `RetryPolicyBuilder`; `RetryOn`), and why it gives up
//! (`GiveUp`).

use std::time::Duration;

use crate::record::Topic;
use crate::report::ErrorKind;

/// Which failures to retry.
#[derive(Debug, Clone)]
pub enum RetryOn {
    /// Only failures that can succeed later (the default): `Timeout`,
    /// `QueueFull`, and broker errors Kafka classes as retriable (too few
    /// in-sync replicas, a leader change, a request timeout). Not
    /// `UnknownTopic`, `UnknownPartition`, `RecordTooLarge`,
    /// `Compression`, `Cancelled`, nor a broker's refusal (authorization,
    /// an invalid record): those fail the same way again.
    Transient,
    /// Every failure.
    All,
    /// Only these kinds.
    Kinds(Vec<ErrorKind>),
}

impl RetryOn {
    pub(super) fn matches(&self, kind: ErrorKind) -> bool {
        match self {
            RetryOn::Transient => match kind {
                ErrorKind::Timeout | ErrorKind::QueueFull => true,
                ErrorKind::Broker(e) => e.is_retriable(),
                _ => false,
            },
            RetryOn::All => true,
            RetryOn::Kinds(k) => k.contains(&kind),
        }
    }
}

/// How a [`RetryActor`](super::RetryActor) treats failures.
///
/// ```
/// use std::time::Duration;
/// use courier_kafka::retry::{RetryOn, RetryPolicy};
/// use courier_kafka::ErrorKind;
///
/// let policy = RetryPolicy::builder()
///     .retry_on(RetryOn::Kinds(vec![ErrorKind::Timeout]))
///     .max_attempts(5)
///     .backoff(Duration::from_millis(200), Duration::from_secs(30))
///     .deadline(Duration::from_secs(600))
///     .dead_letter_topic("orders.dlq")
///     .build();
/// assert_eq!(policy.max_attempts, 5);
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Which failures are retried.
    pub retry_on: RetryOn,
    /// Produce attempts in all, the first included.
    pub max_attempts: u32,
    /// Wait before the first retry; doubles each time, with ±20% jitter.
    pub initial_backoff: Duration,
    /// Cap on the wait.
    pub max_backoff: Duration,
    /// Give up this long after the first failure, whatever the attempts.
    pub deadline: Option<Duration>,
    /// Where records go when the policy gives up.
    pub dead_letter_topic: Option<Topic>,
    /// At most this many records waiting for a next attempt.
    pub max_waiting_records: usize,
    /// At most this many key + value bytes waiting.
    pub max_waiting_bytes: usize,
}

impl RetryPolicy {
    /// A builder: retry failures that can succeed later
    /// ([`RetryOn::Transient`]), 5 attempts, 100 ms … 10 s backoff, no
    /// deadline, no dead-letter topic, 10,000 records or 64 MiB waiting.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder(RetryPolicy {
            retry_on: RetryOn::Transient,
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            deadline: None,
            dead_letter_topic: None,
            max_waiting_records: 10_000,
            max_waiting_bytes: 64 * 1024 * 1024,
        })
    }

    pub(super) fn backoff(&self, retry: u32) -> Duration {
        let exp = self.initial_backoff.saturating_mul(1u32 << retry.min(20));
        exp.min(self.max_backoff)
            .mul_f64(0.8 + fastrand::f64() * 0.4)
    }
}

/// Builds a [`RetryPolicy`].
#[derive(Debug, Clone)]
pub struct RetryPolicyBuilder(RetryPolicy);

impl RetryPolicyBuilder {
    /// Which failures to retry.
    pub fn retry_on(mut self, r: RetryOn) -> Self {
        self.0.retry_on = r;
        self
    }
    /// Produce attempts in all (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.0.max_attempts = n.max(1);
        self
    }
    /// Exponential backoff from `initial`, capped at `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.0.initial_backoff = initial;
        self.0.max_backoff = max.max(initial);
        self
    }
    /// Give up this long after the first failure.
    pub fn deadline(mut self, d: Duration) -> Self {
        self.0.deadline = Some(d);
        self
    }
    /// Produce records the policy gives up on to this topic.
    pub fn dead_letter_topic(mut self, topic: impl Into<Topic>) -> Self {
        self.0.dead_letter_topic = Some(topic.into());
        self
    }
    /// Bounds on records waiting for their next attempt.
    pub fn max_waiting(mut self, records: usize, bytes: usize) -> Self {
        self.0.max_waiting_records = records;
        self.0.max_waiting_bytes = bytes;
        self
    }
    /// The policy.
    pub fn build(self) -> RetryPolicy {
        self.0
    }
}

/// Why the retry actor gave up on a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GiveUp {
    /// The policy does not retry this kind of failure.
    NotRetried,
    /// `max_attempts` reached.
    AttemptsExhausted,
    /// The policy's deadline passed.
    DeadlineExceeded,
    /// The waiting bound (records or bytes) was reached.
    WaitingFull,
    /// The producer refused the record (closed).
    ProducerClosed,
    /// The retry actor stopped while holding the record.
    Stopped,
}
