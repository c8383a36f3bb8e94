//! The actor tree: who owns connections, metadata and failure handling.
//!
//! ```text
//!                   ProducerSupervisor
//!                   /        |         \
//!     PartitionerActor   BrokerConnection(1) ... BrokerConnection(n)
//!     (metadata cache,    (one socket each: pipelined Produce and
//!      topic waits)        Metadata requests, drains its partitions)
//! ```
//!
//! Records do not travel through actor mailboxes one by one: producer
//! handles append them into the shared accumulator and send one `Wake` per
//! batch to the leader's connection actor. Actors move whole batches and
//! route reports per batch (see `delivery::router`).
//!
//! A producer built by `courier::testing::MockBroker` has only the
//! supervisor and a `ScriptedBroker` (`scripted`), which stands for the
//! partitioner and the connection actors.
//!
//! Files build on each other one way: `msgs` ← `broker/` ← `addresses`
//! (the long-lived addresses, and the engine's `ActorTree`) ←
//! `partitioner` ← `supervisor`. Actors lower in that list reach higher
//! ones only through `Recipient`s handed to them when they start.

pub(crate) mod addresses;
pub(crate) mod broker;
pub mod msgs;
pub(crate) mod partitioner;
pub(crate) mod scripted;
pub mod supervisor;
pub(crate) mod transaction;
