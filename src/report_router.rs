//! Turns one batch's outcome into its records' reports and routes them:
//! one pass over the batch, one push per subscription per batch, one wake
//! per subscription per batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::accumulator::{Owed, Reply};
use crate::record::Topic;
use crate::report::{Delivered, DeliveryError, DeliveryReport, ErrorKind};
use crate::stats::Stats;

/// How a batch ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Written. `base_offset` is `None` with `acks=0`; `log_append_time` is
    /// the broker's time when the topic uses LogAppendTime.
    Delivered {
        base_offset: Option<i64>,
        log_append_time: Option<i64>,
    },
    /// Not written.
    Failed { kind: ErrorKind, message: String },
}

/// Sends every report `owed` for a batch of `record_count` records.
pub(crate) fn route(
    topic: &Topic,
    partition: i32,
    record_count: i32,
    attempts: u32,
    mut owed: Owed,
    outcome: &Outcome,
    stats: &Stats,
) {
    let now = Instant::now();
    match outcome {
        Outcome::Delivered { .. } => stats
            .delivered
            .fetch_add(record_count as u64, Ordering::Relaxed),
        Outcome::Failed { .. } => stats
            .failed
            .fetch_add(record_count as u64, Ordering::Relaxed),
    };
    let subscribers = std::mem::take(&mut owed.subscribers);
    let pending = std::mem::take(&mut owed.pending);
    // One lock per subscriber for the whole batch; reports go straight into
    // its queue (no intermediate vector), and an errors-only subscriber's
    // successes are never built.
    let mut sinks: Vec<_> = subscribers.iter().map(|s| s.sink()).collect();
    let wants: Vec<bool> = subscribers.iter().map(|s| s.wants_successes()).collect();
    let delivered = matches!(outcome, Outcome::Delivered { .. });
    let mut latencies = LatencyBatch::default();
    for p in pending {
        let latency = now.saturating_duration_since(p.accepted);
        latencies.add(latency.as_micros() as u64);
        if let Reply::Subscription(i) = p.reply {
            if delivered && !wants[i as usize] {
                sinks[i as usize].skip();
                continue;
            }
        }
        let report = match outcome {
            Outcome::Delivered {
                base_offset,
                log_append_time,
            } => DeliveryReport::Delivered(Delivered {
                topic: topic.clone(),
                partition,
                offset: base_offset.map(|b| b + p.index as i64),
                timestamp: log_append_time.unwrap_or(p.timestamp),
                attempts,
                latency,
                record: p.record,
            }),
            Outcome::Failed { kind, message } => DeliveryReport::Failed(DeliveryError {
                kind: *kind,
                message: message.clone(),
                partition: Some(partition),
                attempts,
                record: p.record,
            }),
        };
        match p.reply {
            Reply::Oneshot(tx) => {
                let _ = tx.send(report);
            }
            Reply::Actor(r) => r.do_send(report),
            Reply::Subscription(i) => sinks[i as usize].push(report),
        }
    }
    drop(sinks);
    latencies.flush(&stats.latency_us);
}

/// Reports a batch that is not in flight (queued, open, or that failed to
/// encode) as failed, and marks it done. `message` gets the attempts made.
pub(crate) fn fail_unsent(
    acc: &crate::accumulator::Accumulator,
    topic: &Topic,
    batch: Result<crate::accumulator::ProducerBatch, crate::accumulator::FailedBatch>,
    kind: ErrorKind,
    message: impl FnOnce(u32) -> String,
    stats: &Stats,
) {
    let (id, partition, count, attempts, owed) = match batch {
        Ok(b) => (b.id, b.partition, b.record_count, b.attempts, b.owed),
        Err(f) => (f.id, f.partition, f.record_count, 0, f.owed),
    };
    let message = message(attempts);
    route(
        topic,
        partition,
        count,
        attempts,
        owed,
        &Outcome::Failed { kind, message },
        stats,
    );
    acc.batch_done(id);
}

/// Reports for records that never reached a batch (rejected before
/// appending): one report, straight to its target.
pub(crate) fn route_one(report: DeliveryReport, reply: crate::accumulator::ReplyTo, stats: &Stats) {
    use crate::accumulator::ReplyTo;
    if report.is_delivered() {
        stats.delivered.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.failed.fetch_add(1, Ordering::Relaxed);
    }
    match reply {
        ReplyTo::Oneshot(tx) => {
            let _ = tx.send(report);
        }
        ReplyTo::Actor(r) => r.do_send(report),
        ReplyTo::Subscription(s) => s.deliver(vec![report]),
    }
}

/// Latencies of one batch, bucketed locally, added to the shared histogram
/// once per batch.
#[derive(Default)]
struct LatencyBatch {
    buckets: [u32; crate::stats::LATENCY_BUCKETS],
    any: bool,
}

impl LatencyBatch {
    fn add(&mut self, micros: u64) {
        self.buckets[crate::stats::bucket_of(micros)] += 1;
        self.any = true;
    }

    fn flush(&self, shared: &[AtomicU64; crate::stats::LATENCY_BUCKETS]) {
        if !self.any {
            return;
        }
        for (i, n) in self.buckets.iter().enumerate() {
            if *n > 0 {
                shared[i].fetch_add(*n as u64, Ordering::Relaxed);
            }
        }
    }
}
