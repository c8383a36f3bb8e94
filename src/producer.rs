//! The public producer: a cheap-to-clone handle over shared state, and the
//! builder that validates settings and starts the actor tree.
//!
//! ```text
//!  Producer::send / produce / Subscriber::produce          Produce{record, reply_to}
//!        │  (no actor hop)                                      │ (actor message)
//!        ▼                                                      ▼
//!  Inner::enqueue ── metadata snapshot (arc-swap) ── partition ── Accumulator::append
//!        │ one Wake per new batch                                │
//!        ▼                                                       ▼
//!  BrokerConnection (leader) ── drain: batches → ProduceRequest ── socket
//!        │ response
//!        ▼
//!  report_router::route ── per batch: oneshot / subscription stream / actor
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::Addr;
use arc_swap::ArcSwap;
use dashmap::DashMap;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;

use crate::accumulator::lock;
use crate::accumulator::{Accumulator, AppendError, Appended, ReplyTo};
use crate::actors::broker::BrokerConnection;
use crate::actors::msgs::{EnsureTopic, Shutdown, Wake};
use crate::actors::partitioner::PartitionerActor;
use crate::actors::supervisor::ProducerSupervisor;
use crate::clock::Mono;
use crate::config::{ConfigError, ProducerConfig};
use crate::metadata::MetadataSnapshot;
use crate::partitioner::{DefaultPartitioner, Partitioner, TopicLayout};
use crate::record::Record;
use crate::report::{Delivered, DeliveryError, DeliveryReport, ErrorKind, ReportMode};
use crate::report_router::{fail_unsent, route_one};
use crate::stats::{Stats, StatsSnapshot};
use crate::subscription::{ReportStream, SubscriptionShared};

/// A record the producer did not accept; it is handed back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// `buffer.memory` is full (only from `try_produce`).
    #[error("producer queue is full (buffer.memory)")]
    QueueFull(Record),
    /// The topic's metadata is not known yet (only from `try_produce`,
    /// which cannot wait for it); a fetch has been started.
    #[error("metadata for the topic is not available yet")]
    MetadataNotReady(Record),
    /// The producer is closed.
    #[error("producer is closed")]
    Closed(Record),
}

impl ProduceError {
    /// The record, handed back.
    pub fn into_record(self) -> Record {
        match self {
            ProduceError::QueueFull(r)
            | ProduceError::MetadataNotReady(r)
            | ProduceError::Closed(r) => r,
        }
    }
}

/// Why [`Subscriber::produce_batch`] or [`Producer::produce_batch`]
/// stopped before the end of its records. Nothing is lost: the records
/// before the failed one were taken (each gets its report, as from
/// `produce`), the failed one is in `reason`, and the rest are handed back
/// untouched.
#[derive(Debug, thiserror::Error)]
#[error("{reason} (after {accepted} record(s) of the batch were taken)")]
pub struct BatchRejected {
    /// Records taken before the failure.
    pub accepted: usize,
    /// Why the next record was not taken; it holds that record.
    pub reason: ProduceError,
    /// The records after it, in order, not taken.
    pub rest: Vec<Record>,
}

/// How a synchronous run of a batch produce ended.
pub(crate) enum RunEnd<'s> {
    /// Every record the run could take was taken.
    Done,
    /// A record was not taken.
    Failed(ProduceError),
    /// A record must wait (for metadata or memory).
    Wait(Slow<'s>),
}

/// The waiting rest of a produce call, boxed.
type SlowProduce<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ProduceError>> + Send + 'a>>;

/// What a produce call carries from one try to the next.
#[derive(Default)]
pub(crate) struct Resume {
    /// A `buffer.memory` reservation made while waiting.
    pub memory: Option<tokio::sync::OwnedSemaphorePermit>,
    /// When the record was first accepted (its latency and create time).
    pub accepted: Option<Mono>,
    /// The topic's metadata was waited for: missing now means unknown.
    pub metadata_awaited: bool,
}

