//! Courier: an actor-native Apache Kafka producer in which every produced
//! record gets exactly one delivery report (its partition, offset and
//! timestamp, or the error with the record handed back), routed to
//! whoever produced it: an awaited future, a subscription's stream, or an
//! actor.
//!
//! Settings take the Java client's names (and librdkafka's aliases), so
//! an existing config map carries over.
//!
//! ```no_run
//! use std::time::Duration;
//! use courier_kafka::{Producer, Record, ReportMode};
//! use futures::StreamExt;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let producer = Producer::builder()
//!     .bootstrap("127.0.0.1:9092")
//!     .set("linger.ms", "5")
//!     .set("compression.type", "lz4")
//!     .build()?; // a bad value is an error naming the property
//!
//! // 1. Await one report.
//! let delivered = producer.send(Record::to("orders").key("user-7").value("v")).await?;
//! println!("partition {} offset {:?}", delivered.partition, delivered.offset);
//!
//! // 2. A subscription: records produced through `sub` report to `reports`
//! //    (a `futures::Stream`), and only there.
//! let (sub, mut reports) = producer.subscribe(ReportMode::All);
//! tokio::spawn(async move {
//!     while let Some(report) = reports.next().await {
//!         // DeliveryReport::Delivered(..) or DeliveryReport::Failed(..)
//!     }
//! });
//! sub.produce(Record::to("orders").value("v")).await?;
//!
//! // 3. Fire and forget: no report, and no cost for one.
//! producer.produce(Record::to("metrics").value("v")).await?;
//!
//! // 4. Blocking, from code that is not async.
//! producer.send_blocking(Record::to("orders").value("v"), Duration::from_secs(10))?;
//!
//! producer.close().await; // flushes: every record gets its report
//! # Ok(()) }
//! ```
//!
//! The four report paths (awaiting `send`, a subscription's
//! [`ReportStream`], an actor's recipient through [`Produce`] or
//! [`Producer::produce_to`], and fire-and-forget [`Producer::produce`])
//! are in [`guide::producing`]. The rest of the guide:
//!
//! - [`guide::configuration`]: every property, with the Java client's
//!   and librdkafka's names and the defaults;
//! - [`guide::security`]: TLS and SASL;
//! - [`guide::delivery_guarantees`], [`guide::transactions`],
//!   [`guide::retry_actors`];
//! - [`guide::testing`]: the producer double in [`testing`];
//! - [`guide::metrics_and_tracing`], [`guide::admin`],
//!   [`guide::command_line`];
//! - [`guide::actix`]: [`ProducerBuilder::start`] inside an actix system,
//!   [`ProducerBuilder::build`] anywhere else;
//! - [`guide::migrating_from_rdkafka`];
//! - [`guide::contributing`]: the test suite and publishing.
//!
//! Every call's error converts into [`Error`], for `?`;
//! [`Error::broker_error`] names a broker's refusal as a [`BrokerError`].

#![warn(missing_docs)]
// Errors hand the record back by value, so the caller can retry it without a
// clone; that makes them as large as a `Record`, on purpose.
#![allow(clippy::result_large_err)]

// `#[doc(hidden)] pub` below, with the `unstable-internals` feature only:
// internals public for the fuzz targets, the benches and the wire-level
// tests, not part of the API a user builds on.
mod actors;
pub mod admin;
mod batching;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod bench_internals;
mod clock;
pub mod config;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod connection;
#[cfg(not(feature = "unstable-internals"))]
mod connection;
mod delivery;
mod engine;
mod error;
pub mod guide;
mod idempotence;
pub mod interceptor;
// The producer's own table of error codes (classify) and the protocol
// crate's ResponseError: internals. Users match on BrokerError.
mod kafka_error;
mod metadata;
mod metric_handles;
pub mod partitioner;
mod producer;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod protocol;
#[cfg(not(feature = "unstable-internals"))]
mod protocol;
pub mod record;
pub mod report;
pub mod resolve;
pub mod retry;
pub mod security;
pub mod stats;
mod sync;
pub mod testing;
mod transaction;
pub mod typed;

pub use actors::msgs::Produce;
pub use config::{Acks, ConfigError, ProducerConfig};
pub use delivery::subscription::{ReportBatch, ReportStream};
pub use engine::error::{BatchRejected, ProduceError, TimedOut};
pub use error::Error;
pub use interceptor::ProducerInterceptor;
pub use kafka_error::BrokerError;
pub use metric_handles::names as metric_names;
pub use producer::{
    ActorThread, BlockingSendError, DeliveryFuture, Producer, ProducerBuilder, Subscriber,
    TransactionReport, TransactionReports, DEFAULT_REPORT_MEMORY,
};
pub use protocol::record_batch::Compression;
pub use record::{Header, Record, Topic};
pub use report::{Delivered, DeliveryError, DeliveryReport, ErrorKind, ReportMode};
pub use stats::StatsSnapshot;
pub use transaction::{GroupMetadata, TransactionError};

/// README.md's Rust examples, compiled by `cargo test --doc`.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
