//! What a broker's connection actor keeps outside itself: the Produce
//! requests in flight on its connection, when its drain timer fires
//! (for producers deciding whether a new batch needs a wake; a new or
//! restarted actor resets it), and the queues producers opened batches on
//! since its last drain. The supervisor hands the same
//! `BrokerState` to every actor it starts for that broker, so a restarted
//! actor finds (and retries) what its predecessor had in flight.

use crate::clock::Instant;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crate::batching::batch::SealedBatch;
use crate::batching::queue::PartitionQueue;
use crate::metadata::MetadataSnapshot;
use crate::sync::lock;

/// What a broker's connection actor holds that must outlive the actor: its
/// in-flight requests. If the actor dies (a panic), the supervisor starts a
/// new one with the same state, which puts these batches back in their
/// queues; nothing in flight is lost with the actor.
#[derive(Debug, Default)]
pub(crate) struct BrokerState {
    pub(super) in_flight: Mutex<VecDeque<InFlight>>,
    /// When the connection actor's drain timer fires (`Mono` nanoseconds;
    /// 0: none set, or a drain under way). Producers skip the wake for a
    /// new batch due no earlier (`ActorTree::wake_by`). The actor clears
    /// it before a drain reads the queues and sets it after, so a batch
    /// opened while a drain runs is either seen by that drain or wakes
    /// the actor again.
    pub(crate) timer_at: AtomicU64,
    /// Queues a producer opened a batch on while they were on no drain
    /// list (`QueueState::listed`), or that another connection's drain
    /// found this broker leads: the connection actor takes them at its
    /// next drain (drain.rs, `walk_list`).
    pub(crate) opened: Mutex<Vec<Arc<PartitionQueue>>>,
}

impl BrokerState {
    /// Produce requests in flight on this broker's connection.
    pub(crate) fn in_flight_len(&self) -> usize {
        lock(&self.in_flight).len()
    }
}

/// One Produce request awaiting its response.
#[derive(Debug)]
pub(super) struct InFlight {
    pub correlation_id: i32,
    pub version: i16,
    pub sent_at: Instant,
    /// When the request times out: `request.timeout.ms` after it was
    /// sent, or sooner under librdkafka's timeout rule (drain.rs,
    /// `request_limit`).
    pub deadline: Instant,
    pub batches: Vec<SealedBatch>,
}

/// What a connection actor's drains walk (drain.rs, `walk_list`): the
/// queues this broker leads that held a batch at the last look, as of the
/// metadata snapshot whose queues were last walked whole. A cache, rebuilt
/// by a full walk after a metadata change or a restart, so it lives in the
/// actor.
#[derive(Debug, Default)]
pub(super) struct DrainList {
    /// The snapshot of the last full walk (`None`: none yet, or the
    /// actor restarted).
    pub walked: Option<Arc<MetadataSnapshot>>,
    pub active: Vec<Arc<PartitionQueue>>,
    /// An empty list with room, swapped for `BrokerState::opened` at
    /// each drain.
    pub spare: Vec<Arc<PartitionQueue>>,
}
