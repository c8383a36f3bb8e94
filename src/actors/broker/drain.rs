//! Draining: taking the batches of the partitions this broker leads, in
//! order, into Produce requests, while in-flight room remains; stamping
//! idempotent batches with their sequences; writing each request around
//! the batches' own bytes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Instant;

use actix::prelude::*;
use tokio::sync::mpsc;

use crate::actors::broker::state::InFlight;
use crate::actors::broker::{BrokerConnection, ConnState};
use crate::actors::msgs::{AddPartitionsWanted, EnsureProducerId};
use crate::batching::batch::SealedBatch;
use crate::batching::queue::{PartitionQueue, QueueState};
use crate::clock::Mono;
use crate::delivery::settlement::Outcome;
use crate::protocol::produce::{encode, frame_size, PartitionData, ProduceHeader, TopicData};
use crate::protocol::versions::{ApiVersions, TransactionVersion};
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::sync::lock;

/// What a drain may send under, checked once per drain
/// (`BrokerConnection::drain_gates`).
struct DrainGates {
    /// The connection's writer task, and the versions agreed on it.
    tx: mpsc::UnboundedSender<Vec<bytes::Bytes>>,
    versions: ApiVersions,
    /// The producer id and epoch batches are stamped with (idempotent).
    idem: Option<(i64, i16)>,
    /// The open transaction (transactional).
    txn_generation: Option<u64>,
    /// The transaction protocol it speaks (transactional).
    txn_version: TransactionVersion,
    /// Linger is over for every batch.
    flushing: bool,
    /// `max.in.flight.requests.per.connection` is 1.
    strict_order: bool,
}

/// What a drain learns on its way through the queues.
#[derive(Default)]
struct DrainNotes {
    /// Partitions with batches that the open transaction lacks.
    wanted: Vec<(Topic, i32)>,
    /// Transaction version 2: a partition joined the transaction with a
    /// batch of this drain (Produce v12 adds it).
    joined: bool,
    /// When the first batch not due yet is (a backoff, a linger).
    next_wake: Option<Instant>,
}

/// What a drain's look at a queue found (`take_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visit {
    /// More to send than this request took: looked at again for the
    /// drain's next request.
    Again,
    /// Holds a batch (lingering, backing off, waiting for an answer or in
    /// flight): on the list for the next drain.
    Keep,
    /// Holds nothing (and is unlisted now: the append that opens its next
    /// batch lists it again), or was looked at already in this pass: off
    /// the list.
    Drop,
}

impl Visit {
    /// A queue with nothing to send now: kept while it holds a batch,
    /// else unlisted and dropped.
    fn holding(qi: &mut QueueState) -> Visit {
        if qi.holds_batch() {
            Visit::Keep
        } else {
            qi.listed = false;
            Visit::Drop
        }
    }
}

impl DrainNotes {
    fn wake_at(&mut self, at: Instant) {
        self.next_wake = Some(self.next_wake.map_or(at, |w| w.min(at)));
    }
}

impl BrokerConnection {
    /// Moves sendable batches of the partitions this broker leads into
    /// Produce requests, while in-flight room remains.
    pub(super) fn drain(&mut self, ctx: &mut Context<Self>) {
        if self.node_id < 0 || self.retired {
            return; // bootstrap connections carry metadata only
        }
        // No timer counts as set while the queues are read: a batch opened
        // meanwhile wakes this actor again (`BrokerState::timer_at`).
        self.shared.timer_at.store(0, Ordering::SeqCst);
        self.drain_queues(ctx);
        self.publish_timer();
    }

    /// Tells producers when the drain timer fires (`BrokerState::timer_at`).
    pub(super) fn publish_timer(&self) {
        if self.node_id < 0 || self.retired {
            return;
        }
        let at = self.wake_at.as_ref().map_or(0, |(at, _)| {
            Mono::now()
                .plus(at.saturating_duration_since(Instant::now()))
                .nanos()
                .max(1)
        });
        self.shared.timer_at.store(at, Ordering::SeqCst);
    }

