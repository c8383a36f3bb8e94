//! The API versions Courier implements, and negotiation with a broker.
//!
//! For each API we need, the version used is the highest one inside both the
//! broker's advertised range and ours. A broker whose range lies wholly below
//! ours is "too old"; one whose range lies wholly above is "too new"; the two
//! get distinct errors because the fixes differ (upgrade the broker, or
//! upgrade Courier).
//!
//! # References
//! - ApiVersions (KIP-35, KIP-511): <https://kafka.apache.org/protocol#The_Messages_ApiVersions>

use kafka_protocol::messages::ApiVersionsResponse;

use super::{ApiKey, ProtocolError};

/// The version range Courier implements for one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supported {
    /// The API.
    pub api: ApiKey,
    /// Oldest version we can speak.
    pub min: i16,
    /// Newest version we can speak.
    pub max: i16,
}

/// Every API Courier uses, with the versions it implements.
///
/// - Produce starts at v3, the first version that carries RecordBatch v2
///   (needed for headers and idempotence); it stops at v12 because v13 names
///   topics by id instead of by name.
/// - ApiVersions stops at v3, the first flexible version, which every broker
///   since Kafka 2.4 accepts.
pub const SUPPORTED: &[Supported] = &[
    Supported {
        api: ApiKey::ApiVersions,
        min: 0,
        max: 3,
    },
    Supported {
        api: ApiKey::Metadata,
        min: 1,
        max: 12,
    },
    Supported {
        api: ApiKey::Produce,
        min: 3,
        max: 12,
    },
    Supported {
        api: ApiKey::InitProducerId,
        min: 0,
        max: 5,
    },
    Supported {
        api: ApiKey::CreateTopics,
        min: 2,
        max: 7,
    },
    // v1: the SASL exchange in SaslAuthenticate requests (KIP-152).
    Supported {
        api: ApiKey::SaslHandshake,
        min: 1,
        max: 1,
    },
    Supported {
        api: ApiKey::SaslAuthenticate,
        min: 0,
        max: 2,
    },
    // Transactions: FindCoordinator v4 looks up a list of keys;
    // AddPartitionsToTxn stops at v3 (v4 and later are for brokers),
    // AddOffsetsToTxn at v3. EndTxn v5 and TxnOffsetCommit v5 (and Produce
    // v12) belong to transaction version 2 (KIP-890): they are used only
    // when the cluster has finalized `transaction.version` 2, and capped
    // at EndTxn v4, TxnOffsetCommit v3 and Produce v11 otherwise
    // (`TransactionVersion::caps`).
    Supported {
        api: ApiKey::FindCoordinator,
        min: 1,
        max: 4,
    },
    Supported {
        api: ApiKey::AddPartitionsToTxn,
        min: 0,
        max: 3,
    },
    Supported {
        api: ApiKey::AddOffsetsToTxn,
        min: 0,
        max: 3,
    },
    Supported {
        api: ApiKey::EndTxn,
        min: 0,
        max: 5,
    },
    Supported {
        api: ApiKey::TxnOffsetCommit,
        min: 0,
        max: 5,
    },
    // Admin (`admin.rs`), the ranges kafka-protocol implements: DeleteTopics
    // v6 names topics in `topics` (by name or id), v1 to v5 in
    // `topic_names`; Kafka 4 dropped DeleteTopics v0 and DescribeConfigs v0
    // (KIP-896).
    Supported {
        api: ApiKey::DeleteTopics,
        min: 1,
        max: 6,
    },
    Supported {
        api: ApiKey::CreatePartitions,
        min: 0,
        max: 3,
    },
    Supported {
        api: ApiKey::DescribeConfigs,
        min: 1,
        max: 4,
    },
    Supported {
        api: ApiKey::IncrementalAlterConfigs,
        min: 0,
        max: 1,
    },
    // The KRaft quorum's leader, the active controller (KIP-595, KIP-836;
    // brokers forward it to the controllers).
    Supported {
        api: ApiKey::DescribeQuorum,
        min: 0,
        max: 2,
    },
    // ACLs, consumer groups and DeleteRecords (`admin/acl.rs`,
    // `admin/groups.rs`, `admin/records.rs`): the ACL APIs from v1, the
    // first with pattern types (KIP-290), which Kafka 4 still takes;
    // OffsetFetch v8 and later ask for a list of groups (v1 to v7 for one);
    // OffsetFetch v10 and OffsetCommit v10 name topics by id, which
    // kafka-protocol does not write; OffsetCommit v0 and v1 Kafka 4 dropped
    // (KIP-896). DescribeGroups stops at v5: v6 only adds an error message.
    Supported {
        api: ApiKey::CreateAcls,
        min: 1,
        max: 3,
    },
    Supported {
        api: ApiKey::DescribeAcls,
        min: 1,
        max: 3,
    },
    Supported {
        api: ApiKey::DeleteAcls,
        min: 1,
        max: 3,
    },
    Supported {
        api: ApiKey::ListGroups,
        min: 0,
        max: 5,
    },
    Supported {
        api: ApiKey::DescribeGroups,
        min: 0,
        max: 5,
    },
    Supported {
        api: ApiKey::OffsetFetch,
        min: 1,
        max: 9,
    },
    Supported {
        api: ApiKey::OffsetCommit,
        min: 2,
        max: 9,
    },
    Supported {
        api: ApiKey::OffsetDelete,
        min: 0,
        max: 0,
    },
    Supported {
        api: ApiKey::DeleteGroups,
        min: 0,
        max: 2,
    },
    Supported {
        api: ApiKey::DeleteRecords,
        min: 0,
        max: 2,
    },
    // Client metrics pushed to the broker (KIP-714, Kafka 3.7 and later).
    Supported {
        api: ApiKey::GetTelemetrySubscriptions,
        min: 0,
        max: 0,
    },
    Supported {
        api: ApiKey::PushTelemetry,
        min: 0,
        max: 0,
    },
];

