//! Per-partition batches, shared by every producer handle and drained by the
//! broker-connection actors.
//!
//! This is the hot path. A produce call finds its partition's queue (by
//! index, from the slots `topic_queues` puts in the topic's metadata entry;
//! a DashMap read the first time), locks it (one uncontended mutex), and
//! appends the record
//! straight into the open batch's wire buffer. Everything else happens per
//! batch: reserving `buffer.memory`, waking the leader's connection actor,
//! compressing, and routing reports.
//!
//! The queues live here, outside any actor, so that a restarted connection
//! actor finds its partitions' batches where it left them (the supervision
//! invariant: state that must survive a restart lives outside the actor).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::{Notify, Semaphore};

use crate::batching::batch::{
    encoded_upper_bound, first_room, Graveyard, OpenBatch, SealFailure, SealedBatch,
};
use crate::batching::queue::{KeptSequence, PartitionQueue, QueueState, TopicQueues};
use crate::batching::reservation::{RecordPool, Reservation, Reserved};
use crate::clock::{Instant, Mono};
use crate::config::INITIAL_RESERVATION;
use crate::delivery::owed::ReplyTo;
use crate::delivery::router::route;
use crate::delivery::settlement::{Outcome, Readback};
use crate::delivery::subscription::SubscriptionShared;
use crate::metric_handles::Metrics;
use crate::protocol::record_batch::{
    increment_sequence, single_record_batch_size, Codec, EncodedBatch, ProducerStamp,
};
use crate::record::{Record, Topic, TopicHasher};
use crate::report::ErrorKind;
use crate::stats::Stats;
use crate::sync::lock;

/// Batch ids are this far apart, so that a batch split into parts gives
/// each part an id of its own between its id and the next batch's: ids
/// order a partition's batches (retries go back by id, `flush` waits by
/// id), and a part must keep its batch's place.
pub(crate) const BATCH_ID_SPACING: u64 = 1 << 16;

/// What an append did, so the caller can wake the leader's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// Added to an open batch.
    ToOpenBatch,
    /// Opened a new batch on a queue that had none open: due when its
    /// linger ends.
    NewBatch,
    /// As `NewBatch`, on a queue no drain list held
    /// (`QueueState::listed`): the caller puts it on its leader's
    /// (`ActorTree::list`).
    NewBatchToList,
    /// Opened a new batch and moved the full one before it to the ready
    /// list: that one can go now. (A queue with an open batch is listed.)
    NewBatchAfterFull,
}

/// A partition's queue as the partitioner actor weighs it
/// (`Accumulator::queue_lengths`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLength {
    pub partition: i32,
    /// Batches not yet sent, the open one included.
    pub batches: u32,
    /// Since when the oldest of them has waited.
    pub oldest: Option<Instant>,
}

/// Whether a record follows its topic's sticky partition, and by which
/// rule that partition moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stick {
    /// Its own partition, or its key's: any batch will do.
    No,
    /// A sticky partitioner of the user's (KIP-480): a full open batch is
    /// refused, for the partitioner to move on (`on_new_batch`).
    Batch,
    /// The built-in sticky partitioner, in the partition's stay with this
    /// number (`StickyState::current`; KIP-794): refused once the record
    /// would take the stay past `batch.size` bytes, at a new batch, or in
    /// the second batch the stay opened (`QueueState::stay_batches`).
    Bytes(u32),
    /// As `Bytes`, after the partition just moved: counted, never refused
    /// (the record has moved once already).
    Moved(u32),
}

