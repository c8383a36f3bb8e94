//! The producer's counters, gauges and histograms published through the
//! [`metrics`](https://docs.rs/metrics) crate's facade (cargo feature
//! `metrics`), so that whatever exporter the application installs
//! (Prometheus, StatsD, OpenTelemetry, …) sees what
//! [`crate::Producer::stats`] shows, without polling it.
//!
//! Shaped by the hot path: nothing here runs per record. Each call sits
//! where `stats.rs` is updated, once per batch (with the batch's record
//! count), per request or per event. The `metrics` macros resolve a key on
//! every call, building its labels (an allocation for a topic's name) and
//! asking the recorder, so handles are resolved once and kept: the
//! producer's own when it is built, a topic's the first time one of its
//! batches closes or one of its records is refused, a broker's at its
//! first event, a failure counter at the first failure of that kind for
//! that topic. A recorder must therefore be installed before the producer
//! is built; handles resolved before it stay no-ops.
//!
//! Every series carries `client_id` (`client.id`), so that producers of one
//! process can be told apart; two producers with one `client.id` share
//! their series (counters add up, gauges are whichever set them last).
//!
//! Without the feature, [`Metrics`] is an empty type whose methods do
//! nothing, and the calls compile away.

#[cfg(feature = "metrics")]
pub(crate) use enabled::Metrics;

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::Metrics;

/// Metric names, for the docs and the tests.
pub mod names {
    /// Records accepted by produce calls, counted when their batch closes
    /// (is sealed) or, for a record refused before it reached a batch, at
    /// once. Labels `client_id`, `topic`.
    pub const RECORDS_PRODUCED: &str = "courier_records_produced_total";
    /// Records reported delivered. Labels `client_id`, `topic`.
    pub const RECORDS_DELIVERED: &str = "courier_records_delivered_total";
    /// Records reported failed. Labels `client_id`, `topic`, `kind`.
    pub const RECORDS_FAILED: &str = "courier_records_failed_total";
    /// Delivery latency (accepted to reported) of records that owe a
    /// report. Labels `client_id`, `topic`.
    pub const DELIVERY_LATENCY: &str = "courier_delivery_latency_seconds";
    /// Actors restarted after dying, and supervisor tasks that panicked.
    /// Label `client_id`.
    pub const ACTOR_RESTARTS: &str = "courier_actor_restarts_total";
    /// Bytes of `buffer.memory` reserved by batches. Label `client_id`.
    pub const BUFFERED_BYTES: &str = "courier_buffered_bytes";
    /// Records accepted and not yet reported. Label `client_id`.
    pub const RECORDS_IN_FLIGHT: &str = "courier_records_in_flight";
    /// Produce requests answered. Labels `client_id`, `broker`.
    pub const BROKER_REQUESTS: &str = "courier_broker_requests_total";
    /// Produce request round trips. Labels `client_id`, `broker`.
    pub const BROKER_REQUEST_LATENCY: &str = "courier_broker_request_latency_seconds";
    /// Produce responses that carried a quota's throttle time (KIP-219).
    /// Labels `client_id`, `broker`.
    pub const BROKER_THROTTLED: &str = "courier_broker_throttled_responses_total";
    /// The throttle time those responses asked for. Labels `client_id`,
    /// `broker`.
    pub const BROKER_THROTTLE_TIME: &str = "courier_broker_throttle_time_seconds";
    /// Connections lost (each followed by a reconnect). Labels `client_id`,
    /// `broker`.
    pub const BROKER_DISCONNECTS: &str = "courier_broker_disconnects_total";
    /// Connections replaced because their SASL session was ending
    /// (KIP-368). Labels `client_id`, `broker`.
    pub const BROKER_REAUTHENTICATIONS: &str = "courier_broker_reauthentications_total";
}

#[cfg(not(feature = "metrics"))]
mod disabled {
    use crate::record::Topic;
    use crate::report::ErrorKind;
    use std::time::Duration;

    /// Publishes nothing: the `metrics` feature is off.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Metrics(());

