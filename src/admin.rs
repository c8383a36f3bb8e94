//! Admin operations, each over one sequential connection to a bootstrap
//! broker: create, delete and describe topics, add partitions, describe the
//! cluster, and describe and alter topic configs. Used by the `courier`
//! command-line tool, by tests and by applications that want a topic to
//! exist; the producer itself never needs them.
//!
//! Why one connection to any broker is enough: in KRaft clusters (Kafka 4)
//! every broker accepts CreateTopics, DeleteTopics, CreatePartitions and
//! IncrementalAlterConfigs and forwards them to the active controller, and
//! answers Metadata and DescribeConfigs for topics itself. So each call
//! connects to the first bootstrap address that answers (TLS and SASL as
//! its [`AdminOptions`] say), sends its requests one after the other at
//! the versions negotiated on connect, and drops the connection.
//!
//! A broker's refusal is [`AdminError::Refused`], with the Kafka error code;
//! [`AdminError::broker_error`], [`AdminError::is_topic_exists`] and
//! [`AdminError::is_unknown_topic`] read it without magic numbers.
//!
//! # References
//! - <https://kafka.apache.org/protocol#The_Messages_CreateTopics>,
//!   `DeleteTopics`, `CreatePartitions`, `Metadata`, `DescribeConfigs`,
//!   `IncrementalAlterConfigs` (KIP-339) in the same guide
//! - The Java `Admin` client: `createTopics`, `deleteTopics`,
//!   `createPartitions`, `describeTopics`, `describeCluster`,
//!   `describeConfigs`, `incrementalAlterConfigs`

use base64::Engine as _;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeQuorumRequest, IncrementalAlterConfigsRequest, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::config::{ConfigError, ProducerConfig};
use crate::connection::{Connection, ConnectionError, ConnectionOptions};
use crate::kafka_error::{BrokerError, ResponseError};
use crate::protocol::ApiKey;
use crate::security::Security;

/// How long the broker may take over a topic change (CreateTopics,
/// DeleteTopics, CreatePartitions `timeout_ms`), as the Java client's
/// default `default.api.timeout.ms` allows.
const CHANGE_TIMEOUT_MS: i32 = 30_000;

/// The `resource_type` of a topic in DescribeConfigs and
/// IncrementalAlterConfigs (Java's `ConfigResource.Type.TOPIC`).
const TOPIC_RESOURCE: i8 = 2;

/// How admin calls reach a broker: TLS and SASL, `client.id`, and the
/// time limits. `AdminOptions::default()` is plaintext, client id
/// `courier`, 10 s to connect and 30 s per request.
#[derive(Debug, Clone, Default)]
pub struct AdminOptions {
    connection: ConnectionOptions,
}

impl AdminOptions {
    /// The options a producer with `config` would connect with:
    /// `security.protocol`, `ssl.*` and `sasl.*`, `client.id`,
    /// `request.timeout.ms` (each request, as the Java admin client
    /// waits), `socket.connection.setup.timeout.ms` (the connection: TCP,
    /// TLS, SASL and the version exchange) and `socket.keepalive.enable`.
    /// Reads the PEM files named; an unreadable one is an error naming its
    /// property.
    pub fn from_config(config: &ProducerConfig) -> Result<AdminOptions, ConfigError> {
        Ok(AdminOptions {
            connection: ConnectionOptions {
                client_id: Some(config.client_id.clone()),
                security: Security::from_config(&config.security, None)?,
                request_timeout: config.request_timeout,
                connect_timeout: config.connection_setup_timeout,
                keepalive: config.socket_keepalive,
                ..ConnectionOptions::default()
            },
        })
    }

    /// As [`from_config`](Self::from_config), from properties as a
    /// `client.properties` file or `-X` flags give them: Java's and
    /// librdkafka's names, the producer's among them (accepted, and
    /// without effect here). An unknown name or a bad value is an error.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<AdminOptions, ConfigError> {
        let mut config = ProducerConfig::default();
        for (k, v) in properties {
            config.set(k.as_ref(), v.as_ref())?;
        }
        AdminOptions::from_config(&config)
    }
}

/// Why a broker could not be reached or stopped answering: the socket
/// failed, TLS or SASL refused, the broker answered bytes that do not
/// parse, or did not answer in time. Its message names the broker.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ConnectionFailure(ConnectionError);

impl ConnectionFailure {
    /// The broker did not answer in time (connecting, or a request).
    pub fn is_timeout(&self) -> bool {
        matches!(self.0, ConnectionError::Timeout { .. })
    }

    /// TLS refused the connection (an untrusted CA, a certificate for
    /// another host name, an alert from the broker).
    pub fn is_tls(&self) -> bool {
        matches!(self.0, ConnectionError::Tls { .. })
    }

