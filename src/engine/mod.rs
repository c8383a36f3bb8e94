//! The shared core: the state producer handles and actors share, and the
//! operations on it that are not an actor's (taking records, flushing,
//! cancelling what is queued).
//!
//! ```text
//!  Producer::send / produce / Subscriber::produce          Produce{record, reply_to}
//!        │  (no actor hop)                                      │ (actor message: the supervisor's
//!        │                                                      │  handler calls enqueue_now; a record
//!        │                                                      │  that must wait goes to a detached
//!        ▼                                                      ▼  task running enqueue_slow)
//!  Engine::enqueue_now / enqueue_cached ── metadata (arc-swap | a Subscriber's SnapshotCache) ── place ── Accumulator::append
//!        │ what must wait (metadata, buffer.memory, room under queue.buffering.max.messages): enqueue_slow, boxed
//!        │ a new batch: one wake (ActorTree::wake_by), none when the leader's drain timer fires by its
//!        │ linger end; a new batch behind a full one: ActorTree::wake
//!        ▼
//!  BrokerConnection (leader) ── drain: batches → Produce request ── socket
//!        │ response (acks=0: none; the batches are settled delivered once the request is handed over)
//!        ▼
//!  delivery::router::route ── per batch: oneshot / subscription stream / actor
//! ```
//!
//! The engine sits below the actors: they hold an `Arc<Engine>`; the
//! engine reaches them only through the [`ActorTree`] trait. It sits
//! above batching and delivery, which it drives.

mod actor_tree;
pub(crate) mod answer;
pub(crate) mod enqueue;
pub(crate) mod error;
mod slow;
#[cfg(feature = "opentelemetry")]
mod traced;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;

pub(crate) use actor_tree::ActorTree;

use crate::batching::accumulator::Accumulator;
use crate::batching::batch::SealFailure;
use crate::batching::queue::PartitionQueue;
use crate::batching::sizing::RequestSizing;
use crate::config::ProducerConfig;
use crate::delivery::subscription::SubscriptionShared;
use crate::idempotence::Idempotence;
use crate::metadata::MetadataSnapshot;
use crate::partitioner::Partitioner;
use crate::report::ErrorKind;
use crate::stats::{Stats, StatsSnapshot};
use crate::sync::lock;
use crate::transaction::Transactions;

