//! The producer's view of the cluster: brokers, topics, partition counts and
//! leaders. The partitioner actor builds a new [`MetadataSnapshot`] from each
//! Metadata response and publishes it; producer handles read the current one
//! without locks (arc-swap), once per produce call.

use std::collections::HashMap;
use std::time::Instant;

use kafka_protocol::messages::MetadataResponse;

use crate::record::Topic;

/// One topic as the cluster last described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Number of partitions.
    pub partition_count: i32,
    /// Leader broker id per partition, -1 where there is none.
    pub leaders: Vec<i32>,
    /// Partitions that have a leader, ascending.
    pub available: Vec<i32>,
}

impl TopicMetadata {
    /// The leader of `partition`, if it has one.
    pub fn leader(&self, partition: i32) -> Option<i32> {
        self.leaders
            .get(usize::try_from(partition).ok()?)
            .copied()
            .filter(|l| *l >= 0)
    }
}

/// Immutable cluster metadata, replaced whole on every refresh.
#[derive(Debug, Clone, Default)]
pub struct MetadataSnapshot {
    /// Broker id to `host:port`.
    pub brokers: HashMap<i32, String>,
    /// Topics we have asked about and that exist.
    pub topics: HashMap<Topic, TopicMetadata, crate::record::TopicHasher>,
    /// Topics the cluster said do not exist, with the error code.
    pub missing: HashMap<Topic, i16>,
    /// When this was fetched; `None` before the first fetch.
    pub fetched_at: Option<Instant>,
}

impl MetadataSnapshot {
    /// Builds a snapshot from a Metadata response, keeping topics from
    /// `previous` that the response did not mention.
    pub fn from_response(resp: &MetadataResponse, previous: &MetadataSnapshot) -> Self {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut topics = previous.topics.clone();
        let mut missing = previous.missing.clone();
        for t in &resp.topics {
            let Some(name) = t.name.as_ref() else {
                continue;
            };
            let topic = Topic::from(name.0.as_str());
            if t.error_code != 0 && t.partitions.is_empty() {
                topics.remove(&topic);
                missing.insert(topic, t.error_code);
                continue;
            }
            missing.remove(&topic);
            let count = t
                .partitions
                .iter()
                .map(|p| p.partition_index + 1)
                .max()
                .unwrap_or(0);
            let mut leaders = vec![-1; count.max(0) as usize];
            for p in &t.partitions {
                if p.partition_index >= 0 {
                    leaders[p.partition_index as usize] = p.leader_id.0;
                }
            }
            let available = (0..count).filter(|p| leaders[*p as usize] >= 0).collect();
            topics.insert(
                topic,
                TopicMetadata {
                    partition_count: count,
                    leaders,
                    available,
                },
            );
        }
        MetadataSnapshot {
            brokers,
            topics,
            missing,
            fetched_at: Some(Instant::now()),
        }
    }
}
