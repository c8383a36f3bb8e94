//! Which partition a record goes to: pure functions and a trait.
//!
//! - A record with an explicit partition keeps it (the caller checks that,
//!   before a partitioner is asked).
//! - A keyed record goes where the Java client sends it:
//!   `(murmur2(key) & 0x7fffffff) % partitions`. librdkafka's
//!   `murmur2_random` partitioner agrees, so keyed data lands on the same
//!   partition whichever of these clients wrote it.
//! - A keyless record uses the sticky strategy of KIP-480: stay on one
//!   partition until its batch is closed, then move to another, so keyless
//!   traffic fills few, large batches instead of many small ones.
//!
//! # References
//! - Java: `org.apache.kafka.common.utils.Utils.murmur2` and
//!   `BuiltInPartitioner.partitionForKey`
//! - KIP-480: Sticky Partitioner

use std::sync::atomic::{AtomicI32, Ordering};

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
    pub(crate) sticky: Option<&'a AtomicI32>,
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
            let p = slot.load(Ordering::Relaxed);
            if (0..layout.partition_count).contains(&p) {
                return p;
            }
            // First use, or the slot's partition is gone: choose, unless
            // another caller just did.
            let chosen = choose(layout, None);
            return match slot.compare_exchange(p, chosen, Ordering::Relaxed, Ordering::Relaxed) {
                Err(now) if (0..layout.partition_count).contains(&now) => now,
                _ => chosen,
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
    pub fn on_new_batch(&self, topic: &str, previous: i32, layout: &TopicLayout) {
        let next = choose(layout, Some(previous));
        if let Some(slot) = layout.sticky {
            let _ = slot.compare_exchange(previous, next, Ordering::Relaxed, Ordering::Relaxed);
            return;
        }
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

/// The default: Java-compatible murmur2 for keyed records, KIP-480 sticky
/// for keyless ones.
#[derive(Debug, Default)]
pub struct DefaultPartitioner {
    sticky: StickyPartitioner,
}

impl DefaultPartitioner {
    /// A new default partitioner.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, layout: &TopicLayout) -> i32 {
        match key {
            Some(k) => partition_for_key(k, layout.partition_count),
            None => self.sticky.partition(topic, layout),
        }
    }

    fn on_new_batch(&self, topic: &str, previous: i32, layout: &TopicLayout) {
        self.sticky.on_new_batch(topic, previous, layout)
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
    fn both<'a>(count: i32, available: &'a [i32], slot: &'a AtomicI32) -> [TopicLayout<'a>; 2] {
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
        let slot = AtomicI32::new(-1);
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
        assert!(
            (0..4).contains(&slot.load(Ordering::Relaxed)),
            "the slot was used"
        );
    }

    #[test]
    fn sticky_prefers_available_partitions() {
        let slot = AtomicI32::new(-1);
        for layout in both(8, &[5], &slot) {
            let p = StickyPartitioner::new();
            for _ in 0..20 {
                let cur = p.partition("t", &layout);
                assert_eq!(cur, 5);
                p.on_new_batch("t", cur, &layout);
            }
        }
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
        let slot = AtomicI32::new(7);
        let layout = both(2, &[0, 1], &slot)[1];
        let p = StickyPartitioner::new();
        let now = p.partition("t", &layout);
        assert!((0..2).contains(&now));
        assert_eq!(slot.load(Ordering::Relaxed), now);
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
}
