//! `RetryActor`: re-produces what failed, per a policy, and sends each
//! message's one final outcome on to the original subscriber.
//!
//! ```text
//!  RetryHandle::produce ──▶ Producer ──(DeliveryReport)──▶ RetryActor ──(RetryOutcome)──▶ subscriber
//!                              ▲                              │ failure, policy says retry:
//!                              └──── producer.send(record) ◀──┘ wait (backoff), then again
//!                                                             │ policy exhausted:
//!                                                             └─▶ dead-letter topic (optional)
//! ```
//!
//! The producer already retries transient errors within
//! `delivery.timeout.ms`; this actor is for what outlives that (a long
//! outage) or what the application wants handled its own way (a policy
//! violation, a topic it may not write).
//!
//! Promises:
//! - The subscriber gets exactly one [`RetryOutcome`] per message produced
//!   through the [`RetryHandle`], whatever happened in between.
//! - Memory is bounded: records waiting for their next attempt are bounded
//!   by count and bytes (past the bound a failure is final at once, with a
//!   reason that says so), and a stream subscriber's unread outcomes are
//!   bounded (producing through the handle waits).
//! - Stopping ([`RetryHandle::stop`]) is orderly: producing through the
//!   handle returns `Closed` from then on; records waiting for a next
//!   attempt are reported `Failed { reason: Stopped }` at once (with their
//!   last error, which says whether they may have been written:
//!   [`DeliveryError::may_have_been_written`]); records on their first
//!   attempt, and retries already sent, get their real outcome (a failure
//!   is not retried again: `Stopped`); the actor stops once every record
//!   produced through the handle has had its outcome.
//! - If the actor dies (a panic), every record it holds is reported
//!   `Failed { reason: Stopped }`: nothing vanishes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::clock::Instant;

use actix::prelude::*;
use bytes::Bytes;
use futures::channel::mpsc;
use tokio::sync::Semaphore;

use crate::engine::error::ProduceError;
use crate::producer::Producer;
use crate::record::{Header, Record};
use crate::report::{Delivered, DeliveryError, DeliveryReport, ErrorKind};

mod policy;

pub use policy::{GiveUp, RetryOn, RetryPolicy, RetryPolicyBuilder};

/// The one final outcome of a message produced through a [`RetryHandle`].
#[derive(Debug, Clone)]
pub enum RetryOutcome {
    /// Delivered to its topic after `attempts` produce attempts.
    Delivered {
        /// The delivery.
        delivered: Delivered,
        /// Attempts in all.
        attempts: u32,
    },
    /// Given up on, and written to the dead-letter topic.
    DeadLettered {
        /// The last failure on the original topic.
        error: DeliveryError,
        /// Why the policy gave up.
        reason: GiveUp,
        /// Attempts on the original topic.
        attempts: u32,
        /// Where it now is.
        dead_letter: Delivered,
    },
    /// Given up on, and not dead-lettered (none configured, or that failed
    /// too: then `dead_letter_error` says why).
    Failed {
        /// The last failure (the record is in it).
        error: DeliveryError,
        /// Why the policy gave up.
        reason: GiveUp,
        /// Attempts on the original topic.
        attempts: u32,
        /// The dead-letter attempt's failure, if one was made.
        dead_letter_error: Option<Box<DeliveryError>>,
    },
}

impl RetryOutcome {
    /// True for `Delivered`.
    pub fn is_delivered(&self) -> bool {
        matches!(self, RetryOutcome::Delivered { .. })
    }
}

impl Message for RetryOutcome {
    type Result = ();
}

/// Counters of one retry actor, read as it runs.
#[derive(Debug, Default)]
pub struct RetryStats {
    retried: AtomicU64,
    recovered: AtomicU64,
    dead_lettered: AtomicU64,
    exhausted: AtomicU64,
    waiting: AtomicUsize,
}

