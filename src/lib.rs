//! Courier: an actor-native Apache Kafka producer.
//!
//! Every produced message gets exactly one delivery report, routed to
//! whoever produced it. This crate is built in layers; see `ARCHITECTURE.md`
//! for the map.
//!
//! - [`protocol`]: the wire protocol, with no I/O.
//! - [`partitioner`]: which partition a record goes to.
//! - [`record`]: the record type users produce.
//! - [`connection`]: one TCP connection to one broker; the only code that
//!   touches a socket.

#![warn(missing_docs)]
// Errors hand the record back by value, so the caller can retry it without a
// clone; that makes them as large as a `Record`, on purpose.
#![allow(clippy::result_large_err)]

mod accumulator;
pub mod actors;
pub mod admin;
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals;
mod clock;
pub mod config;
pub mod connection;
mod idempotence;
pub mod kafka_error;
pub mod metadata;
pub mod partitioner;
mod producer;
pub mod protocol;
pub mod record;
pub mod report;
mod report_router;
pub mod retry;
pub mod stats;
pub mod subscription;

pub use actors::msgs::Produce;
pub use actors::supervisor::ProducerSupervisor;
pub use config::{Acks, ConfigError, ProducerConfig};
pub use producer::{BatchRejected, ProduceError, Producer, ProducerBuilder, Subscriber};
pub use record::{Header, Record, Topic};
pub use report::{Delivered, DeliveryError, DeliveryReport, ErrorKind, ReportMode};
pub use stats::StatsSnapshot;
pub use subscription::{ReportBatch, ReportStream};
