//! `ScriptedBroker`, the actor that drains a scripted producer's queues
//! and answers by the script, and `ScriptedTree`, the actor tree as the
//! producer's engine sees it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use actix::prelude::*;
use futures::future::BoxFuture;

use super::network::Connection;
use super::script::Script;
use super::verdict::{Answer, Verdict, BROKER_ID};
use crate::actors::msgs::{AddPartitionsWanted, CancelInFlight, Retire, Wake};
use crate::batching::queue::QueueState;
use crate::clock::Instant;
use crate::engine::{ActorTree, Engine};

use crate::idempotence::{init_error, Fetch, FetchError};
use crate::kafka_error::classify;
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::sync::lock;

/// The scripted broker of one producer: drains its queues and answers by
/// the script. Stands where the connection actors and the partitioner
/// actor stand in a real producer.
pub(crate) struct ScriptedBroker {
    engine: Arc<Engine>,
    script: Arc<Script>,
    tree: Arc<ScriptedTree>,
    wake_at: Option<(Instant, SpawnHandle)>,
    stopping: bool,
    /// Its connection to the double: up, or reconnecting (`network.rs`).
    connection: Connection,
}

impl std::fmt::Debug for ScriptedBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedBroker").finish_non_exhaustive()
    }
}

impl ScriptedBroker {
    pub(crate) fn new(engine: Arc<Engine>, tree: Arc<ScriptedTree>) -> ScriptedBroker {
        ScriptedBroker {
            engine,
            script: tree.script.clone(),
            tree,
            wake_at: None,
            stopping: false,
            connection: Connection::new(Instant::now()),
        }
    }

