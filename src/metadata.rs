//! The producer's view of the cluster: brokers, topics, partition counts and
//! leaders. The partitioner actor builds a new [`MetadataSnapshot`] from each
//! Metadata response and publishes it; producer handles read the current one
//! without waiting on a lock (arc-swap), once per produce call; a
//! `Subscriber` through its own cache of the snapshot it last saw
//! (`engine::enqueue::SnapshotCache`).

use crate::clock::Instant;
use std::collections::HashMap;

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
    /// Leader epoch per partition (Metadata v7+; -1 where the broker gives
    /// none). An answer carrying an older epoch than the one held for a
    /// partition is stale: the partition keeps its leader (KIP-320).
    pub leader_epochs: Vec<i32>,
    /// The topic's id (Metadata v10+; 0 when the broker gives none). A new
    /// id under the same name means the topic was deleted and re-created.
    pub topic_id: u128,
    /// The default partitioner's current sticky partition for the topic
    /// (`TopicLayout::sticky`), carried from snapshot to snapshot.
    pub sticky: StickySlot,
    /// What the producer keeps per topic for as long as its partition
    /// count stays (the engine's partition queues, found once instead of
    /// by a hashed look-up per record).
    pub cache: TopicCache,
}

/// Room for the layers above to keep something per topic and partition
/// count: filled on first use, carried from snapshot to snapshot while the
/// topic's id and partition count stay. Typed `Any`, because what goes in
/// (the accumulator's queues) belongs to a layer above this one. Not part
/// of the description (every cache compares equal).
#[derive(Debug, Clone, Default)]
pub struct TopicCache(
    pub std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn std::any::Any + Send + Sync>>>,
);

impl PartialEq for TopicCache {
    fn eq(&self, _other: &TopicCache) -> bool {
        true
    }
}

impl Eq for TopicCache {}

/// A topic's sticky-partition slot (`partitioner::StickyState`: no
/// partition until one is chosen). Shared by the snapshots that describe
/// the topic; not part of the description (every slot compares equal).
#[derive(Debug, Clone, Default)]
pub struct StickySlot(pub(crate) std::sync::Arc<crate::partitioner::StickyState>);

impl PartialEq for StickySlot {
    fn eq(&self, _other: &StickySlot) -> bool {
        true
    }
}

impl Eq for StickySlot {}

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
    /// Each topic's entry is shared (`Arc`) with the next snapshot when
    /// its Metadata response does not list the topic, and with the
    /// produce handles' snapshot caches.
    pub topics: HashMap<Topic, std::sync::Arc<TopicMetadata>, crate::record::TopicHasher>,
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
            // Kafka lists every partition of a topic, indexes 0..n. Sizes
            // come from the entries the response holds (already bounded by
            // its bytes), never from an index read off the wire: an index
            // outside 0..n, or one listed twice, makes the topic's entry
            // unusable, and the previous view of it is kept.
            let n = t.partitions.len();
            let mut leaders = vec![-1; n];
            let mut leader_epochs = vec![-1; n];
            let mut seen = vec![false; n];
            let bad = t.partitions.iter().find(|p| {
                match usize::try_from(p.partition_index).ok().filter(|i| *i < n) {
                    Some(i) if !std::mem::replace(&mut seen[i], true) => {
                        leaders[i] = p.leader_id.0;
                        leader_epochs[i] = p.leader_epoch;
                        false
                    }
                    _ => true,
                }
            });
            let (Some(count), None) = (i32::try_from(n).ok(), bad) else {
                tracing::warn!(
                    topic = %topic,
                    partitions = n,
                    bad_index = bad.map(|p| p.partition_index),
                    "metadata lists a partition index twice or outside the topic's partitions; ignored"
                );
                continue;
            };
            missing.remove(&topic);
            let topic_id = t.topic_id.as_u128();
            // The same topic keeps its sticky partition; a re-created one
            // (a new id) starts afresh.
            let same = previous
                .topics
                .get(&topic)
                .filter(|old| old.topic_id == topic_id);
            // Only with topic ids (Metadata v10+): without them a topic
            // deleted and re-created looks like the same one, and its new
            // epochs (from 0) would lose to the old topic's.
            if let Some(old) = same.filter(|_| topic_id != 0) {
                keep_newer_leaders(&topic, old, &mut leaders, &mut leader_epochs);
            }
            let available = (0..count).filter(|p| leaders[*p as usize] >= 0).collect();
            let sticky = same.map(|old| old.sticky.clone()).unwrap_or_default();
            let cache = same
                .filter(|old| old.partition_count == count)
                .map(|old| old.cache.clone())
                .unwrap_or_default();
            topics.insert(
                topic,
                std::sync::Arc::new(TopicMetadata {
                    partition_count: count,
                    leaders,
                    available,
                    leader_epochs,
                    topic_id,
                    sticky,
                    cache,
                }),
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

/// A partition's leader as a Produce answer named it (KIP-951): the
/// broker `from` refused a batch of it, naming `leader` at `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderHint {
    /// The partition's topic.
    pub topic: Topic,
    /// The partition.
    pub partition: i32,
    /// The broker that refused the batch (it no longer leads).
    pub from: i32,
    /// The leader it named.
    pub leader: i32,
    /// That leader's epoch.
    pub epoch: i32,
}