    /// The queues this drain looks at: those that held a batch at the
    /// last look, and those producers opened a batch on since
    /// (`BrokerState::opened`), so a drain's cost follows the partitions
    /// with something to send, not every partition ever used. After a
    /// metadata change (or a restart, or at the first drain) every queue
    /// this broker leads instead: partitions may have moved here. A
    /// listed queue this broker does not lead (listed under older
    /// metadata) goes to its leader's list.
    fn walk_list(&mut self) -> Vec<Arc<PartitionQueue>> {
        let engine = self.engine.clone();
        let snapshot = engine.metadata().load_full();
        // Swapped with the spare list, so producers push onto room an
        // earlier drain made: no allocation per listed batch.
        let mut opened = std::mem::take(&mut self.list.spare);
        std::mem::swap(&mut opened, &mut *lock(&self.shared.opened));
        let leader = |q: &PartitionQueue| {
            snapshot
                .topics
                .get(&q.topic)
                .and_then(|t| t.leader(q.partition))
        };
        let full = !matches!(&self.list.walked, Some(s) if Arc::ptr_eq(s, &snapshot));
        let mut walk = if full {
            self.list.active.clear();
            let mine: Vec<_> = engine
                .acc()
                .all_queues()
                .into_iter()
                .filter(|q| leader(q) == Some(self.node_id))
                .collect();
            self.list.walked = Some(snapshot.clone());
            mine
        } else {
            std::mem::take(&mut self.list.active)
        };
        for q in opened.drain(..) {
            match leader(&q) {
                // The full walk has it already.
                Some(me) if me == self.node_id && full => {}
                Some(me) if me == self.node_id => walk.push(q),
                Some(other) => engine.relist(other, &q),
                // No leader: the metadata that names one has every
                // connection walk all its queues.
                None => {}
            }
        }
        self.list.spare = opened;
        walk
    }

    /// Fills Produce requests from the queues this broker leads, one after
    /// the other, while in-flight room remains; asks the transaction
    /// actor for partitions the open transaction lacks; sets the timer
    /// for the first batch not due yet.
    fn drain_queues(&mut self, ctx: &mut Context<Self>) {
        let Some(gates) = self.drain_gates(ctx) else {
            return;
        };
        let engine = self.engine.clone();
        let walk = self.walk_list();
        let mut notes = DrainNotes::default();
        // Each request takes at most one batch a queue; the next looks
        // only at the queues with more to send (`Visit::Again`). The list
        // keeps for the next drain every queue but those the first look
        // found holding nothing (or twice on the list); all of them when
        // no request could be made.
        let mut keep: Option<Vec<Arc<PartitionQueue>>> = None;
        let mut pass: Option<Vec<Arc<PartitionQueue>>> = None;
        let mut sent = false;
        while self.in_flight_len() < engine.config().max_in_flight {
            let list = pass.as_deref().unwrap_or(&walk);
            if list.is_empty() {
                break;
            }
            let first = keep.is_none();
            let mut again = Vec::new();
            let mut kept = Vec::new();
            let batches = self.fill_request(list, &gates, &mut notes, |q, visit| {
                if visit == Visit::Again {
                    again.push(q.clone());
                }
                if first && visit != Visit::Drop {
                    kept.push(q.clone());
                }
            });
            if first {
                keep = Some(kept);
            }
            pass = Some(again);
            if batches.is_empty() {
                break;
            }
            let version = match gates.txn_generation {
                Some(_) => gates.versions.produce.min(gates.txn_version.caps().produce),
                None => gates.versions.produce,
            };
            self.send_produce(batches, &gates.tx, version);
            sent = true;
        }
        if sent {
            // Request deadlines are watched while answers are owed.
            self.watch(ctx);
        }
        if let (Some(t), Some(g), Some(id), true) = (
            &engine.txn(),
            gates.txn_generation,
            gates.idem,
            notes.joined,
        ) {
            t.joined(g, id);
        }
        if let (Some(t), false) = (&engine.txn(), notes.wanted.is_empty()) {
            if t.want(notes.wanted) {
                self.upstream.add_partitions.do_send(AddPartitionsWanted);
            }
        }
        if let Some(at) = notes.next_wake {
            self.schedule_wake(at, ctx);
        }
        self.list.active = keep.unwrap_or(walk);
    }