    /// Takes every sendable batch (as `BrokerConnection::drain`: the front
    /// ready batch once its retry backoff is over, the open batch once it
    /// is full, its linger has passed, or a flush or close is under way)
    /// and answers it; held requests past `request.timeout.ms` time out.
    /// The double's stand-in for a connection actor's drain: held
    /// requests past `request.timeout.ms` time out; then, once the
    /// producer may send (an id, a transaction), every sendable batch is
    /// taken and answered by the script, and the next look is scheduled.
    fn drain(&mut self, ctx: &mut Context<Self>) {
        if self.stopping {
            return;
        }
        let engine = self.engine.clone();
        let now = Instant::now();
        self.time_out_held(&engine, now);
        self.answer_due(&engine, now);
        if !self.connected(&engine, now, ctx) {
            return;
        }
        let Some(idem) = self.producer_id(&engine, now, ctx) else {
            return;
        };
        // Transactional: nothing is sent outside a transaction (or once
        // fenced), and only partitions the coordinator has added to the
        // current one; the others are asked for, as `drain` does.
        let txn_generation = match &engine.txn() {
            None => None,
            Some(t) => match t.sendable() {
                Some(g) => Some(g),
                None => return,
            },
        };
        let gates = Gates {
            idem,
            txn_generation,
            max_in_flight: engine.config().max_in_flight,
            // Each batch is a request of its own here: none counts as
            // holding room back.
            flushing: engine.linger_over(true),
        };
        let (taken, wanted) = take_sendable(&engine, &gates, now);
        if let (Some(t), false) = (&engine.txn(), wanted.is_empty()) {
            if t.want(wanted) {
                if let Some(to) = lock(&self.tree.add_partitions).as_ref() {
                    to.do_send(AddPartitionsWanted);
                }
            }
        }
        for b in taken {
            self.script.arrive(&engine, b, now);
        }
        let now = Instant::now();
        let next = match (
            next_look(&engine, &gates, now),
            self.script.next_due(&engine),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match next {
            Some(at) if at <= now => ctx.notify(Wake),
            Some(at) => self.schedule_wake(at, ctx),
            None => {}
        }
    }

    /// Held requests past `request.timeout.ms` time out, as a broker's
    /// silence would make them.
    fn time_out_held(&self, engine: &Arc<Engine>, now: Instant) {
        let timeout = engine.config().request_timeout;
        for h in self
            .script
            .take_held_of(engine, |h| now.duration_since(h.sent_at) >= timeout)
        {
            self.script
                .apply(engine, h.batch, h.arrivals, Verdict::TimeOut, now);
        }
    }

    /// Slow answers (`MockBroker::set_latency`) due by now are given.
    fn answer_due(&self, engine: &Arc<Engine>, now: Instant) {
        for (h, verdict) in self.script.take_due(engine, now) {
            self.script.apply(engine, h.batch, h.arrivals, verdict, now);
        }
    }

    /// Whether the producer is connected to the double, as a connection
    /// actor would be: a dropped connection (`MockBroker::disconnect`,
    /// `go_down`, `Verdict::Disconnect`) is noticed here, as
    /// `BrokerConnection::connection_lost` notices a lost socket (its
    /// requests in flight were put back already), and made again after
    /// the reconnect backoff, failing while the broker is down; a look
    /// is scheduled for the next attempt.
    fn connected(&mut self, engine: &Arc<Engine>, now: Instant, ctx: &mut Context<Self>) -> bool {
        if self.script.take_cut(engine) && self.connection.is_up() {
            tracing::warn!(broker = BROKER_ID, "connection lost (scripted)");
            engine.stats().record_disconnect(BROKER_ID);
            self.connection.lost(engine.config(), now);
        }
        match self
            .connection
            .ready(engine.config(), self.script.is_down(), now)
        {
            Ok(()) => true,
            Err(at) => {
                self.schedule_wake(at, ctx);
                false
            }
        }
    }

    /// The producer id and epoch to stamp batches with (`Some(None)`:
    /// not idempotent), or `None` while there is none yet. The idempotent
    /// producer sends nothing until it has an id, and nothing while an
    /// epoch bump is due; the bump waits until none of its requests is
    /// held. A transactional producer's id comes from the coordinator,
    /// through the supervisor and the transaction actor (which wake this
    /// actor when it is there).
    #[allow(clippy::option_option)]
    fn producer_id(
        &mut self,
        engine: &Arc<Engine>,
        now: Instant,
        ctx: &mut Context<Self>,
    ) -> Option<Option<(i64, i16)>> {
        let Some(i) = &engine.idem() else {
            return Some(None);
        };
        if let Some(id) = i.ready() {
            return Some(Some(id));
        }
        if engine.txn().is_some() {
            return None;
        }
        // Refused an id: records waiting fail with the cause now, as a
        // connection actor's drain fails them.
        if let Some((kind, message)) = i.refused() {
            engine.fail_queued(kind, &message);
        }
        match i.begin_fetch(self.script.held_by(engine), now) {
            Fetch::Start(bumped) => {
                // Answered as a broker answers it, scripted errors
                // included, classified as the connection actor
                // classifies them (`init_error`).
                let result = self
                    .script
                    .grant(bumped)
                    .map_err(|code| match classify(code) {
                        Some(c) => init_error(BROKER_ID, c.error),
                        None => FetchError::Transient(format!("InitProducerId: error code {code}")),
                    });
                i.fetched(result, now);
                if let Some(id) = i.ready() {
                    return Some(Some(id));
                }
                // Refused: what waits fails now with the cause, as the
                // supervisor fails it after a connection actor's
                // refusal; else the next attempt after the backoff.
                if let Some((kind, message)) = i.refused() {
                    engine.fail_queued(kind, &message);
                }
                if let Fetch::After(at) = i.begin_fetch(self.script.held_by(engine), now) {
                    self.schedule_wake(at, ctx);
                }
                None
            }
            Fetch::After(at) => {
                self.schedule_wake(at, ctx);
                None
            }
            // Woken again when a held request is answered or times out
            // (the supervisor's tick).
            Fetch::Nothing => None,
        }
    }

    fn schedule_wake(&mut self, at: Instant, ctx: &mut Context<Self>) {
        if let Some((existing, _)) = self.wake_at {
            if existing <= at {
                return;
            }
        }
        if let Some((_, h)) = self.wake_at.take() {
            ctx.cancel_future(h);
        }
        let delay = at.saturating_duration_since(Instant::now());
        let h = ctx.run_later(delay, |act, ctx| {
            act.wake_at = None;
            act.drain(ctx);
        });
        self.wake_at = Some((at, h));
    }

    /// The producer is stopping: topic waits end, nothing more is drained.
    fn stop(&mut self, ctx: &mut Context<Self>) {
        self.stopping = true;
        self.tree.closed.store(true, Ordering::Release);
        self.script.topics_changed.notify_waiters();
        ctx.stop();
    }
}

/// What the double's drain takes batches under.
struct Gates {
    idem: Option<(i64, i16)>,
    txn_generation: Option<u64>,
    max_in_flight: usize,
    /// Linger is over for every batch.
    flushing: bool,
}

impl Gates {
    /// Idempotent: one batch in flight per partition until the broker has
    /// acknowledged one of this epoch, then up to max.in.flight.
    fn waits(&self, qi: &QueueState) -> bool {
        self.idem
            .is_some_and(|id| qi.in_flight >= self.max_in_flight || qi.awaits_confirmation(id))
    }

