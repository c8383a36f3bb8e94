//! Per-partition batches, shared by every producer handle and drained by the
//! broker-connection actors.
//!
//! This is the hot path. A produce call finds its partition's queue (one
//! DashMap read), locks it (one uncontended mutex), and appends the record
//! straight into the open batch's wire buffer. Everything else happens per
//! batch: reserving `buffer.memory`, waking the leader's connection actor,
//! compressing, and routing reports.
//!
//! The queues live here, outside any actor, so that a restarted connection
//! actor finds its partitions' batches where it left them (the supervision
//! invariant: state that must survive a restart lives outside the actor).

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::Recipient;
use dashmap::DashMap;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};

use crate::clock::Mono;
use crate::protocol::record_batch::{
    single_record_batch_size, BatchBuilder, Compression, EncodedBatch, ProducerStamp,
    RECORD_BATCH_OVERHEAD,
};
use crate::record::{Record, Topic};
use crate::report::DeliveryReport;
use crate::subscription::SubscriptionShared;

/// Locks a mutex, recovering from poisoning: a panic elsewhere (a connection
/// actor, say) must not make every later produce call panic too. The data
/// under these locks stays consistent across a panic: every update to it
/// is a single push, pop or counter step.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where one record's report goes. A subscription is borrowed: the batch
/// clones its `Arc` only when the subscriber first appears in that batch.
#[derive(Debug)]
pub(crate) enum ReplyTo<'s> {
    /// `send().await`.
    Oneshot(oneshot::Sender<DeliveryReport>),
    /// A subscription's stream.
    Subscription(&'s Arc<SubscriptionShared>),
    /// An actor (`Produce { reply_to }`).
    Actor(Recipient<DeliveryReport>),
}

/// A record's report target inside a batch. Subscriptions are stored once
/// per batch and referred to by index, so a run of records from one
/// subscriber costs no reference-count traffic.
#[derive(Debug)]
pub(crate) enum Reply {
    Oneshot(oneshot::Sender<DeliveryReport>),
    Subscription(u32),
    Actor(Recipient<DeliveryReport>),
}

/// A record waiting for its report. Fire-and-forget records have none.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Offset delta within the batch.
    pub index: u32,
    pub timestamp: i64,
    pub accepted: Mono,
    pub record: Record,
    pub reply: Reply,
}

/// The reports owed for one batch, in chunks of at most [`CHUNK`] records.
///
/// Chunks never regrow (a full one is left as it is and a new one started),
/// so an owed entry is moved once when it is pushed and not again while the
/// batch fills. A chunk whose records all report to one subscription is
/// handed to that subscription's stream whole, as one `Vec`.
///
/// Owed reports are paid by `report_router::route`, which empties this.
/// Dropping it with reports still owed is a bug; as a last line of defence
/// the drop pays each one as a `Cancelled` failure (with the record), so a
/// bug can never turn into a silently lost report or a hung `send`.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    pub subscribers: Vec<Arc<SubscriptionShared>>,
    pub chunks: Vec<Chunk>,
    /// Capacity of the first chunk (sized from the batch's first record).
    first_capacity: usize,
}

/// Records per owed chunk, at most (about 50 KiB of entries).
pub(crate) const CHUNK: usize = 256;

/// Consecutive owed entries of one batch.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub entries: Vec<Pending>,
    /// `Some(i)` while every entry reports to subscription `i`.
    pub sole: Option<u32>,
}

impl Chunk {
    fn with_capacity(n: usize) -> Chunk {
        let spare = if n == CHUNK {
            lock(&SPARE_CHUNKS).pop()
        } else {
            None
        };
        Chunk {
            entries: spare.unwrap_or_else(|| Vec::with_capacity(n)),
            sole: None,
        }
    }
}

/// Full-size owed chunks that report streams have emptied, for
/// `Owed::push` to fill again: a busy producer then does not allocate (and
/// fault in) a fresh 45 KiB chunk for every 256 records, and the reader's
/// thread does not free memory the producer's thread allocated.
static SPARE_CHUNKS: Mutex<Vec<Vec<Pending>>> = Mutex::new(Vec::new());

/// Spare chunks kept at most (about 3 MiB).
const MAX_SPARE_CHUNKS: usize = 64;