/// What a record's first produce try must wait for.
pub(crate) enum Slow<'s> {
    /// The topic's metadata.
    Metadata(Record, Option<ReplyTo<'s>>),
    /// This many bytes of `buffer.memory` (the record was headed for this
    /// partition).
    Memory(Record, Option<ReplyTo<'s>>, usize, i32, Mono),
}

/// State shared by handles and actors. Lives as long as any of them.
pub(crate) struct Inner {
    pub config: ProducerConfig,
    pub client_id: StrBytes,
    pub acc: Accumulator,
    pub metadata: ArcSwap<MetadataSnapshot>,
    pub brokers: DashMap<i32, Addr<BrokerConnection>>,
    /// The idempotent producer's id and epoch; `None` without idempotence.
    pub idem: Option<crate::idempotence::Idempotence>,
    /// Per-broker state that outlives connection actors.
    pub broker_states: DashMap<i32, Arc<crate::actors::broker::BrokerState>>,
    pub partitioner: Box<dyn Partitioner>,
    pub stats: Stats,
    pub closed: Arc<AtomicBool>,
    /// Every subscription, to wake their streams when the producer closes.
    pub subscriptions: std::sync::Mutex<Vec<std::sync::Weak<SubscriptionShared>>>,
    /// Active `flush` calls: while non-zero, linger is ignored.
    pub flushing: AtomicUsize,
    /// Records rejected before reaching a batch (they still get a report);
    /// with the accumulator's per-partition counts, the `produced` count.
    pub rejected: AtomicU64,
    pub partitioner_addr: OnceLock<Addr<PartitionerActor>>,
    pub supervisor_addr: OnceLock<Addr<ProducerSupervisor>>,
    /// Set when the actor system has stopped.
    pub stopped: tokio::sync::Notify,
    pub stopped_flag: AtomicBool,
    /// Bytes a Produce request needs around one topic's batch, plus the
    /// topic name length.
    pub request_overhead: usize,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub(crate) fn wake_leader(&self, leader: i32) {
        if let Some(b) = self.brokers.get(&leader) {
            b.do_send(Wake);
        }
    }

    pub(crate) fn wake_all(&self) {
        for b in self.brokers.iter() {
            b.value().do_send(Wake);
        }
    }

    fn reject(
        &self,
        record: Record,
        reply: Option<ReplyTo<'_>>,
        kind: ErrorKind,
        message: String,
        partition: Option<i32>,
    ) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        match reply {
            Some(reply) => route_one(
                DeliveryReport::Failed(DeliveryError {
                    kind,
                    message,
                    partition,
                    attempts: 0,
                    record,
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
        let slow = match self.enqueue_now(record, reply, wait, &mut Resume::default()) {
            Ok(r) => return r,
            Err(slow) => self.enqueue_slow(slow),
        };
        slow.await
    }

    /// The waiting part of [`enqueue`](Self::enqueue), for a record whose
    /// first try needs metadata or memory. Boxed, so that the futures of
    /// produce calls, which almost never get here, stay small.
    pub(crate) fn enqueue_slow<'a>(&'a self, slow: Slow<'a>) -> SlowProduce<'a> {
        Box::pin(async move {
            let mut resume = Resume::default();
            let mut slow = slow;
            loop {
                let (record, reply) = match slow {
                    Slow::Metadata(record, reply) => {
                        let Some(p) = self.partitioner_addr.get() else {
                            return Err(ProduceError::Closed(record));
                        };
                        let ensured = p
                            .send(EnsureTopic {
                                topic: record.topic,
                            })
                            .await;
                        match ensured {
                            Ok(Ok(())) => resume.metadata_awaited = true,
                            Ok(Err(kind)) => {
                                let msg = format!(
                                    "no metadata for topic {:?} within max.block.ms ({} ms)",
                                    record.topic.as_str(),
                                    self.config.max_block.as_millis()
                                );
                                self.reject(record, reply, kind, msg, None);
                                return Ok(());
                            }
                            Err(_) => return Err(ProduceError::Closed(record)),
                        }
                        (record, reply)
                    }
                    Slow::Memory(record, reply, bytes, partition, accepted) => {
                        resume.accepted = Some(accepted);
                        let acquire = self.acc.pool.clone().acquire_many_owned(bytes as u32);
                        match tokio::time::timeout(self.config.max_block, acquire).await {
                            Ok(Ok(permit)) => resume.memory = Some(permit),
                            Ok(Err(_)) => return Err(ProduceError::Closed(record)),
                            Err(_) => {
                                let msg = format!(
                                    "buffer.memory ({} bytes) stayed full for max.block.ms ({} ms)",
                                    self.config.buffer_memory,
                                    self.config.max_block.as_millis()
                                );
                                self.reject(
                                    record,
                                    reply,
                                    ErrorKind::Timeout,
                                    msg,
                                    Some(partition),
                                );
                                return Ok(());
                            }
                        }
                        (record, reply)
                    }
                };
                match self.enqueue_now(record, reply, true, &mut resume) {
                    Ok(r) => return r,
                    Err(next) => slow = next,
                }
            }
        })
    }

    /// One synchronous try at accepting a record: the whole produce path
    /// when metadata is known and `buffer.memory` has room. `Err` says what
    /// to wait for (only with `wait`; without it, `Ok(Err(..))` hands the
    /// record back). `resume` carries what earlier tries of the same call
    /// found (see [`Resume`]); a fresh one for a first try.
    #[inline(always)]
    pub(crate) fn enqueue_now<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
        resume: &mut Resume,
    ) -> Result<Result<(), ProduceError>, Slow<'s>> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(Err(ProduceError::Closed(record)));
        }
        if let Some(needed) = self.too_large(&record) {
            let msg = format!(
                "record needs a {needed}-byte Produce request; max.request.size is {}",
                self.config.max_request_size
            );
            self.reject(record, reply, ErrorKind::RecordTooLarge, msg, None);
            return Ok(Ok(()));
        }

        let snapshot = self.metadata.load();
        let Some(tm) = snapshot.topics.get(&record.topic) else {
            if resume.metadata_awaited {
                let msg = format!("topic {:?} has no metadata", record.topic.as_str());
                self.reject(record, reply, ErrorKind::UnknownTopic, msg, None);
                return Ok(Ok(()));
            }
            if !wait {
                let Some(p) = self.partitioner_addr.get() else {
                    return Ok(Err(ProduceError::Closed(record)));
                };
                p.do_send(EnsureTopic {
                    topic: record.topic,
                });
                return Ok(Err(ProduceError::MetadataNotReady(record)));
            }
            return Err(Slow::Metadata(record, reply));
        };
        // One clock reading per record, after any wait for metadata (as the
        // Java client takes its timestamp) and before any wait for memory:
        // its latency starts here, and its create time (unless it brought
        // one) is derived from it.
        let accepted = *resume.accepted.get_or_insert_with(Mono::now);
        self.place(
            record,
            reply,
            tm,
            accepted,
            wait,
            &mut resume.memory,
            &mut 0,
        )
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
            let reply = sub.map(ReplyTo::Subscription);
            let tm = match &last {
                Some((topic, tm)) if *topic == record.topic => Some(*tm),
                _ => snapshot.topics.get(&record.topic).inspect(|tm| {
                    last = Some((record.topic, tm));
                }),
            };
            // Keyless records with no partition stick to one partition
            // while its batch has room (KIP-480): after one is placed, the
            // ones right behind it go into the same open batch under one
            // lock, with no partitioner call or queue lookup of their own.
            let sticky = record.key.is_none() && record.partition.is_none();
            let topic = record.topic;
            let mut placed = -1;
            let r = match tm {
                Some(tm) if !self.closed.load(Ordering::Acquire) => match self.too_large(&record) {
                    None => self.place(record, reply, tm, now, true, &mut None, &mut placed),
                    Some(_) => self.enqueue_now(record, reply, true, &mut Resume::default()),
                },
                // Unknown topic or closed: the one-record path says what to do.
                _ => self.enqueue_now(record, reply, true, &mut Resume::default()),
            };
            match r {
                Ok(Ok(())) => {
                    *budget -= 1;
                    *taken += 1;
                    if sticky && placed >= 0 && *budget > 0 {
                        let n = self.acc.append_open_run(
                            &topic,
                            placed,
                            rest,
                            sub,
                            now,
                            *budget,
                            |r| {
                                r.topic == topic
                                    && r.key.is_none()
                                    && r.partition.is_none()
                                    && self.too_large(r).is_none()
                            },
                        );
                        *budget -= n;
                        *taken += n;
                        since_clock += n;
                    }
                }
                Ok(Err(e)) => return RunEnd::Failed(e),
                Err(slow) => return RunEnd::Wait(slow),
            }
        }
        RunEnd::Done
    }

    /// [`enqueue_now`](Self::enqueue_now) without waiting: a full buffer
    /// is `QueueFull`, unknown metadata `MetadataNotReady`.
    pub(crate) fn try_enqueue(
        &self,
        record: Record,
        reply: Option<ReplyTo<'_>>,
    ) -> Result<(), ProduceError> {
        match self.enqueue_now(record, reply, false, &mut Resume::default()) {
            Ok(r) => r,
            Err(_) => unreachable!("enqueue_now without wait never asks to wait"),
        }
    }

    /// The Produce request size `record` needs, when that is over
    /// `max.request.size`. A record well under the limit is let through on
    /// a quick upper bound, without sizing it exactly.
    #[inline]
    fn too_large(&self, record: &Record) -> Option<usize> {
        use crate::protocol::record_batch::{single_record_batch_size, RECORD_BATCH_OVERHEAD};
        let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len());
        // Length, attributes, timestamp and offset deltas, key and value
        // lengths and header count take at most 36 bytes as varints.
        let bound = RECORD_BATCH_OVERHEAD
            + 36
            + len(&record.key)
            + len(&record.value)
            + self.request_overhead
            + record.topic.len();
        if record.headers.is_empty() && bound <= self.config.max_request_size {
            return None;
        }
        let needed = single_record_batch_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        ) + self.request_overhead
            + record.topic.len();
        (needed > self.config.max_request_size).then_some(needed)
    }

    /// Chooses `record`'s partition in topic `tm` and appends it (the part
    /// of a produce call after the checks). `accepted` is when the producer
    /// took it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn place<'s>(
        &self,
        record: Record,
        reply: Option<ReplyTo<'s>>,
        tm: &crate::metadata::TopicMetadata,
        accepted: Mono,
        wait: bool,
        memory: &mut Option<tokio::sync::OwnedSemaphorePermit>,
        placed: &mut i32,
    ) -> Result<Result<(), ProduceError>, Slow<'s>> {
        let layout = TopicLayout {
            partition_count: tm.partition_count,
            available: &tm.available,
        };
        let (mut partition, sticky) = match (record.partition, record.key.as_deref()) {
            (Some(p), _) => {
                if p < 0 || p >= tm.partition_count {
                    let msg = format!(
                        "partition {p} does not exist; topic {:?} has {}",
                        record.topic.as_str(),
                        tm.partition_count
                    );
                    self.reject(record, reply, ErrorKind::UnknownPartition, msg, Some(p));
                    return Ok(Ok(()));
                }
                (p, false)
            }
            (None, key) => (
                self.partitioner.partition(&record.topic, key, &layout),
                key.is_none(),
            ),
        };

        let mut record = record;
        let mut reply = reply;
        let mut allow_new_batch = !sticky;
        let mut closed = Vec::new();
        loop {
            let result = self.acc.with_queue(record, partition, |queue, record| {
                let r = self.acc.append(
                    queue,
                    record,
                    reply,
                    accepted,
                    allow_new_batch,
                    memory,
                    &mut closed,
                );
                // A full batch that failed to encode (compression error).
                for failed in closed.drain(..).filter(Result::is_err) {
                    let reason = failed
                        .as_ref()
                        .err()
                        .map(|f| f.reason.clone())
                        .unwrap_or_default();
                    fail_unsent(
                        &self.acc,
                        failed,
                        ErrorKind::Compression,
                        |_| reason,
                        &self.stats,
                    );
                }
                r
            });
            match result {
                Ok(appended) => {
                    if appended == Appended::NewBatch {
                        if let Some(leader) = tm.leader(partition) {
                            self.wake_leader(leader);
                        }
                    }
                    *placed = partition;
                    return Ok(Ok(()));
                }
                Err(AppendError::Closed(r)) => return Ok(Err(ProduceError::Closed(r))),
                Err(AppendError::WouldOpenNewBatch(r, rp)) => {
                    // KIP-480: the sticky partition's batch is full; move on
                    // before opening a new one. The full batch is ready now.
                    if let Some(leader) = tm.leader(partition) {
                        self.wake_leader(leader);
                    }
                    self.partitioner.on_new_batch(&r.topic, partition, &layout);
                    partition = self.partitioner.partition(&r.topic, None, &layout);
                    allow_new_batch = true;
                    record = r;
                    reply = rp;
                }
                Err(AppendError::NeedMemory(r, rp, bytes)) => {
                    if !wait {
                        return Ok(Err(ProduceError::QueueFull(r)));
                    }
                    return Err(Slow::Memory(r, rp, bytes, partition, accepted));
                }
            }
        }
    }

    /// Wakes every subscription stream, so streams whose producer closed can
    /// end.
    pub(crate) fn wake_subscriptions(&self) {
        let mut subs = lock(&self.subscriptions);
        subs.retain(|w| match w.upgrade() {
            Some(s) => {
                s.wake();
                true
            }
            None => false,
        });
    }

    /// Waits until every batch opened before the call has been reported.
    pub(crate) async fn flush(&self) {
        let upto = self.acc.next_batch_id();
        self.flushing.fetch_add(1, Ordering::AcqRel);
        self.wake_all();
        loop {
            let changed = self.acc.incomplete_changed.notified();
            if self.acc.all_done_below(upto) || self.stopped_flag.load(Ordering::Acquire) {
                break;
            }
            // Batches may sit in queues whose leader is unknown; the
            // periodic wake covers them, so wait with a bound.
            let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
            self.wake_all();
        }
        self.flushing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Builds a [`Producer`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use courier::{Producer, Record};
/// let producer = Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .set("linger.ms", "10")
///     .set("compression.type", "lz4")
///     .build()?;
/// let delivered = producer.send(Record::to("orders").key("k").value("v")).await?;
/// println!("at offset {:?}", delivered.offset);
/// producer.close().await;
/// # Ok(()) }
/// ```
pub struct ProducerBuilder {
    config: ProducerConfig,
    error: Option<ConfigError>,
    partitioner: Option<Box<dyn Partitioner>>,
}

impl std::fmt::Debug for ProducerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ProducerBuilder {
    /// `bootstrap.servers`.
    pub fn bootstrap(self, servers: &str) -> Self {
        self.set("bootstrap.servers", servers)
    }

    /// Sets any property by its Java/librdkafka name. A bad value is
    /// reported by [`build`](Self::build), naming the property.
    pub fn set(mut self, property: &str, value: &str) -> Self {
        if self.error.is_none() {
            if let Err(e) = self.config.set(property, value) {
                self.error = Some(e);
            }
        }
        self
    }

    /// `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// `batch.size`.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes;
        self
    }

    /// `acks`.
    pub fn acks(mut self, acks: crate::config::Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// `compression.type`.
    pub fn compression(mut self, codec: crate::protocol::record_batch::Compression) -> Self {
        self.config.compression = codec;
        self
    }

    /// `delivery.timeout.ms`.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.config.delivery_timeout = timeout;
        self
    }

    /// `buffer.memory`.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.config.buffer_memory = bytes;
        self
    }

    /// A custom partitioner, instead of murmur2 + sticky.
    pub fn partitioner(mut self, p: impl Partitioner) -> Self {
        self.partitioner = Some(Box::new(p));
        self
    }

    /// The settings so far.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    fn inner(self) -> Result<Arc<Inner>, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.config.validate()?;
        let c = self.config;
        let client_id = StrBytes::from_string(c.client_id.clone());
        let closed = Arc::new(AtomicBool::new(false));
        let request_overhead = produce_overhead(&client_id);
        Ok(Arc::new(Inner {
            acc: Accumulator::new(
                c.batch_size,
                c.batch_num_messages,
                c.buffer_memory,
                c.compression,
                c.delivery_timeout,
                closed.clone(),
            ),
            client_id,
            metadata: ArcSwap::from_pointee(MetadataSnapshot::default()),
            brokers: DashMap::new(),
            broker_states: DashMap::new(),
            idem: c
                .idempotent()
                .then(crate::idempotence::Idempotence::default),
            partitioner: self
                .partitioner
                .unwrap_or_else(|| Box::new(DefaultPartitioner::new())),
            stats: Stats::default(),
            closed,
            subscriptions: std::sync::Mutex::new(Vec::new()),
            flushing: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            partitioner_addr: OnceLock::new(),
            supervisor_addr: OnceLock::new(),
            stopped: tokio::sync::Notify::new(),
            stopped_flag: AtomicBool::new(false),
            request_overhead,
            config: c,
        }))
    }

    /// Validates the settings and starts the producer's actors on a
    /// dedicated thread with its own actix system. Use this from plain
    /// tokio code, or any thread.
    pub fn build(self) -> Result<Producer, ConfigError> {
        let inner = self.inner()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let for_thread = inner.clone();
        std::thread::Builder::new()
            .name("courier-actors".into())
            .spawn(move || {
                let system = actix::System::new();
                system.block_on(async move {
                    ProducerSupervisor::launch(for_thread.clone(), true);
                    let _ = tx.send(());
                });
                let _ = system.run();
            })
            .expect("spawn the courier actor thread");
        rx.recv().expect("courier actor thread started");
        Ok(Producer::from_inner(inner))
    }

    /// Validates the settings and starts the producer's actors in the
    /// current actix system (call it from inside one, for example in an
    /// actix-web app), supervised there.
    pub fn start(self) -> Result<Producer, ConfigError> {
        let inner = self.inner()?;
        ProducerSupervisor::launch(inner.clone(), false);
        Ok(Producer::from_inner(inner))
    }
}

