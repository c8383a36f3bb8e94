//! `BrokerConnection`: the outbox for one broker.
//!
//! It owns the only socket to its broker. It drains the partitions this
//! broker leads into pipelined Produce requests (up to
//! `max.in.flight.requests.per.connection`), matches responses to requests
//! by correlation id, and turns each partition's answer into a batch
//! outcome: reports, a retry, or a failure. It also carries Metadata
//! requests for the partitioner actor.
//!
//! Socket I/O runs in two small tasks (reader and writer) spawned on the
//! actor's arbiter; they talk to the actor with messages tagged by a
//! connection generation, so frames from a dead connection are ignored.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::BytesMut;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};

use super::msgs::*;
use crate::accumulator::{lock, ProducerBatch, QueueInner};
use crate::connection::{Connection, ConnectionOptions};
use crate::kafka_error::classify;
use crate::kafka_error::ResponseError;
use crate::producer::Inner;
use crate::protocol::frame::peek_correlation_id;
use crate::protocol::message::{decode_response, encode_request};
use crate::protocol::produce::{encode, frame_size, PartitionData, ProduceHeader, TopicData};
use crate::protocol::record_batch::ProducerStamp;
use crate::protocol::versions::ApiVersions;
use crate::report::ErrorKind;
use crate::report_router::{fail_unsent, route, Outcome};

#[derive(Debug)]
enum ConnState {
    Idle,
    Connecting,
    Connected {
        tx: mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        reader: actix::SpawnHandle,
        versions: ApiVersions,
    },
    Backoff,
}

/// What a broker's connection actor holds that must outlive the actor: its
/// in-flight requests. If the actor dies (a panic), the supervisor starts a
/// new one with the same state, which puts these batches back in their
/// queues; nothing in flight is lost with the actor.
#[derive(Debug, Default)]
pub(crate) struct BrokerState {
    in_flight: Mutex<VecDeque<InFlight>>,
}

impl BrokerState {
    /// Produce requests in flight on this broker's connection.
    pub(crate) fn in_flight_len(&self) -> usize {
        lock(&self.in_flight).len()
    }
}

/// One Produce request awaiting its response.
#[derive(Debug)]
struct InFlight {
    correlation_id: i32,
    version: i16,
    sent_at: Instant,
    batches: Vec<ProducerBatch>,
}

/// The connection actor for one broker (or, with a negative id, for one
/// bootstrap address, used only for metadata until real ids are known).
pub struct BrokerConnection {
    node_id: i32,
    addr: String,
    inner: Arc<Inner>,
    state: ConnState,
    generation: u64,
    next_correlation_id: i32,
    shared: Arc<BrokerState>,
    /// Requests other than Produce, answered through a oneshot.
    calls: HashMap<i32, Call>,
    reconnect_attempts: u32,
    wake_at: Option<(Instant, SpawnHandle)>,
}

