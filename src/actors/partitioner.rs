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
use std::time::Duration;

use crate::clock::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::actors::addresses::Addresses;
use crate::actors::msgs::*;
use crate::config::MetadataRecovery;
use crate::engine::Engine;
use crate::kafka_error::{BrokerError, ResponseError};
use crate::metadata::MetadataSnapshot;
use crate::partitioner::PartitionLoad;
use crate::record::Topic;
use crate::report::ErrorKind;

type Waiter = (Instant, oneshot::Sender<Result<(), (ErrorKind, String)>>);

/// The partitioner actor: the metadata cache and the topic waits (see the
/// module docs for why it is named so).
pub(crate) struct PartitionerActor {
    engine: Arc<Engine>,
    addresses: Arc<Addresses>,
    /// The supervisor, told of every change in the broker set.
    brokers_changed: Recipient<BrokersChanged>,
    /// The supervisor, asked to connect to `bootstrap.servers` again.
    rebootstrap: Recipient<Rebootstrap>,
    /// The last metadata answer (or this actor's start).
    last_answer: Instant,
    /// Rebootstrap asked for and no answer since: metadata requests go
    /// to the bootstrap connections first.
    rebootstrapping: bool,
    topics: HashSet<Topic>,
    waiters: HashMap<Topic, Vec<Waiter>>,
    /// A check of the waiters' deadlines is due (`arm_expiry`): armed
    /// while some wait, so an idle producer's actor has no timer here.
    expiry_armed: bool,
    /// Rouses the supervisor when this actor is gone.
    _alarm: crate::actors::msgs::Alarm,
    fetching: bool,
    again: bool,
    /// A topic first waited for while a request was under way, which that
    /// request did not ask about: the next request goes as soon as it is
    /// answered, not `retry.backoff.ms` later (as the Java client's
    /// `requestUpdateForNewTopics` lets a new topic's update go at once).
    new_topic: bool,
    failures: u32,
    /// Why each broker (by id; bootstrap entries negative) failed the
    /// metadata requests since the last answer: a topic wait that expires
    /// meanwhile names these, not a missing topic.
    fetch_errors: HashMap<i32, String>,
    /// The last topic id seen for each topic: a new one means the topic
    /// was deleted and re-created.
    topic_ids: HashMap<Topic, u128>,
    /// Re-created topics with batches left in partitions that no longer
    /// exist: (the new id, the new partition count). Failed on every
    /// metadata answer while any of them is in flight.
    vanished: HashMap<Topic, (u128, i32)>,
    /// A connection's TLS or authentication failure since the last
    /// metadata answer: topic waits fail with it at once.
    refused: Option<(ErrorKind, String)>,
    /// Per topic asked about: the records appended to its queues when the
    /// idle check last saw that count change, and when (`forget_idle`).
    last_active: HashMap<Topic, (u64, Instant)>,
    /// KIP-794: a weighing is due (`WeighPartitions`), at most one a
    /// `WEIGH_PERIOD`.
    weighing: bool,
    /// KIP-794: when each topic's keyless records last moved, for the
    /// topics weighed every `WEIGH_PERIOD` (those that moved within
    /// `WEIGH_WHILE`).
    moved_at: HashMap<Topic, Instant>,
}

/// KIP-794: how often the partitioner actor weighs the partitions of
/// topics whose keyless records move (the Java client weighs at every
/// pass of its sender thread, about every `linger.ms`), so that a move
/// draws with weights at most this old.
const WEIGH_PERIOD: Duration = Duration::from_millis(10);

/// KIP-794: a topic is weighed for this long after its last move; after
/// that, the next move asks again (`WeighPartitions`).
const WEIGH_WHILE: Duration = Duration::from_secs(1);

impl PartitionerActor {
    pub(crate) fn new(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        brokers_changed: Recipient<BrokersChanged>,
        rebootstrap: Recipient<Rebootstrap>,
        alarm: crate::actors::msgs::Alarm,
    ) -> Self {
        PartitionerActor {
            _alarm: alarm,
            engine,
            addresses,
            brokers_changed,
            rebootstrap,
            last_answer: Instant::now(),
            rebootstrapping: false,
            topics: HashSet::new(),
            waiters: HashMap::new(),
            expiry_armed: false,
            fetching: false,
            again: false,
            new_topic: false,
            failures: 0,
            fetch_errors: HashMap::new(),
            topic_ids: HashMap::new(),
            vanished: HashMap::new(),
            refused: None,
            last_active: HashMap::new(),
            weighing: false,
            moved_at: HashMap::new(),
        }
    }