/// The size of a Produce request around one partition's batch, without the
/// topic name and the batch: the most any version we use needs, plus room
/// for the batch's length prefix.
fn produce_overhead(client_id: &StrBytes) -> usize {
    use crate::protocol::message::request_frame_size;
    use crate::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use crate::protocol::messages::{ProduceRequest, TopicName};
    let mut req = ProduceRequest::default();
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_static_str(""));
    let mut pd = PartitionProduceData::default();
    pd.records = Some(bytes::Bytes::new());
    td.partition_data.push(pd);
    req.topic_data.push(td);
    let range = crate::protocol::versions::supported(crate::protocol::ApiKey::Produce)
        .expect("Produce is supported");
    (range.min..=range.max)
        .filter_map(|v| request_frame_size(Some(client_id), v, &req).ok())
        .max()
        .unwrap_or(128)
        + 5 // the batch's length varint may grow to 5 bytes
        + 2 // the topic name's length varint may grow
}

/// Cancels everything when the last handle goes.
struct HandleGuard {
    inner: Arc<Inner>,
}

impl Drop for HandleGuard {
    fn drop(&mut self) {
        if !self.inner.closed.swap(true, Ordering::AcqRel) {
            if let Some(s) = self.inner.supervisor_addr.get() {
                s.do_send(Shutdown { cancel: true });
            }
        }
    }
}

