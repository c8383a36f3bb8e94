//! [`Subscriber`]: produces into one subscription, whose reports go to
//! that subscription's `ReportStream` and nowhere else. It holds the
//! subscription's bound on outstanding reports: a record takes its
//! permits (one, or its weight in bytes) until its report is read.

use std::sync::Arc;

use crate::delivery::owed::ReplyTo;
use crate::delivery::subscription::ReportStream;
use crate::delivery::subscription::{Bound, SubscriptionShared};
use crate::engine::enqueue::{Enqueued, FirstTry, Resume, RunEnd, SnapshotCache};
use crate::engine::error::{BatchRejected, ProduceError};
use crate::producer::handle::Producer;
use crate::record::Record;
use crate::report::ReportMode;

/// The bound of a subscription made with [`Producer::subscribe`]: 16 MiB
/// of outstanding reports, weighed as
/// [`Producer::subscribe_with_memory`] says (about 100,000 records of
/// 100 bytes; 16 of 1 MB).
pub const DEFAULT_REPORT_MEMORY: usize = 16 << 20;

/// Produces into one subscription. Clone it to share the subscription.
///
/// Each handle (each clone) keeps its own view of the cluster's metadata,
/// so that its produce calls find a topic's partitions without a shared
/// load: it holds the metadata it last produced with until its next
/// produce call or its drop (an idle handle keeps at most one superseded
/// copy alive). A handle shared by several threads at once (in an `Arc`)
/// works, each call that finds the view in use reading the shared
/// metadata instead; a clone per task or thread is cheaper.
#[derive(Debug)]
pub struct Subscriber {
    producer: Producer,
    shared: Arc<SubscriptionShared>,
    /// This handle's metadata snapshot, for `produce`.
    snapshot: SnapshotCache,
}

impl Producer {
    /// A new subscription: records produced through the returned
    /// [`Subscriber`] report to the returned stream, and only there.
    ///
    /// Its bound is on the memory of outstanding reports:
    /// [`DEFAULT_REPORT_MEMORY`] (16 MiB) of records produced through the
    /// subscription whose reports are not read yet, weighed as
    /// [`subscribe_with_memory`](Self::subscribe_with_memory) explains:
    /// about 100,000 records of 100 bytes, or 16 of 1 MB.
    pub fn subscribe(&self, mode: ReportMode) -> (Subscriber, ReportStream) {
        self.subscribe_with_memory(mode, DEFAULT_REPORT_MEMORY)
    }

    /// A new subscription bounded by the memory its outstanding reports
    /// hold: at most `bytes` of records produced through it whose reports
    /// are not read yet. A record weighs its key and value bytes (its
    /// encoded copy in a batch: a success report does not carry the record,
    /// and the producer keeps no other copy) plus its owed entry (64 bytes;
    /// headers are not counted), from when it is produced until its report is read, or, with
    /// [`ReportMode::ErrorsOnly`], until it is delivered (it has no
    /// report). Producing waits while the bound is reached. A record
    /// heavier than the whole bound is produced alone.
    ///
    /// The bound holds records in flight as well as reports not yet read:
    /// records spread over many partitions need room for a batch's worth
    /// in each (with `ErrorsOnly`, during an outage it fills with records
    /// still queued, and producing waits although no report is waiting to
    /// be read). librdkafka bounds the same span (a record from produce
    /// until its delivery report is served) at 100,000 records and 1 GiB.
    pub fn subscribe_with_memory(
        &self,
        mode: ReportMode,
        bytes: usize,
    ) -> (Subscriber, ReportStream) {
        self.subscription(mode, Bound::Bytes, bytes)
    }

    /// A new subscription bounded at `capacity` outstanding reports,
    /// counted in records whatever their size (at least 1; larger than
    /// tokio's semaphore can count is clamped to
    /// `tokio::sync::Semaphore::MAX_PERMITS`); otherwise as
    /// [`subscribe_with_memory`](Self::subscribe_with_memory).
    pub fn subscribe_with_capacity(
        &self,
        mode: ReportMode,
        capacity: usize,
    ) -> (Subscriber, ReportStream) {
        self.subscription(mode, Bound::Records, capacity)
    }

