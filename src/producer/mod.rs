//! The public face: [`Producer`] (the handle), [`ProducerBuilder`] and
//! [`Subscriber`].
//!
//! Files build on each other one way: `handle` ← `builder` (adds
//! `Producer::builder`), `handle` ← `subscriber` (adds
//! `Producer::subscribe`) ← `transaction_reports` (adds
//! `Producer::subscribe_transactional`), `handle` ← `transactions`
//! (adds the transaction calls), `handle` ← `blocking` (adds the
//! blocking calls), and `builder` ← `actor_thread` (adds
//! `ProducerBuilder::build_on`); this file only gathers them.

mod actor_thread;
mod blocking;
mod builder;
mod handle;
mod subscriber;
mod transaction_reports;
mod transactions;

pub use actor_thread::ActorThread;
pub use blocking::BlockingSendError;
pub use builder::ProducerBuilder;
pub use handle::{DeliveryFuture, Producer};
pub use subscriber::{Subscriber, DEFAULT_REPORT_MEMORY};
pub use transaction_reports::{TransactionReport, TransactionReports};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::subscription::ReportStream;
    use crate::record::Record;

    /// A caller may hold a million `send` futures at once; each must stay
    /// small (the enqueue state machine is boxed for its first poll only).
    #[test]
    fn a_pending_send_future_is_small() {
        let p = Producer::builder()
            .bootstrap("127.0.0.1:1")
            .build()
            .unwrap();
        let fut = p.send(Record::to("t").value("v"));
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 512, "send future is {size} bytes");
        drop(fut);
    }

    /// The README and the guide promise these can be shared across tasks
    /// and threads.
    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Producer>();
        check::<Subscriber>();
        fn send<T: Send>() {}
        send::<ReportStream>();
    }
}
