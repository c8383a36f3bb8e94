//! Pays a batch's owed reports. `route`: a first pass over the batch's
//! entries counts their latencies and permits; then each chunk that belongs
//! to one subscriber moves to it whole, and a chunk with mixed targets is
//! split (a `send` or an actor answered per record). Each subscriber of the
//! batch gets its share in one hand-over under its lock, with one wake; an
//! errors-only subscriber's successes are never built (`Skipped`: their
//! permits go back at once). `route_one`: a record that never reached a
//! batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Mono;
use crate::delivery::entry::{recycle_chunk, OwedTo, Pending};
use crate::delivery::owed::{Chunk, Owed, ReplyTo};
use crate::delivery::settlement::{Outcome, Readback, Settlement};
use crate::delivery::subscription::{ReportChunk, Skipped};
use crate::record::Topic;
use crate::report::DeliveryReport;
use crate::stats::{bucket_of, Stats, LATENCY_BUCKETS};

/// Sends every report `owed` for a batch of `record_count` records of
/// `topic`. A failed batch's records are read back from `readback`, to be
/// handed back with their reports.
///
/// A chunk whose records all report to one subscription goes to that
/// subscription whole (its reports are built as the stream is read); only
/// `send` and actor targets, and chunks mixing targets, are split here.
#[allow(clippy::too_many_arguments)] // a batch's parts, taken apart by its callers
pub(crate) fn route(
    topic: Topic,
    partition: i32,
    record_count: i32,
    attempts: u32,
    mut owed: Owed,
    outcome: Outcome,
    readback: Option<Readback<'_>>,
    stats: &Stats,
) {
    let failed_kind = match &outcome {
        Outcome::Failed { kind, .. } => Some(*kind),
        Outcome::Delivered { .. } => None,
    };
    #[cfg(feature = "fault-injection")]
    lose_a_planted_report(&mut owed, stats);
    stats
        .metrics
        .settled(topic, failed_kind, record_count as u64);
    #[cfg(feature = "opentelemetry")]
    owed.traced.settle(partition, &outcome);
    // Nothing owed (fire-and-forget records): nothing to read back.
    let readback = readback.filter(|_| owed.chunks.iter().any(|c| !c.entries.is_empty()));
    let settled = Arc::new(Settlement::new(
        topic, partition, attempts, outcome, readback,
    ));
    let delivered = settled.delivered();
    let count = if delivered {
        &stats.delivered
    } else {
        &stats.failed
    };
    count.fetch_add(record_count as u64, Ordering::Relaxed);
    let subscribers = std::mem::take(&mut owed.subscribers);
    let chunks = std::mem::take(&mut owed.chunks);
    // Each subscriber's share of the batch is gathered first and handed
    // over at the end under its own lock, one subscriber at a time (never
    // two locks at once), with one wake each. An errors-only subscriber's
    // successes are never built.
    let mut shares: Vec<Share> = subscribers.iter().map(|_| Share::default()).collect();
    let takes = |i: usize| !delivered || subscribers[i].wants_successes();
    let permits = count_latencies_and_permits(&chunks, &settled, stats, topic);
    // Interceptors see every report first (one check per batch when there
    // are none), as Java calls `onAcknowledgement` before the callback.
    if stats.interceptors.is_set() {
        show_interceptors(&chunks, &settled, stats);
    }
    for (chunk, permits) in chunks.into_iter().zip(permits) {
        if let Some(i) = chunk.sole {
            let i = i as usize;
            shares[i].add(takes(i), &settled, chunk.entries, permits, true);
            continue;
        }
        // Mixed targets: `send` and actors are answered now, and each
        // subscription's entries gathered into a chunk of its own.
        let split = answer_direct_and_split(chunk.entries, subscribers.len(), &settled);
        for (i, (entries, permits)) in split.into_iter().enumerate() {
            if !entries.is_empty() {
                shares[i].add(takes(i), &settled, entries, permits, false);
            }
        }
    }
    for (s, share) in subscribers.iter().zip(shares) {
        s.take(share.queued, share.skipped);
    }
}

/// One subscriber's share of a batch's reports: the chunks it is handed,
/// and what it skips (an errors-only subscriber's successes).
#[derive(Default)]
struct Share {
    queued: Vec<ReportChunk>,
    skipped: Skipped,
}