/// State shared by producer handles and actors. Lives as long as any of
/// them.
pub(crate) struct Engine {
    config: ProducerConfig,
    client_id: StrBytes,
    acc: Accumulator,
    /// The latest metadata, published by the partitioner actor. In an
    /// `Arc` of its own so that a handle's [`SnapshotCache`] can watch it
    /// without keeping the engine alive.
    metadata: Arc<ArcSwap<MetadataSnapshot>>,
    /// The idempotent producer's id and epoch; `None` without idempotence.
    idem: Option<Idempotence>,
    /// The transactional producer's state; `None` without `transactional.id`.
    txn: Option<Transactions>,
    /// The partitioning strategy (the built-in one, as `partitioner`
    /// says, or the user's); runs in the producing thread. Not the
    /// partitioner *actor*, which is the metadata cache.
    partitioner: Box<dyn Partitioner>,
    /// Whether `partitioner` is the built-in one with KIP-480 sticky
    /// keyless records (every `partitioner` value but `random`): then a
    /// keyless record with no partition reads its topic's sticky slot
    /// itself, as the partitioner would, without the call, and a run of
    /// keyless records shares the open batch of the first.
    default_partitioner: bool,
    /// Whether an empty key is placed as a missing one is
    /// (`partitioner=consistent_random`).
    empty_key_is_keyless: bool,
    /// `partitioner.ignore.keys` with the built-in sticky partitioner:
    /// every key is placed as a missing one is.
    ignore_keys: bool,
    /// KIP-794: the partitioner actor was asked to weigh the partitions
    /// and has not yet begun (`want_weights`, `weights_begun`): one
    /// request per refresh period, however many partitions move. Here,
    /// not in the actor, so a restarted actor starts it again.
    weights_wanted: AtomicBool,
    stats: Stats,
    closed: Arc<AtomicBool>,
    /// Every subscription, to wake their streams when the producer closes.
    subscriptions: Mutex<Vec<Weak<SubscriptionShared>>>,
    /// Active `flush` calls: while non-zero, linger is ignored.
    flushing: AtomicUsize,
    /// Produce calls waiting for room (`buffer.memory` or a subscription's
    /// bound; `starved`): while non-zero, a connection with no request in
    /// flight ignores linger (one with requests in flight lets their
    /// responses make the room, so its batches keep filling).
    starved: AtomicUsize,
    /// Records rejected before reaching a batch (they still get a report);
    /// with the accumulator's per-partition counts, the `produced` count.
    rejected: AtomicU64,
    /// Set once a `Shutdown` has been sent to the supervisor (by `close`,
    /// or by the last handle's drop): exactly one is sent, even when a
    /// `close` is abandoned half-way.
    shutdown_sent: AtomicBool,
    /// Set when the actor system has stopped.
    stopped: Notify,
    stopped_flag: AtomicBool,
    /// The runtime the actors run on (set when they start): the timers of
    /// the producer's own futures live there, so callers need no runtime.
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    /// The thread the actors run on (set when they start): a blocking call
    /// made there would wait for itself.
    actor_thread: std::sync::OnceLock<std::thread::ThreadId>,
    /// What keeps a shared actor thread running while this producer lives
    /// (`ActorThread`; unset when the producer has a thread of its own or
    /// runs in the application's actix system).
    thread_keeper: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// Makes the supervisor's next delivery-timeout sweep panic (tests of
    /// its guard only).
    #[cfg(feature = "fault-injection")]
    inject_sweep_panic: AtomicBool,
    /// The supervisor's tick in milliseconds (tests that check a path
    /// needs no periodic work set it very long).
    #[cfg(feature = "fault-injection")]
    tick_ms: AtomicU64,
    /// The supervisor's tick sleeps (nothing was left to report): a new
    /// batch rouses it (`rouse_supervisor`).
    supervisor_asleep: AtomicBool,
    /// TLS and SASL for every connection (`None`: plaintext).
    security: Option<Arc<crate::security::Security>>,
    /// Looks up broker host names on every connect attempt.
    resolver: crate::resolve::Resolver,
    /// Bytes of records from `Produce` messages waiting for metadata or
    /// memory (bounded by `buffer.memory`).
    actor_path_waiting: AtomicUsize,
    /// Records from `Produce` messages waiting (bounded by
    /// `queue.buffering.max.messages`).
    actor_path_waiting_records: AtomicUsize,
    /// Whether a record fits in a Produce request at all.
    sizing: RequestSizing,
    /// The actor tree, as far as the engine needs it.
    actors: Arc<dyn ActorTree>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How often the supervisor runs its periodic work (restarting dead
/// actors, delivery timeouts, waking connections for retries). Nothing a
/// new producer's first record needs waits for it.
pub(crate) const SUPERVISOR_TICK: Duration = Duration::from_millis(100);

impl Engine {
    /// The producer's settings.
    pub(crate) fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// `client.id`, as sent in request headers.
    pub(crate) fn client_id(&self) -> &StrBytes {
        &self.client_id
    }

    /// The partition queues and the bounds on what they hold.
    pub(crate) fn acc(&self) -> &Accumulator {
        &self.acc
    }

    /// The latest metadata snapshot's cell: loaded per produce call,
    /// replaced by the partitioner actor.
    pub(crate) fn metadata(&self) -> &Arc<ArcSwap<MetadataSnapshot>> {
        &self.metadata
    }

    /// The idempotent producer's id and sequences (`None`: not
    /// idempotent).
    pub(crate) fn idem(&self) -> Option<&Idempotence> {
        self.idem.as_ref()
    }

    /// The transactional producer's state (`None`: not transactional).
    pub(crate) fn txn(&self) -> Option<&Transactions> {
        self.txn.as_ref()
    }

    /// The producer's counters.
    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Whether the producer takes no more records (closing, or closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The closed flag, for a subscription to share: its stream ends
    /// once the producer has closed and its reports are read.
    pub(crate) fn closed_flag(&self) -> Arc<AtomicBool> {
        self.closed.clone()
    }

    /// Bytes and records of `Produce` messages waiting for metadata or
    /// room (bounded by `buffer.memory` and
    /// `queue.buffering.max.messages`).
    pub(crate) fn actor_path_waiting(&self) -> (&AtomicUsize, &AtomicUsize) {
        (&self.actor_path_waiting, &self.actor_path_waiting_records)
    }

    /// Whether a test asked the supervisor's next delivery-timeout sweep
    /// to panic (asked once, answered once).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn take_injected_sweep_panic(&self) -> bool {
        self.inject_sweep_panic.swap(false, Ordering::AcqRel)
    }

    /// Makes the supervisor's next delivery-timeout sweep panic (tests of
    /// its guard only).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn plant_sweep_panic(&self) {
        self.inject_sweep_panic.store(true, Ordering::Release);
    }

    /// Reports each record of a batch that failed to encode (a
    /// compression error) `ErrorKind::Compression`, handed back.
    pub(crate) fn fail_seal(&self, failed: SealFailure) {
        let reason = failed.reason.clone();
        let kind = ErrorKind::Compression;
        self.acc
            .fail_unsent(Err(failed), kind, |_| reason, &self.stats);
    }

    /// Whether linger is over for every batch: a `flush` is under way, the
    /// producer is closing, or produce calls wait for room (`starved`)
    /// and `nothing_in_flight` (a connection with requests in flight lets
    /// their answers make the room, so its batches keep filling).
    pub(crate) fn linger_over(&self, nothing_in_flight: bool) -> bool {
        self.flushing.load(Ordering::Acquire) > 0
            || self.closed.load(Ordering::Acquire)
            || (self.starved.load(Ordering::Acquire) > 0 && nothing_in_flight)
    }

    /// True for the one caller that is to send the supervisor its
    /// `Shutdown` (`close`, or the last handle's drop): exactly one is
    /// sent, even when a `close` is abandoned half-way.
    pub(crate) fn claim_shutdown(&self) -> bool {
        !self.shutdown_sent.swap(true, Ordering::AcqRel)
    }

    /// A `Shutdown` was sent, or the actors have stopped.
    pub(crate) fn shutting_down(&self) -> bool {
        self.stopped_flag.load(Ordering::Acquire) || self.shutdown_sent.load(Ordering::Acquire)
    }

    /// The actor system has stopped: wakes whoever waits for it.
    pub(crate) fn mark_stopped(&self) {
        self.stopped_flag.store(true, Ordering::Release);
        self.stopped.notify_waiters();
    }

    /// Whether the actor system has stopped.
    pub(crate) fn has_stopped(&self) -> bool {
        self.stopped_flag.load(Ordering::Acquire)
    }

    /// Resolves when the actor system stops (take it before checking
    /// [`has_stopped`](Self::has_stopped), so that no stop falls between).
    pub(crate) fn when_stopped(&self) -> tokio::sync::futures::Notified<'_> {
        self.stopped.notified()
    }

