//! The idempotent producer (KIP-98): one producer id and epoch for the
//! producer, a sequence number per partition, and the epoch bump that
//! recovers from lost sequence state (KIP-360).
//!
//! With `enable.idempotence` (the default, as in the Java client), every
//! batch is stamped with the producer id, epoch and the sequence of its
//! first record when it is first sent; a retry resends the same bytes, so
//! the broker can drop a duplicate and refuse a gap. Sequences are assigned
//! in batch order per partition, and retried batches return to their queue
//! in batch order, so retries never duplicate or reorder records within a
//! partition.
//!
//! The epoch is bumped only when the broker's view cannot be repaired by
//! retrying: UNKNOWN_PRODUCER_ID, or OUT_OF_ORDER_SEQUENCE_NUMBER on the
//! oldest unacknowledged batch of its partition (nothing earlier is left to
//! fill the gap). The bump waits until no request is in flight anywhere, so
//! no batch of the old epoch can land after one of the new.
//!
//! # References
//! - KIP-98 (exactly-once delivery), KIP-360 (producer id recovery)
//! - Java: `TransactionManager`, `RecordAccumulator.drainBatchesForOneNode`

use std::sync::Mutex;
use std::time::Duration;

use crate::clock::Instant;

use crate::clock::backoff;
use crate::kafka_error::{BrokerError, ResponseError};
use crate::report::ErrorKind;
use crate::sync::lock;

/// Where the producer id stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No id yet; nothing may be sent.
    Unknown,
    /// An InitProducerId request is out.
    Fetching,
    /// Sending is allowed with this id and epoch.
    Ready,
    /// Sequence state is lost: stop sending, bump the epoch once nothing is
    /// in flight.
    NeedsBump,
}

/// Why an InitProducerId attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FetchError {
    /// Worth another try after a backoff: no connection, a timeout, a
    /// retriable error code (a coordinator loading, say).
    Transient(String),
    /// The cluster refuses (an authorization error, a broker without
    /// idempotence): retrying cannot help until it changes, so every
    /// pending record fails with this cause at once, as in the Java client.
    Refused(ErrorKind, String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Transient(m) | FetchError::Refused(_, m) => f.write_str(m),
        }
    }
}

/// An InitProducerId error code as a [`FetchError`]. An authorization
/// error or an unsupported version refuses the producer until the cluster
/// changes; anything else (a coordinator loading or moving, an unknown
/// server error: Tansu gives -1 for a while after a restart) is tried
/// again after a backoff.
pub(crate) fn init_error(node: i32, error: ResponseError) -> FetchError {
    let refused = matches!(
        error,
        ResponseError::ClusterAuthorizationFailed
            | ResponseError::TransactionalIdAuthorizationFailed
            | ResponseError::UnsupportedVersion
    );
    if !refused {
        return FetchError::Transient(format!("InitProducerId from broker {node}: {error:?}"));
    }
    let hint = match error {
        ResponseError::ClusterAuthorizationFailed => {
            " (the idempotent producer needs the IDEMPOTENT_WRITE ACL on the cluster, or WRITE on a topic from Kafka 3.0; or set enable.idempotence=false)"
        }
        _ => "",
    };
    FetchError::Refused(
        ErrorKind::Broker(BrokerError::from_response(error)),
        format!("broker {node} refused the producer an id (InitProducerId): {error:?}{hint}"),
    )
}

/// What [`Idempotence::begin_fetch`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// Send InitProducerId now: `Some` bumps the epoch of this id and
    /// epoch, `None` asks for a fresh id.
    Start(Option<(i64, i16)>),
    /// A failed attempt's backoff runs until then.
    After(Instant),
    /// Nothing to do (ready, a fetch out, or a bump waiting for in-flight
    /// requests).
    Nothing,
}

#[derive(Debug)]
struct State {
    producer_id: i64,
    epoch: i16,
    phase: Phase,
    /// Attempts failed in a row, for the backoff.
    failures: u32,
    /// No new attempt before this.
    retry_at: Option<Instant>,
    /// The cluster's refusal, while it stands: pending records fail with
    /// it.
    refused: Option<(ErrorKind, String)>,
}

/// The producer id, epoch and phase, shared by every connection actor.
#[derive(Debug)]
pub(crate) struct Idempotence {
    state: Mutex<State>,
    /// Backoff between failed InitProducerId attempts (`retry.backoff.ms`,
    /// `retry.backoff.max.ms`).
    backoff: (Duration, Duration),
}

