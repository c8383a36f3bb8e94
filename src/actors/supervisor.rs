//! `ProducerSupervisor`: the root of the actor tree.
//!
//! It starts the partitioner actor and one `BrokerConnection` per broker
//! (under actix `Supervisor`, so a connection actor that stops is restarted
//! with its queues intact: they live in the shared accumulator), creates and
//! retires connection actors as metadata changes, sweeps batches past
//! `delivery.timeout.ms`, accepts actor-API `Produce` messages, and runs
//! shutdown.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Instant;

use actix::prelude::*;

use crate::actors::addresses::Addresses;
use crate::actors::broker::{BrokerConnection, Upstream};
use crate::actors::msgs::*;
use crate::actors::partitioner::PartitionerActor;
use crate::actors::scripted::ScriptedTree;
use crate::actors::telemetry::{TelemetryActor, TelemetryState};
use crate::actors::transaction::TransactionActor;
use crate::delivery::owed::ReplyTo;
use crate::engine::enqueue::{Enqueued, Resume};
use crate::engine::error::ProduceError;
use crate::engine::Engine;
use crate::idempotence::{Fetch, FetchError};
use crate::report::{DeliveryError, DeliveryReport, ErrorKind};
use crate::sync::lock;

/// The producer's root actor. Its address accepts [`Produce`] messages.
pub struct ProducerSupervisor {
    engine: Arc<Engine>,
    addresses: Arc<Addresses>,
    /// The metadata cache; `None` under a scripted broker, which answers
    /// topic waits itself.
    partitioner: Option<Addr<PartitionerActor>>,
    /// The testing double's tree, whose broker actor stands in place of
    /// the partitioner and the connection actors (`courier_kafka::testing`).
    scripted: Option<Arc<ScriptedTree>>,
    /// Stop the actix system on shutdown (the producer owns its thread).
    owns_system: bool,
    addrs: HashMap<i32, String>,
    /// Brokers with a connection actor that the metadata answers have
    /// left out, since the first answer that did (`BrokersChanged`).
    absent_since: HashMap<i32, crate::clock::Instant>,
    /// A timer for the next InitProducerId attempt after a failed one.
    idem_retry: Option<SpawnHandle>,
    /// The transaction actor, for a transactional producer.
    transactions: Option<Addr<TransactionActor>>,
    /// The telemetry actor (`enable.metrics.push`, not under the testing
    /// double), and the state it leaves to its successor.
    telemetry: Option<(Addr<TelemetryActor>, Arc<TelemetryState>)>,
    /// `Shutdown` arrived: the tree is being stopped, so a dead actor is
    /// not restarted. Until then (a `close` still flushing, or ending its
    /// transaction) dead actors are restarted as ever: the flush needs the
    /// connection actors, and only a successor puts a dead one's in-flight
    /// requests back in their queues.
    shutting_down: bool,
    /// The next tick, while the tick runs (`next_tick`): `None` while it
    /// sleeps, with nothing left to report.
    ticker: Option<SpawnHandle>,
    /// Ticks in a row that found nothing to report.
    idle_ticks: u32,
}

/// Ticks in a row with nothing to report before the tick sleeps (`Rouse`
/// wakes it): a second at the default 100 ms tick, so that a producer
/// sending a record now and then does not put it to sleep and wake it
/// for each.
const IDLE_TICKS_BEFORE_SLEEP: u32 = 10;

impl std::fmt::Debug for ProducerSupervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerSupervisor").finish_non_exhaustive()
    }
}

/// A producer id request's answer, from a connection actor or the
/// transaction actor.
type IdAnswer = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Result<(i64, i16), FetchError>, MailboxError>>>,
>;

impl ProducerSupervisor {
    /// Starts the whole tree in the current actix system. The addresses are
    /// published in `addresses` before this returns, so producer handles can
    /// be used at once.
    pub(crate) fn launch(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        owns_system: bool,
    ) -> Addr<Self> {
        Self::launch_with(engine, addresses, owns_system, None)
    }

    /// Starts a producer whose broker is the testing double's script
    /// (`actors/scripted/`): the supervisor, and under it one
    /// `ScriptedBroker` instead of the partitioner and connection actors.
    pub(crate) fn launch_scripted(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        owns_system: bool,
        tree: Arc<ScriptedTree>,
    ) -> Addr<Self> {
        Self::launch_with(engine, addresses, owns_system, Some(tree))
    }

