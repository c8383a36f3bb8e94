//! W3C trace-context propagation (cargo feature `opentelemetry`): a record
//! produced while an OpenTelemetry context is current gets a producer span
//! of its own, a child of that context, whose id goes out in the record's
//! `traceparent` header (and `tracestate`, when the context has one); the
//! span ends when the record's delivery report is routed, with the
//! partition and offset, or with the error.
//!
//! This is what franz-go's kotel plugin does (`plugin/kotel/tracer.go`: a
//! producer-kind span started when a record is buffered, injected with the
//! W3C propagator, ended on the record's promise), in Courier's terms:
//!
//! - **The parent** is the OpenTelemetry context current in the producing
//!   code: `opentelemetry::Context::current()`, which tracing-opentelemetry
//!   sets whenever a `tracing` span is entered (its default, context
//!   activation); failing that, the current `tracing` span's own context
//!   (`OpenTelemetrySpanExt::context`, for a layer built without context
//!   activation). No valid context: nothing is done for the record.
//! - **The span** comes from the global tracer provider
//!   (`opentelemetry::global`), scope `courier`: named `send <topic>`, kind
//!   producer, with the messaging attributes of the OpenTelemetry semantic
//!   conventions. With no provider installed it is the no-op tracer's,
//!   which carries the parent's context, so the header still names the
//!   producing span.
//! - **The header** is written by hand in the W3C format (what
//!   `TraceContextPropagator::inject` writes; the tests read it back with
//!   that propagator), before the record's size is checked, so the size
//!   checks see it. A record that already has a `traceparent` (the
//!   application propagates its own, or forwards a consumed record's) is
//!   left alone: no header, no span.
//! - **Riding with the record**: the span travels in the record's reply
//!   target (`ReplyTo::Traced`, which a fire-and-forget record gets too)
//!   to the append, and from there in its batch's ledger
//!   (`Owed::traced`, a list of `(offset delta, span)` beside the owed
//!   entries, so an entry's layout does not change and untraced records
//!   cost nothing there). `delivery::router::route` ends a batch's spans
//!   when it routes the batch's reports; a record reported before it
//!   reached a batch ends its span with that report.
//! - **Handed back**: a record the producer did not take
//!   (`ProduceError`) loses the headers Courier added (its span ends with
//!   the error), so producing it again starts afresh. A record in a report
//!   keeps them: producing it again (a retry, a dead-letter topic) carries
//!   the first attempt's context on, as an application-set header is.
//!
//! Everything here is compiled only with the feature. The engine asks for
//! the parent once per produce call (per record) and once per batch call;
//! nothing else runs for a record produced outside a traced context.

use opentelemetry::global::{self, BoxedSpan};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::delivery::settlement::Outcome;
use crate::record::{Header, Record};
use crate::report::{DeliveryReport, ErrorKind};

/// The W3C header naming the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header carrying vendors' trace state.
pub const TRACESTATE: &str = "tracestate";

/// The OpenTelemetry context current in the producing code, if it names a
/// valid span: the parent of the records produced now.
#[inline]
pub(crate) fn current_parent() -> Option<Context> {
    // A thread-local read: the context tracing-opentelemetry activated
    // when the current `tracing` span was entered, or one the application
    // attached itself.
    if Context::map_current(|cx| cx.span().span_context().is_valid()) {
        return Some(Context::current());
    }
    // A layer without context activation: ask the current span.
    let span = tracing::Span::current();
    if span.is_none() {
        return None;
    }
    let cx = span.context();
    cx.span().span_context().is_valid().then_some(cx)
}

/// The producer span of one record, from the produce call to its report.
/// Dropped without being ended (the record was handed back, or dropped
/// with its produce call), it ends with an error status saying so.
#[derive(Debug)]
pub(crate) struct ProduceSpan {
    span: Option<BoxedSpan>,
    /// Headers it added to its record (at the end): 1 or 2.
    added: u8,
}