impl Share {
    /// `entries` (holding `permits`) as a chunk of reports when the
    /// subscriber `takes` them, else skipped (their permits given back;
    /// a whole chunk, `recycle`, goes back to the spare pool).
    #[inline(always)]
    fn add(
        &mut self,
        takes: bool,
        settled: &Arc<Settlement>,
        entries: Vec<Pending>,
        permits: usize,
        recycle: bool,
    ) {
        if takes {
            self.queued
                .push(ReportChunk::batch(settled.clone(), entries, permits));
        } else {
            self.skipped.records += entries.len();
            self.skipped.permits += permits;
            if recycle {
                recycle_chunk(entries);
            }
        }
    }
}

/// The batch's latencies into the histogram (and the published metrics)
/// before any report is sent or handed over, so whoever has a report
/// finds its latency counted (a Prometheus scrape right after the last
/// report was read once saw 640 of 1,000); and each chunk's permits,
/// counted in the same pass.
#[inline(always)]
fn count_latencies_and_permits(
    chunks: &[Chunk],
    settled: &Settlement,
    stats: &Stats,
    topic: Topic,
) -> Vec<usize> {
    let mut latencies = LatencyTally::default();
    let mut last: Option<(Mono, u64)> = None;
    let permits = chunks
        .iter()
        .map(|chunk| {
            let mut permits = 0;
            for p in &chunk.entries {
                permits += p.weight as usize;
                // Records taken together share their instant: measure once.
                let micros = match last {
                    Some((at, us)) if at == p.accepted => us,
                    _ => {
                        let us = settled.reported_at.micros_since(p.accepted);
                        last = Some((p.accepted, us));
                        us
                    }
                };
                latencies.add(micros);
            }
            permits
        })
        .collect();
    latencies.flush(stats, topic);
    permits
}

/// Every report of a batch to the producer's interceptors, each once
/// (fire-and-forget records too: with interceptors they owe a report to
/// `OwedTo::Nobody`). The reports are built here for them and again for
/// their targets, so only a producer with interceptors pays this.
#[cold]
#[inline(never)]
fn show_interceptors(chunks: &[Chunk], settled: &Settlement, stats: &Stats) {
    let mut last = None;
    for p in chunks.iter().flat_map(|c| &c.entries) {
        stats.interceptors.on_report(&settled.report(p, &mut last));
    }
}

/// A chunk of mixed targets: `send` and actor targets are answered now;
/// each of the `subscribers` gets its entries back, with their permits.
fn answer_direct_and_split(
    entries: Vec<Pending>,
    subscribers: usize,
    settled: &Settlement,
) -> Vec<(Vec<Pending>, usize)> {
    let mut split: Vec<(Vec<Pending>, usize)> = (0..subscribers).map(|_| (Vec::new(), 0)).collect();
    for p in entries {
        match p.to {
            OwedTo::Subscription(i) => {
                let (entries, permits) = &mut split[i as usize];
                *permits += p.weight as usize;
                entries.push(p);
            }
            OwedTo::Oneshot(_) | OwedTo::Actor(_) => {
                let (report, to) = settled.report_and_target(p);
                match to {
                    OwedTo::Oneshot(tx) => {
                        let _ = tx.send(report);
                    }
                    OwedTo::Actor(r) => r.do_send(report),
                    OwedTo::Subscription(_) | OwedTo::Nobody => unreachable!("matched above"),
                }
            }
            // Owed only for the interceptors, which have seen it.
            OwedTo::Nobody => {}
        }
    }
    split
}

/// The planted bug (fault-injection builds only, off unless a test plants
/// it): one owed report of this batch vanishes, its target never told (a
/// `send` waits for ever, a stream ends one report short).
#[cfg(feature = "fault-injection")]
fn lose_a_planted_report(owed: &mut Owed, stats: &Stats) {
    if stats.plant_lost_reports.load(Ordering::Acquire) == 0 {
        return;
    }
    if let Some(chunk) = owed.chunks.iter_mut().rev().find(|c| !c.entries.is_empty()) {
        let planted = stats
            .plant_lost_reports
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if planted {
            if let Some(entry) = chunk.entries.pop() {
                std::mem::forget(entry);
            }
        }
    }
}

/// Reports for records that never reached a batch (rejected before
/// appending): one report, straight to its target.
pub(crate) fn route_one(report: DeliveryReport, reply: ReplyTo, stats: &Stats) {
    if stats.interceptors.is_set() {
        stats.interceptors.on_report(&report);
    }
    if report.is_delivered() {
        stats.delivered.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.failed.fetch_add(1, Ordering::Relaxed);
    }
    reply.send(report);
}