    fn launch_with(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        owns_system: bool,
        scripted: Option<Arc<ScriptedTree>>,
    ) -> Addr<Self> {
        // The producer's futures set their timers here (Engine::timeout).
        engine.bind_actor_thread();
        ProducerSupervisor::create(move |ctx| {
            addresses.set_rouse(ctx.address().downgrade().recipient());
            if let Some(tree) = scripted {
                tree.start_broker(engine.clone());
                let mut sup = ProducerSupervisor {
                    scripted: Some(tree),
                    engine,
                    addresses,
                    partitioner: None,
                    owns_system,
                    addrs: HashMap::new(),
                    absent_since: HashMap::new(),
                    idem_retry: None,
                    transactions: None,
                    telemetry: None,
                    shutting_down: false,
                    ticker: None,
                    idle_ticks: 0,
                };
                sup.start_transaction_actor();
                return sup;
            }
            // The partitioner actor first: connection actors report stale
            // metadata to it. (Actors run their `started` only once this
            // closure has returned, so it sees the bootstrap connections.)
            let partitioner = PartitionerActor::new(
                engine.clone(),
                addresses.clone(),
                ctx.address().recipient(),
                ctx.address().recipient(),
                addresses.alarm(),
            )
            .start();
            addresses.topic_waits.set(
                partitioner.clone().recipient(),
                partitioner.clone().recipient(),
            );
            let mut sup = ProducerSupervisor {
                engine: engine.clone(),
                addresses,
                partitioner: Some(partitioner),
                scripted: None,
                owns_system,
                addrs: HashMap::new(),
                absent_since: HashMap::new(),
                idem_retry: None,
                transactions: None,
                telemetry: None,
                shutting_down: false,
                ticker: None,
                idle_ticks: 0,
            };
            sup.start_transaction_actor();
            sup.start_telemetry(None);
            for (i, addr) in engine
                .config()
                .bootstrap_servers
                .clone()
                .into_iter()
                .enumerate()
            {
                sup.start_broker(-(i as i32) - 1, addr, ctx);
            }
            sup
        })
    }

    fn start_broker(&mut self, id: i32, addr: String, ctx: &mut Context<Self>) {
        // A broker whose address changed: its old actor lets go of its
        // requests (back to their queues) before the new one starts on
        // the same state, so that the two never send side by side.
        if let Some((_, old)) = self.addresses.connections.remove(&id) {
            self.addrs.insert(id, addr.clone());
            let retired = old.send(Retire);
            drop(old);
            ctx.spawn(retired.into_actor(self).map(move |_, act, ctx| {
                if act.addrs.get(&id) == Some(&addr) && !act.addresses.connections.contains_key(&id)
                {
                    act.launch_broker(id, addr, ctx);
                }
            }));
            return;
        }
        self.launch_broker(id, addr, ctx);
    }

    fn launch_broker(&mut self, id: i32, addr: String, ctx: &mut Context<Self>) {
        let engine = self.engine.clone();
        let a = addr.clone();
        let state = self.addresses.broker_states.entry(id).or_default().clone();
        let upstream = Upstream {
            // Through the supervisor, which knows the current partitioner.
            refresh_metadata: ctx.address().recipient(),
            leader_hints: ctx.address().recipient(),
            ensure_producer_id: ctx.address().recipient(),
            security_failed: ctx.address().recipient(),
            add_partitions: ctx.address().recipient(),
        };
        let alarm = self.addresses.alarm();
        let actor = Supervisor::start(move |_| {
            BrokerConnection::new(id, a, engine, state, upstream, alarm)
        });
        if let Some(old) = self.addresses.connections.insert(id, actor) {
            old.do_send(Retire);
        }
        self.addrs.insert(id, addr);
        self.engine.wake_all();
    }

