//! Every Kafka error code, classified in one table (after franz-go's
//! `kerr`): retry logic reads flags here instead of keeping ad-hoc lists.
//!
//! The base classification — retriable or not — is the Java client's
//! (`org.apache.kafka.common.protocol.Errors`), as the `kafka-protocol`
//! crate's `ResponseError` carries it. This module adds what the producer
//! needs on top: which errors mean our metadata is stale, and which ones
//! concern the idempotent producer's sequence state.
//!
//! # References
//! - <https://kafka.apache.org/protocol#protocol_error_codes>
//! - KIP-98 (idempotent producer errors), KIP-360 (UNKNOWN_PRODUCER_ID recovery)

pub use kafka_protocol::error::ResponseError;

/// What the producer does about one error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorClass {
    /// The error.
    pub error: ResponseError,
    /// Send the batch again (within `delivery.timeout.ms`).
    pub retriable: bool,
    /// Our view of leaders is probably stale: refresh metadata first.
    pub refresh_metadata: bool,
    /// The broker lost or rejected this producer's sequence state: the
    /// idempotent producer must bump its epoch (or get a new id) before
    /// the partition can continue.
    pub sequence_reset: bool,
}

/// Classifies a response error code; `None` for 0 (no error).
///
/// ```
/// use courier::kafka_error::{classify, ResponseError};
/// let c = classify(6).unwrap();
/// assert_eq!(c.error, ResponseError::NotLeaderOrFollower);
/// assert!(c.retriable && c.refresh_metadata);
/// assert!(!classify(10).unwrap().retriable); // MESSAGE_TOO_LARGE
/// assert!(classify(0).is_none());
/// ```
pub fn classify(code: i16) -> Option<ErrorClass> {
    use ResponseError as E;
    let error = ResponseError::try_from_code(code)?;
    let refresh_metadata = matches!(
        error,
        E::NotLeaderOrFollower
            | E::UnknownTopicOrPartition
            | E::LeaderNotAvailable
            | E::FencedLeaderEpoch
            | E::UnknownLeaderEpoch
            | E::KafkaStorageError
            | E::NetworkException
            | E::NotController
            | E::ReplicaNotAvailable
    );
    let sequence_reset = matches!(
        error,
        E::OutOfOrderSequenceNumber | E::UnknownProducerId | E::InvalidProducerEpoch
    );
    let retriable = match error {
        // Recoverable for an idempotent producer once it bumps its epoch
        // (KIP-360); the batch is then retried with fresh sequences.
        E::OutOfOrderSequenceNumber | E::UnknownProducerId => true,
        e => e.is_retriable(),
    };
    Some(ErrorClass {
        error,
        retriable,
        refresh_metadata,
        sequence_reset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_every_code_kafka_defines() {
        // Every code from -1 to 130 classifies; the known ones by name.
        let mut named = 0;
        for code in -1i16..=130 {
            if code == 0 {
                assert!(classify(0).is_none());
                continue;
            }
            let c = classify(code).unwrap();
            assert_eq!(c.error.code(), code);
            if !matches!(c.error, ResponseError::Unknown(_)) {
                named += 1;
            }
        }
        assert!(named > 100, "only {named} named codes");
    }

    #[test]
    fn producer_relevant_classifications() {
        let retriable_refresh = [6, 3, 5, 74, 75, 56];
        for code in retriable_refresh {
            let c = classify(code).unwrap();
            assert!(c.retriable && c.refresh_metadata, "{code}: {c:?}");
        }
        let retriable_only = [7, 19, 20, 13, 2];
        for code in retriable_only {
            let c = classify(code).unwrap();
            assert!(c.retriable, "{code}: {c:?}");
        }
        assert!(!classify(7).unwrap().refresh_metadata); // REQUEST_TIMED_OUT
        assert!(!classify(19).unwrap().refresh_metadata); // NOT_ENOUGH_REPLICAS
        let fatal = [10, 29, 87, 18, 35, 43, -1];
        for code in fatal {
            let c = classify(code).unwrap();
            assert!(!c.retriable, "{code}: {c:?}");
        }
        for code in [45, 59] {
            let c = classify(code).unwrap();
            assert!(c.retriable && c.sequence_reset, "{code}: {c:?}");
        }
        // An unknown future code is not retried: it fails the batch.
        assert!(!classify(30_000).unwrap().retriable);
    }
}