    /// KIP-794: publishes new weights for each topic whose sticky
    /// partition moved within `WEIGH_WHILE`: per partition with a leader,
    /// its queue's length (batches not yet sent); with
    /// `partitioner.availability.timeout.ms`, the partitions of a broker
    /// with a batch that has waited `linger.ms` and that long are left
    /// out. The engine's next moves draw with them
    /// (`StickyPartitioner::on_new_batch`). Again in `WEIGH_PERIOD` while
    /// such a topic remains, so a move finds weights at most that old.
    fn weigh(&mut self, ctx: &mut Context<Self>) {
        self.weighing = false;
        self.engine.weights_begun();
        let config = self.engine.config();
        let snapshot = self.engine.metadata().load();
        let now = Instant::now();
        // Topics gone from the metadata, or whose records last moved
        // WEIGH_WHILE ago, are weighed no more.
        self.moved_at.retain(|topic, at| {
            snapshot.topics.contains_key(topic) && now.duration_since(*at) < WEIGH_WHILE
        });
        for (topic, tm) in &snapshot.topics {
            if tm.sticky.0.take_moved() {
                self.moved_at.insert(*topic, now);
            } else if !self.moved_at.contains_key(topic) {
                continue;
            }
            let lengths = self.engine.acc().queue_lengths(topic, &tm.available);
            let stuck: HashSet<i32> = match config.partitioner_availability_timeout {
                Some(timeout) => lengths
                    .iter()
                    .filter(|l| {
                        l.oldest.is_some_and(|o| {
                            now.saturating_duration_since(o) > config.linger + timeout
                        })
                    })
                    .filter_map(|l| tm.leader(l.partition))
                    .collect(),
                None => HashSet::new(),
            };
            let counted: Vec<(i32, u32)> = lengths
                .iter()
                .filter(|l| tm.leader(l.partition).is_none_or(|b| !stuck.contains(&b)))
                .map(|l| (l.partition, l.batches))
                .collect();
            if !stuck.is_empty() {
                tracing::debug!(
                    topic = topic.as_str(),
                    brokers = ?stuck,
                    "partitions of brokers that took no batch for partitioner.availability.timeout.ms are left out"
                );
            }
            tm.sticky
                .0
                .set_load(PartitionLoad::from_lengths(&counted, tm.partition_count));
        }
        if !self.moved_at.is_empty() {
            self.weighing = true;
            ctx.run_later(WEIGH_PERIOD, |act, ctx| act.weigh(ctx));
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
        // Brokers the last answer listed first; then any known broker (one
        // left out of the answers is kept a while, `BrokersChanged`); then
        // the bootstrap connections (first while rebootstrapping).
        let listed = &self.engine.metadata().load().brokers;
        let rebootstrapping = self.rebootstrapping;
        let rank = |id: i32| match id {
            _ if id < 0 && rebootstrapping => 0,
            _ if id < 0 => 2,
            _ if listed.contains_key(&id) => 0,
            _ => 1,
        };
        let best = candidates.iter().map(|(id, _)| rank(*id)).min();
        let pool: Vec<_> = candidates
            .into_iter()
            .filter(|(id, _)| Some(rank(*id)) == best)
            .collect();
        let (broker, addr) = pool[(self.failures as usize) % pool.len()].clone();
        self.forget_idle();
        self.fetching = true;
        self.again = false;
        self.new_topic = false;
        let topics: Vec<Topic> = self.topics.iter().cloned().collect();
        self.engine
            .stats()
            .metadata_requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let req = addr.send(FetchMetadata { topics });
        ctx.spawn(req.into_actor(self).map(move |res, act, ctx| {
            act.fetching = false;
            let res = res.unwrap_or_else(|_| Err("broker actor unavailable".to_string()));
            // Ask again as soon as this is answered, not after a backoff.
            let mut at_once = act.new_topic;
            match res {
                Ok(resp) => {
                    act.failures = 0;
                    act.fetch_errors.clear();
                    act.last_answer = Instant::now();
                    act.rebootstrapping = false;
                    act.refused = None;
                    let previous = act.engine.metadata().load();
                    let mut snapshot = MetadataSnapshot::from_response(&resp, &previous);
                    // Only what was asked for (a broker may list every
                    // topic it has), so what the producer holds is bounded
                    // by what it writes to (`forget_idle`).
                    snapshot.topics.retain(|t, _| act.topics.contains(t));
                    snapshot.missing.retain(|t, _| act.topics.contains(t));
                    tracing::debug!(from = broker, brokers = ?snapshot.brokers, topics = ?snapshot.topics, missing = ?snapshot.missing, "metadata");
                    let brokers = snapshot.brokers.clone();
                    act.track_recreated(&snapshot);
                    act.engine.metadata().store(Arc::new(snapshot));
                    act.fail_vanished();
                    act.brokers_changed.do_send(BrokersChanged { brokers });
                    act.engine.wake_all();
                    act.answer_waiters();
                }
                // The connection retired under the request (a bootstrap
                // connection once the brokers are known): ask again now,
                // on a live one; no failure of the broker's.
                Err(error) if error == crate::actors::broker::RETIRED => {
                    tracing::debug!(from = broker, "metadata request's connection retired; asking again");
                    at_once = true;
                }
                Err(error) => {
                    tracing::debug!(from = broker, %error, "metadata fetch failed");
                    act.failures = act.failures.saturating_add(1);
                    act.fetch_errors.insert(broker, error);
                    act.again = true;
                    at_once = false;
                    act.maybe_rebootstrap();
                }
            }
            if at_once {
                act.fetch(ctx);
            } else if act.again || act.has_unresolved() {
                let delay = act.engine.config().retry_backoff.max(Duration::from_millis(10));
                ctx.run_later(delay, |act, ctx| act.fetch(ctx));
            }
        }));
    }

    /// `metadata.recovery.strategy=rebootstrap` (the default, as the Java
    /// client 4.x): when every broker the producer knows has failed a
    /// metadata request since the last answer (KIP-899: a cluster replaced
    /// behind the same names, a rollout that moved every pod), or no
    /// answer has come for `metadata.recovery.rebootstrap.trigger.ms`
    /// (KIP-1102), the supervisor connects to `bootstrap.servers` again
    /// and the next requests go there. Once per episode: an answer ends
    /// it.
    fn maybe_rebootstrap(&mut self) {
        let cfg = self.engine.config();
        if cfg.metadata_recovery != MetadataRecovery::Rebootstrap || self.rebootstrapping {
            return;
        }
        let known = self.addresses.known_brokers();
        let all_failed =
            !known.is_empty() && known.iter().all(|id| self.fetch_errors.contains_key(id));
        let silent = !known.is_empty() && self.last_answer.elapsed() >= cfg.rebootstrap_trigger;
        if !all_failed && !silent {
            return;
        }
        tracing::debug!(
            known = ?known,
            silent_for = ?self.last_answer.elapsed(),
            errors = ?self.fetch_errors,
            "rebootstrap"
        );
        self.rebootstrapping = true;
        self.rebootstrap.do_send(Rebootstrap);
    }

    /// `metadata.max.idle.ms`, as the Java producer's `ProducerMetadata`:
    /// a topic whose queues took no record for that long, hold no batch
    /// and have no one waiting for the topic is no longer asked about, and
    /// leaves the published snapshot (the next record to it waits for its
    /// metadata, as a new topic's does). Activity is read from the queues'
    /// append counts at each fetch, so the produce path does nothing for
    /// it. A topic with a batch in its queues is always asked about, even
    /// one forgotten a moment before that batch was appended.
    ///
    /// Its queues are forgotten too (`Accumulator::forget`), and its
    /// metric handles; an idempotent producer keeps the partitions'
    /// sequences (the broker keeps its state far longer), 24 bytes each,
    /// until the epoch changes. The interned name stays (`Topic`).
    fn forget_idle(&mut self) {
        let idle = self.engine.config().metadata_max_idle;
        let now = Instant::now();
        let activity = self.engine.acc().topic_activity();
        for (topic, (_, busy)) in &activity {
            if *busy {
                self.topics.insert(*topic);
            }
        }
        // The snapshot holds only topics asked about, but a restarted
        // partitioner starts from the last one published.
        let snapshot = self.engine.metadata().load();
        let held = snapshot.topics.keys().chain(snapshot.missing.keys());
        let candidates: HashSet<Topic> = self.topics.iter().chain(held).copied().collect();
        let mut forgotten = Vec::new();
        for topic in candidates {
            let (appended, busy) = activity.get(&topic).copied().unwrap_or((0, false));
            let seen = self.last_active.entry(topic).or_insert((appended, now));
            if busy || self.waiters.contains_key(&topic) || seen.0 != appended {
                *seen = (appended, now);
            } else if now.duration_since(seen.1) >= idle {
                forgotten.push(topic);
            }
        }
        // The queues go too, unless a batch arrived since the look above
        // (then the topic stays, and is asked about).
        let current = self.engine.idem().and_then(|i| i.ready());
        forgotten.retain(|topic| self.engine.acc().forget(topic, current));
        if forgotten.is_empty() {
            return;
        }
        for topic in &forgotten {
            self.last_active.remove(topic);
            self.topics.remove(topic);
            self.topic_ids.remove(topic);
        }
        tracing::debug!(
            topics = forgotten.len(),
            "idle topics forgotten (metadata.max.idle.ms)"
        );
        let mut snapshot = MetadataSnapshot::clone(&snapshot);
        for topic in &forgotten {
            snapshot.topics.remove(topic);
            snapshot.missing.remove(topic);
        }
        self.engine.metadata().store(Arc::new(snapshot));
    }

    /// Notes topics whose id changed (deleted and re-created).
    fn track_recreated(&mut self, snapshot: &MetadataSnapshot) {
        for (topic, t) in &snapshot.topics {
            let before = self.topic_ids.insert(*topic, t.topic_id);
            let Some(before) = before.filter(|b| *b != 0 && t.topic_id != 0 && *b != t.topic_id)
            else {
                continue;
            };
            tracing::warn!(topic = %topic, before = %format!("{before:032x}"), now = %format!("{:032x}", t.topic_id), partitions = t.partition_count, "topic re-created");
            self.engine.topic_recreated(topic.as_str());
            self.vanished
                .insert(*topic, (t.topic_id, t.partition_count));
        }
    }

    /// Fails batches left in partitions of re-created topics that no
    /// longer exist; forgets a topic once none of them is in flight (or
    /// it changed again).
    fn fail_vanished(&mut self) {
        let snapshot = self.engine.metadata().load();
        let engine = &self.engine;
        self.vanished.retain(|topic, (id, count)| {
            snapshot
                .topics
                .get(topic)
                .is_some_and(|t| t.topic_id == *id)
                && engine.fail_vanished(topic.as_str(), *count)
        });
    }

    fn has_unresolved(&self) -> bool {
        !self.waiters.is_empty()
    }

    fn answer_waiters(&mut self) {
        let snapshot = self.engine.metadata().load();
        self.waiters.retain(|topic, waiters| {
            let ready = snapshot
                .topics
                .get(topic)
                .is_some_and(|t| t.partition_count > 0 && !t.available.is_empty());
            // Not allowed to see the topic: no wait can change that (the
            // Java client fails such a send at once too).
            let answer = if ready {
                Some(Ok(()))
            } else {
                forbidden(&snapshot, *topic).map(Err)
            };
            let Some(answer) = answer else {
                return true;
            };
            for (_, w) in waiters.drain(..) {
                let _ = w.send(answer.clone());
            }
            false
        });
    }

    /// Checks the waiters' deadlines every 50 ms while any wait (a
    /// producer with no topic wait, the usual case, has no timer here:
    /// many idle producers on one thread cost no wake-ups for it).
    fn arm_expiry(&mut self, ctx: &mut Context<Self>) {
        if self.expiry_armed {
            return;
        }
        self.expiry_armed = true;
        ctx.run_later(Duration::from_millis(50), |act, ctx| {
            act.expiry_armed = false;
            act.expire_waiters();
            if !act.waiters.is_empty() {
                act.arm_expiry(ctx);
            }
        });
    }

    fn expire_waiters(&mut self) {
        let now = Instant::now();
        if !self
            .waiters
            .values()
            .flatten()
            .any(|(deadline, _)| *deadline <= now)
        {
            return;
        }
        let snapshot = self.engine.metadata().load();
        let unreachable = self.unreachable();
        self.waiters.retain(|topic, waiters| {
            let mut kept = Vec::with_capacity(waiters.len());
            for (deadline, w) in waiters.drain(..) {
                if deadline > now {
                    kept.push((deadline, w));
                    continue;
                }
                let why = match (&unreachable, snapshot.missing.get(topic)) {
                    // No answer at all: that is the cause, and the topic
                    // may well exist (retriable: Timeout).
                    (Some(why), _) => (ErrorKind::Timeout, why.clone()),
                    (None, Some(code)) => (
                        ErrorKind::UnknownTopic,
                        format!(
                            "the cluster does not have it (error {code}{})",
                            if *code == 3 {
                                ", UNKNOWN_TOPIC_OR_PARTITION"
                            } else {
                                ""
                            }
                        ),
                    ),
                    (None, None) if snapshot.fetched_at.is_none() => {
                        (ErrorKind::Timeout, "no metadata answer yet".to_string())
                    }
                    (None, None) => (
                        ErrorKind::Timeout,
                        "it has no partition with a leader".to_string(),
                    ),
                };
                let _ = w.send(Err(why));
            }
            *waiters = kept;
            !waiters.is_empty()
        });
    }

    /// Why no broker answers, when the metadata requests since the last
    /// answer all failed: each broker tried and its error.
    fn unreachable(&self) -> Option<String> {
        if self.fetch_errors.is_empty() {
            return None;
        }
        let mut errors: Vec<_> = self.fetch_errors.iter().collect();
        errors.sort();
        let list: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        Some(format!("no broker answered ({})", list.join("; ")))
    }
}

/// The answer for a topic the metadata refuses for good, if so: one we may
/// not describe (TOPIC_AUTHORIZATION_FAILED), or a name the cluster does
/// not allow (INVALID_TOPIC_EXCEPTION: a character outside
/// `[a-zA-Z0-9._-]`, more than 249 of them, `.` or `..`). The Java client
/// fails a send to either at once; waiting `max.block.ms` changes nothing.
fn forbidden(snapshot: &MetadataSnapshot, topic: Topic) -> Option<(ErrorKind, String)> {
    let code = snapshot.missing.get(&topic).copied()?;
    let (error, why) = match ResponseError::try_from_code(code)? {
        e @ ResponseError::TopicAuthorizationFailed => (
            e,
            "not authorized to describe the topic (TOPIC_AUTHORIZATION_FAILED)",
        ),
        e @ ResponseError::InvalidTopicException => (
            e,
            "the cluster does not allow this topic name (INVALID_TOPIC_EXCEPTION)",
        ),
        _ => return None,
    };
    Some((
        ErrorKind::Broker(BrokerError::from_response(error)),
        why.to_string(),
    ))
}

impl Actor for PartitionerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // A restarted partitioner: the topics of interest are those with
        // queues and those in the last published metadata.
        self.topics
            .extend(self.engine.acc().all_queues().iter().map(|q| q.topic));
        self.topics
            .extend(self.engine.metadata().load().topics.keys().copied());
        self.fetch(ctx);
        // A weighing asked of a predecessor that died is asked again by
        // the next move.
        self.engine.weights_begun();
        let age = self.engine.config().metadata_max_age;
        ctx.run_interval(age, |act, ctx| act.fetch(ctx));
    }
}

