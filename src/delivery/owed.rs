//! The reports one batch owes, and the caller's reply targets they come
//! from.
//!
//! A batch keeps one [`Owed`] ledger: an entry per record that owes a
//! report (fire-and-forget records owe none), in chunks that never regrow
//! (the first small, each next twice the last up to a full chunk), so an
//! entry is moved once when it is pushed and not again while the batch
//! fills, and a batch holds room for about as many entries as it has. A chunk whose records all report to one subscription
//! is later handed to that subscription's stream whole.

use std::sync::Arc;

use actix::Recipient;
use tokio::sync::oneshot;

use crate::clock::Mono;
use crate::delivery::entry::{chunk_vec, flags_of, OwedTo, Pending, CHUNK};
use crate::delivery::settlement::{Outcome, Readback, Settlement};
use crate::delivery::subscription::SubscriptionShared;
use crate::record::{Record, Topic};
use crate::report::{DeliveryReport, ErrorKind};

/// Where one record's report goes, as the produce call gives it. A
/// subscription is borrowed: the batch clones its `Arc` only when the
/// subscriber first appears in that batch.
#[derive(Debug)]
pub(crate) enum ReplyTo<'s> {
    /// `send().await`.
    Oneshot(oneshot::Sender<DeliveryReport>),
    /// A subscription's stream, and the permits the record took from its
    /// bound (`Weigh::of`).
    Subscription(&'s Arc<SubscriptionShared>, u32),
    /// An actor (`Produce { reply_to }`).
    Actor(Recipient<DeliveryReport>),
    /// Nobody: a fire-and-forget record of a producer with interceptors,
    /// which see its report (`Engine::intercept`); without interceptors a
    /// fire-and-forget record has no `ReplyTo` at all.
    Nobody,
    /// A record with a produce span (feature `opentelemetry`), and where
    /// its report goes (`None`: fire-and-forget).
    #[cfg(feature = "opentelemetry")]
    Traced(Box<TracedReply<'s>>),
}

/// A traced record's reply target: its produce span rides with it
/// (`delivery::trace_context`).
#[cfg(feature = "opentelemetry")]
#[derive(Debug)]
pub(crate) struct TracedReply<'s> {
    pub reply: Option<ReplyTo<'s>>,
    pub span: crate::delivery::trace_context::ProduceSpan,
}

impl ReplyTo<'_> {
    /// Sends one report straight to this target (a record that never
    /// reached a batch).
    pub(crate) fn send(self, report: DeliveryReport) {
        match self {
            ReplyTo::Oneshot(tx) => {
                let _ = tx.send(report);
            }
            ReplyTo::Actor(r) => r.do_send(report),
            ReplyTo::Subscription(s, weight) => s.deliver(vec![(report, weight)]),
            ReplyTo::Nobody => {}
            #[cfg(feature = "opentelemetry")]
            ReplyTo::Traced(t) => {
                let TracedReply { reply, span } = *t;
                span.end_with_report(&report);
                if let Some(reply) = reply {
                    reply.send(report);
                }
            }
        }
    }
}

/// Entries in a batch's first chunk, at most; later chunks double up to
/// [`CHUNK`].
const FIRST_CHUNK: usize = 16;

/// The reports owed for one batch, in chunks of at most [`CHUNK`] records:
/// the first of at most [`FIRST_CHUNK`], each next one twice the last.
///
/// Owed reports are paid by `delivery::router::route`, which empties this.
/// Dropping it with reports still owed is a bug; as a last line of defence
/// the drop pays each one as a `Cancelled` failure (with what the entry
/// keeps of the record: its topic, tag, and partition and timestamp if it
/// named them; the content is in the batch, which the ledger does not
/// hold), so a bug can never turn into a silently lost report or a hung
/// `send`.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    /// The batch's topic (set once, when its batch opens).
    pub topic: Option<Topic>,
    pub subscribers: Vec<Arc<SubscriptionShared>>,
    pub chunks: Vec<Chunk>,
    /// Capacity of the first chunk (sized from the batch's first record,
    /// so a small batch does not reserve a whole chunk).
    pub first_capacity: usize,
    /// The batch was sent at least once: if it is dropped unreported, its
    /// records may or may not have been written.
    pub sent: bool,
    /// Produce spans of its traced records (feature `opentelemetry`).
    #[cfg(feature = "opentelemetry")]
    pub traced: crate::delivery::trace_context::TracedSpans,
}

/// Consecutive owed entries of one batch.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub entries: Vec<Pending>,
    /// `Some(i)` while every entry reports to subscription `i`.
    pub sole: Option<u32>,
}

impl Drop for Owed {
    fn drop(&mut self) {
        self.pay_dropped(None, None, None);
    }
}

