//! Admin operations: create, delete and describe topics, add partitions,
//! describe the cluster, describe and alter topic configs; create,
//! describe and delete ACLs (`acl.rs`); list and describe consumer groups,
//! read, alter and delete their offsets, delete them (`groups.rs`); delete
//! records (`records.rs`). Used by the `courier` command-line tool, by
//! tests and by applications; the producer itself never needs them.
//!
//! Why one connection to any broker is enough for most: in KRaft clusters
//! (Kafka 4) every broker accepts CreateTopics, DeleteTopics,
//! CreatePartitions, IncrementalAlterConfigs, CreateAcls and DeleteAcls and
//! forwards them to the active controller, and answers Metadata,
//! DescribeConfigs and DescribeAcls itself. So each call connects to the
//! first bootstrap address that answers (TLS and SASL as its
//! [`AdminOptions`] say), sends its requests one after the other at the
//! versions negotiated on connect, and drops the connection. The group
//! calls go to the group's coordinator (FindCoordinator, `call.rs`),
//! ListGroups to every broker, DeleteRecords to each partition's leader.
//!
//! A broker's refusal is [`AdminError::Refused`], with the Kafka error code
//! (its message names it as Kafka does); [`AdminError::broker_error`],
//! [`AdminError::is_topic_exists`] and [`AdminError::is_unknown_topic`]
//! read it without magic numbers. An answer that cannot be read (a result
//! missing, a code Kafka does not define) is a refusal with
//! UNKNOWN_SERVER_ERROR (-1) saying what was wrong, never a default.
//!
//! # References
//! - <https://kafka.apache.org/protocol#The_Messages_CreateTopics>,
//!   `DeleteTopics`, `CreatePartitions`, `Metadata`, `DescribeConfigs`,
//!   `IncrementalAlterConfigs` (KIP-339), `CreateAcls`, `DescribeAcls`,
//!   `DeleteAcls` (KIP-140, KIP-290), `FindCoordinator`, `ListGroups`,
//!   `DescribeGroups`, `OffsetFetch`, `OffsetCommit`, `OffsetDelete`
//!   (KIP-496), `DeleteGroups`, `DeleteRecords` (KIP-107) in the same guide
//! - The Java `Admin` client: `createTopics`, `deleteTopics`,
//!   `createPartitions`, `describeTopics`, `describeCluster`,
//!   `describeConfigs`, `incrementalAlterConfigs`, `createAcls`,
//!   `describeAcls`, `deleteAcls`, `listGroups`, `describeConsumerGroups`,
//!   `listConsumerGroupOffsets`, `alterConsumerGroupOffsets`,
//!   `deleteConsumerGroupOffsets`, `deleteConsumerGroups`, `deleteRecords`

use base64::Engine as _;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeQuorumRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::protocol::ApiKey;

/// How long the broker may take over a topic change (CreateTopics,
/// DeleteTopics, CreatePartitions `timeout_ms`), as the Java client's
/// default `default.api.timeout.ms` allows.
const CHANGE_TIMEOUT_MS: i32 = 30_000;

/// The `resource_type` of a topic in DescribeConfigs and
/// IncrementalAlterConfigs (Java's `ConfigResource.Type.TOPIC`).
const TOPIC_RESOURCE: i8 = 2;

mod acl;
mod call;
mod groups;
mod records;
mod types;

pub use acl::{
    create_acls, create_acls_with, delete_acls, delete_acls_with, describe_acls,
    describe_acls_with, AclBinding, AclFilter, AclOperation, AclPermission, PatternType,
    ResourceType,
};
use call::{connect, metadata, no_result, refused};
pub use groups::{
    alter_group_offsets, alter_group_offsets_with, delete_group, delete_group_offsets,
    delete_group_offsets_with, delete_group_with, describe_group, describe_group_with,
    list_group_offsets, list_group_offsets_with, list_groups, list_groups_with, GroupDescription,
    GroupListing, GroupMember, GroupOffset,
};
pub use records::{delete_records, delete_records_with};
use types::text;
pub use types::{
    AdminError, AdminOptions, AgreedVersion, BrokerDescription, ClusterDescription, ConfigEntry,
    ConfigOp, ConfigSource, ConnectionFailure, PartitionDescription, TopicDescription,
};