    /// Gets the idempotent producer its id, or bumps the epoch once nothing
    /// is in flight, through any broker connection.
    fn drive_idempotence(&mut self, ctx: &mut Context<Self>) {
        let Some(idem) = &self.engine.idem() else {
            return;
        };
        if !self.may_ask_for_id() {
            return;
        }
        let bump_from = match idem.begin_fetch(self.requests_in_flight(), Instant::now()) {
            Fetch::Start(bump_from) => bump_from,
            Fetch::After(at) => {
                if self.idem_retry.is_none() {
                    let wait = at.saturating_duration_since(Instant::now());
                    self.idem_retry = Some(ctx.run_later(wait, |act, ctx| {
                        act.idem_retry = None;
                        act.drive_idempotence(ctx);
                    }));
                }
                return;
            }
            Fetch::Nothing => return,
        };
        let Some(ask) = self.ask_for_id(bump_from) else {
            idem.fetched(
                Err(FetchError::Transient("no broker connection yet".into())),
                Instant::now(),
            );
            return self.drive_idempotence(ctx);
        };
        ctx.spawn(ask.into_actor(self).map(|res, act, ctx| {
            let res = res
                .unwrap_or_else(|_| Err(FetchError::Transient("broker actor unavailable".into())));
            let Some(idem) = &act.engine.idem() else {
                return;
            };
            idem.fetched(res, Instant::now());
            if idem.ready().is_some() {
                act.engine.wake_all();
                return;
            }
            // Refused: what waits to be sent fails now with the cause
            // (records produced later fail when a connection drains them).
            if let Some((kind, message)) = idem.refused() {
                act.engine.fail_queued(kind, &message);
            }
            act.drive_idempotence(ctx);
        }));
    }

    /// Whether the supervisor is the one to get a producer id now: not
    /// when there is one, not under a scripted broker (it hands ids out
    /// itself, save a transactional producer's, which come from the
    /// double's coordinator through the transaction actor, as from a
    /// cluster's), not for a fenced transactional producer (a fresh id
    /// would fence the instance that fenced it), and not before the first
    /// metadata names the brokers (`BrokersChanged` drives this again: a
    /// bootstrap connection is retired as soon as they are known, and a
    /// request on it with it).
    fn may_ask_for_id(&self) -> bool {
        let engine = &self.engine;
        let has_id = engine.idem().is_some_and(|i| i.ready().is_some());
        if has_id || (self.scripted.is_some() && engine.txn().is_none()) {
            return false;
        }
        let fenced = engine
            .txn()
            .is_some_and(|t| t.phase() == crate::transaction::Phase::Fatal);
        let connections = &self.addresses.connections;
        let bootstrap_only = !connections.is_empty() && connections.iter().all(|e| *e.key() < 0);
        !fenced && !bootstrap_only
    }

    /// Produce requests in flight on every connection (an epoch bump
    /// waits for none).
    fn requests_in_flight(&self) -> usize {
        match &self.scripted {
            Some(tree) => tree.in_flight(&self.engine),
            None => self
                .addresses
                .broker_states
                .iter()
                .map(|s| s.value().in_flight_len())
                .sum(),
        }
    }

    /// The request for a producer id (`bump_from`: the id and epoch to
    /// bump): to a random known broker's connection actor, or, for a
    /// transactional producer, to the transaction actor, which finds the
    /// coordinator (under the testing double, with no connection actor:
    /// the double answers). `None` while there is no one to ask.
    fn ask_for_id(&self, bump_from: Option<(i64, i16)>) -> Option<IdAnswer> {
        let mut brokers: Vec<_> = self
            .addresses
            .connections
            .iter()
            .map(|e| (*e.key(), e.value().clone()))
            .collect();
        brokers.sort_by_key(|(id, _)| (*id < 0, fastrand::u32(..)));
        let broker = brokers.into_iter().next().map(|(_, addr)| addr);
        match (&self.transactions, broker) {
            (Some(t), b) if b.is_some() || self.scripted.is_some() => {
                Some(Box::pin(t.send(InitTransactional { bump_from })))
            }
            (None, Some(addr)) => Some(Box::pin(addr.send(InitProducer { bump_from }))),
            _ => None,
        }
    }

    /// A connection actor whose handler panicked is gone (actix does not
    /// catch panics; tokio drops the task). Start a new one for the same
    /// broker with the same shared state, so its in-flight batches are
    /// retried rather than lost.
    fn restart_dead_brokers(&mut self, ctx: &mut Context<Self>) {
        if self.shutting_down {
            return;
        }
        let dead: Vec<i32> = self
            .addresses
            .connections
            .iter()
            .filter(|e| !e.value().connected())
            .map(|e| *e.key())
            .collect();
        for id in dead {
            if let Some(addr) = self.addrs.get(&id).cloned() {
                tracing::warn!(broker = id, "connection actor died; restarting it");
                self.engine.stats().record_actor_restart();
                self.launch_broker(id, addr, ctx);
            }
        }
    }

