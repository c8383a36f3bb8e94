//! [`Producer`]: the cheap-to-clone handle over the shared engine.
//!
//! Its produce calls run the engine's produce path on the caller's thread
//! (no actor hop per record); it reaches the actor tree only to stop it
//! and for the supervisor's address (`Producer::actor`). The builder and
//! subscriptions add their methods to `Producer` in their own files.

#[cfg(feature = "fault-injection")]
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use tokio::sync::oneshot;

use crate::actors::addresses::Addresses;
use crate::actors::msgs::Shutdown;
#[cfg(feature = "fault-injection")]
use crate::actors::msgs::{InjectPanic, InjectResponsePanic};
use crate::actors::supervisor::ProducerSupervisor;
use crate::delivery::owed::ReplyTo;
use crate::engine::enqueue::{Enqueued, Resume, RunEnd};
use crate::engine::error::{BatchRejected, ProduceError, TimedOut};
use crate::engine::Engine;
use crate::record::Record;
use crate::report::{Delivered, DeliveryError, DeliveryReport, ErrorKind};
use crate::stats::StatsSnapshot;
use crate::transaction::TransactionError;

/// Cancels everything when the last handle goes.
struct HandleGuard {
    engine: Arc<Engine>,
    supervisor: Addr<ProducerSupervisor>,
}

impl Drop for HandleGuard {
    fn drop(&mut self) {
        self.engine.close_intake();
        self.engine.announce_unfinished();
        // Unless a `close` already sent its Shutdown (a `close` whose future
        // was dropped half-way has not: the actor tree must still stop).
        if self.engine.claim_shutdown() {
            self.supervisor.do_send(Shutdown { cancel: true });
        }
    }
}

/// A Kafka producer. Clone it freely: clones share one set of connections,
/// batches and actors. When the last clone (and subscriber) is dropped,
/// every record not yet acknowledged gets a `Cancelled` report.
#[derive(Clone)]
pub struct Producer {
    pub(crate) engine: Arc<Engine>,
    pub(crate) addresses: Arc<Addresses>,
    supervisor: Addr<ProducerSupervisor>,
    _guard: Arc<HandleGuard>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").finish_non_exhaustive()
    }
}

/// The report of a record [`Producer::submit`] took: resolves once the
/// record is delivered or has failed.
#[derive(Debug)]
#[must_use = "the report arrives whether or not it is awaited; drop it to ignore it"]
pub struct DeliveryFuture(oneshot::Receiver<DeliveryReport>);

impl DeliveryFuture {
    /// Polls for the report itself.
    pub(crate) fn poll_report(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<DeliveryReport> {
        std::future::Future::poll(std::pin::Pin::new(&mut self.0), cx).map(|r| match r {
            Ok(report) => report,
            // The router always answers an accepted record.
            Err(_) => panic!("courier: a delivery report was lost; this is a bug"),
        })
    }
}

impl std::future::Future for DeliveryFuture {
    type Output = Result<Delivered, DeliveryError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.poll_report(cx).map(DeliveryReport::into_result)
    }
}

impl Producer {
    pub(crate) fn from_parts(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        supervisor: Addr<ProducerSupervisor>,
    ) -> Producer {
        Producer {
            _guard: Arc::new(HandleGuard {
                engine: engine.clone(),
                supervisor: supervisor.clone(),
            }),
            engine,
            addresses,
            supervisor,
        }
    }

    /// Produces `record` with its one report going to `reply_to`, with no
    /// hop through the producer's actor (unlike the `Produce` message).
    /// Waits for metadata and buffer room; `Err` hands the record back
    /// unaccepted (no report then).
    ///
    /// Keep the receiving actor alive (hold its `Addr`) until its reports
    /// are in. Courier holds a `reply_to` per record until it reports, but
    /// actix stops an actor whose last sender is dropped, at its next poll,
    /// even when a message sent just before that is not yet taken: an
    /// actor kept alive only by its pending reports can lose the last ones
    /// (seen under load in `tests/report_isolation.rs`).
    pub async fn produce_to(
        &self,
        mut record: Record,
        reply_to: actix::Recipient<DeliveryReport>,
    ) -> Result<(), ProduceError> {
        self.engine.on_send(&mut record);
        self.engine
            .enqueue(record, Some(ReplyTo::Actor(reply_to)), true)
            .await
    }

