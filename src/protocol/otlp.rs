//! The OpenTelemetry metrics payload of PushTelemetry (KIP-714): an OTLP
//! `MetricsData` message, protobuf-encoded, with only what a client's
//! push needs: one resource, one scope, and metrics that are sums or
//! gauges of one data point each.
//!
//! Written by hand: the four message types a push uses are a few dozen
//! lines of protobuf, where the generated OTLP crates bring a gRPC stack
//! along. Kafka's receivers decode it with the generated Java classes
//! (`kafka-clients` ships them shaded; `tests/kafka_telemetry.rs`'s
//! receiver does).
//!
//! # References
//! - KIP-714: <https://cwiki.apache.org/confluence/display/KAFKA/KIP-714%3A+Client+metrics+and+observability>
//! - OTLP metrics: `opentelemetry/proto/metrics/v1/metrics.proto`
//! - Protobuf encoding: <https://protobuf.dev/programming-guides/encoding/>

/// How a metric's value accumulates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OtlpKind {
    /// A monotonic sum since `start_time` (OTLP `Sum`, cumulative).
    CumulativeSum,
    /// A monotonic sum since the previous push (OTLP `Sum`, delta).
    DeltaSum,
    /// A value at the time of the push (OTLP `Gauge`).
    Gauge,
}

/// A data point's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OtlpValue {
    /// `as_int`.
    Int(i64),
    /// `as_double`.
    Double(f64),
}

/// One metric with one data point.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpMetric {
    /// The metric's name, as KIP-714 spells it
    /// (`org.apache.kafka.producer.…`).
    pub name: String,
    /// Sum or gauge.
    pub kind: OtlpKind,
    /// The value.
    pub value: OtlpValue,
    /// The data point's attributes (`node_id`, `topic`, …).
    pub attributes: Vec<(String, String)>,
}

/// Encodes `metrics` as an OTLP `MetricsData`: one `ResourceMetrics` with
/// `resource` attributes, one `ScopeMetrics` named `scope`, each metric's
/// one data point timed `now_ns` (and, for sums, counted from
/// `start_ns`), times in nanoseconds since the Unix epoch.
///
/// ```
/// use courier_kafka::protocol::otlp::{encode_metrics, OtlpKind, OtlpMetric, OtlpValue};
///
/// let m = OtlpMetric {
///     name: "org.apache.kafka.producer.record.success.total".into(),
///     kind: OtlpKind::CumulativeSum,
///     value: OtlpValue::Int(42),
///     attributes: vec![],
/// };
/// let bytes = encode_metrics(&[("client_id".into(), "c".into())], "courier", &[m], 1, 2);
/// assert_eq!(bytes[0], 0x0a, "field 1 (resource_metrics), length-delimited");
/// ```
pub fn encode_metrics(
    resource: &[(String, String)],
    scope: &str,
    metrics: &[OtlpMetric],
    start_ns: u64,
    now_ns: u64,
) -> Vec<u8> {
    // Resource { repeated KeyValue attributes = 1; }
    let mut res = Vec::new();
    for (k, v) in resource {
        message(&mut res, 1, &key_value(k, v));
    }
    // InstrumentationScope { string name = 1; }
    let mut scope_msg = Vec::new();
    string(&mut scope_msg, 1, scope);
    // ScopeMetrics { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
    let mut scope_metrics = Vec::new();
    message(&mut scope_metrics, 1, &scope_msg);
    for m in metrics {
        message(&mut scope_metrics, 2, &metric(m, start_ns, now_ns));
    }
    // ResourceMetrics { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
    let mut resource_metrics = Vec::new();
    message(&mut resource_metrics, 1, &res);
    message(&mut resource_metrics, 2, &scope_metrics);
    // MetricsData { repeated ResourceMetrics resource_metrics = 1; }
    let mut out = Vec::new();
    message(&mut out, 1, &resource_metrics);
    out
}