    /// The partition is not in the open transaction.
    fn outside_txn(&self, qi: &QueueState) -> bool {
        self.txn_generation.is_some_and(|g| qi.txn_added != g)
    }
}

/// Every batch sendable now, sealed and stamped, and the partitions the
/// open transaction lacks. Everything is taken first and answered after:
/// a batch put back for a retry waits for a later pass (after its
/// backoff).
fn take_sendable(
    engine: &Engine,
    gates: &Gates,
    now: Instant,
) -> (Vec<crate::batching::batch::SealedBatch>, Vec<(Topic, i32)>) {
    let linger = engine.config().linger;
    let mut wanted = Vec::new();
    let mut taken = Vec::new();
    for q in engine.acc().all_queues() {
        let mut qi = lock(&q.state);
        if gates.outside_txn(&qi) {
            if !qi.ready.is_empty() || qi.open.is_some() {
                wanted.push((q.topic, q.partition));
            }
            continue;
        }
        while !gates.waits(&qi) {
            let mut b = if let Some(front) = qi.ready.front() {
                if front.retry_at.is_some_and(|at| at > now) {
                    break;
                }
                qi.ready.pop_front().expect("checked")
            } else if let Some(open) = &qi.open {
                if open.created + linger > now && !gates.flushing && !open.full {
                    break;
                }
                let open = qi.open.take().expect("checked");
                match engine.acc().seal(open, &q) {
                    Ok(b) => b,
                    Err(f) => {
                        drop(qi);
                        engine.fail_seal(f);
                        qi = lock(&q.state);
                        continue;
                    }
                }
            } else {
                break;
            };
            if let Some(id) = gates.idem {
                let transactional = gates.txn_generation.is_some();
                engine.acc().stamp(&mut qi, &mut b, id, transactional);
            }
            qi.take_off(&mut b);
            taken.push(b);
        }
    }
    (taken, wanted)
}

/// When to look again: a retry's backoff, a lingering batch. A queue
/// waiting for its request's answer, or for its partition to join the
/// transaction, is woken by that.
fn next_look(engine: &Engine, gates: &Gates, now: Instant) -> Option<Instant> {
    let linger = engine.config().linger;
    let mut next: Option<Instant> = None;
    for q in engine.acc().all_queues() {
        let qi = lock(&q.state);
        if gates.waits(&qi) || gates.outside_txn(&qi) {
            continue;
        }
        let at = match (qi.ready.front(), &qi.open) {
            (Some(front), _) => front.retry_at.unwrap_or(now),
            (None, Some(open)) if open.full || gates.flushing => now,
            (None, Some(open)) => open.created + linger,
            (None, None) => continue,
        };
        next = Some(next.map_or(at, |w| w.min(at)));
    }
    next
}

impl Actor for ScriptedBroker {
    type Context = Context<Self>;

    /// A restarted broker (its predecessor panicked) finds the queues and
    /// the held requests where they were: drain them.
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.notify(Wake);
    }
}

/// Makes the scripted broker panic inside a handler (tests of its
/// supervision: `Producer::inject_partitioner_panic` under the double).
#[cfg(feature = "fault-injection")]
impl Handler<crate::actors::msgs::InjectPanic> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: crate::actors::msgs::InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in the scripted broker");
    }
}

impl Handler<Wake> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.drain(ctx);
    }
}

/// `close` after its flush (or a close that gave up): held records go
/// back to their queues, not counted as an attempt (as a retiring
/// connection actor's), where the supervisor's shutdown cancels them.
impl Handler<Retire> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let engine = self.engine.clone();
        for h in self.script.take_held_of(&engine, |_| true) {
            self.script.mark(h.arrivals, Answer::NoAnswer);
            engine.retry_or_fail(
                h.batch,
                now,
                ErrorKind::Timeout,
                "connection retired",
                false,
            );
        }
        self.stop(ctx);
    }
}

/// `close_timeout` ran out, or the last handle was dropped: held records
/// fail `Cancelled`, as a connection actor's in-flight batches do.
impl Handler<CancelInFlight> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: CancelInFlight, ctx: &mut Context<Self>) {
        self.script.cancel_held(&self.engine);
        self.stop(ctx);
    }
}

/// The actor tree as the engine of a scripted producer sees it
/// (`engine::ActorTree`, which `actors::addresses::Addresses` implements
/// for a real one): wakes go to its `ScriptedBroker`, topic waits to the
/// script.
#[derive(Debug)]
pub(crate) struct ScriptedTree {
    script: Arc<Script>,
    /// The broker actor, once started (again, when one died).
    broker: Mutex<Option<Addr<ScriptedBroker>>>,
    /// Set once the engine exists (weak: the engine holds this tree).
    engine: OnceLock<Weak<Engine>>,
    /// The producer is stopping: topic waits answer `None`.
    closed: AtomicBool,
    /// A transactional producer's transaction actor, which the drain asks
    /// to add partitions to the open transaction (as a connection actor's
    /// `Upstream::add_partitions`).
    add_partitions: Mutex<Option<Recipient<AddPartitionsWanted>>>,
}

