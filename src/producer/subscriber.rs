//! [`Subscriber`]: produces into one subscription, whose reports go to
//! that subscription's `ReportStream` and nowhere else. It holds the
//! subscription's bound on outstanding reports: a permit per record until
//! its report is read.

use std::sync::Arc;

use crate::delivery::owed::ReplyTo;
use crate::delivery::subscription::ReportStream;
use crate::delivery::subscription::SubscriptionShared;
use crate::engine::enqueue::{Resume, RunEnd, SlowProduce};
use crate::engine::error::{BatchRejected, ProduceError};
use crate::producer::handle::Producer;
use crate::record::Record;
use crate::report::ReportMode;

/// Produces into one subscription. Clone it to share the subscription.
#[derive(Debug)]
pub struct Subscriber {
    producer: Producer,
    shared: Arc<SubscriptionShared>,
}

impl Producer {
    /// A new subscription: records produced through the returned
    /// [`Subscriber`] report to the returned stream, and only there.
    ///
    /// The bound (10,000 here) counts records produced through the
    /// subscription that still hold a permit: a record takes one when it is
    /// produced and gives it back when its report is read, or, with
    /// [`ReportMode::ErrorsOnly`], as soon as it is delivered (it has no
    /// report). So with `ErrorsOnly` the bound is on records whose outcome
    /// is not known yet plus unread failures: during an outage it fills
    /// with records still in flight or queued, and producing waits although
    /// no report is waiting to be read. Size it for as many records as may
    /// be in flight at once.
    pub fn subscribe(&self, mode: ReportMode) -> (Subscriber, ReportStream) {
        self.subscribe_with_capacity(mode, 10_000)
    }

    /// [`subscribe`](Self::subscribe) with a chosen bound on outstanding
    /// reports (at least 1; larger than tokio's semaphore can count is
    /// clamped to `tokio::sync::Semaphore::MAX_PERMITS`).
    pub fn subscribe_with_capacity(
        &self,
        mode: ReportMode,
        capacity: usize,
    ) -> (Subscriber, ReportStream) {
        // tokio's semaphore holds at most MAX_PERMITS.
        let capacity = capacity.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        let shared = SubscriptionShared::new(mode, capacity, self.engine.closed.clone());
        self.engine.register_subscription(&shared);
        (
            Subscriber {
                producer: self.clone(),
                shared: shared.clone(),
            },
            ReportStream::new(shared),
        )
    }
}

impl Clone for Subscriber {
    fn clone(&self) -> Self {
        self.shared.add_handle();
        Subscriber {
            producer: self.producer.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.drop_handle();
    }
}

impl Subscriber {
    /// Produces `record`; its report goes to this subscription's stream.
    /// Waits while the subscription's outstanding-report bound is reached.
    pub async fn produce(&self, record: Record) -> Result<(), ProduceError> {
        // Everything that may wait is boxed, so this future (which callers
        // build and move once per record) holds little more than the record.
        let slow = match self.produce_first(record) {
            Ok(r) => return r,
            Err(slow) => slow,
        };
        slow.await
    }

    /// The first, synchronous try of [`produce`](Self::produce); `Err` is
    /// the rest, for when it must wait for an outstanding-report permit,
    /// metadata or memory.
    #[inline(always)]
    fn produce_first(&self, record: Record) -> Result<Result<(), ProduceError>, SlowProduce<'_>> {
        use tokio::sync::TryAcquireError;
        match self.shared.outstanding.try_acquire() {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Ok(Err(ProduceError::Closed(record))),
            Err(TryAcquireError::NoPermits) => {
                return Err(Box::pin(async move {
                    let engine = &self.producer.engine;
                    match engine.starved(self.shared.outstanding.acquire()).await {
                        Ok(p) => p.forget(),
                        Err(_) => return Err(ProduceError::Closed(record)),
                    }
                    self.produce_with_permit(record).await
                }))
            }
        }
        // Until the record is accepted, the permit is ours to give back,
        // also if the future is dropped mid-way.
        let permit = Permits::one(&self.shared);
        let engine = &self.producer.engine;
        let reply = Some(ReplyTo::Subscription(&self.shared));
        match engine.enqueue_now(record, reply, true, &mut Resume::default()) {
            Ok(r) => Ok(permit.settle(r)),
            Err(slow) => Err(Box::pin(async move {
                permit.settle(engine.enqueue_slow(slow).await)
            })),
        }
    }

    /// Produces with an outstanding-report permit already taken.
    async fn produce_with_permit(&self, record: Record) -> Result<(), ProduceError> {
        let permit = Permits::one(&self.shared);
        let r = self
            .producer
            .engine
            .enqueue(record, Some(ReplyTo::Subscription(&self.shared)), true)
            .await;
        permit.settle(r)
    }

