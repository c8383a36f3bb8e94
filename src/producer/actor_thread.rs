//! [`ActorThread`]: one actix system on a thread of its own, shared by
//! the producers built on it with [`ProducerBuilder::build_on`].

use std::sync::Arc;

use crate::config::ConfigError;
use crate::producer::builder::ProducerBuilder;
use crate::producer::handle::Producer;

/// A thread running one actix system, for many producers to share.
///
/// [`ProducerBuilder::build`] gives each producer a thread and an actix
/// system of its own; a service holding a producer per tenant would hold a
/// thread per tenant. Producers built with
/// [`ProducerBuilder::build_on`] instead start their actors here, all on
/// this one thread. (An actix application needs neither: its producers
/// start in its own system with [`ProducerBuilder::start`].)
///
/// Clone it freely. The thread stops once this handle, its clones and
/// every producer built on it are gone; each producer still closes, and
/// reports, on its own.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use courier_kafka::{ActorThread, Producer, Record};
/// let actors = ActorThread::new();
/// let tenants: Vec<Producer> = (0..100)
///     .map(|i| {
///         Producer::builder()
///             .bootstrap("127.0.0.1:9092")
///             .set("client.id", &format!("tenant-{i}"))
///             .build_on(&actors)
///     })
///     .collect::<Result<_, _>>()?;
/// tenants[7].send(Record::to("orders").value("v")).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ActorThread {
    shared: Arc<Shared>,
}

/// The thread's system, stopped when the last holder lets go: the
/// handles, and each producer's engine (`Engine::keep_thread`).
struct Shared {
    system: actix::System,
    arbiter: actix::ArbiterHandle,
    thread: std::thread::ThreadId,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Also from the thread itself (the last producer's engine dropped
        // by its last actor): stopping only asks, it never waits.
        self.system.stop();
    }
}

impl std::fmt::Debug for ActorThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorThread")
            .field("thread", &self.shared.thread)
            .finish_non_exhaustive()
    }
}

impl Default for ActorThread {
    fn default() -> Self {
        Self::new()
    }
}

impl ActorThread {
    /// Starts the thread (named `courier-actors`) and its actix system.
    pub fn new() -> ActorThread {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("courier-actors".into())
            .spawn(move || {
                let runner = actix::System::new();
                let _ = tx.send(Shared {
                    system: actix::System::current(),
                    arbiter: actix::Arbiter::current(),
                    thread: std::thread::current().id(),
                });
                let _ = runner.run();
            })
            .expect("spawn the courier actor thread");
        ActorThread {
            shared: Arc::new(rx.recv().expect("courier actor thread started")),
        }
    }
}