    #[allow(dead_code)]
    impl Metrics {
        pub(crate) fn new(_client_id: &str) -> Metrics {
            Metrics(())
        }
        #[inline(always)]
        pub(crate) fn produced(&self, _topic: Topic, _n: u64) {}
        #[inline(always)]
        pub(crate) fn settled(&self, _topic: Topic, _failed: Option<ErrorKind>, _n: u64) {}
        #[inline(always)]
        pub(crate) fn latency(&self, _topic: Topic, _counts: &[u32], _sums_us: &[u64]) {}
        #[inline(always)]
        pub(crate) fn actor_restart(&self) {}
        #[inline(always)]
        pub(crate) fn gauges(&self, _buffered_bytes: usize, _in_flight: u64) {}
        #[inline(always)]
        pub(crate) fn request(&self, _broker: i32, _latency: Duration) {}
        #[inline(always)]
        pub(crate) fn throttle(&self, _broker: i32, _wait: Duration) {}
        #[inline(always)]
        pub(crate) fn disconnect(&self, _broker: i32) {}
        #[inline(always)]
        pub(crate) fn reauthentication(&self, _broker: i32) {}

        #[inline(always)]
        pub(crate) fn forget_topic(&self, _topic: crate::record::Topic) {}
    }
}

#[cfg(feature = "metrics")]
mod enabled {
    use super::names::*;
    use crate::record::{Topic, TopicHasher};
    use crate::report::ErrorKind;
    use crate::sync::lock;
    use dashmap::DashMap;
    use metrics::{Counter, Gauge, Histogram, Label, SharedString, Unit};
    use std::sync::{Arc, Mutex, Once};
    use std::time::Duration;

    /// A producer's handles; `Default` publishes nothing (unit tests, the
    /// bench internals), [`Metrics::new`] resolves them with the recorder
    /// installed at the time.
    #[derive(Clone, Default)]
    pub(crate) struct Metrics(Option<Arc<Inner>>);