/// What [`MetadataSnapshot::with_leader_hints`] made of a set of hints.
#[derive(Debug, Clone, Default)]
pub struct HintsApplied {
    /// The snapshot with the hints in it; `None` when no hint changed
    /// anything (the current snapshot stands).
    pub snapshot: Option<MetadataSnapshot>,
    /// Partitions whose leader the hints moved.
    pub moved: Vec<(Topic, i32)>,
    /// Partitions whose refused batches may be retried at once: those
    /// moved, and those the metadata had moved away from the refusing
    /// broker already (a batch sent before the move; Java skips the
    /// backoff of a batch whose leader changed since its last attempt).
    pub retry_now: Vec<(Topic, i32)>,
    /// Some hint could not be used and only a Metadata answer can mend
    /// that: it named a broker whose address nobody gave, a partition the
    /// metadata does not hold, the refusing broker itself, or the epoch
    /// the metadata holds with the refusing broker as its leader.
    pub refresh: bool,
}

impl MetadataSnapshot {
    /// This snapshot with leaders learnt from Produce answers (KIP-951),
    /// as the Java client's `Metadata.updatePartitionLeadership`: a hint
    /// moves its partition only if its epoch is newer than the one held
    /// (or none is held), the partition is one the snapshot describes,
    /// and the leader's address is known (from the snapshot, or from
    /// `endpoints`, the answer's `NodeEndpoints`). Endpoints add brokers
    /// the snapshot lacks; a broker it knows keeps its Metadata address.
    /// Everything else (other partitions, topic ids, when it was fetched)
    /// stays as it is.
    pub fn with_leader_hints(
        &self,
        hints: &[LeaderHint],
        endpoints: &[(i32, String)],
    ) -> HintsApplied {
        let mut brokers = self.brokers.clone();
        let mut topics = self.topics.clone();
        let mut moved = Vec::new();
        let mut retry_now = Vec::new();
        let mut refresh = false;
        for h in hints {
            let Some(t) = topics.get(&h.topic) else {
                refresh = true;
                continue;
            };
            let Some(p) = usize::try_from(h.partition)
                .ok()
                .filter(|p| *p < t.leaders.len())
            else {
                refresh = true;
                continue;
            };
            // A broker naming itself leader while refusing as not leader
            // says nothing usable.
            if h.leader == h.from {
                refresh = true;
                continue;
            }
            let held = t.leader_epochs.get(p).copied().unwrap_or(-1);
            if held >= 0 && h.epoch <= held {
                tracing::debug!(topic = %h.topic, partition = h.partition, held, hinted = h.epoch, "leader hint no newer than the metadata; ignored");
                // The metadata names the refusing broker at the very epoch
                // it says someone else leads: only a Metadata answer can
                // settle that. At a newer epoch than its hint, the broker
                // has not caught up with its own promotion (a hint from the
                // old leader got here first): the retry goes to it again,
                // after the backoff, and a Metadata answer would say no more.
                refresh |= t.leaders[p] == h.from && h.epoch == held;
                if t.leaders[p] >= 0 && t.leaders[p] != h.from {
                    retry_now.push((h.topic, h.partition));
                }
                continue;
            }
            if !brokers.contains_key(&h.leader) {
                match endpoints.iter().find(|(id, _)| *id == h.leader) {
                    Some((id, addr)) => {
                        brokers.insert(*id, addr.clone());
                    }
                    None => {
                        tracing::debug!(topic = %h.topic, partition = h.partition, leader = h.leader, "leader hint names a broker with no known address; ignored");
                        refresh = true;
                        continue;
                    }
                }
            }
            let mut entry = TopicMetadata::clone(t);
            entry.leaders[p] = h.leader;
            if let Some(e) = entry.leader_epochs.get_mut(p) {
                *e = h.epoch;
            }
            entry.available = (0..entry.partition_count)
                .filter(|i| entry.leaders[*i as usize] >= 0)
                .collect();
            topics.insert(h.topic, std::sync::Arc::new(entry));
            moved.push((h.topic, h.partition));
            retry_now.push((h.topic, h.partition));
        }
        let snapshot = (!moved.is_empty()).then(|| MetadataSnapshot {
            brokers,
            topics,
            missing: self.missing.clone(),
            fetched_at: self.fetched_at,
        });
        HintsApplied {
            snapshot,
            moved,
            retry_now,
            refresh,
        }
    }
}