/// The transaction protocol a transactional producer speaks (KIP-890).
///
/// Version 1 is KIP-98's: each partition joins a transaction through
/// AddPartitionsToTxn, a group's offsets through AddOffsetsToTxn, and the
/// epoch stays the same from one transaction to the next. Version 2 (the
/// default of clusters formatted by Kafka 4.0 and later) lets Produce v12
/// add a partition implicitly and TxnOffsetCommit v5 add a group's offsets,
/// and EndTxn v5 bumps the producer epoch at the end of every transaction
/// (its answer carries the new id and epoch), so a late write of a
/// finished transaction is refused. The cluster says which it runs in
/// ApiVersions' finalized features (`transaction.version`).
///
/// # References
/// - KIP-890: <https://cwiki.apache.org/confluence/display/KAFKA/KIP-890%3A+Transactions+Server-Side+Defense>
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionVersion {
    /// KIP-98's protocol: explicit AddPartitionsToTxn, one epoch for many
    /// transactions.
    V1,
    /// KIP-890 part 2: implicit adds, an epoch bump at every EndTxn.
    V2,
}

/// The newest versions of the transactional requests under one
/// transaction protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionCaps {
    /// Produce (a transactional producer's).
    pub produce: i16,
    /// EndTxn.
    pub end_txn: i16,
    /// TxnOffsetCommit.
    pub txn_offset_commit: i16,
}

impl TransactionVersion {
    /// The protocol for a cluster whose finalized `transaction.version`
    /// is `level` (0 when the cluster does not list the feature).
    pub fn for_level(level: i16) -> TransactionVersion {
        if level >= 2 {
            TransactionVersion::V2
        } else {
            TransactionVersion::V1
        }
    }

    /// The version number, as Kafka's `transaction.version` feature names it.
    pub fn number(self) -> u8 {
        match self {
            TransactionVersion::V1 => 1,
            TransactionVersion::V2 => 2,
        }
    }

    /// The request versions this protocol caps at: Produce v12, EndTxn v5
    /// and TxnOffsetCommit v5 ask the broker for version 2 (partitions
    /// join implicitly, EndTxn bumps the epoch); version 1 stays below
    /// them, as the Java client does when the cluster has not enabled
    /// version 2.
    pub fn caps(self) -> TransactionCaps {
        match self {
            TransactionVersion::V1 => TransactionCaps {
                produce: 11,
                end_txn: 4,
                txn_offset_commit: 3,
            },
            TransactionVersion::V2 => TransactionCaps {
                produce: 12,
                end_txn: 5,
                txn_offset_commit: 5,
            },
        }
    }
}