impl std::fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("node_id", &self.node_id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl BrokerConnection {
    pub(crate) fn new(
        node_id: i32,
        addr: String,
        inner: Arc<Inner>,
        shared: Arc<BrokerState>,
    ) -> Self {
        BrokerConnection {
            node_id,
            addr,
            inner,
            state: ConnState::Idle,
            generation: 0,
            next_correlation_id: 0,
            shared,
            calls: HashMap::new(),
            reconnect_attempts: 0,
            wake_at: None,
        }
    }

    fn ensure_connecting(&mut self, ctx: &mut Context<Self>) {
        if !matches!(self.state, ConnState::Idle) {
            return;
        }
        self.state = ConnState::Connecting;
        self.generation += 1;
        let generation = self.generation;
        let cfg = &self.inner.config;
        let opts = ConnectionOptions {
            client_id: Some(cfg.client_id.clone()),
            connect_timeout: cfg.connection_setup_timeout,
            request_timeout: cfg.request_timeout,
            ..ConnectionOptions::default()
        };
        let addr = self.addr.clone();
        tracing::debug!(broker = self.node_id, %addr, "connecting");
        let connecting = async move { Connection::connect(&addr, &opts).await };
        ctx.spawn(connecting.into_actor(self).map(move |res, act, ctx| {
            if act.generation != generation {
                return;
            }
            match res {
                Ok(conn) => act.on_connected(conn, ctx),
                Err(e) => act.on_connect_failed(e.to_string(), ctx),
            }
        }));
    }

    fn on_connected(&mut self, conn: Connection, ctx: &mut Context<Self>) {
        let generation = self.generation;
        let (mut reader, mut writer, versions, next_id) = conn.into_pipelined();
        self.next_correlation_id = next_id;
        self.reconnect_attempts = 0;
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<bytes::Bytes>>();
        // Weak addresses: the I/O tasks must not keep a retired actor alive
        // (actix's Supervisor restarts an actor while strong addresses exist).
        let me = ctx.address().downgrade();
        let me2 = me.clone();
        // Writer: ends when the actor drops `tx` or the socket fails.
        actix::spawn(async move {
            while let Some(parts) = rx.recv().await {
                if let Err(e) = writer.write_parts(&parts).await {
                    if let Some(a) = me2.upgrade() {
                        a.do_send(ConnectionLost {
                            generation,
                            error: e.to_string(),
                        });
                    }
                    break;
                }
            }
        });
        let read = async move {
            loop {
                let next = reader.next_frame().await;
                // Upgrade only after the await: a strong address held while
                // waiting would keep a retired actor alive.
                let Some(a) = me.upgrade() else { break };
                match next {
                    Ok(frame) => a.do_send(ResponseFrame { generation, frame }),
                    Err(e) => {
                        a.do_send(ConnectionLost {
                            generation,
                            error: e.to_string(),
                        });
                        break;
                    }
                }
            }
        };
        let reader = ctx.spawn(read.into_actor(self));
        tracing::debug!(broker = self.node_id, addr = %self.addr, ?versions, "connected");
        self.state = ConnState::Connected {
            tx,
            reader,
            versions,
        };
        self.drain(ctx);
    }

    fn on_connect_failed(&mut self, error: String, ctx: &mut Context<Self>) {
        tracing::warn!(broker = self.node_id, addr = %self.addr, %error, "connect failed");
        for (_, c) in self.calls.drain() {
            c.fail(error.clone());
        }
        self.schedule_reconnect(ctx);
    }

    fn schedule_reconnect(&mut self, ctx: &mut Context<Self>) {
        self.state = ConnState::Backoff;
        let cfg = &self.inner.config;
        let backoff = backoff(
            cfg.reconnect_backoff,
            cfg.reconnect_backoff_max,
            self.reconnect_attempts,
        );
        self.reconnect_attempts = self.reconnect_attempts.saturating_add(1);
        ctx.run_later(backoff, |act, ctx| {
            if matches!(act.state, ConnState::Backoff) {
                act.state = ConnState::Idle;
                act.ensure_connecting(ctx);
            }
        });
    }

    /// The socket is gone: in-flight batches go back to the front of their
    /// queues (or fail, past their deadline), waiters get errors, and a
    /// reconnect is scheduled.
    fn connection_lost(&mut self, error: String, ctx: &mut Context<Self>) {
        tracing::warn!(broker = self.node_id, addr = %self.addr, %error, in_flight = self.in_flight_len(), "connection lost");
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        self.generation += 1;
        self.requeue_in_flight(Some(&error));
        for (_, c) in self.calls.drain() {
            c.fail(error.clone());
        }
        if let Some(p) = self.inner.partitioner_addr.get() {
            p.do_send(RefreshMetadata);
        }
        self.schedule_reconnect(ctx);
    }

    /// Puts every in-flight batch back at the front of its queue, newest
    /// first so that each partition keeps its order.
    fn requeue_in_flight(&mut self, cause: Option<&str>) {
        let now = Instant::now();
        while let Some(f) = self.pop_in_flight(true) {
            for b in f.batches.into_iter().rev() {
                self.retry_or_fail(
                    b,
                    now,
                    ErrorKind::Timeout,
                    cause.unwrap_or("connection closed"),
                );
            }
        }
    }

    /// Re-queues a batch for another attempt, or fails it when its delivery
    /// timeout has passed.
    fn retry_or_fail(
        &self,
        mut batch: ProducerBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
    ) {
        let queue = self.inner.acc.queue(&batch.topic, batch.partition);
        if now >= batch.deadline {
            lock(&queue.inner).in_flight -= 1;
            let attempts = batch.attempts;
            self.finish(
                batch,
                Outcome::Failed {
                    kind,
                    message: format!(
                        "{message}; delivery.timeout.ms passed after {attempts} attempt(s)"
                    ),
                },
            );
            return;
        }
        let cfg = &self.inner.config;
        batch.retry_at = Some(
            now + backoff(
                cfg.retry_backoff,
                cfg.retry_backoff_max,
                batch.attempts.saturating_sub(1),
            ),
        );
        let mut q = lock(&queue.inner);
        q.in_flight -= 1;
        q.requeue(batch);
    }

    /// Reports a batch and releases it.
    fn finish(&self, batch: ProducerBatch, outcome: Outcome) {
        if self.inner.idem.is_some() {
            let q = self.inner.acc.queue(&batch.topic, batch.partition);
            lock(&q.inner).unacked.remove(&batch.id);
        }
        route(
            batch.partition,
            batch.record_count,
            batch.attempts,
            batch.owed,
            outcome,
            &self.inner.stats,
        );
        self.inner.acc.batch_done(batch.id);
    }

    /// Takes the newest (`back`) or oldest in-flight request, releasing the
    /// lock before the caller handles it.
    fn pop_in_flight(&self, back: bool) -> Option<InFlight> {
        let mut q = lock(&self.shared.in_flight);
        if back {
            q.pop_back()
        } else {
            q.pop_front()
        }
    }

    /// The writer and versions of a live connection, or an error (after
    /// starting a connect) for calls that cannot wait.
    fn connected(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> Result<(mpsc::UnboundedSender<Vec<bytes::Bytes>>, ApiVersions), String> {
        match &self.state {
            ConnState::Connected { tx, versions, .. } => Ok((tx.clone(), *versions)),
            _ => {
                self.ensure_connecting(ctx);
                Err(format!("not connected to {}", self.addr))
            }
        }
    }

    /// Sends a non-Produce request whose answer goes to the `Call` made by
    /// `make` from the version.
    fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        tx: &mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        version: i16,
        req: &R,
        make: impl FnOnce(i16) -> Call,
    ) -> Result<(), String> {
        let correlation_id = self.next_correlation_id();
        let mut buf = BytesMut::new();
        encode_request(
            &mut buf,
            correlation_id,
            Some(&self.inner.client_id),
            version,
            req,
        )
        .map_err(|e| e.to_string())?;
        self.calls.insert(correlation_id, make(version));
        let _ = tx.send(vec![buf.freeze()]);
        Ok(())
    }

    fn in_flight_len(&self) -> usize {
        lock(&self.shared.in_flight).len()
    }

    fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// Moves sendable batches of the partitions this broker leads into
    /// Produce requests, while in-flight room remains.
    fn drain(&mut self, ctx: &mut Context<Self>) {
        if self.node_id < 0 {
            return; // bootstrap connections carry metadata only
        }
        let (tx, versions) = match &self.state {
            ConnState::Connected { tx, versions, .. } => (tx.clone(), *versions),
            ConnState::Idle => {
                self.ensure_connecting(ctx);
                return;
            }
            _ => return,
        };
        let inner = self.inner.clone();
        // The idempotent producer sends nothing until it has an id (and
        // nothing while an epoch bump is due).
        let idem = match &inner.idem {
            None => None,
            Some(i) => match i.ready() {
                Some(id) => Some(id),
                None => {
                    if let Some(s) = inner.supervisor_addr.get() {
                        s.do_send(EnsureProducerId);
                    }
                    return;
                }
            },
        };
        let cfg = &inner.config;
        let snapshot = inner.metadata.load();
        let flushing = inner.flushing.load(std::sync::atomic::Ordering::Acquire) > 0
            || inner.closed.load(std::sync::atomic::Ordering::Acquire);
        let mut next_wake: Option<Instant> = None;
        let queues: Vec<_> = inner
            .acc
            .all_queues()
            .into_iter()
            .filter(|q| {
                snapshot
                    .topics
                    .get(q.topic.as_str())
                    .and_then(|t| t.leader(q.partition))
                    == Some(self.node_id)
            })
            .collect();
        // With one request in flight, order must hold across connections
        // too: a partition with a batch in flight anywhere (say on the old
        // leader's connection) waits.
        let strict_order = cfg.max_in_flight == 1;
        while self.in_flight_len() < cfg.max_in_flight {
            let now = Instant::now();
            let mut batches = Vec::new();
            let mut size = 0usize;
            for q in &queues {
                let mut qi = lock(&q.inner);
                if strict_order && qi.in_flight > 0 {
                    continue;
                }
                let batch = if let Some(front) = qi.ready.front() {
                    if let Some(at) = front.retry_at.filter(|at| *at > now) {
                        next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
                        continue;
                    }
                    if !batches.is_empty() && size + front.encoded.len() > cfg.max_request_size {
                        continue;
                    }
                    qi.ready.pop_front()
                } else if let Some(open) = &qi.open {
                    // A full batch goes now (the sticky partitioner has moved
                    // on from it). Otherwise due within the timer's
                    // resolution counts as due: a timer set for `due` fires
                    // up to a tick late, so a batch goes at most
                    // `linger_slack` early rather than up to a tick late.
                    let due = (open.created + cfg.linger).checked_sub(linger_slack(cfg.linger));
                    if let Some(due) = due.filter(|d| *d > now && !flushing && !open.full) {
                        next_wake = Some(next_wake.map_or(due, |w| w.min(due)));
                        continue;
                    }
                    let open = qi.open.take().expect("checked above");
                    match inner.acc.close(open, q) {
                        Ok(b) => {
                            if !batches.is_empty() && size + b.encoded.len() > cfg.max_request_size
                            {
                                qi.ready.push_back(b);
                                continue;
                            }
                            Some(b)
                        }
                        Err(f) => {
                            drop(qi);
                            let reason = f.reason.clone();
                            fail_unsent(
                                &inner.acc,
                                Err(f),
                                ErrorKind::Compression,
                                |_| reason,
                                &inner.stats,
                            );
                            continue;
                        }
                    }
                } else {
                    None
                };
                if let Some(mut b) = batch {
                    if let Some((id, epoch)) = idem {
                        stamp_sequence(&mut qi, &mut b, id, epoch);
                    }
                    qi.in_flight += 1;
                    size += b.encoded.len();
                    batches.push(b);
                }
            }
            if batches.is_empty() {
                break;
            }
            self.send_produce(batches, &tx, versions.produce);
        }
        if let Some(at) = next_wake {
            self.schedule_wake(at, ctx);
        }
    }

    fn schedule_wake(&mut self, at: Instant, ctx: &mut Context<Self>) {
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

    fn send_produce(
        &mut self,
        mut batches: Vec<ProducerBatch>,
        tx: &mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        version: i16,
    ) {
        let _span = tracing::debug_span!(
            "produce_request",
            broker = self.node_id,
            batches = batches.len()
        )
        .entered();
        let inner = self.inner.clone();
        let cfg = &inner.config;
        // The request is written around the batches' own bytes
        // (protocol::produce), so no batch is copied into a request buffer.
        let topics = topic_data;
        let mut header = ProduceHeader {
            version,
            correlation_id: 0,
            client_id: Some(inner.client_id.as_str()),
            acks: cfg.acks.wire(),
            timeout_ms: cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
        };
        // Exact size check: a request never exceeds max.request.size. Extra
        // batches go back to the front of their queues.
        while batches.len() > 1 && frame_size(&header, &topics(&batches)) > cfg.max_request_size {
            let b = batches.pop().expect("more than one");
            let q = self.inner.acc.queue(&b.topic, b.partition);
            let mut qi = lock(&q.inner);
            qi.in_flight -= 1;
            qi.requeue(b);
            drop(qi);
        }
        header.correlation_id = self.next_correlation_id();
        let correlation_id = header.correlation_id;
        let frame = match encode(&header, &topics(&batches)) {
            Ok(frame) => frame,
            Err(e) => {
                // Cannot happen with well-formed batches; fail them rather than loop.
                for b in batches {
                    let q = self.inner.acc.queue(&b.topic, b.partition);
                    lock(&q.inner).in_flight -= 1;
                    self.finish(
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
        }
        let _ = tx.send(frame.parts);
        if cfg.acks.wire() == 0 {
            // No response will come: "sent, offset unknown".
            for b in batches {
                let q = self.inner.acc.queue(&b.topic, b.partition);
                lock(&q.inner).in_flight -= 1;
                self.finish(
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
            sent_at: Instant::now(),
            batches,
        });
    }

    fn on_frame(&mut self, frame: bytes::Bytes, ctx: &mut Context<Self>) {
        let Ok(correlation_id) = peek_correlation_id(&frame) else {
            return self.connection_lost("response shorter than its header".into(), ctx);
        };
        if let Some(call) = self.calls.remove(&correlation_id) {
            if let Err(e) = call.answer(frame) {
                self.connection_lost(e, ctx);
            }
            return;
        }
        let found = {
            let mut q = lock(&self.shared.in_flight);
            q.iter()
                .position(|f| f.correlation_id == correlation_id)
                .and_then(|pos| q.remove(pos).map(|f| (pos, f)))
        };
        let Some((pos, f)) = found else {
            return self.connection_lost(
                format!("response for unknown correlation id {correlation_id}"),
                ctx,
            );
        };
        let resp = match decode_response::<ProduceRequest>(frame, f.version) {
            Ok((_, resp)) => resp,
            Err(e) => {
                // Frame boundaries are intact but this response is not
                // readable: retry its batches on a fresh connection.
                lock(&self.shared.in_flight).insert(pos, f);
                return self.connection_lost(e.to_string(), ctx);
            }
        };
        let now = Instant::now();
        let _span = tracing::debug_span!(
            "produce_response",
            broker = self.node_id,
            correlation_id,
            batches = f.batches.len(),
            round_trip_us = (now - f.sent_at).as_micros() as u64
        )
        .entered();
        self.inner
            .stats
            .record_request(self.node_id, now - f.sent_at);
        let mut refresh = false;
        for b in f.batches {
            let pr = resp
                .responses
                .iter()
                .find(|t| t.name.0.as_str() == b.topic.as_str())
                .and_then(|t| {
                    t.partition_responses
                        .iter()
                        .find(|p| p.index == b.partition)
                });
            let Some(pr) = pr else {
                self.retry_or_fail(
                    b,
                    now,
                    ErrorKind::Timeout,
                    "broker response did not mention the partition",
                );
                continue;
            };
            let class = classify(pr.error_code);
            if let Some(c) = class.filter(|c| c.sequence_reset) {
                self.on_sequence_error(&b, c.error);
            }
            match class {
                // Already written by an earlier attempt whose answer was
                // lost: a success. Newer brokers give the original offset.
                Some(c) if c.error == ResponseError::DuplicateSequenceNumber => {
                    let q = self.inner.acc.queue(&b.topic, b.partition);
                    lock(&q.inner).in_flight -= 1;
                    self.finish(
                        b,
                        Outcome::Delivered {
                            base_offset: (pr.base_offset >= 0).then_some(pr.base_offset),
                            log_append_time: None,
                        },
                    );
                }
                None => {
                    let q = self.inner.acc.queue(&b.topic, b.partition);
                    lock(&q.inner).in_flight -= 1;
                    self.finish(
                        b,
                        Outcome::Delivered {
                            base_offset: Some(pr.base_offset),
                            log_append_time: (pr.log_append_time_ms >= 0)
                                .then_some(pr.log_append_time_ms),
                        },
                    );
                }
                Some(c) if c.retriable => {
                    refresh |= c.refresh_metadata;
                    let msg = format!("{:?} from broker {}", c.error, self.node_id);
                    self.retry_or_fail(b, now, ErrorKind::Broker(c.error), &msg);
                }
                Some(c) => {
                    let q = self.inner.acc.queue(&b.topic, b.partition);
                    lock(&q.inner).in_flight -= 1;
                    let detail = pr
                        .error_message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    self.finish(
                        b,
                        Outcome::Failed {
                            kind: ErrorKind::Broker(c.error),
                            message: format!("{}{detail}", c.error),
                        },
                    );
                }
            }
        }
        if refresh {
            if let Some(p) = self.inner.partitioner_addr.get() {
                p.do_send(RefreshMetadata);
            }
        }
        self.drain(ctx);
    }

    /// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or
    /// INVALID_PRODUCER_EPOCH for a batch. An out-of-order batch with an
    /// earlier batch still unacknowledged is only waiting for that one: the
    /// retry (in batch order) fixes it. Otherwise the broker lost our
    /// sequence state and the epoch must be bumped.
    fn on_sequence_error(&self, b: &ProducerBatch, error: ResponseError) {
        let Some(idem) = &self.inner.idem else { return };
        let q = self.inner.acc.queue(&b.topic, b.partition);
        let oldest_unacked = lock(&q.inner).unacked.first() == Some(&b.id);
        if error != ResponseError::OutOfOrderSequenceNumber || oldest_unacked {
            let s = b.encoded.stamp();
            idem.needs_bump((s.producer_id, s.producer_epoch));
        }
    }

    /// Fails in-flight requests older than `request.timeout.ms` by dropping
    /// the connection, as the Java client does.
    fn check_request_timeouts(&mut self, ctx: &mut Context<Self>) {
        let limit = self.inner.config.request_timeout;
        let oldest = lock(&self.shared.in_flight)
            .front()
            .map(|f| (f.sent_at, f.correlation_id));
        if let Some((sent_at, id)) = oldest {
            if sent_at.elapsed() > limit {
                let msg = format!("request {id} timed out after {limit:?}");
                self.connection_lost(msg, ctx);
            }
        }
    }
}

/// Stamps a batch with the producer id, epoch and its partition's next
/// sequence, the first time it is sent under this epoch. A retry under the
/// same epoch keeps its stamp (the broker deduplicates on it).
fn stamp_sequence(qi: &mut QueueInner, b: &mut ProducerBatch, id: i64, epoch: i16) {
    let current = b.encoded.stamp();
    if (current.producer_id, current.producer_epoch) == (id, epoch) {
        return;
    }
    if qi.sequence_owner != Some((id, epoch)) {
        qi.sequence_owner = Some((id, epoch));
        qi.next_sequence = 0;
    }
    let seq = qi.next_sequence;
    qi.next_sequence = increment_sequence(seq, b.record_count);
    b.encoded.set_stamp(ProducerStamp {
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: seq,
    });
    qi.unacked.insert(b.id);
}

/// How early a lingering batch may go: a timer set for its deadline fires
/// up to a tick (1 ms) late, so it is set up to a fifth of the linger (at
/// most 1 ms) early instead.
fn linger_slack(linger: Duration) -> Duration {
    (linger / 5).min(Duration::from_millis(1))
}

/// `batches` grouped by topic, in the order they come, for a Produce
/// request.
fn topic_data(batches: &[ProducerBatch]) -> Vec<TopicData<'_>> {
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

/// Sequences wrap from `i32::MAX` to 0 (Java's
/// `DefaultRecordBatch.incrementSequence`).
fn increment_sequence(seq: i32, by: i32) -> i32 {
    if seq > i32::MAX - by {
        by - (i32::MAX - seq) - 1
    } else {
        seq + by
    }
}

fn backoff(base: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16));
    let capped = exp.min(max).max(base);
    // Up to 20% jitter, as the Java client.
    let jitter = 0.8 + fastrand::f64() * 0.4;
    capped.mul_f64(jitter).min(max.max(base))
}

impl Actor for BrokerConnection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // A predecessor that died (panicked) may have left requests in
        // flight on its connection, which is gone with it: retry them.
        if self.in_flight_len() > 0 {
            tracing::warn!(
                broker = self.node_id,
                in_flight = self.in_flight_len(),
                "requeueing a dead connection actor's in-flight batches"
            );
            self.requeue_in_flight(Some("connection actor died"));
        }
        self.ensure_connecting(ctx);
        ctx.run_interval(Duration::from_millis(100), |act, ctx| {
            act.check_request_timeouts(ctx);
        });
    }

    fn stopping(&mut self, ctx: &mut Context<Self>) -> Running {
        // Nothing in flight may vanish: back to the queues for the next
        // leader, or reported if expired.
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        self.generation += 1;
        self.requeue_in_flight(Some("connection retired"));
        for (_, c) in self.calls.drain() {
            c.fail("connection retired".into());
        }
        Running::Stop
    }
}

impl Supervised for BrokerConnection {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.requeue_in_flight(Some("connection actor restarted"));
        self.state = ConnState::Idle;
        self.generation += 1;
        self.wake_at = None;
    }
}

impl Handler<Wake> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.drain(ctx);
    }
}

