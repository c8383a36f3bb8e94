//! Which partition a record goes to: pure functions and a trait.
//!
//! - A record with an explicit partition keeps it (the caller checks that,
//!   before a partitioner is asked).
//! - A keyed record goes where the Java client sends it:
//!   `(murmur2(key) & 0x7fffffff) % partitions`. librdkafka's
//!   `murmur2_random` partitioner agrees, so keyed data lands on the same
//!   partition whichever of these clients wrote it.
//! - A keyless record sticks to one partition, so keyless traffic fills
//!   few, large batches instead of many small ones. The built-in
//!   partitioner moves on once `batch.size` bytes went to the partition
//!   and it needs a new batch (KIP-794, the Java client's since 3.3);
//!   a partitioner of the user's is told when a batch closes (KIP-480's
//!   `on_new_batch`). With `partitioner.adaptive.partitioning.enable`
//!   (the default) the next partition is drawn with weights the
//!   partitioner actor publishes from the partitions' queue lengths
//!   (`PartitionLoad`), so partitions of a slow broker get less.
//!
//! # References
//! - Java: `org.apache.kafka.common.utils.Utils.murmur2`,
//!   `BuiltInPartitioner` (`partitionForKey`, `updatePartitionInfo`,
//!   `updatePartitionLoadStats`, `nextPartition`)
//! - KIP-480: Sticky Partitioner; KIP-794: Strictly Uniform Sticky
//!   Partitioner

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

/// What a partitioner may know about a topic when it chooses.
#[derive(Debug, Clone, Copy)]
pub struct TopicLayout<'a> {
    pub(crate) partition_count: i32,
    pub(crate) available: &'a [i32],
    /// The producer's sticky-partition slot for this topic (one per
    /// producer and topic, kept with its metadata), which the default and
    /// sticky partitioners use in preference to a map of their own: an
    /// atomic read per keyless record, not a hashed look-up. Every
    /// partitioner the producer asks gets it, custom ones included (so a
    /// custom partitioner that delegates to the default keeps the fast
    /// path), but only through those two. `None` (as from
    /// [`TopicLayout::new`]): the partitioner keeps its own state.
    pub(crate) sticky: Option<&'a StickyState>,
}

/// A topic's sticky partition, shared by a producer's metadata snapshots
/// of the topic: the partition and how many times it has moved, in one
/// word (so whoever appends under a partition knows which stay on it the
/// append belongs to: the bytes of a stay are counted in the partition's
/// queue, `batching::queue`), and the weights of the next choice.
#[derive(Debug)]
pub(crate) struct StickyState {
    /// `(moves << 32) | partition as u32`; partition -1 until chosen.
    current: AtomicU64,
    /// KIP-794: the weights the next move draws with, published by the
    /// partitioner actor from the queues' lengths; `None`: uniform among
    /// the partitions with a leader.
    load: arc_swap::ArcSwapOption<PartitionLoad>,
    /// Moved since the partitioner actor last published `load`: it
    /// weighs only topics whose keyless records move.
    moved: AtomicBool,
}

impl Default for StickyState {
    fn default() -> Self {
        StickyState {
            current: AtomicU64::new(pack(0, -1)),
            load: arc_swap::ArcSwapOption::empty(),
            moved: AtomicBool::new(false),
        }
    }
}

fn pack(moves: u32, partition: i32) -> u64 {
    (u64::from(moves) << 32) | u64::from(partition as u32)
}

impl StickyState {
    /// The current partition (-1 until one is chosen) and the number of
    /// its stay.
    #[inline(always)]
    pub(crate) fn current(&self) -> (i32, u32) {
        let v = self.current.load(Ordering::Relaxed);
        (v as u32 as i32, (v >> 32) as u32)
    }

    /// Moves from `from` (as `current` gave it) to `to`, unless another
    /// caller moved first; then returns what that caller chose.
    fn move_from(&self, from: (i32, u32), to: i32) -> i32 {
        let next = pack(from.1.wrapping_add(1), to);
        match self.current.compare_exchange(
            pack(from.1, from.0),
            next,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                self.moved.store(true, Ordering::Relaxed);
                to
            }
            Err(now) => now as u32 as i32,
        }
    }

    /// Whether the partition moved since the last call (which clears it).
    pub(crate) fn take_moved(&self) -> bool {
        self.moved.swap(false, Ordering::Relaxed)
    }

    /// Publishes the weights of the next moves (`None`: uniform).
    pub(crate) fn set_load(&self, load: Option<PartitionLoad>) {
        self.load.store(load.map(Arc::new));
    }

    /// The weights published last.
    pub(crate) fn load(&self) -> Option<Arc<PartitionLoad>> {
        self.load.load_full()
    }
}