/// A Kafka producer. Clone it freely: clones share one set of connections,
/// batches and actors. When the last clone (and subscriber) is dropped,
/// every record not yet acknowledged gets a `Cancelled` report.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
    _guard: Arc<HandleGuard>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").finish_non_exhaustive()
    }
}

impl Producer {
    /// A builder with the Java client's defaults.
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder {
            config: ProducerConfig::default(),
            error: None,
            partitioner: None,
        }
    }

    fn from_inner(inner: Arc<Inner>) -> Producer {
        Producer {
            _guard: Arc::new(HandleGuard {
                inner: inner.clone(),
            }),
            inner,
        }
    }

    /// Produces `record` with its one report going to `reply_to`, with no
    /// hop through the producer's actor (unlike the `Produce` message).
    /// Waits for metadata and buffer room; `Err` hands the record back
    /// unaccepted (no report then).
    pub async fn produce_to(
        &self,
        record: Record,
        reply_to: actix::Recipient<DeliveryReport>,
    ) -> Result<(), ProduceError> {
        self.inner
            .enqueue(record, Some(ReplyTo::Actor(reply_to)), true)
            .await
    }

    /// Produces `record` and waits for its delivery report.
    pub async fn send(&self, record: Record) -> Result<Delivered, DeliveryError> {
        let (tx, rx) = oneshot::channel();
        // The waiting part of enqueue is boxed (`enqueue_slow`), so a `send`
        // future waiting for its report stays small, which matters to
        // callers holding many of them at once.
        let cancelled = |e: ProduceError| DeliveryError {
            kind: ErrorKind::Cancelled,
            message: e.to_string(),
            partition: None,
            attempts: 0,
            record: e.into_record(),
        };
        // Only a 16-byte box is held across the await, not the first try's
        // result (which holds a record).
        let slow = match self.inner.enqueue_now(
            record,
            Some(ReplyTo::Oneshot(tx)),
            true,
            &mut Resume::default(),
        ) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => return Err(cancelled(e)),
            Err(slow) => Some(self.inner.enqueue_slow(slow)),
        };
        if let Some(slow) = slow {
            slow.await.map_err(cancelled)?;
        }
        match rx.await {
            Ok(report) => report.into_result(),
            // The router always answers an accepted record; a dropped
            // sender would be a bug, reported loudly rather than hung on.
            Err(_) => panic!("courier: a delivery report was lost; this is a bug"),
        }
    }

    /// Produces `record` with no report at all (fire and forget). Waits
    /// for metadata and for room in `buffer.memory`.
    pub async fn produce(&self, record: Record) -> Result<(), ProduceError> {
        let slow = match self
            .inner
            .enqueue_now(record, None, true, &mut Resume::default())
        {
            Ok(r) => return r,
            Err(slow) => self.inner.enqueue_slow(slow),
        };
        slow.await
    }

    /// Produces every record of `records`, in order, with no reports (fire
    /// and forget), as [`produce`](Self::produce) does one by one but with
    /// the per-call work (metadata snapshot, clock, topic lookup) done once
    /// per batch. Waits for metadata and memory as `produce` does.
    pub async fn produce_batch(&self, records: Vec<Record>) -> Result<(), BatchRejected> {
        let inner = &self.inner;
        let mut rest = records.into_iter();
        let mut taken = 0;
        loop {
            let mut budget = usize::MAX;
            let slow = match inner.place_run(&mut rest, None, &mut budget, &mut taken) {
                RunEnd::Done => return Ok(()),
                RunEnd::Failed(reason) => return Err(rejected(taken, reason, rest)),
                RunEnd::Wait(slow) => inner.enqueue_slow(slow),
            };
            match slow.await {
                Ok(()) => taken += 1,
                Err(reason) => return Err(rejected(taken, reason, rest)),
            }
        }
    }

    /// Like [`produce`](Self::produce), but never waits: a full buffer is
    /// `QueueFull`, unknown metadata is `MetadataNotReady`; the record is
    /// handed back either way.
    pub fn try_produce(&self, record: Record) -> Result<(), ProduceError> {
        self.inner.try_enqueue(record, None)
    }

    /// A new subscription: records produced through the returned
    /// [`Subscriber`] report to the returned stream, and only there.
    /// At most 10,000 reports may be outstanding (produced, not yet read).
    pub fn subscribe(&self, mode: ReportMode) -> (Subscriber, ReportStream) {
        self.subscribe_with_capacity(mode, 10_000)
    }

    /// [`subscribe`](Self::subscribe) with a chosen bound on outstanding
    /// reports.
    pub fn subscribe_with_capacity(
        &self,
        mode: ReportMode,
        capacity: usize,
    ) -> (Subscriber, ReportStream) {
        let shared = SubscriptionShared::new(mode, capacity.max(1), self.inner.closed.clone());
        self.inner
            .subscriptions
            .lock()
            .unwrap()
            .push(Arc::downgrade(&shared));
        (
            Subscriber {
                producer: self.clone(),
                shared: shared.clone(),
            },
            ReportStream::new(shared),
        )
    }

    /// The supervisor's address, for `Produce { record, reply_to }`.
    pub fn actor(&self) -> Addr<ProducerSupervisor> {
        self.inner
            .supervisor_addr
            .get()
            .expect("supervisor started")
            .clone()
    }

    /// Waits until every record produced before this call is reported.
    pub async fn flush(&self) {
        self.inner.flush().await
    }

    /// Stops accepting records, flushes, reports everything, and stops the
    /// actors.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.flush().await;
        if let Some(s) = self.inner.supervisor_addr.get() {
            let stopped = self.inner.stopped.notified();
            s.do_send(Shutdown { cancel: false });
            if !self.inner.stopped_flag.load(Ordering::Acquire) {
                let _ = tokio::time::timeout(Duration::from_secs(10), stopped).await;
            }
        }
        self.inner.wake_subscriptions();
    }

    /// Makes the connection actor for `broker` panic inside a handler, to
    /// test supervision. Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_connection_panic(&self, broker: i32) -> bool {
        match self.inner.brokers.get(&broker) {
            Some(a) => {
                a.do_send(crate::actors::msgs::InjectPanic);
                true
            }
            None => false,
        }
    }

    /// The idempotent producer's id and epoch, once the broker assigned
    /// them; `None` without idempotence.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.inner.idem.as_ref().and_then(|i| i.ready())
    }

    /// Broker ids with a live connection actor.
    pub fn connected_brokers(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .inner
            .brokers
            .iter()
            .map(|e| *e.key())
            .filter(|id| *id >= 0)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A snapshot of the producer's counters.
    pub fn stats(&self) -> StatsSnapshot {
        let buffered = self.inner.config.buffer_memory - self.inner.acc.pool.available_permits();
        let mut s = self.inner.stats.snapshot(buffered);
        s.produced = self.inner.rejected.load(Ordering::Relaxed) + self.inner.acc.appended();
        s.in_flight = s.produced.saturating_sub(s.delivered + s.failed);
        s
    }
}