impl RetryStats {
    /// Re-produce attempts made.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    /// Records delivered after at least one retry.
    pub fn recovered(&self) -> u64 {
        self.recovered.load(Ordering::Relaxed)
    }

    /// Records written to the dead-letter topic.
    pub fn dead_lettered(&self) -> u64 {
        self.dead_lettered.load(Ordering::Relaxed)
    }

    /// Records given up on without a dead-letter write.
    pub fn exhausted(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// Records waiting for their next attempt now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// Where outcomes go.
enum Downstream {
    Actor(Recipient<RetryOutcome>),
    Stream(mpsc::UnboundedSender<RetryOutcome>),
}

impl Downstream {
    fn send(&self, o: RetryOutcome) {
        match self {
            Downstream::Actor(r) => r.do_send(o),
            Downstream::Stream(tx) => {
                let _ = tx.unbounded_send(o);
            }
        }
    }
}

/// What a retry actor shares with its handles, outside the actor.
#[derive(Debug, Default)]
struct Shared {
    /// Set by `stop`: the handle accepts nothing more.
    stopping: std::sync::atomic::AtomicBool,
    /// Records produced through the handle whose first report has not
    /// reached the actor yet: a stopping actor waits for them.
    first_attempts: AtomicU64,
}

/// A record between attempts.
struct Tracked {
    attempts: u32,
    first_failure: Instant,
    first_failure_ms: i64,
    bytes: usize,
    error: DeliveryError,
}

/// The retry actor. Start it with [`RetryActor::start_with_stream`] or
/// [`RetryActor::start_with_recipient`]; produce through the returned
/// [`RetryHandle`].
pub struct RetryActor {
    producer: Producer,
    policy: RetryPolicy,
    downstream: Arc<Downstream>,
    stats: Arc<RetryStats>,
    waiting_bytes: usize,
    /// Records waiting for their next attempt, by id, with their last
    /// failure, so that stopping can report every one.
    held: std::collections::HashMap<u64, Tracked>,
    /// Records being re-produced or dead-lettered now, by id: a stopping
    /// actor waits for their outcome; a dying one reports them.
    sending: std::collections::HashMap<u64, DeliveryError>,
    shared: Arc<Shared>,
    /// `stop` was asked for: finish what is out, then stop.
    stopping: bool,
    next_id: u64,
    /// Stop the actix system on stop (the actor has its own thread).
    owns_system: bool,
    /// Its own address, held while work is outstanding. actix stops an
    /// actor once its last sender is gone and its mailbox was found empty;
    /// a report sent (and its sender dropped) between that look and the
    /// stop would be dropped with the mailbox. So the actor keeps itself
    /// reachable until every handle is gone and nothing is outstanding
    /// (`release_if_done`).
    me: Option<Addr<RetryActor>>,
    /// Every `RetryHandle` has been dropped (`HandlesGone`).
    handles_gone: bool,
}

impl std::fmt::Debug for RetryActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryActor")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Produces through a retry actor.
#[derive(Clone, Debug)]
pub struct RetryHandle {
    producer: Producer,
    addr: Addr<RetryActor>,
    stats: Arc<RetryStats>,
    permits: Option<Arc<Semaphore>>,
    shared: Arc<Shared>,
    _last: Arc<LastHandle>,
}

/// Tells the actor when the last handle is gone, so it lets go of its own
/// address once nothing is outstanding.
#[derive(Debug)]
struct LastHandle(Addr<RetryActor>);

impl Drop for LastHandle {
    fn drop(&mut self) {
        self.0.do_send(HandlesGone);
    }
}

/// Every `RetryHandle` of the actor has been dropped.
#[derive(Debug, Clone, Copy)]
struct HandlesGone;

impl Message for HandlesGone {
    type Result = ();
}

impl RetryHandle {
    /// Produces `record`; its one final outcome goes to this retry actor's
    /// subscriber. With a stream subscriber, waits while the stream's bound
    /// of unread outcomes is reached. After [`stop`](Self::stop) (or once
    /// the actor is gone), `Closed` with the record.
    pub async fn produce(&self, record: Record) -> Result<(), ProduceError> {
        if let Some(p) = &self.permits {
            match p.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(ProduceError::Closed(Box::new(record))),
            }
        }
        // Counted before the report can arrive; a stopping actor waits
        // for every counted record's report.
        self.shared.first_attempts.fetch_add(1, Ordering::AcqRel);
        let r = if self.shared.stopping.load(Ordering::Acquire) || !self.addr.connected() {
            Err(ProduceError::Closed(Box::new(record)))
        } else {
            self.producer
                .produce_to(record, self.addr.clone().recipient())
                .await
        };
        if r.is_err() {
            self.shared.first_attempts.fetch_sub(1, Ordering::AcqRel);
            if let Some(p) = &self.permits {
                p.add_permits(1);
            }
        }
        r
    }

    /// Hands a failure reported elsewhere (in an actor's own
    /// `Handler<DeliveryReport>`, say, for a record it produced with itself
    /// as `reply_to`) to this retry actor, without awaiting: the policy
    /// decides as for a record produced through [`produce`](Self::produce)
    /// (the failed attempt counts as the first), and the one final outcome
    /// goes to this actor's subscriber. `Err` hands the failure back, to be
    /// dealt with by the caller, when the actor is stopping or gone, or
    /// when a stream subscriber's bound of unread outcomes is reached.
    pub fn retry_failed(&self, failure: DeliveryError) -> Result<(), DeliveryError> {
        if let Some(p) = &self.permits {
            match p.try_acquire() {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(failure),
            }
        }
        // Counted before it is sent: a stopping actor waits for it.
        self.shared.first_attempts.fetch_add(1, Ordering::AcqRel);
        if self.shared.stopping.load(Ordering::Acquire) || !self.addr.connected() {
            self.shared.first_attempts.fetch_sub(1, Ordering::AcqRel);
            if let Some(p) = &self.permits {
                p.add_permits(1);
            }
            return Err(failure);
        }
        self.addr.do_send(DeliveryReport::Failed(failure));
        Ok(())
    }

    /// Stops the retry actor, in order: producing through a handle returns
    /// `Closed` from now on; records waiting for a next attempt are
    /// reported `Failed { reason: Stopped }` at once; records on their
    /// first attempt and retries already sent get their real outcome (a
    /// failure is then final, `Stopped`); the actor stops once all have.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.addr.do_send(StopRetry);
    }

