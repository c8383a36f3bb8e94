//! Kafka's error codes: [`BrokerError`], the user's name for a broker's
//! answer, and [`classify`], the producer's own table of what to do about
//! each code (after franz-go's `kerr`): retry logic reads flags here
//! instead of keeping ad-hoc lists.
//!
//! The base classification — retriable or not — is the Java client's
//! (`org.apache.kafka.common.protocol.Errors`), as the `kafka-protocol`
//! crate's `ResponseError` carries it. [`classify`] adds what the producer
//! needs on top: which errors mean our metadata is stale, and which ones
//! concern the idempotent producer's sequence state.
//!
//! Why two types: `ResponseError` names every code but is the protocol
//! crate's (a vendored fork, see vendor/kafka-protocol/COURIER-PATCH.md), so
//! naming it in Courier's API would make each of its releases a breaking
//! change of Courier's. [`BrokerError`] is Courier's own, names the codes a
//! producer, a transaction or an admin call meets, and carries any other
//! code as [`BrokerError::Other`]. The producer's internals keep using
//! `ResponseError`; a report converts at the edge (`From` both ways,
//! lossless).
//!
//! # References
//! - <https://kafka.apache.org/protocol#protocol_error_codes>
//! - KIP-98 (idempotent producer errors), KIP-360 (UNKNOWN_PRODUCER_ID recovery)
//! - franz-go's `pkg/kerr/kerr.go` (one table: code, name, retriable)

use std::fmt;

pub use kafka_protocol::error::ResponseError;

/// Declares [`BrokerError`] and its table, one row per named code: the
/// variant, the code, Kafka's name, whether it is retriable (the Java
/// client's `RetriableException` subclasses, as kafka-protocol and
/// franz-go's `kerr` have it) and the doc line.
macro_rules! broker_errors {
    ( $( ($variant:ident, $code:literal, $name:literal, $retriable:literal, $doc:literal) ),* $(,)? ) => {
        /// A broker's error, by name: what [`ErrorKind::Broker`](crate::ErrorKind::Broker)
        /// carries and [`Error::broker_error`](crate::Error::broker_error)
        /// returns, whichever call the broker refused.
        ///
        /// The codes a producer, a transaction or an admin call meets are
        /// named; any other code is [`Other`](BrokerError::Other) with its
        /// number. New names may be added in a minor release (the enum is
        /// `#[non_exhaustive]`): a code that is `Other(n)` today may have a
        /// name tomorrow, so match names, not `Other(n)`, and compare
        /// [`code`](BrokerError::code)s when a number is what you have.
        ///
        /// ```
        /// use courier_kafka::{BrokerError, ErrorKind};
        /// # fn handle(kind: ErrorKind) {
        /// match kind {
        ///     ErrorKind::Broker(BrokerError::TopicAuthorizationFailed) => { /* fix the ACLs */ }
        ///     ErrorKind::Broker(e) if e.is_retriable() => { /* try again later */ }
        ///     ErrorKind::Broker(e) => eprintln!("refused: {e}"), // e.g. "MESSAGE_TOO_LARGE (10)"
        ///     _ => {}
        /// }
        /// # }
        /// assert_eq!(BrokerError::from_code(19), Some(BrokerError::NotEnoughReplicas));
        /// assert_eq!(BrokerError::NotEnoughReplicas.name(), Some("NOT_ENOUGH_REPLICAS"));
        /// assert!(BrokerError::NotEnoughReplicas.is_retriable());
        /// assert_eq!(BrokerError::from_code(0), None); // 0 is no error
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum BrokerError {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($code), "): ", $doc)]
                $variant,
            )*
            /// Any other error code (never 0, which is no error): one
            /// Courier does not name yet, or one newer than this release.
            /// [`from_code`](BrokerError::from_code) and the `From`
            /// conversions give a named code its name, never `Other`.
            Other(i16),
        }

        impl BrokerError {
            /// The error for a response's error code; `None` for 0 (no
            /// error).
            pub const fn from_code(code: i16) -> Option<BrokerError> {
                match code {
                    0 => None,
                    $( $code => Some(BrokerError::$variant), )*
                    other => Some(BrokerError::Other(other)),
                }
            }

            /// The code on the wire.
            pub const fn code(&self) -> i16 {
                match self {
                    $( BrokerError::$variant => $code, )*
                    BrokerError::Other(code) => *code,
                }
            }

            /// Kafka's name for it (`"NOT_ENOUGH_REPLICAS"`, as the protocol
            /// guide and the Java client's `Errors` spell it); `None` for
            /// [`Other`](BrokerError::Other).
            pub const fn name(&self) -> Option<&'static str> {
                match self {
                    $( BrokerError::$variant => Some($name), )*
                    BrokerError::Other(_) => None,
                }
            }

            /// Whether the protocol calls it retriable (the Java client's
            /// `RetriableException`s): the same request may succeed later.
            /// The producer already retried such an error until `retries`
            /// or `delivery.timeout.ms` ran out before it reported it; this
            /// says whether producing the record again later may help. A
            /// code Courier does not name is looked up in the protocol's
            /// full table; one unknown to both is not retriable.
            pub fn is_retriable(&self) -> bool {
                match self {
                    $( BrokerError::$variant => $retriable, )*
                    BrokerError::Other(code) => {
                        ResponseError::try_from_code(*code).is_some_and(|e| e.is_retriable())
                    }
                }
            }

            #[cfg(test)]
            const NAMED: &'static [BrokerError] = &[ $( BrokerError::$variant, )* ];
        }
    };
}