    /// SASL authentication failed (wrong password, unknown user, a
    /// mechanism the broker does not enable).
    pub fn is_authentication(&self) -> bool {
        matches!(self.0, ConnectionError::Authentication { .. })
    }
}

impl From<ConnectionError> for AdminError {
    fn from(e: ConnectionError) -> AdminError {
        AdminError::Connection(ConnectionFailure(e))
    }
}

/// A failed admin call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// Could not talk to the broker.
    #[error(transparent)]
    Connection(ConnectionFailure),
    /// The broker refused.
    #[error("{topic}: {} (error code {code}){}",
        ResponseError::try_from_code(*code).map_or_else(|| "no error".to_string(), |e| e.to_string()),
        message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Refused {
        /// The topic (or other resource) the refusal concerns.
        topic: String,
        /// The Kafka error code ([`AdminError::broker_error`] names it).
        code: i16,
        /// The broker's message, if any.
        message: Option<String>,
    },
    /// No bootstrap address was given.
    #[error("no bootstrap address")]
    NoBootstrap,
}

impl AdminError {
    /// The broker's error, when it refused; `None` when the call failed
    /// without a refusal (connection, no bootstrap address).
    ///
    /// ```
    /// use courier::admin::AdminError;
    /// use courier::BrokerError;
    /// let e = AdminError::Refused { topic: "orders".into(), code: 36, message: None };
    /// assert_eq!(e.broker_error(), Some(BrokerError::TopicAlreadyExists));
    /// assert!(e.is_topic_exists() && !e.is_unknown_topic());
    /// ```
    pub fn broker_error(&self) -> Option<BrokerError> {
        match self {
            AdminError::Refused { code, .. } => BrokerError::from_code(*code),
            _ => None,
        }
    }

    /// The topic already exists (TOPIC_ALREADY_EXISTS).
    pub fn is_topic_exists(&self) -> bool {
        self.broker_error() == Some(BrokerError::TopicAlreadyExists)
    }

    /// The topic does not exist (UNKNOWN_TOPIC_OR_PARTITION, or
    /// UNKNOWN_TOPIC_ID from a broker that names topics by id).
    pub fn is_unknown_topic(&self) -> bool {
        matches!(
            self.broker_error(),
            Some(BrokerError::UnknownTopicOrPartition | BrokerError::UnknownTopicId)
        )
    }
}

/// One partition of a [`TopicDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionDescription {
    /// The partition index.
    pub partition: i32,
    /// The leader's broker id; `None` while the partition has none.
    pub leader: Option<i32>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// Every replica's broker id, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on brokers that are offline.
    pub offline_replicas: Vec<i32>,
}

/// A topic as the cluster's metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// Its id, in the form Kafka prints (`Uuid::toString`: 16 bytes,
    /// base64url without padding); `None` from brokers without topic ids.
    pub topic_id: Option<String>,
    /// An internal topic (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
    /// Its partitions, by index.
    pub partitions: Vec<PartitionDescription>,
}

/// One broker of a [`ClusterDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerDescription {
    /// The broker id (`node.id`).
    pub id: i32,
    /// The host it advertises.
    pub host: String,
    /// The port it advertises.
    pub port: i32,
    /// Its rack (`broker.rack`), if set.
    pub rack: Option<String>,
}

/// The cluster as the bootstrap broker describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The active controller's node id: in KRaft the leader of the
    /// metadata quorum (DescribeQuorum, as `kafka-metadata-quorum.sh
    /// describe --status` reports it). From a broker that does not answer
    /// DescribeQuorum (not offered, or not allowed: it needs DESCRIBE on
    /// the cluster), Metadata's controller id, which a KRaft broker fills
    /// with any live broker (as the Java client's `describeCluster`
    /// reports it). `None` when there is none.
    pub controller: Option<i32>,
    /// The live brokers, by id.
    pub brokers: Vec<BrokerDescription>,
    /// The address this description was asked of.
    pub bootstrap_broker: String,
    /// For every API Courier uses, the version agreed with that broker.
    pub api_versions: Vec<AgreedVersion>,
}

/// An API Courier uses, and the version agreed for it with a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgreedVersion {
    /// The API's name as the Kafka protocol guide spells it (`Produce`,
    /// `Metadata`, `InitProducerId`, …).
    pub api: String,
    /// The newest version both speak; `None` when the broker offers none
    /// of the versions Courier speaks.
    pub version: Option<i16>,
}

