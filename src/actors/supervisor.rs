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
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::broker::BrokerConnection;
use super::msgs::*;
use super::partitioner::PartitionerActor;
use crate::accumulator::lock;
use crate::accumulator::ReplyTo;
use crate::producer::{cancel_queued, Inner, ProduceError};
use crate::report::{DeliveryError, DeliveryReport, ErrorKind};
use crate::report_router::fail_unsent;

/// The producer's root actor. Its address accepts [`Produce`] messages.
pub struct ProducerSupervisor {
    inner: Arc<Inner>,
    /// Stop the actix system on shutdown (the producer owns its thread).
    owns_system: bool,
    addrs: HashMap<i32, String>,
}

impl std::fmt::Debug for ProducerSupervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerSupervisor").finish_non_exhaustive()
    }
}

impl ProducerSupervisor {
    /// Starts the whole tree in the current actix system. The addresses are
    /// published in `inner` before this returns, so producer handles can be
    /// used at once.
    pub(crate) fn launch(inner: Arc<Inner>, owns_system: bool) -> Addr<Self> {
        ProducerSupervisor::create(move |ctx| {
            let _ = inner.supervisor_addr.set(ctx.address());
            let mut sup = ProducerSupervisor {
                inner: inner.clone(),
                owns_system,
                addrs: HashMap::new(),
            };
            for (i, addr) in inner
                .config
                .bootstrap_servers
                .clone()
                .into_iter()
                .enumerate()
            {
                sup.start_broker(-(i as i32) - 1, addr);
            }
            let p = PartitionerActor::new(inner.clone()).start();
            let _ = inner.partitioner_addr.set(p);
            sup
        })
    }

    fn start_broker(&mut self, id: i32, addr: String) {
        let inner = self.inner.clone();
        let a = addr.clone();
        let state = self.inner.broker_states.entry(id).or_default().clone();
        let actor = Supervisor::start(move |_| BrokerConnection::new(id, a, inner, state));
        if let Some(old) = self.inner.brokers.insert(id, actor) {
            old.do_send(Retire);
        }
        self.addrs.insert(id, addr);
    }

    /// Gets the idempotent producer its id, or bumps the epoch once nothing
    /// is in flight, through any broker connection.
    fn drive_idempotence(&mut self, ctx: &mut Context<Self>) {
        let Some(idem) = &self.inner.idem else { return };
        if idem.ready().is_some() {
            return;
        }
        let in_flight: usize = self
            .inner
            .broker_states
            .iter()
            .map(|s| s.value().in_flight_len())
            .sum();
        let Some(bump_from) = idem.begin_fetch(in_flight) else {
            return;
        };
        let mut brokers: Vec<_> = self
            .inner
            .brokers
            .iter()
            .map(|e| (*e.key(), e.value().clone()))
            .collect();
        brokers.sort_by_key(|(id, _)| (*id < 0, fastrand::u32(..)));
        let Some((_, addr)) = brokers.into_iter().next() else {
            idem.fetched(Err("no broker connection yet".into()));
            return;
        };
        let fut = addr.send(InitProducer { bump_from });
        ctx.spawn(fut.into_actor(self).map(|res, act, _| {
            let res = res.unwrap_or_else(|_| Err("broker actor unavailable".into()));
            let ok = res.is_ok();
            if let Some(idem) = &act.inner.idem {
                idem.fetched(res);
            }
            if ok {
                act.inner.wake_all();
            }
        }));
    }

    /// A connection actor whose handler panicked is gone (actix does not
    /// catch panics; tokio drops the task). Start a new one for the same
    /// broker with the same shared state, so its in-flight batches are
    /// retried rather than lost.
    fn restart_dead_brokers(&mut self) {
        if self.inner.closed.load(Ordering::Acquire) {
            return;
        }
        let dead: Vec<i32> = self
            .inner
            .brokers
            .iter()
            .filter(|e| !e.value().connected())
            .map(|e| *e.key())
            .collect();
        for id in dead {
            if let Some(addr) = self.addrs.get(&id).cloned() {
                tracing::warn!(broker = id, "connection actor died; restarting it");
                self.inner
                    .stats
                    .actor_restarts
                    .fetch_add(1, Ordering::Relaxed);
                self.start_broker(id, addr);
            }
        }
    }

