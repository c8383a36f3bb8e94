//! `PartitionerActor`: the design's partitioner actor, which is in fact
//! the metadata cache.
//!
//! It fetches Metadata through any connected broker actor, publishes each
//! result as an immutable snapshot that producer handles read without locks,
//! tells the supervisor which brokers exist, and answers `EnsureTopic`
//! waits (bounded by `max.block.ms`). Partition *choice* does not happen
//! here: it runs in the producing thread (`Engine::place`, with the
//! `partitioner` strategy) against the published snapshot, so no record
//! waits for this actor once its topic is known.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::actors::addresses::Addresses;
use crate::actors::msgs::*;
use crate::engine::Engine;
use crate::metadata::MetadataSnapshot;
use crate::record::Topic;
use crate::report::ErrorKind;

type Waiter = (Instant, oneshot::Sender<Result<(), ErrorKind>>);

/// The partitioner actor: the metadata cache and the topic waits (see the
/// module docs for why it is named so).
pub(crate) struct PartitionerActor {
    engine: Arc<Engine>,
    addresses: Arc<Addresses>,
    /// The supervisor, told of every change in the broker set.
    brokers_changed: Recipient<BrokersChanged>,
    topics: HashSet<Topic>,
    waiters: HashMap<Topic, Vec<Waiter>>,
    fetching: bool,
    again: bool,
    failures: u32,
}

impl PartitionerActor {
    pub(crate) fn new(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        brokers_changed: Recipient<BrokersChanged>,
    ) -> Self {
        PartitionerActor {
            engine,
            addresses,
            brokers_changed,
            topics: HashSet::new(),
            waiters: HashMap::new(),
            fetching: false,
            again: false,
            failures: 0,
        }
    }

    fn fetch(&mut self, ctx: &mut Context<Self>) {
        if self.fetching {
            self.again = true;
            return;
        }
        // Prefer a known broker; fall back to bootstrap connections.
        let mut candidates: Vec<_> = self
            .addresses
            .connections
            .iter()
            .map(|e| (*e.key(), e.value().clone()))
            .collect();
        if candidates.is_empty() {
            return;
        }
        candidates.sort_by_key(|(id, _)| (*id < 0, *id));
        let known: Vec<_> = candidates
            .iter()
            .filter(|(id, _)| *id >= 0)
            .cloned()
            .collect();
        let pool = if known.is_empty() {
            &candidates
        } else {
            &known
        };
        let (broker, addr) = pool[(self.failures as usize) % pool.len()].clone();
        self.fetching = true;
        self.again = false;
        let topics: Vec<Topic> = self.topics.iter().cloned().collect();
        let req = addr.send(FetchMetadata { topics });
        ctx.spawn(req.into_actor(self).map(move |res, act, ctx| {
            act.fetching = false;
            let res = res.unwrap_or_else(|_| Err("broker actor unavailable".to_string()));
            match res {
                Ok(resp) => {
                    act.failures = 0;
                    let previous = act.engine.metadata.load();
                    let snapshot = MetadataSnapshot::from_response(&resp, &previous);
                    tracing::debug!(from = broker, brokers = ?snapshot.brokers, topics = ?snapshot.topics, missing = ?snapshot.missing, "metadata");
                    let brokers = snapshot.brokers.clone();
                    act.engine.metadata.store(Arc::new(snapshot));
                    act.brokers_changed.do_send(BrokersChanged { brokers });
                    act.engine.wake_all();
                    act.answer_waiters();
                }
                Err(error) => {
                    tracing::debug!(from = broker, %error, "metadata fetch failed");
                    act.failures = act.failures.saturating_add(1);
                    act.again = true;
                }
            }
            if act.again || act.has_unresolved() {
                let delay = act.engine.config.retry_backoff.max(Duration::from_millis(10));
                ctx.run_later(delay, |act, ctx| act.fetch(ctx));
            }
        }));
    }

    fn has_unresolved(&self) -> bool {
        !self.waiters.is_empty()
    }

    fn answer_waiters(&mut self) {
        let snapshot = self.engine.metadata.load();
        self.waiters.retain(|topic, waiters| {
            let ready = snapshot
                .topics
                .get(topic.as_str())
                .is_some_and(|t| t.partition_count > 0 && !t.available.is_empty());
            if ready {
                for (_, w) in waiters.drain(..) {
                    let _ = w.send(Ok(()));
                }
            }
            !ready
        });
    }

    fn expire_waiters(&mut self) {
        let now = Instant::now();
        self.waiters.retain(|_, waiters| {
            waiters.retain_mut(|(deadline, _)| *deadline > now);
            // Dropping the expired senders is not enough: answer them.
            !waiters.is_empty()
        });
    }
}

impl Actor for PartitionerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.fetch(ctx);
        let age = self.engine.config.metadata_max_age;
        ctx.run_interval(age, |act, ctx| act.fetch(ctx));
        ctx.run_interval(Duration::from_millis(50), |act, _| act.expire_waiters());
    }
}

impl Handler<EnsureTopic> for PartitionerActor {
    type Result = ResponseFuture<Result<(), ErrorKind>>;

    fn handle(&mut self, msg: EnsureTopic, ctx: &mut Context<Self>) -> Self::Result {
        let ready = self
            .engine
            .metadata
            .load()
            .topics
            .get(msg.topic.as_str())
            .is_some_and(|t| t.partition_count > 0 && !t.available.is_empty());
        if ready {
            return Box::pin(async { Ok(()) });
        }
        let (tx, rx) = oneshot::channel();
        let max_block = self.engine.config.max_block;
        self.waiters
            .entry(msg.topic)
            .or_default()
            .push((Instant::now() + max_block, tx));
        self.topics.insert(msg.topic);
        self.fetch(ctx);
        Box::pin(async move {
            match rx.await {
                Ok(r) => r,
                // Expired (or the actor stopped) before the topic appeared.
                Err(_) => Err(ErrorKind::UnknownTopic),
            }
        })
    }
}

impl Handler<RefreshMetadata> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: RefreshMetadata, ctx: &mut Context<Self>) {
        self.fetch(ctx);
    }
}

impl Handler<StopPartitioner> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: StopPartitioner, ctx: &mut Context<Self>) {
        for (_, waiters) in self.waiters.drain() {
            for (_, w) in waiters {
                let _ = w.send(Err(ErrorKind::Cancelled));
            }
        }
        ctx.stop();
    }
}