impl Handler<WeighPartitions> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: WeighPartitions, ctx: &mut Context<Self>) {
        if !self.weighing {
            self.weighing = true;
            ctx.run_later(WEIGH_PERIOD, |act, ctx| act.weigh(ctx));
        }
    }
}

impl Handler<EnsureTopic> for PartitionerActor {
    type Result = ResponseFuture<Option<Result<(), (ErrorKind, String)>>>;

    fn handle(&mut self, msg: EnsureTopic, ctx: &mut Context<Self>) -> Self::Result {
        let ready = self
            .engine
            .metadata()
            .load()
            .topics
            .get(&msg.topic)
            .is_some_and(|t| t.partition_count > 0 && !t.available.is_empty());
        if ready {
            return Box::pin(async { Some(Ok(())) });
        }
        if let Some(refused) = self.refused.clone() {
            self.topics.insert(msg.topic);
            self.fetch(ctx);
            return Box::pin(async move { Some(Err(refused)) });
        }
        // Known to be forbidden: asked again below (permissions change),
        // answered at once.
        if let Some(refused) = forbidden(&self.engine.metadata().load(), msg.topic) {
            self.fetch(ctx);
            return Box::pin(async move { Some(Err(refused)) });
        }
        let (tx, rx) = oneshot::channel();
        let max_block = self.engine.config().max_block;
        self.waiters
            .entry(msg.topic)
            .or_default()
            .push((Instant::now() + max_block, tx));
        self.arm_expiry(ctx);
        if self.topics.insert(msg.topic) && self.fetching {
            self.new_topic = true;
        }
        self.fetch(ctx);
        // Dropped unanswered: this actor died (a stopping one answers).
        Box::pin(async move { rx.await.ok() })
    }
}

