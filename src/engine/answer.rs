//! What a broker's answer for one batch does to it: a success settles it
//! (reports), a retriable error puts it back in its queue (or fails it once
//! `retries` or `delivery.timeout.ms` are used up), MESSAGE_TOO_LARGE
//! splits it, any other error fails it.
//!
//! Shared by every broker the engine talks to: the connection actors
//! (`actors/broker/response.rs`, for each partition of a Produce
//! response) and the testing double's scripted broker
//! (`actors/scripted/`), so that a scripted answer goes through the same
//! decisions and the same report path as a real one.

use std::ops::ControlFlow;

use crate::clock::Instant;

use crate::batching::batch::SealedBatch;
use crate::delivery::router::route;
use crate::delivery::settlement::Outcome;
use crate::engine::Engine;
use crate::kafka_error::{classify, BrokerError, ErrorClass, ResponseError};
use crate::report::ErrorKind;
use crate::sync::lock;
use crate::transaction::{abortable_on_produce, is_fatal_produce_code};

/// One partition's answer in a Produce response, as the batch needs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchAnswer {
    pub error_code: i16,
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub error_message: Option<String>,
}

impl BatchAnswer {
    /// Written at `base_offset`, with the producer's create times.
    pub fn written(base_offset: i64) -> BatchAnswer {
        BatchAnswer {
            error_code: 0,
            base_offset,
            log_append_time_ms: -1,
            error_message: None,
        }
    }

    /// Refused with `error`, saying `why`.
    pub fn refused(error: crate::kafka_error::BrokerError, why: &str) -> BatchAnswer {
        BatchAnswer {
            error_code: error.code(),
            base_offset: -1,
            log_append_time_ms: -1,
            error_message: Some(why.to_string()),
        }
    }
}

/// What the caller should do after an answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AfterAnswer {
    /// The error says our view of leaders is stale.
    pub refresh_metadata: bool,
}

impl Engine {
    /// Applies `broker`'s answer for the in-flight batch `b` (taken off its
    /// queue's in-flight count here or by `retry_or_fail`): a transactional
    /// producer fenced, a transaction made abortable, or else the answer's
    /// own outcome (delivered, retried, split, failed).
    pub(crate) fn answer(
        &self,
        b: SealedBatch,
        broker: i32,
        answer: &BatchAnswer,
        now: Instant,
    ) -> AfterAnswer {
        let class = classify(answer.error_code);
        // Only a transactional producer's refused batch can fence it or
        // make its transaction abortable; a success goes straight on.
        let b = match class {
            Some(c) if self.txn.is_some() => {
                let ControlFlow::Continue(b) = self.answer_fenced(b, broker, c) else {
                    return AfterAnswer::default();
                };
                let ControlFlow::Continue(b) = self.answer_abortable(b, broker, c) else {
                    return AfterAnswer::default();
                };
                b
            }
            _ => b,
        };
        if let Some(c) = class.filter(|c| c.sequence_reset) {
            self.on_sequence_error(&b, c.error);
        }
        self.answer_batch(b, broker, answer, class, now)
    }

    /// A transactional producer fenced: `Break` once the batch is settled.
    #[cold]
    fn answer_fenced(
        &self,
        b: SealedBatch,
        broker: i32,
        c: ErrorClass,
    ) -> ControlFlow<(), SealedBatch> {
        // A transactional producer fenced (a newer instance with the
        // same transactional.id, or its transaction timed out on the
        // coordinator): this batch and everything not yet sent fail,
        // and the producer takes nothing more.
        if is_fatal_produce_code(c.error) {
            let kind = match c.error {
                ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
                    ErrorKind::Fenced
                }
                e => ErrorKind::Broker(BrokerError::from_response(e)),
            };
            let message = format!(
                "{:?} from broker {broker}: a newer producer with the same transactional.id started, or the coordinator aborted a transaction open longer than transaction.timeout.ms",
                c.error
            );
            // Fenced first, then the report: whoever reads it finds
            // the producer fenced already.
            self.fail_transactional(kind, &message);
            self.land_and_settle(b, Outcome::Failed { kind, message });
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(b)
    }

