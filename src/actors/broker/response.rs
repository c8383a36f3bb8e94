//! Responses: matching a Produce response to its request, and settling
//! each batch in it (reports), retrying it, or failing it. Also where
//! in-flight batches go back to their queues when a connection ends.

use std::time::Duration;

use crate::clock::Instant;

use actix::prelude::*;
use kafka_protocol::messages::ProduceRequest;

use crate::actors::broker::state::InFlight;
use crate::actors::broker::BrokerConnection;
use crate::actors::msgs::{LeaderHints, RefreshMetadata};
use crate::batching::batch::SealedBatch;
use crate::engine::answer::BatchAnswer;
use crate::metadata::LeaderHint;
use crate::protocol::frame::peek_correlation_id;
use crate::protocol::leader_hint::{current_leader, node_endpoints};
use crate::protocol::message::decode_response;
use crate::report::ErrorKind;
use crate::sync::lock;

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
    /// timeout has passed (`Engine::retry_or_fail`).
    pub(super) fn retry_or_fail(
        &self,
        batch: SealedBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
    ) {
        self.engine.retry_or_fail(batch, now, kind, message, true)
    }

    /// `retry_or_fail`; `counted`: whether the failed attempt counts
    /// against `retries`.
    fn retry_or_fail_counted(
        &self,
        batch: SealedBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
        counted: bool,
    ) {
        self.engine
            .retry_or_fail(batch, now, kind, message, counted)
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
        if let Some((_, call)) = self.calls.remove(&correlation_id) {
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
            .stats()
            .record_request(self.node_id, now - f.sent_at);
        self.on_throttle(resp.throttle_time_ms, f.version, now);
        let mut refresh = false;
        let mut hints = Vec::new();
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
            let answer = BatchAnswer {
                error_code: pr.error_code,
                base_offset: pr.base_offset,
                log_append_time_ms: pr.log_append_time_ms,
                error_message: pr.error_message.as_ref().map(|m| m.to_string()),
            };
            // KIP-951: a refusal that names the new leader moves the
            // partition through the partitioner actor (the metadata's
            // owner) without waiting for a Metadata round trip.
            let hint = current_leader(pr).map(|l| LeaderHint {
                topic: b.topic,
                partition: b.partition,
                from: self.node_id,
                leader: l.leader,
                epoch: l.epoch,
            });
            let after = self.engine.answer(b, self.node_id, &answer, now);
            match hint {
                Some(h) => hints.push(h),
                None => refresh |= after.refresh_metadata,
            }
        }
        if !hints.is_empty() {
            tracing::debug!(
                broker = self.node_id,
                partitions = hints.len(),
                "produce answer names new leaders"
            );
            self.upstream.leader_hints.do_send(LeaderHints {
                hints,
                endpoints: node_endpoints(&resp),
            });
        }
        if refresh {
            self.upstream.refresh_metadata.do_send(RefreshMetadata);
        }
        self.drain(ctx);
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
        self.engine.stats().record_throttle(self.node_id, wait);
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
}