impl Handler<ResponseFrame> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, msg: ResponseFrame, ctx: &mut Context<Self>) {
        if msg.generation == self.generation {
            self.on_frame(msg.frame, ctx);
        }
    }
}

impl Handler<ConnectionLost> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, msg: ConnectionLost, ctx: &mut Context<Self>) {
        if msg.generation == self.generation {
            self.connection_lost(msg.error, ctx);
        }
    }
}

impl Handler<Retire> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<CancelInFlight> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: CancelInFlight, ctx: &mut Context<Self>) {
        while let Some(f) = self.pop_in_flight(false) {
            for b in f.batches {
                let q = self.inner.acc.queue(&b.topic, b.partition);
                lock(&q.inner).in_flight -= 1;
                self.finish(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Cancelled,
                        message: "producer dropped before the broker answered; the record may or may not have been written".into(),
                    },
                );
            }
        }
        ctx.stop();
    }
}

impl Handler<FetchMetadata> for BrokerConnection {
    type Result = ResponseFuture<Result<MetadataResponse, String>>;
    fn handle(&mut self, msg: FetchMetadata, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, versions) = match self.connected(ctx) {
            Ok(c) => c,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let mut req = MetadataRequest::default().with_topics(Some(
            msg.topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default().with_name(Some(TopicName(
                        StrBytes::from_utf8(t.to_bytes()).expect("UTF-8"),
                    )))
                })
                .collect(),
        ));
        if versions.metadata >= 4 {
            req.allow_auto_topic_creation = self.inner.config.allow_auto_create_topics;
        }
        let (wtx, wrx) = oneshot::channel();
        if let Err(e) = self.call(&tx, versions.metadata, &req, |v| Call::Metadata(v, wtx)) {
            return Box::pin(async move { Err(e) });
        }
        let timeout = self.inner.config.request_timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, wrx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err("connection closed".into()),
                Err(_) => Err("metadata request timed out".into()),
            }
        })
    }
}