    /// Produces every record of `records`, in order; each gets its report
    /// on this subscription's stream, as from [`produce`](Self::produce).
    ///
    /// Cheaper per record than `produce` in a loop: outstanding-report
    /// permits are taken for as many records at once as the bound allows,
    /// and the metadata snapshot, the clock and the topic lookup are done
    /// once per run instead of once per record. Waits, as `produce` does,
    /// for the bound, metadata and memory.
    ///
    /// ```no_run
    /// # async fn demo(producer: courier::Producer) {
    /// use courier::{Record, ReportMode};
    /// use futures::StreamExt;
    ///
    /// let (sub, mut reports) = producer.subscribe(ReportMode::All);
    /// let records = (0..1000).map(|i| Record::to("events").value(format!("{i}"))).collect();
    /// sub.produce_batch(records).await.unwrap();
    /// drop(sub);
    /// // Reports can be read one by one, or all that have arrived at once.
    /// while let Some(batch) = reports.next_batch().await {
    ///     for report in batch {
    ///         assert!(report.is_delivered());
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn produce_batch(&self, records: Vec<Record>) -> Result<(), BatchRejected> {
        let engine = &self.producer.engine;
        let outstanding = &self.shared.outstanding;
        let mut rest = records.into_iter();
        let mut taken = 0;
        while rest.len() > 0 {
            // Permits for as many records as the bound allows now, or wait
            // for one.
            let want = outstanding
                .available_permits()
                .min(rest.len())
                .clamp(1, u32::MAX as usize);
            let got = match outstanding.try_acquire_many(want as u32) {
                Ok(p) => {
                    p.forget();
                    want
                }
                Err(tokio::sync::TryAcquireError::Closed) => {
                    let first = rest.next().expect("not empty");
                    return Err(BatchRejected::new(taken, ProduceError::Closed(first), rest));
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => match engine
                    .starved(outstanding.acquire())
                    .await
                {
                    Ok(p) => {
                        p.forget();
                        1
                    }
                    Err(_) => {
                        let first = rest.next().expect("not empty");
                        return Err(BatchRejected::new(taken, ProduceError::Closed(first), rest));
                    }
                },
            };
            // Permits not used by a taken record go back when this drops.
            let mut held = Permits {
                shared: &self.shared,
                count: got,
            };
            let slow = match engine.place_run(
                &mut rest,
                Some(&self.shared),
                &mut held.count,
                &mut taken,
            ) {
                RunEnd::Done => continue,
                RunEnd::Failed(reason) => {
                    drop(held);
                    return Err(BatchRejected::new(taken, reason, rest));
                }
                RunEnd::Wait(slow) => engine.enqueue_slow(slow),
            };
            match slow.await {
                Ok(()) => {
                    held.count -= 1;
                    taken += 1;
                }
                Err(reason) => {
                    drop(held);
                    return Err(BatchRejected::new(taken, reason, rest));
                }
            }
        }
        Ok(())
    }

    /// Like [`produce`](Self::produce) but never waits; `QueueFull` when
    /// the subscription's bound, `buffer.memory` or
    /// `queue.buffering.max.messages` is reached.
    pub fn try_produce(&self, record: Record) -> Result<(), ProduceError> {
        let Ok(permit) = self.shared.outstanding.try_acquire() else {
            return Err(ProduceError::QueueFull(record));
        };
        permit.forget();
        let permit = Permits::one(&self.shared);
        let reply = Some(ReplyTo::Subscription(&self.shared));
        permit.settle(self.producer.engine.try_enqueue(record, reply))
    }

    /// The producer this subscription belongs to.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }
}

/// Outstanding-report permits taken for records not yet accepted; dropping
/// returns them and wakes the stream, which may now be finished.
struct Permits<'a> {
    shared: &'a SubscriptionShared,
    count: usize,
}

impl<'a> Permits<'a> {
    /// The permit of one record.
    fn one(shared: &'a SubscriptionShared) -> Self {
        Permits { shared, count: 1 }
    }

    /// The one record's outcome: accepted keeps the permit (its report
    /// will return it), refused gives it back.
    fn settle(mut self, r: Result<(), ProduceError>) -> Result<(), ProduceError> {
        if r.is_ok() {
            self.count -= 1;
        }
        r
    }
}

impl Drop for Permits<'_> {
    fn drop(&mut self) {
        if self.count > 0 {
            self.shared.outstanding.add_permits(self.count);
            self.shared.wake();
        }
    }
}
