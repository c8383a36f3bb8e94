//! Courier: an actor-native Apache Kafka producer.
//!
//! Every produced message gets exactly one delivery report, routed to
//! whoever produced it. This crate is built in layers; see `ARCHITECTURE.md`
//! for the map.
//!
//! The layers, each importing only from those above it in this list
//! (`tests/layers.rs` enforces it):
//!
//! 1. [`protocol`]: the wire protocol, with no I/O.
//! 2. Foundation types: `sync` (the lock helper), `clock`, [`record`],
//!    [`kafka_error`], [`report`], [`config`], [`metadata`], `metric_handles`
//!    (the `metrics` feature; names in [`metric_names`]), [`stats`],
//!    `idempotence`, [`partitioner`].
//! 3. I/O: [`connection`] (one TCP connection to one broker; the only code
//!    that touches a socket) and [`admin`].
//! 4. `delivery`: owed reports, routing, subscription streams.
//! 5. `batching`: batches, partition queues, the accumulator.
//! 6. `engine`: the shared core that producer handles and actors share.
//! 7. [`actors`]: supervisor, partitioner actor, broker connections.
//! 8. `producer`: the public face ([`Producer`], [`ProducerBuilder`],
//!    [`Subscriber`]).
//! 9. [`retry`]: retry actors on top of the producer.

#![warn(missing_docs)]
// Errors hand the record back by value, so the caller can retry it without a
// clone; that makes them as large as a `Record`, on purpose.
#![allow(clippy::result_large_err)]

pub mod actors;
pub mod admin;
mod batching;
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals;
mod clock;
pub mod config;
pub mod connection;
mod delivery;
mod engine;
mod idempotence;
pub mod kafka_error;
pub mod metadata;
mod metric_handles;
pub mod partitioner;
mod producer;
pub mod protocol;
pub mod record;
pub mod report;
pub mod retry;
pub mod security;
pub mod stats;
mod sync;
mod transaction;

pub use actors::msgs::Produce;
pub use actors::supervisor::ProducerSupervisor;
pub use config::{Acks, ConfigError, ProducerConfig};
pub use delivery::subscription::{ReportBatch, ReportStream};
pub use engine::error::{BatchRejected, ProduceError, TimedOut};
pub use metric_handles::names as metric_names;
pub use producer::{
    DeliveryFuture, Producer, ProducerBuilder, Subscriber, TransactionReport, TransactionReports,
};
pub use record::{Header, Record, Topic};
pub use report::{Delivered, DeliveryError, DeliveryReport, ErrorKind, ReportMode};
pub use stats::StatsSnapshot;
pub use transaction::{GroupMetadata, TransactionError};