/// Produces into one subscription. Clone it to share the subscription.
#[derive(Debug)]
pub struct Subscriber {
    producer: Producer,
    shared: Arc<SubscriptionShared>,
}

impl Clone for Subscriber {
    fn clone(&self) -> Self {
        self.shared.add_handle();
        Subscriber {
            producer: self.producer.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.drop_handle();
    }
}

impl Subscriber {
    /// Produces `record`; its report goes to this subscription's stream.
    /// Waits while the subscription's outstanding-report bound is reached.
    pub async fn produce(&self, record: Record) -> Result<(), ProduceError> {
        // Everything that may wait is boxed, so this future (which callers
        // build and move once per record) holds little more than the record.
        let slow = match self.produce_first(record) {
            Ok(r) => return r,
            Err(slow) => slow,
        };
        slow.await
    }

    /// The first, synchronous try of [`produce`](Self::produce); `Err` is
    /// the rest, for when it must wait for an outstanding-report permit,
    /// metadata or memory.
    #[inline(always)]
    fn produce_first(&self, record: Record) -> Result<Result<(), ProduceError>, SlowProduce<'_>> {
        use tokio::sync::TryAcquireError;
        match self.shared.outstanding.try_acquire() {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Ok(Err(ProduceError::Closed(record))),
            Err(TryAcquireError::NoPermits) => {
                return Err(Box::pin(async move {
                    match self.shared.outstanding.acquire().await {
                        Ok(p) => p.forget(),
                        Err(_) => return Err(ProduceError::Closed(record)),
                    }
                    self.produce_with_permit(record).await
                }))
            }
        }
        // Until the record is accepted, the permit is ours to give back,
        // also if the future is dropped mid-way.
        let permit = Permits::one(&self.shared);
        let inner = &self.producer.inner;
        let reply = Some(ReplyTo::Subscription(&self.shared));
        match inner.enqueue_now(record, reply, true, &mut Resume::default()) {
            Ok(r) => Ok(permit.settle(r)),
            Err(slow) => Err(Box::pin(async move {
                permit.settle(inner.enqueue_slow(slow).await)
            })),
        }
    }

