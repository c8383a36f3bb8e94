//! The Kafka wire protocol, sans I/O.
//!
//! Everything here turns values into bytes and bytes into values. Nothing in
//! this module imports tokio, actix or a socket type: the broker connection
//! owns the socket and hands this layer the bytes it reads, from which
//! [`frame::FrameDecoder`] pulls whole frames. That keeps every encoder and
//! decoder testable with plain byte slices, and keeps the hot path free of
//! `await` points.
//!
//! - [`frame`]: length prefixes and correlation ids.
//! - [`message`]: request headers and bodies out, response headers and bodies
//!   in, using the `kafka-protocol` crate's schema types.
//! - [`produce`]: the Produce request written around the batches' own bytes
//!   (no copy of a batch into a request buffer).
//! - [`leader_hint`]: what a Produce answer says about a partition's new
//!   leader (KIP-951: `CurrentLeader`, `NodeEndpoints`).
//! - [`versions`]: the API versions we implement and the negotiation with a
//!   broker's ApiVersions answer.
//! - [`record_batch`]: the hand-written RecordBatch v2 encoder, the one piece of
//!   the protocol on the per-record hot path; its codecs (zstd with one
//!   context per thread, kept in a `thread_local!` for the thread's life);
//!   and reading a batch back into its records (`decode`).
//! - [`sasl`]: the SASL mechanisms' bytes (PLAIN, SCRAM, OAUTHBEARER) and
//!   their checks.
//!
//! # References
//! - Kafka protocol guide: <https://kafka.apache.org/protocol>
//! - Record batch format: <https://kafka.apache.org/documentation/#recordbatch>
//! - KIP-482 (flexible versions and tagged fields)

pub mod frame;
pub mod leader_hint;
pub mod message;
pub mod otlp;
pub mod produce;
pub mod record_batch;
pub mod sasl;
pub mod versions;

pub use kafka_protocol::messages;
pub use kafka_protocol::messages::ApiKey;

/// A protocol-level failure: a frame or message that cannot be encoded or
/// decoded, or a broker whose API versions do not overlap with ours.
///
/// Every variant means the bytes on one connection can no longer be trusted,
/// except the version errors, which mean the broker cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame's length prefix was negative.
    #[error("frame length prefix is negative ({0})")]
    NegativeFrameLength(i32),
    /// A frame claimed more bytes than the configured maximum.
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// The length the frame claimed.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The bytes ended before the named part was complete.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// `kafka-protocol` refused to encode a message.
    #[error("cannot encode {api:?} v{version}: {reason}")]
    Encode {
        /// The API being encoded.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// What the encoder said.
        reason: String,
    },
    /// A response body did not decode.
    #[error("malformed {api:?} v{version} response: {reason}")]
    Decode {
        /// The API of the request this answers.
        api: ApiKey,
        /// The negotiated version.
        version: i16,
        /// What the decoder said.
        reason: String,
    },
    /// The response's correlation id was not the one expected.
    #[error("response correlation id {got} does not match request {expected}")]
    CorrelationMismatch {
        /// The id the request carried.
        expected: i32,
        /// The id the response carried.
        got: i32,
    },
    /// The broker does not offer an API we need, or only versions older than
    /// any we implement.
    #[error(
        "broker too old for {api:?}: it offers {offered}, Courier needs v{min_needed} or newer"
    )]
    BrokerTooOld {
        /// The API in question.
        api: ApiKey,
        /// What the broker offered, for the message ("none" or "vA..=vB").
        offered: String,
        /// The oldest version Courier implements.
        min_needed: i16,
    },
    /// The broker only offers versions newer than any we implement.
    #[error("broker too new for {api:?}: it offers v{broker_min}..=v{broker_max}, Courier implements up to v{max_known}")]
    BrokerTooNew {
        /// The API in question.
        api: ApiKey,
        /// The oldest version the broker accepts.
        broker_min: i16,
        /// The newest version the broker accepts.
        broker_max: i16,
        /// The newest version Courier implements.
        max_known: i16,
    },
    /// The broker answered ApiVersions with an error code.
    #[error("ApiVersions failed with error code {0}")]
    ApiVersionsError(i16),
}
