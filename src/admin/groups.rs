//! Consumer groups: list them (ListGroups, asked of every broker, as each
//! lists the groups it coordinates), describe one (DescribeGroups), read
//! and change its committed offsets (OffsetFetch, OffsetCommit,
//! OffsetDelete) and delete it (DeleteGroups), as the Java admin client's
//! `listGroups`, `describeConsumerGroups`, `listConsumerGroupOffsets`,
//! `alterConsumerGroupOffsets`, `deleteConsumerGroupOffsets` and
//! `deleteConsumerGroups` and `kafka-consumer-groups.sh` do. Every call but
//! the listing goes to the group's coordinator (FindCoordinator), and
//! retries briefly while the coordinator loads or moves.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::Decodable;

use super::call::{
    broker_addresses, connect, coordinator_retriable, group_coordinator, malformed, metadata,
    no_result, refused, Retry,
};
use super::types::{text, AdminError, AdminOptions};
use crate::connection::Connection;
use crate::protocol::ApiKey;

/// A group as ListGroups reports it (Java's `GroupListing`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// The protocol type its members joined with: `consumer` for consumer
    /// groups, `connect` for Kafka Connect workers; empty when none.
    pub protocol_type: String,
    /// Its state (`Stable`, `Empty`, `PreparingRebalance`, …); `None` from
    /// brokers older than ListGroups v4 (Kafka 2.6).
    pub state: Option<String>,
    /// Its type (`classic`, `consumer` for KIP-848 groups, `share`,
    /// `streams`); `None` from brokers older than ListGroups v5 (Kafka 3.8).
    pub group_type: Option<String>,
}

/// One member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id` (static membership), if any.
    pub group_instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// Where it connects from (`/10.0.0.7`).
    pub client_host: String,
    /// The partitions assigned to it, by topic (sorted), read from its
    /// assignment when the group's protocol type is `consumer`; empty
    /// otherwise.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// A group as its coordinator describes it (DescribeGroups; Java's
/// `ConsumerGroupDescription`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state: `Stable`, `Empty`, `PreparingRebalance`,
    /// `CompletingRebalance`, or `Dead` for a group that does not exist.
    pub state: String,
    /// The protocol type (`consumer`; empty for a group without members).
    pub protocol_type: String,
    /// The protocol chosen: for consumer groups the assignor (`range`,
    /// `cooperative-sticky`, …).
    pub protocol: String,
    /// Its members, by member id.
    pub members: Vec<GroupMember>,
    /// The coordinator's broker id.
    pub coordinator: i32,
}

/// A group's committed offset for one partition (OffsetFetch).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset: the next record the group will read.
    pub offset: i64,
    /// The leader epoch committed with it, if any.
    pub leader_epoch: Option<i32>,
    /// The metadata committed with it, if any.
    pub metadata: Option<String>,
}

/// Every group in the cluster, sorted by id: each broker is asked for the
/// groups it coordinates (Java's `listGroups`; `kafka-consumer-groups.sh
/// --list`). Groups the principal may not DESCRIBE are left out by the
/// brokers.
pub async fn list_groups(bootstrap: &str) -> Result<Vec<GroupListing>, AdminError> {
    list_groups_with(&AdminOptions::default(), bootstrap).await
}

/// [`list_groups`] over connections made with `opts` (TLS, SASL).
pub async fn list_groups_with(
    opts: &AdminOptions,
    bootstrap: &str,
) -> Result<Vec<GroupListing>, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let brokers = broker_addresses(&metadata(&mut conn, Some(&[])).await?);
    let mut groups = Vec::new();
    let mut conn = Some(conn);
    for (_, addr) in brokers {
        let mut c = match conn.take() {
            Some(c) if c.addr() == addr => c,
            _ => Connection::connect(&addr, &opts.connection).await?,
        };
        groups.extend(list_groups_of(&mut c).await?);
    }
    groups.sort_by(|a: &GroupListing, b| a.group_id.cmp(&b.group_id));
    groups.dedup_by(|a, b| a.group_id == b.group_id);
    Ok(groups)
}

/// The groups the broker behind `conn` coordinates.
async fn list_groups_of(conn: &mut Connection) -> Result<Vec<GroupListing>, AdminError> {
    let version = conn.versions().get(ApiKey::ListGroups);
    let resp = conn.request(&ListGroupsRequest::default()).await?;
    refused(conn.addr(), resp.error_code, None)?;
    Ok(resp
        .groups
        .iter()
        .map(|g| GroupListing {
            group_id: g.group_id.0.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: (version >= Some(4)).then(|| g.group_state.to_string()),
            group_type: (version >= Some(5)).then(|| g.group_type.to_string()),
        })
        .collect())
}

/// `group` with its state and members and what each member is assigned
/// (Java's `describeConsumerGroups`; `kafka-consumer-groups.sh --describe
/// --members --verbose`). A group that does not exist is described as
/// `Dead` with no members, as the broker reports it.
pub async fn describe_group(bootstrap: &str, group: &str) -> Result<GroupDescription, AdminError> {
    describe_group_with(&AdminOptions::default(), bootstrap, group).await
}