    /// Runs one of the supervisor's periodic tasks, catching a panic in it
    /// (the locks it may have held recover from poisoning).
    fn guarded(
        &mut self,
        task: &'static str,
        ctx: &mut Context<Self>,
        f: impl FnOnce(&mut Self, &mut Context<Self>),
    ) {
        let run = std::panic::AssertUnwindSafe(|| f(self, ctx));
        if std::panic::catch_unwind(run).is_err() {
            tracing::error!(
                task,
                "a supervisor task panicked; it runs again at the next tick"
            );
            self.engine.stats().record_actor_restart();
        }
    }

    /// The partitioner actor died (a panic: actix does not catch it):
    /// start another. Its state is rebuilt (the topics of interest from the
    /// queues, the metadata from a fetch); topic waits the dead one held
    /// ask the new one again (`TopicWaits`).
    /// Starts the transaction actor (a transactional producer only) and
    /// points the producer handles at it.
    fn start_transaction_actor(&mut self) {
        if self.engine.txn().is_none() {
            return;
        }
        let actor = TransactionActor::new(
            self.engine.clone(),
            self.addresses.clone(),
            self.scripted.as_ref().map(|t| t.script()),
            self.addresses.alarm(),
        )
        .start();
        if let Some(tree) = &self.scripted {
            tree.set_add_partitions(actor.clone().recipient());
        }
        self.addresses
            .set_transactions(crate::actors::addresses::TransactionAddrs {
                end: actor.clone().recipient(),
                send_offsets: actor.clone().recipient(),
            });
        self.transactions = Some(actor);
    }

    /// The telemetry actor (KIP-714), on `state` (a new one at the start;
    /// its predecessor's when it is restarted).
    fn start_telemetry(&mut self, state: Option<Arc<TelemetryState>>) {
        if !self.engine.config().enable_metrics_push {
            return;
        }
        let state = match state {
            Some(state) => state,
            // Not `Arc::default()`: `new` notes when the sums start.
            None => TelemetryState::new(),
        };
        let actor = TelemetryActor::new(
            self.engine.clone(),
            self.addresses.clone(),
            state.clone(),
            self.addresses.alarm(),
        )
        .start();
        self.telemetry = Some((actor, state));
    }

    /// A dead telemetry actor is started again on the same state.
    fn restart_dead_telemetry(&mut self) {
        let Some((actor, state)) = &self.telemetry else {
            return;
        };
        if actor.connected() || self.shutting_down || self.engine.is_closed() {
            return;
        }
        tracing::warn!("telemetry actor died; restarting it");
        self.engine.stats().record_actor_restart();
        let state = state.clone();
        self.start_telemetry(Some(state));
    }

    /// The transaction actor is supervised like the partitioner: its state
    /// is in `Engine::txn`, so a new one carries on.
    fn restart_dead_transaction_actor(&mut self) {
        let dead = self.transactions.as_ref().is_some_and(|t| !t.connected());
        if !dead || self.shutting_down {
            return;
        }
        tracing::warn!("transaction actor died; restarting it");
        self.engine.stats().record_actor_restart();
        self.start_transaction_actor();
    }

    /// The scripted broker died (a panic): start another, which finds the
    /// queues and the script's held requests where they were.
    fn restart_dead_scripted(&mut self) {
        let Some(tree) = &self.scripted else {
            return;
        };
        if self.shutting_down {
            return;
        }
        if tree.live_broker(&self.engine).1 {
            tracing::warn!("scripted broker died; restarted it");
            self.engine.stats().record_actor_restart();
        }
    }

    fn restart_dead_partitioner(&mut self, ctx: &mut Context<Self>) {
        let Some(current) = &self.partitioner else {
            return;
        };
        if current.connected() || self.shutting_down {
            return;
        }
        tracing::warn!("partitioner actor died; restarting it");
        self.engine.stats().record_actor_restart();
        let partitioner = PartitionerActor::new(
            self.engine.clone(),
            self.addresses.clone(),
            ctx.address().recipient(),
            ctx.address().recipient(),
            self.addresses.alarm(),
        )
        .start();
        self.addresses.topic_waits.set(
            partitioner.clone().recipient(),
            partitioner.clone().recipient(),
        );
        self.partitioner = Some(partitioner);
    }