/// Creates `topic` with `partitions` partitions. An existing topic is an
/// error for which [`AdminError::is_topic_exists`] holds; see
/// [`create_topic_if_missing`].
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), AdminError> {
    create_topic_with(
        &AdminOptions::default(),
        bootstrap,
        topic,
        partitions,
        replication_factor,
    )
    .await
}

/// [`create_topic`] over connections made with `opts` (TLS, SASL).
pub async fn create_topic_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), AdminError> {
    let no_configs: &[(&str, &str)] = &[];
    create_topic_with_configs(
        opts,
        bootstrap,
        topic,
        partitions,
        replication_factor,
        no_configs,
    )
    .await
}

/// [`create_topic_with`], with topic configs (`retention.ms`,
/// `cleanup.policy`, …: what `kafka-topics.sh --create --config` sets).
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// use courier_kafka::admin::AdminOptions;
/// courier_kafka::admin::create_topic_with_configs(
///     &AdminOptions::default(),
///     "127.0.0.1:9092",
///     "orders",
///     6,
///     3,
///     &[("retention.ms", "86400000"), ("min.insync.replicas", "2")],
/// )
/// .await
/// # }
/// ```
pub async fn create_topic_with_configs<K: AsRef<str>, V: AsRef<str>>(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(K, V)],
) -> Result<(), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(text(k.as_ref()))
                .with_value(Some(text(v.as_ref())))
        })
        .collect();
    let t = CreatableTopic::default()
        .with_name(TopicName(text(topic)))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(configs);
    let req = CreateTopicsRequest::default()
        .with_topics(vec![t])
        .with_timeout_ms(CHANGE_TIMEOUT_MS);
    let resp = conn.request(&req).await?;
    let t = resp
        .topics
        .first()
        .ok_or_else(|| no_result(topic, "CreateTopics"))?;
    refused(topic, t.error_code, t.error_message.as_ref())
}

/// Creates `topic` unless it exists: `Ok(true)` when this call created it,
/// `Ok(false)` when it was there already (its partitions and configs are
/// left as they are).
pub async fn create_topic_if_missing(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<bool, AdminError> {
    create_topic_if_missing_with(
        &AdminOptions::default(),
        bootstrap,
        topic,
        partitions,
        replication_factor,
    )
    .await
}

/// [`create_topic_if_missing`] over connections made with `opts` (TLS, SASL).
pub async fn create_topic_if_missing_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<bool, AdminError> {
    match create_topic_with(opts, bootstrap, topic, partitions, replication_factor).await {
        Ok(()) => Ok(true),
        Err(e) if e.is_topic_exists() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes `topic`. One that does not exist is an error for which
/// [`AdminError::is_unknown_topic`] holds.
pub async fn delete_topic(bootstrap: &str, topic: &str) -> Result<(), AdminError> {
    delete_topic_with(&AdminOptions::default(), bootstrap, topic).await
}

/// [`delete_topic`] over connections made with `opts` (TLS, SASL).
pub async fn delete_topic_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
) -> Result<(), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let name = TopicName(text(topic));
    let req = DeleteTopicsRequest::default().with_timeout_ms(CHANGE_TIMEOUT_MS);
    // v6 names topics in `topics` (by name or id); older versions in
    // `topic_names`, which v6 no longer has.
    let req = if conn.versions().get(ApiKey::DeleteTopics) >= Some(6) {
        req.with_topics(vec![DeleteTopicState::default().with_name(Some(name))])
    } else {
        req.with_topic_names(vec![name])
    };
    let resp = conn.request(&req).await?;
    let t = resp
        .responses
        .first()
        .ok_or_else(|| no_result(topic, "DeleteTopics"))?;
    refused(topic, t.error_code, t.error_message.as_ref())
}

/// Grows `topic` to `total_partitions` partitions (Java's
/// `createPartitions` with `NewPartitions.increaseTo`); the broker assigns
/// the new partitions' replicas. A count not above the current one is
/// refused (INVALID_PARTITIONS).
pub async fn create_partitions(
    bootstrap: &str,
    topic: &str,
    total_partitions: i32,
) -> Result<(), AdminError> {
    create_partitions_with(&AdminOptions::default(), bootstrap, topic, total_partitions).await
}

/// [`create_partitions`] over connections made with `opts` (TLS, SASL).
pub async fn create_partitions_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    total_partitions: i32,
) -> Result<(), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let t = CreatePartitionsTopic::default()
        .with_name(TopicName(text(topic)))
        .with_count(total_partitions)
        .with_assignments(None);
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![t])
        .with_timeout_ms(CHANGE_TIMEOUT_MS);
    let resp = conn.request(&req).await?;
    let t = resp
        .results
        .first()
        .ok_or_else(|| no_result(topic, "CreatePartitions"))?;
    refused(topic, t.error_code, t.error_message.as_ref())
}