/// Where a config value comes from (DescribeConfigs `config_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic itself (Java's `DYNAMIC_TOPIC_CONFIG`).
    DynamicTopic,
    /// A dynamic config of this broker (`DYNAMIC_BROKER_CONFIG`).
    DynamicBroker,
    /// A dynamic default for every broker (`DYNAMIC_DEFAULT_BROKER_CONFIG`).
    DynamicDefaultBroker,
    /// The broker's `server.properties` (`STATIC_BROKER_CONFIG`).
    StaticBroker,
    /// Kafka's default (`DEFAULT_CONFIG`).
    Default,
    /// A broker logger level (`DYNAMIC_BROKER_LOGGER_CONFIG`).
    DynamicBrokerLogger,
    /// A client metrics subscription (`DYNAMIC_CLIENT_METRICS_CONFIG`).
    DynamicClientMetrics,
    /// A group config (`DYNAMIC_GROUP_CONFIG`).
    DynamicGroup,
    /// Not known (`UNKNOWN`), or a source this version of Courier does not name.
    Unknown(i8),
}

impl ConfigSource {
    fn from_wire(source: i8) -> ConfigSource {
        match source {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            7 => ConfigSource::DynamicClientMetrics,
            8 => ConfigSource::DynamicGroup,
            other => ConfigSource::Unknown(other),
        }
    }

    /// The Java client's name for it (`ConfigEntry.ConfigSource`), as
    /// `kafka-configs.sh` prints it.
    pub fn java_name(self) -> &'static str {
        match self {
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
            ConfigSource::DynamicClientMetrics => "DYNAMIC_CLIENT_METRICS_CONFIG",
            ConfigSource::DynamicGroup => "DYNAMIC_GROUP_CONFIG",
            ConfigSource::Unknown(_) => "UNKNOWN",
        }
    }
}

/// One config of a topic, as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigEntry {
    /// The config's name (`retention.ms`).
    pub name: String,
    /// Its value; `None` when it has none, or it is sensitive.
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Cannot be changed on a topic.
    pub read_only: bool,
    /// A secret (the broker does not send its value).
    pub sensitive: bool,
}

impl ConfigEntry {
    /// The value is Kafka's default (nothing set it on the topic or broker).
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::Default
    }
}

/// One change of [`alter_topic_config`]: the operations of
/// IncrementalAlterConfigs (KIP-339), as the Java client's
/// `AlterConfigOp`. Configs the list does not name keep their values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigOp {
    /// Set `name` to `value` on the topic (`AlterConfigOp.OpType.SET`).
    Set {
        /// The config.
        name: String,
        /// Its new value.
        value: String,
    },
    /// Remove the topic's own value of `name`, so that the broker's (or
    /// Kafka's default) applies again (`AlterConfigOp.OpType.DELETE`).
    Delete {
        /// The config.
        name: String,
    },
}

impl ConfigOp {
    /// [`ConfigOp::Set`].
    pub fn set(name: impl Into<String>, value: impl Into<String>) -> ConfigOp {
        ConfigOp::Set {
            name: name.into(),
            value: value.into(),
        }
    }

    /// [`ConfigOp::Delete`].
    pub fn delete(name: impl Into<String>) -> ConfigOp {
        ConfigOp::Delete { name: name.into() }
    }

    fn to_wire(&self) -> AlterableConfig {
        let (name, op, value) = match self {
            ConfigOp::Set { name, value } => (name, 0, Some(value)),
            ConfigOp::Delete { name } => (name, 1, None),
        };
        AlterableConfig::default()
            .with_name(text(name))
            .with_config_operation(op)
            .with_value(value.map(|v| text(v)))
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// `Err(Refused)` for a non-zero `code`.
fn refused(topic: &str, code: i16, message: Option<&StrBytes>) -> Result<(), AdminError> {
    if code == 0 {
        return Ok(());
    }
    Err(AdminError::Refused {
        topic: topic.to_string(),
        code,
        message: message.map(|m| m.to_string()),
    })
}

/// A refusal for `topic` when the broker's answer holds no result for it.
fn no_result(topic: &str, api: &str) -> AdminError {
    AdminError::Refused {
        topic: topic.to_string(),
        code: -1,
        message: Some(format!("the {api} response holds no result for it")),
    }
}

async fn connect(bootstrap: &str, opts: &AdminOptions) -> Result<Connection, AdminError> {
    let mut last = None;
    for addr in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        match Connection::connect(addr, &opts.connection).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(AdminError::NoBootstrap, AdminError::from))
}

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
/// # async fn run() -> Result<(), courier::admin::AdminError> {
/// use courier::admin::AdminOptions;
/// courier::admin::create_topic_with_configs(
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

/// Metadata for `topics` (`None`: every topic; `Some(&[])`: none, only
/// brokers and cluster), never creating a topic.
async fn metadata(
    conn: &mut Connection,
    topics: Option<&[&str]>,
) -> Result<MetadataResponse, AdminError> {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(text(t)))))
            .collect()
    });
    let req = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(false);
    Ok(conn.request(&req).await?)
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
/// # async fn run() -> Result<(), courier::admin::AdminError> {
/// use courier::admin::{alter_topic_config, ConfigOp};
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