impl Owed {
    /// Pays every report still owed as `Cancelled`: the batch is being
    /// dropped unreported (a bug, or a panic while a connection actor held
    /// it). With `readback` (the batch's bytes, when its holder still has
    /// them) each record is handed back whole; without, with what its
    /// entry keeps (topic, tag, its own timestamp) and a message saying so.
    /// `attempts`: the batch's, when its holder knows them (else 1 if it
    /// was sent, 0 if not).
    pub(crate) fn pay_dropped(
        &mut self,
        partition: Option<i32>,
        attempts: Option<u32>,
        readback: Option<Readback<'_>>,
    ) {
        if self.chunks.iter().all(|c| c.entries.is_empty()) {
            return;
        }
        tracing::error!(
            records = self.len(),
            "batch dropped with reports owed; reporting them Cancelled"
        );
        let (sent_attempts, message) = if self.sent {
            (
                1,
                "internal error: the batch was dropped before it was reported; it was sent, so it may or may not have been written",
            )
        } else {
            (
                0,
                "internal error: the batch was dropped before it was reported; it was never sent",
            )
        };
        let attempts = attempts.unwrap_or(sent_attempts);
        let topic = self.topic.unwrap_or_else(|| Topic::from(""));
        let settled = Settlement::new(
            topic,
            partition.unwrap_or(-1),
            attempts,
            Outcome::Failed {
                kind: ErrorKind::Cancelled,
                message: message.into(),
            },
            readback,
        );
        let mut per_sub: Vec<Vec<(DeliveryReport, u32)>> =
            self.subscribers.iter().map(|_| Vec::new()).collect();
        for p in self.chunks.drain(..).flat_map(|c| c.entries) {
            let weight = p.weight;
            let (mut report, to) = settled.report_and_target(p);
            if partition.is_none() {
                if let DeliveryReport::Failed(e) = &mut report {
                    e.partition = None;
                    e.record.partition = None;
                }
            }
            match to {
                OwedTo::Oneshot(tx) => {
                    let _ = tx.send(report);
                }
                OwedTo::Actor(r) => r.do_send(report),
                OwedTo::Subscription(i) => per_sub[i as usize].push((report, weight)),
                OwedTo::Nobody => {}
            }
        }
        for (s, reports) in self.subscribers.iter().zip(per_sub) {
            s.deliver(reports);
        }
    }
}

impl Owed {
    /// Records owed.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.entries.len()).sum()
    }

    /// Splits the ledger by record: for each owed record, its offset delta
    /// in this batch and a ledger of its own that owes just its report, at
    /// offset delta 0. (For a batch split into one-record batches.)
    pub(crate) fn into_singles(mut self) -> Vec<(u32, Owed)> {
        let subscribers = std::mem::take(&mut self.subscribers);
        let mut out = Vec::with_capacity(self.len());
        for chunk in std::mem::take(&mut self.chunks) {
            for mut p in chunk.entries {
                let index = std::mem::replace(&mut p.index, 0);
                let mut single = Owed::default();
                single.topic = self.topic;
                let sole = match p.to {
                    OwedTo::Subscription(i) => {
                        single.subscribers.push(subscribers[i as usize].clone());
                        p.to = OwedTo::Subscription(0);
                        Some(0)
                    }
                    _ => None,
                };
                single.chunks.push(Chunk {
                    entries: vec![p],
                    sole,
                });
                out.push((index, single));
            }
        }
        // Each traced record's span goes with it (`out` is in index order).
        #[cfg(feature = "opentelemetry")]
        for (index, span) in std::mem::take(&mut self.traced).into_entries() {
            let at = out
                .binary_search_by_key(&index, |(i, _)| *i)
                .unwrap_or_else(|at| {
                    let mut single = Owed::default();
                    single.topic = self.topic;
                    out.insert(at, (index, single));
                    at
                });
            out[at].1.traced.push(0, span);
        }
        out
    }

    /// Owes a report for `record`, at `index`, to `reply`.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Mono,
        record: &Record,
        reply: ReplyTo,
    ) {
        let (to, sub, weight) = match reply {
            ReplyTo::Oneshot(tx) => (OwedTo::Oneshot(tx), None, 0),
            ReplyTo::Actor(r) => (OwedTo::Actor(r), None, 0),
            ReplyTo::Nobody => (OwedTo::Nobody, None, 0),
            ReplyTo::Subscription(s, weight) => {
                let i = match self.subscribers.iter().rposition(|x| Arc::ptr_eq(x, s)) {
                    Some(i) => i,
                    None => {
                        self.subscribers.push(s.clone());
                        self.subscribers.len() - 1
                    }
                } as u32;
                (OwedTo::Subscription(i), Some(i), weight)
            }
            #[cfg(feature = "opentelemetry")]
            ReplyTo::Traced(t) => return self.push_traced(index, timestamp, accepted, record, *t),
        };
        let chunk = match self.chunks.last_mut() {
            Some(c) if c.entries.len() < c.entries.capacity() => c,
            _ => {
                // Small first, then doubling up to a full chunk: a batch
                // holds room for about as many entries as it has, so a
                // producer with many open batches (many partitions) does
                // not hold a full chunk's 16 KiB for each.
                let cap = match self.chunks.last() {
                    None => self.first_capacity.clamp(1, FIRST_CHUNK),
                    Some(c) => (c.entries.capacity() * 2).clamp(FIRST_CHUNK, CHUNK),
                };
                self.chunks.push(Chunk {
                    entries: chunk_vec(cap),
                    sole: None,
                });
                self.chunks.last_mut().expect("just pushed")
            }
        };
        if chunk.entries.is_empty() {
            chunk.sole = sub;
        } else if chunk.sole != sub {
            chunk.sole = None;
        }
        chunk.entries.push(Pending {
            index,
            weight,
            timestamp,
            accepted,
            opaque: record.opaque,
            to,
            flags: flags_of(record),
        });
    }
}

