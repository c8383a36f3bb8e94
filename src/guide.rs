#![doc = include_str!("../docs/guide/README.md")]
//!
//! The pages are the markdown files in `docs/guide/` of the repository;
//! their links between pages are written for reading them there.

#[doc = include_str!("../docs/guide/producing.md")]
pub mod producing {}

#[doc = include_str!("../docs/guide/configuration.md")]
pub mod configuration {}

#[doc = include_str!("../docs/guide/security.md")]
pub mod security {}

#[doc = include_str!("../docs/guide/delivery-guarantees.md")]
pub mod delivery_guarantees {}

#[doc = include_str!("../docs/guide/transactions.md")]
pub mod transactions {}

#[doc = include_str!("../docs/guide/retry-actors.md")]
pub mod retry_actors {}

#[doc = include_str!("../docs/guide/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/guide/metrics-and-tracing.md")]
pub mod metrics_and_tracing {}

#[doc = include_str!("../docs/guide/admin.md")]
pub mod admin {}

#[doc = include_str!("../docs/guide/command-line.md")]
pub mod command_line {}

#[doc = include_str!("../docs/guide/actix.md")]
pub mod actix {}

#[doc = include_str!("../docs/guide/migrating-from-rdkafka.md")]
pub mod migrating_from_rdkafka {}

#[doc = include_str!("../docs/guide/contributing.md")]
pub mod contributing {}

#[doc = include_str!("../docs/guide/typed-records.md")]
pub mod typed_records {}
