//! The actor tree: who owns connections, metadata and failure handling.
//!
//! ```text
//!                   ProducerSupervisor
//!                   /        |                          \
//!     PartitionerActor   BrokerConnection(1) ... BrokerConnection(n)   TransactionActor
//!     (metadata cache,    (one socket each: pipelined Produce,         (transactional.id only:
//!      topic waits)        Metadata, InitProducerId and `Ask`           coordinator exchanges,
//!                          requests; drains its partitions)             through the connections)
//! ```
//!
//! The supervisor starts the partitioner actor, then the transaction actor
//! (if any), then one connection actor per bootstrap address; connection
//! actors for the brokers the metadata names follow (`BrokersChanged`).
//!
//! Records do not travel through actor mailboxes one by one: producer
//! handles append them into the shared accumulator and send one `Wake` per
//! new batch to the leader's connection actor (none when that actor's
//! drain timer already fires by the batch's linger end; always for a new
//! batch behind a full one). Actors move whole batches and route reports
//! per batch (see `delivery::router`).
//!
//! A producer built by `courier_kafka::testing::MockBroker` has only the
//! supervisor and a `ScriptedBroker` (`scripted`), which stands for the
//! partitioner and the connection actors, and, with `transactional.id`,
//! the transaction actor.
//!
//! Files build on each other one way: `msgs` ← `broker/` ← `addresses`
//! (the long-lived addresses, and the engine's `ActorTree`) ← `scripted/`
//! ← `transaction/` ← `partitioner` ← `supervisor`. Actors lower in that
//! list reach higher ones only through `Recipient`s handed to them when
//! they start.

pub(crate) mod addresses;
pub(crate) mod broker;
pub mod msgs;
pub(crate) mod partitioner;
pub(crate) mod scripted;
pub mod supervisor;
pub(crate) mod telemetry;
pub(crate) mod transaction;
