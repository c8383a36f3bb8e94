//! Producer interceptors: code that sees every record as it is produced
//! and every report it gets, set once on the builder instead of at each
//! call site (auditing, encryption, lineage headers).
//!
//! This is the Java client's `ProducerInterceptor` (`interceptor.classes`)
//! for Courier:
//!
//! - [`ProducerInterceptor::on_send`] runs for each record as a produce
//!   call takes it, before its metadata, its size check and its partition,
//!   and may replace it (Java's `onSend`);
//! - [`ProducerInterceptor::on_report`] runs once for each record's report,
//!   success or failure, on every report path, fire-and-forget included,
//!   just before the report is handed to its target (Java's
//!   `onAcknowledgement`).
//!
//! Several interceptors run in the order they were added to the builder
//! ([`ProducerBuilder::interceptor`](crate::ProducerBuilder::interceptor)),
//! each `on_send` given what the one before returned. A panic in an
//! interceptor is caught and logged (`tracing`, at `warn`); the record goes
//! on as the interceptors before it left it, and the report still goes to
//! its target and to the other interceptors. A producer with no
//! interceptor pays one branch per produce call and one per settled batch.
//!
//! Where Courier differs from Java:
//!
//! - `on_send` takes the record by reference and returns `None` to let it
//!   go on unchanged, or `Some(record)` to replace it: an interceptor that
//!   only looks copies nothing, and a panic cannot lose the record.
//! - `on_report` is given the [`DeliveryReport`] the target will get (for a
//!   failure, with the record handed back), not `RecordMetadata` and an
//!   exception. It runs on the thread that settles the batch: a connection
//!   actor's (the producer's actor thread) for a broker's answer, the
//!   supervisor's for a delivery-timeout sweep, or the producing thread
//!   for a record failed at once (too large, an unknown topic or
//!   partition). Like Java's, it must be quick: it holds up every other
//!   report of the batch and, on the actor thread, the producer's I/O.
//! - A record a produce call hands back in its `Err`
//!   ([`ProduceError`](crate::ProduceError), [`BatchRejected`](crate::BatchRejected):
//!   closed, full, outside a transaction) was not taken and gets no report;
//!   interceptors see none for it (Java calls `onAcknowledgement` when
//!   `send` throws). `on_send` has already run for it, and runs again if
//!   the application produces it again, so an `on_send` that adds a
//!   header should replace one it finds rather than add a second. Where
//!   Courier turns such a refusal into a report itself (the `Err` of
//!   [`Producer::send`](crate::Producer::send), the report an actor gets
//!   for a refused [`Produce`](crate::Produce) message), `on_report` sees
//!   that report.
//! - There is no `close` and no `configure`: an interceptor is a value the
//!   application builds, and it is dropped with the producer's last part.
//! - A transaction's outcome is not a report: `on_report` sees a record
//!   written in a transaction that is later aborted as delivered, as the
//!   record's own report says (see
//!   [`subscribe_transactional`](crate::Producer::subscribe_transactional)).
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//! use courier_kafka::{DeliveryReport, Header, ProducerInterceptor, Record};
//!
//! /// Stamps each record with the service that wrote it, and counts outcomes.
//! #[derive(Default)]
//! struct Lineage {
//!     delivered: AtomicU64,
//!     failed: AtomicU64,
//! }
//!
//! impl ProducerInterceptor for Lineage {
//!     fn on_send(&self, record: &Record) -> Option<Record> {
//!         let mut record = record.clone();
//!         record.headers.retain(|h| h.key != "written-by");
//!         record.headers.push(Header {
//!             key: "written-by".into(),
//!             value: Some("billing".into()),
//!         });
//!         Some(record)
//!     }
//!
//!     fn on_report(&self, report: &DeliveryReport) {
//!         let count = if report.is_delivered() { &self.delivered } else { &self.failed };
//!         count.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! let lineage = Arc::new(Lineage::default());
//! let builder = courier_kafka::Producer::builder()
//!     .bootstrap("127.0.0.1:9092")
//!     // An `Arc` of an interceptor is one too: the application keeps a handle.
//!     .interceptor(lineage.clone());
//! # drop(builder);
//! ```

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::record::Record;
use crate::report::DeliveryReport;

/// Sees each record as it is produced and each report it gets. Both
/// methods do nothing by default; implement the ones needed. See the
/// [module docs](self) for when each runs and how it differs from Java's.
pub trait ProducerInterceptor: Send + Sync + 'static {
    /// Called once for each record a produce call takes, before the
    /// producer looks at it (metadata, size, partition). `None` lets the
    /// record go on as it is; `Some(record)` replaces it (its topic,
    /// partition, key, value, headers, timestamp or tag may all change).
    /// The next interceptor is given the result.
    fn on_send(&self, record: &Record) -> Option<Record> {
        let _ = record;
        None
    }

    /// Called once for each report, just before it is handed to its
    /// target (or, for a fire-and-forget record, instead). Runs on the
    /// report path: keep it quick.
    fn on_report(&self, report: &DeliveryReport) {
        let _ = report;
    }
}