impl Idempotence {
    /// A producer without an id yet, backing off failed attempts from
    /// `base` up to `max`.
    pub fn new(base: Duration, max: Duration) -> Idempotence {
        Idempotence {
            state: Mutex::new(State {
                producer_id: -1,
                epoch: -1,
                phase: Phase::Unknown,
                failures: 0,
                retry_at: None,
                refused: None,
            }),
            backoff: (base, max),
        }
    }

    /// The id and epoch to stamp with, when sending is allowed.
    pub fn ready(&self) -> Option<(i64, i16)> {
        let s = lock(&self.state);
        (s.phase == Phase::Ready).then_some((s.producer_id, s.epoch))
    }

    /// The cluster's refusal of a producer id, while it stands: records
    /// waiting to be sent fail with it rather than wait for
    /// `delivery.timeout.ms`.
    pub fn refused(&self) -> Option<(ErrorKind, String)> {
        lock(&self.state).refused.clone()
    }

    #[cfg(test)]
    pub fn phase(&self) -> Phase {
        lock(&self.state).phase
    }

    /// Starts a fetch if one is due. `in_flight` is the number of requests
    /// in flight across all connections: a bump waits for none.
    pub fn begin_fetch(&self, in_flight: usize, now: Instant) -> Fetch {
        let mut s = lock(&self.state);
        match s.phase {
            Phase::Unknown => {
                if let Some(at) = s.retry_at.filter(|at| *at > now) {
                    return Fetch::After(at);
                }
                s.phase = Phase::Fetching;
                Fetch::Start(None)
            }
            Phase::NeedsBump if in_flight == 0 => {
                s.phase = Phase::Fetching;
                Fetch::Start(Some((s.producer_id, s.epoch)))
            }
            _ => Fetch::Nothing,
        }
    }

    /// A fetch finished.
    pub fn fetched(&self, result: Result<(i64, i16), FetchError>, now: Instant) {
        let mut s = lock(&self.state);
        match result {
            Ok((id, epoch)) => {
                tracing::info!(producer_id = id, epoch, "producer id ready");
                s.producer_id = id;
                s.epoch = epoch;
                s.phase = Phase::Ready;
                s.failures = 0;
                s.retry_at = None;
                s.refused = None;
            }
            Err(e) => {
                // A failed bump (a broker that lost this producer id, say
                // after a restart) is retried as a request for a fresh id.
                // That needs no wait for in-flight requests: nothing was
                // sent since the bump began.
                s.phase = Phase::Unknown;
                let wait = backoff(self.backoff.0, self.backoff.1, s.failures);
                s.failures = s.failures.saturating_add(1);
                s.retry_at = Some(now + wait);
                // At warn level once a run of failures lasts (the third,
                // and every 32nd after), so an outage does not log ten
                // lines a second, and a fresh cluster's first answers
                // (COORDINATOR_LOAD_IN_PROGRESS while its coordinator
                // loads) are debug noise, not a warning; a refusal warns
                // at once.
                let lasting = s.failures == 3 || s.failures % 32 == 0;
                if lasting || matches!(e, FetchError::Refused(..)) {
                    tracing::warn!(error = %e, failures = s.failures, retry_in = ?wait, "InitProducerId failed");
                } else {
                    tracing::debug!(error = %e, failures = s.failures, retry_in = ?wait, "InitProducerId failed");
                }
                s.refused = match e {
                    FetchError::Refused(kind, message) => Some((kind, message)),
                    FetchError::Transient(_) => None,
                };
            }
        }
    }

    /// Transaction version 2: EndTxn moved the producer from `from` to
    /// `to` (a bumped epoch, or a new id once the epoch is used up).
    /// Batches stamped from now on carry `to`, each partition's sequences
    /// from 0 (`Accumulator::stamp`). Only from the current id and epoch.
    pub fn advanced(&self, from: (i64, i16), to: (i64, i16)) {
        let mut s = lock(&self.state);
        if s.phase == Phase::Ready && (s.producer_id, s.epoch) == from {
            tracing::debug!(
                producer_id = to.0,
                epoch = to.1,
                "EndTxn bumped the producer epoch"
            );
            s.producer_id = to.0;
            s.epoch = to.1;
        }
    }