impl ScriptedTree {
    pub(crate) fn new(script: Arc<Script>) -> ScriptedTree {
        ScriptedTree {
            script,
            broker: Mutex::new(None),
            engine: OnceLock::new(),
            closed: AtomicBool::new(false),
            add_partitions: Mutex::new(None),
        }
    }

    /// The script, whose coordinator a transactional producer's
    /// transaction actor asks (`Script::ask`).
    pub(crate) fn script(&self) -> Arc<Script> {
        self.script.clone()
    }

    /// Where the drain asks for partitions to join the open transaction.
    pub(crate) fn set_add_partitions(&self, to: Recipient<AddPartitionsWanted>) {
        *lock(&self.add_partitions) = Some(to);
    }

    /// Requests of `engine` the double holds (in flight).
    pub(crate) fn in_flight(&self, engine: &Arc<Engine>) -> usize {
        self.script.held_by(engine)
    }

    /// The engine built on this tree: it gets the script's metadata.
    pub(crate) fn attach(&self, engine: &Arc<Engine>) {
        let _ = self.engine.set(Arc::downgrade(engine));
        self.script.attach(engine);
    }

    /// Starts the broker actor (in the current actix system).
    pub(crate) fn start_broker(self: &Arc<Self>, engine: Arc<Engine>) -> Addr<ScriptedBroker> {
        let addr = ScriptedBroker::new(engine, self.clone()).start();
        *lock(&self.broker) = Some(addr.clone());
        addr
    }

    /// The broker actor, started again if it died (a panic: actix does
    /// not catch it). What it worked on lives outside it (the queues, the
    /// script's held requests), so its successor carries on. Returns the
    /// address and whether it was restarted.
    pub(crate) fn live_broker(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
    ) -> (Addr<ScriptedBroker>, bool) {
        if let Some(addr) = lock(&self.broker).clone().filter(Addr::connected) {
            return (addr, false);
        }
        (self.start_broker(engine.clone()), true)
    }

    /// The producer is stopping and its broker actor died before it could
    /// report what it held (a panic racing the shutdown: the `Retire` or
    /// `CancelInFlight` sent to it died with its mailbox): the held
    /// requests fail `Cancelled` here instead, so that no report waits
    /// for a broker actor that will never answer.
    pub(crate) fn cancel_if_dead(&self, engine: &Arc<Engine>) {
        if lock(&self.broker).as_ref().is_some_and(Addr::connected) {
            return;
        }
        self.script.cancel_held(engine);
        self.closed.store(true, Ordering::Release);
        self.script.topics_changed.notify_waiters();
    }

    fn may_create(&self) -> bool {
        self.engine
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|e| e.config().allow_auto_create_topics)
    }
}

impl ActorTree for ScriptedTree {
    fn wake(&self, _broker: i32) {
        self.wake_all();
    }

    fn wake_all(&self) {
        if let Some(b) = lock(&self.broker).as_ref() {
            b.do_send(Wake);
        }
    }

    fn request_topic(&self, topic: Topic) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.script.known_or_created(topic, self.may_create());
        true
    }

    fn ensure_topic(
        &self,
        topic: Topic,
    ) -> BoxFuture<'static, Option<Result<(), (ErrorKind, String)>>> {
        let script = self.script.clone();
        let may_create = self.may_create();
        let engine = self.engine.get().and_then(Weak::upgrade);
        let closed = self.closed.load(Ordering::Acquire);
        // The future cannot borrow `self`: it watches the flag through the
        // script's notifications and the engine's own closed flag.
        Box::pin(async move {
            let engine = engine?;
            if closed {
                return None;
            }
            let deadline = Instant::now() + engine.config().max_block;
            loop {
                let changed = script.topics_changed.notified();
                if engine.shutting_down() {
                    return None;
                }
                if script.known_or_created(topic, may_create) {
                    return Some(Ok(()));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || engine.timeout(left, changed).await.is_err() {
                    return Some(Err((
                        ErrorKind::UnknownTopic,
                        format!(
                            "the mock broker has no topic {:?} (allow.auto.create.topics is {}; MockBroker::topic creates it)",
                            topic.as_str(),
                            engine.config().allow_auto_create_topics,
                        ),
                    )));
                }
            }
        })
    }
}