#[cfg(feature = "opentelemetry")]
impl Owed {
    /// Keeps a traced record's span, and owes its report if it has one.
    #[inline(never)]
    fn push_traced(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Mono,
        record: &Record,
        traced: TracedReply,
    ) {
        self.traced.push(index, traced.span);
        if let Some(reply) = traced.reply {
            self.push(index, timestamp, accepted, record, reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's entries take room about in proportion to their number:
    /// a batch of one record holds a 16-entry chunk, not a 256-entry one
    /// (16 KiB), which a producer with thousands of open batches (one per
    /// partition) would hold for each.
    #[test]
    fn chunks_start_small_and_double_to_full_size() {
        let shared = crate::delivery::subscription::SubscriptionShared::new(
            crate::report::ReportMode::All,
            crate::delivery::subscription::Bound::Records,
            10,
            Default::default(),
        );
        let mut owed = Owed::default();
        owed.first_capacity = 2_000;
        for i in 0..1_000u32 {
            let record = Record::to("t").opaque(u64::from(i));
            owed.push(
                i,
                1,
                Mono::now(),
                &record,
                ReplyTo::Subscription(&shared, 1),
            );
        }
        let caps: Vec<usize> = owed.chunks.iter().map(|c| c.entries.capacity()).collect();
        assert_eq!(caps, [16, 32, 64, 128, 256, 256, 256]);
        let order: Vec<u64> = owed
            .chunks
            .iter()
            .flat_map(|c| c.entries.iter().map(|p| p.opaque))
            .collect();
        assert_eq!(
            order,
            (0..1_000).collect::<Vec<u64>>(),
            "every entry, in order"
        );
        assert!(owed.chunks.iter().all(|c| c.sole == Some(0)));
        // A batch of one record: one small chunk.
        let mut one = Owed::default();
        one.first_capacity = 2_000;
        one.push(
            0,
            1,
            Mono::now(),
            &Record::to("t"),
            ReplyTo::Subscription(&shared, 1),
        );
        assert_eq!(one.chunks[0].entries.capacity(), FIRST_CHUNK);
        // Paid (as the router would), so the drop has nothing owed.
        for o in [&mut owed, &mut one] {
            for c in &mut o.chunks {
                c.entries.clear();
            }
        }
    }

    /// A dropped batch's reports to a subscription give back exactly the
    /// permits their records took (carried in their entries), so the
    /// bound is whole again once they are read.
    #[test]
    fn dropped_reports_give_a_subscription_its_permits_back() {
        use crate::delivery::subscription::{Bound, ReportStream, SubscriptionShared};
        use futures::{FutureExt, StreamExt};
        let shared = SubscriptionShared::new(
            crate::report::ReportMode::All,
            Bound::Bytes,
            10_000,
            Default::default(),
        );
        let mut stream = ReportStream::new(shared.clone());
        let mut owed = Owed::default();
        for (i, w) in [300u32, 1_200].into_iter().enumerate() {
            shared.outstanding.try_acquire_many(w).unwrap().forget();
            let record = Record::to("t").value("v");
            owed.push(
                i as u32,
                1,
                Mono::now(),
                &record,
                ReplyTo::Subscription(&shared, w),
            );
        }
        assert_eq!(shared.outstanding.available_permits(), 8_500);
        drop(owed);
        for _ in 0..2 {
            let report = stream.next().now_or_never().flatten().expect("a report");
            assert!(!report.is_delivered());
        }
        assert_eq!(shared.outstanding.available_permits(), 10_000);
    }

    #[test]
    fn dropping_owed_reports_pays_each_report_as_cancelled() {
        let (tx, mut rx) = oneshot::channel();
        let mut owed = Owed::default();
        owed.topic = Some(Topic::from("t"));
        owed.push(
            0,
            5,
            Mono::now(),
            &Record::to("t").value("v").opaque(7).timestamp(5),
            ReplyTo::Oneshot(tx),
        );
        drop(owed);
        match rx.try_recv().expect("a report, not a dropped sender") {
            DeliveryReport::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::Cancelled);
                // The ledger alone keeps the record's topic, tag and its
                // own timestamp; its content is in the batch.
                let r = &e.record;
                assert_eq!(
                    (&*r.topic, r.opaque, r.timestamp, r.partition),
                    ("t", 7, Some(5), None)
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