/// The weights of an adaptive choice (KIP-794): partitions with shorter
/// queues are drawn more often. Built as the Java client's
/// `BuiltInPartitioner.updatePartitionLoadStats` builds its table: each
/// partition weighs `longest + 1 - its length`, as a running sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionLoad {
    partitions: Box<[i32]>,
    cumulative: Box<[u32]>,
}

impl PartitionLoad {
    /// The weights for `lengths` (partition, batches queued) of the
    /// partitions a leader is taking batches for, out of the topic's
    /// `partition_count`. `None` (draw uniformly) when there is nothing to
    /// weigh: no partition, a topic of one, or every partition counted and
    /// every length the same.
    pub(crate) fn from_lengths(lengths: &[(i32, u32)], partition_count: i32) -> Option<Self> {
        if lengths.is_empty() || partition_count < 2 {
            return None;
        }
        let longest = lengths.iter().map(|l| l.1).max().unwrap_or(0);
        let all_equal = lengths.iter().all(|l| l.1 == longest);
        if all_equal && lengths.len() == partition_count as usize {
            return None;
        }
        let mut sum = 0u32;
        let cumulative = lengths
            .iter()
            .map(|l| {
                sum = sum.saturating_add(longest - l.1 + 1);
                sum
            })
            .collect();
        Some(PartitionLoad {
            partitions: lengths.iter().map(|l| l.0).collect(),
            cumulative,
        })
    }

    /// A partition drawn with the weights; `None` when the one drawn is not
    /// below `partition_count` (weights of an older layout).
    fn draw(&self, partition_count: i32) -> Option<i32> {
        let total = *self.cumulative.last()?;
        let r = fastrand::u32(0..total);
        let i = self.cumulative.partition_point(|c| *c <= r);
        self.partitions
            .get(i)
            .copied()
            .filter(|p| (0..partition_count).contains(p))
    }
}

impl<'a> TopicLayout<'a> {
    /// A layout of `partition_count` partitions, of which `available` have
    /// a leader (for testing a partitioner).
    pub fn new(partition_count: i32, available: &'a [i32]) -> Self {
        TopicLayout {
            partition_count,
            available,
            sticky: None,
        }
    }

    /// Number of partitions; always at least 1.
    pub fn partition_count(&self) -> i32 {
        self.partition_count
    }

    /// Partitions that currently have a leader. May be empty while
    /// metadata is incomplete; then any partition may be chosen.
    pub fn available(&self) -> &'a [i32] {
        self.available
    }
}

/// Chooses partitions for records that do not name one.
///
/// Implementations are shared by every producer handle, so they take `&self`
/// and keep any state behind interior mutability.
///
/// ```
/// use courier_kafka::partitioner::{Partitioner, TopicLayout};
///
/// /// Everything to partition 0.
/// struct First;
/// impl Partitioner for First {
///     fn partition(&self, _topic: &str, _key: Option<&[u8]>, _layout: &TopicLayout) -> i32 {
///         0
///     }
/// }
/// let layout = TopicLayout::new(3, &[0, 1, 2]);
/// assert_eq!(First.partition("t", None, &layout), 0);
/// ```
pub trait Partitioner: Send + Sync + 'static {
    /// A partition in `0..layout.partition_count()` for this record.
    fn partition(&self, topic: &str, key: Option<&[u8]>, layout: &TopicLayout) -> i32;

    /// Told that the batch a record was just refused by, for `previous`, is
    /// closed; a sticky partitioner moves on here.
    fn on_new_batch(&self, _topic: &str, _previous: i32, _layout: &TopicLayout) {}
}

/// The Java client's murmur2 hash of `data` (seed `0x9747b28c`).
///
/// ```
/// assert_eq!(courier_kafka::partitioner::murmur2(b"21"), -973932308);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The Java client's partition for a keyed record:
/// `(murmur2(key) & 0x7fffffff) % partition_count`.
///
/// ```
/// use courier_kafka::partitioner::partition_for_key;
/// assert!(partition_for_key(b"user-1", 6) < 6);
/// ```
pub fn partition_for_key(key: &[u8], partition_count: i32) -> i32 {
    debug_assert!(partition_count > 0);
    (murmur2(key) & 0x7fff_ffff) % partition_count.max(1)
}

