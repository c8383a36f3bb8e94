//! Blocking calls for code that is not async (as users of rdkafka's
//! `BaseProducer` and the Java client expect): `send_blocking`,
//! `flush_blocking`, `close_blocking`, and `DeliveryFuture::wait`.
//!
//! They run the async calls to completion on the calling thread
//! (`futures::executor::block_on`). That needs no tokio runtime: the
//! producer's futures put their timers on the actors' runtime
//! (`Engine::timeout`). Any thread may call them, except the producer's own
//! actor thread (a producer `start`ed inside an actix system, called from
//! that system's thread), where the call would wait for itself: there they
//! refuse at once instead of hanging.

use std::time::Duration;

use crate::clock::Instant;

use crate::engine::error::{ProduceError, TimedOut};
use crate::producer::handle::{DeliveryFuture, Producer};
use crate::record::Record;
use crate::report::{Delivered, DeliveryError, DeliveryReport};

/// Why [`Producer::send_blocking`] returned without a delivered record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockingSendError {
    /// Not taken (the producer is closed, the record is too large, no
    /// transaction is open, or `max.block.ms` passed waiting for metadata
    /// or buffer room): the record is handed back and gets no report.
    #[error("record not taken: {0}")]
    Rejected(#[from] ProduceError),
    /// Taken, and it failed: its one report.
    #[error(transparent)]
    Failed(DeliveryError),
    /// Taken, but not reported within the timeout. It is still pending
    /// (as a Java `Future.get(timeout)` that timed out): wait on the future
    /// for its one report, or drop the future to ignore it.
    #[error("no delivery report within {0:?}; the record is still pending")]
    TimedOut(Duration, DeliveryFuture),
    /// Called on the producer's own actor thread, where a blocking call
    /// would wait for itself: use the async calls there. The record is
    /// handed back untaken.
    #[error("a blocking call on the producer's own actor thread would never return")]
    OnActorThread(Record),
}

impl Producer {
    fn on_actor_thread(&self) -> bool {
        self.engine.on_actor_thread()
    }

    /// Produces `record` and blocks until its report, for at most
    /// `timeout` after the record was taken (taking it may block up to
    /// `max.block.ms` for metadata or buffer room, as the Java client's
    /// `send`). From any thread but the producer's own actor thread; no
    /// async runtime needed.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use courier_kafka::{BlockingSendError, Producer, Record};
    /// let producer = Producer::builder().bootstrap("localhost:9092").build()?;
    /// match producer.send_blocking(Record::to("orders").value("a"), Duration::from_secs(10)) {
    ///     Ok(d) => println!("at offset {:?}", d.offset),
    ///     Err(BlockingSendError::TimedOut(_, pending)) => {
    ///         // Still pending: wait longer for its one report.
    ///         let report = pending.wait(Duration::from_secs(60));
    ///         println!("{report:?}");
    ///     }
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// producer.close_blocking(Duration::from_secs(30))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_blocking(
        &self,
        record: Record,
        timeout: Duration,
    ) -> Result<Delivered, BlockingSendError> {
        if self.on_actor_thread() {
            return Err(BlockingSendError::OnActorThread(record));
        }
        let pending = futures::executor::block_on(self.submit(record))?;
        match pending.wait(timeout) {
            Ok(DeliveryReport::Delivered(d)) => Ok(d),
            Ok(DeliveryReport::Failed(e)) => Err(BlockingSendError::Failed(e)),
            Err(pending) => Err(BlockingSendError::TimedOut(timeout, pending)),
        }
    }

    /// Blocks until every record produced before the call is reported, for
    /// at most `timeout` (as [`flush_timeout`](Self::flush_timeout)).
    /// Refuses at once (`Err`) on the producer's own actor thread.
    pub fn flush_blocking(&self, timeout: Duration) -> Result<(), TimedOut> {
        if self.on_actor_thread() {
            return Err(TimedOut(Duration::ZERO));
        }
        futures::executor::block_on(self.flush_timeout(timeout))
    }

    /// Closes the producer, blocking for at most `timeout` (as
    /// [`close_timeout`](Self::close_timeout): what is still unreported
    /// then fails `Cancelled`, each record still with one report). Refuses
    /// at once (`Err`, nothing closed) on the producer's own actor thread.
    pub fn close_blocking(&self, timeout: Duration) -> Result<(), TimedOut> {
        if self.on_actor_thread() {
            return Err(TimedOut(Duration::ZERO));
        }
        futures::executor::block_on(self.close_timeout(timeout))
    }
}

impl DeliveryFuture {
    /// Blocks until the record's report, for at most `timeout`: `Err`
    /// hands the future back when the report has not come yet (the record
    /// is still pending). Needs no runtime: the thread parks until the
    /// report wakes it or the time is up. Not on the producer's own actor
    /// thread, whose work would wait behind it until the timeout.
    pub fn wait(mut self, timeout: Duration) -> Result<DeliveryReport, DeliveryFuture> {
        let deadline = Instant::now() + timeout;
        let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        let mut cx = std::task::Context::from_waker(&waker);
        loop {
            if let std::task::Poll::Ready(r) = self.poll_report(&mut cx) {
                return Ok(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self);
            }
            std::thread::park_timeout(left);
        }
    }
}

/// Wakes a parked thread.
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}