/// The cluster's finalized features as one broker's ApiVersions answer
/// gives them (v3 and later, KIP-584): the features' epoch (newer answers
/// have higher epochs; -1 when the answer has none) and the
/// `transaction.version` level (0 when not listed).
///
/// ```
/// use courier_kafka::protocol::messages::ApiVersionsResponse;
/// use courier_kafka::protocol::messages::api_versions_response::FinalizedFeatureKey;
/// use courier_kafka::protocol::versions::finalized_transaction_version;
///
/// let mut resp = ApiVersionsResponse::default();
/// assert_eq!(finalized_transaction_version(&resp), (-1, 0));
/// let mut f = FinalizedFeatureKey::default();
/// f.name = "transaction.version".into();
/// f.max_version_level = 2;
/// resp.finalized_features.push(f);
/// resp.finalized_features_epoch = 7;
/// assert_eq!(finalized_transaction_version(&resp), (7, 2));
/// ```
pub fn finalized_transaction_version(resp: &ApiVersionsResponse) -> (i64, i16) {
    let level = resp
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map_or(0, |f| f.max_version_level);
    (resp.finalized_features_epoch, level)
}

/// The range Courier implements for `api`, if it uses that API at all.
pub fn supported(api: ApiKey) -> Option<Supported> {
    SUPPORTED.iter().copied().find(|s| s.api == api)
}

/// The versions agreed with one broker, one per API Courier uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersions {
    /// ApiVersions version.
    pub api_versions: i16,
    /// Metadata version.
    pub metadata: i16,
    /// Produce version.
    pub produce: i16,
    /// InitProducerId version, or `None` when the broker does not offer it
    /// (an idempotent producer then cannot run against this broker).
    pub init_producer_id: Option<i16>,
    /// CreateTopics version, or `None` when the broker does not offer it.
    pub create_topics: Option<i16>,
    /// SaslHandshake version (`None`: not offered; SASL cannot be used).
    pub sasl_handshake: Option<i16>,
    /// SaslAuthenticate version (`None`: not offered).
    pub sasl_authenticate: Option<i16>,
    /// FindCoordinator version (`None`: not offered).
    pub find_coordinator: Option<i16>,
    /// AddPartitionsToTxn version (`None`: not offered).
    pub add_partitions_to_txn: Option<i16>,
    /// AddOffsetsToTxn version (`None`: not offered).
    pub add_offsets_to_txn: Option<i16>,
    /// EndTxn version (`None`: not offered).
    pub end_txn: Option<i16>,
    /// TxnOffsetCommit version (`None`: not offered).
    pub txn_offset_commit: Option<i16>,
    /// DeleteTopics version (`None`: not offered).
    pub delete_topics: Option<i16>,
    /// CreatePartitions version (`None`: not offered).
    pub create_partitions: Option<i16>,
    /// DescribeConfigs version (`None`: not offered).
    pub describe_configs: Option<i16>,
    /// IncrementalAlterConfigs version (`None`: not offered).
    pub incremental_alter_configs: Option<i16>,
    /// DescribeQuorum version (`None`: not offered, as by brokers that
    /// are not in KRaft mode).
    pub describe_quorum: Option<i16>,
    /// CreateAcls version (`None`: not offered).
    pub create_acls: Option<i16>,
    /// DescribeAcls version (`None`: not offered).
    pub describe_acls: Option<i16>,
    /// DeleteAcls version (`None`: not offered).
    pub delete_acls: Option<i16>,
    /// ListGroups version (`None`: not offered).
    pub list_groups: Option<i16>,
    /// DescribeGroups version (`None`: not offered).
    pub describe_groups: Option<i16>,
    /// OffsetFetch version (`None`: not offered).
    pub offset_fetch: Option<i16>,
    /// OffsetCommit version (`None`: not offered).
    pub offset_commit: Option<i16>,
    /// OffsetDelete version (`None`: not offered).
    pub offset_delete: Option<i16>,
    /// DeleteGroups version (`None`: not offered).
    pub delete_groups: Option<i16>,
    /// DeleteRecords version (`None`: not offered).
    pub delete_records: Option<i16>,
    /// GetTelemetrySubscriptions version (`None`: not offered; no client
    /// metrics are pushed to this broker).
    pub get_telemetry_subscriptions: Option<i16>,
    /// PushTelemetry version (`None`: not offered).
    pub push_telemetry: Option<i16>,
    /// The cluster's finalized features as this broker last knew them:
    /// their epoch and the `transaction.version` level
    /// ([`finalized_transaction_version`]).
    pub transaction_feature: (i64, i16),
}

