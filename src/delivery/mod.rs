//! The report path: what a batch owes, how a batch's outcome becomes its
//! records' reports, and the per-subscriber streams they are read from.
//!
//! This layer sits below batching: a batch *holds* its owed reports (an
//! [`owed::Owed`] ledger), so the ledger's types must not depend on
//! batches. Within the layer, files build on each other one way:
//! `entry` (one owed report, the chunk pool) ← `settlement` (a batch's
//! outcome, report building) ← `trace_context` (produce spans, feature
//! `opentelemetry`) ← `subscription` (a subscriber's queue and
//! `ReportStream`) ← `owed` (a batch's ledger and the caller's `ReplyTo`)
//! ← `router` (paying a ledger).

pub(crate) mod entry;
pub(crate) mod owed;
pub(crate) mod router;
pub(crate) mod settlement;
pub mod subscription;
#[cfg(feature = "opentelemetry")]
pub(crate) mod trace_context;