    /// Whether anything may be sent now, and under what: `None` while the
    /// SASL session renews, the connection is not up (it is asked for when
    /// a batch waits), a broker quota throttles us (KIP-219), the
    /// idempotent producer has no id, or a transactional one is outside a
    /// transaction.
    fn drain_gates(&mut self, ctx: &mut Context<Self>) -> Option<DrainGates> {
        // The SASL session is ending: nothing new on this connection.
        if self.reauth_due {
            self.renew_when_idle(ctx);
            return None;
        }
        let (tx, versions) = match &self.state {
            ConnState::Connected { tx, versions, .. } => (tx.clone(), *versions),
            // Closed for being idle: connect again only for a batch.
            ConnState::Idle if self.idle_closed && !self.has_batches() => return None,
            ConnState::Idle => {
                self.ensure_connecting(ctx);
                return None;
            }
            _ => return None,
        };
        if let Some(until) = self.throttled_until {
            if until > Instant::now() {
                self.schedule_wake(until, ctx);
                return None;
            }
            self.throttled_until = None;
        }
        let engine = &self.engine;
        // The idempotent producer sends nothing until it has an id (and
        // nothing while an epoch bump is due).
        let idem = match &engine.idem() {
            None => None,
            Some(i) => match i.ready() {
                Some(id) => Some(id),
                None => {
                    // The cluster refused us an id: waiting records fail
                    // with its cause now, not at delivery.timeout.ms.
                    if let Some((kind, message)) = i.refused() {
                        engine.fail_queued(kind, &message);
                    }
                    self.upstream.ensure_producer_id.do_send(EnsureProducerId);
                    return None;
                }
            },
        };
        // Transactional: nothing is sent outside a transaction (or once
        // fenced), and only partitions the coordinator has added to the
        // current one (`take_batch`).
        let (txn_generation, txn_version) = match &engine.txn() {
            None => (None, TransactionVersion::V1),
            Some(t) => {
                let (generation, version) = t.sendable_as()?;
                (Some(generation), version)
            }
        };
        let cfg = engine.config();
        Some(DrainGates {
            tx,
            versions,
            idem,
            txn_generation,
            txn_version,
            flushing: engine.linger_over(self.in_flight_len() == 0),
            // With one request in flight, order must hold across
            // connections too: a partition with a batch in flight anywhere
            // (say on the old leader's connection) waits.
            strict_order: cfg.max_in_flight == 1,
        })
    }

    /// One Produce request's batches: at most one from each queue, in
    /// queue order, within `max.request.size` (the first always fits).
    /// `seen` hears what the look at each queue found.
    fn fill_request(
        &self,
        queues: &[Arc<PartitionQueue>],
        gates: &DrainGates,
        notes: &mut DrainNotes,
        mut seen: impl FnMut(&Arc<PartitionQueue>, Visit),
    ) -> Vec<SealedBatch> {
        let now = Instant::now();
        let pass = self.engine.acc().next_pass();
        let mut batches = Vec::new();
        let mut size = 0usize;
        for q in queues {
            let room = (!batches.is_empty())
                .then(|| self.engine.config().max_request_size.saturating_sub(size));
            let (b, visit) = self.take_batch(q, gates, now, room, pass, notes);
            if let Some(b) = b {
                size += b.encoded.len();
                batches.push(b);
            }
            seen(q, visit);
        }
        batches
    }

