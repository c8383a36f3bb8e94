//! The [`Serializer`] trait, its error, and [`Raw`].

use std::future::Future;

use bytes::Bytes;

/// Which part of a record a serializer writes: schema registry subjects
/// differ by side (`orders-key`, `orders-value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The record's key.
    Key,
    /// The record's value.
    Value,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Key => "key",
            Side::Value => "value",
        })
    }
}

/// Turns a `T` into the bytes of a record's key or value for a topic.
///
/// It borrows the value: when it fails, the value is still the caller's,
/// and the [`SerializeError`] says why. It is async because a schema
/// registry serializer may have to ask the registry for a schema id (once:
/// it caches); the built-in serializers without a registry answer at once.
///
/// ```
/// use bytes::Bytes;
/// use courier_kafka::typed::{SerializeError, Serializer, Side};
///
/// /// Big-endian u64s, as Kafka's LongSerializer writes them.
/// struct BigEndian;
/// impl Serializer<u64> for BigEndian {
///     fn serialize(
///         &self,
///         _topic: &str,
///         _side: Side,
///         value: &u64,
///     ) -> impl std::future::Future<Output = Result<Bytes, SerializeError>> + Send {
///         std::future::ready(Ok(Bytes::copy_from_slice(&value.to_be_bytes())))
///     }
/// }
/// ```
pub trait Serializer<T: ?Sized>: Send + Sync {
    /// The bytes of `value`, as the `side` of a record for `topic`.
    fn serialize(
        &self,
        topic: &str,
        side: Side,
        value: &T,
    ) -> impl Future<Output = Result<Bytes, SerializeError>> + Send;
}

/// Why a key or value could not be serialized. The value itself was only
/// borrowed: the caller still has it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SerializeError {
    /// The value does not fit the format or its schema (a field the Avro
    /// schema lacks, a map key serde_json cannot write, …).
    #[error("cannot serialize the {side} for topic {topic:?}: {reason}")]
    Encode {
        /// The topic the record was for.
        topic: String,
        /// Key or value.
        side: Side,
        /// What went wrong, in the encoder's words.
        reason: String,
    },
    /// The schema registry did not give a schema id (feature
    /// `schema-registry`).
    #[cfg(feature = "schema-registry")]
    #[error("cannot serialize the {side} for topic {topic:?}: {error}")]
    Registry {
        /// The topic the record was for.
        topic: String,
        /// Key or value.
        side: Side,
        /// The registry's answer, or why there was none.
        error: RegistryError,
    },
}

impl SerializeError {
    /// An [`Encode`](SerializeError::Encode) error.
    pub fn encode(topic: &str, side: Side, reason: impl std::fmt::Display) -> SerializeError {
        SerializeError::Encode {
            topic: topic.to_string(),
            side,
            reason: reason.to_string(),
        }
    }

    /// Whether the same call may succeed later: the registry was
    /// unreachable, timed out, or answered 408, 429 or 5xx. An encoding
    /// error, or a registry's refusal (404, 409, 422, 401), will not mend
    /// by waiting.
    pub fn is_retriable(&self) -> bool {
        match self {
            SerializeError::Encode { .. } => false,
            #[cfg(feature = "schema-registry")]
            SerializeError::Registry { error, .. } => error.is_retriable(),
        }
    }
}

/// Bytes and strings as they are (Kafka's `StringSerializer` and
/// `ByteArraySerializer`): anything that is `AsRef<[u8]>`, so `str`,
/// `String`, `[u8]`, `Vec<u8>` and `Bytes`. Never fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl<T: AsRef<[u8]> + Sync + ?Sized> Serializer<T> for Raw {
    fn serialize(
        &self,
        _topic: &str,
        _side: Side,
        value: &T,
    ) -> impl Future<Output = Result<Bytes, SerializeError>> + Send {
        std::future::ready(Ok(Bytes::copy_from_slice(value.as_ref())))
    }
}

#[cfg(feature = "schema-registry")]
/// What a schema registry answered, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema registry {url}: {message}")]
#[non_exhaustive]
pub struct RegistryError {
    /// The registry's URL.
    pub url: String,
    /// The HTTP status, when it answered.
    pub status: Option<u16>,
    /// Confluent's `error_code` (40401 subject not found, 40403 schema not
    /// found, 409 incompatible, 42201 invalid schema, …), when given.
    pub error_code: Option<i64>,
    /// What happened, with the request and the registry's own message.
    pub message: String,
    pub(crate) retriable: bool,
}

#[cfg(feature = "schema-registry")]
impl RegistryError {
    /// Whether the same request may succeed later: no answer, or HTTP
    /// 408, 429 or 5xx.
    pub fn is_retriable(&self) -> bool {
        self.retriable
    }
}
