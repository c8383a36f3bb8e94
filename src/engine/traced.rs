//! The produce path's one step for W3C trace-context propagation (cargo
//! feature `opentelemetry`; the spans and headers are
//! `delivery::trace_context`'s): a record produced while a valid
//! OpenTelemetry context is current gets its produce span and headers
//! before the first check that reads its size, and its reply target
//! carries the span (`ReplyTo::Traced`) to the batch or to an early report.
//!
//! A record handed back unaccepted (`ProduceError`) leaves with the
//! headers Courier added taken off again, so an application that produces
//! it again (a `try_produce` loop on `QueueFull`) gets a new span for the
//! new attempt rather than a header naming the failed one.

use crate::delivery::owed::{ReplyTo, TracedReply};
use crate::delivery::trace_context::{current_parent, strip, ProduceSpan};
use crate::engine::enqueue::{Enqueued, Resume, SnapshotCache};
use crate::engine::Engine;
use crate::record::Record;

impl Engine {
    /// [`enqueue_untraced`](Engine::enqueue_untraced), with the record's
    /// produce span started first when the producing code is traced.
    #[inline]
    pub(crate) fn enqueue_traced<'s>(
        &self,
        mut record: Record,
        reply: Option<ReplyTo<'s>>,
        wait: bool,
        resume: &mut Resume,
        cache: Option<&SnapshotCache>,
    ) -> Enqueued<'s> {
        let (reply, added) = match reply {
            // A later try of the same call (after a wait): it has its span.
            Some(ReplyTo::Traced(t)) => {
                let added = t.span.added();
                (Some(ReplyTo::Traced(t)), added)
            }
            reply => match current_parent()
                .and_then(|p| ProduceSpan::start(&p, &mut record, &self.config.client_id))
            {
                Some(span) => {
                    let added = span.added();
                    (
                        Some(ReplyTo::Traced(Box::new(TracedReply { reply, span }))),
                        added,
                    )
                }
                None => (reply, 0),
            },
        };
        match self.enqueue_untraced(record, reply, wait, resume, cache) {
            Enqueued::Refused(mut e) if added > 0 => {
                strip(e.record_mut(), added);
                Enqueued::Refused(e)
            }
            r => r,
        }
    }
}