    /// Records the runtime and thread the actors run on, from that thread:
    /// the producer's futures set their timers there, and a blocking call
    /// made on that thread would wait for itself.
    pub(crate) fn bind_actor_thread(&self) {
        let _ = self.runtime.set(tokio::runtime::Handle::current());
        let _ = self.actor_thread.set(std::thread::current().id());
    }

    /// Keeps `keeper` (a shared actor thread's) alive as long as this
    /// engine: the thread stops once no producer on it is left.
    pub(crate) fn keep_thread(&self, keeper: Arc<dyn std::any::Any + Send + Sync>) {
        let _ = self.thread_keeper.set(keeper);
    }

    /// The thread the actors run on, once they have started.
    #[cfg(test)]
    pub(crate) fn actor_thread_id(&self) -> Option<std::thread::ThreadId> {
        self.actor_thread.get().copied()
    }

    /// Whether this is the thread the actors run on.
    pub(crate) fn on_actor_thread(&self) -> bool {
        self.actor_thread.get() == Some(&std::thread::current().id())
    }

    /// TLS and SASL for every connection (`None`: plaintext).
    pub(crate) fn security(&self) -> Option<Arc<crate::security::Security>> {
        self.security.clone()
    }

    /// Who looks up broker host names.
    pub(crate) fn resolver(&self) -> crate::resolve::Resolver {
        self.resolver.clone()
    }

