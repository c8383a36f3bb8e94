//! How a batch was settled, and the reports built from that.
//!
//! A batch's outcome is decided once (by its connection actor, or by a
//! sweep that fails it); every record's report is then built from the
//! shared [`Settlement`] and the record's own owed entry, only when the
//! report is handed out: by the router for `send` and actor targets, by
//! the stream for subscriptions. A failed batch's records are read back
//! from its encoded bytes once, when it is settled, to be handed back.

use std::time::Duration;

use crate::clock::Mono;
use crate::delivery::entry::{OwedTo, Pending, EXPLICIT_PARTITION, GIVEN_TIMESTAMP};
use crate::protocol::record_batch::decode::{decode_records, DecodedRecord};
use crate::record::{Record, Topic};
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

/// Where a failed batch's records are read back from: its encoded bytes
/// (uncompressed, when compressing it was what failed), and a bound on
/// their decompressed size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Readback<'a> {
    pub bytes: &'a [u8],
    pub max_size: usize,
}

/// One batch's outcome, shared (in an `Arc`) by every chunk of its reports.
#[derive(Debug)]
pub(crate) struct Settlement {
    pub topic: Topic,
    pub partition: i32,
    pub attempts: u32,
    /// When the outcome was known: the end of every record's latency.
    pub reported_at: Mono,
    pub outcome: Outcome,
    /// A failed batch's records, by offset delta, to hand back (empty for
    /// a delivered batch); or why they could not be read back.
    pub records: Result<Vec<DecodedRecord>, String>,
}

impl Settlement {
    /// The settlement of a batch of `topic`/`partition`; a failed one's
    /// records are read back from `readback` (when it owes any reports).
    pub(crate) fn new(
        topic: Topic,
        partition: i32,
        attempts: u32,
        outcome: Outcome,
        readback: Option<Readback<'_>>,
    ) -> Settlement {
        let records = match (&outcome, readback) {
            (Outcome::Failed { .. }, Some(r)) => {
                decode_records(r.bytes, r.max_size).map_err(|e| e.to_string())
            }
            (Outcome::Failed { .. }, None) => Err("its batch was not kept".into()),
            (Outcome::Delivered { .. }, _) => Ok(Vec::new()),
        };
        Settlement {
            topic,
            partition,
            attempts,
            reported_at: Mono::now(),
            outcome,
            records,
        }
    }

    pub(crate) fn delivered(&self) -> bool {
        matches!(self.outcome, Outcome::Delivered { .. })
    }

    /// The report for one owed entry of this batch. `last` caches the
    /// latency of the previous entry: records taken together share their
    /// accepted instant, so it is measured once for them.
    #[inline(always)]
    pub(crate) fn report(
        &self,
        p: &Pending,
        last: &mut Option<(Mono, Duration)>,
    ) -> DeliveryReport {
        let latency = match *last {
            Some((at, latency)) if at == p.accepted => latency,
            _ => {
                let latency = self.reported_at.since(p.accepted);
                *last = Some((p.accepted, latency));
                latency
            }
        };
        self.build(p, latency)
    }

    /// The report for one owed entry, and where it goes.
    pub(crate) fn report_and_target(&self, p: Pending) -> (DeliveryReport, OwedTo) {
        let latency = self.reported_at.since(p.accepted);
        (self.build(&p, latency), p.to)
    }

    #[inline(always)]
    fn build(&self, p: &Pending, latency: Duration) -> DeliveryReport {
        match &self.outcome {
            Outcome::Delivered {
                base_offset,
                log_append_time,
            } => DeliveryReport::Delivered(Delivered {
                topic: self.topic,
                partition: self.partition,
                offset: base_offset.map(|b| b.saturating_add(i64::from(p.index))),
                timestamp: log_append_time.unwrap_or(p.timestamp),
                attempts: self.attempts,
                latency,
                opaque: p.opaque,
            }),
            Outcome::Failed { kind, message } => self.failed(*kind, message, p),
        }
    }

    #[cold]
    #[inline(never)]
    fn failed(&self, kind: ErrorKind, message: &str, p: &Pending) -> DeliveryReport {
        let (record, message) = match &self.records {
            Ok(records) => match records.get(p.index as usize) {
                Some(r) => (
                    record_back(self.topic, self.partition, p, r),
                    message.into(),
                ),
                None => (
                    bare_record(self.topic, self.partition, p),
                    format!(
                        "{message} (the record's content could not be handed back: \
                         no record at offset delta {} in its batch)",
                        p.index
                    ),
                ),
            },
            Err(why) => (
                bare_record(self.topic, self.partition, p),
                format!("{message} (the record's content could not be handed back: {why})"),
            ),
        };
        DeliveryReport::Failed(DeliveryError {
            kind,
            message,
            partition: Some(self.partition),
            attempts: self.attempts,
            record: Box::new(record),
        })
    }
}

/// The record as it was produced, from its encoded copy and its entry.
/// Its key, value and header values are copied out of the batch read
/// back, so that a
/// failure kept for long (a retry's backoff) holds its own bytes, not its
/// whole batch.
fn record_back(topic: Topic, partition: i32, p: &Pending, r: &DecodedRecord) -> Record {
    let own = |b: &Option<bytes::Bytes>| b.as_deref().map(bytes::Bytes::copy_from_slice);
    Record {
        key: own(&r.key),
        value: own(&r.value),
        headers: r
            .headers
            .iter()
            .map(|h| crate::record::Header {
                key: h.key.clone(),
                value: own(&h.value),
            })
            .collect(),
        ..bare_record(topic, partition, p)
    }
}

/// What a record's entry alone keeps of it: its topic, partition (if it
/// named one), timestamp (if it had one) and tag.
fn bare_record(topic: Topic, partition: i32, p: &Pending) -> Record {
    Record {
        topic,
        partition: (p.flags & EXPLICIT_PARTITION != 0).then_some(partition),
        key: None,
        value: None,
        headers: Vec::new(),
        timestamp: (p.flags & GIVEN_TIMESTAMP != 0).then_some(p.timestamp),
        opaque: p.opaque,
    }
}