/// Gives an owed chunk's allocation back for reuse (its entries, if any
/// are left, are dropped).
pub(crate) fn recycle_chunk(mut entries: Vec<Pending>) {
    if entries.capacity() != CHUNK {
        return;
    }
    entries.clear();
    let mut spare = lock(&SPARE_CHUNKS);
    if spare.len() < MAX_SPARE_CHUNKS {
        spare.push(entries);
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if self.chunks.iter().all(|c| c.entries.is_empty()) {
            return;
        }
        tracing::error!(
            records = self.len(),
            "batch dropped with reports owed; reporting them Cancelled"
        );
        let mut per_sub: Vec<Vec<DeliveryReport>> =
            self.subscribers.iter().map(|_| Vec::new()).collect();
        for p in self.chunks.drain(..).flat_map(|c| c.entries) {
            let report = DeliveryReport::Failed(crate::report::DeliveryError {
                kind: crate::report::ErrorKind::Cancelled,
                message: "internal error: the batch was dropped before it was reported".into(),
                partition: None,
                attempts: 0,
                record: p.record,
            });
            match p.reply {
                Reply::Oneshot(tx) => {
                    let _ = tx.send(report);
                }
                Reply::Actor(r) => r.do_send(report),
                Reply::Subscription(i) => per_sub[i as usize].push(report),
            }
        }
        for (s, reports) in self.subscribers.iter().zip(per_sub) {
            s.deliver(reports);
        }
    }
}

impl Owed {
    /// Records owed.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.entries.len()).sum()
    }

    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Mono,
        record: Record,
        reply: ReplyTo,
    ) {
        let (reply, sub) = match reply {
            ReplyTo::Oneshot(tx) => (Reply::Oneshot(tx), None),
            ReplyTo::Actor(r) => (Reply::Actor(r), None),
            ReplyTo::Subscription(s) => {
                let i = match self.subscribers.iter().rposition(|x| Arc::ptr_eq(x, s)) {
                    Some(i) => i,
                    None => {
                        self.subscribers.push(s.clone());
                        self.subscribers.len() - 1
                    }
                } as u32;
                (Reply::Subscription(i), Some(i))
            }
        };
        let chunk = match self.chunks.last_mut() {
            Some(c) if c.entries.len() < c.entries.capacity() => c,
            _ => {
                let cap = if self.chunks.is_empty() {
                    self.first_capacity.clamp(1, CHUNK)
                } else {
                    CHUNK
                };
                self.chunks.push(Chunk::with_capacity(cap));
                self.chunks.last_mut().expect("just pushed")
            }
        };
        if chunk.entries.is_empty() {
            chunk.sole = sub;
        } else if chunk.sole != sub {
            chunk.sole = None;
        }
        chunk.entries.push(Pending {
            index,
            timestamp,
            accepted,
            record,
            reply,
        });
    }
}

/// The batch being filled for one partition.
#[derive(Debug)]
pub(crate) struct OpenBatch {
    pub id: u64,
    builder: BatchBuilder,
    owed: Owed,
    pub created: Instant,
    /// `created` on the per-record clock.
    created_mono: Mono,
    /// Set when a record did not fit: the batch is ready to send without
    /// waiting for linger (the sticky partitioner has moved on from it).
    pub full: bool,
    /// The wall clock at `created`, in ms since the epoch: records' create
    /// times are derived from it and their own monotonic reading, so a
    /// record costs one clock reading, not two.
    created_wall_ms: i64,
    memory: OwnedSemaphorePermit,
}

impl OpenBatch {
    /// Writes `record` into the batch unless the batch is full: at
    /// `batch.size` bytes or `max_records` records. A record that does not
    /// fit marks the batch full (ready to send without waiting for linger).
    #[inline(always)]
    fn try_add(&mut self, record: &Record, timestamp: i64, max_records: i32) -> bool {
        let added = self.builder.record_count() < max_records
            && self
                .builder
                .try_append(
                    timestamp,
                    record.key.as_deref(),
                    record.value.as_deref(),
                    &record.headers,
                )
                .is_ok();
        self.full |= !added;
        added
    }