    /// Produces `record` and waits for its delivery report.
    pub async fn send(&self, record: Record) -> Result<Delivered, DeliveryError> {
        let (tx, rx) = oneshot::channel();
        // The waiting part of enqueue is boxed (`enqueue_slow`), so a `send`
        // future waiting for its report stays small, which matters to
        // callers holding many of them at once.
        // A refusal is this call's report: the interceptors see it too.
        let cancelled = |e: ProduceError| {
            self.engine.refusal_report(DeliveryError {
                kind: match e {
                    ProduceError::NoTransaction(_) => ErrorKind::Aborted,
                    _ => ErrorKind::Cancelled,
                },
                message: e.to_string(),
                partition: None,
                attempts: 0,
                record: Box::new(e.into_record()),
            })
        };
        // Only a 16-byte box is held across the await, not the first try's
        // result (which holds a record).
        if let Some(slow) = self.take_reporting_to(record, tx).map_err(cancelled)? {
            slow.await.map_err(cancelled)?;
        }
        match rx.await {
            Ok(report) => report.into_result(),
            // The router always answers an accepted record; a dropped
            // sender would be a bug, reported loudly rather than hung on.
            Err(_) => panic!("courier: a delivery report was lost; this is a bug"),
        }
    }

    /// Produces `record` in two steps: this returns once the producer has
    /// taken it (after any wait for metadata or memory), and the returned
    /// [`DeliveryFuture`] resolves to its report (rdkafka's `send_result`).
    /// For callers that must know a record is in before they go on, say
    /// before `commit_transaction`; `Err` hands the record back untaken.
    pub async fn submit(&self, record: Record) -> Result<DeliveryFuture, ProduceError> {
        let (tx, rx) = oneshot::channel();
        if let Some(slow) = self.take_reporting_to(record, tx)? {
            slow.await?;
        }
        Ok(DeliveryFuture(rx))
    }

