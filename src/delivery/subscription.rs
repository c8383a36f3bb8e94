//! Per-subscriber report streams, with a bound on outstanding reports.
//!
//! A subscription is the actor-native answer to pykafka's thread-local
//! report queue: each subscriber produces through its own `Subscriber` (the public face)
//! handle and reads exactly its own reports from its [`ReportStream`].
//!
//! Memory is bounded: a subscription allows at most `capacity` of
//! outstanding reports (produced, not yet read), counted in records or in
//! bytes ([`Bound`]). Producing through the handle waits while the bound
//! is reached, so a subscriber that stops reading stops its own producing
//! instead of growing memory; no report is ever dropped.
//!
//! Reports arrive per batch: the report router pushes a batch's owed
//! entries for one subscription as whole chunks (`Vec`s moved, not their
//! entries) under one lock, and wakes the stream once. The stream swaps the
//! whole queue into a local buffer, so reading costs one lock per refill,
//! not per report, and builds each report only as it is read.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use futures::Stream;
use tokio::sync::Semaphore;

use crate::clock::Mono;
use crate::delivery::entry::{recycle_chunk, Pending};
use crate::delivery::settlement::Settlement;
use crate::record::Record;
use crate::report::{DeliveryReport, ReportMode};
use crate::sync::lock;

/// What a subscription's bound counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Records: one permit each.
    Records,
    /// Bytes: a record weighs its key and value bytes (its encoded copy
    /// in a batch: the producer keeps no other) plus its owed entry
    /// ([`ENTRY_BYTES`]): about what an outstanding record holds in memory.
    /// Headers are not counted: Courier may add one (`traceparent`) after
    /// the weight is taken, and a record weighs the same when its permits
    /// are taken and when they are given back.
    Bytes,
}

/// What an outstanding record holds besides its key and value: its owed
/// entry (`Pending`: its tag, its timestamps, its target).
pub(crate) const ENTRY_BYTES: usize = std::mem::size_of::<Pending>();

/// A subscription's permits for one record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Weigh {
    bytes: bool,
    /// No record takes more than this (the whole bound, and what one
    /// semaphore call can take): a record larger than the bound goes alone.
    max: usize,
}

impl Weigh {
    /// `record`'s permits.
    #[inline(always)]
    pub(crate) fn of(self, record: &Record) -> usize {
        if !self.bytes {
            return 1;
        }
        let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, bytes::Bytes::len);
        (len(&record.key) + len(&record.value) + ENTRY_BYTES).min(self.max)
    }

    /// How many of `records`, from the first, fit in `available` permits,
    /// and their permits: at least the first record (whose permits may be
    /// more than `available`, to wait for), and never more permits than
    /// one semaphore call takes.
    pub(crate) fn fit(self, records: &[Record], available: usize) -> (usize, usize) {
        let room = available.min(u32::MAX as usize);
        if !self.bytes {
            let n = room.min(records.len()).max(1);
            return (n, n);
        }
        // Usually all of them fit: one pass that only adds up, then the
        // careful one (which stops at the first that does not) only when
        // they do not. The adding pass is tried only when as many records
        // of the least weight would fit, so that a long run against a
        // small room left (a bound doing its job, `fit` called again for
        // each share of the run) is not summed whole each time; in u64,
        // so that it cannot overflow where usize is 32 bits.
        let least = self.max.clamp(1, ENTRY_BYTES);
        if records.len() <= room / least {
            let all: u64 = records.iter().map(|r| self.of(r) as u64).sum();
            if all <= room as u64 {
                return (records.len(), all as usize);
            }
        }
        let (mut count, mut permits) = (0, 0);
        for r in records {
            let w = self.of(r);
            if count > 0 && permits + w > room {
                break;
            }
            count += 1;
            permits += w;
        }
        (count, permits)
    }
}

/// Reports queued for a stream: a run of one batch's owed entries (built
/// into reports as they are read), or reports already built.
#[derive(Debug)]
pub(crate) enum ReportChunk {
    Batch {
        settlement: Arc<Settlement>,
        /// The entries, read in place: a report is built from its entry
        /// by reference (a subscription's entry owns nothing), and the
        /// vector goes back to the pool whole.
        entries: Vec<Pending>,
        /// The next entry to report; those before it have been read.
        next: usize,
        /// The last latency measured, by accepted instant.
        last: Option<(Mono, std::time::Duration)>,
        /// The subscription's permits its records hold.
        permits: usize,
    },
    Built {
        reports: std::vec::IntoIter<DeliveryReport>,
        permits: usize,
    },
}