    /// Create time for a record accepted at `accepted`.
    #[inline]
    fn timestamp_at(&self, accepted: Mono) -> i64 {
        self.created_wall_ms + accepted.millis_since(self.created_mono)
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A closed, encoded batch: queued, in flight, or waiting to retry.
#[derive(Debug)]
pub(crate) struct ProducerBatch {
    pub id: u64,
    pub topic: Topic,
    pub partition: i32,
    pub encoded: EncodedBatch,
    pub owed: Owed,
    pub record_count: i32,
    /// Batch creation + `delivery.timeout.ms`: past this the batch fails.
    pub deadline: Instant,
    pub attempts: u32,
    /// Not before this instant (retry backoff).
    pub retry_at: Option<Instant>,
    _memory: OwnedSemaphorePermit,
}

/// A batch whose records could not be encoded.
#[derive(Debug)]
pub(crate) struct FailedBatch {
    pub id: u64,
    pub partition: i32,
    pub owed: Owed,
    pub record_count: i32,
    pub reason: String,
}

/// One partition's queue.
#[derive(Debug)]
pub(crate) struct PartitionQueue {
    pub topic: Topic,
    pub partition: i32,
    pub inner: Mutex<QueueInner>,
}

impl QueueInner {
    /// Puts a batch back for another attempt, in batch-id order: ids grow
    /// with creation within a partition, so retries keep the partition's
    /// original order whatever order their failures were seen in.
    pub fn requeue(&mut self, batch: ProducerBatch) {
        let at = self
            .ready
            .iter()
            .position(|b| b.id > batch.id)
            .unwrap_or(self.ready.len());
        self.ready.insert(at, batch);
    }
}

#[derive(Debug, Default)]
pub(crate) struct QueueInner {
    pub open: Option<OpenBatch>,
    pub ready: VecDeque<ProducerBatch>,
    /// Batches of this partition currently in flight.
    pub in_flight: usize,
    /// Records ever appended here; counted under the lock the append holds
    /// anyway, so the hot path touches no shared counter.
    pub appended: u64,
    /// Idempotence: the sequence the next newly stamped batch starts at,
    /// and the (producer id, epoch) it belongs to.
    pub next_sequence: i32,
    pub sequence_owner: Option<(i64, i16)>,
    /// Idempotence: batches stamped and sent but not yet reported.
    pub unacked: std::collections::BTreeSet<u64>,
}

/// What an append did, so the caller can wake the leader's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// Added to an open batch.
    ToOpenBatch,
    /// Opened a new batch (and maybe closed a full one).
    NewBatch,
}

/// Why an append did not happen.
#[derive(Debug)]
pub(crate) enum AppendError<'s> {
    /// The open batch is full, and the caller asked not to open another
    /// (the sticky partitioner moves on first).
    WouldOpenNewBatch(Record, Option<ReplyTo<'s>>),
    /// No room in `buffer.memory` right now; reserve `needed` bytes and
    /// call again with the permit.
    NeedMemory(Record, Option<ReplyTo<'s>>, usize),
    /// The producer closed; checked under the partition lock, so nothing is
    /// appended after the final cancellation sweep has passed this queue.
    Closed(Record),
}

/// One topic's partition queues, indexed by partition.
#[derive(Debug)]
pub(crate) struct TopicQueues {
    pub partitions: Box<[Arc<PartitionQueue>]>,
}

/// All partition queues, and the memory pool.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// Looked up by `&str` (`Topic: Borrow<str>`), so the hot path clones
    /// neither the topic nor a queue's `Arc`.
    topics: DashMap<Topic, TopicQueues, crate::record::TopicHasher>,
    closed: Arc<std::sync::atomic::AtomicBool>,
    pub pool: Arc<Semaphore>,
    pub batch_size: usize,
    /// `batch.num.messages`.
    pub batch_records: i32,
    pub compression: Compression,
    pub delivery_timeout: Duration,
    next_batch_id: AtomicU64,
    incomplete: Mutex<BTreeSet<u64>>,
    pub incomplete_changed: Notify,
}

impl Accumulator {
    pub fn new(
        batch_size: usize,
        batch_records: usize,
        buffer_memory: usize,
        compression: Compression,
        delivery_timeout: Duration,
        closed: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        Accumulator {
            topics: DashMap::default(),
            closed,
            pool: Arc::new(Semaphore::new(buffer_memory)),
            batch_size,
            batch_records: batch_records.min(i32::MAX as usize) as i32,
            compression,
            delivery_timeout,
            next_batch_id: AtomicU64::new(0),
            incomplete: Mutex::new(BTreeSet::new()),
            incomplete_changed: Notify::new(),
        }
    }