    /// Fails batches whose delivery timeout passed while they waited in a
    /// queue (no leader, broker down). In-flight batches are handled by
    /// their connection when the response or the request timeout comes.
    fn expire_batches(&mut self) {
        let now = Instant::now();
        let snapshot = self.inner.metadata.load();
        let mut leaderless = false;
        for q in self.inner.acc.all_queues() {
            let mut expired = Vec::new();
            {
                let mut qi = lock(&q.inner);
                // Records waiting for a leader we have no connection for (a
                // broker that left and came back, a leader not yet elected):
                // ask for fresh metadata rather than wait for its max age.
                if qi.open.is_some() || !qi.ready.is_empty() {
                    let leader = snapshot
                        .topics
                        .get(q.topic.as_str())
                        .and_then(|t| t.leader(q.partition));
                    leaderless |= leader.is_none_or(|l| !self.inner.brokers.contains_key(&l));
                }
                while qi.ready.front().is_some_and(|b| b.deadline <= now) {
                    expired.push(Ok(qi.ready.pop_front().unwrap()));
                }
                if qi
                    .open
                    .as_ref()
                    .is_some_and(|o| o.created + self.inner.config.delivery_timeout <= now)
                {
                    let open = qi.open.take().unwrap();
                    expired.push(self.inner.acc.close(open, &q));
                }
            }
            for b in expired {
                let partition = b.as_ref().map_or_else(|f| f.partition, |b| b.partition);
                let leader = snapshot
                    .topics
                    .get(q.topic.as_str())
                    .and_then(|t| t.leader(partition));
                let timeout_ms = self.inner.config.delivery_timeout.as_millis();
                fail_unsent(
                    &self.inner.acc,
                    b,
                    ErrorKind::Timeout,
                    |attempts| {
                        format!(
                            "not acknowledged within delivery.timeout.ms ({timeout_ms} ms) after {attempts} attempt(s); leader: {}",
                            leader.map_or("none".to_string(), |l| l.to_string())
                        )
                    },
                    &self.inner.stats,
                );
            }
        }
        if leaderless {
            if let Some(p) = self.inner.partitioner_addr.get() {
                p.do_send(RefreshMetadata);
            }
        }
    }
}

impl Actor for ProducerSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(Duration::from_millis(100), |act, ctx| {
            act.drive_idempotence(ctx);
            act.restart_dead_brokers();
            act.expire_batches();
            // Batches whose leader appeared or whose retry backoff ended.
            act.inner.wake_all();
        });
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.inner.stopped_flag.store(true, Ordering::Release);
        self.inner.stopped.notify_waiters();
        self.inner.acc.incomplete_changed.notify_waiters();
        if self.owns_system {
            System::current().stop();
        }
    }
}

impl Handler<BrokersChanged> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: BrokersChanged, _: &mut Context<Self>) {
        if self.inner.closed.load(Ordering::Acquire)
            && self.inner.stopped_flag.load(Ordering::Acquire)
        {
            return;
        }
        for (id, addr) in &msg.brokers {
            if self.addrs.get(id) != Some(addr) {
                tracing::info!(broker = id, %addr, "broker connection added");
                self.start_broker(*id, addr.clone());
            }
        }
        // Retire brokers that left, and bootstrap connections once real
        // ones exist.
        let gone: Vec<i32> = self
            .addrs
            .keys()
            .copied()
            .filter(|id| !msg.brokers.contains_key(id) && (*id >= 0 || !msg.brokers.is_empty()))
            .collect();
        for id in gone {
            self.addrs.remove(&id);
            if let Some((_, a)) = self.inner.brokers.remove(&id) {
                tracing::info!(broker = id, "broker connection retired");
                a.do_send(Retire);
            }
        }
    }
}

impl Handler<Produce> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: Produce, ctx: &mut Context<Self>) {
        let inner = self.inner.clone();
        let reply_to = msg.reply_to.clone();
        let fut = async move {
            if let Err(e) = inner
                .enqueue(msg.record, Some(ReplyTo::Actor(msg.reply_to)), true)
                .await
            {
                let message = e.to_string();
                let kind = match e {
                    ProduceError::Closed(_) => ErrorKind::Cancelled,
                    _ => ErrorKind::Timeout,
                };
                reply_to.do_send(DeliveryReport::Failed(DeliveryError {
                    kind,
                    message,
                    partition: None,
                    attempts: 0,
                    record: e.into_record(),
                }));
            }
        };
        // A detached task, not `ctx.spawn`: a future owned by the actor
        // would be dropped (with its record and reply_to) if the actor
        // stopped while it waits for metadata or memory.
        let _ = ctx;
        actix::spawn(fut);
    }
}

impl Handler<Shutdown> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, msg: Shutdown, ctx: &mut Context<Self>) {
        self.inner.closed.store(true, Ordering::Release);
        let brokers: Vec<_> = self
            .inner
            .brokers
            .iter()
            .map(|e| e.value().clone())
            .collect();
        self.inner.brokers.clear();
        if msg.cancel {
            cancel_queued(&self.inner);
            for b in &brokers {
                b.do_send(CancelInFlight);
            }
        } else {
            for b in &brokers {
                b.do_send(Retire);
            }
        }
        if let Some(p) = self.inner.partitioner_addr.get() {
            p.do_send(StopPartitioner);
        }
        // Give the connection actors a moment to report what they hold.
        ctx.run_later(Duration::from_millis(50), |act, ctx| {
            cancel_queued(&act.inner);
            act.inner.wake_subscriptions();
            ctx.stop();
        });
    }
}

impl Handler<EnsureProducerId> for ProducerSupervisor {
    type Result = ();
    fn handle(&mut self, _: EnsureProducerId, ctx: &mut Context<Self>) {
        self.drive_idempotence(ctx);
    }
}