impl ApiVersions {
    /// The agreed version of `api`, if any.
    pub fn get(&self, api: ApiKey) -> Option<i16> {
        match api {
            ApiKey::ApiVersions => Some(self.api_versions),
            ApiKey::Metadata => Some(self.metadata),
            ApiKey::Produce => Some(self.produce),
            ApiKey::InitProducerId => self.init_producer_id,
            ApiKey::CreateTopics => self.create_topics,
            ApiKey::SaslHandshake => self.sasl_handshake,
            ApiKey::SaslAuthenticate => self.sasl_authenticate,
            ApiKey::FindCoordinator => self.find_coordinator,
            ApiKey::AddPartitionsToTxn => self.add_partitions_to_txn,
            ApiKey::AddOffsetsToTxn => self.add_offsets_to_txn,
            ApiKey::EndTxn => self.end_txn,
            ApiKey::TxnOffsetCommit => self.txn_offset_commit,
            ApiKey::DeleteTopics => self.delete_topics,
            ApiKey::CreatePartitions => self.create_partitions,
            ApiKey::DescribeConfigs => self.describe_configs,
            ApiKey::IncrementalAlterConfigs => self.incremental_alter_configs,
            ApiKey::DescribeQuorum => self.describe_quorum,
            ApiKey::CreateAcls => self.create_acls,
            ApiKey::DescribeAcls => self.describe_acls,
            ApiKey::DeleteAcls => self.delete_acls,
            ApiKey::ListGroups => self.list_groups,
            ApiKey::DescribeGroups => self.describe_groups,
            ApiKey::OffsetFetch => self.offset_fetch,
            ApiKey::OffsetCommit => self.offset_commit,
            ApiKey::OffsetDelete => self.offset_delete,
            ApiKey::DeleteGroups => self.delete_groups,
            ApiKey::DeleteRecords => self.delete_records,
            ApiKey::GetTelemetrySubscriptions => self.get_telemetry_subscriptions,
            ApiKey::PushTelemetry => self.push_telemetry,
            _ => None,
        }
    }
}