    /// Runs `f` on the queue for `record`'s topic and `partition` (created
    /// on first use), handing the record over, while holding only a shared
    /// map lock: no clone of the topic or of the queue's `Arc`. This is the
    /// hot-path lookup.
    #[inline(always)]
    pub fn with_queue<R>(
        &self,
        record: Record,
        partition: i32,
        f: impl FnOnce(&PartitionQueue, Record) -> R,
    ) -> R {
        let p = partition.max(0) as usize;
        // One call of `f`, so that it is inlined here.
        let t = match self.topics.get(&record.topic) {
            Some(t) if t.partitions.len() > p => t,
            found => {
                drop(found);
                self.grow(&record.topic, p + 1);
                self.topics.get(&record.topic).expect("just grown")
            }
        };
        f(&t.partitions[p], record)
    }

    /// Appends to the open batch of `topic`/`partition`, under one lock,
    /// the records at the front of `rest` that `fits` accepts, while the
    /// batch has room and `budget` lasts; returns how many. Reports go to
    /// `sub`, or nowhere. Records that do not fit, or find the batch full,
    /// stay in `rest` for the one-record path (which opens batches).
    #[allow(clippy::too_many_arguments)]
    pub fn append_open_run(
        &self,
        topic: &Topic,
        partition: i32,
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
        let mut q = lock(&queue.inner);
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return 0;
        }
        let Some(open) = q.open.as_mut() else {
            return 0;
        };
        let mut n = 0;
        let now = open.timestamp_at(accepted);
        while n < budget {
            let Some(next) = rest.as_slice().first() else {
                break;
            };
            if !fits(next) {
                break;
            }
            let timestamp = next.timestamp.unwrap_or(now);
            let index = open.builder.record_count() as u32;
            if !open.try_add(next, timestamp, self.batch_records) {
                break;
            }
            let record = rest.next().expect("peeked above");
            if let Some(s) = sub {
                open.owed
                    .push(index, timestamp, accepted, record, ReplyTo::Subscription(s));
            }
            n += 1;
        }
        q.appended += n as u64;
        n
    }

    /// The queue for `topic`/`partition`, created on first use (cold paths).
    pub fn queue(&self, topic: &Topic, partition: i32) -> Arc<PartitionQueue> {
        let p = partition.max(0) as usize;
        if let Some(q) = self
            .topics
            .get(topic.as_str())
            .and_then(|t| t.partitions.get(p).cloned())
        {
            return q;
        }
        self.grow(topic, p + 1);
        self.topics
            .get(topic.as_str())
            .expect("just grown")
            .partitions[p]
            .clone()
    }

    /// Makes room for at least `count` partitions of `topic`, keeping the
    /// existing queues (partitions are only ever added).
    fn grow(&self, topic: &Topic, count: usize) {
        let mut entry = self.topics.entry(*topic).or_insert_with(|| TopicQueues {
            partitions: Box::new([]),
        });
        if entry.partitions.len() >= count {
            return;
        }
        let mut v: Vec<Arc<PartitionQueue>> = entry.partitions.to_vec();
        for p in v.len()..count {
            v.push(Arc::new(PartitionQueue {
                topic: *topic,
                partition: p as i32,
                inner: Mutex::new(QueueInner::default()),
            }));
        }
        entry.partitions = v.into_boxed_slice();
    }

    /// Every queue, for sweeps that lock them one by one.
    pub fn all_queues(&self) -> Vec<Arc<PartitionQueue>> {
        self.topics
            .iter()
            .flat_map(|t| t.partitions.to_vec())
            .collect()
    }