    /// Fails batches whose delivery timeout passed while they waited in a
    /// queue (no leader, broker down). In-flight batches are handled by
    /// their connection when the response or the request timeout comes.
    fn expire_batches(&mut self) {
        let now = Instant::now();
        let snapshot = self.engine.metadata().load();
        let mut leaderless = false;
        for q in self.engine.acc().all_queues() {
            let mut expired = Vec::new();
            {
                let mut qi = lock(&q.state);
                // Records waiting for a leader we have no connection for (a
                // broker that left and came back, a leader not yet elected):
                // ask for fresh metadata rather than wait for its max age.
                if qi.open.is_some() || !qi.ready.is_empty() {
                    let leader = snapshot
                        .topics
                        .get(&q.topic)
                        .and_then(|t| t.leader(q.partition));
                    leaderless |=
                        leader.is_none_or(|l| !self.addresses.connections.contains_key(&l));
                }
                while qi.ready.front().is_some_and(|b| b.deadline <= now) {
                    expired.push(Ok(qi.ready.pop_front().unwrap()));
                }
                if qi
                    .open
                    .as_ref()
                    .is_some_and(|o| o.created + self.engine.config().delivery_timeout <= now)
                {
                    let open = qi.open.take().unwrap();
                    expired.push(self.engine.acc().seal(open, &q));
                }
            }
            for b in expired {
                let partition = b.as_ref().map_or_else(|f| f.partition, |b| b.partition);
                let leader = snapshot
                    .topics
                    .get(&q.topic)
                    .and_then(|t| t.leader(partition));
                let timeout_ms = self.engine.config().delivery_timeout.as_millis();
                // Say why nothing could be sent when the cluster told us.
                let missing = snapshot.missing.get(&q.topic).map(|code| {
                    let error = crate::kafka_error::classify(*code)
                        .map_or_else(|| code.to_string(), |c| format!("{:?}", c.error));
                    format!(
                        "; the cluster does not know topic {:?} ({error})",
                        q.topic.as_str()
                    )
                });
                self.engine.acc().fail_unsent(
                    b,
                    ErrorKind::Timeout,
                    |attempts| {
                        format!(
                            "not acknowledged within delivery.timeout.ms ({timeout_ms} ms) after {attempts} attempt(s){}; leader: {}{}",
                            if attempts > 0 { " (it may or may not have been written)" } else { "" },
                            leader.map_or("none".to_string(), |l| l.to_string()),
                            missing.unwrap_or_default()
                        )
                    },
                    self.engine.stats(),
                );
            }
        }
        if let Some(p) = self.partitioner.as_ref().filter(|_| leaderless) {
            p.do_send(RefreshMetadata);
        }
    }

    /// The periodic work. The supervisor is the root: nothing restarts
    /// it, so each task runs under `guarded`: a panic in one is caught,
    /// logged and counted, and the task runs again at the next tick.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        self.guarded("producer id", ctx, |act, ctx| act.drive_idempotence(ctx));
        self.guarded("connection actors", ctx, |act, ctx| {
            act.restart_dead_brokers(ctx)
        });
        self.guarded("partitioner actor", ctx, |act, ctx| {
            act.restart_dead_partitioner(ctx)
        });
        self.guarded("scripted broker", ctx, |act, _| act.restart_dead_scripted());
        self.guarded("transaction actor", ctx, |act, _| {
            act.restart_dead_transaction_actor()
        });
        self.guarded("telemetry actor", ctx, |act, _| {
            act.restart_dead_telemetry()
        });
        self.guarded("delivery timeouts", ctx, |act, _| {
            #[cfg(feature = "fault-injection")]
            if act.engine.take_injected_sweep_panic() {
                panic!("injected panic in the supervisor's sweep");
            }
            act.expire_batches()
        });
        self.guarded("abandoned batches", ctx, |act, _| {
            act.engine.bury_abandoned()
        });
        #[cfg(feature = "metrics")]
        self.guarded("metrics", ctx, |act, _| act.engine.publish_gauges());
        // Batches whose leader appeared or whose retry backoff ended.
        self.engine.wake_all();
        self.next_tick(ctx);
    }

    /// Schedules the next tick, or lets the tick sleep: after
    /// `IDLE_TICKS_BEFORE_SLEEP` ticks in a row with no batch left to
    /// report, the supervisor stops ticking until a batch opens
    /// (`Engine::rouse_supervisor`) or one of its actors is gone
    /// (`Alarm`). An idle producer then costs no wake-ups here. A batch
    /// opened as the tick falls asleep is seen by one side or the other:
    /// the supervisor marks itself asleep before it looks at the
    /// incomplete batches for the last time, and a producer marks a batch
    /// incomplete before it looks at the mark.
    fn next_tick(&mut self, ctx: &mut Context<Self>) {
        if self.ticker.is_some() {
            return;
        }
        if self.may_sleep() {
            self.idle_ticks += 1;
            if self.idle_ticks >= IDLE_TICKS_BEFORE_SLEEP {
                self.engine.set_supervisor_asleep(true);
                if self.may_sleep() {
                    tracing::trace!("nothing to report; the supervisor's tick sleeps");
                    return;
                }
                self.engine.set_supervisor_asleep(false);
            }
        } else {
            self.idle_ticks = 0;
        }
        let tick = self.engine.supervisor_tick();
        self.ticker = Some(ctx.run_later(tick, |act, ctx| {
            act.ticker = None;
            act.tick(ctx);
        }));
    }

    /// Whether the tick may sleep: no batch left to report, nothing
    /// stopping, no testing double (whose broker the tick restarts).
    fn may_sleep(&self) -> bool {
        self.scripted.is_none() && !self.shutting_down && self.engine.acc().nothing_incomplete()
    }
}

