//! The double's network: what a test does to the connections between its
//! producers and the scripted broker (`MockBroker::disconnect`,
//! `go_down`, `come_back`, `set_latency`, `Verdict::Disconnect`), and
//! each producer's connection as its connection actor would keep it
//! (`Connection`: up, or reconnecting with backoff).
//!
//! A dropped connection is noticed by the producer's `ScriptedBroker` as
//! a connection actor notices a dropped socket (`connection_lost` in
//! `actors/broker/connect.rs`): the requests in flight on it lose their
//! answers and go back to their queues through `Engine::retry_or_fail`
//! (counted as an attempt), the disconnect is counted in the producer's
//! stats, and it reconnects after `reconnect.backoff.ms`, growing to
//! `reconnect.backoff.max.ms` while connecting fails (the broker is
//! down), the same `clock::backoff` the connection actors use. Nothing is
//! sent while it is not connected.
//!
//! Also what the producers see of the broker as metadata (`publish`): one
//! broker, leading every partition of every topic.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::verdict::{Verdict, BROKER_ID};
use crate::batching::batch::SealedBatch;
use crate::clock::{backoff, Instant};
use crate::config::ProducerConfig;
use crate::engine::Engine;
use crate::metadata::{MetadataSnapshot, TopicMetadata};
use crate::record::Topic;

/// A request in flight at the broker: a held record (one batch of one
/// record), or a batch whose answer is on its way (`set_latency`).
#[derive(Debug)]
pub(super) struct Held {
    pub(super) engine: Weak<Engine>,
    pub(super) batch: SealedBatch,
    pub(super) arrivals: Range<usize>,
    pub(super) sent_at: Instant,
    /// A slow answer: the verdict, given at this instant (`None`: held
    /// until the test releases it).
    pub(super) due: Option<(Instant, Verdict)>,
}

/// What the test did to the network (inside the script's lock).
#[derive(Debug, Default)]
pub(crate) struct Network {
    /// The broker is down (`MockBroker::go_down`): connecting fails, and
    /// nothing is answered.
    pub(crate) down: bool,
    /// Producers whose connection dropped (their requests in flight are
    /// lost already) and whose broker actor has not noticed yet.
    cut: Vec<Weak<Engine>>,
    /// How long every answer to a Produce or coordinator request takes
    /// (`MockBroker::set_latency`).
    pub(crate) latency: Duration,
}

impl Network {
    /// `engine`'s connection dropped.
    pub(crate) fn cut(&mut self, engine: &Arc<Engine>) {
        self.cut.retain(|e| e.strong_count() > 0);
        if !self.is_cut(engine) {
            self.cut.push(Arc::downgrade(engine));
        }
    }

    /// Whether `engine`'s connection dropped and its broker actor has not
    /// noticed yet: a request sent on it now is lost on the way.
    pub(crate) fn is_cut(&self, engine: &Arc<Engine>) -> bool {
        let target = Arc::downgrade(engine);
        self.cut.iter().any(|e| e.ptr_eq(&target))
    }

    /// Whether `engine`'s connection dropped; it has noticed now.
    pub(crate) fn take_cut(&mut self, engine: &Arc<Engine>) -> bool {
        let target = Arc::downgrade(engine);
        let before = self.cut.len();
        self.cut.retain(|e| !e.ptr_eq(&target));
        self.cut.len() != before
    }
}

/// One producer's connection to the double, as its connection actor
/// would keep it.
#[derive(Debug)]
pub(crate) struct Connection {
    /// `None`: connected; `Some(at)`: not, and the next attempt to
    /// connect is at `at`.
    reconnect_at: Option<Instant>,
    /// Failed attempts in a row (the backoff grows with them), as
    /// `BrokerConnection::reconnect_attempts`.
    attempts: u32,
}

impl Connection {
    /// A connection about to be made (the first attempt at once).
    pub(crate) fn new(now: Instant) -> Connection {
        Connection {
            reconnect_at: Some(now),
            attempts: 0,
        }
    }

