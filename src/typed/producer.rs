//! [`TypedProducer`]: a [`Producer`] with a key and a value serializer.

use std::marker::PhantomData;

use crate::engine::error::ProduceError;
use crate::producer::Producer;
use crate::record::{Record, Topic};
use crate::report::{Delivered, DeliveryError};

use super::serializer::{SerializeError, Serializer, Side};

/// A [`Producer`] that serializes keys of type `K` with `KS` and values
/// of type `V` with `VS`.
///
/// [`record`](TypedProducer::record) serializes into a plain
/// [`Record`], which any report path takes: `producer.send(record)`,
/// `subscriber.produce(record)`, `producer.produce_to(record, recipient)`
/// or the [`Produce`](crate::Produce) message; add headers, a partition
/// or a timestamp to it first if wanted. [`send`](TypedProducer::send)
/// and [`produce`](TypedProducer::produce) are the short forms.
///
/// Serialization (and a registry look-up, the first time a subject is
/// used) is done in the calling task, before the record reaches the
/// producer: the produce path, and the actor threads, never wait on it.
///
/// ```no_run
/// # #[cfg(feature = "json")]
/// # async fn demo() -> Result<(), courier_kafka::Error> {
/// use courier_kafka::typed::{JsonSerializer, Raw, TypedProducer};
/// use courier_kafka::{Producer, ReportMode};
///
/// #[derive(serde::Serialize)]
/// struct Order { id: u64, total: u32 }
///
/// let producer = Producer::builder().bootstrap("localhost:9092").build()?;
/// let orders: TypedProducer<str, Order, _, _> = TypedProducer::new(producer.clone(), Raw, JsonSerializer);
/// let order = Order { id: 7, total: 12 };
///
/// // Await the report.
/// orders.send("orders", Some("customer-7"), Some(&order)).await?;
///
/// // Or build the record and take any report path.
/// let record = orders.record("orders", Some("customer-7"), Some(&order)).await?.header("source", "web");
/// let (sub, _reports) = producer.subscribe(ReportMode::All);
/// sub.produce(record).await?;
/// # Ok(()) }
/// ```
pub struct TypedProducer<K: ?Sized, V: ?Sized, KS, VS> {
    producer: Producer,
    key: KS,
    value: VS,
    types: PhantomData<fn(&K, &V)>,
}

impl<K: ?Sized, V: ?Sized, KS: Clone, VS: Clone> Clone for TypedProducer<K, V, KS, VS> {
    fn clone(&self) -> Self {
        TypedProducer {
            producer: self.producer.clone(),
            key: self.key.clone(),
            value: self.value.clone(),
            types: PhantomData,
        }
    }
}

impl<K: ?Sized, V: ?Sized, KS, VS> std::fmt::Debug for TypedProducer<K, V, KS, VS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedProducer").finish_non_exhaustive()
    }
}

/// Why a typed record was not produced, or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TypedError {
    /// The key or value could not be serialized; nothing was produced,
    /// and the value is still the caller's (it was borrowed).
    #[error(transparent)]
    Serialize(#[from] SerializeError),
    /// The producer did not take the record (it hands the serialized
    /// record back).
    #[error(transparent)]
    Produce(#[from] ProduceError),
    /// The record's delivery report was a failure (it hands the serialized
    /// record back).
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

impl<K, V, KS, VS> TypedProducer<K, V, KS, VS>
where
    K: ?Sized + Sync,
    V: ?Sized + Sync,
    KS: Serializer<K>,
    VS: Serializer<V>,
{
    /// Records through `producer`, keys serialized by `key`, values by
    /// `value`.
    pub fn new(producer: Producer, key: KS, value: VS) -> Self {
        TypedProducer {
            producer,
            key,
            value,
            types: PhantomData,
        }
    }

    /// The producer underneath.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The key serializer.
    pub fn key_serializer(&self) -> &KS {
        &self.key
    }

    /// The value serializer.
    pub fn value_serializer(&self) -> &VS {
        &self.value
    }

    /// A record for `topic` with `key` and `value` serialized (`None` is
    /// a null key or value: a tombstone for a null value), ready for any
    /// produce call.
    pub async fn record(
        &self,
        topic: impl Into<Topic>,
        key: Option<&K>,
        value: Option<&V>,
    ) -> Result<Record, SerializeError> {
        let topic = topic.into();
        let mut record = Record::to(topic);
        if let Some(k) = key {
            record.key = Some(self.key.serialize(topic.as_str(), Side::Key, k).await?);
        }
        if let Some(v) = value {
            record.value = Some(self.value.serialize(topic.as_str(), Side::Value, v).await?);
        }
        Ok(record)
    }

    /// Serializes and produces, and waits for the delivery report
    /// ([`Producer::send`]).
    pub async fn send(
        &self,
        topic: impl Into<Topic>,
        key: Option<&K>,
        value: Option<&V>,
    ) -> Result<Delivered, TypedError> {
        let record = self.record(topic, key, value).await?;
        Ok(self.producer.send(record).await?)
    }

    /// Serializes and produces with no report ([`Producer::produce`]).
    pub async fn produce(
        &self,
        topic: impl Into<Topic>,
        key: Option<&K>,
        value: Option<&V>,
    ) -> Result<(), TypedError> {
        let record = self.record(topic, key, value).await?;
        Ok(self.producer.produce(record).await?)
    }
}