/// Latencies of one batch, bucketed locally, added to the shared histogram
/// (and, with the `metrics` feature, to the published one, each bucket at
/// its records' mean) once per batch.
#[derive(Default)]
struct LatencyTally {
    buckets: [u32; LATENCY_BUCKETS],
    #[cfg(feature = "metrics")]
    sums_us: [u64; LATENCY_BUCKETS],
    any: bool,
}

impl LatencyTally {
    #[inline(always)]
    fn add(&mut self, micros: u64) {
        let b = bucket_of(micros);
        self.buckets[b] += 1;
        #[cfg(feature = "metrics")]
        {
            self.sums_us[b] += micros;
        }
        self.any = true;
    }

    fn flush(&self, stats: &Stats, topic: Topic) {
        if !self.any {
            return;
        }
        let shared: &[AtomicU64; LATENCY_BUCKETS] = &stats.latency_us;
        for (i, n) in self.buckets.iter().enumerate() {
            if *n > 0 {
                shared[i].fetch_add(*n as u64, Ordering::Relaxed);
            }
        }
        #[cfg(feature = "metrics")]
        stats.metrics.latency(topic, &self.buckets, &self.sums_us);
        #[cfg(not(feature = "metrics"))]
        let _ = topic;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::subscription::{Bound, ReportStream, SubscriptionShared};
    use crate::record::Record;
    use crate::report::{ErrorKind, ReportMode};
    use futures::{FutureExt, StreamExt};
    use std::sync::atomic::AtomicBool;

    fn drain(stream: &mut ReportStream) -> Vec<DeliveryReport> {
        std::iter::from_fn(|| stream.next().now_or_never().flatten()).collect()
    }

    /// A stream's chunk is read in place: a batch of reports counts down
    /// as it is iterated, a stream read report by report then by batch
    /// picks up where it left off, a batch dropped part-way loses only
    /// its unread reports (no report twice), and the records' permits are
    /// all back once their reports are taken.
    #[test]
    fn a_chunk_read_in_place_counts_down_and_gives_every_report_once() {
        let closed = Arc::new(AtomicBool::new(false));
        let sub = SubscriptionShared::new(ReportMode::All, Bound::Records, 1_000, closed);
        let mut stream = ReportStream::new(sub.clone());
        let stats = Stats::default();
        let route_n = |n: u32, base: i64| {
            let mut owed = Owed::default();
            let mut now = Mono::now();
            for i in 0..n {
                // Runs of records that share their instant, and ones that
                // do not: each counted once in the latency histogram.
                if i % 3 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                    now = Mono::now();
                }
                let r = Record::to("t").value("v").opaque(u64::from(i));
                let permit = sub.outstanding.try_acquire().expect("room");
                permit.forget();
                owed.push(i, 7, now, &r, ReplyTo::Subscription(&sub, 1));
            }
            route(
                Topic::from("t"),
                0,
                n as i32,
                1,
                owed,
                Outcome::Delivered {
                    base_offset: Some(base),
                    log_append_time: None,
                },
                None,
                &stats,
            );
        };
        route_n(10, 100);
        // Two reports one at a time, then the rest of the chunk as a batch.
        let offsets = |r: DeliveryReport| match r {
            DeliveryReport::Delivered(d) => d.offset.unwrap(),
            other => panic!("{other:?}"),
        };
        let first = stream.next().now_or_never().flatten().unwrap();
        let second = stream.next().now_or_never().flatten().unwrap();
        assert_eq!((offsets(first), offsets(second)), (100, 101));
        let mut batch = stream.next_batch().now_or_never().flatten().unwrap();
        assert_eq!(batch.len(), 8);
        let read: Vec<i64> = batch.by_ref().take(3).map(offsets).collect();
        assert_eq!(read, [102, 103, 104]);
        assert_eq!(batch.size_hint(), (5, Some(5)));
        drop(batch);
        // The five left unread went with the batch: nothing more is queued.
        assert!(stream.next().now_or_never().is_none());
        assert_eq!(sub.outstanding.available_permits(), 1_000);
        // The next batch's reports come in full, each once.
        route_n(4, 200);
        let batch = stream.next_batch().now_or_never().flatten().unwrap();
        assert_eq!(batch.map(offsets).collect::<Vec<_>>(), [200, 201, 202, 203]);
        assert_eq!(sub.outstanding.available_permits(), 1_000);
        let counted: u64 = stats
            .latency_us
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .sum();
        assert_eq!(counted, 14, "each record's latency counted once");
    }