/// `topic`'s partitions with their leaders, replicas and in-sync replicas,
/// as the bootstrap broker's metadata has them. An unknown topic is an
/// error for which [`AdminError::is_unknown_topic`] holds.
pub async fn describe_topic(bootstrap: &str, topic: &str) -> Result<TopicDescription, AdminError> {
    describe_topic_with(&AdminOptions::default(), bootstrap, topic).await
}

/// [`describe_topic`] over connections made with `opts` (TLS, SASL).
pub async fn describe_topic_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
) -> Result<TopicDescription, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resp = metadata(&mut conn, Some(&[topic])).await?;
    let t = resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .ok_or_else(|| no_result(topic, "Metadata"))?;
    refused(topic, t.error_code, None)?;
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect();
    let mut partitions: Vec<PartitionDescription> = t
        .partitions
        .iter()
        .map(|p| PartitionDescription {
            partition: p.partition_index,
            leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
            leader_epoch: p.leader_epoch,
            replicas: ids(&p.replica_nodes),
            isr: ids(&p.isr_nodes),
            offline_replicas: ids(&p.offline_replicas),
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(TopicDescription {
        name: topic.to_string(),
        topic_id: (!t.topic_id.is_nil()).then(|| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t.topic_id.as_bytes())
        }),
        internal: t.is_internal,
        partitions,
    })
}

/// The cluster's id, controller and live brokers, and the API versions
/// agreed with the bootstrap broker that answered.
pub async fn describe_cluster(bootstrap: &str) -> Result<ClusterDescription, AdminError> {
    describe_cluster_with(&AdminOptions::default(), bootstrap).await
}

/// [`describe_cluster`] over connections made with `opts` (TLS, SASL).
pub async fn describe_cluster_with(
    opts: &AdminOptions,
    bootstrap: &str,
) -> Result<ClusterDescription, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resp = metadata(&mut conn, Some(&[])).await?;
    let mut brokers: Vec<BrokerDescription> = resp
        .brokers
        .iter()
        .map(|b| BrokerDescription {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let controller = match quorum_leader(&mut conn).await {
        Some(leader) => Some(leader),
        None => (resp.controller_id.0 >= 0).then_some(resp.controller_id.0),
    };
    Ok(ClusterDescription {
        cluster_id: resp.cluster_id.as_ref().map(|c| c.to_string()),
        controller,
        brokers,
        bootstrap_broker: conn.addr().to_string(),
        api_versions: crate::protocol::versions::SUPPORTED
            .iter()
            .map(|s| AgreedVersion {
                api: format!("{:?}", s.api),
                version: conn.versions().get(s.api),
            })
            .collect(),
    })
}

/// The KRaft metadata quorum's leader (the active controller), if the
/// broker offers DescribeQuorum and answers it; `None` when it refuses
/// (not KRaft, not authorized) or the request fails, since the Metadata
/// answer already in hand still describes the cluster.
async fn quorum_leader(conn: &mut Connection) -> Option<i32> {
    conn.versions().get(ApiKey::DescribeQuorum)?;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let resp = match conn.request(&req).await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::debug!(broker = conn.addr(), error = %e, "DescribeQuorum failed");
            return None;
        }
    };
    if resp.error_code != 0 {
        return None;
    }
    let p = resp.topics.first()?.partitions.first()?;
    (p.error_code == 0 && p.leader_id.0 >= 0).then_some(p.leader_id.0)
}