    /// The actor's counters.
    pub fn stats(&self) -> &RetryStats {
        &self.stats
    }

    /// The actor's address (its `Recipient<DeliveryReport>` may be used as
    /// a `reply_to` directly, without the stream bound).
    pub fn addr(&self) -> &Addr<RetryActor> {
        &self.addr
    }
}

/// A stream subscriber's outcomes; reading returns room to the handle.
pub struct RetryOutcomes {
    rx: mpsc::UnboundedReceiver<RetryOutcome>,
    permits: Arc<Semaphore>,
}

/// Nobody will read these outcomes: producing through the handle stops
/// (`Closed`), rather than waiting for ever on a bound no reader frees.
impl Drop for RetryOutcomes {
    fn drop(&mut self) {
        self.permits.close();
    }
}

impl futures::Stream for RetryOutcomes {
    type Item = RetryOutcome;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<RetryOutcome>> {
        let r = std::pin::Pin::new(&mut self.rx).poll_next(cx);
        if let std::task::Poll::Ready(Some(_)) = &r {
            self.permits.add_permits(1);
        }
        r
    }
}

impl RetryActor {
    /// Starts a retry actor whose outcomes go to a stream, with at most
    /// `capacity` outcomes unread (producing through the handle waits).
    pub fn start_with_stream(
        producer: Producer,
        policy: RetryPolicy,
        capacity: usize,
    ) -> (RetryHandle, RetryOutcomes) {
        let (tx, rx) = mpsc::unbounded();
        let permits = Arc::new(Semaphore::new(capacity.clamp(1, Semaphore::MAX_PERMITS)));
        let handle = Self::start(
            producer,
            policy,
            Downstream::Stream(tx),
            Some(permits.clone()),
        );
        (handle, RetryOutcomes { rx, permits })
    }

