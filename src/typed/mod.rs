//! Typed records: keys and values serialized from the application's own
//! types, and the schema registry wire format.
//!
//! - [`Serializer`] turns a key or value into bytes for a topic. It
//!   borrows the value, so a failed serialization leaves it with the
//!   caller and returns a [`SerializeError`] saying why: nothing is lost
//!   and nothing panics. [`Raw`] passes bytes and strings through;
//!   [`JsonSerializer`] (feature `json`, on by default) writes JSON with
//!   serde_json.
//! - [`TypedProducer`] pairs a [`Producer`](crate::Producer) with a key and
//!   a value serializer: [`TypedProducer::record`] serializes into a plain
//!   [`Record`](crate::Record), which goes down any report path (`send`,
//!   a subscription, an actor); `send` and `produce` are the short forms.
//!   Serialization, registry look-ups included, happens before the record
//!   reaches the producer: its produce path is the same as for bytes.
//! - With the `schema-registry` feature, `SchemaRegistry` is a Confluent
//!   Schema Registry client (subject name strategies,
//!   `auto.register.schemas` or `use.latest.version`, a cache), and
//!   `wire` writes the framing (magic byte 0, the schema id, and for
//!   Protobuf the message indexes). `avro` adds `AvroSerializer`
//!   (apache-avro), `protobuf` adds `ProtobufSerializer` (prost).
//!
//! The guide's page: [`crate::guide::typed_records`].
//!
//! Files build on each other one way: `serializer` (the trait and the
//! errors) ← `producer`, `json`; `serializer`, `wire` and `http` ←
//! `registry` ← `avro`, `protobuf`; this file only gathers them.

#[cfg(feature = "avro")]
mod avro;
#[cfg(feature = "schema-registry")]
mod http;
#[cfg(feature = "json")]
mod json;
mod producer;
#[cfg(feature = "protobuf")]
mod protobuf;
#[cfg(feature = "schema-registry")]
mod registry;
mod serializer;
#[cfg(feature = "schema-registry")]
pub mod wire;

#[cfg(feature = "avro")]
pub use avro::AvroSerializer;
#[cfg(feature = "json")]
pub use json::JsonSerializer;
pub use producer::{TypedError, TypedProducer};
#[cfg(feature = "protobuf")]
pub use protobuf::ProtobufSerializer;
#[cfg(feature = "schema-registry")]
pub use registry::{
    RegisteredSchema, RegistryBuilder, SchemaRegistry, SchemaType, SubjectNameStrategy,
};
#[cfg(feature = "schema-registry")]
pub use serializer::RegistryError;
pub use serializer::{Raw, SerializeError, Serializer, Side};
