//! Taking one record, or a run of them: the produce path up to the
//! append into a batch.
//!
//! Every produce call starts with one synchronous try (`enqueue_now`): the
//! whole path when metadata is known and `buffer.memory` has room; its
//! outcome is an `Enqueued` (appended, reported, refused, or to wait).
//! Only what must wait (metadata, `buffer.memory`, room under
//! `queue.buffering.max.messages`) goes to a boxed future
//! (`enqueue_slow`), so the futures of produce calls stay small. `place`
//! chooses the partition and appends (the queue from the topic's
//! `TopicCache`, then `Accumulator::append`); `place_run` does the same
//! for a run of records with the per-call work done once per run (the
//! clock read again every 256 records).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::batching::accumulator::{AppendError, Appended, CachedQueues, Stick};
use crate::batching::batch::SealFailure;
use crate::batching::queue::PartitionQueue;
use crate::batching::reservation::Reserved;
use crate::clock::Mono;
use crate::delivery::owed::ReplyTo;
use crate::delivery::router::route_one;
use crate::delivery::subscription::SubscriptionShared;
use crate::engine::error::ProduceError;
use crate::engine::Engine;
use crate::metadata::{MetadataSnapshot, TopicMetadata};
use crate::partitioner::TopicLayout;
use crate::record::{Record, Topic};
use crate::report::{DeliveryError, DeliveryReport, ErrorKind};

/// How a synchronous run of a batch produce ended.
pub(crate) enum RunEnd<'s> {
    /// Every record the run could take was taken.
    Done,
    /// A record was not taken.
    Failed(ProduceError),
    /// A record must wait (for metadata or memory).
    Wait(Slow<'s>),
}

/// How one synchronous try at taking a record ended.
#[must_use]
pub(crate) enum Enqueued<'s> {
    /// Appended to a batch of this partition; its report comes when the
    /// batch is answered.
    Appended(i32),
    /// Taken and failed at once (too large, a partition the topic does
    /// not have, an unknown topic): its failure report is on its way.
    Reported,
    /// Not taken: handed back, with why. It gets no report.
    Refused(ProduceError),
    /// It must wait (for metadata, `buffer.memory`, or room under
    /// `queue.buffering.max.messages`): `Engine::enqueue_slow` does.
    Wait(Slow<'s>),
}

/// Where a record goes: its topic's metadata, and the topic's queues when
/// a handle's cache holds them.
#[derive(Clone, Copy)]
struct Dest<'t> {
    tm: &'t TopicMetadata,
    queues: Option<&'t CachedQueues>,
}

/// How a record is taken: when the producer accepted it (its latency and
/// create time), whether it may wait, and the room earlier tries of the
/// same call reserved.
struct Taking<'r> {
    accepted: Mono,
    wait: bool,
    reserved: &'r mut Reserved,
}

/// The waiting rest of a produce call, boxed.
pub(crate) type SlowProduce<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ProduceError>> + Send + 'a>>;

/// A produce call's first, synchronous try: its result now, or the rest
/// to await.
pub(crate) enum FirstTry<'a> {
    /// Taken, reported, or handed back, with no wait.
    Now(Result<(), ProduceError>),
    /// What is left to wait for, boxed.
    Later(SlowProduce<'a>),
}

/// What a produce call carries from one try to the next.
/// How many times a record waits for its topic's metadata, found each
/// time and gone by its next try, before it fails `UnknownTopic`.
const METADATA_ROUNDS: u8 = 3;

#[derive(Default)]
pub(crate) struct Resume {
    /// `buffer.memory` and `queue.buffering.max.messages` room reserved
    /// while waiting.
    pub reserved: Reserved,
    /// When the record was first accepted (its latency and create time).
    pub accepted: Option<Mono>,
    /// How often the topic's metadata was waited for and found. Missing
    /// after that is a topic forgotten (idle for `metadata.max.idle.ms`)
    /// between the wake and this record's try, on a loaded machine: it
    /// waits again, and only after `METADATA_ROUNDS` waits is it unknown.
    pub metadata_awaited: u8,
}