    /// Starts a retry actor whose outcomes go to an actor.
    pub fn start_with_recipient(
        producer: Producer,
        policy: RetryPolicy,
        to: Recipient<RetryOutcome>,
    ) -> RetryHandle {
        Self::start(producer, policy, Downstream::Actor(to), None)
    }

    fn start(
        producer: Producer,
        policy: RetryPolicy,
        downstream: Downstream,
        permits: Option<Arc<Semaphore>>,
    ) -> RetryHandle {
        let stats = Arc::new(RetryStats::default());
        let shared = Arc::new(Shared::default());
        let actor = RetryActor {
            producer: producer.clone(),
            policy,
            downstream: Arc::new(downstream),
            stats: stats.clone(),
            waiting_bytes: 0,
            held: std::collections::HashMap::new(),
            sending: std::collections::HashMap::new(),
            shared: shared.clone(),
            stopping: false,
            next_id: 0,
            owns_system: false,
            me: None,
            handles_gone: false,
        };
        // Needs an actix system: the producer's own, via a spawn on its
        // arbiter, would tie the two; run where the caller is, or on a
        // fresh system thread when there is none.
        let addr = if actix::System::try_current().is_some() {
            actor.start()
        } else {
            let mut actor = actor;
            actor.owns_system = true;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("courier-retry".into())
                .spawn(move || {
                    let sys = actix::System::new();
                    sys.block_on(async move {
                        let _ = tx.send(actor.start());
                    });
                    let _ = sys.run();
                })
                .expect("spawn retry actor thread");
            rx.recv().expect("retry actor started")
        };
        RetryHandle {
            producer,
            _last: Arc::new(LastHandle(addr.clone())),
            addr,
            stats,
            permits,
            shared,
        }
    }

    fn emit(&self, o: RetryOutcome) {
        self.downstream.send(o);
    }