    /// `q`'s next batch for a request with `room` bytes left (`None`: the
    /// request is empty, any batch fits): its oldest ready batch, or its
    /// open batch once linger is over, sealed; stamped with the producer
    /// id and sequences when idempotent, and counted in flight. `None`
    /// when the queue must wait: in-flight order, an unconfirmed epoch, a
    /// partition the transaction lacks (noted as wanted), a backoff or a
    /// linger not over (noted for the timer), or no room. With it, what
    /// the queue holds now ([`Visit`]).
    fn take_batch(
        &self,
        q: &PartitionQueue,
        gates: &DrainGates,
        now: Instant,
        room: Option<usize>,
        pass: u64,
        notes: &mut DrainNotes,
    ) -> (Option<SealedBatch>, Visit) {
        let engine = &self.engine;
        let fits = |len: usize| room.is_none_or(|room| len <= room);
        let mut qi = lock(&q.state);
        if qi.visited == pass {
            return (None, Visit::Drop);
        }
        qi.visited = pass;
        if gates.strict_order && qi.in_flight > 0 {
            return (None, Visit::Keep);
        }
        // Idempotent: no pipelining until the broker has acknowledged a
        // batch of this epoch here (`QueueState::confirmed`).
        if gates.idem.is_some_and(|id| qi.awaits_confirmation(id)) {
            return (None, Visit::Keep);
        }
        let joins = gates.txn_generation.filter(|g| qi.txn_added != *g);
        if joins.is_some() && gates.txn_version == TransactionVersion::V1 {
            if !qi.ready.is_empty() || qi.open.is_some() {
                notes.wanted.push((q.topic, q.partition));
            }
            return (None, Visit::holding(&mut qi));
        }
        let mut b = if let Some(front) = qi.ready.front() {
            if let Some(at) = front.retry_at.filter(|at| *at > now) {
                notes.wake_at(at);
                return (None, Visit::Keep);
            }
            if !fits(front.encoded.len()) {
                return (None, Visit::Again);
            }
            qi.ready.pop_front().expect("checked above")
        } else {
            let Some(open) = qi.open.as_ref() else {
                return (None, Visit::holding(&mut qi));
            };
            // A full batch goes now (the sticky partitioner has moved on
            // from it). Otherwise due within the timer's resolution counts
            // as due: a timer set for `due` fires up to a tick late, so a
            // batch goes at most `linger_slack` early rather than up to a
            // tick late.
            let linger = engine.config().linger;
            let due = (open.created + linger).checked_sub(linger_slack(linger));
            if let Some(due) = due.filter(|d| *d > now && !gates.flushing && !open.full) {
                notes.wake_at(due);
                return (None, Visit::Keep);
            }
            let open = qi.open.take().expect("checked above");
            match engine.acc().seal(open, q) {
                Ok(b) if fits(b.encoded.len()) => b,
                Ok(b) => {
                    qi.ready.push_back(b);
                    return (None, Visit::Again);
                }
                Err(f) => {
                    drop(qi);
                    engine.fail_seal(f);
                    return (None, Visit::Keep);
                }
            }
        };
        if let Some(id) = gates.idem {
            let transactional = gates.txn_generation.is_some();
            engine.acc().stamp(&mut qi, &mut b, id, transactional);
        }
        // Transaction version 2: this batch's Produce v12 adds its
        // partition to the transaction.
        if let Some(g) = joins {
            qi.txn_added = g;
            notes.joined = true;
        }
        qi.take_off(&mut b);
        let more = !qi.ready.is_empty() || qi.open.is_some();
        (Some(b), if more { Visit::Again } else { Visit::Keep })
    }

    /// Sets the drain timer for `at`, unless it fires sooner already.
    pub(super) fn schedule_wake(&mut self, at: Instant, ctx: &mut Context<Self>) {
        if let Some((existing, _)) = self.wake_at {
            if existing <= at {
                return;
            }
        }
        if let Some((_, h)) = self.wake_at.take() {
            ctx.cancel_future(h);
        }
        let delay = at.saturating_duration_since(Instant::now());
        let h = ctx.run_later(delay, |act, ctx| {
            act.wake_at = None;
            act.drain(ctx);
        });
        self.wake_at = Some((at, h));
    }

