//! Responses: matching a Produce response to its request, and settling
//! each batch in it (reports), retrying it, or failing it. Also where
//! in-flight batches go back to their queues when a connection ends.

use std::time::{Duration, Instant};

use actix::prelude::*;
use kafka_protocol::messages::ProduceRequest;

use crate::actors::broker::state::InFlight;
use crate::actors::broker::BrokerConnection;
use crate::actors::msgs::RefreshMetadata;
use crate::batching::batch::SealedBatch;
use crate::clock::backoff;
use crate::delivery::router::route;
use crate::delivery::settlement::Outcome;
use crate::kafka_error::{classify, ResponseError};
use crate::protocol::frame::peek_correlation_id;
use crate::protocol::message::decode_response;
use crate::report::ErrorKind;
use crate::sync::lock;
use crate::transaction::is_fatal_code;

impl BrokerConnection {
    /// Puts every in-flight batch back into its queue, where `requeue`
    /// inserts it by batch id (so each partition keeps its order), or fails
    /// it when its delivery timeout has passed.
    pub(super) fn requeue_in_flight(&mut self, cause: Option<&str>) {
        let now = Instant::now();
        // A retired or dead connection actor is Courier's own doing, not a
        // failed attempt: it does not count against `retries`.
        let ours = matches!(cause, Some(super::RETIRED) | Some(super::ACTOR_DIED));
        while let Some(f) = self.pop_in_flight(true) {
            for b in f.batches.into_iter().rev() {
                self.retry_or_fail_counted(
                    b,
                    now,
                    ErrorKind::Timeout,
                    cause.unwrap_or("connection closed"),
                    !ours,
                );
            }
        }
    }

    /// Re-queues a batch for another attempt, or fails it when its delivery
    /// timeout has passed.
    pub(super) fn retry_or_fail(
        &self,
        batch: SealedBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
    ) {
        self.retry_or_fail_counted(batch, now, kind, message, true)
    }