    fn on_failure(
        &mut self,
        error: DeliveryError,
        mut t: Option<Tracked>,
        ctx: &mut Context<Self>,
    ) {
        let now = Instant::now();
        let tracked = t.take().unwrap_or_else(|| Tracked {
            attempts: 1,
            first_failure: now,
            first_failure_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            bytes: error.record.key.as_ref().map_or(0, Bytes::len)
                + error.record.value.as_ref().map_or(0, Bytes::len),
            error: error.clone(),
        });
        let tracked = Tracked { error, ..tracked };
        let reason = if self.stopping {
            Some(GiveUp::Stopped)
        } else if !self.policy.retry_on.matches(tracked.error.kind) {
            Some(GiveUp::NotRetried)
        } else if tracked.attempts >= self.policy.max_attempts {
            Some(GiveUp::AttemptsExhausted)
        } else if self
            .policy
            .deadline
            .is_some_and(|d| now >= tracked.first_failure + d)
        {
            Some(GiveUp::DeadlineExceeded)
        } else if self.held.len() >= self.policy.max_waiting_records
            || self.waiting_bytes + tracked.bytes > self.policy.max_waiting_bytes
        {
            Some(GiveUp::WaitingFull)
        } else {
            None
        };
        if let Some(reason) = reason {
            return self.give_up(tracked, reason, ctx);
        }
        let delay = self.policy.backoff(tracked.attempts - 1);
        let id = self.next_id;
        self.next_id += 1;
        self.waiting_bytes += tracked.bytes;
        self.held.insert(id, tracked);
        self.stats.waiting.store(self.held.len(), Ordering::Relaxed);
        ctx.run_later(delay, move |act, ctx| act.attempt(id, ctx));
    }

    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        // Gone: reported when the actor began to stop.
        let Some(tracked) = self.held.remove(&id) else {
            return;
        };
        self.waiting_bytes -= tracked.bytes;
        self.stats.waiting.store(self.held.len(), Ordering::Relaxed);
        self.stats.retried.fetch_add(1, Ordering::Relaxed);
        let record = tracked.error.record.clone();
        self.sending.insert(id, tracked.error.clone());
        let producer = self.producer.clone();
        let fut = async move { producer.send(*record).await };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            act.sending.remove(&id);
            let tracked = Tracked {
                attempts: tracked.attempts + 1,
                ..tracked
            };
            match res {
                Ok(delivered) => {
                    act.stats.recovered.fetch_add(1, Ordering::Relaxed);
                    act.emit(RetryOutcome::Delivered {
                        delivered,
                        attempts: tracked.attempts,
                    });
                }
                Err(e) if e.kind == ErrorKind::Cancelled && e.attempts == 0 => {
                    // The producer is closed: no point retrying.
                    let tracked = Tracked {
                        error: e,
                        ..tracked
                    };
                    act.give_up(tracked, GiveUp::ProducerClosed, ctx);
                }
                Err(e) => act.on_failure(e, Some(tracked), ctx),
            }
            act.finish_stopping(ctx);
        }));
    }

    fn give_up(&mut self, t: Tracked, reason: GiveUp, ctx: &mut Context<Self>) {
        // Stopping is not the policy giving up: no dead-letter write.
        let dlq = self
            .policy
            .dead_letter_topic
            .filter(|_| reason != GiveUp::Stopped);
        let Some(dlq) = dlq else {
            self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
            return self.emit(RetryOutcome::Failed {
                error: t.error,
                reason,
                attempts: t.attempts,
                dead_letter_error: None,
            });
        };
        let original = &t.error.record;
        let mut headers = original.headers.clone();
        let h = |k: &str, v: String| Header {
            key: k.to_string(),
            value: Some(Bytes::from(v)),
        };
        headers.push(h("courier.original.topic", original.topic.to_string()));
        if let Some(p) = t.error.partition.or(original.partition) {
            headers.push(h("courier.original.partition", p.to_string()));
        }
        headers.push(h("courier.error", t.error.to_string()));
        headers.push(h("courier.attempts", t.attempts.to_string()));
        headers.push(h(
            "courier.first.failure.ms",
            t.first_failure_ms.to_string(),
        ));
        let record = Record {
            topic: dlq,
            partition: None,
            key: original.key.clone(),
            value: original.value.clone(),
            headers,
            timestamp: original.timestamp,
            opaque: original.opaque,
        };
        let id = self.next_id;
        self.next_id += 1;
        self.sending.insert(id, t.error.clone());
        self.dead_letter(id, record, t, reason, 0, ctx);
    }

    /// Writes to the dead-letter topic, trying up to `DEAD_LETTER_TRIES`
    /// times with the policy's backoff.
    fn dead_letter(
        &mut self,
        id: u64,
        record: Record,
        t: Tracked,
        reason: GiveUp,
        tries: u32,
        ctx: &mut Context<Self>,
    ) {
        let producer = self.producer.clone();
        let to_send = record.clone();
        let fut = async move { producer.send(to_send).await };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| match res {
            Ok(dead_letter) => {
                act.sending.remove(&id);
                act.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                act.emit(RetryOutcome::DeadLettered {
                    error: t.error,
                    reason,
                    attempts: t.attempts,
                    dead_letter,
                });
                act.finish_stopping(ctx);
            }
            Err(e) if tries + 1 < DEAD_LETTER_TRIES && e.attempts > 0 && !act.stopping => {
                let delay = act.policy.backoff(tries);
                ctx.run_later(delay, move |act, ctx| {
                    act.dead_letter(id, record, t, reason, tries + 1, ctx)
                });
            }
            Err(e) => {
                act.sending.remove(&id);
                act.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                act.emit(RetryOutcome::Failed {
                    error: t.error,
                    reason,
                    attempts: t.attempts,
                    dead_letter_error: Some(Box::new(e)),
                });
                act.finish_stopping(ctx);
            }
        }));
    }
}

