//! The admin calls' types: their options (`AdminOptions`), their errors
//! (`AdminError`, `ConnectionFailure`), and what they describe and change.

use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::protocol::StrBytes;

use crate::config::{ConfigError, ProducerConfig};
use crate::connection::{ConnectionError, ConnectionOptions};
use crate::kafka_error::BrokerError;
use crate::security::Security;

/// How admin calls reach a broker: TLS and SASL, `client.id`, and the
/// time limits. `AdminOptions::default()` is plaintext, client id
/// `courier`, 10 s to connect and 30 s per request.
#[derive(Debug, Clone, Default)]
pub struct AdminOptions {
    pub(super) connection: ConnectionOptions,
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
        config.security.check()?;
        config.warn_ignored();
        Ok(AdminOptions {
            connection: ConnectionOptions {
                client_id: Some(config.client_id.clone()),
                security: Security::from_config(&config.security, None)?,
                request_timeout: config.request_timeout,
                connect_timeout: config.connection_setup_timeout,
                connect_timeout_max: config.connection_setup_timeout_max,
                keepalive: config.socket_keepalive,
                family: config.broker_address_family,
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
    /// The broker refused, or answered something that cannot be read (a
    /// missing result, a value Kafka does not define: UNKNOWN_SERVER_ERROR,
    /// -1, with what was wrong). Its message names the error as Kafka
    /// does: `orders: TOPIC_ALREADY_EXISTS (36): …`.
    #[error("{topic}: {}{}",
        BrokerError::from_code(*code).map_or_else(|| "no error (0)".to_string(), |e| e.to_string()),
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
    /// use courier_kafka::admin::AdminError;
    /// use courier_kafka::BrokerError;
    /// let e = AdminError::Refused { topic: "orders".into(), code: 36, message: None };
    /// assert_eq!(e.broker_error(), Some(BrokerError::TopicAlreadyExists));
    /// assert!(e.is_topic_exists() && !e.is_unknown_topic());
    /// assert_eq!(e.to_string(), "orders: TOPIC_ALREADY_EXISTS (36)");
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
    pub(super) fn from_wire(source: i8) -> ConfigSource {
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

/// One change of [`alter_topic_config`](super::alter_topic_config): the operations of
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

    pub(super) fn to_wire(&self) -> AlterableConfig {
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

/// A protocol string of `s`.
pub(super) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