    /// A batch's latencies are counted before any of its reports is
    /// handed over or sent: a subscription's reader, and a `send`'s
    /// awaiting task, woken by their report already find every one of them
    /// in the histogram (what a metrics scrape right after the last
    /// report was read relies on).
    #[test]
    fn latencies_are_counted_before_the_reports_are_handed_over() {
        use std::sync::atomic::AtomicU64;
        struct Peek {
            stats: Arc<Stats>,
            seen: AtomicU64,
        }
        impl futures::task::ArcWake for Peek {
            fn wake_by_ref(me: &Arc<Self>) {
                let counted = me
                    .stats
                    .latency_us
                    .iter()
                    .map(|b| b.load(Ordering::Relaxed))
                    .sum();
                me.seen.store(counted, Ordering::Relaxed);
            }
        }
        let closed = Arc::new(AtomicBool::new(false));
        let sub = SubscriptionShared::new(ReportMode::All, Bound::Records, 100, closed);
        let mut stream = ReportStream::new(sub.clone());
        let stats = Arc::new(Stats::default());
        let peek = Arc::new(Peek {
            stats: stats.clone(),
            seen: AtomicU64::new(u64::MAX),
        });
        let waker = futures::task::waker(peek.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(stream.poll_next_unpin(&mut cx).is_pending());
        let mut owed = Owed::default();
        let now = Mono::now();
        for i in 0..5 {
            let r = Record::to("t").value("v").opaque(i);
            sub.outstanding.try_acquire().expect("room").forget();
            owed.push(i as u32, 7, now, &r, ReplyTo::Subscription(&sub, 1));
        }
        route(
            Topic::from("t"),
            0,
            5,
            1,
            owed,
            Outcome::Delivered {
                base_offset: Some(0),
                log_append_time: None,
            },
            None,
            &stats,
        );
        assert_eq!(
            peek.seen.load(Ordering::Relaxed),
            5,
            "the reader was woken with every latency counted"
        );
        assert_eq!(drain(&mut stream).len(), 5);
        // A `send`'s report, in a batch that mixes targets, is sent only
        // after its batch's latencies are counted too.
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        assert!(futures::FutureExt::poll_unpin(&mut rx, &mut cx).is_pending());
        let mut owed = Owed::default();
        let r = Record::to("t").value("v");
        sub.outstanding.try_acquire().expect("room").forget();
        owed.push(0, 7, now, &r, ReplyTo::Subscription(&sub, 1));
        owed.push(1, 7, now, &r, ReplyTo::Oneshot(tx));
        route(
            Topic::from("t"),
            0,
            2,
            1,
            owed,
            Outcome::Delivered {
                base_offset: Some(5),
                log_append_time: None,
            },
            None,
            &stats,
        );
        assert_eq!(
            peek.seen.load(Ordering::Relaxed),
            7,
            "woken with 5 + 2 counted"
        );
        assert!(rx.now_or_never().is_some_and(|r| r.is_ok()));
        assert_eq!(drain(&mut stream).len(), 1);
    }

    /// A batch whose chunks mix targets (two subscriptions, one of them
    /// errors-only, and a `send`), followed by chunks owned by one
    /// subscription: everyone gets exactly their reports, with the offset
    /// of their own record.
    #[test]
    fn mixed_and_sole_chunks_reach_exactly_their_targets() {
        let closed = Arc::new(AtomicBool::new(false));
        let all = SubscriptionShared::new(ReportMode::All, Bound::Records, 10_000, closed.clone());
        let errors = SubscriptionShared::new(
            ReportMode::ErrorsOnly,
            Bound::Records,
            10_000,
            closed.clone(),
        );
        let mut all_stream = ReportStream::new(all.clone());
        let mut errors_stream = ReportStream::new(errors.clone());
        let stats = Stats::default();
        let rec = |i: u32| Record::to("t").value(i.to_string()).opaque(u64::from(i));
        // The batch the records are in (a failure's records are read back
        // from it).
        let mut builder = crate::protocol::record_batch::BatchBuilder::new(
            1 << 20,
            crate::protocol::record_batch::Codec::default(),
        );
        for i in 0..700 {
            let r = rec(i);
            builder
                .try_append(7, None, r.value.as_deref(), &[])
                .unwrap();
        }
        let batch = builder
            .finish(crate::protocol::record_batch::ProducerStamp::NONE)
            .unwrap();
        let route_batch = |outcome: Outcome| {
            let (tx, mut rx) = tokio::sync::oneshot::channel();
            let mut owed = Owed::default();
            let now = Mono::now();
            owed.push(0, 7, now, &rec(0), ReplyTo::Subscription(&all, 1));
            owed.push(1, 7, now, &rec(1), ReplyTo::Oneshot(tx));
            owed.push(2, 7, now, &rec(2), ReplyTo::Subscription(&errors, 1));
            for i in 3..700 {
                owed.push(i, 7, now, &rec(i), ReplyTo::Subscription(&all, 1));
            }
            assert!(owed.chunks.len() >= 3, "several chunks");
            let readback = Readback {
                bytes: batch.bytes(),
                max_size: 1 << 20,
            };
            route(
                Topic::from("t"),
                4,
                700,
                1,
                owed,
                outcome,
                Some(readback),
                &stats,
            );
            rx.try_recv().expect("the send got its report")
        };
        let before = errors.outstanding.available_permits();
        let sent = route_batch(Outcome::Delivered {
            base_offset: Some(100),
            log_append_time: None,
        });
        let DeliveryReport::Delivered(d) = sent else {
            panic!("{sent:?}")
        };
        assert_eq!((d.offset, d.opaque, &*d.topic), (Some(101), 1, "t"));
        let got = drain(&mut all_stream);
        assert_eq!(got.len(), 698);
        for r in &got {
            let DeliveryReport::Delivered(d) = r else {
                panic!("{r:?}")
            };
            let i = d.opaque as i64;
            assert_ne!(i, 1);
            assert_ne!(i, 2);
            assert_eq!(d.offset, Some(100 + i));
            assert_eq!((d.partition, d.timestamp, d.attempts), (4, 7, 1));
        }
        // The errors-only subscription's success was not queued, and is no
        // longer outstanding.
        assert!(drain(&mut errors_stream).is_empty());
        assert_eq!(errors.outstanding.available_permits(), before + 1);

        let failed = route_batch(Outcome::Failed {
            kind: ErrorKind::Timeout,
            message: "late".into(),
        });
        assert!(!failed.is_delivered());
        assert_eq!(drain(&mut all_stream).len(), 698);
        let errs = drain(&mut errors_stream);
        assert_eq!(errs.len(), 1);
        match &errs[0] {
            DeliveryReport::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::Timeout);
                // Handed back as produced: read back from its batch.
                assert_eq!(*e.record, rec(2));
            }
            other => panic!("{other:?}"),
        }
        let s = &stats;
        assert_eq!(s.delivered.load(Ordering::Relaxed), 700);
        assert_eq!(s.failed.load(Ordering::Relaxed), 700);
    }

    /// A batch split into one batch per record (MESSAGE_TOO_LARGE): each
    /// traced record's produce span goes with it, a fire-and-forget one's
    /// too, at offset delta 0 of its part.
    #[cfg(feature = "opentelemetry")]
    #[test]
    fn a_split_batch_hands_each_part_its_records_span() {
        use crate::delivery::owed::TracedReply;
        use crate::delivery::trace_context::ProduceSpan;
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
        };
        let parent = opentelemetry::Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from(7),
            SpanId::from(9),
            TraceFlags::SAMPLED,
            true,
            TraceState::NONE,
        ));
        let mut owed = Owed::default();
        let now = Mono::now();
        let mut receivers = Vec::new();
        for i in 0..4u32 {
            let mut record = Record::to("t").value(i.to_string());
            let span = ProduceSpan::start(&parent, &mut record, "c").expect("a valid parent");
            // Record 1 is fire-and-forget, record 3 untraced.
            let reply = (i != 1).then(|| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                receivers.push(rx);
                ReplyTo::Oneshot(tx)
            });
            match (i, reply) {
                (3, Some(r)) => owed.push(i, 7, now, &record, r),
                (_, reply) => owed.push(
                    i,
                    7,
                    now,
                    &record,
                    ReplyTo::Traced(Box::new(TracedReply { reply, span })),
                ),
            }
        }
        let parts = owed.into_singles();
        let spans: Vec<(u32, Vec<u32>, usize)> = parts
            .into_iter()
            .map(|(i, mut o)| {
                let at = std::mem::take(&mut o.traced).into_entries();
                let n = o.len();
                route(
                    Topic::from("t"),
                    0,
                    1,
                    1,
                    o,
                    Outcome::Delivered {
                        base_offset: Some(i as i64),
                        log_append_time: None,
                    },
                    None,
                    &Stats::default(),
                );
                (i, at.into_iter().map(|(j, _)| j).collect(), n)
            })
            .collect();
        assert_eq!(
            spans,
            [
                (0, vec![0], 1),
                (1, vec![0], 0),
                (2, vec![0], 1),
                (3, vec![], 1)
            ]
        );
        for mut rx in receivers {
            assert!(rx.try_recv().expect("one report").is_delivered());
        }
    }
}