/// Metric { string name = 1; Gauge gauge = 5; Sum sum = 7; }
fn metric(m: &OtlpMetric, start_ns: u64, now_ns: u64) -> Vec<u8> {
    // NumberDataPoint { fixed64 start_time_unix_nano = 2;
    //   fixed64 time_unix_nano = 3; double as_double = 4;
    //   sfixed64 as_int = 6; repeated KeyValue attributes = 7; }
    let mut point = Vec::new();
    if m.kind != OtlpKind::Gauge {
        fixed64(&mut point, 2, start_ns);
    }
    fixed64(&mut point, 3, now_ns);
    match m.value {
        OtlpValue::Double(d) => fixed64(&mut point, 4, d.to_bits()),
        OtlpValue::Int(i) => fixed64(&mut point, 6, i as u64),
    }
    for (k, v) in &m.attributes {
        message(&mut point, 7, &key_value(k, v));
    }
    let mut out = Vec::new();
    string(&mut out, 1, &m.name);
    match m.kind {
        // Gauge { repeated NumberDataPoint data_points = 1; }
        OtlpKind::Gauge => {
            let mut gauge = Vec::new();
            message(&mut gauge, 1, &point);
            message(&mut out, 5, &gauge);
        }
        // Sum { repeated NumberDataPoint data_points = 1;
        //   AggregationTemporality aggregation_temporality = 2
        //   (1 delta, 2 cumulative); bool is_monotonic = 3; }
        OtlpKind::CumulativeSum | OtlpKind::DeltaSum => {
            let mut sum = Vec::new();
            message(&mut sum, 1, &point);
            let temporality = if m.kind == OtlpKind::DeltaSum { 1 } else { 2 };
            varint_field(&mut sum, 2, temporality);
            varint_field(&mut sum, 3, 1);
            message(&mut out, 7, &sum);
        }
    }
    out
}

/// KeyValue { string key = 1; AnyValue value = 2; }, AnyValue { string string_value = 1; }
fn key_value(k: &str, v: &str) -> Vec<u8> {
    let mut any = Vec::new();
    string(&mut any, 1, v);
    let mut kv = Vec::new();
    string(&mut kv, 1, k);
    message(&mut kv, 2, &any);
    kv
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    tag(out, field, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    message(out, field, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_protobuf_encoding() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02], "the protobuf guide's example");
        let mut f = Vec::new();
        string(&mut f, 2, "testing");
        assert_eq!(f[..2], [0x12, 0x07]);
        let mut x = Vec::new();
        fixed64(&mut x, 6, u64::MAX);
        assert_eq!(x[0], 0x31, "field 6, wire type 1");
        assert_eq!(x.len(), 9);
    }

    #[test]
    fn a_sum_and_a_gauge_nest_as_metrics_data() {
        let metrics = [
            OtlpMetric {
                name: "a".into(),
                kind: OtlpKind::CumulativeSum,
                value: OtlpValue::Int(7),
                attributes: vec![],
            },
            OtlpMetric {
                name: "b".into(),
                kind: OtlpKind::Gauge,
                value: OtlpValue::Double(1.5),
                attributes: vec![("node_id".into(), "1".into())],
            },
        ];
        let bytes = encode_metrics(&[], "s", &metrics, 10, 20);
        // MetricsData.resource_metrics(1) → ResourceMetrics; its
        // resource (1, empty) then scope_metrics (2).
        assert_eq!(bytes[0], 0x0a);
        let mut at = 1;
        while bytes[at] & 0x80 != 0 {
            at += 1;
        }
        let inner = &bytes[at + 1..];
        assert_eq!(&inner[..2], &[0x0a, 0x00], "an empty resource");
        assert_eq!(inner[2], 0x12, "scope_metrics");
        // The sum's value 7 as sfixed64 (field 6) and the gauge's 1.5 as
        // double (field 4) are both in there.
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        let mut seven = vec![0x31];
        seven.extend_from_slice(&7u64.to_le_bytes());
        assert!(has(&seven));
        let mut half = vec![0x21];
        half.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
        assert!(has(&half));
        assert!(has(&[0x10, 0x02, 0x18, 0x01]), "cumulative, monotonic");
    }
}