impl ProducerBuilder {
    /// Validates the settings and starts the producer's actors on
    /// `actors`, a thread that other producers may share (see
    /// [`ActorThread`]). Callable from any thread, that one included.
    pub fn build_on(self, actors: &ActorThread) -> Result<Producer, ConfigError> {
        let (engine, addresses) = self.engine()?;
        let keeper: Arc<dyn std::any::Any + Send + Sync> = actors.shared.clone();
        engine.keep_thread(keeper);
        let shared = &actors.shared;
        if std::thread::current().id() == shared.thread {
            let supervisor = crate::actors::supervisor::ProducerSupervisor::launch(
                engine.clone(),
                addresses.clone(),
                false,
            );
            return Ok(Producer::from_parts(engine, addresses, supervisor));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (for_engine, for_addresses) = (engine.clone(), addresses.clone());
        let started = shared.arbiter.spawn_fn(move || {
            let _ = tx.send(crate::actors::supervisor::ProducerSupervisor::launch(
                for_engine,
                for_addresses,
                false,
            ));
        });
        // The thread runs until every handle and producer is gone, and the
        // caller holds a handle; only a system stopped from inside (by
        // hand) ends it sooner.
        let supervisor = rx.recv().ok().filter(|_| started);
        let supervisor = supervisor.ok_or(ConfigError::ActorThreadStopped)?;
        Ok(Producer::from_parts(engine, addresses, supervisor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn builder() -> ProducerBuilder {
        // Nothing listens there: the actors start and keep reconnecting.
        // Nothing to push to: the telemetry actor would look for a broker
        // every second.
        Producer::builder()
            .bootstrap("127.0.0.1:1")
            .set("enable.metrics.push", "false")
    }

    /// Drops `p` and waits until its engine is gone (its actors stopped
    /// and dropped theirs).
    fn drop_and_wait(p: Producer) {
        let engine = Arc::downgrade(&p.engine);
        drop(p);
        let deadline = Instant::now() + Duration::from_secs(10);
        while engine.upgrade().is_some() {
            assert!(
                Instant::now() < deadline,
                "a dropped producer's engine lives on"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the thread's system still takes work.
    fn running(arbiter: &actix::ArbiterHandle) -> bool {
        arbiter.spawn_fn(|| ())
    }

    fn until_stopped(arbiter: &actix::ArbiterHandle) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while running(arbiter) {
            assert!(Instant::now() < deadline, "the actor thread never stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every producer built on one `ActorThread` has its actors on that
    /// thread, built from another thread or from that one.
    #[test]
    fn producers_built_on_one_actor_thread_run_their_actors_there() {
        let actors = ActorThread::new();
        let thread = actors.shared.thread;
        let producers: Vec<Producer> = (0..3)
            .map(|_| builder().build_on(&actors).unwrap())
            .collect();
        for p in &producers {
            assert_eq!(p.engine.actor_thread_id(), Some(thread));
        }
        // From the thread itself (an actor there building another): no
        // wait for itself.
        let (tx, rx) = std::sync::mpsc::channel();
        let on = actors.clone();
        assert!(actors.shared.arbiter.spawn_fn(move || {
            let _ = tx.send(builder().build_on(&on).unwrap());
        }));
        let inner = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(inner.engine.actor_thread_id(), Some(thread));
        // A producer of its own thread is elsewhere.
        let own = builder().build().unwrap();
        assert_ne!(own.engine.actor_thread_id(), Some(thread));
    }

    /// The thread outlives its handle while a producer is on it, and stops
    /// once the last one is gone; dropping one producer leaves the others'
    /// actors running.
    #[test]
    fn the_actor_thread_stops_once_its_handles_and_producers_are_gone() {
        let actors = ActorThread::new();
        let arbiter = actors.shared.arbiter.clone();
        let first = builder().build_on(&actors).unwrap();
        let second = builder().build_on(&actors).unwrap();
        drop(actors);
        drop_and_wait(first);
        assert!(running(&arbiter), "stopped with a producer still on it");
        assert!(
            !second.engine.has_stopped(),
            "one producer's drop stopped another"
        );
        drop(second);
        until_stopped(&arbiter);

        // And a handle alone keeps it running.
        let actors = ActorThread::new();
        let arbiter = actors.shared.arbiter.clone();
        drop_and_wait(builder().build_on(&actors).unwrap());
        assert!(running(&arbiter), "stopped while its handle was held");
        drop(actors);
        until_stopped(&arbiter);
    }

    /// A transactional producer's transaction actor, and a telemetry
    /// actor whose next look is minutes away (librdkafka's mock cluster
    /// subscribes it with no metric, every 5 minutes), stop with their
    /// producer: its engine goes, and with it the thread.
    #[test]
    fn transaction_and_telemetry_actors_stop_with_their_producer() {
        let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
        let actors = ActorThread::new();
        let arbiter = actors.shared.arbiter.clone();
        let p = Producer::builder()
            .bootstrap(&cluster.bootstrap_servers())
            .set("transactional.id", "lifetime")
            .build_on(&actors)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !futures::executor::block_on(p.telemetry_subscribed()) {
            assert!(Instant::now() < deadline, "no telemetry subscription");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(actors);
        drop_and_wait(p);
        until_stopped(&arbiter);
    }
}