impl Actor for ProducerSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.next_tick(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // The transaction and telemetry actors hold the engine (and, on a
        // shared `ActorThread`, the thread): they stop with the tree. A
        // telemetry actor would otherwise wait for its next push (minutes)
        // and a transaction actor for the last of its addresses, which
        // the producer handles reach through `Addresses`.
        self.addresses.clear_transactions();
        if let Some(t) = self.transactions.take() {
            t.do_send(StopActor);
        }
        if let Some((t, _)) = self.telemetry.take() {
            t.do_send(StopActor);
        }
        self.engine.mark_stopped();
        self.engine.acc().incomplete_changed.notify_waiters();
        if self.owns_system {
            System::current().stop();
        }
    }
}

impl Handler<BrokersChanged> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: BrokersChanged, ctx: &mut Context<Self>) {
        if self.engine.is_closed() && self.engine.has_stopped() {
            return;
        }
        for (id, addr) in &msg.brokers {
            if self.addrs.get(id) != Some(addr) {
                tracing::info!(broker = id, %addr, "broker connection added");
                self.start_broker(*id, addr.clone(), ctx);
            }
        }
        // Retire brokers that left, and bootstrap connections once real
        // ones exist. One answer is not enough to retire a broker: answers
        // come from any broker, and one whose view lags (or a KRaft broker
        // fenced for a moment) lists fewer brokers than there are. A
        // broker goes once the answers have left it out for
        // `metadata.max.age.ms`; an answer listing no broker at all says
        // nothing, and retires none (the connections are the only way to
        // ask again). The Java client never closes such a connection
        // itself; it idles out.
        let now = crate::clock::Instant::now();
        let patience = self.engine.config().metadata_max_age;
        self.absent_since
            .retain(|id, _| !msg.brokers.contains_key(id));
        let gone: Vec<i32> = self
            .addrs
            .keys()
            .copied()
            .filter(|id| {
                if msg.brokers.contains_key(id) || msg.brokers.is_empty() {
                    return false;
                }
                if *id < 0 {
                    return true;
                }
                let since = *self.absent_since.entry(*id).or_insert(now);
                now.duration_since(since) >= patience
            })
            .collect();
        for id in gone {
            self.addrs.remove(&id);
            self.absent_since.remove(&id);
            if let Some((_, a)) = self.addresses.connections.remove(&id) {
                tracing::info!(broker = id, "broker connection retired");
                a.do_send(Retire);
            }
        }
        for (id, since) in &self.absent_since {
            tracing::debug!(broker = id, absent_for = ?now.duration_since(*since), "broker left out of a metadata answer; kept until it has been absent for metadata.max.age.ms");
        }
        // The first brokers known: ask for the producer id now, not at the
        // next tick (a new producer's first record waits for it).
        self.drive_idempotence(ctx);
    }
}

