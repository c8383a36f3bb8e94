//! The addresses of the actor tree that live longer than any one actor:
//! one connection actor per broker, the state each broker's connection
//! keeps outside its actor, and the partitioner actor's topic waits.
//!
//! This is what the engine reaches the actors through (it implements
//! `engine::ActorTree`), what producer handles use to list connections,
//! and what the supervisor updates as brokers come and go.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use actix::{Addr, Recipient, WeakRecipient};
use dashmap::DashMap;
use futures::future::BoxFuture;
use tokio::sync::Notify;

use crate::actors::broker::state::BrokerState;
use crate::actors::broker::BrokerConnection;
use crate::actors::msgs::{
    Alarm, EndTransaction, EnsureTopic, Rouse, SendOffsets, Wake, WeighPartitions,
};
use crate::batching::queue::PartitionQueue;
use crate::engine::ActorTree;
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::sync::lock;

/// Where topic waits go: the current partitioner actor, replaced when the
/// supervisor restarts a dead one. A wait whose partitioner died waits for
/// its successor and asks again.
#[derive(Debug, Default)]
pub(crate) struct TopicWaits {
    current: Mutex<Option<Recipient<EnsureTopic>>>,
    /// The same actor, for `WeighPartitions`.
    weigh: Mutex<Option<Recipient<WeighPartitions>>>,
    changed: Notify,
    closed: AtomicBool,
}

impl TopicWaits {
    /// The partitioner (a new one, after a restart) takes the waits, and
    /// the requests to weigh partitions.
    pub fn set(&self, to: Recipient<EnsureTopic>, weigh: Recipient<WeighPartitions>) {
        *lock(&self.weigh) = Some(weigh);
        *lock(&self.current) = Some(to);
        self.changed.notify_waiters();
    }

    /// The producer is stopping: waits end (`None`: closed).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        *lock(&self.weigh) = None;
        *lock(&self.current) = None;
        self.changed.notify_waiters();
    }

    fn get(&self) -> Option<Recipient<EnsureTopic>> {
        lock(&self.current).clone()
    }
}

/// The transaction actor's addresses, for the producer handles.
#[derive(Debug, Clone)]
pub(crate) struct TransactionAddrs {
    pub end: Recipient<EndTransaction>,
    pub send_offsets: Recipient<SendOffsets>,
}

/// Addresses shared by the engine, the producer handles and the actors.
#[derive(Debug, Default)]
pub(crate) struct Addresses {
    /// One connection actor per broker id; negative ids are bootstrap
    /// addresses (metadata only, until real ids are known).
    pub connections: DashMap<i32, Addr<BrokerConnection>>,
    /// Per-broker state that outlives connection actors (their in-flight
    /// requests), by broker id.
    pub broker_states: DashMap<i32, Arc<BrokerState>>,
    /// The partitioner actor, for `EnsureTopic` waits; set when it starts
    /// (and again when it is restarted).
    pub topic_waits: Arc<TopicWaits>,
    /// The transaction actor (a transactional producer only); replaced
    /// when the supervisor restarts it.
    transactions: Mutex<Option<TransactionAddrs>>,
    /// The supervisor, to wake its sleeping tick (`ActorTree::rouse`,
    /// `Alarm`). Weak: this outlives it.
    rouse: Mutex<Option<WeakRecipient<Rouse>>>,
}

impl Addresses {
    /// The broker ids with a connection actor, bootstrap addresses left
    /// out, in id order.
    pub fn known_brokers(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .connections
            .iter()
            .map(|e| *e.key())
            .filter(|id| *id >= 0)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The supervisor to rouse; set as it starts.
    pub fn set_rouse(&self, to: WeakRecipient<Rouse>) {
        *lock(&self.rouse) = Some(to);
    }

    /// An alarm for an actor of this tree to hold (`Alarm`).
    pub fn alarm(&self) -> Alarm {
        Alarm(lock(&self.rouse).clone())
    }

    pub fn set_transactions(&self, to: TransactionAddrs) {
        *lock(&self.transactions) = Some(to);
    }

    /// The transaction actor is gone for good (the producer stopped):
    /// handles asking it find none, and stop asking once the supervisor
    /// has stopped.
    pub fn clear_transactions(&self) {
        *lock(&self.transactions) = None;
    }

    /// The current transaction actor, if any.
    pub fn transactions(&self) -> Option<TransactionAddrs> {
        lock(&self.transactions).clone()
    }
}

impl ActorTree for Addresses {
    fn wake(&self, broker: i32) {
        if let Some(b) = self.connections.get(&broker) {
            b.do_send(Wake);
        }
    }

    fn wake_by(&self, broker: i32, due: crate::clock::Mono) {
        if let Some(state) = self.broker_states.get(&broker) {
            let at = state.timer_at.load(std::sync::atomic::Ordering::SeqCst);
            if at != 0 && at <= due.nanos() {
                return;
            }
        }
        self.wake(broker);
    }

    fn list(&self, broker: i32, queue: &Arc<PartitionQueue>) {
        // No state yet: the broker's connection actor is still to start,
        // and its first drain walks every queue it leads.
        if let Some(state) = self.broker_states.get(&broker) {
            lock(&state.opened).push(queue.clone());
        }
    }

    fn rouse(&self) {
        if let Some(r) = lock(&self.rouse).as_ref().and_then(|r| r.upgrade()) {
            r.do_send(Rouse);
        }
    }

    fn wake_all(&self) {
        for b in self.connections.iter() {
            b.value().do_send(Wake);
        }
    }

    fn weigh_partitions(&self) {
        if let Some(p) = lock(&self.topic_waits.weigh).as_ref() {
            p.do_send(WeighPartitions);
        }
    }

    fn request_topic(&self, topic: Topic) -> bool {
        match self.topic_waits.get() {
            Some(p) => {
                p.do_send(EnsureTopic { topic });
                true
            }
            None => false,
        }
    }

    fn ensure_topic(
        &self,
        topic: Topic,
    ) -> BoxFuture<'static, Option<Result<(), (ErrorKind, String)>>> {
        let waits = self.topic_waits.clone();
        Box::pin(async move {
            loop {
                // Before reading the current partitioner: a replacement
                // made after this line wakes the wait below.
                let changed = waits.changed.notified();
                let partitioner = waits.get()?;
                match partitioner.send(EnsureTopic { topic }).await {
                    Ok(Some(answer)) => return Some(answer),
                    // The partitioner died (its successor takes over
                    // within the supervisor's 100 ms check), or the
                    // producer is stopping.
                    Ok(None) | Err(_) => {
                        if waits.closed.load(Ordering::Acquire) {
                            return None;
                        }
                        changed.await;
                    }
                }
            }
        })
    }
}