/// Picks a version for each API from a broker's ApiVersions answer.
///
/// ApiVersions, Metadata and Produce are required; InitProducerId and
/// CreateTopics are optional here and checked when first needed.
///
/// ```
/// use courier_kafka::protocol::messages::{ApiVersionsResponse, api_versions_response::ApiVersion};
/// use courier_kafka::protocol::versions::negotiate;
///
/// let mut resp = ApiVersionsResponse::default();
/// for (key, min, max) in [(18, 0, 4), (3, 0, 13), (0, 3, 11)] {
///     let mut v = ApiVersion::default();
///     v.api_key = key;
///     v.min_version = min;
///     v.max_version = max;
///     resp.api_keys.push(v);
/// }
/// let agreed = negotiate(&resp).unwrap();
/// assert_eq!((agreed.api_versions, agreed.metadata, agreed.produce), (3, 12, 11));
/// assert_eq!(agreed.init_producer_id, None);
/// ```
pub fn negotiate(resp: &ApiVersionsResponse) -> Result<ApiVersions, ProtocolError> {
    if resp.error_code != 0 {
        return Err(ProtocolError::ApiVersionsError(resp.error_code));
    }
    let required = |api: ApiKey| {
        pick(resp, api)?.ok_or(ProtocolError::BrokerTooOld {
            api,
            offered: "none".into(),
            min_needed: supported(api).map_or(0, |s| s.min),
        })
    };
    Ok(ApiVersions {
        api_versions: required(ApiKey::ApiVersions)?,
        metadata: required(ApiKey::Metadata)?,
        produce: required(ApiKey::Produce)?,
        init_producer_id: pick(resp, ApiKey::InitProducerId)?,
        create_topics: pick(resp, ApiKey::CreateTopics)?,
        sasl_handshake: pick(resp, ApiKey::SaslHandshake)?,
        sasl_authenticate: pick(resp, ApiKey::SaslAuthenticate)?,
        // Only transactional producers use these: a range we cannot speak
        // is as good as none, and does not stop anyone else.
        find_coordinator: pick(resp, ApiKey::FindCoordinator).ok().flatten(),
        add_partitions_to_txn: pick(resp, ApiKey::AddPartitionsToTxn).ok().flatten(),
        add_offsets_to_txn: pick(resp, ApiKey::AddOffsetsToTxn).ok().flatten(),
        end_txn: pick(resp, ApiKey::EndTxn).ok().flatten(),
        txn_offset_commit: pick(resp, ApiKey::TxnOffsetCommit).ok().flatten(),
        // Only admin calls use these; as above.
        delete_topics: pick(resp, ApiKey::DeleteTopics).ok().flatten(),
        create_partitions: pick(resp, ApiKey::CreatePartitions).ok().flatten(),
        describe_configs: pick(resp, ApiKey::DescribeConfigs).ok().flatten(),
        incremental_alter_configs: pick(resp, ApiKey::IncrementalAlterConfigs).ok().flatten(),
        describe_quorum: pick(resp, ApiKey::DescribeQuorum).ok().flatten(),
        create_acls: pick(resp, ApiKey::CreateAcls).ok().flatten(),
        describe_acls: pick(resp, ApiKey::DescribeAcls).ok().flatten(),
        delete_acls: pick(resp, ApiKey::DeleteAcls).ok().flatten(),
        list_groups: pick(resp, ApiKey::ListGroups).ok().flatten(),
        describe_groups: pick(resp, ApiKey::DescribeGroups).ok().flatten(),
        offset_fetch: pick(resp, ApiKey::OffsetFetch).ok().flatten(),
        offset_commit: pick(resp, ApiKey::OffsetCommit).ok().flatten(),
        offset_delete: pick(resp, ApiKey::OffsetDelete).ok().flatten(),
        delete_groups: pick(resp, ApiKey::DeleteGroups).ok().flatten(),
        delete_records: pick(resp, ApiKey::DeleteRecords).ok().flatten(),
        get_telemetry_subscriptions: pick(resp, ApiKey::GetTelemetrySubscriptions).ok().flatten(),
        push_telemetry: pick(resp, ApiKey::PushTelemetry).ok().flatten(),
        transaction_feature: finalized_transaction_version(resp),
    })
}

/// The highest version of `api` both sides speak; `None` when the broker does
/// not list the API at all.
fn pick(resp: &ApiVersionsResponse, api: ApiKey) -> Result<Option<i16>, ProtocolError> {
    let ours = supported(api).expect("only APIs from SUPPORTED are negotiated");
    let Some(k) = resp.api_keys.iter().find(|k| k.api_key == api as i16) else {
        return Ok(None);
    };
    if k.max_version < ours.min || k.max_version < k.min_version {
        return Err(ProtocolError::BrokerTooOld {
            api,
            offered: format!("v{}..=v{}", k.min_version, k.max_version),
            min_needed: ours.min,
        });
    }
    if k.min_version > ours.max {
        return Err(ProtocolError::BrokerTooNew {
            api,
            broker_min: k.min_version,
            broker_max: k.max_version,
            max_known: ours.max,
        });
    }
    Ok(Some(k.max_version.min(ours.max)))
}

/// The ApiVersions version to retry with after a broker answered our first
/// ApiVersions request with UNSUPPORTED_VERSION.
///
/// Brokers answer an ApiVersions request they cannot parse with a v0 body
/// that lists their own ApiVersions range (KIP-511), so the retry can pick a
/// version they understand.
pub fn api_versions_fallback(resp: &ApiVersionsResponse) -> Option<i16> {
    let ours = supported(ApiKey::ApiVersions)?;
    let theirs = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)?;
    let v = theirs.max_version.min(ours.max);
    (v >= ours.min && v >= theirs.min_version).then_some(v)
}