/// Why an append did not happen.
#[derive(Debug)]
pub(crate) enum AppendError<'s> {
    /// The sticky partition should move on before this record
    /// ([`Stick`]).
    MoveOn(Option<ReplyTo<'s>>),
    /// No room in `buffer.memory` right now; reserve `needed` bytes and
    /// call again with the permit.
    NeedMemory(Option<ReplyTo<'s>>, usize),
    /// No room under `queue.buffering.max.messages` right now; wait for
    /// room for one record and call again with it.
    NeedRecords(Option<ReplyTo<'s>>),
    /// The producer closed; checked under the partition lock, so nothing is
    /// appended after the final cancellation sweep has passed this queue.
    Closed,
    /// The queue was forgotten (its topic idle, `Accumulator::forget`):
    /// append to the partition's live queue (`Accumulator::queue`).
    Retired(Option<ReplyTo<'s>>),
    /// A transactional producer with no transaction open; checked under
    /// the partition lock, so nothing is appended after `commit` or
    /// `abort` has closed the gate and passed this queue (`barrier`).
    NoTransaction,
}

/// A slot per partition of a topic for its queue (`Accumulator::
/// topic_queues`, `cached_queue`), with the id of the accumulator they
/// belong to. 16 bytes a partition.
#[derive(Debug)]
pub(crate) struct CachedQueues {
    owner: u64,
    queues: Box<[std::sync::OnceLock<Arc<PartitionQueue>>]>,
}

/// All partition queues, and the memory pool.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// Unique in the process: whose `CachedQueues` these are.
    id: u64,
    /// Looked up by `&Topic` (hashed by its interned address), so the hot
    /// path clones neither the topic nor a queue's `Arc`.
    topics: DashMap<Topic, TopicQueues, TopicHasher>,
    closed: Arc<AtomicBool>,
    /// A transactional producer's gate (`Transactions::gate`): records are
    /// taken only while it is open.
    txn_gate: Option<Arc<AtomicBool>>,
    /// Where sealed batches' records are counted (`metric_handles`).
    metrics: Metrics,
    pub pool: Arc<Semaphore>,
    /// `queue.buffering.max.messages` (`batching::reservation`).
    pub records: RecordPool,
    pub batch_size: usize,
    /// `max.request.size`.
    pub max_request_size: usize,
    /// `batch.num.messages`.
    pub batch_records: i32,
    pub compression: Codec,
    pub delivery_timeout: Duration,
    next_batch_id: AtomicU64,
    incomplete: Mutex<BTreeSet<u64>>,
    pub incomplete_changed: Notify,
    /// Sealed batches dropped unsettled, to repair (`Engine::bury_abandoned`).
    pub graveyard: Arc<Graveyard>,
    /// Stamped batches (an idempotent producer's, with sequences) that
    /// failed for good: the broker never acknowledged their sequences, so
    /// each leaves a hole in its partition's. A transactional producer's
    /// abort bumps the epoch when this grew during the transaction
    /// (`Transactions::bump_on_abort`), as the Java client does.
    pub stamped_lost: AtomicU64,
    /// Records appended to queues since forgotten (`appended` counts them
    /// on, so the producer's counts never go back).
    appended_forgotten: AtomicU64,
    /// A planted bug, for showing that the fault simulation's invariants
    /// catch one (`Producer::plant_unrewound_sequences`): a partition's
    /// sequences do not start again at 0 under a new epoch.
    #[cfg(feature = "fault-injection")]
    pub plant_unrewound_sequences: AtomicBool,
    /// Sequence state of forgotten queues, for the partition's next queue
    /// (`forget`, `grow`).
    kept_sequences: Mutex<KeptSequences>,
    /// Drain passes begun (`next_pass`).
    passes: AtomicU64,
}

/// The sequences kept for forgotten queues, all of one producer id and
/// epoch: those of an older one are dropped all at once when a queue of
/// the new one is forgotten (a new epoch starts every partition at 0), so
/// forgetting a topic costs its own partitions, not every one kept.
#[derive(Debug, Default)]
struct KeptSequences {
    owner: Option<(i64, i16)>,
    by_partition: HashMap<(Topic, i32), KeptSequence>,
}

impl Accumulator {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        batch_size: usize,
        max_request_size: usize,
        batch_records: usize,
        buffer_memory: usize,
        max_messages: usize,
        compression: Codec,
        delivery_timeout: Duration,
        closed: Arc<AtomicBool>,
    ) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Accumulator {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            topics: DashMap::default(),
            closed,
            txn_gate: None,
            metrics: Metrics::default(),
            pool: Arc::new(Semaphore::new(buffer_memory)),
            records: RecordPool::new(max_messages),
            batch_size,
            max_request_size,
            batch_records: batch_records.min(i32::MAX as usize) as i32,
            compression,
            delivery_timeout,
            next_batch_id: AtomicU64::new(0),
            incomplete: Mutex::new(BTreeSet::new()),
            incomplete_changed: Notify::new(),
            graveyard: Arc::default(),
            stamped_lost: AtomicU64::new(0),
            kept_sequences: Mutex::default(),
            passes: AtomicU64::new(0),
            appended_forgotten: AtomicU64::new(0),
            #[cfg(feature = "fault-injection")]
            plant_unrewound_sequences: AtomicBool::new(false),
        }
    }

    /// Appends to the open batch of `topic`/`partition`, under one lock,
    /// the records at the front of `rest` that `fits` accepts, while the
    /// batch has room and `budget` lasts; returns how many. Reports go to
    /// `sub`, or nowhere. Records that do not fit, or find the batch full,
    /// stay in `rest` for the one-record path (which opens batches).
    /// `stay`: the sticky partition's stay the records belong to, whose
    /// bytes the queue counts (KIP-794, [`Stick::Bytes`]).
    #[allow(clippy::too_many_arguments)]
    pub fn append_open_run(
        &self,
        topic: &Topic,
        partition: i32,
        stay: Option<u32>,
        rest: &mut std::vec::IntoIter<Record>,
        sub: Option<&Arc<SubscriptionShared>>,
        accepted: Mono,
        budget: usize,
        fits: impl Fn(&Record) -> bool,
    ) -> usize {
        let Some(t) = self.topics.get(topic) else {
            return 0;
        };
        let Some(queue) = t.partitions.get(partition.max(0) as usize) else {
            return 0;
        };
        let mut q = lock(&queue.state);
        // (A retired queue has no open batch: `append` checks.)
        if self.closed.load(Ordering::Acquire) || self.gate_shut() {
            return 0;
        }
        if let Some(stay) = stay {
            q.enter_stay(stay);
        }
        let q = &mut *q;
        let Some(open) = q.open.as_mut() else {
            return 0;
        };
        let before = open.size();
        let mut n = 0;
        let now = open.timestamp_at(accepted);
        while n < budget {
            let Some(next) = rest.as_slice().first() else {
                break;
            };
            if !fits(next) || !open.record_room(self.batch_records, &mut None) {
                break;
            }
            // KIP-794: the stay's second batch ends it at `batch.size`
            // bytes (`append`, which moves on).
            if stay.is_some()
                && q.stay_batches >= 2
                && q.stay_bytes + (open.size() - before) + encoded_upper_bound(next)
                    > self.batch_size
            {
                break;
            }
            let timestamp = next.timestamp.unwrap_or(now);
            let index = open.record_count() as u32;
            if !open.try_add(next, timestamp, self.batch_records) {
                break;
            }
            if let Some(s) = sub {
                let weight = s.weigh.of(next) as u32;
                open.owe(
                    index,
                    timestamp,
                    accepted,
                    next,
                    ReplyTo::Subscription(s, weight),
                );
            }
            // Written: the batch holds the record now.
            if let Some(written) = rest.next() {
                crate::record::release_written(written);
            }
            n += 1;
        }
        q.appended += n as u64;
        if stay.is_some() {
            q.stay_bytes += open.size() - before;
        }
        n
    }

    /// The queue for `topic`/`partition`, created on first use (cold paths).
    pub fn queue(&self, topic: &Topic, partition: i32) -> Arc<PartitionQueue> {
        let p = partition.max(0) as usize;
        if let Some(q) = self
            .topics
            .get(topic)
            .and_then(|t| t.partitions.get(p).cloned())
        {
            return q;
        }
        self.grow(topic, p + 1)
    }

    /// The batches of `topic`/`partition` waiting out a retry backoff may
    /// go at once (their partition has a new leader). Nothing if the
    /// partition has no queue.
    pub fn retry_now(&self, topic: &Topic, partition: i32) {
        let Some(q) = usize::try_from(partition)
            .ok()
            .and_then(|p| self.topics.get(topic)?.partitions.get(p).cloned())
        else {
            return;
        };
        for b in lock(&q.state).ready.iter_mut() {
            b.retry_at = None;
        }
    }

    /// An empty slot for each of `count` partitions of a topic, for a
    /// metadata snapshot's `TopicCache`: the produce path then finds a
    /// partition's queue by index (`cached_queue`), with no look-up once
    /// its slot is filled. Queues are still created only when first used.
    pub fn topic_queues(&self, count: usize) -> CachedQueues {
        CachedQueues {
            owner: self.id,
            queues: (0..count).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// `topic`'s queue for `partition` from `cached`, filled on first use
    /// (`queue`: created then, if need be). A filled slot stays the live
    /// queue until its topic is forgotten (`forget`), which retires it: an
    /// append then finds it so and goes to the live queue. `None` when
    /// `partition` is past the slots, or another accumulator (another
    /// producer's engine) made them.
    #[inline(always)]
    pub fn cached_queue<'c>(
        &self,
        cached: &'c CachedQueues,
        topic: &Topic,
        partition: i32,
    ) -> Option<&'c Arc<PartitionQueue>> {
        if cached.owner != self.id {
            return None;
        }
        let slot = cached.queues.get(usize::try_from(partition).ok()?)?;
        Some(slot.get_or_init(|| self.queue(topic, partition)))
    }

    /// Makes room for at least `count` partitions of `topic`, keeping the
    /// existing queues (partitions are only ever added), and returns the
    /// queue of partition `count - 1`, under the same entry lock (a
    /// `forget` may remove the entry as soon as it is let go of).
    fn grow(&self, topic: &Topic, count: usize) -> Arc<PartitionQueue> {
        let mut entry = self.topics.entry(*topic).or_insert_with(|| TopicQueues {
            partitions: Box::new([]),
        });
        if entry.partitions.len() >= count {
            return entry.partitions[count - 1].clone();
        }
        let mut v: Vec<Arc<PartitionQueue>> = entry.partitions.to_vec();
        let mut kept = lock(&self.kept_sequences);
        for p in v.len()..count {
            let mut state = QueueState::default();
            if let Some(k) = kept.by_partition.remove(&(*topic, p as i32)) {
                state.next_sequence = k.next_sequence;
                state.sequence_owner = Some(k.owner);
                // Not `confirmed`: the topic may have been deleted and
                // re-created while forgotten (its id is forgotten too), and
                // a leader that knows nothing of the producer takes any
                // sequence; one batch at a time until the first answer.
            }
            v.push(Arc::new(PartitionQueue {
                topic: *topic,
                partition: p as i32,
                state: parking_lot::Mutex::new(state),
            }));
        }
        drop(kept);
        let queue = v[count - 1].clone();
        entry.partitions = v.into_boxed_slice();
        queue
    }

    /// A number for a drain pass no other pass has had (never 0, which a
    /// queue no pass has looked at holds: `QueueState::visited`).
    pub fn next_pass(&self) -> u64 {
        self.passes.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Publishes the records of every batch sealed from now on.
    pub fn set_metrics(&mut self, metrics: Metrics) {
        self.metrics = metrics;
    }

    /// Makes appends depend on a transaction being open (`gate`).
    pub fn set_transaction_gate(&mut self, gate: Arc<AtomicBool>) {
        self.txn_gate = Some(gate);
    }

    /// A transactional producer with its gate shut.
    #[inline(always)]
    fn gate_shut(&self) -> bool {
        self.txn_gate
            .as_ref()
            .is_some_and(|g| !g.load(Ordering::Acquire))
    }

    /// Takes and releases every partition lock once: after a gate or
    /// `closed` change, no append that saw the old value is still under
    /// way when this returns.
    pub fn barrier(&self) {
        for q in self.all_queues() {
            drop(lock(&q.state));
        }
    }

    /// Forgets `topic`'s queues if none holds a batch (open, ready, in
    /// flight or unacknowledged): each is marked retired and the topic's
    /// entry removed, both under the entry's lock, so an append that
    /// holds one of them finds it retired and goes to a new queue
    /// (`AppendError::Retired`). An idempotent producer's sequences are
    /// kept for the partitions' next queues, those of `current` (the
    /// producer id and epoch now) only. Returns whether it was forgotten.
    pub fn forget(&self, topic: &Topic, current: Option<(i64, i16)>) -> bool {
        let dashmap::mapref::entry::Entry::Occupied(entry) = self.topics.entry(*topic) else {
            return true;
        };
        let queues = entry.get().partitions.clone();
        let mut states: Vec<_> = queues.iter().map(|q| lock(&q.state)).collect();
        if states.iter().any(|st| st.holds_batch()) {
            return false;
        }
        let mut kept = lock(&self.kept_sequences);
        if current.is_some() && kept.owner != current {
            kept.by_partition.clear();
            kept.owner = current;
        }
        let appended: u64 = states.iter().map(|st| st.appended).sum();
        self.appended_forgotten
            .fetch_add(appended, Ordering::Relaxed);
        for (p, st) in states.iter_mut().enumerate() {
            st.retired = true;
            match st.sequence_owner {
                Some(owner) if Some(owner) == current && st.next_sequence != 0 => {
                    kept.by_partition.insert(
                        (*topic, p as i32),
                        KeptSequence {
                            next_sequence: st.next_sequence,
                            owner,
                        },
                    );
                }
                _ => {}
            }
        }
        drop(kept);
        drop(states);
        entry.remove();
        self.metrics.forget_topic(*topic);
        true
    }

    /// Sequences kept for forgotten queues (`forget`).
    #[cfg(test)]
    pub fn kept_sequences(&self) -> usize {
        lock(&self.kept_sequences).by_partition.len()
    }

    /// Per topic with queues: the records ever appended to them, and
    /// whether any holds a batch (open, ready or in flight). Locks each
    /// queue once; for the partitioner's idle check
    /// (`metadata.max.idle.ms`), not the produce path.
    pub fn topic_activity(&self) -> HashMap<Topic, (u64, bool)> {
        let topics: Vec<(Topic, Box<[Arc<PartitionQueue>]>)> = self
            .topics
            .iter()
            .map(|t| (*t.key(), t.partitions.clone()))
            .collect();
        topics
            .into_iter()
            .map(|(topic, queues)| {
                let (mut appended, mut busy) = (0, false);
                for q in queues.iter() {
                    let st = lock(&q.state);
                    appended += st.appended;
                    busy |= st.holds_batch();
                }
                (topic, (appended, busy))
            })
            .collect()
    }

    /// KIP-794, for the partitioner actor's weights: per partition of
    /// `partitions` of `topic`, the batches its queue holds that are not
    /// yet sent (the open one included: the Java client's deque length),
    /// and since when the oldest has waited (opened, or due again after a
    /// retry backoff). A partition with no queue holds none. Locks each
    /// queue once.
    pub fn queue_lengths(&self, topic: &Topic, partitions: &[i32]) -> Vec<QueueLength> {
        let queues = self.topics.get(topic).map(|t| t.partitions.clone());
        partitions
            .iter()
            .map(|&partition| {
                let q = usize::try_from(partition)
                    .ok()
                    .and_then(|p| queues.as_ref()?.get(p));
                let Some(q) = q else {
                    return QueueLength {
                        partition,
                        batches: 0,
                        oldest: None,
                    };
                };
                let st = lock(&q.state);
                let waiting = st.ready.front().map(|b| {
                    let opened = b.deadline - self.delivery_timeout;
                    b.retry_at.map_or(opened, |r| r.max(opened))
                });
                let open = st.open.as_ref().map(|o| o.created);
                QueueLength {
                    partition,
                    batches: (st.ready.len() + usize::from(open.is_some())) as u32,
                    oldest: match (waiting, open) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    },
                }
            })
            .collect()
    }

    /// Every queue, for sweeps that lock them one by one.
    pub fn all_queues(&self) -> Vec<Arc<PartitionQueue>> {
        self.topics
            .iter()
            .flat_map(|t| t.partitions.to_vec())
            .collect()
    }

    /// Bytes a new batch for this record must reserve: what its buffer
    /// starts with (room for a few records like it, at most
    /// `INITIAL_RESERVATION` or `batch.size`), and never less than the
    /// record alone needs.
    pub fn reservation_for(&self, record: &Record) -> usize {
        single_record_batch_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        )
        .max(
            self.batch_size
                .min(INITIAL_RESERVATION)
                .min(first_room(record)),
        )
    }

    /// Appends `record` to `queue`.
    ///
    /// `reply` of `None` is fire-and-forget: nothing is kept for a report.
    /// `stick` says when a new batch is refused instead, for the sticky
    /// partition to move on first ([`Stick`]): a full open batch under
    /// KIP-480's rule; under KIP-794's, a new batch (full or no open one)
    /// once the partition's stay has taken `batch.size` bytes.
    /// `reserved` is what an earlier `NeedMemory` or `NeedRecords` made
    /// the caller wait for.
    /// `accepted` is when the producer took the record: its latency starts
    /// there, and a record without a timestamp gets that time as its create
    /// time. A full open batch that fails to seal (compression) goes to
    /// `seal_failures`, for the caller to report once the lock is released.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn append<'s>(
        &self,
        queue: &PartitionQueue,
        record: &Record,
        reply: Option<ReplyTo<'s>>,
        accepted: Mono,
        stick: Stick,
        reserved: &mut Reserved,
        seal_failures: &mut Vec<SealFailure>,
    ) -> Result<Appended, AppendError<'s>> {
        let mut q = lock(&queue.state);
        if self.closed.load(Ordering::Acquire) {
            return Err(AppendError::Closed);
        }
        if self.gate_shut() {
            return Err(AppendError::NoTransaction);
        }
        if let Stick::Bytes(stay) | Stick::Moved(stay) = stick {
            q.enter_stay(stay);
        }
        let q = &mut *q;
        if let Some(open) = q.open.as_mut() {
            if !open.record_room(self.batch_records, &mut reserved.record) {
                return Err(AppendError::NeedRecords(reply));
            }
            let index = open.record_count() as u32;
            let timestamp = record
                .timestamp
                .unwrap_or_else(|| open.timestamp_at(accepted));
            // KIP-794: a stay whose first batch went (at its linger)
            // moves on within its second once it has had `batch.size`
            // bytes, as it would at a full batch: every stay takes about
            // as much, whether its batches fill or go before.
            let counted = match stick {
                Stick::No | Stick::Batch => None,
                Stick::Bytes(_)
                    if q.stay_batches >= 2
                        && q.stay_bytes + encoded_upper_bound(record) > self.batch_size =>
                {
                    return Err(AppendError::MoveOn(reply));
                }
                Stick::Bytes(_) | Stick::Moved(_) => Some(open.size()),
            };
            if open.try_add(record, timestamp, self.batch_records) {
                if let Some(reply) = reply {
                    open.owe(index, timestamp, accepted, record, reply);
                }
                q.appended += 1;
                if let Some(before) = counted {
                    q.stay_bytes += open.size() - before;
                }
                return Ok(Appended::ToOpenBatch);
            }
            if stick == Stick::Batch {
                return Err(AppendError::MoveOn(reply));
            }
        }
        // KIP-794: the stay has had its `batch.size` bytes (a stay that
        // has taken nothing yet keeps even a record larger than that).
        if matches!(stick, Stick::Bytes(_))
            && q.stay_bytes > 0
            && q.stay_bytes + encoded_upper_bound(record) > self.batch_size
        {
            return Err(AppendError::MoveOn(reply));
        }
        // A retired queue has no open batch (`forget` retires only empty
        // queues, and nothing opens one after): checked here, once per
        // batch, not on the per-record path above.
        if q.retired {
            return Err(AppendError::Retired(reply));
        }
        let needed = self.reservation_for(record);
        let permit = match reserved.memory.take() {
            Some(p) if p.num_permits() >= needed => p,
            other => {
                drop(other);
                match self.pool.clone().try_acquire_many_owned(needed as u32) {
                    Ok(p) => p,
                    Err(_) => return Err(AppendError::NeedMemory(reply, needed)),
                }
            }
        };
        let after_full = if let Some(full) = q.open.take() {
            match self.seal(full, queue) {
                Ok(b) => q.ready.push_back(b),
                Err(f) => seal_failures.push(f),
            }
            true
        } else {
            false
        };
        let Some(room) = reserved.record.take().or_else(|| self.records.try_one()) else {
            reserved.memory = Some(permit);
            return Err(AppendError::NeedRecords(reply));
        };
        let id = self
            .next_batch_id
            .fetch_add(BATCH_ID_SPACING, Ordering::Relaxed);
        lock(&self.incomplete).insert(id);
        let open = OpenBatch::start(
            id,
            self.batch_size,
            self.batch_records,
            self.compression,
            Reservation::new(permit, room),
            record,
            reply,
            accepted,
        );
        if let Stick::Bytes(_) | Stick::Moved(_) = stick {
            // The batch's bytes, its header's included (as the Java
            // client counts a new batch).
            q.stay_bytes += open.size();
            q.stay_batches += 1;
        }
        q.open = Some(open);
        q.appended += 1;
        // A queue that held a batch is listed: only a queue with none
        // open can be unlisted.
        debug_assert!(
            q.listed || !after_full,
            "an open batch on an unlisted queue"
        );
        Ok(if after_full {
            Appended::NewBatchAfterFull
        } else if !std::mem::replace(&mut q.listed, true) {
            Appended::NewBatchToList
        } else {
            Appended::NewBatch
        })
    }

    /// Seals (encodes) an open batch of `queue`.
    pub fn seal(
        &self,
        open: OpenBatch,
        queue: &PartitionQueue,
    ) -> Result<SealedBatch, SealFailure> {
        // Every batch is sealed once (splits of a refused batch are made
        // from the sealed one), so its records are counted here, per batch.
        self.metrics
            .produced(queue.topic, open.record_count() as u64);
        open.seal(
            queue.topic,
            queue.partition,
            self.delivery_timeout,
            &self.graveyard,
        )
    }

    /// Stamps `b` (of the queue `qi` guards) with the producer id, epoch
    /// and its partition's next sequence, the first time it is sent under
    /// this epoch; a retry under the same epoch keeps its stamp (the
    /// broker deduplicates on it). Under a new epoch a partition's
    /// sequences start again at 0, as the broker requires, and every batch
    /// is stamped again when next sent (unlike the Java client, which
    /// keeps the stamps of partitions that did not ask for the bump: see
    /// ARCHITECTURE.md, "Idempotence").
    pub fn stamp(
        &self,
        qi: &mut QueueState,
        b: &mut SealedBatch,
        (id, epoch): (i64, i16),
        transactional: bool,
    ) {
        let current = b.encoded.stamp();
        if (current.producer_id, current.producer_epoch) == (id, epoch) {
            return;
        }
        if qi.sequence_owner != Some((id, epoch)) {
            qi.sequence_owner = Some((id, epoch));
            #[cfg(feature = "fault-injection")]
            let rewind = !self.plant_unrewound_sequences.load(Ordering::Relaxed);
            #[cfg(not(feature = "fault-injection"))]
            let rewind = true;
            if rewind {
                qi.next_sequence = 0;
            }
        }
        let seq = qi.next_sequence;
        qi.next_sequence = increment_sequence(seq, b.record_count);
        b.encoded.set_stamp(ProducerStamp {
            producer_id: id,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional,
        });
        qi.unacked.insert(b.id);
    }

    /// Splits a batch the broker refused as too large into one batch per
    /// record, in its place (see `SealedBatch::split`). `Err` hands the
    /// batch back with the reason: it has more records than ids between it
    /// and the next batch, or its records cannot be read back. Call it
    /// without the batch's queue locked.
    pub fn split(&self, batch: SealedBatch) -> Result<Vec<SealedBatch>, (SealedBatch, String)> {
        if batch.record_count as u64 > BATCH_ID_SPACING {
            let why = format!(
                "{} records are more than a split can give ids to ({BATCH_ID_SPACING})",
                batch.record_count
            );
            return Err((batch, why));
        }
        let max_size = self.readback(&batch.encoded).max_size;
        let (id, topic, partition) = (batch.id, batch.topic, batch.partition);
        let parts = batch.split(id, max_size)?;
        {
            let mut incomplete = lock(&self.incomplete);
            for p in &parts {
                incomplete.insert(p.id);
            }
        }
        // A stamped batch's parts carry its sequences: they are what the
        // broker has not acknowledged now.
        let q = self.queue(&topic, partition);
        let mut qs = lock(&q.state);
        if qs.unacked.remove(&id) {
            qs.unacked.extend(parts.iter().map(|p| p.id));
        }
        Ok(parts)
    }

    /// Reports a batch that is not in flight (queued, open, or that failed
    /// to seal) as failed, and marks it done. `message` gets the attempts
    /// made. Call it without the batch's queue locked.
    ///
    /// A batch that was stamped (sent before, under an idempotent
    /// producer's epoch) leaves its queue's `unacked` set: it will never be
    /// acknowledged, and a stale entry there would make every later
    /// OUT_OF_ORDER_SEQUENCE_NUMBER look like a wait for it, so the epoch
    /// bump that repairs the partition would never come.
    pub fn fail_unsent(
        &self,
        mut batch: Result<SealedBatch, SealFailure>,
        kind: ErrorKind,
        message: impl FnOnce(u32) -> String,
        stats: &Stats,
    ) {
        if let Ok(b) = &batch {
            if b.encoded.stamp().producer_id >= 0 {
                let q = self.queue(&b.topic, b.partition);
                lock(&q.state).unacked.remove(&b.id);
                self.stamped_lost.fetch_add(1, Ordering::AcqRel);
            }
        }
        let (id, topic, partition, count, attempts, owed, encoded) = match &mut batch {
            Ok(b) => {
                b.ledger.settle();
                (
                    b.id,
                    b.topic,
                    b.partition,
                    b.record_count,
                    b.attempts,
                    std::mem::take(&mut b.owed),
                    &b.encoded,
                )
            }
            Err(f) => (
                f.id,
                f.topic,
                f.partition,
                f.record_count,
                0,
                std::mem::take(&mut f.owed),
                &f.uncompressed,
            ),
        };
        let message = message(attempts);
        route(
            topic,
            partition,
            count,
            attempts,
            owed,
            Outcome::Failed { kind, message },
            Some(self.readback(encoded)),
            stats,
        );
        self.batch_done(id);
    }

    /// Where a failed batch's records are read back from (to hand them
    /// back with their reports): its bytes, decompressed to at most about
    /// `batch.size` (or one record, which `max.request.size` bounds).
    pub fn readback<'a>(&self, encoded: &'a EncodedBatch) -> Readback<'a> {
        Readback {
            bytes: encoded.bytes(),
            max_size: self.batch_size.max(self.max_request_size) * 2,
        }
    }

    /// Records appended to any partition so far.
    pub fn appended(&self) -> u64 {
        let live: u64 = self
            .all_queues()
            .iter()
            .map(|q| lock(&q.state).appended)
            .sum();
        live + self.appended_forgotten.load(Ordering::Relaxed)
    }

    /// The id the next batch will get: `flush` waits for every batch below it.
    pub fn next_batch_id(&self) -> u64 {
        self.next_batch_id.load(Ordering::Relaxed)
    }

    /// True when every batch with an id below `id` has been reported.
    pub fn all_done_below(&self, id: u64) -> bool {
        lock(&self.incomplete)
            .first()
            .is_none_or(|first| *first >= id)
    }

    /// No batch is left to report.
    pub fn nothing_incomplete(&self) -> bool {
        lock(&self.incomplete).is_empty()
    }

    /// Marks a batch reported.
    pub fn batch_done(&self, id: u64) {
        lock(&self.incomplete).remove(&id);
        self.incomplete_changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests;
