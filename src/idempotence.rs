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

use crate::sync::lock;
use std::sync::Mutex;

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

#[derive(Debug)]
struct State {
    producer_id: i64,
    epoch: i16,
    phase: Phase,
}

/// The producer id, epoch and phase, shared by every connection actor.
#[derive(Debug)]
pub(crate) struct Idempotence {
    state: Mutex<State>,
}

impl Default for Idempotence {
    fn default() -> Self {
        Idempotence {
            state: Mutex::new(State {
                producer_id: -1,
                epoch: -1,
                phase: Phase::Unknown,
            }),
        }
    }
}

impl Idempotence {
    /// The id and epoch to stamp with, when sending is allowed.
    pub fn ready(&self) -> Option<(i64, i16)> {
        let s = lock(&self.state);
        (s.phase == Phase::Ready).then_some((s.producer_id, s.epoch))
    }

    #[cfg(test)]
    pub fn phase(&self) -> Phase {
        lock(&self.state).phase
    }

    /// Starts a fetch if one is due: returns the current id and epoch to
    /// bump from (`Some` for a bump, `None` for a first id). `in_flight` is
    /// the number of requests in flight across all connections.
    pub fn begin_fetch(&self, in_flight: usize) -> Option<Option<(i64, i16)>> {
        let mut s = lock(&self.state);
        match s.phase {
            Phase::Unknown => {
                s.phase = Phase::Fetching;
                Some(None)
            }
            Phase::NeedsBump if in_flight == 0 => {
                s.phase = Phase::Fetching;
                Some(Some((s.producer_id, s.epoch)))
            }
            _ => None,
        }
    }

    /// A fetch finished.
    pub fn fetched(&self, result: Result<(i64, i16), String>) {
        let mut s = lock(&self.state);
        match result {
            Ok((id, epoch)) => {
                tracing::info!(producer_id = id, epoch, "producer id ready");
                s.producer_id = id;
                s.epoch = epoch;
                s.phase = Phase::Ready;
            }
            Err(e) => {
                tracing::warn!(error = %e, "InitProducerId failed; will retry with a fresh id");
                // A failed bump (a broker that lost this producer id, say
                // after a restart) is retried as a request for a fresh id.
                // That needs no wait: nothing was sent since the bump began.
                s.phase = Phase::Unknown;
            }
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

    #[test]
    fn bump_waits_for_nothing_in_flight_and_ignores_stale_errors() {
        let i = Idempotence::default();
        assert_eq!(i.ready(), None);
        assert_eq!(i.begin_fetch(3), Some(None), "a first id does not wait");
        assert_eq!(i.begin_fetch(0), None, "one fetch at a time");
        i.fetched(Ok((7, 0)));
        assert_eq!(i.ready(), Some((7, 0)));
        i.needs_bump((7, 0));
        assert_eq!(i.ready(), None, "no sending while a bump is due");
        assert_eq!(i.begin_fetch(2), None, "bump waits for in-flight requests");
        assert_eq!(i.begin_fetch(0), Some(Some((7, 0))));
        i.fetched(Err("broker down".into()));
        assert_eq!(
            i.phase(),
            Phase::Unknown,
            "a failed bump asks for a fresh id"
        );
        assert_eq!(i.begin_fetch(0), Some(None));
        i.fetched(Ok((7, 1)));
        i.needs_bump((7, 0));
        assert_eq!(
            i.ready(),
            Some((7, 1)),
            "an error about the old epoch is stale"
        );
    }
}
