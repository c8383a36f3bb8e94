//! Deleting records: DeleteRecords to each partition's leader, which
//! moves the partition's log start offset (its low watermark) up to the
//! offset given, as the Java admin client's `deleteRecords` and
//! `kafka-delete-records.sh` do.

use std::collections::BTreeMap;

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};

use super::call::{broker_addresses, connect, malformed, metadata, no_result, refused};
use super::types::{text, AdminError, AdminOptions};
use crate::connection::Connection;
use crate::kafka_error::BrokerError;

/// How long a leader may take to move the low watermark (DeleteRecords
/// `timeout_ms`, waiting for the replicas), as Java's
/// `default.api.timeout.ms`-bounded call allows.
const DELETE_TIMEOUT_MS: i32 = 30_000;

/// Deletes the records of `topic` before each `(partition, offset)`: the
/// partition's log start offset moves up to `offset` (-1: to its high
/// watermark, deleting every record). Returns each partition's new low
/// watermark, by partition. A partition that does not exist, or an offset
/// past the high watermark (OFFSET_OUT_OF_RANGE), is an error naming
/// `topic-partition`; the partitions before it in the answer may have
/// been truncated.
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// // kafka-delete-records.sh with {"partitions": [{"topic": "orders", "partition": 0, "offset": 1000}]}
/// let low = courier_kafka::admin::delete_records("127.0.0.1:9092", "orders", &[(0, 1000)]).await?;
/// assert_eq!(low, vec![(0, 1000)]);
/// # Ok(())
/// # }
/// ```
pub async fn delete_records(
    bootstrap: &str,
    topic: &str,
    before: &[(i32, i64)],
) -> Result<Vec<(i32, i64)>, AdminError> {
    delete_records_with(&AdminOptions::default(), bootstrap, topic, before).await
}

/// [`delete_records`] over connections made with `opts` (TLS, SASL).
pub async fn delete_records_with(
    opts: &AdminOptions,
    bootstrap: &str,
    topic: &str,
    before: &[(i32, i64)],
) -> Result<Vec<(i32, i64)>, AdminError> {
    if before.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = connect(bootstrap, opts).await?;
    let resp = metadata(&mut conn, Some(&[topic])).await?;
    let t = resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .ok_or_else(|| no_result(topic, "Metadata"))?;
    refused(topic, t.error_code, None)?;
    let brokers: BTreeMap<i32, String> = broker_addresses(&resp).into_iter().collect();
    // The partitions to truncate, by their leader's address.
    let mut by_leader: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
    for &(partition, offset) in before {
        let name = format!("{topic}-{partition}");
        let p = t
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| AdminError::Refused {
                topic: name.clone(),
                code: BrokerError::UnknownTopicOrPartition.code(),
                message: Some("the topic has no such partition".into()),
            })?;
        refused(&name, p.error_code, None)?;
        let leader = brokers
            .get(&p.leader_id.0)
            .ok_or_else(|| AdminError::Refused {
                topic: name.clone(),
                code: BrokerError::LeaderNotAvailable.code(),
                message: Some(format!(
                    "its leader, {}, is not a live broker",
                    p.leader_id.0
                )),
            })?;
        by_leader
            .entry(leader.clone())
            .or_default()
            .push((partition, offset));
    }
    let mut conn = Some(conn);
    let mut low = Vec::with_capacity(before.len());
    for (addr, partitions) in by_leader {
        let mut c = match conn.take() {
            Some(c) if c.addr() == addr => c,
            _ => Connection::connect(&addr, &opts.connection).await?,
        };
        let req = DeleteRecordsRequest::default()
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(p, o)| {
                            DeleteRecordsPartition::default()
                                .with_partition_index(p)
                                .with_offset(o)
                        })
                        .collect(),
                )])
            .with_timeout_ms(DELETE_TIMEOUT_MS);
        let resp = c.request(&req).await?;
        for &(partition, _) in &partitions {
            let name = format!("{topic}-{partition}");
            let r = resp
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| &t.partitions)
                .find(|r| r.partition_index == partition)
                .ok_or_else(|| no_result(&name, "DeleteRecords"))?;
            refused(&name, r.error_code, None)?;
            if r.low_watermark < 0 {
                return Err(malformed(
                    &name,
                    format!("DeleteRecords answered low watermark {}", r.low_watermark),
                ));
            }
            low.push((partition, r.low_watermark));
        }
        conn = Some(c);
    }
    low.sort_unstable();
    Ok(low)
}
