//! Counters and histograms behind [`crate::Producer::stats`]. Updated per
//! batch (counts added in one step), never per record. The same places
//! feed the `metrics` facade (`metric_handles`, the `metrics` feature).

use crate::interceptor::Interceptors;
use crate::metric_handles::Metrics;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Histogram buckets: bucket `i` holds latencies in `[2^(i-1), 2^i)` µs,
/// bucket 0 holds 0 µs.
pub const LATENCY_BUCKETS: usize = 32;

pub(crate) fn bucket_of(micros: u64) -> usize {
    ((64 - micros.leading_zeros()) as usize).min(LATENCY_BUCKETS - 1)
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub actor_restarts: AtomicU64,
    pub latency_us: [AtomicU64; LATENCY_BUCKETS],
    pub brokers: Mutex<HashMap<i32, BrokerStats>>,
    /// Metadata requests the partitioner actor sent.
    pub metadata_requests: AtomicU64,
    /// Partitions moved to a new leader named by a Produce answer
    /// (KIP-951), without a Metadata request.
    pub leader_hints: AtomicU64,
    /// The same counts, published (a no-op without the `metrics` feature,
    /// or when made by `Default`).
    pub metrics: Metrics,
    /// The producer's interceptors: `route` and `route_one` show them
    /// every report (they travel with the counters because every report
    /// path already carries these).
    pub interceptors: Interceptors,
    /// A planted bug, for showing that the fault simulation's invariants
    /// catch one (`Producer::plant_lost_reports`): this many batches
    /// settled from now on each lose one owed report without a trace.
    #[cfg(feature = "fault-injection")]
    pub plant_lost_reports: AtomicU64,
}

/// Request statistics for one broker.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BrokerStats {
    /// Produce requests answered.
    pub requests: u64,
    /// Sum of their round-trip times.
    pub total_latency: Duration,
    /// The slowest.
    pub max_latency: Duration,
    /// Produce responses that carried a quota's throttle time (KIP-219).
    pub throttled_responses: u64,
    /// The throttle time those responses asked for, added up. From Produce
    /// v6 on, the producer sends this broker nothing for that long.
    pub throttle_time: Duration,
    /// Connections to this broker lost (socket errors, request timeouts,
    /// unreadable responses), each followed by a reconnect.
    pub disconnects: u64,
    /// Connections replaced because their SASL session was ending
    /// (`connections.max.reauth.ms`, KIP-368), once their requests were
    /// answered.
    pub reauthentications: u64,
    /// Connections closed for being idle (`connections.max.idle.ms`), with
    /// nothing in flight; not errors, and not counted as disconnects.
    pub idle_closes: u64,
}

impl BrokerStats {
    /// Mean round trip.
    pub fn mean_latency(&self) -> Duration {
        if self.requests == 0 {
            Duration::ZERO
        } else {
            self.total_latency / self.requests as u32
        }
    }
}

/// A point-in-time view of a producer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Records accepted by produce calls.
    pub produced: u64,
    /// Records reported delivered.
    pub delivered: u64,
    /// Records reported failed.
    pub failed: u64,
    /// Accepted but not yet reported.
    pub in_flight: u64,
    /// Connection actors restarted after dying.
    pub actor_restarts: u64,
    /// Bytes of `buffer.memory` currently reserved by batches.
    pub buffered_bytes: usize,
    /// Produce request round trips per broker id.
    pub brokers: HashMap<i32, BrokerStats>,
    /// Delivery latency histogram: `(upper bound, count)` per bucket, for
    /// every record with a report.
    pub delivery_latency: Vec<(Duration, u64)>,
    /// A transactional producer's transaction protocol (KIP-890): `Some(2)`
    /// when the cluster has finalized `transaction.version` 2 (partitions
    /// join implicitly, every EndTxn bumps the epoch), `Some(1)` otherwise;
    /// `None` for a producer without `transactional.id`, or before it has
    /// its producer id.
    pub transaction_version: Option<u8>,
}

impl StatsSnapshot {
    /// The latency below which `q` (0..=1) of reported records fall, to
    /// the histogram's power-of-two resolution.
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        let total: u64 = self.delivery_latency.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let want = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bound, n) in &self.delivery_latency {
            seen += n;
            if seen >= want {
                return Some(*bound);
            }
        }
        self.delivery_latency.last().map(|(b, _)| *b)
    }
}

impl Stats {
    /// Stats that also publish through the `metrics` facade, labelled with
    /// `client_id`.
    pub(crate) fn new(client_id: &str) -> Stats {
        Stats {
            metrics: Metrics::new(client_id),
            ..Stats::default()
        }
    }

    /// An actor restarted, or a supervisor task panicked.
    pub(crate) fn record_actor_restart(&self) {
        self.actor_restarts.fetch_add(1, Ordering::Relaxed);
        self.metrics.actor_restart();
    }

    /// The counters, with `produced` (records taken, which the engine
    /// counts: refused ones and the accumulator's appends) and the bytes
    /// buffered now.
    pub(crate) fn snapshot(&self, produced: u64, buffered_bytes: usize) -> StatsSnapshot {
        let delivered = self.delivered.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        StatsSnapshot {
            produced,
            delivered,
            failed,
            in_flight: produced.saturating_sub(delivered + failed),
            actor_restarts: self.actor_restarts.load(Ordering::Relaxed),
            buffered_bytes,
            brokers: lock(&self.brokers).clone(),
            delivery_latency: self
                .latency_us
                .iter()
                .enumerate()
                .map(|(i, n)| (Duration::from_micros(1u64 << i), n.load(Ordering::Relaxed)))
                .collect(),
            transaction_version: None,
        }
    }

    pub(crate) fn record_reauthentication(&self, broker: i32) {
        self.metrics.reauthentication(broker);
        lock(&self.brokers)
            .entry(broker)
            .or_default()
            .reauthentications += 1;
    }

    pub(crate) fn record_idle_close(&self, broker: i32) {
        lock(&self.brokers).entry(broker).or_default().idle_closes += 1;
    }

    pub(crate) fn record_disconnect(&self, broker: i32) {
        self.metrics.disconnect(broker);
        lock(&self.brokers).entry(broker).or_default().disconnects += 1;
    }

    pub(crate) fn record_throttle(&self, broker: i32, wait: Duration) {
        self.metrics.throttle(broker, wait);
        let mut b = lock(&self.brokers);
        let s = b.entry(broker).or_default();
        s.throttled_responses += 1;
        s.throttle_time += wait;
    }

    pub(crate) fn record_request(&self, broker: i32, latency: Duration) {
        self.metrics.request(broker, latency);
        let mut b = lock(&self.brokers);
        let s = b.entry(broker).or_default();
        s.requests += 1;
        s.total_latency += latency;
        s.max_latency = s.max_latency.max(latency);
    }
}
