//! One partition's queue: its open batch, its sealed batches waiting to
//! be sent or retried, and the idempotent producer's sequence state for
//! the partition, all under one mutex.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use crate::batching::batch::{OpenBatch, SealedBatch};
use crate::record::Topic;

/// One partition's queue. Lives in the accumulator, outside every actor,
/// so a restarted connection actor finds its batches where it left them.
#[derive(Debug)]
pub(crate) struct PartitionQueue {
    pub topic: Topic,
    pub partition: i32,
    /// `parking_lot`'s: taken once per record (`crate::sync`).
    pub state: parking_lot::Mutex<QueueState>,
}

/// What a partition queue's mutex guards.
#[derive(Debug, Default)]
pub(crate) struct QueueState {
    /// The batch being filled.
    pub open: Option<OpenBatch>,
    /// Sealed batches waiting to be sent, in batch-id order (new batches
    /// at the back, retries put back by id: [`QueueState::requeue`]).
    pub ready: VecDeque<SealedBatch>,
    /// Batches of this partition currently in flight.
    pub in_flight: usize,
    /// Records ever appended here; counted under the lock the append holds
    /// anyway, so the hot path touches no shared counter.
    pub appended: u64,
    /// Idempotence: the sequence the next newly stamped batch starts at,
    /// and the (producer id, epoch) it belongs to.
    pub next_sequence: i32,
    pub sequence_owner: Option<(i64, i16)>,
    /// Idempotence: batches stamped and sent but not yet reported.
    pub unacked: BTreeSet<u64>,
    /// Idempotence: the (producer id, epoch) under which the broker has
    /// acknowledged a batch of this partition, so it holds our sequence
    /// state. Until then one batch goes at a time: a leader that knows
    /// nothing of a producer accepts any sequence from it (Kafka's
    /// `ProducerAppendInfo.checkSequence`), so a batch pipelined behind a
    /// refused first one (say NOT_LEADER_OR_FOLLOWER from a partition's
    /// new leader) would be written ahead of it.
    pub confirmed: Option<(i64, i16)>,
    /// Transactions: the transaction generation in which the coordinator
    /// added this partition (AddPartitionsToTxn); its batches are sent
    /// only when that is the current one. 0: never.
    pub txn_added: u64,
    /// KIP-794: the number of the sticky partition's stay whose bytes
    /// `stay_bytes` counts (`StickyState::current`), and those bytes: the
    /// keyless records the built-in partitioner sent here in that stay.
    /// A record of a newer stay starts the count again (`enter_stay`).
    pub stay: u32,
    pub stay_bytes: usize,
    /// Batches the stay opened here.
    pub stay_batches: u32,
    /// The queue was forgotten (`Accumulator::forget`, its topic idle for
    /// `metadata.max.idle.ms`) and is no longer the partition's queue: an
    /// append that finds it so goes to the live one.
    pub retired: bool,
    /// The queue is on its leader's list of queues to drain
    /// (`BrokerState::opened`, or the connection actor's list of the
    /// queues that held a batch at its last look), or the next full walk
    /// of the queues (after a metadata change or a restart) finds it. Set
    /// by the append that opens a batch while it is unset, which then puts
    /// the queue on its leader's list; cleared by the drain that finds the
    /// queue holding nothing and drops it from its list. A queue holding a
    /// batch is always listed, so a drain's cost follows the partitions
    /// with something to send, not every partition ever used.
    pub listed: bool,
    /// The drain pass that last looked at this queue
    /// (`Accumulator::next_pass`): a queue twice on one pass's list gives
    /// it one batch.
    pub visited: u64,
}

/// An idempotent producer's sequence state for a partition whose queue was
/// forgotten: the broker still holds it (for `producer.id.expiration.ms`),
/// so the partition's next queue starts from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeptSequence {
    pub next_sequence: i32,
    pub owner: (i64, i16),
}

impl QueueState {
    /// Whether a batch of this partition is open, waiting, in flight or
    /// not yet reported: the queue cannot be forgotten
    /// (`Accumulator::forget`, the partitioner's idle check).
    pub fn holds_batch(&self) -> bool {
        self.open.is_some()
            || !self.ready.is_empty()
            || self.in_flight > 0
            || !self.unacked.is_empty()
    }

    /// Idempotence: a batch of this partition is in flight and the broker
    /// has not yet acknowledged one under `producer` (id, epoch), so the
    /// next waits (no pipelining until the broker holds our sequence
    /// state: `confirmed`).
    pub fn awaits_confirmation(&self, producer: (i64, i16)) -> bool {
        self.in_flight > 0 && self.confirmed != Some(producer)
    }

    /// A sticky record of stay `stay` is appended: the byte count starts
    /// again when the stay is not the one counted.
    #[inline(always)]
    pub fn enter_stay(&mut self, stay: u32) {
        if self.stay != stay {
            self.stay = stay;
            self.stay_bytes = 0;
            self.stay_batches = 0;
        }
    }

    /// A batch goes out: counted in flight, and its ledger knows (so a
    /// batch dropped unsettled leaves the count: `batch::Graveyard`).
    pub fn take_off(&mut self, b: &mut SealedBatch) {
        if !b.ledger.in_flight {
            self.in_flight += 1;
            b.ledger.in_flight = true;
        }
    }

    /// A batch is back (answered, failed or to be retried): no longer
    /// counted in flight.
    pub fn land(&mut self, b: &mut SealedBatch) {
        if b.ledger.in_flight {
            self.in_flight -= 1;
            b.ledger.in_flight = false;
        }
    }

    /// Puts a batch back for another attempt, in batch-id order: ids grow
    /// with creation within a partition, so retries keep the partition's
    /// original order whatever order their failures were seen in. (Not
    /// "to the front": a retried batch goes after older batches still
    /// waiting.)
    pub fn requeue(&mut self, batch: SealedBatch) {
        let at = self
            .ready
            .iter()
            .position(|b| b.id > batch.id)
            .unwrap_or(self.ready.len());
        self.ready.insert(at, batch);
    }
}

/// One topic's partition queues, indexed by partition.
#[derive(Debug)]
pub(crate) struct TopicQueues {
    pub partitions: Box<[Arc<PartitionQueue>]>,
}