/// KIP-480 sticky choice for keyless records: one current partition per
/// topic, changed only when that partition's batch closes.
#[derive(Debug, Default)]
pub struct StickyPartitioner {
    current: DashMap<String, i32, crate::record::TopicHasher>,
}

impl StickyPartitioner {
    /// A sticky partitioner with no topic seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current partition for `topic`, choosing one on first use.
    pub fn partition(&self, topic: &str, layout: &TopicLayout) -> i32 {
        if let Some(slot) = layout.sticky {
            let now = slot.current();
            if (0..layout.partition_count).contains(&now.0) {
                return now.0;
            }
            // First use, or the slot's partition is gone: choose, unless
            // another caller just did.
            let chosen = slot.move_from(now, choose(layout, None));
            return if (0..layout.partition_count).contains(&chosen) {
                chosen
            } else {
                choose(layout, None)
            };
        }
        if let Some(p) = self.current.get(topic) {
            if *p < layout.partition_count {
                return *p;
            }
        }
        // First use, or the partition the map holds is gone: choose.
        let p = choose(layout, None);
        let count = layout.partition_count;
        *self
            .current
            .entry(topic.to_string())
            .and_modify(|cur| {
                if !(0..count).contains(cur) {
                    *cur = p;
                }
            })
            .or_insert(p)
    }

    /// Moves `topic` off `previous`, unless another caller already did.
    /// With the producer's slot, the next partition is drawn with the
    /// weights the partitioner actor published there (KIP-794), if any.
    pub fn on_new_batch(&self, topic: &str, previous: i32, layout: &TopicLayout) {
        if let Some(slot) = layout.sticky {
            let now = slot.current();
            if now.0 != previous {
                return;
            }
            let weighed = slot.load().and_then(|l| l.draw(layout.partition_count));
            let next = weighed.unwrap_or_else(|| choose(layout, Some(previous)));
            slot.move_from(now, next);
            return;
        }
        let next = choose(layout, Some(previous));
        match self.current.get_mut(topic) {
            Some(mut cur) if *cur == previous => *cur = next,
            Some(_) => {}
            None => {
                self.current.insert(topic.to_string(), next);
            }
        }
    }
}

/// A random partition, preferring ones with a leader, and not `avoid` when
/// there is any other choice.
fn choose(layout: &TopicLayout, avoid: Option<i32>) -> i32 {
    let count = layout.partition_count.max(1);
    if layout.available.is_empty() {
        if count == 1 {
            return 0;
        }
        let p = fastrand::i32(0..count);
        return match avoid {
            Some(a) if a == p => (p + 1 + fastrand::i32(0..count - 1)) % count,
            _ => p,
        };
    }
    let avail = layout.available;
    let i = fastrand::usize(0..avail.len());
    match avoid {
        Some(a) if avail[i] == a && avail.len() > 1 => {
            avail[(i + 1 + fastrand::usize(0..avail.len() - 1)) % avail.len()]
        }
        _ => avail[i],
    }
}

/// The `partitioner` property: how the built-in partitioner places a
/// record with no partition of its own. The names are librdkafka's, so a
/// rust-rdkafka config keeps its keys where they were.
///
/// The default, [`Murmur2Random`](Self::Murmur2Random), is the Java
/// client's placement; librdkafka's default is
/// [`ConsistentRandom`](Self::ConsistentRandom) (CRC32). As in librdkafka
/// 2.x, every choice but [`Random`](Self::Random) sends a record with no
/// key to a sticky partition (KIP-480), so the `_random` twins differ from
/// their plain names only for an empty, non-null key.
///
/// ```
/// use courier_kafka::partitioner::Partitioning;
/// let p: Partitioning = "consistent_random".parse().unwrap();
/// assert_eq!(p, Partitioning::ConsistentRandom);
/// // CRC32 of the key, modulo the partition count, as librdkafka places it.
/// assert_eq!(p.key_partition(b"user-7", 6), Some((crc32fast::hash(b"user-7") % 6) as i32));
/// // An empty key goes where a missing one does: to the sticky partition.
/// assert_eq!(p.key_partition(b"", 6), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Partitioning {
    /// `random`: every record to a random partition, keyed or not.
    Random,
    /// `consistent`: CRC32 of the key; an empty key goes to the partition
    /// CRC32 of nothing gives (0).
    Consistent,
    /// `consistent_random` (librdkafka's default): CRC32 of the key; an
    /// empty key is placed as a missing one is.
    ConsistentRandom,
    /// `murmur2`: the Java client's murmur2 of the key.
    Murmur2,
    /// `murmur2_random` (Courier's default, the Java client's placement):
    /// murmur2 of the key.
    #[default]
    Murmur2Random,
    /// `fnv1a`: FNV-1a of the key (Sarama's hash partitioner).
    Fnv1a,
    /// `fnv1a_random`: the same.
    Fnv1aRandom,
}