    /// The connection dropped: the next attempt after a backoff.
    pub(crate) fn lost(&mut self, config: &ProducerConfig, now: Instant) {
        self.schedule(config, now);
    }

    fn schedule(&mut self, config: &ProducerConfig, now: Instant) {
        let wait = backoff(
            config.reconnect_backoff,
            config.reconnect_backoff_max,
            self.attempts,
        );
        self.attempts = self.attempts.saturating_add(1);
        self.reconnect_at = Some(now + wait);
    }

    /// Whether the producer may send now: `Ok` when connected (made now if
    /// an attempt was due and the broker is up), else when to look again.
    pub(crate) fn ready(
        &mut self,
        config: &ProducerConfig,
        down: bool,
        now: Instant,
    ) -> Result<(), Instant> {
        let Some(at) = self.reconnect_at else {
            return Ok(());
        };
        if at > now {
            return Err(at);
        }
        if down {
            // Connection refused: back off, longer each time.
            self.schedule(config, now);
            return Err(self.reconnect_at.expect("scheduled"));
        }
        self.reconnect_at = None;
        self.attempts = 0;
        Ok(())
    }

    /// Whether it is connected.
    pub(crate) fn is_up(&self) -> bool {
        self.reconnect_at.is_none()
    }
}

/// Every attached producer's metadata: every topic, all led by
/// `BROKER_ID`. Each producer keeps its own sticky partitions.
pub(super) fn publish(engines: &[Weak<Engine>], topics: &BTreeMap<Topic, i32>) {
    for e in engines.iter().filter_map(Weak::upgrade) {
        let previous = e.metadata().load();
        let mut snapshot = MetadataSnapshot {
            brokers: HashMap::from([(BROKER_ID, "courier-mock-broker:0".to_string())]),
            fetched_at: Some(Instant::now()),
            ..MetadataSnapshot::default()
        };
        for (topic, n) in topics {
            snapshot.topics.insert(
                *topic,
                Arc::new(TopicMetadata {
                    partition_count: *n,
                    leaders: vec![BROKER_ID; *n as usize],
                    available: (0..*n).collect(),
                    leader_epochs: Vec::new(),
                    topic_id: 0,
                    sticky: previous
                        .topics
                        .get(topic)
                        .map(|t| t.sticky.clone())
                        .unwrap_or_default(),
                    cache: previous
                        .topics
                        .get(topic)
                        .filter(|t| t.partition_count == *n)
                        .map(|t| t.cache.clone())
                        .unwrap_or_default(),
                }),
            );
        }
        e.metadata().store(Arc::new(snapshot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_after_a_backoff_that_grows_while_the_broker_is_down() {
        let mut config = ProducerConfig::default();
        config.reconnect_backoff = Duration::from_millis(100);
        config.reconnect_backoff_max = Duration::from_millis(1000);
        let t0 = Instant::now();
        let mut c = Connection::new(t0);
        assert_eq!(c.ready(&config, false, t0), Ok(()));
        c.lost(&config, t0);
        assert!(!c.is_up());
        let first = c.ready(&config, false, t0).unwrap_err();
        assert!(first > t0 && first <= t0 + Duration::from_millis(120));
        // Down: each failed attempt waits longer, up to the maximum.
        let mut at = first;
        let mut waits = Vec::new();
        for _ in 0..6 {
            let next = c.ready(&config, true, at).unwrap_err();
            waits.push(next - at);
            at = next;
        }
        assert!(waits[0] >= Duration::from_millis(160), "{waits:?}");
        assert!(waits.iter().all(|w| *w <= Duration::from_millis(1000)));
        assert!(waits[5] >= Duration::from_millis(800), "{waits:?}");
        // Up again: connected at the next attempt, and the backoff starts
        // over.
        assert_eq!(c.ready(&config, false, at), Ok(()));
        c.lost(&config, at);
        let again = c.ready(&config, false, at).unwrap_err();
        assert!(again <= at + Duration::from_millis(120));
    }
}