impl Drop for ReportChunk {
    fn drop(&mut self) {
        if let ReportChunk::Batch { entries, .. } = self {
            recycle_chunk(std::mem::take(entries));
        }
    }
}

impl ReportChunk {
    /// `entries` of one batch, whose records hold `permits`.
    pub(crate) fn batch(
        settlement: Arc<Settlement>,
        entries: Vec<Pending>,
        permits: usize,
    ) -> ReportChunk {
        ReportChunk::Batch {
            settlement,
            entries,
            next: 0,
            last: None,
            permits,
        }
    }

    fn len(&self) -> usize {
        match self {
            ReportChunk::Batch { entries, next, .. } => entries.len() - next,
            ReportChunk::Built { reports, .. } => reports.len(),
        }
    }

    /// The permits its records hold (all of them, read or not: a chunk's
    /// permits go back when the stream takes it).
    fn permits(&self) -> usize {
        match self {
            ReportChunk::Batch { permits, .. } | ReportChunk::Built { permits, .. } => *permits,
        }
    }

    #[inline(always)]
    fn next_report(&mut self) -> Option<DeliveryReport> {
        match self {
            ReportChunk::Batch {
                settlement,
                entries,
                next,
                last,
                ..
            } => {
                let p = entries.get(*next)?;
                *next += 1;
                Some(settlement.report(p, last))
            }
            ReportChunk::Built { reports, .. } => reports.next(),
        }
    }
}

/// Reports of a batch a subscription does not take (successes, in
/// errors-only mode): counted as routed, their permits given back.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Skipped {
    pub records: usize,
    pub permits: usize,
}

/// Shared between the handle, the stream and the report router.
#[derive(Debug)]
pub(crate) struct SubscriptionShared {
    pub(crate) mode: ReportMode,
    queue: Mutex<VecDeque<ReportChunk>>,
    waker: AtomicWaker,
    /// Permits of reports that may still be outstanding (`weigh`).
    pub(crate) outstanding: Semaphore,
    capacity: usize,
    /// A record's permits.
    pub(crate) weigh: Weigh,
    /// Live produce-side handles; the stream ends when none are left and
    /// every report has been read.
    handles: AtomicUsize,
    /// Set when the producer is closed or dropped: no more produces.
    producer_closed: Arc<AtomicBool>,
    /// Reports ever routed here (queued or skipped), counted per batch:
    /// where a transaction's reports end in this stream.
    routed: AtomicU64,
}

impl SubscriptionShared {
    /// A subscription bounded at `capacity` (at least 1, at most what a
    /// semaphore holds) of `bound`.
    pub(crate) fn new(
        mode: ReportMode,
        bound: Bound,
        capacity: usize,
        producer_closed: Arc<AtomicBool>,
    ) -> Arc<Self> {
        let capacity = capacity.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(SubscriptionShared {
            mode,
            queue: Mutex::new(VecDeque::new()),
            waker: AtomicWaker::new(),
            outstanding: Semaphore::new(capacity),
            capacity,
            weigh: Weigh {
                bytes: bound == Bound::Bytes,
                max: capacity.min(u32::MAX as usize),
            },
            handles: AtomicUsize::new(1),
            producer_closed,
            routed: AtomicU64::new(0),
        })
    }

    /// The permits of `records`.
    pub(crate) fn weight_of(&self, records: &[Record]) -> usize {
        records.iter().map(|r| self.weigh.of(r)).sum()
    }

    /// Takes reports built outside a batch's routing (a record refused
    /// before it reached a batch, a dropped batch's), each with the
    /// permits its record took (`ReplyTo::Subscription`'s weight, or its
    /// owed entry's).
    pub(crate) fn deliver(&self, reports: Vec<(DeliveryReport, u32)>) {
        if reports.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(reports.len());
        let mut permits = 0;
        let mut skipped = Skipped::default();
        for (report, weight) in reports {
            if self.mode == ReportMode::ErrorsOnly && report.is_delivered() {
                skipped.records += 1;
                skipped.permits += weight as usize;
            } else {
                permits += weight as usize;
                kept.push(report);
            }
        }
        let chunks = if kept.is_empty() {
            Vec::new()
        } else {
            vec![ReportChunk::Built {
                reports: kept.into_iter(),
                permits,
            }]
        };
        self.take(chunks, skipped);
    }