    /// The first, synchronous try at taking `record` with its report going
    /// to `tx`; `Ok(Some(..))`: what is left to wait for (metadata,
    /// memory), boxed so that a caller's future stays small.
    fn take_reporting_to(
        &self,
        mut record: Record,
        tx: oneshot::Sender<DeliveryReport>,
    ) -> Result<Option<crate::engine::enqueue::SlowProduce<'_>>, ProduceError> {
        self.engine.on_send(&mut record);
        match self.engine.enqueue_now(
            record,
            Some(ReplyTo::Oneshot(tx)),
            true,
            &mut Resume::default(),
        ) {
            Enqueued::Appended(_) | Enqueued::Reported => Ok(None),
            Enqueued::Refused(e) => Err(e),
            Enqueued::Wait(slow) => Ok(Some(self.engine.enqueue_slow(slow))),
        }
    }

    /// Produces `record` with no report at all (fire and forget). Waits
    /// for metadata and for room in `buffer.memory` and under
    /// `queue.buffering.max.messages` (up to `max.block.ms`).
    pub async fn produce(&self, mut record: Record) -> Result<(), ProduceError> {
        self.engine.on_send(&mut record);
        let reply = self.engine.unanswered();
        let slow = match self
            .engine
            .enqueue_now(record, reply, true, &mut Resume::default())
        {
            Enqueued::Appended(_) | Enqueued::Reported => return Ok(()),
            Enqueued::Refused(e) => return Err(e),
            Enqueued::Wait(slow) => self.engine.enqueue_slow(slow),
        };
        slow.await
    }

    /// Produces every record of `records`, in order, with no reports (fire
    /// and forget), as [`produce`](Self::produce) does one by one but with
    /// the per-call work (metadata snapshot, clock, topic lookup) done once
    /// per run of records (the clock read again every 256 records). Waits
    /// for metadata and memory as `produce` does.
    pub async fn produce_batch(&self, records: Vec<Record>) -> Result<(), BatchRejected> {
        let engine = &self.engine;
        if engine.intercepts() {
            return self.produce_each(records).await;
        }
        let mut rest = records.into_iter();
        let mut taken = 0;
        loop {
            let mut budget = usize::MAX;
            let slow = match engine.place_run(&mut rest, None, &mut budget, &mut taken) {
                RunEnd::Done => return Ok(()),
                RunEnd::Failed(reason) => return Err(BatchRejected::new(taken, reason, rest)),
                RunEnd::Wait(slow) => engine.enqueue_slow(slow),
            };
            match slow.await {
                Ok(()) => taken += 1,
                Err(reason) => return Err(BatchRejected::new(taken, reason, rest)),
            }
        }
    }

    /// `produce_batch` for a producer with interceptors: one record at a
    /// time, each owing a report (to nobody) so that they see it; the
    /// batch path's runs owe none.
    async fn produce_each(&self, records: Vec<Record>) -> Result<(), BatchRejected> {
        let mut rest = records.into_iter();
        let mut taken = 0;
        while let Some(record) = rest.next() {
            if let Err(reason) = self.produce(record).await {
                return Err(BatchRejected::new(taken, reason, rest));
            }
            taken += 1;
        }
        Ok(())
    }

    /// Like [`produce`](Self::produce), but never waits: a full buffer is
    /// `QueueFull`, unknown metadata is `MetadataNotReady`; the record is
    /// handed back either way.
    pub fn try_produce(&self, mut record: Record) -> Result<(), ProduceError> {
        self.engine.on_send(&mut record);
        self.engine.try_enqueue(record, self.engine.unanswered())
    }

    /// Where to send [`Produce`](crate::Produce) messages (`Produce {
    /// record, reply_to }`): the producer's supervisor actor, as a
    /// recipient of that one message.
    pub fn actor(&self) -> actix::Recipient<crate::actors::msgs::Produce> {
        self.supervisor.clone().recipient()
    }

    /// Whether the telemetry actor holds a subscription (lib tests only).
    #[cfg(test)]
    pub(crate) async fn telemetry_subscribed(&self) -> bool {
        self.supervisor
            .send(crate::actors::msgs::TelemetrySubscribed)
            .await
            .unwrap_or(false)
    }

    /// Waits until every record produced before this call is reported.
    pub async fn flush(&self) {
        self.engine.flush().await
    }

    /// Like [`flush`](Self::flush), for at most `timeout`: `Err` when
    /// records produced before the call are still unreported then (they
    /// stay pending and are reported later as usual).
    pub async fn flush_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.engine
            .timeout(timeout, self.engine.flush())
            .await
            .map_err(|_| TimedOut(timeout))
    }

    /// Stops accepting records, flushes, reports everything, and stops the
    /// actors. Waits as long as delivery takes (at most about
    /// `delivery.timeout.ms`); [`close_timeout`](Self::close_timeout)
    /// bounds it.
    ///
    /// A transaction still open is aborted once its records are sent
    /// (EndTxn, as the Java client's close does), so read_committed
    /// consumers are not held up until `transaction.timeout.ms`; its
    /// transactional reports say aborted.
    pub async fn close(&self) {
        self.engine.close_intake();
        self.engine.flush().await;
        self.end_on_close(None).await;
        self.stop_actors(false).await;
    }

    /// Like [`close`](Self::close), but flushes for at most `timeout`
    /// (as the Java client's `close(Duration)`): whatever is unreported
    /// then fails at once, `Cancelled` (records sent but unanswered say
    /// they may or may not have been written), and `Err` says so. Every
    /// record still gets exactly one report.
    pub async fn close_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        let deadline = crate::clock::Instant::now() + timeout;
        self.engine.close_intake();
        let flushed = self.flush_timeout(timeout).await;
        if flushed.is_ok() {
            self.end_on_close(Some(deadline)).await;
        }
        self.engine.announce_unfinished();
        self.stop_actors(flushed.is_err()).await;
        flushed
    }

    /// Ends the transaction under way, if any, by `deadline`, as the Java
    /// client's close does: one being committed is finished (a commit the
    /// application awaits at the same time learns the same outcome), any
    /// other is aborted (a commit can no longer start: `close_intake`), and
    /// so is one whose commit found a failed record. When that fails the
    /// coordinator aborts it at `transaction.timeout.ms`.
    async fn end_on_close(&self, deadline: Option<crate::clock::Instant>) {
        let Some(txn) = self.engine.txn().filter(|t| t.is_under_way()) else {
            return;
        };
        let end = async {
            if txn.phase() == crate::transaction::Phase::Committing {
                match self.commit_transaction().await {
                    Err(e) if e.is_abortable() => {}
                    other => return other,
                }
            }
            self.abort_transaction().await
        };
        let result = match deadline {
            None => end.await,
            Some(d) => {
                let left = d.saturating_duration_since(crate::clock::Instant::now());
                self.engine
                    .timeout(left, end)
                    .await
                    .unwrap_or_else(|_| Err(TransactionError::TimedOut("close_timeout".into())))
            }
        };
        match result {
            Ok(()) => {}
            // Ended by the application's own call meanwhile.
            Err(TransactionError::State(_)) if !txn.is_under_way() => {}
            Err(e) => {
                tracing::warn!(error = %e, "the transaction under way at close was not ended; the coordinator ends it (an open one is aborted at transaction.timeout.ms)");
                self.engine.announce_unfinished();
            }
        }
    }

    /// Stops the actor tree once (`cancel`: failing what is queued or in
    /// flight) and waits for it, bounded.
    async fn stop_actors(&self, cancel: bool) {
        let stopped = self.engine.when_stopped();
        if self.engine.claim_shutdown() {
            self.supervisor.do_send(Shutdown { cancel });
        }
        if !self.engine.has_stopped() {
            let _ = self.engine.timeout(Duration::from_secs(10), stopped).await;
        }
        self.engine.close_subscriptions();
    }

    /// Makes the supervisor's next periodic sweep panic, to test that its
    /// periodic tasks survive a panic. Only with the `fault-injection`
    /// feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_supervisor_task_panic(&self) {
        self.engine.plant_sweep_panic();
    }

    /// Makes the partitioner actor panic, to test its supervision (under
    /// `courier_kafka::testing`'s double, its scripted broker, which stands in
    /// the partitioner's place). Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_partitioner_panic(&self) {
        self.supervisor.do_send(InjectPanic);
    }

    /// Makes a transactional producer's transaction actor panic, with
    /// whatever coordinator exchanges it runs, to test its supervision.
    /// Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_transaction_panic(&self) {
        self.supervisor
            .do_send(crate::actors::msgs::InjectTransactionPanic);
    }

    /// Makes the connection actor for `broker` panic while it handles its
    /// next Produce response, holding that response's batches, to test the
    /// last line of defence. Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_response_panic(&self, broker: i32) -> bool {
        match self.addresses.connections.get(&broker) {
            Some(a) => {
                a.do_send(InjectResponsePanic);
                true
            }
            None => false,
        }
    }

    /// Plants a bug, to show that a test's invariants catch it: each of
    /// the next `batches` batches settled loses one owed report without a
    /// trace (no report, no `Cancelled`). Only with the `fault-injection`
    /// feature; `tests/simulation.rs` uses it.
    #[cfg(feature = "fault-injection")]
    pub fn plant_lost_reports(&self, batches: u64) {
        self.engine
            .stats()
            .plant_lost_reports
            .store(batches, Ordering::Release);
    }

    /// Plants a bug (for the fault simulation to catch): from now on a
    /// partition's sequences do not start again at 0 under a new epoch,
    /// so after an epoch bump the broker refuses them. Only with the
    /// `fault-injection` feature; `tests/simulation.rs` uses it.
    #[cfg(feature = "fault-injection")]
    pub fn plant_unrewound_sequences(&self) {
        self.engine
            .acc()
            .plant_unrewound_sequences
            .store(true, Ordering::Release);
    }

    /// Holds the address of the connection actor for `broker` (as an
    /// in-flight request through it does) until the returned value is
    /// dropped, to test that the actor, once retired, stays stopped. Only
    /// with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn hold_connection_actor(&self, broker: i32) -> Option<Box<dyn std::any::Any + Send>> {
        self.addresses
            .connections
            .get(&broker)
            .map(|a| Box::new(a.value().clone()) as Box<dyn std::any::Any + Send>)
    }

    /// Makes the connection actor for `broker` panic inside a handler, to
    /// test supervision. Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_connection_panic(&self, broker: i32) -> bool {
        match self.addresses.connections.get(&broker) {
            Some(a) => {
                a.do_send(InjectPanic);
                true
            }
            None => false,
        }
    }

    /// The idempotent producer's id and epoch, once the broker assigned
    /// them; `None` without idempotence.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.engine.idem().and_then(|i| i.ready())
    }

    /// Broker ids with a live connection actor.
    pub fn connected_brokers(&self) -> Vec<i32> {
        self.addresses.known_brokers()
    }

    /// A snapshot of the producer's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.engine.stats_snapshot()
    }
}