impl Handler<RefreshMetadata> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: RefreshMetadata, ctx: &mut Context<Self>) {
        self.fetch(ctx);
    }
}

/// Produce answers named partitions' new leaders (KIP-951). Hints newer
/// than what the metadata holds move their partitions in a new snapshot at
/// once (`MetadataSnapshot::with_leader_hints`), so the connection actors'
/// queues change hands exactly as after a Metadata answer; a broker known
/// only from the answer's endpoints gets a connection actor
/// (`BrokersChanged`). A moved partition's batches waiting out a retry
/// backoff go at once, to the new leader, as do those of a partition the
/// metadata had moved away from the refusing broker already (the Java
/// client skips the backoff when the leader changed since a batch's last
/// attempt). Metadata
/// is asked for only when some hint could not be used.
impl Handler<LeaderHints> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, msg: LeaderHints, ctx: &mut Context<Self>) {
        let previous = self.engine.metadata().load_full();
        let done = previous.with_leader_hints(&msg.hints, &msg.endpoints);
        if let Some(snapshot) = done.snapshot {
            tracing::debug!(moved = ?done.moved, "leaders moved by produce answers");
            let brokers = (snapshot.brokers != previous.brokers).then(|| snapshot.brokers.clone());
            self.engine.metadata().store(Arc::new(snapshot));
            if let Some(brokers) = brokers {
                self.brokers_changed.do_send(BrokersChanged { brokers });
            }
            self.engine.stats().leader_hints.fetch_add(
                done.moved.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        for (topic, partition) in &done.retry_now {
            self.engine.acc().retry_now(topic, *partition);
        }
        if !done.retry_now.is_empty() {
            self.engine.wake_all();
        }
        if done.refresh {
            self.fetch(ctx);
        }
    }
}

/// A connection failed TLS or authentication: topic waits fail with it now,
/// and new ones at once, until a metadata request succeeds.
impl Handler<SecurityFailed> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, msg: SecurityFailed, _: &mut Context<Self>) {
        let refused = (msg.kind, msg.message);
        for (_, waiters) in self.waiters.drain() {
            for (_, w) in waiters {
                let _ = w.send(Err(refused.clone()));
            }
        }
        self.refused = Some(refused);
    }
}

/// Panics inside a handler (tests of its supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in the partitioner actor");
    }
}

impl Handler<StopActor> for PartitionerActor {
    type Result = ();
    fn handle(&mut self, _: StopActor, ctx: &mut Context<Self>) {
        for (_, waiters) in self.waiters.drain() {
            for (_, w) in waiters {
                let _ = w.send(Err((
                    ErrorKind::Cancelled,
                    "producer closed while waiting for the topic".to_string(),
                )));
            }
        }
        ctx.stop();
    }
}