    /// Takes one batch's share of reports for this subscription: `chunks`
    /// to queue (one lock), and `skipped` reports it does not take
    /// (successes, errors-only), which are no longer outstanding; one wake.
    pub(crate) fn take(&self, chunks: Vec<ReportChunk>, skipped: Skipped) {
        let n = chunks.iter().map(ReportChunk::len).sum::<usize>() + skipped.records;
        self.routed.fetch_add(n as u64, Ordering::AcqRel);
        if !chunks.is_empty() {
            lock(&self.queue).extend(chunks);
        }
        if skipped.permits > 0 {
            self.outstanding.add_permits(skipped.permits);
        }
        self.waker.wake();
    }

    /// Reports routed here so far.
    pub(crate) fn routed(&self) -> u64 {
        self.routed.load(Ordering::Acquire)
    }

    /// Whether this subscription wants reports of successes.
    pub(crate) fn wants_successes(&self) -> bool {
        self.mode == ReportMode::All
    }

    pub(crate) fn add_handle(&self) {
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn drop_handle(&self) {
        if self.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.waker.wake();
        }
    }

    pub(crate) fn wake(&self) {
        self.waker.wake();
    }

    /// No more records may be produced into this subscription (its stream
    /// is gone, or the producer closed): a producer waiting for the bound
    /// gets `Closed` instead of waiting for ever. Reports still due keep
    /// arriving; the stream can still read them.
    pub(crate) fn close(&self) {
        self.outstanding.close();
        self.waker.wake();
    }

    fn finished(&self) -> bool {
        (self.handles.load(Ordering::Acquire) == 0 || self.producer_closed.load(Ordering::Acquire))
            && self.outstanding.available_permits() == self.capacity
    }
}

/// The stream of one subscription's delivery reports.
///
/// It ends once every produce handle of the subscription is dropped (or the
/// producer is closed) and every report has been read.
#[derive(Debug)]
pub struct ReportStream {
    shared: Arc<SubscriptionShared>,
    /// The chunk being read, out of `local`: `poll_next` reaches its next
    /// entry without the deque's index arithmetic.
    current: Option<ReportChunk>,
    /// Chunks taken from the shared queue, not read yet.
    local: VecDeque<ReportChunk>,
}

