//! `TelemetryActor`: the producer's metrics pushed to a broker when the
//! cluster asks for them (KIP-714, `enable.metrics.push`).
//!
//! It asks one broker (kept while it stays connected) for the client's
//! telemetry subscription (GetTelemetrySubscriptions): the broker assigns
//! the client an instance id and says which metrics (name prefixes) it
//! wants, how often, and whether sums are cumulative or deltas. An empty
//! list means none: the actor asks again after the push interval, so a
//! subscription made later (`kafka-client-metrics --alter`) is found. With
//! metrics wanted, it pushes them (PushTelemetry, an OTLP `MetricsData`,
//! `protocol::otlp`) every interval, the first at a random point of the
//! first interval (as the Java client, so that many clients started
//! together do not push together). UNKNOWN_SUBSCRIPTION_ID and
//! UNSUPPORTED_COMPRESSION_TYPE ask for the subscription again at once;
//! INVALID_REQUEST and INVALID_RECORD stop the pushes (the broker cannot
//! use them); other errors wait for the next interval. A broker that does
//! not offer the APIs (before Kafka 3.7) is asked again only after a while.
//!
//! The metrics are Courier's own counters under the Java producer's names
//! (`org.apache.kafka.producer.` and its metric names with `-` as `.`):
//! `record.send.total` (records delivered), `record.error.total`,
//! `buffer.total.bytes`, `buffer.available.bytes`, `request.total`,
//! `request.latency.avg` and `.max` (ms), `produce.throttle.time.avg` and
//! `.max` (ms), `connection.close.total`, and per broker
//! (`node_id` attribute) `node.request.total`, `node.request.latency.avg`
//! and `.max`.
//!
//! The subscription and the instance id live in `TelemetryState`, outside
//! the actor: the supervisor restarts a dead actor on the same state.
//!
//! # References
//! - KIP-714: <https://cwiki.apache.org/confluence/display/KAFKA/KIP-714%3A+Client+metrics+and+observability>
//! - Java: `ClientTelemetryReporter`, `KafkaMetricsCollector`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};

use crate::actors::addresses::Addresses;
use crate::actors::msgs::Ask;
use crate::engine::Engine;
use crate::kafka_error::ResponseError;
use crate::protocol::otlp::{encode_metrics, OtlpKind, OtlpMetric, OtlpValue};
use crate::protocol::ApiKey;
use crate::sync::lock;

/// How long to wait before asking a cluster that does not offer the
/// telemetry APIs, or after a failed request.
const RETRY: Duration = Duration::from_secs(30);

/// The broker's answer to GetTelemetrySubscriptions.
#[derive(Debug, Clone)]
struct Subscription {
    id: i32,
    interval: Duration,
    /// Metric name prefixes; `""` (or `*`) alone means every metric.
    requested: Vec<String>,
    delta: bool,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// The id the broker assigned this client (zero until then).
    instance_id: [u8; 16],
    subscription: Option<Subscription>,
    /// The broker asked (kept while it stays connected).
    broker: Option<i32>,
    /// Pushes stopped for good (INVALID_REQUEST, INVALID_RECORD).
    stopped: bool,
    /// Each sum's value at the last push (for delta temporality).
    last_sums: HashMap<String, i64>,
    /// When the sums started counting, in ns since the Unix epoch.
    started_ns: u64,
    /// Brokers that do not offer the telemetry APIs (before Kafka 3.7):
    /// never asked again, so that asking does not open a connection
    /// closed for being idle.
    unsupported: std::collections::HashSet<i32>,
}

/// The telemetry state, outside the actor (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct TelemetryState {
    inner: Mutex<Inner>,
}

impl TelemetryState {
    pub(crate) fn new() -> Arc<TelemetryState> {
        let s = TelemetryState::default();
        lock(&s.inner).started_ns = now_ns();
        Arc::new(s)
    }

    /// A broker has answered GetTelemetrySubscriptions.
    #[cfg(test)]
    pub(crate) fn subscribed(&self) -> bool {
        lock(&self.inner).subscription.is_some()
    }
}

/// The telemetry actor; see the module docs.
pub(crate) struct TelemetryActor {
    engine: Arc<Engine>,
    addresses: Arc<Addresses>,
    state: Arc<TelemetryState>,
    /// Rouses the supervisor when this actor is gone.
    _alarm: crate::actors::msgs::Alarm,
}

impl TelemetryActor {
    pub(crate) fn new(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        state: Arc<TelemetryState>,
        alarm: crate::actors::msgs::Alarm,
    ) -> Self {
        TelemetryActor {
            engine,
            addresses,
            state,
            _alarm: alarm,
        }
    }

    fn next(&mut self, after: Duration, ctx: &mut Context<Self>) {
        ctx.run_later(after, |act, ctx| act.tick(ctx));
    }