impl Resume {
    /// Done with: what it still reserves is released. Most tries reserve
    /// nothing, and a `Resume` holding nothing owns nothing, so it is let
    /// go of without the out-of-line drop, which every record would pay.
    #[inline(always)]
    pub(crate) fn finish(self) {
        if self.reserved.memory.is_none() && self.reserved.record.is_none() {
            std::mem::forget(self);
        } else {
            drop(self);
        }
    }
}

/// A produce handle's own view of the latest metadata: the snapshot, and
/// the entry of the topic it last produced to. Its produce calls find a
/// record's topic metadata by comparing two pointers and a topic
/// (`arc_swap::Cache`: the engine's snapshot pointer against the one
/// held) instead of loading the snapshot from the engine's `ArcSwap`
/// (arc-swap's per-thread debt slot, taken and given back) and looking the
/// topic up by hash, both once per record.
///
/// It keeps what it last saw alive until its next produce call or its
/// drop: at most one superseded snapshot per handle. A handle used by
/// several threads at once shares it through a `try_lock`: a call that
/// finds it taken loads from the engine instead of waiting.
pub(crate) struct SnapshotCache(parking_lot::Mutex<CachedView>);

type MetadataCell = Arc<arc_swap::ArcSwap<MetadataSnapshot>>;

pub(crate) struct CachedView {
    snapshot: arc_swap::Cache<MetadataCell, Arc<MetadataSnapshot>>,
    /// The snapshot `topic` was looked up in.
    of: Option<Arc<MetadataSnapshot>>,
    /// The topic last produced to, its entry in `of` and its queues.
    topic: Option<(Topic, Arc<TopicMetadata>, Option<Arc<CachedQueues>>)>,
}

impl CachedView {
    /// `topic`'s metadata in the latest snapshot and its queues; `None`
    /// when it has none.
    #[inline(always)]
    fn topic(
        &mut self,
        topic: Topic,
        engine: &Engine,
    ) -> Option<(&TopicMetadata, Option<&CachedQueues>)> {
        let snapshot = self.snapshot.load();
        if !self.of.as_ref().is_some_and(|of| Arc::ptr_eq(of, snapshot)) {
            self.of = Some(snapshot.clone());
            self.topic = None;
        }
        if !matches!(&self.topic, Some((t, ..)) if *t == topic) {
            self.topic = snapshot.topics.get(&topic).map(|tm| {
                let queues = engine.topic_queues(tm).clone().downcast().ok();
                (topic, tm.clone(), queues)
            });
        }
        self.topic
            .as_ref()
            .map(|(_, tm, queues)| (&**tm, queues.as_deref()))
    }
}

impl SnapshotCache {
    /// A cache of `engine`'s metadata.
    pub(crate) fn of(engine: &Engine) -> SnapshotCache {
        SnapshotCache(parking_lot::Mutex::new(CachedView {
            snapshot: arc_swap::Cache::new(engine.metadata.clone()),
            of: None,
            topic: None,
        }))
    }
}

impl std::fmt::Debug for SnapshotCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SnapshotCache")
    }
}