impl Handler<InitProducer> for BrokerConnection {
    type Result = ResponseFuture<Result<(i64, i16), String>>;
    fn handle(&mut self, msg: InitProducer, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, versions) = match self.connected(ctx) {
            Ok(c) => c,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let Some(version) = versions.init_producer_id else {
            let addr = self.addr.clone();
            return Box::pin(async move {
                Err(format!(
                    "{addr} does not support InitProducerId; set enable.idempotence=false"
                ))
            });
        };
        // As the Java client for a non-transactional idempotent producer;
        // v3+ can bump the epoch of the id we have (KIP-360).
        let mut req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX);
        if version >= 3 {
            let (id, epoch) = msg.bump_from.unwrap_or((-1, -1));
            req = req
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch);
        }
        let (wtx, wrx) = oneshot::channel();
        if let Err(e) = self.call(&tx, version, &req, |v| Call::InitProducerId(v, wtx)) {
            return Box::pin(async move { Err(e) });
        }
        let timeout = self.inner.config.request_timeout;
        Box::pin(async move {
            let resp = match tokio::time::timeout(timeout, wrx).await {
                Ok(Ok(r)) => r?,
                Ok(Err(_)) => return Err("connection closed".into()),
                Err(_) => return Err("InitProducerId timed out".into()),
            };
            match classify(resp.error_code) {
                None => Ok((resp.producer_id.0, resp.producer_epoch)),
                Some(c) => Err(format!("InitProducerId failed: {:?}", c.error)),
            }
        })
    }
}