    pub(super) fn send_produce(
        &mut self,
        mut batches: Vec<SealedBatch>,
        tx: &mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        version: i16,
    ) {
        let _span = tracing::debug_span!(
            "produce_request",
            broker = self.node_id,
            batches = batches.len()
        )
        .entered();
        let engine = self.engine.clone();
        let cfg = engine.config();
        // The request is written around the batches' own bytes
        // (protocol::produce), so no batch is copied into a request buffer.
        let topics = topic_data;
        let mut header = ProduceHeader {
            version,
            correlation_id: 0,
            client_id: Some(engine.client_id().as_str()),
            acks: cfg.acks.wire(),
            timeout_ms: cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
            transactional_id: engine.txn().map(|t| t.id.as_str()),
        };
        // Exact size check: a request never exceeds max.request.size. Extra
        // batches go back into their queues (by batch id).
        while batches.len() > 1 && frame_size(&header, &topics(&batches)) > cfg.max_request_size {
            let mut b = batches.pop().expect("more than one");
            let q = self.engine.acc().queue(&b.topic, b.partition);
            let mut qi = lock(&q.state);
            qi.land(&mut b);
            qi.requeue(b);
            drop(qi);
        }
        let sent_at = Instant::now();
        let limit = request_limit(&batches, cfg, sent_at);
        header.timeout_ms = limit.as_millis().min(i32::MAX as u128) as i32;
        header.correlation_id = self.next_correlation_id();
        let correlation_id = header.correlation_id;
        let frame = match encode(&header, &topics(&batches)) {
            Ok(frame) => frame,
            Err(e) => {
                // Cannot happen with well-formed batches; fail them rather than loop.
                for b in batches {
                    self.engine.land_and_settle(
                        b,
                        Outcome::Failed {
                            kind: ErrorKind::Compression,
                            message: e.to_string(),
                        },
                    );
                }
                return;
            }
        };
        let records: i32 = batches.iter().map(|b| b.record_count).sum();
        tracing::debug!(
            broker = self.node_id,
            correlation_id,
            batches = batches.len(),
            records,
            bytes = frame.len,
            "produce request"
        );
        for b in &mut batches {
            b.attempts += 1;
            b.owed.sent = true;
        }
        let _ = tx.send(frame.parts);
        self.active();
        if cfg.acks.wire() == 0 {
            // No response will come: "sent, offset unknown".
            for b in batches {
                self.engine.land_and_settle(
                    b,
                    Outcome::Delivered {
                        base_offset: None,
                        log_append_time: None,
                    },
                );
            }
            return;
        }
        lock(&self.shared.in_flight).push_back(InFlight {
            correlation_id,
            version,
            sent_at,
            deadline: sent_at + limit,
            batches,
        });
    }
}

/// How long a Produce request of `batches` sent at `now` may take:
/// `request.timeout.ms`, or, when the delivery timeout came through
/// librdkafka's `message.timeout.ms`, no longer than the earliest of its
/// batches' delivery deadlines leaves (at least 1 ms), as librdkafka
/// bounds a request by its records' time left.
fn request_limit(
    batches: &[crate::batching::batch::SealedBatch],
    cfg: &crate::config::ProducerConfig,
    now: Instant,
) -> Duration {
    if !cfg.librdkafka_timeout() {
        return cfg.request_timeout;
    }
    let left = batches
        .iter()
        .map(|b| b.deadline.saturating_duration_since(now))
        .min()
        .unwrap_or(cfg.request_timeout);
    left.clamp(Duration::from_millis(1), cfg.request_timeout)
}

/// How early a lingering batch may go: a timer set for its deadline fires
/// up to a tick (1 ms) late, so it is set up to a fifth of the linger (at
/// most 1 ms) early instead.
fn linger_slack(linger: Duration) -> Duration {
    (linger / 5).min(Duration::from_millis(1))
}

/// `batches` grouped by topic, in the order they come, for a Produce
/// request.
fn topic_data(batches: &[SealedBatch]) -> Vec<TopicData<'_>> {
    let mut topics: Vec<TopicData<'_>> = Vec::new();
    for b in batches {
        let pd = PartitionData {
            partition: b.partition,
            records: b.encoded.bytes(),
        };
        match topics.iter_mut().find(|t| t.name == b.topic.as_str()) {
            Some(t) => t.partitions.push(pd),
            None => topics.push(TopicData {
                name: b.topic.as_str(),
                partitions: vec![pd],
            }),
        }
    }
    topics
}