/// [`describe_group`] over connections made with `opts` (TLS, SASL).
pub async fn describe_group_with(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
) -> Result<GroupDescription, AdminError> {
    let mut retry = Retry::new();
    loop {
        let (mut conn, coordinator) = group_coordinator(opts, bootstrap, group).await?;
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let resp = conn.request(&req).await?;
        let g = resp
            .groups
            .iter()
            .find(|g| g.group_id.0.as_str() == group)
            .ok_or_else(|| no_result(group, "DescribeGroups"))?;
        if coordinator_retriable(g.error_code) && retry.again().await {
            continue;
        }
        refused(group, g.error_code, g.error_message.as_ref())?;
        let consumer = g.protocol_type.as_str() == "consumer";
        let mut members = Vec::with_capacity(g.members.len());
        for m in &g.members {
            let assignment = if consumer {
                assignment(group, m.member_assignment.clone())?
            } else {
                Vec::new()
            };
            members.push(GroupMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assignment,
            });
        }
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        return Ok(GroupDescription {
            group_id: group.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members,
            coordinator,
        });
    }
}

/// A consumer member's assignment (ConsumerProtocolAssignment: a version,
/// then the body): its partitions by topic. Empty bytes (a group between
/// rebalances) are no partitions.
fn assignment(group: &str, mut bytes: bytes::Bytes) -> Result<Vec<(String, Vec<i32>)>, AdminError> {
    use bytes::Buf as _;
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    if bytes.len() < 2 {
        return Err(malformed(
            group,
            "a member's assignment is cut short".into(),
        ));
    }
    // Versions 0 to 3 share the layout this crate decodes; a newer one
    // starts with the same fields (the protocol's rule for it).
    let version = bytes.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version)
        .map_err(|e| malformed(group, format!("a member's assignment does not decode: {e}")))?;
    let mut out: Vec<(String, Vec<i32>)> = a
        .assigned_partitions
        .iter()
        .map(|t| {
            let mut p = t.partitions.clone();
            p.sort_unstable();
            (t.topic.0.to_string(), p)
        })
        .collect();
    out.sort();
    Ok(out)
}

/// `group`'s committed offsets, every partition it has one for, sorted by
/// topic and partition (Java's `listConsumerGroupOffsets`). A group that
/// does not exist has none.
pub async fn list_group_offsets(
    bootstrap: &str,
    group: &str,
) -> Result<Vec<GroupOffset>, AdminError> {
    list_group_offsets_with(&AdminOptions::default(), bootstrap, group).await
}

/// [`list_group_offsets`] over connections made with `opts` (TLS, SASL).
pub async fn list_group_offsets_with(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
) -> Result<Vec<GroupOffset>, AdminError> {
    let mut retry = Retry::new();
    'again: loop {
        let (mut conn, _) = group_coordinator(opts, bootstrap, group).await?;
        // `topics: None` asks for every partition with an offset.
        let req = OffsetFetchRequest::default();
        // v8 asks for a list of groups (KIP-709); v1 to v7 for one.
        let batched = conn.versions().get(ApiKey::OffsetFetch) >= Some(8);
        let req = if batched {
            req.with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(None)])
        } else {
            req.with_group_id(GroupId(text(group))).with_topics(None)
        };
        let resp = conn.request(&req).await?;
        // (topic, partition, offset, epoch, metadata, error).
        let mut rows: Vec<(String, i32, i64, i32, Option<String>, i16)> = Vec::new();
        let group_code = if batched {
            let g = resp
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == group)
                .ok_or_else(|| no_result(group, "OffsetFetch"))?;
            for t in &g.topics {
                for p in &t.partitions {
                    rows.push((
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata.as_ref().map(|m| m.to_string()),
                        p.error_code,
                    ));
                }
            }
            g.error_code
        } else {
            for t in &resp.topics {
                for p in &t.partitions {
                    rows.push((
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata.as_ref().map(|m| m.to_string()),
                        p.error_code,
                    ));
                }
            }
            resp.error_code
        };
        if coordinator_retriable(group_code) && retry.again().await {
            continue;
        }
        refused(group, group_code, None)?;
        let mut offsets = Vec::with_capacity(rows.len());
        for (topic, partition, offset, epoch, meta, code) in rows {
            if coordinator_retriable(code) && retry.again().await {
                continue 'again;
            }
            refused(&format!("{topic}-{partition}"), code, None)?;
            // -1: no offset committed (the broker lists only committed
            // partitions when asked for all; older ones may still say so).
            if offset < 0 {
                continue;
            }
            offsets.push(GroupOffset {
                topic,
                partition,
                offset,
                leader_epoch: (epoch >= 0).then_some(epoch),
                metadata: meta.filter(|m| !m.is_empty()),
            });
        }
        offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        return Ok(offsets);
    }
}