    impl std::fmt::Debug for Metrics {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Metrics")
                .field("client_id", &self.0.as_ref().map(|i| &i.client_id))
                .finish()
        }
    }

    struct Inner {
        client_id: SharedString,
        actor_restarts: Counter,
        buffered_bytes: Gauge,
        in_flight: Gauge,
        /// foldhash, as the accumulator's: SipHash is several times
        /// dearer per look-up, and a batch looks its topic up here.
        topics: DashMap<Topic, TopicHandles, TopicHasher>,
        brokers: DashMap<i32, BrokerHandles, TopicHasher>,
    }

    struct TopicHandles {
        produced: Counter,
        delivered: Counter,
        latency: Histogram,
        /// One counter per kind seen: few kinds, scanned.
        failed: Mutex<Vec<(ErrorKind, Counter)>>,
    }

    struct BrokerHandles {
        requests: Counter,
        latency: Histogram,
        throttled: Counter,
        throttle_time: Histogram,
        disconnects: Counter,
        reauthentications: Counter,
    }

    /// Units and help texts, once per process (recorders keep the first).
    fn describe() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            use metrics::{describe_counter, describe_gauge, describe_histogram};
            describe_counter!(RECORDS_PRODUCED, Unit::Count, "Records accepted by produce calls (counted when their batch closes, or at once when refused before reaching one).");
            describe_counter!(RECORDS_DELIVERED, Unit::Count, "Records reported delivered.");
            describe_counter!(RECORDS_FAILED, Unit::Count, "Records reported failed, by error kind.");
            describe_histogram!(DELIVERY_LATENCY, Unit::Seconds, "Delivery latency, from the produce call to the report, of records that owe a report.");
            describe_counter!(ACTOR_RESTARTS, Unit::Count, "Actors restarted after dying, and supervisor tasks that panicked.");
            describe_gauge!(BUFFERED_BYTES, Unit::Bytes, "Bytes of buffer.memory reserved by batches.");
            describe_gauge!(RECORDS_IN_FLIGHT, Unit::Count, "Records accepted and not yet reported.");
            describe_counter!(BROKER_REQUESTS, Unit::Count, "Produce requests answered, per broker.");
            describe_histogram!(BROKER_REQUEST_LATENCY, Unit::Seconds, "Produce request round trips, per broker.");
            describe_counter!(BROKER_THROTTLED, Unit::Count, "Produce responses that carried a quota's throttle time (KIP-219), per broker.");
            describe_histogram!(BROKER_THROTTLE_TIME, Unit::Seconds, "Throttle time asked for by throttled Produce responses, per broker.");
            describe_counter!(BROKER_DISCONNECTS, Unit::Count, "Connections lost, each followed by a reconnect, per broker.");
            describe_counter!(BROKER_REAUTHENTICATIONS, Unit::Count, "Connections replaced because their SASL session was ending (KIP-368), per broker.");
        });
    }

    /// The label value of an error kind: stable snake_case, the broker's
    /// error name for a broker error.
    fn kind_label(kind: ErrorKind) -> SharedString {
        let s = match kind {
            ErrorKind::RecordTooLarge => "record_too_large",
            ErrorKind::UnknownTopic => "unknown_topic",
            ErrorKind::UnknownPartition => "unknown_partition",
            ErrorKind::Timeout => "timeout",
            // The protocol crate's name, so that an Other code is named too.
            ErrorKind::Broker(e) => {
                let e = e.to_response();
                return format!("broker_{e:?}").into();
            }
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Compression => "compression",
            ErrorKind::QueueFull => "queue_full",
            ErrorKind::Authentication => "authentication",
            ErrorKind::Tls => "tls",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Fenced => "fenced",
        };
        s.into()
    }

    impl Inner {
        fn labels(&self, more: &[(&'static str, SharedString)]) -> Vec<Label> {
            let mut v = vec![Label::new("client_id", self.client_id.clone())];
            v.extend(more.iter().map(|(k, val)| Label::new(*k, val.clone())));
            v
        }

        /// Runs `f` on the handles of `topic`, resolving them the first
        /// time (a shard read lock after that, no reference count).
        fn topic<R>(&self, topic: Topic, f: impl FnOnce(&TopicHandles) -> R) -> R {
            if let Some(h) = self.topics.get(&topic) {
                return f(&h);
            }
            let labels = self.labels(&[("topic", topic.as_str().into())]);
            let h = self.topics.entry(topic).or_insert_with(|| TopicHandles {
                produced: metrics::counter!(RECORDS_PRODUCED, labels.clone()),
                delivered: metrics::counter!(RECORDS_DELIVERED, labels.clone()),
                latency: metrics::histogram!(DELIVERY_LATENCY, labels.clone()),
                failed: Mutex::new(Vec::new()),
            });
            f(&h)
        }

        fn broker<R>(&self, broker: i32, f: impl FnOnce(&BrokerHandles) -> R) -> R {
            if let Some(h) = self.brokers.get(&broker) {
                return f(&h);
            }
            let labels = self.labels(&[("broker", broker.to_string().into())]);
            let h = self.brokers.entry(broker).or_insert_with(|| BrokerHandles {
                requests: metrics::counter!(BROKER_REQUESTS, labels.clone()),
                latency: metrics::histogram!(BROKER_REQUEST_LATENCY, labels.clone()),
                throttled: metrics::counter!(BROKER_THROTTLED, labels.clone()),
                throttle_time: metrics::histogram!(BROKER_THROTTLE_TIME, labels.clone()),
                disconnects: metrics::counter!(BROKER_DISCONNECTS, labels.clone()),
                reauthentications: metrics::counter!(BROKER_REAUTHENTICATIONS, labels.clone()),
            });
            f(&h)
        }
    }

    impl Metrics {
        /// Resolves the producer's handles with the recorder installed now.
        pub(crate) fn new(client_id: &str) -> Metrics {
            describe();
            let client_id: SharedString = client_id.to_string().into();
            let labels = vec![Label::new("client_id", client_id.clone())];
            Metrics(Some(Arc::new(Inner {
                actor_restarts: metrics::counter!(ACTOR_RESTARTS, labels.clone()),
                buffered_bytes: metrics::gauge!(BUFFERED_BYTES, labels.clone()),
                in_flight: metrics::gauge!(RECORDS_IN_FLIGHT, labels.clone()),
                client_id,
                topics: DashMap::default(),
                brokers: DashMap::default(),
            })))
        }

        /// `n` records of `topic` produced: a batch closed, or a record
        /// refused before reaching one.
        #[inline]
        pub(crate) fn produced(&self, topic: Topic, n: u64) {
            if let Some(m) = &self.0 {
                m.topic(topic, |t| t.produced.increment(n));
            }
        }

        /// `n` records of `topic` reported: delivered, or failed with a kind.
        #[inline]
        pub(crate) fn settled(&self, topic: Topic, failed: Option<ErrorKind>, n: u64) {
            let Some(m) = &self.0 else {
                return;
            };
            m.topic(topic, |t| {
                let Some(kind) = failed else {
                    t.delivered.increment(n);
                    return;
                };
                let mut kinds = lock(&t.failed);
                if let Some((_, c)) = kinds.iter().find(|(k, _)| *k == kind) {
                    c.increment(n);
                    return;
                }
                let labels =
                    m.labels(&[("topic", topic.as_str().into()), ("kind", kind_label(kind))]);
                let c = metrics::counter!(RECORDS_FAILED, labels.clone());
                c.increment(n);
                kinds.push((kind, c));
            });
        }

        /// One batch's delivery latencies, as the batch's histogram
        /// buckets: each bucket's records recorded at once (`record_many`)
        /// at their mean, so the sum is exact and each value is within its
        /// power-of-two bucket.
        #[inline]
        pub(crate) fn latency(&self, topic: Topic, counts: &[u32], sums_us: &[u64]) {
            let Some(m) = &self.0 else {
                return;
            };
            m.topic(topic, |t| {
                for (n, sum) in counts.iter().zip(sums_us) {
                    if *n > 0 {
                        let mean_s = *sum as f64 / *n as f64 / 1e6;
                        t.latency.record_many(mean_s, *n as usize);
                    }
                }
            });
        }

        pub(crate) fn actor_restart(&self) {
            if let Some(m) = &self.0 {
                m.actor_restarts.increment(1);
            }
        }

        /// Sampled by the supervisor at each tick, from the numbers
        /// `Producer::stats()` shows.
        pub(crate) fn gauges(&self, buffered_bytes: usize, in_flight: u64) {
            if let Some(m) = &self.0 {
                m.buffered_bytes.set(buffered_bytes as f64);
                m.in_flight.set(in_flight as f64);
            }
        }

        pub(crate) fn request(&self, broker: i32, latency: Duration) {
            if let Some(m) = &self.0 {
                m.broker(broker, |b| {
                    b.requests.increment(1);
                    b.latency.record(latency.as_secs_f64());
                });
            }
        }

        pub(crate) fn throttle(&self, broker: i32, wait: Duration) {
            if let Some(m) = &self.0 {
                m.broker(broker, |b| {
                    b.throttled.increment(1);
                    b.throttle_time.record(wait.as_secs_f64());
                });
            }
        }

        pub(crate) fn disconnect(&self, broker: i32) {
            if let Some(m) = &self.0 {
                m.broker(broker, |b| b.disconnects.increment(1));
            }
        }

        pub(crate) fn reauthentication(&self, broker: i32) {
            if let Some(m) = &self.0 {
                m.broker(broker, |b| b.reauthentications.increment(1));
            }
        }

        /// Lets go of a forgotten topic's handles (`Accumulator::forget`);
        /// they are resolved again at its next batch.
        pub(crate) fn forget_topic(&self, topic: Topic) {
            if let Some(m) = &self.0 {
                m.topics.remove(&topic);
            }
        }
    }
}
