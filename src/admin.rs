//! Small admin operations over a single connection: create and list topics.
//! Used by the `courier` command-line tool and by tests; the producer
//! itself never needs them.

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::connection::{Connection, ConnectionError, ConnectionOptions};

/// A failed admin call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// Could not talk to the broker.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The broker refused.
    #[error("{topic}: error code {code}{}", message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Refused {
        /// The topic.
        topic: String,
        /// The Kafka error code.
        code: i16,
        /// The broker's message, if any.
        message: Option<String>,
    },
    /// No bootstrap address was given.
    #[error("no bootstrap address")]
    NoBootstrap,
}

async fn connect(bootstrap: &str, opts: &ConnectionOptions) -> Result<Connection, AdminError> {
    let mut last = None;
    for addr in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        match Connection::connect(addr, opts).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(AdminError::NoBootstrap, AdminError::Connection))
}

/// Creates `topic` with `partitions` partitions. An existing topic
/// (TOPIC_ALREADY_EXISTS) is an error with code 36.
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), AdminError> {
    create_topic_with(
        &ConnectionOptions::default(),
        bootstrap,
        topic,
        partitions,
        replication_factor,
    )
    .await
}

/// [`create_topic`] over connections made with `opts` (TLS, SASL).
pub async fn create_topic_with(
    opts: &ConnectionOptions,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let t = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor);
    let req = CreateTopicsRequest::default()
        .with_topics(vec![t])
        .with_timeout_ms(30_000);
    let resp = conn.request(&req).await?;
    match resp.topics.first() {
        Some(t) if t.error_code != 0 => Err(AdminError::Refused {
            topic: topic.to_string(),
            code: t.error_code,
            message: t.error_message.as_ref().map(|m| m.to_string()),
        }),
        _ => Ok(()),
    }
}

/// Every topic with its partition count, sorted by name.
pub async fn list_topics(bootstrap: &str) -> Result<Vec<(String, usize)>, AdminError> {
    list_topics_with(&ConnectionOptions::default(), bootstrap).await
}

/// [`list_topics`] over connections made with `opts` (TLS, SASL).
pub async fn list_topics_with(
    opts: &ConnectionOptions,
    bootstrap: &str,
) -> Result<Vec<(String, usize)>, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let resp = conn
        .request(&MetadataRequest::default().with_topics(None))
        .await?;
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