    /// Produces with an outstanding-report permit already taken.
    async fn produce_with_permit(&self, record: Record) -> Result<(), ProduceError> {
        let permit = Permits::one(&self.shared);
        let r = self
            .producer
            .inner
            .enqueue(record, Some(ReplyTo::Subscription(&self.shared)), true)
            .await;
        permit.settle(r)
    }

    /// Produces every record of `records`, in order; each gets its report
    /// on this subscription's stream, as from [`produce`](Self::produce).
    ///
    /// Cheaper per record than `produce` in a loop: outstanding-report
    /// permits are taken for as many records at once as the bound allows,
    /// and the metadata snapshot, the clock and the topic lookup are done
    /// once per run instead of once per record. Waits, as `produce` does,
    /// for the bound, metadata and memory.
    ///
    /// ```no_run
    /// # async fn demo(producer: courier::Producer) {
    /// use courier::{Record, ReportMode};
    /// use futures::StreamExt;
    ///
    /// let (sub, mut reports) = producer.subscribe(ReportMode::All);
    /// let records = (0..1000).map(|i| Record::to("events").value(format!("{i}"))).collect();
    /// sub.produce_batch(records).await.unwrap();
    /// drop(sub);
    /// // Reports can be read one by one, or all that have arrived at once.
    /// while let Some(batch) = reports.next_batch().await {
    ///     for report in batch {
    ///         assert!(report.is_delivered());
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn produce_batch(&self, records: Vec<Record>) -> Result<(), BatchRejected> {
        let inner = &self.producer.inner;
        let outstanding = &self.shared.outstanding;
        let mut rest = records.into_iter();
        let mut taken = 0;
        while rest.len() > 0 {
            // Permits for as many records as the bound allows now, or wait
            // for one.
            let want = outstanding
                .available_permits()
                .min(rest.len())
                .clamp(1, u32::MAX as usize);
            let got = match outstanding.try_acquire_many(want as u32) {
                Ok(p) => {
                    p.forget();
                    want
                }
                Err(tokio::sync::TryAcquireError::Closed) => {
                    let first = rest.next().expect("not empty");
                    return Err(rejected(taken, ProduceError::Closed(first), rest));
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => match outstanding.acquire().await {
                    Ok(p) => {
                        p.forget();
                        1
                    }
                    Err(_) => {
                        let first = rest.next().expect("not empty");
                        return Err(rejected(taken, ProduceError::Closed(first), rest));
                    }
                },
            };
            // Permits not used by a taken record go back when this drops.
            let mut held = Permits {
                shared: &self.shared,
                count: got,
            };
            let slow =
                match inner.place_run(&mut rest, Some(&self.shared), &mut held.count, &mut taken) {
                    RunEnd::Done => continue,
                    RunEnd::Failed(reason) => {
                        drop(held);
                        return Err(rejected(taken, reason, rest));
                    }
                    RunEnd::Wait(slow) => inner.enqueue_slow(slow),
                };
            match slow.await {
                Ok(()) => {
                    held.count -= 1;
                    taken += 1;
                }
                Err(reason) => {
                    drop(held);
                    return Err(rejected(taken, reason, rest));
                }
            }
        }
        Ok(())
    }

    /// Like [`produce`](Self::produce) but never waits; `QueueFull` when
    /// the subscription's bound or `buffer.memory` is reached.
    pub fn try_produce(&self, record: Record) -> Result<(), ProduceError> {
        let Ok(permit) = self.shared.outstanding.try_acquire() else {
            return Err(ProduceError::QueueFull(record));
        };
        permit.forget();
        let permit = Permits::one(&self.shared);
        let reply = Some(ReplyTo::Subscription(&self.shared));
        permit.settle(self.producer.inner.try_enqueue(record, reply))
    }

    /// The producer this subscription belongs to.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }
}

/// Outstanding-report permits taken for records not yet accepted; dropping
/// returns them and wakes the stream, which may now be finished.
struct Permits<'a> {
    shared: &'a SubscriptionShared,
    count: usize,
}