    /// A transactional producer's batch refused in a way that leaves the
    /// transaction only to be aborted: `Break` once the batch is settled.
    #[cold]
    fn answer_abortable(
        &self,
        b: SealedBatch,
        broker: i32,
        c: ErrorClass,
    ) -> ControlFlow<(), SealedBatch> {
        // A transactional producer whose sequence state the broker
        // lost: the batch fails and the transaction can only be aborted
        // (the abort bumps the epoch, as the Java client does); an
        // out-of-order batch behind an unacknowledged one only waits
        // for it (retried below).
        // Likewise (abortable, and the abort bumps the epoch, as Java's
        // `maybeTransitionToErrorState`) for INVALID_PRODUCER_EPOCH (a
        // stale epoch: fenced, or the coordinator timed the transaction
        // out; the abort's EndTxn tells which), INVALID_TXN_STATE (the
        // broker's check that the partition joined the transaction) and
        // UNSUPPORTED_FOR_MESSAGE_FORMAT.
        let Some(txn) = &self.txn else {
            return ControlFlow::Continue(b);
        };
        if (c.sequence_reset || abortable_on_produce(c.error))
            && (c.error != ResponseError::OutOfOrderSequenceNumber || self.oldest_unacked(&b))
        {
            let (kind, why) = match c.error {
                ResponseError::InvalidProducerEpoch => (
                    ErrorKind::Fenced,
                    "the producer's epoch is stale (a newer producer with the same transactional.id, or the coordinator aborted a transaction open longer than transaction.timeout.ms)",
                ),
                ResponseError::InvalidTxnState | ResponseError::UnsupportedForMessageFormat => (
                    ErrorKind::Broker(BrokerError::from_response(c.error)),
                    "the broker refused the batch in this transaction",
                ),
                _ => (
                    ErrorKind::Broker(BrokerError::from_response(c.error)),
                    "the broker lost this producer's sequence state",
                ),
            };
            let message = format!(
                "{:?} from broker {broker}: {why}; the transaction must be aborted",
                c.error
            );
            txn.sequence_lost(kind, message.clone());
            self.land_and_settle(b, Outcome::Failed { kind, message });
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(b)
    }

    /// The answer's own outcome for `b`: delivered (a duplicate of a
    /// write whose answer was lost included), retried, split (too large
    /// as a whole) or failed.
    fn answer_batch(
        &self,
        mut b: SealedBatch,
        broker: i32,
        answer: &BatchAnswer,
        class: Option<ErrorClass>,
        now: Instant,
    ) -> AfterAnswer {
        let mut after = AfterAnswer::default();
        match class {
            // Already written by an earlier attempt whose answer was
            // lost: a success. Newer brokers give the original offset.
            Some(c) if c.error == ResponseError::DuplicateSequenceNumber => {
                self.acknowledged(&mut b);
                self.settle(
                    b,
                    Outcome::Delivered {
                        base_offset: (answer.base_offset >= 0).then_some(answer.base_offset),
                        log_append_time: None,
                    },
                );
            }
            None => {
                self.acknowledged(&mut b);
                self.settle(
                    b,
                    Outcome::Delivered {
                        base_offset: Some(answer.base_offset),
                        log_append_time: (answer.log_append_time_ms >= 0)
                            .then_some(answer.log_append_time_ms),
                    },
                );
            }
            // Refused out of order behind an earlier batch of its partition
            // still unacknowledged: this batch only waits for that one (the
            // broker holds nothing past the earlier batch's sequence yet). If
            // its delivery timeout passes meanwhile, it timed out, as the Java
            // client's expired batch does; OUT_OF_ORDER_SEQUENCE_NUMBER would
            // tell its reader a batch was lost, and none was.
            Some(c)
                if c.error == ResponseError::OutOfOrderSequenceNumber
                    && now >= b.deadline
                    && self.idem.is_some()
                    && !self.oldest_unacked(&b) =>
            {
                let attempts = b.attempts;
                let timeout_ms = self.config.delivery_timeout.as_millis();
                self.land_and_settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Timeout,
                        message: format!(
                            "not acknowledged within delivery.timeout.ms ({timeout_ms} ms) after {attempts} attempt(s): it waited behind an earlier batch of its partition not yet acknowledged (OutOfOrderSequenceNumber from broker {broker})"
                        ),
                    },
                );
            }
            Some(c) if c.retriable => {
                after.refresh_metadata |= c.refresh_metadata;
                let msg = format!("{:?} from broker {broker}", c.error);
                self.retry_or_fail(
                    b,
                    now,
                    ErrorKind::Broker(BrokerError::from_response(c.error)),
                    &msg,
                    true,
                );
            }
            // Too large as a whole: each record goes, or fails, on its
            // own (Java's splitAndReenqueue).
            Some(c) if c.error == ResponseError::MessageTooLarge && b.record_count > 1 => {
                self.split_too_large(b, broker);
            }
            Some(c) => {
                let detail = answer
                    .error_message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                self.land_and_settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Broker(BrokerError::from_response(c.error)),
                        message: format!("{}{detail}", c.error),
                    },
                );
            }
        }
        after
    }

    /// Re-queues a batch for another attempt, or fails it with `kind` when
    /// its delivery timeout has passed or, if this failed attempt is
    /// `counted`, when `retries` are used up (as the Java client).
    pub(crate) fn retry_or_fail(
        &self,
        mut batch: SealedBatch,
        now: Instant,
        kind: ErrorKind,
        message: &str,
        counted: bool,
    ) {
        let queue = self.acc.queue(&batch.topic, batch.partition);
        let retries = self.config.retries;
        if counted && batch.attempts > retries {
            let attempts = batch.attempts;
            self.land_and_settle(
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
            let attempts = batch.attempts;
            self.land_and_settle(
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
        let cfg = &self.config;
        batch.retry_at = Some(
            now + crate::clock::backoff(
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
        let q = self.acc.queue(&b.topic, b.partition);
        let mut qs = lock(&q.state);
        qs.land(b);
        if self.idem.is_some() {
            let s = b.encoded.stamp();
            qs.confirmed = Some((s.producer_id, s.producer_epoch));
        }
    }

    /// Whether `b` is the oldest batch of its partition that the broker
    /// has not acknowledged: an OUT_OF_ORDER_SEQUENCE_NUMBER for it means
    /// the broker lost sequence state; for a later one, only that an
    /// earlier batch is not written yet.
    fn oldest_unacked(&self, b: &SealedBatch) -> bool {
        let q = self.acc.queue(&b.topic, b.partition);
        let oldest = lock(&q.state).unacked.first() == Some(&b.id);
        oldest
    }

    /// Takes an in-flight batch off its queue's count (`land`), then
    /// reports and releases it (`settle`).
    pub(crate) fn land_and_settle(&self, mut batch: SealedBatch, outcome: Outcome) {
        let q = self.acc.queue(&batch.topic, batch.partition);
        lock(&q.state).land(&mut batch);
        self.settle(batch, outcome);
    }

    /// Reports a batch and releases it.
    pub(crate) fn settle(&self, mut batch: SealedBatch, outcome: Outcome) {
        batch.ledger.settle();
        if self.idem.is_some() {
            let q = self.acc.queue(&batch.topic, batch.partition);
            lock(&q.state).unacked.remove(&batch.id);
            if matches!(outcome, Outcome::Failed { .. }) && batch.encoded.stamp().producer_id >= 0 {
                self.acc
                    .stamped_lost
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            }
        }
        let owed = std::mem::take(&mut batch.owed);
        route(
            batch.topic,
            batch.partition,
            batch.record_count,
            batch.attempts,
            owed,
            outcome,
            Some(self.acc.readback(&batch.encoded)),
            &self.stats,
        );
        self.acc.batch_done(batch.id);
    }

    /// Puts the records of a batch the broker refused with
    /// MESSAGE_TOO_LARGE back in its queue, one batch each, in its place
    /// (`Accumulator::split`). A stamped batch's parts carry its sequences,
    /// so the batches behind it (refused as out of order meanwhile) follow
    /// them without an epoch bump.
    fn split_too_large(&self, mut b: SealedBatch, broker: i32) {
        let q = self.acc.queue(&b.topic, b.partition);
        let records = b.record_count;
        lock(&q.state).land(&mut b);
        match self.acc.split(b) {
            Ok(parts) => {
                tracing::info!(
                    broker,
                    topic = %q.topic,
                    partition = q.partition,
                    records,
                    "MESSAGE_TOO_LARGE for a batch; retrying its records one by one"
                );
                let mut qs = lock(&q.state);
                for p in parts {
                    qs.requeue(p);
                }
            }
            Err((b, why)) => {
                self.settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Broker(BrokerError::MessageTooLarge),
                        message: format!(
                            "{} for a batch of {records} records that could not be split: {why}",
                            ResponseError::MessageTooLarge
                        ),
                    },
                );
            }
        }
    }

    /// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or
    /// INVALID_PRODUCER_EPOCH for a batch. An out-of-order batch with an
    /// earlier batch still unacknowledged is only waiting for that one: the
    /// retry (in batch order) fixes it. Otherwise the broker lost our
    /// sequence state and the epoch must be bumped.
    fn on_sequence_error(&self, b: &SealedBatch, error: ResponseError) {
        let Some(idem) = &self.idem else {
            return;
        };
        // Transactional producers bump at the abort instead (above).
        if self.txn.is_some() {
            return;
        }
        if error != ResponseError::OutOfOrderSequenceNumber || self.oldest_unacked(b) {
            let s = b.encoded.stamp();
            idem.needs_bump((s.producer_id, s.producer_epoch));
        }
    }
}
