//! W3C trace-context propagation (cargo feature `opentelemetry`), on Tansu
//! and librdkafka's mock cluster.
//!
//! One OpenTelemetry SDK tracer provider with an in-memory exporter is the
//! global provider of this test binary, and a tracing-opentelemetry layer
//! on it the global `tracing` subscriber; each test tells its spans apart
//! by the trace id of its own producing span. Records are read back by the
//! rdkafka consumer and their `traceparent` decoded by the SDK's W3C
//! propagator (an independent reader of what Courier writes).
//!
//! Checked: every path (send, subscription, fire-and-forget, both batch
//! calls) gives a record produced inside a span a `traceparent` naming a
//! produce span of its own, a child of the producing span, ended with the
//! partition and offset where the record is in the log; a record refused
//! before a batch (unknown partition) and one a broker refuses end their
//! spans with the error; a record produced outside any span gets no
//! header; an application's own `traceparent` is kept and gets no span; a
//! record handed back (`try_produce`) leaves without the header, and the
//! attempt that is taken gets its own span. Every record still gets
//! exactly one report.

mod support;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use courier_kafka::{DeliveryReport, ErrorKind, ProduceError, Producer, Record, ReportMode};
use futures::StreamExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceId};
use opentelemetry::{global, KeyValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use support::{ReadRecord, Tansu};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// The binary's exporter; installs the global provider and subscriber the
/// first time.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        use opentelemetry::trace::TracerProvider as _;
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tests"));
        global::set_tracer_provider(provider);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only global subscriber");
        exporter
    })
}

/// A `tracing` span of the application, and its OpenTelemetry identity.
fn app_span(name: &'static str) -> (tracing::Span, TraceId, SpanId) {
    exporter();
    let span = tracing::info_span!("app", otel.name = name);
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    assert!(sc.is_valid(), "the layer gives the span a context");
    (span, sc.trace_id(), sc.span_id())
}

/// Courier's produce spans in trace `trace`, by span id.
fn produce_spans(trace: TraceId) -> HashMap<SpanId, SpanData> {
    exporter()
        .get_finished_spans()
        .expect("finished spans")
        .into_iter()
        .filter(|s| {
            s.span_context.trace_id() == trace && s.instrumentation_scope.name() == "courier-kafka"
        })
        .map(|s| (s.span_context.span_id(), s))
        .collect()
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv: &&KeyValue| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn header<'a>(r: &'a ReadRecord, key: &str) -> Vec<&'a [u8]> {
    r.headers
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_deref().unwrap_or_default())
        .collect()
}

/// The span context a record's `traceparent` names, as the W3C propagator
/// reads it.
fn extracted(r: &ReadRecord) -> SpanContext {
    let carrier: HashMap<String, String> = r
        .headers
        .iter()
        .map(|(k, v)| {
            let v = String::from_utf8(v.clone().unwrap_or_default()).expect("text header");
            (k.clone(), v)
        })
        .collect();
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().clone()
}

