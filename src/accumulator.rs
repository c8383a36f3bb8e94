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

use crate::protocol::record_batch::{
    single_record_batch_size, BatchBuilder, Compression, EncodedBatch, ProducerStamp,
};
use crate::record::{Record, Topic};
use crate::report::DeliveryReport;
use crate::subscription::SubscriptionShared;

/// Where one record's report goes.
#[derive(Debug)]
pub(crate) enum ReplyTo {
    /// `send().await`.
    Oneshot(oneshot::Sender<DeliveryReport>),
    /// A subscription's stream.
    Subscription(Arc<SubscriptionShared>),
    /// An actor (`Produce { reply_to }`).
    Actor(Recipient<DeliveryReport>),
}

/// A record's report target inside a batch. Subscriptions are stored once
/// per batch and referred to by index, so a run of records from one
/// subscriber costs no reference-count traffic.
#[derive(Debug)]
pub(crate) enum Reply {
    Oneshot(oneshot::Sender<DeliveryReport>),
    Subscription(u16),
    Actor(Recipient<DeliveryReport>),
}

/// A record waiting for its report. Fire-and-forget records have none.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Offset delta within the batch.
    pub index: u32,
    pub timestamp: i64,
    pub accepted: Instant,
    pub record: Record,
    pub reply: Reply,
}

/// The reports owed for one batch.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    pub subscribers: Vec<Arc<SubscriptionShared>>,
    pub pending: Vec<Pending>,
}

impl Owed {
    fn push(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Instant,
        record: Record,
        reply: ReplyTo,
    ) {
        let reply = match reply {
            ReplyTo::Oneshot(tx) => Reply::Oneshot(tx),
            ReplyTo::Actor(r) => Reply::Actor(r),
            ReplyTo::Subscription(s) => {
                let i = match self.subscribers.iter().rposition(|x| Arc::ptr_eq(x, &s)) {
                    Some(i) => i,
                    None => {
                        self.subscribers.push(s);
                        self.subscribers.len() - 1
                    }
                };
                Reply::Subscription(i as u16)
            }
        };
        self.pending.push(Pending {
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
    memory: OwnedSemaphorePermit,
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

#[derive(Debug, Default)]
pub(crate) struct QueueInner {
    pub open: Option<OpenBatch>,
    pub ready: VecDeque<ProducerBatch>,
    /// Batches of this partition currently in flight.
    pub in_flight: usize,
    /// Records ever appended here; counted under the lock the append holds
    /// anyway, so the hot path touches no shared counter.
    pub appended: u64,
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
pub(crate) enum AppendError {
    /// The open batch is full, and the caller asked not to open another
    /// (the sticky partitioner moves on first).
    WouldOpenNewBatch(Record, Option<ReplyTo>),
    /// No room in `buffer.memory` right now; reserve `needed` bytes and
    /// call again with the permit.
    NeedMemory(Record, Option<ReplyTo>, usize),
}

/// All partition queues, and the memory pool.
#[derive(Debug)]
pub(crate) struct Accumulator {
    pub partitions: DashMap<(Topic, i32), Arc<PartitionQueue>>,
    pub pool: Arc<Semaphore>,
    pub batch_size: usize,
    pub compression: Compression,
    pub delivery_timeout: Duration,
    next_batch_id: AtomicU64,
    incomplete: Mutex<BTreeSet<u64>>,
    pub incomplete_changed: Notify,
}

impl Accumulator {
    pub fn new(
        batch_size: usize,
        buffer_memory: usize,
        compression: Compression,
        delivery_timeout: Duration,
    ) -> Self {
        Accumulator {
            partitions: DashMap::new(),
            pool: Arc::new(Semaphore::new(buffer_memory)),
            batch_size,
            compression,
            delivery_timeout,
            next_batch_id: AtomicU64::new(0),
            incomplete: Mutex::new(BTreeSet::new()),
            incomplete_changed: Notify::new(),
        }
    }

    /// The queue for `topic`/`partition`, created on first use.
    pub fn queue(&self, topic: &Topic, partition: i32) -> Arc<PartitionQueue> {
        if let Some(q) = self.partitions.get(&(topic.clone(), partition)) {
            return q.clone();
        }
        self.partitions
            .entry((topic.clone(), partition))
            .or_insert_with(|| {
                Arc::new(PartitionQueue {
                    topic: topic.clone(),
                    partition,
                    inner: Mutex::new(QueueInner::default()),
                })
            })
            .clone()
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
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &self,
        queue: &PartitionQueue,
        record: Record,
        reply: Option<ReplyTo>,
        timestamp: i64,
        accepted: Instant,
        allow_new_batch: bool,
        memory: &mut Option<OwnedSemaphorePermit>,
        closed: &mut Vec<Result<ProducerBatch, FailedBatch>>,
    ) -> Result<Appended, AppendError> {
        let mut q = queue.inner.lock().unwrap();
        if let Some(open) = q.open.as_mut() {
            let index = open.builder.record_count() as u32;
            if open
                .builder
                .try_append(
                    timestamp,
                    record.key.as_deref(),
                    record.value.as_deref(),
                    &record.headers,
                )
                .is_ok()
            {
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
        self.incomplete.lock().unwrap().insert(id);
        let mut open = OpenBatch {
            id,
            builder: BatchBuilder::new(self.batch_size, self.compression),
            owed: Owed::default(),
            created: accepted,
            memory: permit,
        };
        open.builder
            .try_append(
                timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &record.headers,
            )
            .expect("an empty batch accepts any record");
        if let Some(reply) = reply {
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
                topic: queue.topic.clone(),
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
        self.partitions
            .iter()
            .map(|e| e.value().inner.lock().unwrap().appended)
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
        self.incomplete.lock().unwrap().remove(&id);
        self.incomplete_changed.notify_waiters();
    }
}
