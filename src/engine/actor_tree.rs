//! What the shared core asks of the actor tree.
//!
//! The core (`Engine`) sits below the actors: actors hold an `Arc<Engine>`
//! and call into it. The few things the core needs back from them (wake a
//! connection actor, ask for a topic's metadata) go through this trait,
//! which `actors::addresses::Addresses` implements, so the core never
//! names an actor type and the layers point one way.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::batching::queue::PartitionQueue;
use crate::record::Topic;
use crate::report::ErrorKind;

/// The actor tree, as the core sees it.
pub(crate) trait ActorTree: Send + Sync + 'static {
    /// A batch of a partition `broker` leads opened or filled: that
    /// connection actor should drain (no-op when it has none).
    fn wake(&self, broker: i32);

    /// A new batch due at `due` (its `linger.ms` ends) opened on a
    /// partition `broker` leads: wake that connection actor unless its
    /// timer already fires by then (the drain at that wake finds this
    /// batch, or sets the timer for it). One wake per lingering period
    /// instead of one per partition: a keyed producer on a topic of
    /// thousands of partitions opens that many batches per period.
    fn wake_by(&self, broker: i32, due: crate::clock::Mono) {
        let _ = due;
        self.wake(broker);
    }

    /// Every connection actor should drain (flush, linger ignored).
    fn wake_all(&self);

    /// A batch opened while the supervisor's tick sleeps (nothing was
    /// left to report): wake it, to watch delivery timeouts, leaders and
    /// its actors again (no-op without one).
    fn rouse(&self) {}

    /// A batch opened on `queue`, which no drain list held
    /// (`QueueState::listed`): put it on the list of `broker`, its leader,
    /// which that connection actor takes at its next drain. No wake: the
    /// caller wakes as for any new batch. (No-op for a tree whose drains
    /// walk every queue.)
    fn list(&self, broker: i32, queue: &Arc<PartitionQueue>) {
        let _ = (broker, queue);
    }

    /// KIP-794: a sticky partition moved; the partitioner actor should
    /// weigh the partitions of the topics that moved (no-op without one).
    fn weigh_partitions(&self) {}

    /// Starts a metadata fetch for `topic` without waiting; false when the
    /// actors are gone.
    fn request_topic(&self, topic: Topic) -> bool;

    /// Waits until `topic`'s metadata is known, up to `max.block.ms`:
    /// `Some(Err(kind))` when it did not appear, `None` when the actors are
    /// gone (the producer closed).
    fn ensure_topic(
        &self,
        topic: Topic,
    ) -> BoxFuture<'static, Option<Result<(), (ErrorKind, String)>>>;
}