/// An `Arc` of an interceptor is one too, so an application can keep a
/// handle on the interceptor it gave the builder.
impl<T: ProducerInterceptor + ?Sized> ProducerInterceptor for Arc<T> {
    fn on_send(&self, record: &Record) -> Option<Record> {
        (**self).on_send(record)
    }

    fn on_report(&self, report: &DeliveryReport) {
        (**self).on_report(report)
    }
}

/// A producer's interceptors, in order; empty for most producers, and
/// then asked only whether it is set.
#[derive(Clone, Default)]
pub(crate) struct Interceptors(Option<Arc<[Arc<dyn ProducerInterceptor>]>>);

impl std::fmt::Debug for Interceptors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Interceptors({})",
            self.0.as_ref().map_or(0, |c| c.len())
        )
    }
}

impl Interceptors {
    /// The chain of `list`, in order (none: unset).
    pub(crate) fn new(list: Vec<Arc<dyn ProducerInterceptor>>) -> Interceptors {
        Interceptors((!list.is_empty()).then(|| list.into()))
    }

    /// Whether any interceptor is set: the one check the produce and report
    /// paths make when none is.
    #[inline(always)]
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// `record` through every `on_send`, in order. A panic leaves the
    /// record as the interceptors before it made it.
    #[cold]
    #[inline(never)]
    pub(crate) fn on_send(&self, mut record: Record) -> Record {
        for (i, icpt) in self.chain().iter().enumerate() {
            match catch_unwind(AssertUnwindSafe(|| icpt.on_send(&record))) {
                Ok(Some(replaced)) => record = replaced,
                Ok(None) => {}
                Err(panic) => tracing::warn!(
                    interceptor = i,
                    topic = %record.topic,
                    panic = panic_message(&panic),
                    "a producer interceptor's on_send panicked; the record goes on as it was"
                ),
            }
        }
        record
    }

    /// `report` to every `on_report`, in order. A panic is logged; the
    /// others still see the report.
    #[cold]
    #[inline(never)]
    pub(crate) fn on_report(&self, report: &DeliveryReport) {
        for (i, icpt) in self.chain().iter().enumerate() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| icpt.on_report(report))) {
                tracing::warn!(
                    interceptor = i,
                    delivered = report.is_delivered(),
                    panic = panic_message(&panic),
                    "a producer interceptor's on_report panicked; the report goes on"
                );
            }
        }
    }

    fn chain(&self) -> &[Arc<dyn ProducerInterceptor>] {
        self.0.as_deref().unwrap_or(&[])
    }
}

/// A caught panic's message, when it has one.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Tag(&'static str);
    impl ProducerInterceptor for Tag {
        fn on_send(&self, record: &Record) -> Option<Record> {
            let mut r = record.clone();
            let v = r.value.as_deref().unwrap_or_default();
            r.value = Some([v, self.0.as_bytes()].concat().into());
            Some(r)
        }
    }

    struct Panics(AtomicUsize);
    impl ProducerInterceptor for Panics {
        fn on_send(&self, _: &Record) -> Option<Record> {
            panic!("on_send planted");
        }
        fn on_report(&self, _: &DeliveryReport) {
            self.0.fetch_add(1, Ordering::Relaxed);
            panic!("on_report planted");
        }
    }

    #[derive(Default)]
    struct Counts(AtomicUsize);
    impl ProducerInterceptor for Counts {
        fn on_report(&self, _: &DeliveryReport) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each `on_send` gets what the one before returned; one that panics
    /// leaves the record as it was and the next goes on from there; every
    /// `on_report` sees the report although one before it panicked.
    #[test]
    fn a_chain_runs_in_order_and_survives_a_panic() {
        let panics = Arc::new(Panics(AtomicUsize::new(0)));
        let counts = Arc::new(Counts::default());
        let chain = Interceptors::new(vec![
            Arc::new(Tag("a")),
            panics.clone(),
            Arc::new(Tag("b")),
            counts.clone(),
        ]);
        assert!(chain.is_set());
        let out = chain.on_send(Record::to("t").value("v"));
        assert_eq!(out.value.as_deref(), Some(&b"vab"[..]));
        let report = DeliveryReport::Failed(crate::report::DeliveryError {
            kind: crate::report::ErrorKind::Timeout,
            message: "late".into(),
            partition: None,
            attempts: 0,
            record: Box::new(out),
        });
        chain.on_report(&report);
        chain.on_report(&report);
        assert_eq!(panics.0.load(Ordering::Relaxed), 2);
        assert_eq!(counts.0.load(Ordering::Relaxed), 2);
        assert!(!Interceptors::new(Vec::new()).is_set());
    }
}
