//! [`JsonSerializer`]: plain JSON through serde_json (the `json` feature).

use std::future::Future;

use bytes::Bytes;

use super::serializer::{SerializeError, Serializer, Side};

/// Any `serde::Serialize` type as JSON text (serde_json), with no schema
/// registry framing: what a consumer's JSON deserializer without a
/// registry reads (Kafka Connect's `JsonConverter` with
/// `schemas.enable=false`, `json.loads` on the value).
///
/// ```
/// # async fn demo() {
/// use courier_kafka::typed::{JsonSerializer, Serializer, Side};
/// let bytes = JsonSerializer.serialize("orders", Side::Value, &serde_json::json!({"total": 12})).await.unwrap();
/// assert_eq!(&bytes[..], br#"{"total":12}"#);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonSerializer;

impl<T: serde::Serialize + Sync + ?Sized> Serializer<T> for JsonSerializer {
    fn serialize(
        &self,
        topic: &str,
        side: Side,
        value: &T,
    ) -> impl Future<Output = Result<Bytes, SerializeError>> + Send {
        std::future::ready(
            serde_json::to_vec(value)
                .map(Bytes::from)
                .map_err(|e| SerializeError::encode(topic, side, e)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[tokio::test]
    async fn a_value_serde_json_refuses_is_an_error_and_stays_with_the_caller() {
        // serde_json writes only string-like map keys.
        let value: HashMap<Vec<u8>, u8> = [(vec![1u8], 1u8)].into_iter().collect();
        let err = JsonSerializer
            .serialize("orders", Side::Key, &value)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("key") && text.contains("\"orders\""),
            "{text}"
        );
        assert!(!err.is_retriable());
        assert_eq!(value.len(), 1, "the value is still the caller's");
    }
}
