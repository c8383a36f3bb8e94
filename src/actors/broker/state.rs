//! What a broker's connection actor keeps outside itself: the Produce
//! requests in flight on its connection, and when its drain timer fires
//! (for producers deciding whether a new batch needs a wake; a new or
//! restarted actor resets it). The supervisor hands the same
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

/// A connection actor's list of the queues its broker leads, and what it
/// was taken from (`BrokerConnection::my_queues`, in drain.rs): the list
/// holds while the metadata snapshot is the same one and no queue has
/// been created since.
#[derive(Debug)]
pub(super) struct MyQueues {
    pub snapshot: Arc<MetadataSnapshot>,
    pub created: u64,
    /// Shared, so a drain takes it with one reference count, not one per
    /// queue.
    pub queues: Arc<[Arc<PartitionQueue>]>,
}
