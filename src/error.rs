//! One error type for `?`: every error a Courier call returns converts into
//! [`Error`], and [`Error::broker_error`] is one way to ask whichever call
//! failed whether a broker refused it, and with which code. The call-level
//! types stay: each says exactly what its call can do (a `ProduceError`
//! hands the record back untaken, a `DeliveryError` is a record's report).

use crate::admin::AdminError;
use crate::config::ConfigError;
use crate::engine::error::{BatchRejected, ProduceError, TimedOut};
use crate::kafka_error::BrokerError;
use crate::producer::BlockingSendError;
use crate::record::Record;
use crate::report::{DeliveryError, ErrorKind};
use crate::transaction::TransactionError;
use crate::typed::{SerializeError, TypedError};

/// Any error of a Courier call.
///
/// ```no_run
/// use courier_kafka::{Producer, Record};
/// async fn run() -> Result<(), courier_kafka::Error> {
///     courier_kafka::admin::create_topic_if_missing("localhost:9092", "orders", 3, 1).await?;
///     let producer = Producer::builder().bootstrap("localhost:9092").build()?;
///     producer.send(Record::to("orders").value("a")).await?;
///     producer.close().await;
///     Ok(())
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad setting ([`ProducerBuilder::build`](crate::ProducerBuilder::build)).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A record not taken (handed back).
    #[error(transparent)]
    Produce(#[from] ProduceError),
    /// A record that failed (its report).
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    /// A batch call that stopped part-way.
    #[error(transparent)]
    Batch(#[from] BatchRejected),
    /// An admin call.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A transaction call.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
    /// A blocking send.
    #[error(transparent)]
    BlockingSend(#[from] BlockingSendError),
    /// A bounded flush or close ran out of time.
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
    /// A typed record's key or value could not be serialized
    /// ([`typed`](crate::typed)); nothing was produced.
    #[error(transparent)]
    Serialize(#[from] SerializeError),
}

impl From<TypedError> for Error {
    fn from(e: TypedError) -> Error {
        match e {
            TypedError::Serialize(e) => Error::Serialize(e),
            TypedError::Produce(e) => Error::Produce(e),
            TypedError::Delivery(e) => Error::Delivery(e),
        }
    }
}

impl Error {
    /// The broker's error, when a broker refused (a record, a transaction
    /// step, an admin request), whichever call it was.
    ///
    /// ```
    /// use courier_kafka::{BrokerError, Error};
    /// fn advice(e: &Error) -> &'static str {
    ///     match e.broker_error() {
    ///         Some(BrokerError::TopicAuthorizationFailed) => "grant WRITE on the topic",
    ///         Some(BrokerError::MessageTooLarge | BrokerError::RecordListTooLarge) => "smaller records",
    ///         Some(e) if e.is_retriable() => "try again later",
    ///         Some(_) => "refused",
    ///         None => "not the broker",
    ///     }
    /// }
    /// let refused = courier_kafka::admin::AdminError::Refused { topic: "t".into(), code: 29, message: None };
    /// assert_eq!(advice(&refused.into()), "grant WRITE on the topic");
    /// ```
    pub fn broker_error(&self) -> Option<BrokerError> {
        let kind = match self {
            Error::Delivery(e) | Error::BlockingSend(BlockingSendError::Failed(e)) => e.kind,
            Error::Transaction(
                TransactionError::Abortable { kind, .. } | TransactionError::Fatal { kind, .. },
            ) => *kind,
            Error::Admin(e) => return e.broker_error(),
            _ => return None,
        };
        match kind {
            ErrorKind::Broker(r) => Some(r),
            _ => None,
        }
    }

    /// The record handed back, when the error carries one (not taken, or
    /// failed), so that it can be retried without a copy.
    pub fn into_record(self) -> Option<Record> {
        match self {
            Error::Produce(e) => Some(e.into_record()),
            Error::Delivery(e) | Error::BlockingSend(BlockingSendError::Failed(e)) => {
                Some(*e.record)
            }
            Error::BlockingSend(BlockingSendError::Rejected(e)) => Some(e.into_record()),
            Error::BlockingSend(BlockingSendError::OnActorThread(r)) => Some(r),
            Error::Batch(e) => Some(e.reason.into_record()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_error_is_found_whichever_call_failed() {
        let refused = DeliveryError {
            kind: ErrorKind::Broker(BrokerError::TopicAuthorizationFailed),
            message: "refused".into(),
            partition: Some(0),
            attempts: 1,
            record: Box::new(Record::to("t").value("v")),
        };
        let e: Error = refused.into();
        assert_eq!(
            e.broker_error(),
            Some(BrokerError::TopicAuthorizationFailed)
        );
        assert_eq!(e.into_record().unwrap().value.as_deref(), Some(&b"v"[..]));
        let e: Error = TransactionError::Fatal {
            kind: ErrorKind::Broker(BrokerError::ProducerFenced),
            message: "fenced".into(),
        }
        .into();
        assert_eq!(e.broker_error(), Some(BrokerError::ProducerFenced));
        let e: Error = ProduceError::Closed(Box::new(Record::to("t"))).into();
        assert_eq!(e.broker_error(), None);
        assert!(e.into_record().is_some());
    }
}
