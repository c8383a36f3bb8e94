//! Batching: records written straight into per-partition batches, the
//! queues that hold them until a connection actor takes them, and the
//! request-size check every record passes first.
//!
//! Files build on each other one way: `reservation` (a batch's share of
//! `buffer.memory` and `queue.buffering.max.messages`, the record pool) ←
//! `batch` (open and sealed batches) ← `queue` (one partition's queue) ←
//! `accumulator` (every queue, the `buffer.memory` and record pools, batch
//! ids for flush); `sizing` stands alone.
//! A batch holds its owed reports as a `delivery::owed::Owed`, which is
//! why this layer sits above `delivery`.

pub(crate) mod accumulator;
pub(crate) mod batch;
pub(crate) mod queue;
pub(crate) mod reservation;
pub(crate) mod sizing;

#[cfg(feature = "fault-injection")]
pub use batch::FAIL_COMPRESSION_TOPIC;