/// Sets `group`'s committed offsets: each `(topic, partition, offset)`
/// (Java's `alterConsumerGroupOffsets`, an OffsetCommit with generation -1
/// and no member id; `kafka-consumer-groups.sh --reset-offsets --execute`).
/// The group must be empty: while it has members the coordinator refuses
/// (UNKNOWN_MEMBER_ID). The group is made if it does not exist.
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// // Rewind the group "billing" to offset 0 on orders' partitions 0 and 1.
/// courier_kafka::admin::alter_group_offsets(
///     "127.0.0.1:9092",
///     "billing",
///     &[("orders", 0, 0), ("orders", 1, 0)],
/// )
/// .await
/// # }
/// ```
pub async fn alter_group_offsets(
    bootstrap: &str,
    group: &str,
    offsets: &[(&str, i32, i64)],
) -> Result<(), AdminError> {
    alter_group_offsets_with(&AdminOptions::default(), bootstrap, group, offsets).await
}

/// [`alter_group_offsets`] over connections made with `opts` (TLS, SASL).
pub async fn alter_group_offsets_with(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
    offsets: &[(&str, i32, i64)],
) -> Result<(), AdminError> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(text("")));
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(text(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    if topics.is_empty() {
        return Ok(());
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_group_instance_id(None)
        // v2 to v4: -1, the broker's offsets.retention.minutes.
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let mut retry = Retry::new();
    'again: loop {
        let (mut conn, _) = group_coordinator(opts, bootstrap, group).await?;
        let resp = conn.request(&req).await?;
        for (topic, partition, _) in offsets {
            let code = resp
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == *topic)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == *partition)
                .map(|p| p.error_code)
                .ok_or_else(|| no_result(&format!("{topic}-{partition}"), "OffsetCommit"))?;
            if coordinator_retriable(code) && retry.again().await {
                continue 'again;
            }
            refused(&format!("{topic}-{partition}"), code, None)?;
        }
        return Ok(());
    }
}

/// Deletes `group`'s committed offsets for each `(topic, partition)`
/// (Java's `deleteConsumerGroupOffsets`; `kafka-consumer-groups.sh
/// --delete-offsets`). A group whose members read the topic refuses
/// (GROUP_SUBSCRIBED_TO_TOPIC); one that does not exist is
/// GROUP_ID_NOT_FOUND.
pub async fn delete_group_offsets(
    bootstrap: &str,
    group: &str,
    partitions: &[(&str, i32)],
) -> Result<(), AdminError> {
    delete_group_offsets_with(&AdminOptions::default(), bootstrap, group, partitions).await
}

/// [`delete_group_offsets`] over connections made with `opts` (TLS, SASL).
pub async fn delete_group_offsets_with(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
    partitions: &[(&str, i32)],
) -> Result<(), AdminError> {
    let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
    for (topic, partition) in partitions {
        let p = OffsetDeleteRequestPartition::default().with_partition_index(*partition);
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(text(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    if topics.is_empty() {
        return Ok(());
    }
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(topics);
    let mut retry = Retry::new();
    'again: loop {
        let (mut conn, _) = group_coordinator(opts, bootstrap, group).await?;
        let resp = conn.request(&req).await?;
        if coordinator_retriable(resp.error_code) && retry.again().await {
            continue;
        }
        refused(group, resp.error_code, None)?;
        for (topic, partition) in partitions {
            let code = resp
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == *topic)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == *partition)
                .map(|p| p.error_code)
                .ok_or_else(|| no_result(&format!("{topic}-{partition}"), "OffsetDelete"))?;
            if coordinator_retriable(code) && retry.again().await {
                continue 'again;
            }
            refused(&format!("{topic}-{partition}"), code, None)?;
        }
        return Ok(());
    }
}

/// Deletes `group` and its committed offsets (Java's
/// `deleteConsumerGroups`; `kafka-consumer-groups.sh --delete`). A group
/// with members refuses (NON_EMPTY_GROUP); one that does not exist is
/// GROUP_ID_NOT_FOUND.
pub async fn delete_group(bootstrap: &str, group: &str) -> Result<(), AdminError> {
    delete_group_with(&AdminOptions::default(), bootstrap, group).await
}

/// [`delete_group`] over connections made with `opts` (TLS, SASL).
pub async fn delete_group_with(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
) -> Result<(), AdminError> {
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
    let mut retry = Retry::new();
    loop {
        let (mut conn, _) = group_coordinator(opts, bootstrap, group).await?;
        let resp = conn.request(&req).await?;
        let r = resp
            .results
            .iter()
            .find(|r| r.group_id.0.as_str() == group)
            .ok_or_else(|| no_result(group, "DeleteGroups"))?;
        if coordinator_retriable(r.error_code) && retry.again().await {
            continue;
        }
        return refused(group, r.error_code, None);
    }
}