/// Nobody will read these reports: producing into the subscription stops
/// (`Closed`), rather than waiting for ever on a bound no reader frees.
impl Drop for ReportStream {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl ReportStream {
    pub(crate) fn new(shared: Arc<SubscriptionShared>) -> Self {
        ReportStream {
            shared,
            current: None,
            local: VecDeque::new(),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<SubscriptionShared> {
        &self.shared
    }

    fn refill(&mut self) -> bool {
        let mut q = lock(&self.shared.queue);
        if q.is_empty() {
            return false;
        }
        std::mem::swap(&mut *q, &mut self.local);
        drop(q);
        let n = self.local.iter().map(ReportChunk::permits).sum();
        self.shared.outstanding.add_permits(n);
        true
    }

    /// Ready(true) once `local` holds an unread report; Ready(false) when
    /// the stream has ended.
    fn poll_filled(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        while self.local.front().is_some_and(|c| c.len() == 0) {
            self.local.pop_front();
        }
        if !self.local.is_empty() || self.refill() {
            return Poll::Ready(true);
        }
        self.shared.waker.register(cx.waker());
        if self.refill() {
            return Poll::Ready(true);
        }
        if self.shared.finished() {
            // A report may have landed between the check and `finished`.
            return Poll::Ready(self.refill());
        }
        Poll::Pending
    }
}

impl ReportStream {
    /// The next report taken from the shared queue and not read yet.
    #[inline(always)]
    fn next_local(&mut self) -> Option<DeliveryReport> {
        if let Some(r) = self.current.as_mut().and_then(ReportChunk::next_report) {
            return Some(r);
        }
        self.next_chunk()
    }

    /// `current` has run out: the next chunk of `local` becomes current
    /// (the one run out is dropped, its entries recycled).
    #[inline(never)]
    fn next_chunk(&mut self) -> Option<DeliveryReport> {
        while let Some(c) = self.local.pop_front() {
            if let Some(r) = self.current.insert(c).next_report() {
                return Some(r);
            }
        }
        self.current = None;
        None
    }
}

/// The next report in `chunks`, dropping chunks as they run out.
#[inline(always)]
fn next_of(chunks: &mut VecDeque<ReportChunk>) -> Option<DeliveryReport> {
    while let Some(chunk) = chunks.front_mut() {
        if let Some(r) = chunk.next_report() {
            return Some(r);
        }
        chunks.pop_front();
    }
    None
}

impl ReportStream {
    /// Every report that has arrived and not been read yet, as one batch,
    /// waiting for at least one; `None` when the stream has ended.
    ///
    /// Reading a batch at a time is cheaper than report by report: one
    /// wake-up and one lock per batch, and each report is built straight
    /// into the caller's hands.
    pub async fn next_batch(&mut self) -> Option<ReportBatch> {
        futures::future::poll_fn(|cx| self.poll_next_batch(cx)).await
    }

    /// The polling form of [`next_batch`](Self::next_batch).
    pub fn poll_next_batch(&mut self, cx: &mut Context<'_>) -> Poll<Option<ReportBatch>> {
        // A chunk `poll_next` was reading goes first.
        if let Some(c) = self.current.take() {
            if c.len() > 0 {
                self.local.push_front(c);
            }
        }
        match self.poll_filled(cx) {
            Poll::Ready(true) => Poll::Ready(Some(ReportBatch {
                chunks: std::mem::take(&mut self.local),
            })),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Reports read together by [`ReportStream::next_batch`]; iterate it for
/// the reports, in the order the stream would have given them. They count
/// as read once the batch is handed out: dropping it part-way drops the
/// reports not yet iterated.
#[derive(Debug)]
pub struct ReportBatch {
    chunks: VecDeque<ReportChunk>,
}

impl Iterator for ReportBatch {
    type Item = DeliveryReport;

    #[inline]
    fn next(&mut self) -> Option<DeliveryReport> {
        next_of(&mut self.chunks)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.chunks.iter().map(ReportChunk::len).sum();
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReportBatch {}

impl Stream for ReportStream {
    type Item = DeliveryReport;

    // Inlined into the reading loop: the report is built in the caller's
    // frame. Refilling, once per batch of reports, is not.
    #[inline]
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<DeliveryReport>> {
        if let Some(r) = self.next_local() {
            return Poll::Ready(Some(r));
        }
        self.poll_refilled(cx)
    }
}

impl ReportStream {
    /// `poll_next` once `local` has run out.
    #[inline(never)]
    fn poll_refilled(&mut self, cx: &mut Context<'_>) -> Poll<Option<DeliveryReport>> {
        match self.poll_filled(cx) {
            Poll::Ready(true) => Poll::Ready(self.next_local()),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's weight in bytes: its key and value plus its owed entry
    /// (64 bytes, as the docs say), at most the whole bound;
    /// in records, one. `fit` takes the longest run that fits, and at
    /// least one record.
    #[test]
    fn records_weigh_their_bytes_and_runs_fit_the_room_left() {
        assert_eq!(
            ENTRY_BYTES, 64,
            "an owed entry is small: it holds no record"
        );
        let bytes = Weigh {
            bytes: true,
            max: 10_000,
        };
        let r = Record::to("t").key("k").value(vec![0u8; 99]);
        assert_eq!(bytes.of(&r), 100 + ENTRY_BYTES);
        let huge = Record::to("t").value(vec![0u8; 1 << 20]);
        assert_eq!(bytes.of(&huge), 10_000, "never more than the bound");
        let run = vec![r.clone(); 10];
        let w = 100 + ENTRY_BYTES;
        assert_eq!(bytes.fit(&run, 3 * w + 1), (3, 3 * w));
        assert_eq!(bytes.fit(&run, 0), (1, w), "the first, to wait for");
        assert_eq!(bytes.fit(&run, usize::MAX), (10, 10 * w));
        // A room that only some fit (the adding pass finds too much, or is
        // not tried): the careful pass decides.
        assert_eq!(bytes.fit(&run, 10 * w - 1), (9, 9 * w));
        assert_eq!(bytes.fit(&run, 9 * ENTRY_BYTES), (3, 3 * w));
        let long = vec![r.clone(); 100_000];
        assert_eq!(bytes.fit(&long, 2 * w), (2, 2 * w));
        let records = Weigh {
            bytes: false,
            max: 10_000,
        };
        assert_eq!(records.of(&huge), 1);
        assert_eq!(records.fit(&run, 4), (4, 4));
        assert_eq!(records.fit(&run, 0), (1, 1));
    }
}