    /// One step: ask for the subscription, or push.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.engine.is_closed() || lock(&self.state.inner).stopped {
            return;
        }
        let Some((broker, addr)) = self.broker() else {
            // No broker known yet (look again soon), or none offers the
            // APIs (look again in a while: the brokers may change).
            let none_offers = !self.addresses.known_brokers().is_empty();
            return self.next(
                if none_offers {
                    RETRY
                } else {
                    Duration::from_secs(1)
                },
                ctx,
            );
        };
        let subscription = lock(&self.state.inner).subscription.clone();
        match subscription {
            None => self.get_subscription(broker, addr, ctx),
            Some(sub) if wants_none(&sub) => {
                // Nothing asked for: ask again after the interval.
                lock(&self.state.inner).subscription = None;
                self.next(sub.interval, ctx);
            }
            Some(sub) => self.push(broker, addr, sub, ctx),
        }
    }

    /// The broker to ask: the one asked before while it is connected,
    /// else any known broker (not a bootstrap address).
    fn broker(&mut self) -> Option<(i32, Addr<crate::actors::broker::BrokerConnection>)> {
        let mut inner = lock(&self.state.inner);
        if let Some(id) = inner.broker {
            if let Some(a) = self.addresses.connections.get(&id) {
                return Some((id, a.value().clone()));
            }
        }
        let mut ids = self.addresses.known_brokers();
        ids.retain(|id| !inner.unsupported.contains(id));
        let id = *ids.get(fastrand::usize(..ids.len().max(1)))?;
        inner.broker = Some(id);
        let addr = self.addresses.connections.get(&id)?.value().clone();
        Some((id, addr))
    }

    fn get_subscription(
        &mut self,
        broker: i32,
        addr: Addr<crate::actors::broker::BrokerConnection>,
        ctx: &mut Context<Self>,
    ) {
        let id = lock(&self.state.inner).instance_id;
        let ask = addr.send(Ask {
            api: ApiKey::GetTelemetrySubscriptions,
            max: 0,
            build: Box::new(move |_| {
                GetTelemetrySubscriptionsRequest::default()
                    .with_client_instance_id(uuid::Uuid::from_bytes(id))
            }),
        });
        drop(addr);
        ctx.spawn(ask.into_actor(self).map(move |answer, act, ctx| {
            let resp = match answer {
                Ok(Ok((_, r))) => r,
                Ok(Err(e)) => {
                    // Not offered (before Kafka 3.7): never this broker
                    // again. Or the connection failed: ask again later,
                    // maybe another broker.
                    tracing::debug!(broker, error = %e, "no telemetry subscription");
                    let mut inner = lock(&act.state.inner);
                    inner.broker = None;
                    if e.contains("does not offer") {
                        inner.unsupported.insert(broker);
                        drop(inner);
                        return act.next(Duration::ZERO, ctx);
                    }
                    drop(inner);
                    return act.next(RETRY, ctx);
                }
                Err(_) => {
                    lock(&act.state.inner).broker = None;
                    return act.next(RETRY, ctx);
                }
            };
            if resp.error_code != 0 {
                tracing::debug!(broker, code = resp.error_code, "GetTelemetrySubscriptions refused");
                return act.next(RETRY, ctx);
            }
            let sub = Subscription {
                id: resp.subscription_id,
                interval: Duration::from_millis(resp.push_interval_ms.max(100) as u64),
                requested: resp
                    .requested_metrics
                    .iter()
                    .map(|m| m.as_str().to_string())
                    .collect(),
                delta: resp.delta_temporality,
                max_bytes: resp.telemetry_max_bytes.max(0) as usize,
            };
            tracing::debug!(broker, subscription = sub.id, interval = ?sub.interval, requested = ?sub.requested, "telemetry subscription");
            let first = sub.interval.mul_f64(0.5 + fastrand::f64());
            let none = wants_none(&sub);
            let interval = sub.interval;
            {
                let mut inner = lock(&act.state.inner);
                inner.instance_id = *resp.client_instance_id.as_bytes();
                inner.subscription = Some(sub);
                inner.last_sums.clear();
            }
            act.next(if none { interval } else { first }, ctx);
        }));
    }

    fn push(
        &mut self,
        broker: i32,
        addr: Addr<crate::actors::broker::BrokerConnection>,
        sub: Subscription,
        ctx: &mut Context<Self>,
    ) {
        let metrics = self.collect(&sub);
        let (id, started) = {
            let i = lock(&self.state.inner);
            (i.instance_id, i.started_ns)
        };
        let resource = vec![(
            "client_id".to_string(),
            self.engine.client_id().as_str().to_string(),
        )];
        let payload = encode_metrics(&resource, "courier", &metrics, started, now_ns());
        if sub.max_bytes > 0 && payload.len() > sub.max_bytes {
            tracing::debug!(
                bytes = payload.len(),
                max = sub.max_bytes,
                "telemetry payload over the broker's limit; not pushed"
            );
            return self.next(sub.interval, ctx);
        }
        let sub_id = sub.id;
        let ask = addr.send(Ask {
            api: ApiKey::PushTelemetry,
            max: 0,
            build: Box::new(move |_| {
                PushTelemetryRequest::default()
                    .with_client_instance_id(uuid::Uuid::from_bytes(id))
                    .with_subscription_id(sub_id)
                    .with_terminating(false)
                    .with_compression_type(0)
                    .with_metrics(bytes::Bytes::from(payload))
            }),
        });
        drop(addr);
        let interval = sub.interval;
        ctx.spawn(ask.into_actor(self).map(move |answer, act, ctx| {
            let code = match answer {
                Ok(Ok((_, r))) => r.error_code,
                _ => {
                    lock(&act.state.inner).broker = None;
                    return act.next(interval, ctx);
                }
            };
            let error = crate::kafka_error::classify(code).map(|c| c.error);
            match error {
                None => act.next(interval, ctx),
                Some(ResponseError::UnknownSubscriptionId)
                | Some(ResponseError::UnsupportedCompressionType) => {
                    lock(&act.state.inner).subscription = None;
                    act.next(Duration::ZERO, ctx);
                }
                Some(e @ (ResponseError::InvalidRequest | ResponseError::InvalidRecord)) => {
                    tracing::warn!(broker, error = ?e, "the broker cannot use this producer's metrics; no more are pushed");
                    lock(&act.state.inner).stopped = true;
                }
                Some(e) => {
                    tracing::debug!(broker, error = ?e, "PushTelemetry refused");
                    act.next(interval, ctx);
                }
            }
        }));
    }

    /// The metrics the subscription asks for, from the producer's counters.
    fn collect(&self, sub: &Subscription) -> Vec<OtlpMetric> {
        let s = self.engine.stats_snapshot();
        let cfg = self.engine.config();
        const P: &str = "org.apache.kafka.producer.";
        let mut sums: Vec<Point<i64>> = vec![
            (format!("{P}record.send.total"), s.delivered as i64, vec![]),
            (format!("{P}record.error.total"), s.failed as i64, vec![]),
        ];
        let mut gauges: Vec<Point<f64>> = vec![
            (
                format!("{P}buffer.total.bytes"),
                cfg.buffer_memory as f64,
                vec![],
            ),
            (
                format!("{P}buffer.available.bytes"),
                cfg.buffer_memory.saturating_sub(s.buffered_bytes) as f64,
                vec![],
            ),
        ];
        let (mut requests, mut total, mut max) = (0u64, Duration::ZERO, Duration::ZERO);
        let (mut throttled, mut throttle, mut closes) = (0u64, Duration::ZERO, 0u64);
        let mut brokers: Vec<_> = s.brokers.iter().collect();
        brokers.sort_by_key(|(id, _)| **id);
        for (id, b) in brokers {
            requests += b.requests;
            total += b.total_latency;
            max = max.max(b.max_latency);
            throttled += b.throttled_responses;
            throttle += b.throttle_time;
            closes += b.disconnects;
            let node = vec![("node_id".to_string(), id.to_string())];
            sums.push((
                format!("{P}node.request.total"),
                b.requests as i64,
                node.clone(),
            ));
            gauges.push((
                format!("{P}node.request.latency.avg"),
                ms(b.total_latency) / b.requests.max(1) as f64,
                node.clone(),
            ));
            gauges.push((
                format!("{P}node.request.latency.max"),
                ms(b.max_latency),
                node,
            ));
        }
        sums.push((format!("{P}request.total"), requests as i64, vec![]));
        sums.push((format!("{P}connection.close.total"), closes as i64, vec![]));
        gauges.push((
            format!("{P}request.latency.avg"),
            ms(total) / requests.max(1) as f64,
            vec![],
        ));
        gauges.push((format!("{P}request.latency.max"), ms(max), vec![]));
        gauges.push((
            format!("{P}produce.throttle.time.avg"),
            ms(throttle) / throttled.max(1) as f64,
            vec![],
        ));
        let wanted = |name: &str| {
            sub.requested
                .iter()
                .any(|p| p.is_empty() || p == "*" || name.starts_with(p.as_str()))
        };
        let mut inner = lock(&self.state.inner);
        let mut out = Vec::new();
        for (name, value, attributes) in sums {
            if !wanted(&name) {
                continue;
            }
            let key = format!("{name}{attributes:?}");
            let (kind, v) = if sub.delta {
                let before = inner.last_sums.insert(key, value).unwrap_or(0);
                (OtlpKind::DeltaSum, value - before)
            } else {
                (OtlpKind::CumulativeSum, value)
            };
            out.push(OtlpMetric {
                name,
                kind,
                value: OtlpValue::Int(v),
                attributes,
            });
        }
        for (name, value, attributes) in gauges {
            if wanted(&name) {
                out.push(OtlpMetric {
                    name,
                    kind: OtlpKind::Gauge,
                    value: OtlpValue::Double(value),
                    attributes,
                });
            }
        }
        out
    }
}

impl Actor for TelemetryActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.tick(ctx);
    }
}

/// The producer stopped: no next push (its timer ends with the actor).
impl Handler<crate::actors::msgs::StopActor> for TelemetryActor {
    type Result = ();
    fn handle(&mut self, _: crate::actors::msgs::StopActor, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// A metric before encoding: its name, value and attributes.
type Point<V> = (String, V, Vec<(String, String)>);

/// The subscription asks for no metric.
fn wants_none(sub: &Subscription) -> bool {
    sub.requested.is_empty()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
