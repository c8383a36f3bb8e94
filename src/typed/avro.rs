//! [`AvroSerializer`]: Avro datums (apache-avro) in the schema registry
//! wire format (the `avro` feature).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use apache_avro::Schema;
use bytes::Bytes;

use super::registry::{SchemaRegistry, SchemaType};
use super::serializer::{SerializeError, Serializer, Side};
use super::wire;

/// Any `serde::Serialize` value as an Avro datum of a schema, framed for
/// the schema registry (magic byte 0, the schema's id, the datum: what
/// Confluent's `KafkaAvroSerializer` writes, not an object container
/// file).
///
/// The schema is registered under the record's subject (or looked up,
/// or the subject's latest taken instead, as the [`SchemaRegistry`]'s
/// settings say) on the first record of each subject; later records read
/// the id from the registry client's cache. With `use.latest.version`
/// the value is written with the latest schema, which it must fit.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use courier_kafka::typed::{AvroSerializer, Raw, SchemaRegistry, TypedProducer};
/// #[derive(serde::Serialize)]
/// struct Order { id: i64, total: i32 }
/// let registry = SchemaRegistry::new("http://localhost:8081")?;
/// let avro = AvroSerializer::new(registry, r#"{"type":"record","name":"Order","namespace":"shop",
///     "fields":[{"name":"id","type":"long"},{"name":"total","type":"int"}]}"#)?;
/// let producer = courier_kafka::Producer::builder().bootstrap("localhost:9092").build()?;
/// let orders: TypedProducer<str, Order, _, _> = TypedProducer::new(producer, Raw, avro);
/// orders.send("orders", Some("customer-7"), Some(&Order { id: 7, total: 12 })).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AvroSerializer {
    registry: SchemaRegistry,
    schema: Arc<Schema>,
    /// As given: what is registered.
    text: Arc<str>,
    /// The record's full name, for the record name strategies.
    name: Option<String>,
    /// Schemas the registry named by id (`use.latest.version`), parsed
    /// once.
    by_id: Arc<Mutex<HashMap<u32, Arc<Schema>>>>,
}

impl std::fmt::Debug for AvroSerializer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AvroSerializer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AvroSerializer {
    /// A serializer of values to `schema` (Avro's JSON schema text),
    /// through `registry`; an error when the schema does not parse.
    pub fn new(registry: SchemaRegistry, schema: &str) -> Result<AvroSerializer, SerializeError> {
        let parsed = Schema::parse_str(schema).map_err(|e| {
            SerializeError::encode(
                "(none)",
                Side::Value,
                format!("the Avro schema does not parse: {e}"),
            )
        })?;
        Ok(AvroSerializer {
            registry,
            name: parsed.name().map(|n| n.fullname(None)),
            schema: Arc::new(parsed),
            text: schema.into(),
            by_id: Arc::default(),
        })
    }

    /// The schema to write with for a registry answer: ours, unless the
    /// answer has another text (the subject's latest).
    fn writer_schema(&self, id: u32, text: Option<&str>) -> Result<Arc<Schema>, String> {
        let Some(text) = text.filter(|t| *t != &*self.text) else {
            return Ok(self.schema.clone());
        };
        let mut by_id = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = by_id.get(&id) {
            return Ok(s.clone());
        }
        let parsed = Arc::new(
            Schema::parse_str(text)
                .map_err(|e| format!("the registry's schema {id} does not parse: {e}"))?,
        );
        by_id.insert(id, parsed.clone());
        Ok(parsed)
    }
}

impl<T: serde::Serialize + Sync + ?Sized> Serializer<T> for AvroSerializer {
    async fn serialize(&self, topic: &str, side: Side, value: &T) -> Result<Bytes, SerializeError> {
        let encode = |e: String| SerializeError::encode(topic, side, e);
        // The value first: a value that cannot be an Avro value asks
        // nothing of the registry.
        let avro = apache_avro::to_value(value).map_err(|e| encode(e.to_string()))?;
        let subject = self
            .registry
            .subject(topic, side, self.name.as_deref())
            .ok_or_else(|| {
                encode(
                    "a record name strategy needs a named Avro schema (record, enum or fixed)"
                        .into(),
                )
            })?;
        let registered = self
            .registry
            .resolve(&subject, SchemaType::Avro, &self.text)
            .await
            .map_err(|error| SerializeError::Registry {
                topic: topic.to_string(),
                side,
                error,
            })?;
        let schema = self
            .writer_schema(registered.id, registered.schema.as_deref())
            .map_err(encode)?;
        let resolved = avro
            .resolve(&schema)
            .map_err(|e| encode(format!("the value does not fit the schema: {e}")))?;
        let datum =
            apache_avro::to_avro_datum(&schema, resolved).map_err(|e| encode(e.to_string()))?;
        let mut out = Vec::with_capacity(5 + datum.len());
        wire::write_header(&mut out, registered.id);
        out.extend_from_slice(&datum);
        Ok(Bytes::from(out))
    }
}