/// Attempts at a dead-letter write before the outcome is `Failed`.
const DEAD_LETTER_TRIES: u32 = 3;

impl Actor for RetryActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(ctx.address());
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.report_held();
        if self.owns_system {
            System::current().stop();
        }
    }
}

impl RetryActor {
    /// Reports every record waiting for a next attempt `Stopped`, with its
    /// last failure.
    fn report_waiting(&mut self) {
        for (_, t) in self.held.drain() {
            self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
            self.downstream.send(RetryOutcome::Failed {
                error: t.error,
                reason: GiveUp::Stopped,
                attempts: t.attempts,
                dead_letter_error: None,
            });
        }
        self.waiting_bytes = 0;
        self.stats.waiting.store(0, Ordering::Relaxed);
    }

    /// Reports every record the actor still holds `Stopped`: nothing may
    /// vanish with it. For a dying actor (a panic) or a stopped system.
    fn report_held(&mut self) {
        self.report_waiting();
        for (_, mut error) in self.sending.drain() {
            self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
            error.message = format!(
                "{}; the retry actor stopped during a retry, which may or may not have been written",
                error.message
            );
            error.kind = ErrorKind::Cancelled;
            error.attempts = error.attempts.max(1);
            self.downstream.send(RetryOutcome::Failed {
                error,
                reason: GiveUp::Stopped,
                attempts: 0,
                dead_letter_error: None,
            });
        }
    }

    /// A stopping actor stops once no record produced through its handle
    /// waits for a first report and no retry or dead-letter write is out.
    /// Any actor lets go of its own address once, besides that, every
    /// handle is gone and no record waits for a next attempt: then nothing
    /// can come that it owes an outcome (a record produced to its address
    /// directly holds that address until reported).
    fn finish_stopping(&mut self, ctx: &mut Context<Self>) {
        let out =
            !self.sending.is_empty() || self.shared.first_attempts.load(Ordering::Acquire) > 0;
        if self.stopping && !out {
            ctx.stop();
        }
        if self.handles_gone && !out && self.held.is_empty() {
            self.me = None;
        }
    }
}

impl Drop for RetryActor {
    fn drop(&mut self) {
        // Also on a panic, which skips `stopped`.
        self.report_held();
    }
}

impl Handler<DeliveryReport> for RetryActor {
    type Result = ();

    fn handle(&mut self, report: DeliveryReport, ctx: &mut Context<Self>) {
        // A first attempt's report (a record produced to this actor's
        // address directly was never counted: the count saturates at 0).
        let _ = self
            .shared
            .first_attempts
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        match report {
            DeliveryReport::Delivered(delivered) => self.emit(RetryOutcome::Delivered {
                delivered,
                attempts: 1,
            }),
            DeliveryReport::Failed(error) => self.on_failure(error, None, ctx),
        }
        self.finish_stopping(ctx);
    }
}

/// Stop the retry actor (see [`RetryHandle::stop`]).
#[derive(Debug, Clone, Copy)]
struct StopRetry;

impl Message for StopRetry {
    type Result = ();
}

impl Handler<HandlesGone> for RetryActor {
    type Result = ();
    fn handle(&mut self, _: HandlesGone, ctx: &mut Context<Self>) {
        self.handles_gone = true;
        self.finish_stopping(ctx);
    }
}

impl Handler<StopRetry> for RetryActor {
    type Result = ();
    fn handle(&mut self, _: StopRetry, ctx: &mut Context<Self>) {
        self.stopping = true;
        self.shared.stopping.store(true, Ordering::Release);
        self.report_waiting();
        self.finish_stopping(ctx);
    }
}