    /// Bytes a new batch for this record must reserve.
    pub fn reservation_for(&self, record: &Record) -> usize {
        single_record_batch_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        )
        .max(self.batch_size)
    }

    /// Appends `record` to `queue`.
    ///
    /// `reply` of `None` is fire-and-forget: nothing is kept for a report.
    /// `allow_new_batch` false makes a full open batch an error instead of
    /// a reason to open another (KIP-480's "abort on new batch").
    /// `memory` is a reservation made after an earlier `NeedMemory`.
    /// `accepted` is when the producer took the record: its latency starts
    /// there, and a record without a timestamp gets that time as its create
    /// time.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn append<'s>(
        &self,
        queue: &PartitionQueue,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        accepted: Mono,
        allow_new_batch: bool,
        memory: &mut Option<OwnedSemaphorePermit>,
        closed: &mut Vec<Result<ProducerBatch, FailedBatch>>,
    ) -> Result<Appended, AppendError<'s>> {
        let mut q = lock(&queue.inner);
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(AppendError::Closed(record));
        }
        if let Some(open) = q.open.as_mut() {
            let index = open.builder.record_count() as u32;
            let timestamp = record
                .timestamp
                .unwrap_or_else(|| open.timestamp_at(accepted));
            if open.try_add(&record, timestamp, self.batch_records) {
                if let Some(reply) = reply {
                    open.owed.push(index, timestamp, accepted, record, reply);
                }
                q.appended += 1;
                return Ok(Appended::ToOpenBatch);
            }
            if !allow_new_batch {
                return Err(AppendError::WouldOpenNewBatch(record, reply));
            }
        }
        let needed = self.reservation_for(&record);
        let permit = match memory.take() {
            Some(p) if p.num_permits() >= needed => p,
            other => {
                drop(other);
                match self.pool.clone().try_acquire_many_owned(needed as u32) {
                    Ok(p) => p,
                    Err(_) => return Err(AppendError::NeedMemory(record, reply, needed)),
                }
            }
        };
        if let Some(full) = q.open.take() {
            let batch = self.close(full, queue);
            match batch {
                Ok(b) => q.ready.push_back(b),
                Err(f) => closed.push(Err(f)),
            }
        }
        let id = self.next_batch_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.incomplete).insert(id);
        let mut open = OpenBatch {
            id,
            builder: BatchBuilder::new(self.batch_size, self.compression),
            owed: Owed::default(),
            created: Instant::now(),
            created_mono: Mono::now(),
            created_wall_ms: wall_clock_ms(),
            full: false,
            memory: permit,
        };
        let timestamp = record.timestamp.unwrap_or(open.created_wall_ms);
        open.builder
            .try_append(
                timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &record.headers,
            )
            .expect("an empty batch accepts any record");
        if let Some(reply) = reply {
            // Size the first owed chunk from the first record, so a small
            // batch does not reserve a whole chunk.
            let per_record = (open.builder.size() - RECORD_BATCH_OVERHEAD).max(1);
            open.owed.first_capacity =
                (self.batch_size / per_record).min(self.batch_records as usize);
            open.owed.push(0, timestamp, accepted, record, reply);
        }
        q.open = Some(open);
        q.appended += 1;
        Ok(Appended::NewBatch)
    }

    /// Encodes an open batch.
    pub fn close(
        &self,
        open: OpenBatch,
        queue: &PartitionQueue,
    ) -> Result<ProducerBatch, FailedBatch> {
        let record_count = open.builder.record_count();
        match open.builder.finish(ProducerStamp::NONE) {
            Ok(encoded) => Ok(ProducerBatch {
                id: open.id,
                topic: queue.topic,
                partition: queue.partition,
                encoded,
                owed: open.owed,
                record_count,
                deadline: open.created + self.delivery_timeout,
                attempts: 0,
                retry_at: None,
                _memory: open.memory,
            }),
            Err(e) => Err(FailedBatch {
                id: open.id,
                partition: queue.partition,
                owed: open.owed,
                record_count,
                reason: e.to_string(),
            }),
        }
    }

    /// Records appended to any partition so far.
    pub fn appended(&self) -> u64 {
        self.all_queues()
            .iter()
            .map(|q| lock(&q.inner).appended)
            .sum()
    }

    /// The id the next batch will get: `flush` waits for every batch below it.
    pub fn next_batch_id(&self) -> u64 {
        self.next_batch_id.load(Ordering::Relaxed)
    }

    /// True when every batch with an id below `id` has been reported.
    pub fn all_done_below(&self, id: u64) -> bool {
        self.incomplete
            .lock()
            .unwrap()
            .first()
            .is_none_or(|first| *first >= id)
    }

    /// Marks a batch reported.
    pub fn batch_done(&self, id: u64) {
        lock(&self.incomplete).remove(&id);
        self.incomplete_changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ErrorKind;

    #[test]
    fn dropping_owed_reports_pays_each_report_as_cancelled() {
        let (tx, mut rx) = oneshot::channel();
        let mut owed = Owed::default();
        owed.push(
            0,
            1,
            Mono::now(),
            Record::to("t").value("v"),
            ReplyTo::Oneshot(tx),
        );
        drop(owed);
        match rx.try_recv().expect("a report, not a dropped sender") {
            DeliveryReport::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::Cancelled);
                assert_eq!(e.record.value.as_deref(), Some(&b"v"[..]));
            }
            other => panic!("{other:?}"),
        }
    }
}
