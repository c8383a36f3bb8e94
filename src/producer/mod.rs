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

    /// Waits (up to 10 s) until the supervisor's tick sleeps.
    fn until_asleep(p: &Producer) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !p.engine.supervisor_asleep() {
            assert!(
                std::time::Instant::now() < deadline,
                "the supervisor's tick never slept"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn idle_cluster() -> (
        rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
        ProducerBuilder,
    ) {
        let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
        cluster.create_topic("idle", 1, 1).unwrap();
        let builder = Producer::builder()
            .bootstrap(&cluster.bootstrap_servers())
            .set("enable.metrics.push", "false");
        (cluster, builder)
    }

    /// An idle producer's supervisor stops ticking once nothing is left to
    /// report; a record wakes it (and is delivered), and it sleeps again.
    #[test]
    fn the_supervisor_sleeps_while_idle_and_a_record_wakes_it() {
        let (_cluster, builder) = idle_cluster();
        let p = builder.build().unwrap();
        until_asleep(&p);
        for _ in 0..2 {
            let report = futures::executor::block_on(p.send(Record::to("idle").value("v")));
            assert!(report.is_ok(), "{report:?}");
            until_asleep(&p);
        }
    }

    /// A record that only the supervisor's tick can settle (its leader is
    /// down, so it waits in its queue), sent while the tick sleeps: the
    /// batch it opens wakes the tick, which fails it at
    /// `delivery.timeout.ms`.
    #[test]
    fn a_record_for_a_broker_that_is_down_sent_while_the_supervisor_sleeps_times_out() {
        let (cluster, builder) = idle_cluster();
        let p = builder
            .set("request.timeout.ms", "300")
            .set("linger.ms", "0")
            .set("delivery.timeout.ms", "1000")
            .build()
            .unwrap();
        let first = futures::executor::block_on(p.send(Record::to("idle").value("v")));
        assert!(first.is_ok(), "{first:?}");
        until_asleep(&p);
        cluster.broker_down(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sender = p.clone();
        std::thread::spawn(move || {
            let _ = tx.send(futures::executor::block_on(
                sender.send(Record::to("idle").value("v")),
            ));
        });
        let report = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a report");
        let err = report.expect_err("its broker is down: not delivered");
        assert_eq!(err.kind, crate::report::ErrorKind::Timeout, "{err:?}");
    }

    /// An actor that dies while the supervisor's tick sleeps is restarted:
    /// its alarm wakes the tick.
    #[cfg(feature = "fault-injection")]
    #[test]
    fn an_actor_dying_while_the_supervisor_sleeps_is_restarted() {
        let (_cluster, builder) = idle_cluster();
        let p = builder.build().unwrap();
        until_asleep(&p);
        p.inject_partitioner_panic();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.stats().actor_restarts == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the dead partitioner was not restarted"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let report = futures::executor::block_on(p.send(Record::to("idle").value("v")));
        assert!(report.is_ok(), "{report:?}");
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