    /// Sets the supervisor's tick (tests that check a path needs no
    /// periodic work set it very long).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn set_supervisor_tick(&self, tick: Duration) {
        self.tick_ms
            .store(tick.as_millis() as u64, Ordering::Relaxed);
    }

    /// The supervisor marks its tick asleep (`true`, before its last look
    /// at the incomplete batches) or awake.
    pub(crate) fn set_supervisor_asleep(&self, asleep: bool) {
        self.supervisor_asleep.store(asleep, Ordering::SeqCst);
    }

    /// Whether the supervisor's tick sleeps (lib tests).
    #[cfg(test)]
    pub(crate) fn supervisor_asleep(&self) -> bool {
        self.supervisor_asleep.load(Ordering::SeqCst)
    }

    /// A batch opened while the supervisor's tick slept: wake it (once;
    /// the producer that takes the mark sends the one `Rouse`).
    #[cold]
    #[inline(never)]
    pub(crate) fn rouse_supervisor(&self) {
        if self.supervisor_asleep.swap(false, Ordering::SeqCst) {
            self.actors.rouse();
        }
    }

    /// The supervisor's tick (`SUPERVISOR_TICK`, unless a test changed it).
    pub(crate) fn supervisor_tick(&self) -> Duration {
        #[cfg(feature = "fault-injection")]
        return Duration::from_millis(self.tick_ms.load(Ordering::Relaxed));
        #[cfg(not(feature = "fault-injection"))]
        SUPERVISOR_TICK
    }

    /// The engine for a validated `config`, driving `actors` (whose
    /// actors are started after this, with the returned `Arc`).
    /// `partitioner`: a custom one, or `None` for the default;
    /// `interceptors`: the builder's, in order.
    pub(crate) fn new(
        config: ProducerConfig,
        partitioner: Option<Box<dyn Partitioner>>,
        actors: Arc<dyn ActorTree>,
        security: Option<Arc<crate::security::Security>>,
        interceptors: crate::interceptor::Interceptors,
        resolver: crate::resolve::Resolver,
    ) -> Arc<Engine> {
        let c = config;
        let client_id = StrBytes::from_string(c.client_id.clone());
        let closed = Arc::new(AtomicBool::new(false));
        let sizing = RequestSizing::new(&client_id, c.max_request_size);
        // A batch must fit a request (the Java client lets a batch.size
        // over max.request.size make requests the broker refuses).
        let batch_size = c.batch_size.min(sizing.batch_cap());
        if batch_size < c.batch_size {
            tracing::info!(
                batch_size = c.batch_size,
                max_request_size = c.max_request_size,
                capped_to = batch_size,
                "batch.size capped so that a batch fits a request"
            );
        }
        let txn = c
            .transactional_id
            .clone()
            .map(|id| Transactions::new(id, c.transaction_timeout));
        let mut acc = Accumulator::new(
            batch_size,
            c.max_request_size,
            c.batch_num_messages,
            c.buffer_memory,
            c.queue_buffering_max_messages,
            c.codec(),
            c.delivery_timeout,
            closed.clone(),
        );
        if let Some(t) = &txn {
            acc.set_transaction_gate(t.gate.clone());
        }
        let mut stats = Stats::new(&c.client_id);
        stats.interceptors = interceptors;
        acc.set_metrics(stats.metrics.clone());
        Arc::new(Engine {
            acc,
            txn,
            sizing,
            client_id,
            metadata: Arc::new(ArcSwap::from_pointee(MetadataSnapshot::default())),
            idem: c
                .idempotent()
                .then(|| Idempotence::new(c.retry_backoff, c.retry_backoff_max)),
            default_partitioner: partitioner.is_none() && c.partitioner.sticks_keyless(),
            empty_key_is_keyless: partitioner.is_none() && c.partitioner.empty_key_is_keyless(),
            ignore_keys: partitioner.is_none()
                && c.partitioner.sticks_keyless()
                && c.partitioner_ignore_keys,
            partitioner: partitioner.unwrap_or_else(|| {
                Box::new(crate::partitioner::DefaultPartitioner::with(c.partitioner))
            }),
            stats,
            closed,
            subscriptions: Mutex::new(Vec::new()),
            flushing: AtomicUsize::new(0),
            starved: AtomicUsize::new(0),
            weights_wanted: AtomicBool::new(false),
            rejected: AtomicU64::new(0),
            shutdown_sent: AtomicBool::new(false),
            stopped: Notify::new(),
            stopped_flag: AtomicBool::new(false),
            runtime: std::sync::OnceLock::new(),
            actor_thread: std::sync::OnceLock::new(),
            thread_keeper: std::sync::OnceLock::new(),
            #[cfg(feature = "fault-injection")]
            inject_sweep_panic: AtomicBool::new(false),
            #[cfg(feature = "fault-injection")]
            tick_ms: AtomicU64::new(SUPERVISOR_TICK.as_millis() as u64),
            supervisor_asleep: AtomicBool::new(false),
            security,
            resolver,
            actor_path_waiting: AtomicUsize::new(0),
            actor_path_waiting_records: AtomicUsize::new(0),
            actors,
            config: c,
        })
    }

    /// The transactional producer cannot go on (fenced, or refused): no
    /// record is taken or sent any more, and every record not yet sent
    /// fails with `kind` (in-flight ones get their own answers).
    pub(crate) fn fail_transactional(&self, kind: ErrorKind, message: &str) {
        let Some(txn) = &self.txn else {
            return;
        };
        if let Some(ending) = txn.set_fatal(kind, message.to_string()) {
            tracing::error!(transactional_id = %txn.id, %kind, message, "transactional producer fenced");
            self.acc.barrier();
            self.fail_queued(kind, message);
            txn.announce(ending, true);
        }
    }

    /// Every connection actor should drain.
    pub(crate) fn wake_all(&self) {
        self.actors.wake_all();
    }

    /// `queue` was on the drain list of a connection that does not lead
    /// it (a producer listed it under older metadata): on its leader's
    /// list now, and that connection woken.
    pub(crate) fn relist(&self, leader: i32, queue: &Arc<crate::batching::queue::PartitionQueue>) {
        self.actors.list(leader, queue);
        self.actors.wake(leader);
    }

    /// Remembers a subscription, to wake its stream when the producer
    /// closes.
    pub(crate) fn register_subscription(&self, shared: &Arc<SubscriptionShared>) {
        lock(&self.subscriptions).push(Arc::downgrade(shared));
    }

    /// Closes every subscription (the producer is closed or dropped): a
    /// producer waiting for a subscription's bound gets `Closed`, and each
    /// stream is woken so it can end once its reports are read.
    pub(crate) fn close_subscriptions(&self) {
        let mut subs = lock(&self.subscriptions);
        subs.retain(|w| match w.upgrade() {
            Some(s) => {
                s.close();
                true
            }
            None => false,
        });
    }

    /// Takes no more records: produce calls get `Closed`, including those
    /// waiting for `buffer.memory` (its pool is closed).
    pub(crate) fn close_intake(&self) {
        self.closed.store(true, Ordering::Release);
        self.acc.pool.close();
        self.acc.records.close();
        // From here no transaction starts committing. One open (or
        // abortable, or aborting) never commits: `close` aborts it, or the
        // coordinator does when it times out; transactional reports say so
        // now. One being committed is left to finish (`close` finishes it)
        // and announces its own outcome.
        if let Some(t) = &self.txn {
            match t.closing() {
                None | Some(crate::transaction::Phase::Committing) => {}
                Some(_) => t.announce(crate::transaction::Ending::Aborted, true),
            }
        }
    }

    /// The transaction `close` (or the last handle's drop) could not end:
    /// transactional reports are told how it will end, as far as the
    /// producer knows (`Transactions::left_at_close`), so none waits for an
    /// end that never comes.
    pub(crate) fn announce_unfinished(&self) {
        if let Some(t) = &self.txn {
            if let Some(how) = t.left_at_close() {
                t.announce(how, true);
            }
        }
    }

    /// Repairs what sealed batches dropped unsettled left behind (see
    /// `batching::batch::Graveyard`; their reports were paid by `Owed`'s
    /// drop): each leaves its queue's in-flight count and unacknowledged
    /// set and is marked done, so flushes do not wait for it and the
    /// partition sends again. Called by the supervisor's periodic sweep.
    pub(crate) fn bury_abandoned(&self) {
        let dropped = self.acc.graveyard.take();
        if dropped.is_empty() {
            return;
        }
        for b in &dropped {
            let q = self.acc.queue(&b.topic, b.partition);
            let mut qs = lock(&q.state);
            if b.in_flight {
                qs.in_flight = qs.in_flight.saturating_sub(1);
            }
            qs.unacked.remove(&b.id);
            drop(qs);
            self.acc.batch_done(b.id);
        }
        self.wake_all();
    }

    /// `tokio::time::timeout` with its timer on the actors' runtime, so
    /// that a producer future may be polled from any thread and executor
    /// (`futures::executor::block_on` on a plain thread, say), not only
    /// inside a tokio runtime with timers.
    pub(crate) fn timeout<F: std::future::Future>(
        &self,
        d: Duration,
        f: F,
    ) -> tokio::time::Timeout<F> {
        let _on_actors_runtime = self.runtime.get().map(|h| h.enter());
        tokio::time::timeout(d, f)
    }

    /// Waits until every batch opened before the call has been reported.
    pub(crate) async fn flush(&self) {
        /// Ends this flush's "send lingering batches now" even when the
        /// flush future is dropped half-way (a bounded flush).
        struct Flushing<'a>(&'a AtomicUsize);
        impl Drop for Flushing<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let upto = self.acc.next_batch_id();
        self.flushing.fetch_add(1, Ordering::AcqRel);
        let _flushing = Flushing(&self.flushing);
        self.wake_all();
        loop {
            let changed = self.acc.incomplete_changed.notified();
            if self.acc.all_done_below(upto) || self.stopped_flag.load(Ordering::Acquire) {
                break;
            }
            // Batches may sit in queues whose leader is unknown; the
            // periodic wake covers them, so wait with a bound.
            let _ = self.timeout(Duration::from_millis(50), changed).await;
            self.wake_all();
        }
    }

    /// KIP-794: a topic's sticky partition moved. With the adaptive
    /// partitioner, the partitioner actor is asked to weigh the partitions
    /// again, unless it was asked and has not yet begun. Per move (a
    /// batch's worth of records), not per record.
    pub(crate) fn want_weights(&self) {
        if self.config.partitioner_adaptive
            && !self.weights_wanted.load(Ordering::Relaxed)
            && !self.weights_wanted.swap(true, Ordering::AcqRel)
        {
            self.actors.weigh_partitions();
        }
    }

    /// The partitioner actor begins weighing (or has started, and was
    /// maybe never asked): moves from here on ask again.
    pub(crate) fn weights_begun(&self) {
        self.weights_wanted.store(false, Ordering::Release);
    }

    /// Awaits `wait`, a produce call's wait for room (`buffer.memory`, a
    /// subscription's bound), with lingering batches sendable at once
    /// meanwhile on connections with nothing in flight: waiting for
    /// `linger.ms` there would only hold up the records whose reports or
    /// memory the caller waits for. The Java client's accumulator does the
    /// same while a thread waits for its buffer pool ("exhausted"). Where
    /// requests are in flight, their responses free the room, and batches
    /// keep filling meanwhile: sending every lingering batch at each
    /// response instead made batches of one or two records on a keyed
    /// topic of 1,000 partitions (a subscription's 10,000 outstanding
    /// reports are 10 a partition), 25 times slower on Tansu. Per wait, not
    /// per record.
    pub(crate) async fn starved<F: std::future::Future>(&self, wait: F) -> F::Output {
        /// Ends "send lingering batches now" also when the wait is dropped.
        struct Starved<'a>(&'a AtomicUsize);
        impl Drop for Starved<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.starved.fetch_add(1, Ordering::AcqRel);
        let _starved = Starved(&self.starved);
        self.wake_all();
        wait.await
    }

    /// Fails every batch still queued (not in flight) with `Cancelled`.
    pub(crate) fn cancel_queued(&self) {
        self.fail_queued(
            ErrorKind::Cancelled,
            "producer closed or dropped before the record was sent",
        );
    }

    /// Fails every batch waiting to be sent (open or sealed, not in
    /// flight) with `kind` and `message`.
    pub(crate) fn fail_queued(&self, kind: ErrorKind, message: &str) {
        for q in self.acc.all_queues() {
            self.fail_waiting(&q, kind, message);
        }
    }

    /// Fails what waits in `q` (its open batch and its sealed ones not in
    /// flight) with `kind` and `message`; returns whether `q` still has
    /// batches in flight.
    pub(crate) fn fail_waiting(
        &self,
        q: &Arc<PartitionQueue>,
        kind: ErrorKind,
        message: &str,
    ) -> bool {
        let (open, ready, in_flight) = {
            let mut qs = lock(&q.state);
            (
                qs.open.take(),
                std::mem::take(&mut qs.ready),
                qs.in_flight > 0,
            )
        };
        let mut batches: Vec<_> = ready.into_iter().map(Ok).collect();
        if let Some(open) = open {
            batches.push(self.acc.seal(open, q));
        }
        for b in batches {
            self.acc
                .fail_unsent(b, kind, |_| message.to_string(), &self.stats);
        }
        in_flight
    }

    /// `topic` was deleted and re-created (a new topic id). Its leaders
    /// know nothing of this producer, so each partition takes one batch at
    /// a time again until one is acknowledged (`QueueState::confirmed`).
    pub(crate) fn topic_recreated(&self, topic: &str) {
        for q in self
            .acc
            .all_queues()
            .iter()
            .filter(|q| q.topic.as_str() == topic)
        {
            lock(&q.state).confirmed = None;
        }
    }

    /// Fails what waits in `topic`'s partitions `count..` (gone since the
    /// topic was re-created with `count` partitions) with
    /// `UnknownPartition`, rather than at `delivery.timeout.ms`. Returns
    /// whether a batch of those partitions is still in flight: it comes
    /// back to its queue when its request fails, and the next call fails
    /// it.
    pub(crate) fn fail_vanished(&self, topic: &str, count: i32) -> bool {
        let mut in_flight = false;
        for q in self.acc.all_queues() {
            if q.topic.as_str() != topic || q.partition < count {
                continue;
            }
            let message = format!(
                "partition {} of topic {topic:?} no longer exists: the topic was re-created with {count} partition(s)",
                q.partition
            );
            in_flight |= self.fail_waiting(&q, ErrorKind::UnknownPartition, &message);
        }
        in_flight
    }

    /// Sets the published gauges from the numbers `stats_snapshot()` shows (the
    /// supervisor's tick: they change per record, so they are sampled).
    #[cfg(feature = "metrics")]
    pub(crate) fn publish_gauges(&self) {
        let s = self.stats_snapshot();
        self.stats.metrics.gauges(s.buffered_bytes, s.in_flight);
    }

    /// A snapshot of the counters.
    pub(crate) fn stats_snapshot(&self) -> StatsSnapshot {
        let buffered = self.config.buffer_memory - self.acc.pool.available_permits();
        let produced = self.rejected.load(Ordering::Relaxed) + self.acc.appended();
        let mut snapshot = self.stats.snapshot(produced, buffered);
        snapshot.transaction_version = self.txn().and_then(|t| t.version()).map(|v| v.number());
        snapshot
    }
}