    /// The broker lost our sequence state: stop sending and bump the epoch.
    pub fn needs_bump(&self, stamped_with: (i64, i16)) {
        let mut s = lock(&self.state);
        // Only for the current epoch: a late error about an older one is
        // already handled.
        if s.phase == Phase::Ready && (s.producer_id, s.epoch) == stamped_with {
            tracing::warn!(
                producer_id = s.producer_id,
                epoch = s.epoch,
                "sequence state lost; bumping the epoch"
            );
            s.phase = Phase::NeedsBump;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_error::BrokerError;

    fn idem() -> Idempotence {
        Idempotence::new(Duration::from_millis(100), Duration::from_secs(1))
    }

    #[test]
    fn bump_waits_for_nothing_in_flight_and_ignores_stale_errors() {
        let i = idem();
        let now = Instant::now();
        assert_eq!(i.ready(), None);
        assert_eq!(
            i.begin_fetch(3, now),
            Fetch::Start(None),
            "a first id does not wait"
        );
        assert_eq!(i.begin_fetch(0, now), Fetch::Nothing, "one fetch at a time");
        i.fetched(Ok((7, 0)), now);
        assert_eq!(i.ready(), Some((7, 0)));
        i.needs_bump((7, 0));
        assert_eq!(i.ready(), None, "no sending while a bump is due");
        assert_eq!(
            i.begin_fetch(2, now),
            Fetch::Nothing,
            "bump waits for in-flight requests"
        );
        assert_eq!(i.begin_fetch(0, now), Fetch::Start(Some((7, 0))));
        i.fetched(Err(FetchError::Transient("broker down".into())), now);
        assert_eq!(
            i.phase(),
            Phase::Unknown,
            "a failed bump asks for a fresh id"
        );
        let later = now + Duration::from_secs(2);
        assert_eq!(i.begin_fetch(0, later), Fetch::Start(None));
        i.fetched(Ok((7, 1)), later);
        i.needs_bump((7, 0));
        assert_eq!(
            i.ready(),
            Some((7, 1)),
            "an error about the old epoch is stale"
        );
    }

    #[test]
    fn an_end_txn_bump_moves_only_the_current_epoch() {
        let i = idem();
        let now = Instant::now();
        let _ = i.begin_fetch(0, now);
        i.fetched(Ok((7, 4)), now);
        i.advanced((7, 3), (7, 9));
        assert_eq!(i.ready(), Some((7, 4)), "from an older epoch: ignored");
        i.advanced((7, 4), (7, 5));
        assert_eq!(i.ready(), Some((7, 5)));
        // The epoch used up: the coordinator gives a new id, epoch 0.
        i.advanced((7, 5), (8, 0));
        assert_eq!(i.ready(), Some((8, 0)));
        i.needs_bump((8, 0));
        i.advanced((8, 0), (8, 1));
        assert_eq!(i.ready(), None, "not while a bump is due");
    }

    #[test]
    fn failed_attempts_back_off_exponentially_up_to_the_cap() {
        let i = idem();
        let now = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..8 {
            let Fetch::Start(None) = i.begin_fetch(0, now + Duration::from_secs(60)) else {
                panic!("a fetch is due after the backoff");
            };
            i.fetched(Err(FetchError::Transient("refused".into())), now);
            let Fetch::After(at) = i.begin_fetch(0, now) else {
                panic!("no new attempt during the backoff");
            };
            waits.push(at - now);
        }
        // 100 ms doubling to the 1 s cap, each within 20 % jitter.
        for (n, w) in waits.iter().enumerate() {
            let nominal = (100u64 << n.min(4)).min(1000) as f64;
            let ms = w.as_secs_f64() * 1000.0;
            assert!(
                ms >= nominal * 0.8 - 1.0 && ms <= nominal * 1.2 + 1.0 && ms <= 1000.0,
                "wait {n}: {ms} ms for a nominal {nominal}"
            );
        }
        assert_eq!(i.refused(), None, "transient failures refuse nothing");
    }

    #[test]
    fn a_refusal_stands_until_an_id_is_granted() {
        let i = idem();
        let now = Instant::now();
        let _ = i.begin_fetch(0, now);
        let kind = ErrorKind::Broker(BrokerError::ClusterAuthorizationFailed);
        i.fetched(Err(FetchError::Refused(kind, "no ACL".into())), now);
        assert_eq!(i.refused(), Some((kind, "no ACL".into())));
        let later = now + Duration::from_secs(2);
        assert_eq!(i.begin_fetch(0, later), Fetch::Start(None), "tried again");
        assert!(
            i.refused().is_some(),
            "still refused while the retry is out"
        );
        i.fetched(Ok((9, 0)), later);
        assert_eq!(i.refused(), None);
        assert_eq!(i.ready(), Some((9, 0)));
    }
}
