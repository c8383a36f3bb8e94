//! How a batch was settled, and the reports built from that.
//!
//! A batch's outcome is decided once (by its connection actor, or by a
//! sweep that fails it); every record's report is then built from the
//! shared [`Settlement`] and the record's own owed entry, only when the
//! report is handed out: by the router for `send` and actor targets, by
//! the stream for subscriptions.

use std::time::Duration;

use crate::clock::Mono;
use crate::delivery::entry::{OwedTo, Pending};
use crate::record::Record;
use crate::report::{Delivered, DeliveryError, DeliveryReport, ErrorKind};

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

/// One batch's outcome, shared (in an `Arc`) by every chunk of its reports.
#[derive(Debug)]
pub(crate) struct Settlement {
    pub partition: i32,
    pub attempts: u32,
    /// When the outcome was known: the end of every record's latency.
    pub reported_at: Mono,
    pub outcome: Outcome,
}

impl Settlement {
    pub(crate) fn delivered(&self) -> bool {
        matches!(self.outcome, Outcome::Delivered { .. })
    }

    /// The report for one owed entry of this batch. `last` caches the
    /// latency of the previous entry: records taken together share their
    /// accepted instant, so it is measured once for them.
    #[inline(always)]
    pub(crate) fn report(&self, p: Pending, last: &mut Option<(Mono, Duration)>) -> DeliveryReport {
        let latency = match *last {
            Some((at, latency)) if at == p.accepted => latency,
            _ => {
                let latency = self.reported_at.since(p.accepted);
                *last = Some((p.accepted, latency));
                latency
            }
        };
        self.build(p.index, p.timestamp, latency, p.record)
    }

    /// The report for one owed entry, and where it goes.
    pub(crate) fn report_and_target(&self, p: Pending) -> (DeliveryReport, OwedTo) {
        let latency = self.reported_at.since(p.accepted);
        (self.build(p.index, p.timestamp, latency, p.record), p.to)
    }

    #[inline(always)]
    fn build(
        &self,
        index: u32,
        timestamp: i64,
        latency: Duration,
        record: Record,
    ) -> DeliveryReport {
        match &self.outcome {
            Outcome::Delivered {
                base_offset,
                log_append_time,
            } => DeliveryReport::Delivered(Delivered {
                partition: self.partition,
                offset: base_offset.map(|b| b.saturating_add(i64::from(index))),
                timestamp: log_append_time.unwrap_or(timestamp),
                attempts: self.attempts,
                latency,
                record,
            }),
            Outcome::Failed { kind, message } => DeliveryReport::Failed(DeliveryError {
                kind: *kind,
                message: message.clone(),
                partition: Some(self.partition),
                attempts: self.attempts,
                record,
            }),
        }
    }
}