    /// `retry_or_fail`; `counted`: whether the failed attempt counts
    /// against `retries` (a retry after exhausting them fails the batch
    /// with `kind`, as the Java client).
    fn retry_or_fail_counted(
        &self,
        mut batch: SealedBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
        counted: bool,
    ) {
        let queue = self.engine.acc.queue(&batch.topic, batch.partition);
        let retries = self.engine.config.retries;
        if counted && batch.attempts > retries {
            lock(&queue.state).land(&mut batch);
            let attempts = batch.attempts;
            self.settle(
                batch,
                Outcome::Failed {
                    kind,
                    message: format!(
                        "{message}; not retried: retries ({retries}) used up after {attempts} attempt(s)"
                    ),
                },
            );
            return;
        }
        if now >= batch.deadline {
            lock(&queue.state).land(&mut batch);
            let attempts = batch.attempts;
            self.settle(
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
        let cfg = &self.engine.config;
        batch.retry_at = Some(
            now + backoff(
                cfg.retry_backoff,
                cfg.retry_backoff_max,
                batch.attempts.saturating_sub(1),
            ),
        );
        let mut q = lock(&queue.state);
        q.land(&mut batch);
        q.requeue(batch);
    }

    /// A batch the broker accepted (or already had) leaves its partition's
    /// in-flight count; for an idempotent producer the broker now holds
    /// the partition's sequence state under the batch's epoch, so later
    /// batches may be pipelined (`QueueState::confirmed`).
    fn acknowledged(&self, b: &mut SealedBatch) {
        let q = self.engine.acc.queue(&b.topic, b.partition);
        let mut qs = lock(&q.state);
        qs.land(b);
        if self.engine.idem.is_some() {
            let s = b.encoded.stamp();
            qs.confirmed = Some((s.producer_id, s.producer_epoch));
        }
    }

    /// Reports a batch and releases it.
    pub(super) fn settle(&self, mut batch: SealedBatch, outcome: Outcome) {
        batch.ledger.settle();
        if self.engine.idem.is_some() {
            let q = self.engine.acc.queue(&batch.topic, batch.partition);
            lock(&q.state).unacked.remove(&batch.id);
        }
        route(
            batch.topic,
            batch.partition,
            batch.record_count,
            batch.attempts,
            batch.owed,
            outcome,
            &self.engine.stats,
        );
        self.engine.acc.batch_done(batch.id);
    }

    /// Takes the newest (`back`) or oldest in-flight request, releasing the
    /// lock before the caller handles it.
    pub(super) fn pop_in_flight(&self, back: bool) -> Option<InFlight> {
        let mut q = lock(&self.shared.in_flight);
        if back {
            q.pop_back()
        } else {
            q.pop_front()
        }
    }

    pub(super) fn on_frame(&mut self, frame: bytes::Bytes, ctx: &mut Context<Self>) {
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
        #[cfg(feature = "fault-injection")]
        if std::mem::take(&mut self.panic_in_response) {
            panic!(
                "injected panic in the response path, holding {} batch(es)",
                f.batches.len()
            );
        }
        let now = Instant::now();
        let _span = tracing::debug_span!(
            "produce_response",
            broker = self.node_id,
            correlation_id,
            batches = f.batches.len(),
            round_trip_us = (now - f.sent_at).as_micros() as u64
        )
        .entered();
        self.engine
            .stats
            .record_request(self.node_id, now - f.sent_at);
        self.on_throttle(resp.throttle_time_ms, f.version, now);
        let mut refresh = false;
        for mut b in f.batches {
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
            // A transactional producer fenced (a newer instance with the
            // same transactional.id, or its transaction timed out on the
            // coordinator): this batch and everything not yet sent fail,
            // and the producer takes nothing more.
            if let Some(c) = class.filter(|c| self.engine.txn.is_some() && is_fatal_code(c.error)) {
                let kind = match c.error {
                    ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
                        ErrorKind::Fenced
                    }
                    e => ErrorKind::Broker(e.into()),
                };
                let message = format!(
                    "{:?} from broker {}: a newer producer with the same transactional.id started, or the coordinator aborted a transaction open longer than transaction.timeout.ms",
                    c.error, self.node_id
                );
                // Fenced first, then the report: whoever reads it finds
                // the producer fenced already.
                self.engine.fail_transactional(kind, &message);
                let q = self.engine.acc.queue(&b.topic, b.partition);
                lock(&q.state).land(&mut b);
                self.settle(b, Outcome::Failed { kind, message });
                continue;
            }
            // A transactional producer whose sequence state the broker
            // lost: the batch fails and the transaction can only be aborted
            // (the abort bumps the epoch, as the Java client does); an
            // out-of-order batch behind an unacknowledged one only waits
            // for it (retried below).
            if let (Some(txn), Some(c)) = (&self.engine.txn, class.filter(|c| c.sequence_reset)) {
                let q = self.engine.acc.queue(&b.topic, b.partition);
                let oldest = lock(&q.state).unacked.first() == Some(&b.id);
                if c.error != ResponseError::OutOfOrderSequenceNumber || oldest {
                    let message = format!(
                        "{:?} from broker {}: the broker lost this producer's sequence state; the transaction must be aborted",
                        c.error, self.node_id
                    );
                    txn.sequence_lost(ErrorKind::Broker(c.error.into()), message.clone());
                    lock(&q.state).land(&mut b);
                    self.settle(
                        b,
                        Outcome::Failed {
                            kind: ErrorKind::Broker(c.error.into()),
                            message,
                        },
                    );
                    continue;
                }
            }
            if let Some(c) = class.filter(|c| c.sequence_reset) {
                self.on_sequence_error(&b, c.error);
            }
            match class {
                // Already written by an earlier attempt whose answer was
                // lost: a success. Newer brokers give the original offset.
                Some(c) if c.error == ResponseError::DuplicateSequenceNumber => {
                    self.acknowledged(&mut b);
                    self.settle(
                        b,
                        Outcome::Delivered {
                            base_offset: (pr.base_offset >= 0).then_some(pr.base_offset),
                            log_append_time: None,
                        },
                    );
                }
                None => {
                    self.acknowledged(&mut b);
                    self.settle(
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
                    self.retry_or_fail(b, now, ErrorKind::Broker(c.error.into()), &msg);
                }
                // Too large as a whole: each record goes, or fails, on its
                // own (Java's splitAndReenqueue).
                Some(c) if c.error == ResponseError::MessageTooLarge && b.record_count > 1 => {
                    self.split_too_large(b);
                }
                Some(c) => {
                    let q = self.engine.acc.queue(&b.topic, b.partition);
                    lock(&q.state).land(&mut b);
                    let detail = pr
                        .error_message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    self.settle(
                        b,
                        Outcome::Failed {
                            kind: ErrorKind::Broker(c.error.into()),
                            message: format!("{}{detail}", c.error),
                        },
                    );
                }
            }
        }
        if refresh {
            self.upstream.refresh_metadata.do_send(RefreshMetadata);
        }
        self.drain(ctx);
    }

    /// Puts the records of a batch the broker refused with
    /// MESSAGE_TOO_LARGE back in its queue, one batch each, in its place
    /// (`Accumulator::split`). A stamped batch's parts carry its sequences,
    /// so the batches behind it (refused as out of order meanwhile) follow
    /// them without an epoch bump.
    fn split_too_large(&self, mut b: SealedBatch) {
        let q = self.engine.acc.queue(&b.topic, b.partition);
        let (id, records) = (b.id, b.record_count);
        lock(&q.state).land(&mut b);
        match self.engine.acc.split(b) {
            Ok(parts) => {
                tracing::info!(
                    broker = self.node_id,
                    topic = %q.topic,
                    partition = q.partition,
                    records,
                    "MESSAGE_TOO_LARGE for a batch; retrying its records one by one"
                );
                let mut qs = lock(&q.state);
                if qs.unacked.remove(&id) {
                    qs.unacked.extend(parts.iter().map(|p| p.id));
                }
                for p in parts {
                    qs.requeue(p);
                }
            }
            Err((b, why)) => {
                self.settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Broker(ResponseError::MessageTooLarge.into()),
                        message: format!(
                            "{} for a batch of {records} records that could not be split: {why}",
                            ResponseError::MessageTooLarge
                        ),
                    },
                );
            }
        }
    }

