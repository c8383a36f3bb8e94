//! What the shared core asks of the actor tree.
//!
//! The core (`Engine`) sits below the actors: actors hold an `Arc<Engine>`
//! and call into it. The few things the core needs back from them (wake a
//! connection actor, ask for a topic's metadata) go through this trait,
//! which `actors::addresses::Addresses` implements, so the core never
//! names an actor type and the layers point one way.

use futures::future::BoxFuture;

use crate::record::Topic;
use crate::report::ErrorKind;

/// The actor tree, as the core sees it.
pub(crate) trait ActorTree: Send + Sync + 'static {
    /// A batch of a partition `broker` leads opened or filled: that
    /// connection actor should drain (no-op when it has none).
    fn wake(&self, broker: i32);

    /// Every connection actor should drain (flush, linger ignored).
    fn wake_all(&self);

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