    fn subscription(
        &self,
        mode: ReportMode,
        bound: Bound,
        capacity: usize,
    ) -> (Subscriber, ReportStream) {
        let shared = SubscriptionShared::new(mode, bound, capacity, self.engine.closed_flag());
        self.engine.register_subscription(&shared);
        (
            Subscriber {
                producer: self.clone(),
                shared: shared.clone(),
                snapshot: SnapshotCache::of(&self.engine),
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
            snapshot: SnapshotCache::of(&self.producer.engine),
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
        match self.produce_first(record) {
            FirstTry::Now(r) => r,
            FirstTry::Later(slow) => slow.await,
        }
    }

    /// The first, synchronous try of [`produce`](Self::produce); `Later`
    /// is the rest, for when it must wait for an outstanding-report
    /// permit, metadata or memory.
    #[inline(always)]
    fn produce_first(&self, mut record: Record) -> FirstTry<'_> {
        use tokio::sync::TryAcquireError;
        self.producer.engine.on_send(&mut record);
        let weight = self.shared.weigh.of(&record);
        match self.shared.outstanding.try_acquire_many(weight as u32) {
            // Kept taken: `Permits` below gives them back if the record is
            // not accepted. (`mem::forget` skips the permit's drop, which
            // would give them back, as its `forget` does, without the
            // call into tokio that cannot be inlined.)
            Ok(p) => std::mem::forget(p),
            Err(TryAcquireError::Closed) => {
                return FirstTry::Now(Err(ProduceError::Closed(Box::new(record))))
            }
            Err(TryAcquireError::NoPermits) => {
                return FirstTry::Later(Box::pin(async move {
                    let engine = &self.producer.engine;
                    let outstanding = &self.shared.outstanding;
                    match engine
                        .starved(outstanding.acquire_many(weight as u32))
                        .await
                    {
                        Ok(p) => p.forget(),
                        Err(_) => return Err(ProduceError::Closed(Box::new(record))),
                    }
                    self.produce_with_permit(record, weight).await
                }))
            }
        }
        // Until the record is accepted, the permits are ours to give back,
        // also if the future is dropped mid-way.
        let permit = Permits::of(&self.shared, weight);
        let engine = &self.producer.engine;
        let reply = Some(ReplyTo::Subscription(&self.shared, weight as u32));
        let mut resume = Resume::default();
        let first = engine.enqueue_cached(record, reply, true, &mut resume, Some(&self.snapshot));
        resume.finish();
        match first {
            Enqueued::Appended(_) | Enqueued::Reported => FirstTry::Now(permit.settle(Ok(()))),
            Enqueued::Refused(e) => FirstTry::Now(permit.settle(Err(e))),
            Enqueued::Wait(slow) => FirstTry::Later(Box::pin(async move {
                permit.settle(engine.enqueue_slow(slow).await)
            })),
        }
    }

    /// Produces with the record's `weight` of outstanding-report permits
    /// already taken.
    async fn produce_with_permit(&self, record: Record, weight: usize) -> Result<(), ProduceError> {
        let permit = Permits::of(&self.shared, weight);
        let r = self
            .producer
            .engine
            .enqueue(
                record,
                Some(ReplyTo::Subscription(&self.shared, weight as u32)),
                true,
            )
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
    /// # async fn demo(producer: courier_kafka::Producer) {
    /// use courier_kafka::{Record, ReportMode};
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
    pub async fn produce_batch(&self, mut records: Vec<Record>) -> Result<(), BatchRejected> {
        let engine = &self.producer.engine;
        engine.on_send_all(&mut records);
        let shared = &*self.shared;
        let outstanding = &shared.outstanding;
        let weigh = shared.weigh;
        let mut rest = records.into_iter();
        let mut taken = 0;
        while rest.len() > 0 {
            // Permits for as many of the next records as the bound allows
            // now, or wait for the next one's.
            let (count, permits) = weigh.fit(rest.as_slice(), outstanding.available_permits());
            let (mut budget, permits) = match outstanding.try_acquire_many(permits as u32) {
                Ok(p) => {
                    p.forget();
                    (count, permits)
                }
                Err(tokio::sync::TryAcquireError::Closed) => {
                    let first = rest.next().expect("not empty");
                    return Err(BatchRejected::new(
                        taken,
                        ProduceError::Closed(Box::new(first)),
                        rest,
                    ));
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => {
                    let w = weigh.of(&rest.as_slice()[0]);
                    match engine.starved(outstanding.acquire_many(w as u32)).await {
                        Ok(p) => {
                            p.forget();
                            (1, w)
                        }
                        Err(_) => {
                            let first = rest.next().expect("not empty");
                            return Err(BatchRejected::new(
                                taken,
                                ProduceError::Closed(Box::new(first)),
                                rest,
                            ));
                        }
                    }
                }
            };
            // Permits not used by a taken record go back when this drops.
            let mut held = Permits {
                shared,
                count: permits,
            };
            let end = engine.place_run(&mut rest, Some(&self.shared), &mut budget, &mut taken);
            // The run's records not taken, `budget` of them (the one a
            // failure or a wait holds, then the front of `rest`), keep
            // their permits in `held`; the taken ones' reports return theirs.
            let front = |n: usize, rest: &std::vec::IntoIter<Record>| {
                shared.weight_of(&rest.as_slice()[..n.min(rest.len())])
            };
            let slow = match end {
                RunEnd::Done => {
                    held.count = front(budget, &rest);
                    continue;
                }
                RunEnd::Failed(reason) => {
                    held.count = weigh.of(reason.record()) + front(budget - 1, &rest);
                    drop(held);
                    return Err(BatchRejected::new(taken, reason, rest));
                }
                RunEnd::Wait(slow) => slow,
            };
            let w = weigh.of(slow.record());
            held.count = w + front(budget - 1, &rest);
            match engine.enqueue_slow(slow).await {
                Ok(()) => {
                    held.count -= w;
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
    pub fn try_produce(&self, mut record: Record) -> Result<(), ProduceError> {
        self.producer.engine.on_send(&mut record);
        let weight = self.shared.weigh.of(&record);
        let Ok(permit) = self.shared.outstanding.try_acquire_many(weight as u32) else {
            return Err(ProduceError::QueueFull(Box::new(record)));
        };
        permit.forget();
        let permit = Permits::of(&self.shared, weight);
        let reply = Some(ReplyTo::Subscription(&self.shared, weight as u32));
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
    /// The permits of one record, `weight` of them.
    fn of(shared: &'a SubscriptionShared, weight: usize) -> Self {
        Permits {
            shared,
            count: weight,
        }
    }

    /// The one record's outcome: accepted keeps the permits (its report
    /// will return them), refused gives them back.
    fn settle(mut self, r: Result<(), ProduceError>) -> Result<(), ProduceError> {
        if r.is_ok() {
            self.count = 0;
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