/// What a record's first produce try must wait for.
pub(crate) enum Slow<'s> {
    /// The topic's metadata.
    Metadata(Record, Option<ReplyTo<'s>>),
    /// This many bytes of `buffer.memory` (the record was headed for this
    /// partition).
    Memory(Record, Option<ReplyTo<'s>>, usize, i32, Mono),
    /// Room for one record under `queue.buffering.max.messages` (the
    /// record was headed for this partition).
    Records(Record, Option<ReplyTo<'s>>, i32, Mono),
}

impl<'s> Slow<'s> {
    /// The waiting record.
    pub(crate) fn record(&self) -> &Record {
        match self {
            Slow::Metadata(r, _) | Slow::Memory(r, ..) | Slow::Records(r, ..) => r,
        }
    }

    /// The waiting record, given up on (its report is not owed).
    pub(crate) fn into_record(self) -> Record {
        match self {
            Slow::Metadata(r, _) | Slow::Memory(r, ..) | Slow::Records(r, ..) => r,
        }
    }
}

impl Engine {
    /// What a produce call does first with a record it is given: the
    /// interceptors' `on_send`, once, before anything else looks at it.
    /// One branch when the producer has none (in place, so that the
    /// record is not moved then).
    #[inline(always)]
    pub(crate) fn on_send(&self, record: &mut Record) {
        if self.stats.interceptors.is_set() {
            self.intercept(record);
        }
    }

    #[cold]
    #[inline(never)]
    fn intercept(&self, record: &mut Record) {
        let taken = std::mem::replace(record, Record::to(record.topic));
        *record = self.stats.interceptors.on_send(taken);
    }

    /// [`on_send`](Self::on_send) for every record of a batch call.
    pub(crate) fn on_send_all(&self, records: &mut [Record]) {
        if self.stats.interceptors.is_set() {
            records.iter_mut().for_each(|r| self.intercept(r));
        }
    }

    /// Where a fire-and-forget record's report goes: nowhere (`None`: it
    /// owes none), or, for a producer with interceptors, to
    /// `ReplyTo::Nobody`, so that they see it.
    #[inline(always)]
    pub(crate) fn unanswered<'s>(&self) -> Option<ReplyTo<'s>> {
        if self.stats.interceptors.is_set() {
            Some(ReplyTo::Nobody)
        } else {
            None
        }
    }

    /// Whether the producer has interceptors.
    pub(crate) fn intercepts(&self) -> bool {
        self.stats.interceptors.is_set()
    }

    /// A refusal that Courier hands to its caller as a failure report (the
    /// `Err` of `send`, an actor's report for a refused `Produce`): the
    /// interceptors see it first, as they see every report.
    pub(crate) fn refusal_report(&self, error: DeliveryError) -> DeliveryError {
        if !self.stats.interceptors.is_set() {
            return error;
        }
        let report = DeliveryReport::Failed(error);
        self.stats.interceptors.on_report(&report);
        match report {
            DeliveryReport::Failed(e) => e,
            DeliveryReport::Delivered(_) => unreachable!("made failed above"),
        }
    }

    pub(super) fn reject(
        &self,
        record: Record,
        reply: Option<ReplyTo<'_>>,
        kind: ErrorKind,
        message: String,
        partition: Option<i32>,
    ) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        // Refused records are counted one by one: they are the error path.
        self.stats.metrics.produced(record.topic, 1);
        self.stats.metrics.settled(record.topic, Some(kind), 1);
        match reply {
            Some(reply) => route_one(
                DeliveryReport::Failed(DeliveryError {
                    kind,
                    message,
                    partition,
                    attempts: 0,
                    record: Box::new(record),
                }),
                reply,
                &self.stats,
            ),
            None => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(topic = %record.topic, %kind, %message, "fire-and-forget record failed");
            }
        }
    }

    /// Accepts one record: partition, append, and wake the leader when a
    /// batch opens. Every accepted record gets exactly one report through
    /// `reply` (none when `reply` is `None`). `Err` hands the record back
    /// unaccepted; it then gets no report.
    ///
    /// With `wait`, waits for the topic's metadata and for room in
    /// `buffer.memory`; without, those are `MetadataNotReady` and
    /// `QueueFull`.
    pub(crate) async fn enqueue(
        &self,
        record: Record,
        reply: Option<ReplyTo<'_>>,
        wait: bool,
    ) -> Result<(), ProduceError> {
        // Only the boxed slow part is held across the await.
        let mut resume = Resume::default();
        let first = self.enqueue_now(record, reply, wait, &mut resume);
        resume.finish();
        let slow = match first {
            Enqueued::Appended(_) | Enqueued::Reported => return Ok(()),
            Enqueued::Refused(e) => return Err(e),
            Enqueued::Wait(slow) => self.enqueue_slow(slow),
        };
        slow.await
    }

    /// One synchronous try at accepting a record: the whole produce path
    /// when metadata is known and `buffer.memory` has room. `Wait` says
    /// what to wait for (only with `wait`; without it, `Refused` hands the
    /// record back). `resume` carries what earlier tries of the same call
    /// found (see [`Resume`]); a fresh one for a first try.
    #[inline(always)]
    pub(crate) fn enqueue_now<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
        resume: &mut Resume,
    ) -> Enqueued<'s> {
        self.enqueue_cached(record, reply, wait, resume, None)
    }

    /// [`enqueue_now`](Self::enqueue_now), reading the metadata snapshot
    /// through the handle's `cache` when it has one.
    #[inline(always)]
    pub(crate) fn enqueue_cached<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
        resume: &mut Resume,
        cache: Option<&SnapshotCache>,
    ) -> Enqueued<'s> {
        // With the `opentelemetry` feature, a record produced in a traced
        // context gets its produce span first (engine/traced.rs).
        #[cfg(feature = "opentelemetry")]
        return self.enqueue_traced(record, reply, wait, resume, cache);
        #[cfg(not(feature = "opentelemetry"))]
        self.enqueue_untraced(record, reply, wait, resume, cache)
    }

    /// [`enqueue_now`](Self::enqueue_now), with no trace context.
    #[inline(always)]
    pub(crate) fn enqueue_untraced<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
        resume: &mut Resume,
        cache: Option<&SnapshotCache>,
    ) -> Enqueued<'s> {
        if self.closed.load(Ordering::Acquire) {
            return Enqueued::Refused(ProduceError::Closed(Box::new(record)));
        }
        if let Some(needed) = self.sizing.too_large(&record) {
            let msg = format!(
                "record needs a {needed}-byte Produce request; max.request.size is {}",
                self.config.max_request_size
            );
            self.reject(record, reply, ErrorKind::RecordTooLarge, msg, None);
            return Enqueued::Reported;
        }

        let (mut cached, loaded);
        let tm = match cache.and_then(|c| c.0.try_lock()) {
            Some(guard) => {
                cached = guard;
                cached.topic(record.topic, self)
            }
            None => {
                loaded = self.metadata.load();
                loaded.topics.get(&record.topic).map(|tm| (&**tm, None))
            }
        };
        let Some((tm, queues)) = tm else {
            if resume.metadata_awaited >= METADATA_ROUNDS {
                let msg = format!("topic {:?} has no metadata", record.topic.as_str());
                self.reject(record, reply, ErrorKind::UnknownTopic, msg, None);
                return Enqueued::Reported;
            }
            return self.wait_for_metadata(record, reply, wait);
        };
        // One clock reading per record, after any wait for metadata (as the
        // Java client takes its timestamp) and before any wait for memory:
        // its latency starts here, and its create time (unless it brought
        // one) is derived from it.
        let accepted = *resume.accepted.get_or_insert_with(Mono::now);
        let taking = Taking {
            accepted,
            wait,
            reserved: &mut resume.reserved,
        };
        self.place(record, reply, Dest { tm, queues }, taking)
    }

    /// Takes records from `rest` while `budget` lasts (one unit a record),
    /// with the checks that do not depend on the record done once for the
    /// run: one metadata snapshot, one clock reading, and the topic's
    /// metadata looked up once per run of records to one topic. Each taken
    /// record adds one to `taken`. Reports go to `sub`, or nowhere.
    pub(crate) fn place_run<'s>(
        &self,
        rest: &mut std::vec::IntoIter<Record>,
        sub: Option<&'s Arc<SubscriptionShared>>,
        budget: &mut usize,
        taken: &mut usize,
    ) -> RunEnd<'s> {
        let mut now = Mono::now();
        let mut since_clock = 0;
        let snapshot = self.metadata.load();
        // A run produced in a traced context takes the one-record path,
        // which gives each record its produce span (engine/traced.rs).
        #[cfg(feature = "opentelemetry")]
        let traced = crate::delivery::trace_context::current_parent().is_some();
        #[cfg(not(feature = "opentelemetry"))]
        let traced = false;
        let mut last: Option<(crate::record::Topic, &crate::metadata::TopicMetadata)> = None;
        while *budget > 0 {
            let Some(record) = rest.next() else {
                break;
            };
            // A long run reads the clock again every 256 records, so its
            // records' create times and latencies stay within microseconds.
            since_clock += 1;
            if since_clock > 256 {
                now = Mono::now();
                since_clock = 0;
            }
            let reply = sub.map(|s| ReplyTo::Subscription(s, s.weigh.of(&record) as u32));
            let tm = match &last {
                Some((topic, tm)) if *topic == record.topic => Some(*tm),
                _ => snapshot.topics.get(&record.topic).map(|tm| {
                    last = Some((record.topic, &**tm));
                    &**tm
                }),
            };
            // Keyless records with no partition stick to one partition
            // while its batch has room (KIP-480): after one is placed, the
            // ones right behind it go into the same open batch under one
            // lock, with no partitioner call or queue lookup of their own.
            let sticky = self.default_partitioner
                && (record.key.is_none() || self.ignore_keys)
                && record.partition.is_none();
            let topic = record.topic;
            let (r, leads) = self.place_in_run(record, reply, tm, now, traced);
            let placed = match r {
                Enqueued::Appended(partition) => Some(partition).filter(|_| leads),
                Enqueued::Reported => None,
                Enqueued::Refused(e) => return RunEnd::Failed(e),
                Enqueued::Wait(slow) => return RunEnd::Wait(slow),
            };
            *budget -= 1;
            *taken += 1;
            if let Some(placed) = placed.filter(|_| sticky && *budget > 0) {
                // The stay the run's bytes count in (KIP-794): the one
                // the record just placed belongs to, unless the partition
                // moved on under it.
                let stay = tm.and_then(|tm| {
                    let (p, stay) = tm.sticky.0.current();
                    (p == placed).then_some(stay)
                });
                let n =
                    self.acc
                        .append_open_run(&topic, placed, stay, rest, sub, now, *budget, |r| {
                            r.topic == topic
                                && (r.key.is_none() || self.ignore_keys)
                                && r.partition.is_none()
                                && self.sizing.too_large(r).is_none()
                        });
                *budget -= n;
                *taken += n;
                since_clock += n;
            }
        }
        RunEnd::Done
    }

    /// One record of a run: placed on the run's own path (`true`: it may
    /// lead the records behind it into its batch), or, when traced, too
    /// large, of an unknown topic or the producer closed, through the
    /// one-record path, which says what to do (`false`: a record placed
    /// there leads none, or the records behind a traced one would get no
    /// produce span).
    #[inline(always)]
    fn place_in_run<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        tm: Option<&TopicMetadata>,
        now: Mono,
        traced: bool,
    ) -> (Enqueued<'s>, bool) {
        if let Some(tm) = tm.filter(|_| {
            !traced
                && !self.closed.load(Ordering::Acquire)
                && self.sizing.too_large(&record).is_none()
        }) {
            let taking = Taking {
                accepted: now,
                wait: true,
                reserved: &mut Reserved::default(),
            };
            let dest = Dest { tm, queues: None };
            return (self.place(record, reply, dest, taking), true);
        }
        let one = self.enqueue_now(record, reply, true, &mut Resume::default());
        (one, false)
    }

    /// `topic`'s queue for `partition` from its metadata entry's cache
    /// (slots made on first use, one per partition, each filled when its
    /// partition is first used).
    #[inline(always)]
    fn cached_queue<'t>(
        &self,
        topic: &Topic,
        partition: i32,
        tm: &'t TopicMetadata,
        queues: Option<&'t CachedQueues>,
    ) -> Option<&'t Arc<PartitionQueue>> {
        let cached = match queues {
            Some(q) => q,
            None => self.topic_queues(tm).downcast_ref::<CachedQueues>()?,
        };
        self.acc.cached_queue(cached, topic, partition)
    }

    /// `tm`'s cache of the topic's queues (a `CachedQueues`), made on
    /// first use.
    #[inline(always)]
    fn topic_queues<'t>(&self, tm: &'t TopicMetadata) -> &'t Arc<dyn std::any::Any + Send + Sync> {
        tm.cache.0.get_or_init(|| {
            let count = usize::try_from(tm.partition_count).unwrap_or(0);
            Arc::new(self.acc.topic_queues(count))
        })
    }

    /// [`enqueue_now`](Self::enqueue_now) without waiting: a full buffer
    /// is `QueueFull`, unknown metadata `MetadataNotReady`.
    pub(crate) fn try_enqueue(
        &self,
        record: Record,
        reply: Option<ReplyTo<'_>>,
    ) -> Result<(), ProduceError> {
        match self.enqueue_now(record, reply, false, &mut Resume::default()) {
            Enqueued::Appended(_) | Enqueued::Reported => Ok(()),
            Enqueued::Refused(e) => Err(e),
            Enqueued::Wait(_) => unreachable!("enqueue_now without wait never asks to wait"),
        }
    }

    /// A record whose topic has no metadata here (unknown yet, or
    /// forgotten under it): it waits for the metadata (`Slow::Metadata`),
    /// or, when it may not wait, the topic is asked for and the record
    /// handed back (`Closed` once the producer is).
    fn wait_for_metadata<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
    ) -> Enqueued<'s> {
        if wait {
            return Enqueued::Wait(Slow::Metadata(record, reply));
        }
        if self.actors.request_topic(record.topic) {
            Enqueued::Refused(ProduceError::MetadataNotReady(Box::new(record)))
        } else {
            Enqueued::Refused(ProduceError::Closed(Box::new(record)))
        }
    }

    /// Chooses `record`'s partition in `dest` and appends it (the part of
    /// a produce call after the checks).
    #[inline(always)]
    fn place<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        dest: Dest<'_>,
        taking: Taking<'_>,
    ) -> Enqueued<'s> {
        let mut seal_failures = Vec::new();
        let r = self.place_with(record, reply, dest, taking, &mut seal_failures);
        // Batches that failed to encode (compression errors) are rare: the
        // vector almost never allocated, and then owns nothing, so it is
        // let go of without the out-of-line drop of its elements.
        if seal_failures.capacity() == 0 {
            std::mem::forget(seal_failures);
        }
        r
    }

    /// [`place`](Self::place), with the vector for the failures of full
    /// batches sealed on the way: choose the partition, then append until
    /// the record is in a batch, reported, handed back or waiting.
    #[inline(always)]
    fn place_with<'s>(
        &self,
        record: Record,
        mut reply: Option<ReplyTo<'s>>,
        dest: Dest<'_>,
        taking: Taking<'_>,
        seal_failures: &mut Vec<SealFailure>,
    ) -> Enqueued<'s> {
        let tm = dest.tm;
        let layout = TopicLayout {
            partition_count: tm.partition_count,
            available: &tm.available,
            sticky: Some(&tm.sticky.0),
        };
        // A sticky choice may not open a new batch before the partitioner
        // has had the chance to move on (`Stick`: KIP-480, KIP-794).
        let (mut partition, mut stick) = self.choose_partition(&record, tm, &layout);
        loop {
            if partition < 0 || partition >= tm.partition_count {
                return self.reject_missing_partition(record, reply, partition, tm);
            }
            let result = self.append_to(
                &record,
                reply,
                partition,
                dest,
                taking.accepted,
                stick,
                taking.reserved,
                seal_failures,
            );
            self.fail_seal_failures(seal_failures);
            match result {
                Ok(appended) => {
                    self.wake_for(appended, &record.topic, tm, partition, taking.accepted);
                    crate::record::release_written(record);
                    return Enqueued::Appended(partition);
                }
                Err(AppendError::Closed) => {
                    return Enqueued::Refused(ProduceError::Closed(Box::new(record)))
                }
                // Its topic was forgotten under this record (idle for
                // metadata.max.idle.ms): it waits for the topic's metadata,
                // as a new topic's record does, and then finds the live
                // queue through the new snapshot.
                Err(AppendError::Retired(rp)) => {
                    return self.wait_for_metadata(record, rp, taking.wait)
                }
                Err(AppendError::NoTransaction) => {
                    return Enqueued::Refused(ProduceError::NoTransaction(Box::new(record)))
                }
                Err(AppendError::MoveOn(rp)) => {
                    partition = self.move_on(&record.topic, partition, tm, &layout);
                    stick = match stick {
                        Stick::Bytes(_) => Stick::Moved(tm.sticky.0.current().1),
                        _ => Stick::No,
                    };
                    reply = rp;
                }
                Err(AppendError::NeedMemory(rp, bytes)) => {
                    return self.wait_for_memory(record, rp, bytes, partition, &taking)
                }
                Err(AppendError::NeedRecords(rp)) => {
                    if !taking.wait {
                        return Enqueued::Refused(ProduceError::QueueFull(Box::new(record)));
                    }
                    return Enqueued::Wait(Slow::Records(record, rp, partition, taking.accepted));
                }
            }
        }
    }

    /// `record`'s partition, and whether it is a sticky choice and under
    /// which rule (`Stick`): its own, the built-in partitioner's current
    /// sticky partition (read here, without the call through the trait
    /// object), or the partitioner's answer.
    #[inline(always)]
    fn choose_partition(
        &self,
        record: &Record,
        tm: &TopicMetadata,
        layout: &TopicLayout<'_>,
    ) -> (i32, Stick) {
        let key = record.key.as_deref().filter(|_| !self.ignore_keys);
        match (record.partition, key) {
            (Some(p), _) => (p, Stick::No),
            (None, None) if self.default_partitioner => {
                let (p, stay) = tm.sticky.0.current();
                if (0..tm.partition_count).contains(&p) {
                    (p, Stick::Bytes(stay))
                } else {
                    let p = self.partitioner.partition(&record.topic, None, layout);
                    (p, Stick::Bytes(tm.sticky.0.current().1))
                }
            }
            (None, Some(k)) if k.is_empty() && self.empty_key_is_keyless => {
                let p = self.partitioner.partition(&record.topic, None, layout);
                if self.default_partitioner {
                    (p, Stick::Bytes(tm.sticky.0.current().1))
                } else {
                    (p, Stick::Batch)
                }
            }
            (None, key) => {
                let p = self.partitioner.partition(&record.topic, key, layout);
                (
                    p,
                    if key.is_none() {
                        Stick::Batch
                    } else {
                        Stick::No
                    },
                )
            }
        }
    }

    /// A partition the topic does not have (the record's own, or a custom
    /// partitioner's answer) fails the record now, rather than after
    /// `delivery.timeout.ms` in a queue no broker leads.
    #[cold]
    fn reject_missing_partition<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        partition: i32,
        tm: &TopicMetadata,
    ) -> Enqueued<'s> {
        let by = if record.partition.is_some() {
            ""
        } else {
            " (chosen by the partitioner)"
        };
        let msg = format!(
            "partition {partition}{by} does not exist; topic {:?} has {}",
            record.topic.as_str(),
            tm.partition_count
        );
        let kind = ErrorKind::UnknownPartition;
        self.reject(record, reply, kind, msg, Some(partition));
        Enqueued::Reported
    }

    /// Appends `record` to `partition`'s queue, found through the topic's
    /// cache (`TopicCache`, once per metadata snapshot and partition
    /// count), else by the hashed look-up.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn append_to<'s>(
        &self,
        record: &Record,
        reply: Option<ReplyTo<'s>>,
        partition: i32,
        dest: Dest<'_>,
        accepted: Mono,
        stick: Stick,
        reserved: &mut Reserved,
        seal_failures: &mut Vec<SealFailure>,
    ) -> Result<Appended, AppendError<'s>> {
        let fallback;
        let queue = match self.cached_queue(&record.topic, partition, dest.tm, dest.queues) {
            Some(q) => &**q,
            None => {
                fallback = self.acc.queue(&record.topic, partition);
                &*fallback
            }
        };
        let a = &self.acc;
        a.append(
            queue,
            record,
            reply,
            accepted,
            stick,
            reserved,
            seal_failures,
        )
    }

    /// Puts `topic`'s queue for `partition`, on which a batch opened
    /// while no drain list held it, on its leader's list
    /// (`ActorTree::list`), and wakes that leader's connection unless its
    /// timer fires by the batch's linger end. The leader is the one of the
    /// metadata now, read after the append: the record's snapshot may be
    /// older, and a connection that no longer leads the partition may not
    /// drain again (its broker down) to pass the queue on. Metadata stored
    /// after this read makes its new leader walk all its queues, and that
    /// walk finds this batch. No leader now: the same, once one is named.
    #[inline(never)]
    fn list_queue(&self, topic: &Topic, tm: &TopicMetadata, partition: i32, accepted: Mono) {
        let now = self.metadata.load();
        let Some(leader) = now.topics.get(topic).and_then(|t| t.leader(partition)) else {
            return;
        };
        let fallback;
        let queue = match self.cached_queue(topic, partition, tm, None) {
            Some(q) => q,
            None => {
                fallback = self.acc.queue(topic, partition);
                &fallback
            }
        };
        self.actors.list(leader, queue);
        self.actors
            .wake_by(leader, accepted.plus(self.config.linger));
    }

    /// Reports the records of full batches that failed to encode
    /// (compression errors) on the way. The test keeps an empty drain off
    /// every record.
    #[inline(always)]
    fn fail_seal_failures(&self, seal_failures: &mut Vec<SealFailure>) {
        if !seal_failures.is_empty() {
            for failed in seal_failures.drain(..) {
                self.fail_seal(failed);
            }
        }
    }

    /// Wakes the partition leader's connection actor when the append made
    /// a batch ready: a new batch is due when its linger ends (a timer set
    /// for then or sooner finds it), a full one now. An append to an open
    /// batch wakes nobody. A batch opened on a queue no drain list held
    /// puts the queue on its leader's list (`list_queue`).
    #[inline(always)]
    fn wake_for(
        &self,
        appended: Appended,
        topic: &Topic,
        tm: &TopicMetadata,
        partition: i32,
        accepted: Mono,
    ) {
        if appended == Appended::ToOpenBatch {
            return;
        }
        // After the append marked the batch incomplete (`next_tick`).
        if self.supervisor_asleep.load(Ordering::Relaxed) {
            self.rouse_supervisor();
        }
        if appended == Appended::NewBatchToList {
            return self.list_queue(topic, tm, partition, accepted);
        }
        if let Some(leader) = tm.leader(partition) {
            if appended == Appended::NewBatch {
                self.actors
                    .wake_by(leader, accepted.plus(self.config.linger));
            } else {
                self.actors.wake(leader);
            }
        }
    }

    /// KIP-480: the sticky partition's batch is full. The full batch is
    /// ready now; the partitioner moves on before a new batch opens, and
    /// its next partition is returned.
    #[inline(never)]
    fn move_on(
        &self,
        topic: &Topic,
        partition: i32,
        tm: &TopicMetadata,
        layout: &TopicLayout<'_>,
    ) -> i32 {
        if let Some(leader) = tm.leader(partition) {
            self.actors.wake(leader);
        }
        self.partitioner.on_new_batch(topic, partition, layout);
        if self.default_partitioner {
            self.want_weights();
        }
        self.partitioner.partition(topic, None, layout)
    }

    /// `buffer.memory` has no room for the new batch `record` needs: it
    /// waits (with `wait`), is handed back `QueueFull` (without), or, when
    /// it needs more than all of `buffer.memory`, fails now.
    #[cold]
    fn wait_for_memory<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        bytes: usize,
        partition: i32,
        taking: &Taking<'_>,
    ) -> Enqueued<'s> {
        if bytes > self.config.buffer_memory {
            let msg = format!(
                "record needs a {bytes}-byte batch; buffer.memory is {}",
                self.config.buffer_memory
            );
            let kind = ErrorKind::RecordTooLarge;
            self.reject(record, reply, kind, msg, Some(partition));
            return Enqueued::Reported;
        }
        if !taking.wait {
            return Enqueued::Refused(ProduceError::QueueFull(Box::new(record)));
        }
        Enqueued::Wait(Slow::Memory(
            record,
            reply,
            bytes,
            partition,
            taking.accepted,
        ))
    }
}