/// KIP-320, as the Java client's `Metadata.updateLatestMetadata`: a
/// partition whose new leader epoch is older than the one `old` holds is
/// described by an answer from a broker that has not caught up (answers
/// come from any broker, and a slow one can still name the leader before
/// a move). It keeps its leader and epoch; the rest of the answer stands.
fn keep_newer_leaders(topic: &Topic, old: &TopicMetadata, leaders: &mut [i32], epochs: &mut [i32]) {
    for (p, (leader, epoch)) in leaders.iter_mut().zip(epochs.iter_mut()).enumerate() {
        let Some(&held) = old.leader_epochs.get(p) else {
            continue;
        };
        if *epoch >= 0 && held > *epoch {
            tracing::debug!(topic = %topic, partition = p, held, answered = *epoch, "stale leader epoch in a metadata answer; partition kept");
            *leader = old.leaders[p];
            *epoch = held;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response(partitions: &[(i32, i32)]) -> MetadataResponse {
        let t = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(
                partitions
                    .iter()
                    .map(|(index, leader)| {
                        MetadataResponsePartition::default()
                            .with_partition_index(*index)
                            .with_leader_id(BrokerId(*leader))
                    })
                    .collect(),
            );
        MetadataResponse::default().with_topics(vec![t])
    }

    #[test]
    fn partitions_in_any_order_give_leaders_by_index() {
        let s = MetadataSnapshot::from_response(
            &response(&[(2, 7), (0, 5), (1, -1)]),
            &MetadataSnapshot::default(),
        );
        let t = &s.topics[&Topic::from("t")];
        assert_eq!(t.partition_count, 3);
        assert_eq!(t.leaders, vec![5, -1, 7]);
        assert_eq!(t.available, vec![0, 2]);
    }

    /// Hostile indexes neither panic (`i32::MAX + 1` overflowed) nor
    /// allocate by the index (1e9 made a 4 GB vector): the entry is ignored
    /// and the topic keeps its previous metadata.
    #[test]
    fn hostile_partition_indexes_are_ignored() {
        let before = MetadataSnapshot::from_response(
            &response(&[(0, 1), (1, 2)]),
            &MetadataSnapshot::default(),
        );
        for hostile in [
            vec![(i32::MAX, 1)],
            vec![(1_000_000_000, 1), (0, 1)],
            vec![(-5, 1)],
            vec![(0, 1), (0, 2)], // index 1 missing: 0 twice
            vec![(0, 1), (2, 1)],
        ] {
            let s = MetadataSnapshot::from_response(&response(&hostile), &before);
            assert_eq!(
                s.topics[&Topic::from("t")],
                before.topics[&Topic::from("t")],
                "{hostile:?}"
            );
        }
    }
    /// The sticky slot stays while the topic does (same id), the cache
    /// while its partition count does too; a re-created topic starts both
    /// afresh.
    #[test]
    fn sticky_slot_and_cache_follow_the_topic() {
        use std::sync::Arc;
        let with_id = |partitions: &[(i32, i32)], id: u128| {
            let mut r = response(partitions);
            r.topics[0].topic_id = uuid_of(id);
            r
        };
        let first = MetadataSnapshot::from_response(
            &with_id(&[(0, 1), (1, 1)], 7),
            &MetadataSnapshot::default(),
        );
        let a = first.topics[&Topic::from("t")].clone();
        a.cache.0.set(Arc::new(1u8)).unwrap();
        let moved = MetadataSnapshot::from_response(&with_id(&[(0, 1), (1, 2)], 7), &first);
        let b = &moved.topics[&Topic::from("t")];
        assert!(Arc::ptr_eq(&a.sticky.0, &b.sticky.0));
        assert!(
            Arc::ptr_eq(&a.cache.0, &b.cache.0),
            "a leader move keeps the cache"
        );
        let grown = MetadataSnapshot::from_response(&with_id(&[(0, 1), (1, 1), (2, 1)], 7), &moved);
        let c = &grown.topics[&Topic::from("t")];
        assert!(Arc::ptr_eq(&a.sticky.0, &c.sticky.0));
        assert!(
            c.cache.0.get().is_none(),
            "a new partition count empties the cache"
        );
        c.cache.0.set(Arc::new(2u8)).unwrap();
        let recreated =
            MetadataSnapshot::from_response(&with_id(&[(0, 1), (1, 1), (2, 1)], 8), &grown);
        let d = &recreated.topics[&Topic::from("t")];
        assert!(
            !Arc::ptr_eq(&a.sticky.0, &d.sticky.0),
            "a new topic id: a new slot"
        );
        assert_eq!(d.sticky.0.current().0, -1);
        assert!(
            d.cache.0.get().is_none(),
            "a new topic id, same count: a new cache"
        );
    }

    /// KIP-320: an answer naming an older leader epoch for a partition (a
    /// broker that has not caught up with a leader move) leaves the
    /// partition's leader as it is; a newer or equal epoch moves it. An
    /// answer without epochs (before Metadata v7) is taken as it is.
    #[test]
    fn an_older_leader_epoch_does_not_move_a_partition_back() {
        let t = |s: &MetadataSnapshot| {
            let m = &s.topics[&Topic::from("t")];
            (m.leaders.clone(), m.leader_epochs.clone())
        };
        let first = MetadataSnapshot::from_response(
            &with_epochs(&[(0, 1, 4), (1, 2, 7)]),
            &MetadataSnapshot::default(),
        );
        let moved = MetadataSnapshot::from_response(&with_epochs(&[(0, 3, 5), (1, 2, 7)]), &first);
        assert_eq!(t(&moved), (vec![3, 2], vec![5, 7]));
        let stale = MetadataSnapshot::from_response(&with_epochs(&[(0, 1, 4), (1, 3, 8)]), &moved);
        assert_eq!(
            t(&stale),
            (vec![3, 3], vec![5, 8]),
            "partition 0's answer is older than what is held; partition 1's is newer"
        );
        let leaderless =
            MetadataSnapshot::from_response(&with_epochs(&[(0, 1, 3), (1, -1, 8)]), &stale);
        assert_eq!(t(&leaderless), (vec![3, -1], vec![5, 8]));
        assert_eq!(leaderless.topics[&Topic::from("t")].available, vec![0]);
        let unversioned =
            MetadataSnapshot::from_response(&with_epochs(&[(0, 1, -1), (1, 2, -1)]), &stale);
        assert_eq!(t(&unversioned), (vec![1, 2], vec![-1, -1]));
        // Without topic ids (before v10) epochs are not compared: a topic
        // deleted and re-created would start again from epoch 0.
        let mut no_id = with_epochs(&[(0, 1, 0), (1, 2, 0)]);
        no_id.topics[0].topic_id = uuid_of(0);
        let mut held = MetadataSnapshot::from_response(&no_id, &MetadataSnapshot::default());
        let mut t0 = (*held.topics[&Topic::from("t")]).clone();
        t0.leader_epochs = vec![9, 9];
        held.topics
            .insert(Topic::from("t"), std::sync::Arc::new(t0));
        let taken = MetadataSnapshot::from_response(&no_id, &held);
        assert_eq!(t(&taken), (vec![1, 2], vec![0, 0]));
    }

    /// An answer for topic "t" (id 5) with `(partition, leader, epoch)`.
    fn with_epochs(partitions: &[(i32, i32, i32)]) -> MetadataResponse {
        let mut r = response(
            &partitions
                .iter()
                .map(|(p, l, _)| (*p, *l))
                .collect::<Vec<_>>(),
        );
        for (entry, (_, _, epoch)) in r.topics[0].partitions.iter_mut().zip(partitions) {
            entry.leader_epoch = *epoch;
        }
        r.topics[0].topic_id = uuid_of(5);
        r
    }

    /// A snapshot of topic "t" (id 5) with `(partition, leader, epoch)`,
    /// brokers 1 to 3 known.
    fn held(partitions: &[(i32, i32, i32)]) -> MetadataSnapshot {
        let r = with_epochs(partitions);
        let mut s = MetadataSnapshot::from_response(&r, &MetadataSnapshot::default());
        for id in 1..=3 {
            s.brokers.insert(id, format!("b{id}:9092"));
        }
        s
    }

    fn hint(partition: i32, from: i32, leader: i32, epoch: i32) -> LeaderHint {
        LeaderHint {
            topic: Topic::from("t"),
            partition,
            from,
            leader,
            epoch,
        }
    }

    fn leaders(s: &MetadataSnapshot) -> (Vec<i32>, Vec<i32>) {
        let m = &s.topics[&Topic::from("t")];
        (m.leaders.clone(), m.leader_epochs.clone())
    }

    /// KIP-951: a hint newer than the epoch held moves its partition (and
    /// nothing else); the topic keeps its sticky slot and queue cache, the
    /// snapshot its fetch time; no Metadata request is needed.
    #[test]
    fn a_newer_leader_hint_moves_its_partition() {
        let before = held(&[(0, 1, 4), (1, 2, 7), (2, -1, 3)]);
        let t = before.topics[&Topic::from("t")].clone();
        let done = before.with_leader_hints(&[hint(0, 1, 3, 5), hint(2, 1, 2, 4)], &[]);
        assert_eq!(
            done.moved,
            vec![(Topic::from("t"), 0), (Topic::from("t"), 2)]
        );
        assert_eq!(done.retry_now, done.moved);
        assert!(!done.refresh);
        let after = done.snapshot.expect("a new snapshot");
        assert_eq!(leaders(&after), (vec![3, 2, 2], vec![5, 7, 4]));
        let moved = &after.topics[&Topic::from("t")];
        assert_eq!(
            moved.available,
            vec![0, 1, 2],
            "a leaderless partition has one now"
        );
        assert!(std::sync::Arc::ptr_eq(&t.sticky.0, &moved.sticky.0));
        assert!(std::sync::Arc::ptr_eq(&t.cache.0, &moved.cache.0));
        assert_eq!(after.fetched_at, before.fetched_at);
        assert_eq!(after.brokers, before.brokers);
    }

    /// A hint no newer than the epoch held is ignored (Java's rule). A
    /// refresh is asked for only when the metadata names the refusing
    /// broker at the hint's own epoch (the two disagree about that epoch);
    /// a broker refusing at an older epoch than the metadata's has not
    /// caught up with its promotion, and a metadata that names another
    /// broker has moved on already.
    #[test]
    fn an_older_or_equal_leader_hint_is_ignored() {
        let before = held(&[(0, 1, 6), (1, 2, 7)]);
        let same = before.with_leader_hints(&[hint(0, 1, 3, 6)], &[]);
        assert!(same.snapshot.is_none());
        assert!(same.moved.is_empty());
        assert!(same.refresh, "broker 1 disowns epoch 6, which names it");
        let behind = before.with_leader_hints(&[hint(0, 1, 3, 5)], &[]);
        assert!(behind.snapshot.is_none());
        assert!(!behind.refresh, "broker 1 has not caught up with epoch 6");
        let elsewhere = before.with_leader_hints(&[hint(1, 3, 1, 6)], &[]);
        assert!(elsewhere.snapshot.is_none());
        assert!(
            !elsewhere.refresh,
            "the metadata has moved on from broker 3"
        );
        assert!(same.retry_now.is_empty() && behind.retry_now.is_empty());
        assert_eq!(
            elsewhere.retry_now,
            vec![(Topic::from("t"), 1)],
            "a batch sent to broker 3 before the move goes to broker 2 at once"
        );
    }

    /// A hint naming a broker the metadata does not know moves the
    /// partition only with that broker's address from `NodeEndpoints`
    /// (then the broker is added); without it, the hint is ignored and a
    /// refresh asked for. A known broker keeps its Metadata address.
    #[test]
    fn an_unknown_leader_needs_its_endpoint() {
        let before = held(&[(0, 1, 4), (1, 2, 7)]);
        let done = before.with_leader_hints(&[hint(0, 1, 9, 5)], &[(8, "b8:9092".into())]);
        assert!(done.snapshot.is_none());
        assert!(done.refresh);

        let done = before.with_leader_hints(
            &[hint(0, 1, 9, 5), hint(1, 2, 3, 8)],
            &[(9, "b9:9093".into()), (3, "elsewhere:1".into())],
        );
        assert!(!done.refresh);
        let after = done.snapshot.expect("a new snapshot");
        assert_eq!(leaders(&after), (vec![9, 3], vec![5, 8]));
        assert_eq!(after.brokers.get(&9).map(String::as_str), Some("b9:9093"));
        assert_eq!(after.brokers.get(&3).map(String::as_str), Some("b3:9092"));
    }

    /// Hints for a topic or partition the snapshot does not hold, or naming
    /// the refusing broker itself, change nothing and ask for a refresh;
    /// the other hints of the same answer still apply.
    #[test]
    fn hints_the_metadata_cannot_place_ask_for_a_refresh() {
        let before = held(&[(0, 1, 4), (1, 2, 7)]);
        let other = LeaderHint {
            topic: Topic::from("other"),
            ..hint(0, 1, 2, 9)
        };
        for h in [other, hint(2, 1, 2, 9), hint(-1, 1, 2, 9), hint(0, 1, 1, 9)] {
            let done = before.with_leader_hints(&[h], &[]);
            assert!(done.snapshot.is_none(), "{h:?}");
            assert!(done.refresh, "{h:?}");
        }
        let done = before.with_leader_hints(&[other, hint(1, 2, 1, 8)], &[]);
        assert!(done.refresh);
        assert_eq!(leaders(&done.snapshot.unwrap()), (vec![1, 1], vec![4, 8]));
    }

    fn uuid_of(v: u128) -> uuid::Uuid {
        uuid::Uuid::from_u128(v)
    }
}