/// Every config of `topic`, by name, with its value and where the value
/// comes from (Java's `describeConfigs` for a topic resource).
pub async fn describe_topic_config(
    bootstrap: &str,
    topic: &str,
) -> Result<Vec<ConfigEntry>, AdminError> {
    describe_topic_config_with(&AdminOptions::default(), bootstrap, topic).await
}

/// [`describe_topic_config`] over connections made with `opts` (TLS, SASL).
pub async fn describe_topic_config_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
) -> Result<Vec<ConfigEntry>, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resource = DescribeConfigsResource::default()
        .with_resource_type(TOPIC_RESOURCE)
        .with_resource_name(text(topic))
        .with_configuration_keys(None);
    let req = DescribeConfigsRequest::default().with_resources(vec![resource]);
    let resp = conn.request(&req).await?;
    let r = resp
        .results
        .first()
        .ok_or_else(|| no_result(topic, "DescribeConfigs"))?;
    refused(topic, r.error_code, r.error_message.as_ref())?;
    let mut entries: Vec<ConfigEntry> = r
        .configs
        .iter()
        .map(|c| ConfigEntry {
            name: c.name.to_string(),
            value: c.value.as_ref().map(|v| v.to_string()),
            source: ConfigSource::from_wire(c.config_source),
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Changes configs of `topic` (IncrementalAlterConfigs, as the Java
/// client's `incrementalAlterConfigs`): each [`ConfigOp`] sets or removes
/// one config; the others keep their values. The broker applies all of
/// them or none.
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// use courier_kafka::admin::{alter_topic_config, ConfigOp};
/// alter_topic_config(
///     "127.0.0.1:9092",
///     "orders",
///     &[ConfigOp::set("retention.ms", "3600000"), ConfigOp::delete("cleanup.policy")],
/// )
/// .await
/// # }
/// ```
pub async fn alter_topic_config(
    bootstrap: &str,
    topic: &str,
    ops: &[ConfigOp],
) -> Result<(), AdminError> {
    alter_topic_config_with(&AdminOptions::default(), bootstrap, topic, ops).await
}

/// [`alter_topic_config`] over connections made with `opts` (TLS, SASL).
pub async fn alter_topic_config_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    ops: &[ConfigOp],
) -> Result<(), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resource = AlterConfigsResource::default()
        .with_resource_type(TOPIC_RESOURCE)
        .with_resource_name(text(topic))
        .with_configs(ops.iter().map(ConfigOp::to_wire).collect());
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let resp = conn.request(&req).await?;
    let r = resp
        .responses
        .first()
        .ok_or_else(|| no_result(topic, "IncrementalAlterConfigs"))?;
    refused(topic, r.error_code, r.error_message.as_ref())
}

/// Every topic with its partition count, sorted by name.
pub async fn list_topics(bootstrap: &str) -> Result<Vec<(String, usize)>, AdminError> {
    list_topics_with(&AdminOptions::default(), bootstrap).await
}

/// [`list_topics`] over connections made with `opts` (TLS, SASL).
pub async fn list_topics_with(
    opts: &AdminOptions,
    bootstrap: &str,
) -> Result<Vec<(String, usize)>, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resp = metadata(&mut conn, None).await?;
    let mut topics: Vec<(String, usize)> = resp
        .topics
        .iter()
        .filter_map(|t| {
            t.name
                .as_ref()
                .map(|n| (n.0.to_string(), t.partitions.len()))
        })
        .collect();
    topics.sort();
    Ok(topics)
}