impl Handler<Rebootstrap> for ProducerSupervisor {
    type Result = ();
    /// Connections to `bootstrap.servers` again (negative ids, metadata
    /// only), as at the start, for those not connected still; the next
    /// metadata answer through one of them names the brokers, and retires
    /// them (`BrokersChanged`).
    fn handle(&mut self, _: Rebootstrap, ctx: &mut Context<Self>) {
        if self.engine.is_closed() && self.engine.has_stopped() {
            return;
        }
        let servers = self.engine.config().bootstrap_servers.clone();
        tracing::warn!(bootstrap_servers = ?servers, "no known broker answers metadata requests: connecting to bootstrap.servers again (metadata.recovery.strategy=rebootstrap)");
        for (i, addr) in servers.into_iter().enumerate() {
            let id = -(i as i32) - 1;
            if !self.addresses.connections.contains_key(&id) {
                self.start_broker(id, addr, ctx);
            }
        }
    }
}

impl Handler<Produce> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: Produce, _: &mut Context<Self>) {
        let Produce {
            mut record,
            reply_to,
        } = msg;
        self.engine.on_send(&mut record);
        // A record refused here gets its failure report from here, and is
        // counted failed as every other failure is, so a transaction does
        // not commit past it (`Transactions::check_commit` reads the count;
        // Java's `send` makes the transaction abortable on such an error
        // too). Not `NoTransaction`: that record belongs to no transaction
        // (one arriving while a commit runs must not make it abortable).
        let fail = |e: ProduceError, to: &Recipient<DeliveryReport>, engine: &Engine| {
            if !matches!(e, ProduceError::NoTransaction(_)) {
                engine.stats().failed.fetch_add(1, Ordering::Relaxed);
            }
            let message = e.to_string();
            let kind = match e {
                ProduceError::Closed(_) => ErrorKind::Cancelled,
                ProduceError::QueueFull(_) => ErrorKind::QueueFull,
                ProduceError::NoTransaction(_) => ErrorKind::Aborted,
                _ => ErrorKind::Timeout,
            };
            to.do_send(DeliveryReport::Failed(engine.refusal_report(
                DeliveryError {
                    kind,
                    message,
                    partition: None,
                    attempts: 0,
                    record: Box::new(e.into_record()),
                },
            )));
        };
        // Most records are taken here at once, with no task.
        let slow = match self.engine.enqueue_now(
            record,
            Some(ReplyTo::Actor(reply_to.clone())),
            true,
            &mut Resume::default(),
        ) {
            Enqueued::Appended(_) | Enqueued::Reported => return,
            Enqueued::Refused(e) => return fail(e, &reply_to, &self.engine),
            Enqueued::Wait(slow) => slow,
        };
        // It must wait (for metadata, buffer.memory or room under
        // queue.buffering.max.messages). Waiting records are bounded by
        // their bytes and their count, as buffer.memory and
        // queue.buffering.max.messages bound queued ones: past either bound
        // a record fails at once, QueueFull, rather than pile up in
        // detached tasks while the producer is full.
        let bytes = slow.record().approx_size();
        let cfg = self.engine.config();
        let (waiting, waiting_records) = self.engine.actor_path_waiting();
        let over_bytes = waiting.fetch_add(bytes, Ordering::AcqRel) + bytes > cfg.buffer_memory;
        let over_records =
            waiting_records.fetch_add(1, Ordering::AcqRel) + 1 > cfg.queue_buffering_max_messages;
        if over_bytes || over_records {
            waiting.fetch_sub(bytes, Ordering::AcqRel);
            waiting_records.fetch_sub(1, Ordering::AcqRel);
            let why = format!(
                "the producer is full and {} bytes of Produce messages already wait (buffer.memory {}, queue.buffering.max.messages {}); Producer::produce_to waits instead",
                waiting.load(Ordering::Relaxed),
                cfg.buffer_memory,
                cfg.queue_buffering_max_messages,
            );
            tracing::debug!(%why, "Produce message refused");
            return fail(
                ProduceError::QueueFull(Box::new(slow.into_record())),
                &reply_to,
                &self.engine,
            );
        }
        let engine = self.engine.clone();
        // A detached task, not `ctx.spawn`: a future owned by the actor
        // would be dropped (with its record and reply_to) if the actor
        // stopped while it waits.
        actix::spawn(async move {
            let r = engine.enqueue_slow(slow).await;
            let (waiting, waiting_records) = engine.actor_path_waiting();
            waiting.fetch_sub(bytes, Ordering::AcqRel);
            waiting_records.fetch_sub(1, Ordering::AcqRel);
            if let Err(e) = r {
                fail(e, &reply_to, &engine);
            }
        });
    }
}