impl Partitioning {
    /// Every choice, by its property value.
    pub const ALL: [(&'static str, Partitioning); 7] = [
        ("random", Partitioning::Random),
        ("consistent", Partitioning::Consistent),
        ("consistent_random", Partitioning::ConsistentRandom),
        ("murmur2", Partitioning::Murmur2),
        ("murmur2_random", Partitioning::Murmur2Random),
        ("fnv1a", Partitioning::Fnv1a),
        ("fnv1a_random", Partitioning::Fnv1aRandom),
    ];

    /// The property value (librdkafka's name).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("murmur2_random", |(n, _)| n)
    }

    /// The partition of a record with `key`, out of `partition_count`,
    /// when the key decides it; `None` when it does not (`random`, and an
    /// empty key under `consistent_random`), and the record is placed as a
    /// keyless one.
    pub fn key_partition(self, key: &[u8], partition_count: i32) -> Option<i32> {
        let n = partition_count.max(1) as u32;
        match self {
            Partitioning::Random => None,
            Partitioning::ConsistentRandom if key.is_empty() => None,
            Partitioning::Consistent | Partitioning::ConsistentRandom => {
                Some((crc32fast::hash(key) % n) as i32)
            }
            Partitioning::Murmur2 | Partitioning::Murmur2Random => {
                Some(partition_for_key(key, partition_count))
            }
            Partitioning::Fnv1a | Partitioning::Fnv1aRandom => Some((fnv1a(key) % n) as i32),
        }
    }

    /// Whether keyless records stick to one partition (KIP-480): every
    /// choice but `random`.
    pub(crate) fn sticks_keyless(self) -> bool {
        self != Partitioning::Random
    }

    /// Whether an empty key is placed as a missing one is.
    pub(crate) fn empty_key_is_keyless(self) -> bool {
        matches!(self, Partitioning::Random | Partitioning::ConsistentRandom)
    }
}

impl std::str::FromStr for Partitioning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                "expected random, consistent, consistent_random, murmur2, murmur2_random \
                 (the default, the Java client's placement), fnv1a or fnv1a_random; \
                 consistent_random keeps rust-rdkafka's default placement"
                    .to_string()
            })
    }
}

impl std::fmt::Display for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// librdkafka's FNV-1a of `key` (32 bits), made non-negative as Sarama's
/// hash partitioner does: the absolute value of the hash as a signed
/// 32-bit number (`i32::MIN` stays `0x8000_0000`).
fn fnv1a(key: &[u8]) -> u32 {
    let h = key.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    (h as i32).wrapping_abs() as u32
}

/// The built-in partitioner: keyed records by the [`Partitioning`]'s hash
/// (by default the Java client's murmur2), keyless ones KIP-480 sticky
/// (`random`: each to a random partition).
#[derive(Debug, Default)]
pub struct DefaultPartitioner {
    sticky: StickyPartitioner,
    partitioning: Partitioning,
}

impl DefaultPartitioner {
    /// The Java client's placement (`partitioner=murmur2_random`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The placement `partitioning` names.
    pub fn with(partitioning: Partitioning) -> Self {
        DefaultPartitioner {
            sticky: StickyPartitioner::new(),
            partitioning,
        }
    }
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, layout: &TopicLayout) -> i32 {
        let by_key = key.and_then(|k| self.partitioning.key_partition(k, layout.partition_count));
        match by_key {
            Some(p) => p,
            None if self.partitioning == Partitioning::Random => random(layout),
            None => self.sticky.partition(topic, layout),
        }
    }

    fn on_new_batch(&self, topic: &str, previous: i32, layout: &TopicLayout) {
        if self.partitioning.sticks_keyless() {
            self.sticky.on_new_batch(topic, previous, layout)
        }
    }
}

