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

pub mod connection;
pub mod partitioner;
pub mod protocol;
pub mod record;