    /// A quota's throttle time in a response (KIP-219). From Produce v6 the
    /// broker answers at once and leaves the wait to the client, which must
    /// send this broker nothing more until the time has passed (as the Java
    /// client's `NetworkClient.maybeThrottle` does); before v6 the broker
    /// has already held the response back. Either way it is counted.
    fn on_throttle(&mut self, throttle_ms: i32, version: i16, now: Instant) {
        if throttle_ms <= 0 {
            return;
        }
        let wait = Duration::from_millis(throttle_ms as u64);
        self.engine.stats.record_throttle(self.node_id, wait);
        tracing::debug!(
            broker = self.node_id,
            throttle_ms,
            "throttled by a broker quota"
        );
        if version >= 6 {
            let until = now + wait;
            self.throttled_until = Some(self.throttled_until.map_or(until, |t| t.max(until)));
        }
    }

    /// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or
    /// INVALID_PRODUCER_EPOCH for a batch. An out-of-order batch with an
    /// earlier batch still unacknowledged is only waiting for that one: the
    /// retry (in batch order) fixes it. Otherwise the broker lost our
    /// sequence state and the epoch must be bumped.
    pub(super) fn on_sequence_error(&self, b: &SealedBatch, error: ResponseError) {
        let Some(idem) = &self.engine.idem else {
            return;
        };
        // Transactional producers bump at the abort instead (above).
        if self.engine.txn.is_some() {
            return;
        }
        let q = self.engine.acc.queue(&b.topic, b.partition);
        let oldest_unacked = lock(&q.state).unacked.first() == Some(&b.id);
        if error != ResponseError::OutOfOrderSequenceNumber || oldest_unacked {
            let s = b.encoded.stamp();
            idem.needs_bump((s.producer_id, s.producer_epoch));
        }
    }
}