/// A request other than Produce, waiting for its response.
enum Call {
    Metadata(i16, oneshot::Sender<Result<MetadataResponse, String>>),
    InitProducerId(i16, oneshot::Sender<Result<InitProducerIdResponse, String>>),
}

impl Call {
    fn fail(self, error: String) {
        match self {
            Call::Metadata(_, tx) => {
                let _ = tx.send(Err(error));
            }
            Call::InitProducerId(_, tx) => {
                let _ = tx.send(Err(error));
            }
        }
    }

    /// Decodes the response and hands it over; a decode error is returned
    /// too, since the connection can no longer be trusted.
    fn answer(self, frame: bytes::Bytes) -> Result<(), String> {
        fn send<T>(
            tx: oneshot::Sender<Result<T, String>>,
            r: Result<T, String>,
        ) -> Result<(), String> {
            let failed = r.as_ref().err().cloned();
            let _ = tx.send(r);
            failed.map_or(Ok(()), Err)
        }
        match self {
            Call::Metadata(v, tx) => send(
                tx,
                decode_response::<MetadataRequest>(frame, v)
                    .map(|(_, r)| r)
                    .map_err(|e| e.to_string()),
            ),
            Call::InitProducerId(v, tx) => send(
                tx,
                decode_response::<InitProducerIdRequest>(frame, v)
                    .map(|(_, r)| r)
                    .map_err(|e| e.to_string()),
            ),
        }
    }
}

/// Makes the actor panic inside a handler (tests of supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in BrokerConnection {}", self.node_id);
    }
}
