//! Requests in flight at the double: records held for the test to
//! release, slow answers on their way (`MockBroker::set_latency`), their
//! time-outs and cancellation, and the broker going down and coming back.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::network::Held;
use super::script::Script;
use super::verdict::{Answer, Verdict, BROKER_ID};
use crate::clock::Instant;
use crate::delivery::settlement::Outcome;
use crate::engine::Engine;
use crate::report::ErrorKind;
use crate::sync::lock;

impl Script {
    /// How many of `engine`'s requests are held.
    pub(super) fn held_by(&self, engine: &Arc<Engine>) -> usize {
        let target = Arc::downgrade(engine);
        lock(&self.state)
            .held
            .iter()
            .filter(|h| h.engine.ptr_eq(&target))
            .count()
    }

    /// Takes out the `n` oldest held records, or the `n` newest (newest
    /// first); slow answers on their way are not the test's to release.
    fn take_held(&self, n: usize, newest_first: bool) -> Vec<Held> {
        let mut st = lock(&self.state);
        let (mut manual, slow): (VecDeque<Held>, VecDeque<Held>) = std::mem::take(&mut st.held)
            .into_iter()
            .partition(|h| h.due.is_none());
        let len = manual.len();
        let n = n.min(len);
        let taken = if newest_first {
            manual.drain(len - n..).rev().collect()
        } else {
            manual.drain(..n).collect()
        };
        st.held = manual.into_iter().chain(slow).collect();
        taken
    }

    /// Takes out the held records of `engine` that match `which`.
    pub(super) fn take_held_of(
        &self,
        engine: &Arc<Engine>,
        which: impl Fn(&Held) -> bool,
    ) -> Vec<Held> {
        let mut st = lock(&self.state);
        let target = Arc::downgrade(engine);
        let (mine, rest): (VecDeque<Held>, VecDeque<Held>) = std::mem::take(&mut st.held)
            .into_iter()
            .partition(|h| h.engine.ptr_eq(&target) && which(h));
        st.held = rest;
        mine.into_iter().collect()
    }

    /// Answers the oldest `n` held records with `verdict` (`Hold` holds
    /// them again, at the back); returns how many there were.
    pub(crate) fn release(&self, n: usize, verdict: Verdict, newest_first: bool) -> usize {
        let held = self.take_held(n, newest_first);
        let count = held.len();
        let now = Instant::now();
        for h in held {
            match h.engine.upgrade() {
                Some(engine) => {
                    self.apply(&engine, h.batch, h.arrivals, verdict, now);
                    // A retried batch, or a split's parts, wait in their
                    // queue: drain again.
                    engine.wake_all();
                }
                // The producer is gone: dropping the batch pays its
                // reports Cancelled (`SealedBatch`'s drop, each record
                // read back from the batch).
                None => drop(h),
            }
        }
        count
    }
}

impl Script {
    /// Fails `engine`'s held requests `Cancelled`, as a connection actor's
    /// in-flight batches are when `close_timeout` runs out or the last
    /// handle is dropped.
    pub(super) fn cancel_held(&self, engine: &Arc<Engine>) {
        for h in self.take_held_of(engine, |_| true) {
            self.mark(h.arrivals, Answer::NoAnswer);
            engine.land_and_settle(
                h.batch,
                Outcome::Failed {
                    kind: ErrorKind::Cancelled,
                    message: "producer closed or dropped before the broker answered; the record may or may not have been written".into(),
                },
            );
        }
    }

    pub(super) fn mark(&self, arrivals: Range<usize>, answer: Answer) {
        let mut st = lock(&self.state);
        for a in arrivals {
            st.history[a].answer = answer;
        }
    }

    /// Takes out `engine`'s slow answers due by `now`.
    pub(super) fn take_due(&self, engine: &Arc<Engine>, now: Instant) -> Vec<(Held, Verdict)> {
        self.take_held_of(engine, |h| h.due.is_some_and(|(at, _)| at <= now))
            .into_iter()
            .filter_map(|h| h.due.map(|(_, v)| (h, v)))
            .collect()
    }

    /// When `engine`'s next slow answer is due.
    pub(super) fn next_due(&self, engine: &Arc<Engine>) -> Option<Instant> {
        let target = Arc::downgrade(engine);
        lock(&self.state)
            .held
            .iter()
            .filter(|h| h.engine.ptr_eq(&target))
            .filter_map(|h| h.due.map(|(at, _)| at))
            .min()
    }

    /// How long every answer takes (`MockBroker::set_latency`).
    pub(crate) fn set_latency(&self, latency: Duration) {
        lock(&self.state).network.latency = latency;
    }

    pub(crate) fn latency(&self) -> Duration {
        lock(&self.state).network.latency
    }

    /// Whether the broker is down (`MockBroker::go_down`).
    pub(crate) fn is_down(&self) -> bool {
        lock(&self.state).network.down
    }

    /// Whether `engine`'s connection dropped since its broker actor last
    /// looked; it has noticed now.
    pub(super) fn take_cut(&self, engine: &Arc<Engine>) -> bool {
        lock(&self.state).network.take_cut(engine)
    }

    /// The broker goes down: every connection drops (what is in flight
    /// loses its answer, unwritten), reconnecting fails, coordinator
    /// requests fail, and no new topic is learnt, until `come_back`.
    /// Returns how many requests were lost.
    pub(crate) fn go_down(&self) -> usize {
        lock(&self.state).network.down = true;
        self.drop_connections(
            None,
            false,
            &format!(
                "connection to broker {BROKER_ID} lost: the broker went down (MockBroker::go_down)"
            ),
        )
    }

    /// The broker is back: producers connect at their next attempt
    /// (their reconnect backoff), and topic waits look again.
    pub(crate) fn come_back(&self) {
        let engines: Vec<Arc<Engine>> = {
            let mut st = lock(&self.state);
            st.network.down = false;
            st.engines
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .collect()
        };
        self.topics_changed.notify_waiters();
        for e in engines {
            e.wake_all();
        }
    }
}