impl Handler<Shutdown> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: Shutdown, ctx: &mut Context<Self>) {
        self.shutting_down = true;
        self.engine.close_intake();
        let brokers: Vec<_> = self
            .addresses
            .connections
            .iter()
            .map(|e| e.value().clone())
            .collect();
        self.addresses.connections.clear();
        if msg.cancel {
            self.engine.cancel_queued();
            for b in &brokers {
                b.do_send(CancelInFlight);
            }
        } else {
            for b in &brokers {
                b.do_send(Retire);
            }
        }
        if let Some(p) = &self.partitioner {
            p.do_send(StopActor);
        }
        // The scripted broker reports what it holds as connection actors
        // report what is in flight.
        if let Some(tree) = &self.scripted {
            let (s, _) = tree.live_broker(&self.engine);
            if msg.cancel {
                s.do_send(CancelInFlight);
            } else {
                s.do_send(Retire);
            }
        }
        self.addresses.topic_waits.close();
        // Give the connection actors a moment to report what they hold.
        ctx.run_later(Duration::from_millis(50), |act, ctx| {
            if let Some(tree) = &act.scripted {
                tree.cancel_if_dead(&act.engine);
            }
            act.engine.cancel_queued();
            act.engine.close_subscriptions();
            ctx.stop();
        });
    }
}

/// A connection failed TLS or authentication: every record waiting to be
/// sent fails now with that cause, and so do topic waits (the partitioner
/// answers new ones with it until a metadata request succeeds).
impl Handler<SecurityFailed> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SecurityFailed, _: &mut Context<Self>) {
        tracing::warn!(kind = %msg.kind, error = %msg.message, "connection refused by security; failing what waits");
        self.engine.fail_queued(msg.kind, &msg.message);
        if let Some(p) = &self.partitioner {
            p.do_send(msg);
        }
    }
}

/// A connection actor's request for fresh metadata, passed to the current
/// partitioner.
impl Handler<AddPartitionsWanted> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: AddPartitionsWanted, _: &mut Context<Self>) {
        if let Some(t) = &self.transactions {
            t.do_send(msg);
        }
    }
}

/// Leaders named by Produce answers, passed to the current partitioner.
impl Handler<LeaderHints> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: LeaderHints, _: &mut Context<Self>) {
        if let Some(p) = &self.partitioner {
            p.do_send(msg);
        }
    }
}

impl Handler<RefreshMetadata> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: RefreshMetadata, _: &mut Context<Self>) {
        if let Some(p) = &self.partitioner {
            p.do_send(msg);
        }
    }
}

/// Makes the partitioner actor panic, or the scripted broker standing in
/// its place (tests of their supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: InjectPanic, _: &mut Context<Self>) {
        if let Some(p) = &self.partitioner {
            p.do_send(msg);
        }
        if let Some(tree) = &self.scripted {
            tree.live_broker(&self.engine).0.do_send(msg);
        }
    }
}

#[cfg(test)]
impl Handler<TelemetrySubscribed> for ProducerSupervisor {
    type Result = bool;
    fn handle(&mut self, _: TelemetrySubscribed, _: &mut Context<Self>) -> bool {
        self.telemetry.as_ref().is_some_and(|(_, s)| s.subscribed())
    }
}

/// A batch opened while the tick slept, or an actor is gone: tick now,
/// and on.
impl Handler<Rouse> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, _: Rouse, ctx: &mut Context<Self>) {
        self.engine.set_supervisor_asleep(false);
        self.idle_ticks = 0;
        if self.ticker.is_none() && !self.shutting_down {
            self.tick(ctx);
        }
    }
}

/// Makes the transaction actor panic (tests of its supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<crate::actors::msgs::InjectTransactionPanic> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: crate::actors::msgs::InjectTransactionPanic, _: &mut Context<Self>) {
        if let Some(t) = &self.transactions {
            t.do_send(msg);
        }
    }
}

impl Handler<EnsureProducerId> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, _: EnsureProducerId, ctx: &mut Context<Self>) {
        self.drive_idempotence(ctx);
    }
}