impl ProduceSpan {
    /// Starts the produce span of `record`, a child of `parent`, and
    /// writes its context into the record's headers. `None` (nothing done)
    /// when the record already has a `traceparent`.
    pub(crate) fn start(parent: &Context, record: &mut Record, client_id: &str) -> Option<Self> {
        if record.headers.iter().any(|h| h.key == TRACEPARENT) {
            return None;
        }
        let tracer = global::tracer_with_scope(
            InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        let topic = record.topic.as_str();
        let span = tracer
            .span_builder(format!("send {topic}"))
            .with_kind(SpanKind::Producer)
            .with_attributes([
                KeyValue::new("messaging.system", "kafka"),
                KeyValue::new("messaging.operation.type", "send"),
                KeyValue::new("messaging.operation.name", "send"),
                KeyValue::new("messaging.destination.name", topic),
                KeyValue::new("messaging.client.id", client_id.to_owned()),
            ])
            .start_with_context(&tracer, parent);
        let sc = span.span_context();
        if !sc.is_valid() {
            return None;
        }
        // As `TraceContextPropagator::inject` writes it: version 00, the
        // ids in lowercase hex, and only the sampled flag.
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags() & opentelemetry::trace::TraceFlags::SAMPLED
        );
        record.headers.push(Header {
            key: TRACEPARENT.into(),
            value: Some(traceparent.into()),
        });
        let mut added = 1;
        let state = sc.trace_state().header();
        if !state.is_empty() {
            record.headers.push(Header {
                key: TRACESTATE.into(),
                value: Some(state.into()),
            });
            added = 2;
        }
        Some(ProduceSpan {
            span: Some(span),
            added,
        })
    }

    /// How many headers it added to its record (for [`strip`]).
    pub(crate) fn added(&self) -> u8 {
        self.added
    }

    /// Ends the span with its record's report.
    pub(crate) fn end_with_report(mut self, report: &DeliveryReport) {
        let Some(mut span) = self.span.take() else {
            return;
        };
        match report {
            DeliveryReport::Delivered(d) => delivered(&mut span, d.partition, d.offset),
            DeliveryReport::Failed(e) => failed(&mut span, e.kind, &e.message, e.partition),
        }
        span.end();
    }

    /// Ends the span of the record at offset delta `index` of a batch
    /// settled in `partition` with `outcome`.
    fn end_in_batch(mut self, partition: i32, index: u32, outcome: &Outcome) {
        let Some(mut span) = self.span.take() else {
            return;
        };
        match outcome {
            Outcome::Delivered { base_offset, .. } => {
                delivered(&mut span, partition, base_offset.map(|b| b + index as i64))
            }
            Outcome::Failed { kind, message } => failed(&mut span, *kind, message, Some(partition)),
        }
        span.end();
    }
}

impl Drop for ProduceSpan {
    fn drop(&mut self) {
        if let Some(mut span) = self.span.take() {
            span.set_status(Status::error(
                "no delivery report: the record was handed back unaccepted, or dropped",
            ));
            span.end();
        }
    }
}

fn delivered(span: &mut BoxedSpan, partition: i32, offset: Option<i64>) {
    span.set_attribute(KeyValue::new(
        "messaging.destination.partition.id",
        partition.to_string(),
    ));
    if let Some(offset) = offset {
        span.set_attribute(KeyValue::new("messaging.kafka.offset", offset));
    }
}

fn failed(span: &mut BoxedSpan, kind: ErrorKind, message: &str, partition: Option<i32>) {
    if let Some(p) = partition {
        span.set_attribute(KeyValue::new(
            "messaging.destination.partition.id",
            p.to_string(),
        ));
    }
    span.set_attribute(KeyValue::new("error.type", kind.to_string()));
    span.set_status(Status::error(message.to_owned()));
}

/// Takes the `added` headers a produce span wrote off `record` again (a
/// record handed back unaccepted), if they are still its last ones.
pub(crate) fn strip(record: &mut Record, added: u8) {
    let n = record.headers.len();
    let added = added as usize;
    let ours = added > 0
        && n >= added
        && record.headers[n - added].key == TRACEPARENT
        && (added == 1 || record.headers[n - 1].key == TRACESTATE);
    if ours {
        record.headers.truncate(n - added);
    }
}

/// The produce spans of one batch's records, by offset delta, in order:
/// kept beside the batch's owed reports (`Owed::traced`), only for records
/// that have one.
#[derive(Debug, Default)]
pub(crate) struct TracedSpans(Vec<(u32, ProduceSpan)>);

impl TracedSpans {
    /// Keeps the span of the record at offset delta `index`.
    pub(crate) fn push(&mut self, index: u32, span: ProduceSpan) {
        self.0.push((index, span));
    }

    /// Ends every span with the batch's outcome (per batch: nothing when
    /// none of its records is traced).
    #[inline]
    pub(crate) fn settle(&mut self, partition: i32, outcome: &Outcome) {
        if self.0.is_empty() {
            return;
        }
        for (index, span) in self.0.drain(..) {
            span.end_in_batch(partition, index, outcome);
        }
    }

    /// The spans with their offset deltas (a batch split into one batch
    /// per record).
    pub(crate) fn into_entries(self) -> Vec<(u32, ProduceSpan)> {
        self.0
    }
}