/// librdkafka's `random`: any partition; one without a leader is drawn
/// again, once.
fn random(layout: &TopicLayout) -> i32 {
    let count = layout.partition_count.max(1);
    let p = fastrand::i32(0..count);
    if layout.available.is_empty() || layout.available.contains(&p) {
        p
    } else {
        fastrand::i32(0..count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values in the Java client's `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_java_known_values() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), *want, "{:?}", String::from_utf8_lossy(key));
        }
    }

    /// The same layout twice: the partitioner keeping its own state, and
    /// with a producer's sticky slot (`slot`, fresh: -1).
    fn both<'a>(count: i32, available: &'a [i32], slot: &'a StickyState) -> [TopicLayout<'a>; 2] {
        let own = TopicLayout::new(count, available);
        [
            own,
            TopicLayout {
                sticky: Some(slot),
                ..own
            },
        ]
    }

    #[test]
    fn sticky_stays_until_batch_closes_then_moves() {
        let slot = StickyState::default();
        for layout in both(4, &[0, 1, 2, 3], &slot) {
            let p = StickyPartitioner::new();
            let first = p.partition("t", &layout);
            for _ in 0..100 {
                assert_eq!(p.partition("t", &layout), first);
            }
            p.on_new_batch("t", first, &layout);
            let second = p.partition("t", &layout);
            assert_ne!(second, first, "must move to another partition");
            // A stale notification (for a partition no longer current) is ignored.
            p.on_new_batch("t", first, &layout);
            assert_eq!(p.partition("t", &layout), second);
        }
        assert!((0..4).contains(&slot.current().0), "the slot was used");
    }

    #[test]
    fn sticky_prefers_available_partitions() {
        let slot = StickyState::default();
        for layout in both(8, &[5], &slot) {
            let p = StickyPartitioner::new();
            for _ in 0..20 {
                let cur = p.partition("t", &layout);
                assert_eq!(cur, 5);
                p.on_new_batch("t", cur, &layout);
            }
        }
    }

    /// The table of the Java client's `BuiltInPartitionerTest.
    /// adaptivePartitionsTest`: queue lengths 5, 0, 3, 0, 1 weigh
    /// 1, 6, 3, 6, 5 (the longest plus one, less each length).
    #[test]
    fn load_weights_follow_javas_table_and_draws_follow_the_weights() {
        let lengths = [(0, 5), (1, 0), (2, 3), (3, 0), (4, 1)];
        let load = PartitionLoad::from_lengths(&lengths, 5).unwrap();
        assert_eq!(&*load.cumulative, &[1, 7, 10, 16, 21]);
        assert_eq!(&*load.partitions, &[0, 1, 2, 3, 4]);
        let mut seen = [0u32; 5];
        for _ in 0..21_000 {
            seen[load.draw(5).unwrap() as usize] += 1;
        }
        // Expected 1,000 / 6,000 / 3,000 / 6,000 / 5,000; far from
        // uniform (4,200 each).
        for (p, want) in [1_000, 6_000, 3_000, 6_000, 5_000].into_iter().enumerate() {
            let got = seen[p] as f64;
            assert!(
                (got - want as f64).abs() < want as f64 * 0.15,
                "partition {p}: {got} drawn, about {want} expected ({seen:?})"
            );
        }
        // Weights of an older, wider layout never give a partition the
        // topic does not have.
        let wide = PartitionLoad::from_lengths(&[(0, 0), (7, 0)], 8).unwrap();
        assert!((0..200).all(|_| wide.draw(2).is_none_or(|p| p == 0)));
    }

    /// Nothing to weigh: uniform (`None`), as Java's `partitionLoadStats`
    /// is null; a partition left out (no leader, or its broker stuck)
    /// keeps the weights even when the rest are equal.
    #[test]
    fn equal_lengths_of_every_partition_draw_uniformly() {
        assert_eq!(
            PartitionLoad::from_lengths(&[(0, 2), (1, 2), (2, 2)], 3),
            None
        );
        assert_eq!(
            PartitionLoad::from_lengths(&[(0, 4)], 1),
            None,
            "one partition"
        );
        assert_eq!(PartitionLoad::from_lengths(&[], 3), None, "none counted");
        let two_of_three = PartitionLoad::from_lengths(&[(0, 2), (2, 2)], 3).unwrap();
        assert!((0..100).all(|_| two_of_three.draw(3) != Some(1)));
    }

    /// A move draws with the weights the slot holds, and a move counts
    /// as a new stay of the same slot.
    #[test]
    fn a_move_draws_with_the_published_weights() {
        let slot = StickyState::default();
        let layout = both(4, &[0, 1, 2, 3], &slot)[1];
        let p = StickyPartitioner::new();
        // Partition 2's queue is empty, the others long: nearly every
        // move goes to 2 (weights 1, 1, 10, 1).
        slot.set_load(PartitionLoad::from_lengths(
            &[(0, 9), (1, 9), (2, 0), (3, 9)],
            4,
        ));
        let mut to_two = 0;
        for _ in 0..200 {
            let from = p.partition("t", &layout);
            let stay = slot.current().1;
            p.on_new_batch("t", from, &layout);
            assert_eq!(slot.current().1, stay.wrapping_add(1), "a new stay");
            to_two += usize::from(slot.current().0 == 2);
        }
        assert!(to_two > 120, "{to_two} of 200 moves went to partition 2");
        assert!(slot.take_moved());
        assert!(!slot.take_moved(), "taken once");
    }

    #[test]
    fn a_partition_that_is_gone_is_chosen_again_without_a_slot() {
        let p = StickyPartitioner::new();
        let wide = TopicLayout::new(8, &[7]);
        assert_eq!(p.partition("t", &wide), 7);
        let narrow = TopicLayout::new(2, &[0, 1]);
        let now = p.partition("t", &narrow);
        assert!((0..2).contains(&now), "{now}");
        assert_eq!(p.partition("t", &narrow), now, "and it sticks");
    }

    #[test]
    fn a_slot_whose_partition_is_gone_chooses_again() {
        // The topic had 8 partitions when the slot was set; now it has 2.
        let slot = StickyState::default();
        slot.move_from(slot.current(), 7);
        let layout = both(2, &[0, 1], &slot)[1];
        let p = StickyPartitioner::new();
        let now = p.partition("t", &layout);
        assert!((0..2).contains(&now));
        assert_eq!(slot.current().0, now);
    }

    #[test]
    fn keyed_ignores_stickiness() {
        let p = DefaultPartitioner::new();
        let layout = TopicLayout::new(6, &[]);
        let want = partition_for_key(b"user-42", 6);
        for _ in 0..10 {
            assert_eq!(p.partition("t", Some(b"user-42"), &layout), want);
            p.on_new_batch("t", want, &layout);
        }
    }

    /// librdkafka's own test vectors (rdfnv1a.c, `unittest_fnv1a`, in
    /// librdkafka 2.12.1; the values came from Go's hash/fnv, made
    /// non-negative).
    #[test]
    fn fnv1a_matches_librdkafka_vectors() {
        let unaligned = "PreAmbleWillBeRemoved,ThePrePartThatIs";
        let cases: &[(&str, u32)] = &[
            ("kafka", 0xd33c4e1),
            ("giberish123456789", 0x77a58295),
            ("1234", 0x23bdd03),
            ("234", 0x2dea3cd2),
            ("34", 0x740fa83e),
            ("4", 0x310ca263),
            (unaligned, 0x65cbd69c),
            (&unaligned[1..], 0x6e49c79a),
            (&unaligned[2..], 0x69eed356),
            (&unaligned[3..], 0x6abcc023),
            ("", 0x7ee3623b),
        ];
        for (key, want) in cases {
            assert_eq!(fnv1a(key.as_bytes()), *want, "{key:?}");
        }
    }

    #[test]
    fn every_name_parses_to_itself() {
        for (name, p) in Partitioning::ALL {
            assert_eq!(name.parse::<Partitioning>(), Ok(p));
            assert_eq!(p.to_string(), name);
        }
        let err = "crc32".parse::<Partitioning>().unwrap_err();
        assert!(err.contains("consistent_random"), "{err}");
    }

    #[test]
    fn random_ignores_keys_and_spreads() {
        let p = DefaultPartitioner::with(Partitioning::Random);
        let layout = TopicLayout::new(4, &[0, 1, 2, 3]);
        let seen: std::collections::HashSet<i32> = (0..200)
            .map(|_| p.partition("t", Some(b"same-key"), &layout))
            .collect();
        assert_eq!(seen.len(), 4, "{seen:?}");
    }

    #[test]
    fn empty_keys_follow_librdkafka() {
        let layout = TopicLayout::new(6, &[]);
        let consistent = DefaultPartitioner::with(Partitioning::Consistent);
        assert_eq!(
            consistent.partition("t", Some(b""), &layout),
            0,
            "CRC32 of nothing"
        );
        let cr = DefaultPartitioner::with(Partitioning::ConsistentRandom);
        let sticky = cr.partition("t", None, &layout);
        assert_eq!(cr.partition("t", Some(b""), &layout), sticky);
    }
}