broker_errors! {
    (UnknownServerError, -1, "UNKNOWN_SERVER_ERROR", false, "the broker failed unexpectedly (see its log)."),
    (OffsetOutOfRange, 1, "OFFSET_OUT_OF_RANGE", false, "the offset is outside the partition's log (DeleteRecords past the high watermark)."),
    (CorruptMessage, 2, "CORRUPT_MESSAGE", true, "a record failed its CRC check or is otherwise corrupt."),
    (UnknownTopicOrPartition, 3, "UNKNOWN_TOPIC_OR_PARTITION", true, "the broker does not host this topic or partition (yet)."),
    (LeaderNotAvailable, 5, "LEADER_NOT_AVAILABLE", true, "the partition has no leader: an election is under way."),
    (NotLeaderOrFollower, 6, "NOT_LEADER_OR_FOLLOWER", true, "the broker is not the partition's leader (the metadata was stale)."),
    (RequestTimedOut, 7, "REQUEST_TIMED_OUT", true, "the broker timed out waiting for the replicas (`request.timeout.ms`, `acks=all`)."),
    (ReplicaNotAvailable, 9, "REPLICA_NOT_AVAILABLE", true, "a replica of the partition is not available."),
    (MessageTooLarge, 10, "MESSAGE_TOO_LARGE", false, "a record batch is larger than the topic's `max.message.bytes`."),
    (NetworkException, 13, "NETWORK_EXCEPTION", true, "the broker's connection to another broker was lost."),
    (CoordinatorLoadInProgress, 14, "COORDINATOR_LOAD_IN_PROGRESS", true, "the coordinator is still loading its state."),
    (CoordinatorNotAvailable, 15, "COORDINATOR_NOT_AVAILABLE", true, "the coordinator is not available."),
    (NotCoordinator, 16, "NOT_COORDINATOR", true, "the broker is not the coordinator for this transactional id or group."),
    (InvalidTopicException, 17, "INVALID_TOPIC_EXCEPTION", false, "the topic name is invalid, or the topic is internal."),
    (RecordListTooLarge, 18, "RECORD_LIST_TOO_LARGE", false, "a record batch is larger than the broker's log segment."),
    (NotEnoughReplicas, 19, "NOT_ENOUGH_REPLICAS", true, "fewer in-sync replicas than `min.insync.replicas`: nothing was written."),
    (NotEnoughReplicasAfterAppend, 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "written to the leader, but to fewer in-sync replicas than required."),
    (InvalidRequiredAcks, 21, "INVALID_REQUIRED_ACKS", false, "the `acks` value is not one the broker accepts."),
    (IllegalGeneration, 22, "ILLEGAL_GENERATION", false, "the group's generation is not the one given (a commit from a member of an older generation)."),
    (UnknownMemberId, 25, "UNKNOWN_MEMBER_ID", false, "the group does not know the member id (an admin offset change while the group has members)."),
    (RebalanceInProgress, 27, "REBALANCE_IN_PROGRESS", false, "the group is rebalancing."),
    (TopicAuthorizationFailed, 29, "TOPIC_AUTHORIZATION_FAILED", false, "the principal may not write to (or create, describe) the topic."),
    (GroupAuthorizationFailed, 30, "GROUP_AUTHORIZATION_FAILED", false, "the principal may not use the consumer group (offsets sent to a transaction)."),
    (ClusterAuthorizationFailed, 31, "CLUSTER_AUTHORIZATION_FAILED", false, "the principal lacks a cluster permission (an idempotent producer's `IdempotentWrite`, before Kafka 3.0)."),
    (InvalidTimestamp, 32, "INVALID_TIMESTAMP", false, "a record's timestamp is outside the topic's `message.timestamp.*` bounds."),
    (UnsupportedVersion, 35, "UNSUPPORTED_VERSION", false, "the broker does not support the request's version."),
    (TopicAlreadyExists, 36, "TOPIC_ALREADY_EXISTS", false, "a topic with this name already exists."),
    (InvalidPartitions, 37, "INVALID_PARTITIONS", false, "the partition count is invalid (below 1, or not more than the topic has)."),
    (InvalidReplicationFactor, 38, "INVALID_REPLICATION_FACTOR", false, "the replication factor is below 1 or above the number of brokers."),
    (InvalidConfig, 40, "INVALID_CONFIG", false, "a topic config name or value is invalid."),
    (NotController, 41, "NOT_CONTROLLER", true, "the broker is not the controller."),
    (InvalidRequest, 42, "INVALID_REQUEST", false, "the broker found the request malformed (see its log)."),
    (PolicyViolation, 44, "POLICY_VIOLATION", false, "the request breaks a policy the broker enforces."),
    (OutOfOrderSequenceNumber, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false, "the idempotent producer's sequence skipped ahead (a batch was lost)."),
    (DuplicateSequenceNumber, 46, "DUPLICATE_SEQUENCE_NUMBER", false, "the batch was written already (the producer treats it as delivered)."),
    (InvalidProducerEpoch, 47, "INVALID_PRODUCER_EPOCH", false, "the producer's epoch is old: a newer one took over (fenced)."),
    (InvalidTxnState, 48, "INVALID_TXN_STATE", false, "the transactional call does not fit the transaction's state."),
    (InvalidProducerIdMapping, 49, "INVALID_PRODUCER_ID_MAPPING", false, "the producer id is not the one assigned to its `transactional.id`."),
    (InvalidTransactionTimeout, 50, "INVALID_TRANSACTION_TIMEOUT", false, "`transaction.timeout.ms` is above the broker's `transaction.max.timeout.ms`."),
    (ConcurrentTransactions, 51, "CONCURRENT_TRANSACTIONS", false, "the coordinator is still completing this producer's previous transaction."),
    (TransactionalIdAuthorizationFailed, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false, "the principal may not use the `transactional.id`."),
    (SecurityDisabled, 54, "SECURITY_DISABLED", false, "the cluster has no authorizer: ACLs cannot be used."),
    (KafkaStorageError, 56, "KAFKA_STORAGE_ERROR", true, "the broker failed to access its log on disk."),
    (UnknownProducerId, 59, "UNKNOWN_PRODUCER_ID", false, "the broker no longer knows the producer id (its records expired)."),
    (NonEmptyGroup, 68, "NON_EMPTY_GROUP", false, "the group still has members."),
    (GroupIdNotFound, 69, "GROUP_ID_NOT_FOUND", false, "the group does not exist."),
    (FencedLeaderEpoch, 74, "FENCED_LEADER_EPOCH", true, "the request's leader epoch is older than the broker's."),
    (UnknownLeaderEpoch, 75, "UNKNOWN_LEADER_EPOCH", true, "the request's leader epoch is newer than the broker's."),
    (UnsupportedCompressionType, 76, "UNSUPPORTED_COMPRESSION_TYPE", false, "the broker does not accept this compression for the topic (zstd before Kafka 2.1)."),
    (GroupSubscribedToTopic, 86, "GROUP_SUBSCRIBED_TO_TOPIC", false, "the group's members read the topic: its offsets cannot be deleted."),
    (InvalidRecord, 87, "INVALID_RECORD", false, "the broker's validation refused a record (a compacted topic's record without a key, say)."),
    (ThrottlingQuotaExceeded, 89, "THROTTLING_QUOTA_EXCEEDED", true, "an admin request went over the principal's quota."),
    (ProducerFenced, 90, "PRODUCER_FENCED", false, "a newer producer with the same `transactional.id` fenced this one."),
    (UnknownTopicId, 100, "UNKNOWN_TOPIC_ID", true, "the broker does not host a topic with this id."),
    (TransactionAbortable, 120, "TRANSACTION_ABORTABLE", false, "the transaction cannot commit; abort it and go on."),
}