impl<'a> Permits<'a> {
    /// The permit of one record.
    fn one(shared: &'a SubscriptionShared) -> Self {
        Permits { shared, count: 1 }
    }

    /// The one record's outcome: accepted keeps the permit (its report
    /// will return it), refused gives it back.
    fn settle(mut self, r: Result<(), ProduceError>) -> Result<(), ProduceError> {
        if r.is_ok() {
            self.count -= 1;
        }
        r
    }
}

impl Drop for Permits<'_> {
    fn drop(&mut self) {
        if self.count > 0 {
            self.shared.outstanding.add_permits(self.count);
            self.shared.wake();
        }
    }
}

fn rejected(
    accepted: usize,
    reason: ProduceError,
    rest: std::vec::IntoIter<Record>,
) -> BatchRejected {
    BatchRejected {
        accepted,
        reason,
        rest: rest.collect(),
    }
}

/// Fails every batch still queued (not in flight) with `Cancelled`.
pub(crate) fn cancel_queued(inner: &Inner) {
    for q in inner.acc.all_queues() {
        let (open, ready) = {
            let mut qi = lock(&q.inner);
            (qi.open.take(), std::mem::take(&mut qi.ready))
        };
        let mut batches: Vec<_> = ready.into_iter().map(Ok).collect();
        if let Some(open) = open {
            batches.push(inner.acc.close(open, &q));
        }
        for b in batches {
            fail_unsent(
                &inner.acc,
                b,
                ErrorKind::Cancelled,
                |_| "producer closed or dropped before the record was sent".into(),
                &inner.stats,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller may hold a million `send` futures at once; each must stay
    /// small (the enqueue state machine is boxed for its first poll only).
    #[test]
    fn a_pending_send_future_is_small() {
        let p = Producer::builder()
            .bootstrap("127.0.0.1:1")
            .build()
            .unwrap();
        let fut = p.send(Record::to("t").value("v"));
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 512, "send future is {size} bytes");
        drop(fut);
    }

    /// The README promises these can be shared across tasks and threads.
    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Producer>();
        check::<Subscriber>();
        fn send<T: Send>() {}
        send::<crate::subscription::ReportStream>();
    }
}
