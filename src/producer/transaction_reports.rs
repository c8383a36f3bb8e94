//! A subscription whose reports wait for their transaction's end and say
//! whether it committed (`Producer::subscribe_transactional`).
//!
//! Every report of a transaction is routed before the transaction ends
//! (commit and abort flush first), and no record of the next transaction
//! exists until it has ended; so when a transaction ends, the reports this
//! subscription has been routed so far (`SubscriptionShared::routed`) are
//! exactly those of the ended transactions. The end is announced to the
//! stream with that count (`Transactions::on_end`), and the stream releases
//! the reports it holds up to it, each marked committed or aborted.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use futures::Stream;

use crate::delivery::subscription::{ReportStream, SubscriptionShared};
use crate::producer::handle::Producer;
use crate::producer::subscriber::Subscriber;
use crate::report::{Delivered, DeliveryReport, ReportMode};
use crate::sync::lock;
use crate::transaction::{Ending, TransactionError};

/// A record's report once its transaction has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionReport {
    /// Written, and its transaction committed: read_committed consumers
    /// see it.
    Committed(Delivered),
    /// Its transaction was aborted (or the producer fenced): read_committed
    /// consumers never see it. The report says whether it had been
    /// written (`Delivered`, then aborted: as any success report, where it
    /// went and its tag, not the record) or failed (the record handed
    /// back).
    Aborted(DeliveryReport),
    /// The commit's outcome is unknown to the producer: it was closed
    /// (`close_timeout` ran out, or the last handle was dropped) after its
    /// EndTxn(commit) was sent and before the coordinator answered, or the
    /// answer was fatal (fenced, or an error no rule names) after the
    /// commit was sent. The coordinator decided; a read_committed consumer
    /// tells.
    Unresolved(DeliveryReport),
}

impl TransactionReport {
    /// Whether the record is committed.
    pub fn is_committed(&self) -> bool {
        matches!(self, TransactionReport::Committed(_))
    }
}

/// Transaction ends not yet applied: (reports routed when it ended, how it
/// ended); `u64::MAX` covers every report (fenced, or closed).
#[derive(Debug, Default)]
struct Ends {
    queue: Mutex<VecDeque<(u64, Ending)>>,
    waker: AtomicWaker,
}

/// The stream of [`TransactionReport`]s of one transactional subscription.
/// It holds each report until its transaction ends (so its memory grows
/// with the transaction), and ends when the subscription's reports have
/// all been released.
#[derive(Debug)]
pub struct TransactionReports {
    inner: ReportStream,
    ends: Arc<Ends>,
    /// Reports read from `inner` (held or released).
    read: u64,
    held: VecDeque<DeliveryReport>,
    inner_done: bool,
}

impl Producer {
    /// A subscription (as [`subscribe`](Self::subscribe) with
    /// `ReportMode::All`) whose reports wait for their transaction to end
    /// and say whether it committed: a subscriber that acts on a
    /// [`TransactionReport::Committed`] never acts on data a read_committed
    /// consumer will not see. Only for a transactional producer.
    pub fn subscribe_transactional(
        &self,
    ) -> Result<(Subscriber, TransactionReports), TransactionError> {
        let txn = self
            .engine
            .txn()
            .ok_or(TransactionError::NotTransactional)?;
        let (sub, stream) = self.subscribe(ReportMode::All);
        let ends = Arc::new(Ends::default());
        let weak_ends: Weak<Ends> = Arc::downgrade(&ends);
        let weak_shared: Weak<SubscriptionShared> = Arc::downgrade(stream.shared());
        txn.on_end(Box::new(move |how, everything| {
            let (Some(ends), Some(shared)) = (weak_ends.upgrade(), weak_shared.upgrade()) else {
                return false;
            };
            let upto = if everything {
                u64::MAX
            } else {
                shared.routed()
            };
            lock(&ends.queue).push_back((upto, how));
            ends.waker.wake();
            true
        }));
        Ok((
            sub,
            TransactionReports {
                inner: stream,
                ends,
                read: 0,
                held: VecDeque::new(),
                inner_done: false,
            },
        ))
    }
}

impl Stream for TransactionReports {
    type Item = TransactionReport;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<TransactionReport>> {
        let this = &mut *self;
        loop {
            // Release the oldest held report if its transaction has ended.
            if !this.held.is_empty() {
                let released = this.read - this.held.len() as u64;
                let mut ends = lock(&this.ends.queue);
                while ends.front().is_some_and(|(upto, _)| *upto <= released) {
                    ends.pop_front();
                }
                if let Some(&(_, how)) = ends.front() {
                    drop(ends);
                    let r = this.held.pop_front().expect("not empty");
                    return Poll::Ready(Some(match (how, r) {
                        (Ending::Committed, DeliveryReport::Delivered(d)) => {
                            TransactionReport::Committed(d)
                        }
                        (Ending::Unknown, r @ DeliveryReport::Delivered(_)) => {
                            TransactionReport::Unresolved(r)
                        }
                        (_, r) => TransactionReport::Aborted(r),
                    }));
                }
            }
            if this.inner_done {
                if this.held.is_empty() {
                    return Poll::Ready(None);
                }
                // The transaction of the held reports has not ended yet.
                this.ends.waker.register(cx.waker());
                if !lock(&this.ends.queue).is_empty() {
                    continue;
                }
                return Poll::Pending;
            }
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(r)) => {
                    this.read += 1;
                    this.held.push_back(r);
                }
                Poll::Ready(None) => this.inner_done = true,
                Poll::Pending => {
                    this.ends.waker.register(cx.waker());
                    if this.held.is_empty() || lock(&this.ends.queue).is_empty() {
                        return Poll::Pending;
                    }
                    // An end arrived: release what it covers.
                    let released = this.read - this.held.len() as u64;
                    let covered = lock(&this.ends.queue)
                        .iter()
                        .any(|(upto, _)| *upto > released);
                    if !covered {
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}