impl fmt::Display for BrokerError {
    /// Kafka's name and the code, `MESSAGE_TOO_LARGE (10)`; for
    /// [`Other`](BrokerError::Other), the protocol crate's name when it has
    /// one, in the same form (`FETCH_SESSION_ID_NOT_FOUND (70)`), or
    /// `error code N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.name() {
            return write!(f, "{name} ({})", self.code());
        }
        match ResponseError::try_from_code(self.code()) {
            Some(ResponseError::Unknown(_)) | None => write!(f, "error code {}", self.code()),
            Some(e) => write!(f, "{} ({})", upper_snake(&format!("{e:?}")), self.code()),
        }
    }
}

impl std::error::Error for BrokerError {}

/// `NotEnoughReplicas` as Kafka spells it: `NOT_ENOUGH_REPLICAS`.
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

// Conversions to and from the protocol crate's error type: crate-internal
// functions, not `From` impls, so that no type of the vendored protocol
// crate is in Courier's public API.
impl BrokerError {
    /// The error `e` names.
    pub(crate) fn from_response(e: ResponseError) -> BrokerError {
        // Never None: ResponseError has no variant for code 0.
        BrokerError::from_code(e.code()).unwrap_or(BrokerError::Other(0))
    }

    /// The protocol crate's name for this error (the metrics' label).
    #[cfg(any(test, feature = "metrics"))]
    pub(crate) fn to_response(self) -> ResponseError {
        ResponseError::try_from_code(self.code()).unwrap_or(ResponseError::Unknown(0))
    }
}