fn value(r: &ReadRecord) -> String {
    String::from_utf8(r.value.clone().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_produced_in_a_span_carry_it_and_get_a_produce_span_each() {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "traced", 2).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .set("linger.ms", "5")
        .set("client.id", "trace-test")
        .build()
        .unwrap();
    let (span, trace, parent) = app_span("produce orders");
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    let app_traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    let (mut sent, unknown) = async {
        let rec = |v: String| Record::to("traced").value(v);
        let mut sent = Vec::new();
        for i in 0..4 {
            sent.push(producer.send(rec(format!("send-{i}"))).await.unwrap());
            sub.produce(rec(format!("sub-{i}"))).await.unwrap();
            producer.produce(rec(format!("ff-{i}"))).await.unwrap();
        }
        sub.produce_batch((0..4).map(|i| rec(format!("batch-{i}"))).collect())
            .await
            .unwrap();
        producer
            .produce_batch((0..4).map(|i| rec(format!("ffbatch-{i}"))).collect())
            .await
            .unwrap();
        let app = rec("app".into()).header("traceparent", app_traceparent);
        sent.push(producer.send(app).await.unwrap());
        let unknown = producer
            .send(rec("unknown".into()).partition(7))
            .await
            .expect_err("the topic has 2 partitions");
        (sent, unknown)
    }
    .instrument(span.clone())
    .await;
    for i in 0..2 {
        let r = Record::to("traced").value(format!("plain-{i}"));
        sent.push(producer.send(r).await.unwrap());
    }
    producer.flush().await;
    drop(sub);
    let mut reports = Vec::new();
    while reports.len() < 8 {
        reports.push(stream.next().await.expect("a report per subscribed record"));
    }
    producer.close().await;
    assert!(stream.next().await.is_none(), "no report twice");
    assert!(reports.iter().all(DeliveryReport::is_delivered));
    assert_eq!(sent.len(), 7);
    assert_eq!(unknown.kind, ErrorKind::UnknownPartition);
    let stats = producer.stats();
    assert_eq!((stats.delivered, stats.failed), (23, 1), "{stats:?}");
    drop(span);

    let log = support::read_all(&tansu.bootstrap(), "traced", 2, 23);
    assert_eq!(log.len(), 23, "each record once");
    let spans = produce_spans(trace);
    // 20 traced records in the log, and the one refused before a batch.
    assert_eq!(spans.len(), 21, "{spans:#?}");
    let mut named = 0;
    for r in &log {
        let v = value(r);
        let parents = header(r, "traceparent");
        if v.starts_with("plain") {
            assert!(parents.is_empty(), "produced outside any span: {r:?}");
            continue;
        }
        if v == "app" {
            assert_eq!(parents, [app_traceparent.as_bytes()], "kept as set");
            assert!(header(r, "tracestate").is_empty());
            continue;
        }
        assert_eq!(parents.len(), 1, "{r:?}");
        let sc = extracted(r);
        assert_eq!(sc.trace_id(), trace, "{v}: the producing span's trace");
        assert!(sc.is_sampled());
        let s = spans
            .get(&sc.span_id())
            .unwrap_or_else(|| panic!("{v}: its produce span was exported"));
        named += 1;
        assert_eq!(s.parent_span_id, parent, "{v}: child of the producing span");
        assert_eq!(s.span_kind, SpanKind::Producer);
        assert_eq!(s.name, "send traced");
        assert_eq!(s.status, Status::Unset, "{v}");
        assert_eq!(attr(s, "messaging.system"), Some(&Value::from("kafka")));
        assert_eq!(
            attr(s, "messaging.destination.name"),
            Some(&Value::from("traced"))
        );
        assert_eq!(
            attr(s, "messaging.client.id"),
            Some(&Value::from("trace-test"))
        );
        assert_eq!(
            attr(s, "messaging.destination.partition.id"),
            Some(&Value::from(r.partition.to_string())),
            "{v}: ended with its partition"
        );
        assert_eq!(
            attr(s, "messaging.kafka.offset"),
            Some(&Value::I64(r.offset)),
            "{v}: ended with its offset"
        );
    }
    assert_eq!(named, 20, "one span per traced record, none shared");
    // Each report names where its record is, and the record written there
    // has the header when it was produced in a span.
    for d in &sent {
        let r = log
            .iter()
            .find(|r| (r.partition, r.offset) == (d.partition, d.offset.expect("an offset")))
            .unwrap_or_else(|| panic!("no record where {d:?} says"));
        let plain = value(r).starts_with("plain");
        assert_eq!(header(r, "traceparent").len(), usize::from(!plain), "{d:?}");
    }

    let failed: Vec<_> = spans
        .values()
        .filter(|s| s.status != Status::Unset)
        .collect();
    assert_eq!(failed.len(), 1);
    let f = failed[0];
    assert_eq!(f.parent_span_id, parent);
    assert!(
        matches!(&f.status, Status::Error { description } if description.contains("partition 7")),
        "{:?}",
        f.status
    );
    assert_eq!(
        attr(f, "error.type"),
        Some(&Value::from(ErrorKind::UnknownPartition.to_string()))
    );
    assert_eq!(attr(f, "messaging.kafka.offset"), None);
    // The report handed the record back with the header it was given.
    assert_eq!(unknown.record.headers.len(), 1);
}

/// `try_produce` before the topic's metadata is known hands the record
/// back: without the header Courier added (its span ends with an error),
/// so the attempt that is taken gets a span and header of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_back_record_leaves_without_the_header() {
    let tansu = Tansu::start();
    support::create_topic(&tansu.bootstrap(), "warm", 1).await;
    let producer = Producer::builder()
        .bootstrap(&tansu.bootstrap())
        .set("linger.ms", "1")
        .build()
        .unwrap();
    // The producer is up and has its metadata (for "warm" only) before
    // the topic exists: its first try cannot find the topic's metadata,
    // however fast the first fetch was (CI once saw a fetch that had
    // already named every topic before the first try).
    producer.send(Record::to("warm").value("w")).await.unwrap();
    support::create_topic(&tansu.bootstrap(), "handed-back", 1).await;
    let (span, trace, parent) = app_span("try produce");
    let original = Record::to("handed-back")
        .value("v")
        .header("app-header", "kept");
    let handed_back = async {
        let mut record = original.clone();
        let mut handed_back = 0;
        loop {
            match producer.try_produce(record) {
                Ok(()) => return handed_back,
                Err(ProduceError::MetadataNotReady(r)) => {
                    assert_eq!(*r, original, "handed back as it was given");
                    handed_back += 1;
                    record = *r;
                }
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    .instrument(span.clone())
    .await;
    assert!(handed_back > 0, "a new producer has no metadata at first");
    producer.close().await;
    drop(span);

    let log = support::read_all(&tansu.bootstrap(), "handed-back", 1, 1);
    assert_eq!(log.len(), 1);
    let sc = extracted(&log[0]);
    assert_eq!(sc.trace_id(), trace);
    assert_eq!(header(&log[0], "app-header"), [&b"kept"[..]]);
    let spans = produce_spans(trace);
    assert_eq!(spans.len(), handed_back + 1, "a span per attempt");
    for (id, s) in &spans {
        assert_eq!(s.parent_span_id, parent);
        if *id == sc.span_id() {
            assert_eq!(s.status, Status::Unset);
            assert_eq!(
                attr(s, "messaging.kafka.offset"),
                Some(&Value::I64(log[0].offset))
            );
        } else {
            assert!(matches!(s.status, Status::Error { .. }), "{s:?}");
        }
    }
}

/// A batch the broker refuses (a non-retriable error injected on the
/// mock cluster): each of its records' spans ends with the error and the
/// partition; the record before it and the one after are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_ends_its_spans_with_the_error() {
    let m = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    m.create_topic("refused", 1, 1).expect("create topic");
    let producer = Producer::builder()
        .bootstrap(&m.bootstrap_servers())
        .set("linger.ms", "1")
        .build()
        .unwrap();
    let (span, trace, parent) = app_span("refused");
    let outcomes = async {
        let first = producer.send(Record::to("refused").value("a")).await;
        m.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD],
        );
        let second = producer.send(Record::to("refused").value("b")).await;
        let third = producer.send(Record::to("refused").value("c")).await;
        [first.is_ok(), second.is_ok(), third.is_ok()]
    }
    .instrument(span.clone())
    .await;
    producer.close().await;
    drop(span);
    assert_eq!(outcomes, [true, false, true]);

    let spans = produce_spans(trace);
    assert_eq!(spans.len(), 3);
    let mut errors = 0;
    for s in spans.values() {
        assert_eq!(s.parent_span_id, parent);
        assert_eq!(
            attr(s, "messaging.destination.partition.id"),
            Some(&Value::from("0"))
        );
        if let Status::Error { description } = &s.status {
            errors += 1;
            assert!(!description.is_empty());
            let kind = attr(s, "error.type").expect("error.type").as_str();
            assert!(kind.contains("INVALID_RECORD"), "{kind}");
            assert_eq!(attr(s, "messaging.kafka.offset"), None);
        } else {
            assert!(attr(s, "messaging.kafka.offset").is_some());
        }
    }
    assert_eq!(errors, 1);
}