impl From<BrokerError> for i16 {
    fn from(e: BrokerError) -> i16 {
        e.code()
    }
}

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

/// Classifies a response error code; `None` for 0 (no error). For
/// example NOT_LEADER_OR_FOLLOWER (6) is retriable and refreshes
/// metadata, MESSAGE_TOO_LARGE (10) is not retriable
/// (`tests::classify_names_an_error_and_its_class`).
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
        // A Produce v12 (transaction version 2) that adds its partition to
        // a transaction while the coordinator still completes the
        // previous one: retriable in the Java client since 3.4, though not
        // in the protocol's table (older versions get NOT_ENOUGH_REPLICAS
        // in its place).
        E::ConcurrentTransactions => true,
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
    fn classify_names_an_error_and_its_class() {
        let c = classify(6).unwrap();
        assert_eq!(c.error, ResponseError::NotLeaderOrFollower);
        assert!(c.retriable && c.refresh_metadata);
        assert!(!classify(10).unwrap().retriable); // MESSAGE_TOO_LARGE
        assert!(classify(0).is_none());
    }

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

    /// Courier's table against kafka-protocol's, an independent one (its
    /// rows come from the Java client's `Errors`): every named code is the
    /// same number under the same name, with the same retriable flag.
    #[test]
    fn every_named_broker_error_agrees_with_kafka_protocol() {
        assert!(BrokerError::NAMED.len() >= 40);
        for &e in BrokerError::NAMED {
            let r = ResponseError::try_from_code(e.code()).unwrap();
            assert!(
                !matches!(r, ResponseError::Unknown(_)),
                "{e:?}: kafka-protocol has no name for {}",
                e.code()
            );
            assert_eq!(r.code(), e.code(), "{e:?}");
            assert_eq!(format!("{r:?}"), format!("{e:?}"), "variant names differ");
            assert_eq!(
                Some(upper_snake(&format!("{r:?}")).as_str()),
                e.name(),
                "{e:?}"
            );
            assert_eq!(r.is_retriable(), e.is_retriable(), "{e:?} retriable");
            assert_eq!(BrokerError::from_response(r), e);
            assert_eq!(e.to_response(), r);
            assert_eq!(BrokerError::from_code(e.code()), Some(e));
            assert_eq!(
                e.to_string(),
                format!("{} ({})", e.name().unwrap(), e.code())
            );
        }
        // The codes the issue names, by the name Kafka's guide uses.
        let by_name = |n: &str| {
            BrokerError::NAMED
                .iter()
                .find(|e| e.name() == Some(n))
                .copied()
        };
        for (name, code) in [
            ("NOT_ENOUGH_REPLICAS", 19),
            ("MESSAGE_TOO_LARGE", 10),
            ("UNKNOWN_TOPIC_OR_PARTITION", 3),
            ("NOT_LEADER_OR_FOLLOWER", 6),
            ("TOPIC_AUTHORIZATION_FAILED", 29),
            ("REQUEST_TIMED_OUT", 7),
            ("RECORD_LIST_TOO_LARGE", 18),
            ("INVALID_RECORD", 87),
            ("TOPIC_ALREADY_EXISTS", 36),
            ("PRODUCER_FENCED", 90),
        ] {
            assert_eq!(by_name(name).map(|e| e.code()), Some(code), "{name}");
        }
    }

    /// Every code converts both ways without loss; a code Courier does not
    /// name is `Other` and keeps the protocol's retriable flag.
    #[test]
    fn every_code_round_trips_through_broker_error() {
        for code in (-1i16..=140).chain([i16::MIN, 1000, i16::MAX]) {
            let Some(e) = BrokerError::from_code(code) else {
                assert_eq!(code, 0);
                continue;
            };
            assert_eq!(e.code(), code);
            assert_eq!(i16::from(e), code);
            let r = ResponseError::try_from_code(code).unwrap();
            assert_eq!(BrokerError::from_response(r), e);
            assert_eq!(e.to_response(), r);
            assert_eq!(e.is_retriable(), r.is_retriable(), "{code}");
            assert_eq!(matches!(e, BrokerError::Other(_)), e.name().is_none());
        }
        assert_eq!(BrokerError::from_code(70), Some(BrokerError::Other(70)));
        assert!(BrokerError::Other(70).is_retriable()); // FETCH_SESSION_ID_NOT_FOUND
        assert_eq!(
            BrokerError::Other(70).to_string(),
            "FETCH_SESSION_ID_NOT_FOUND (70)"
        );
        assert!(!BrokerError::Other(30_000).is_retriable());
        assert_eq!(BrokerError::Other(30_000).to_string(), "error code 30000");
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
