//! The record a user produces: topic, key, value, headers, and optionally a
//! partition and a timestamp.
//!
//! Keys and values are [`Bytes`], so a caller that already holds `Bytes` (or a
//! `Vec<u8>`, or a `&'static [u8]`) hands them over without a copy. The topic
//! is a [`Topic`], which is cheap to clone for the same reason.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// The hasher of the hot-path maps keyed by topic (metadata, partition
/// queues, sticky partitions): topic names are short and chosen by the
/// application, so a fast hash beats SipHash's flooding resistance here.
#[cfg(not(feature = "fault-injection"))]
pub(crate) type TopicHasher = foldhash::fast::RandomState;
/// With the test hooks, a fixed seed: maps keyed by topic are then
/// walked in the same order run after run (the seeded simulation replays
/// a seed exactly, `tests/simulation.rs`).
#[cfg(feature = "fault-injection")]
pub(crate) type TopicHasher = foldhash::fast::FixedState;

/// A topic name.
///
/// Names are interned: each distinct name is allocated once per process
/// and kept for its life, so cloning or dropping a `Topic` costs nothing
/// (no reference count), and two `Topic`s of one name share their text.
/// The table grows by each distinct name used; an application that makes
/// up unboundedly many names (not a Kafka pattern: topics are created on
/// the cluster) would grow it without bound.
///
/// ```
/// use courier_kafka::record::Topic;
/// let t = Topic::from_static("orders");
/// assert_eq!(&*t, "orders");
/// assert_eq!(Topic::from(String::from("orders")), t);
/// assert_eq!(Topic::from("orders").as_str().as_ptr(), Topic::from("orders").as_str().as_ptr());
/// ```
///
/// A `Topic` is one word (a pointer to the interned name), so a
/// [`Record`] stays within 128 bytes, which the compiler moves with inline
/// vector moves rather than a `memcpy` call: a record is moved several
/// times on its way into a batch.
#[derive(Clone, Copy)]
pub struct Topic(&'static String);

impl PartialEq for Topic {
    #[inline]
    fn eq(&self, other: &Topic) -> bool {
        // Every `Topic` is interned: one name, one `String`.
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Topic {}

impl PartialOrd for Topic {
    fn partial_cmp(&self, other: &Topic) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Topic {
    /// By name.
    fn cmp(&self, other: &Topic) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// The interned name `name`: allocated the first time it is seen, and
/// kept for the process's life.
fn intern(name: &str) -> &'static String {
    use std::collections::HashMap;
    use std::sync::{OnceLock, RwLock};
    type Names = HashMap<&'static str, &'static String, TopicHasher>;
    static NAMES: OnceLock<RwLock<Names>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    let read = names
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(n) = read.get(name) {
        return n;
    }
    drop(read);
    let mut write = names
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(n) = write.get(name) {
        return n;
    }
    let n: &'static String = Box::leak(Box::new(name.to_owned()));
    write.insert(n.as_str(), n);
    n
}

// By the interned name's address: one name is one address, so this agrees
// with `Eq` (a pointer compare), and hashing a topic costs one word, not
// its text (the producer looks a topic up per record).
impl std::hash::Hash for Topic {
    #[cfg(not(feature = "fault-injection"))]
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state)
    }

    /// With the test hooks, by the name: an address differs from process
    /// to process, and the seeded simulation must walk maps keyed by
    /// topic in the same order when a seed is run again alone.
    #[cfg(feature = "fault-injection")]
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl Topic {
    /// A topic from a static string (interned as any other name).
    pub fn from_static(name: &'static str) -> Self {
        Topic::from(name)
    }

    /// The name.
    #[inline]
    pub fn as_str(&self) -> &'static str {
        self.0.as_str()
    }

    /// The name as [`Bytes`], without a copy.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from_static(self.as_str().as_bytes())
    }
}

impl Deref for Topic {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Topic {
    fn from(s: String) -> Self {
        Topic::from(s.as_str())
    }
}

impl From<&str> for Topic {
    fn from(s: &str) -> Self {
        Topic(intern(s))
    }
}

impl fmt::Debug for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One record header: a string key and an optional byte value. (Defined
/// with the record-batch encoder, which writes it; re-exported here.)
pub use crate::protocol::record_batch::Header;

/// A record to produce.
///
/// ```
/// use courier_kafka::record::Record;
/// let r = Record::to("orders")
///     .key("customer-7")
///     .value(&b"{\"total\": 12}"[..])
///     .header("trace-id", "abc")
///     .partition(2);
/// assert_eq!(r.partition, Some(2));
/// assert_eq!(r.key.as_deref(), Some(&b"customer-7"[..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The topic to write to.
    pub topic: Topic,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key; `None` is a null key, which the default partitioner spreads
    /// with the sticky strategy.
    pub key: Option<Bytes>,
    /// The value; `None` is a null value (a tombstone on compacted topics).
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
    /// Create time in milliseconds since the Unix epoch; `None` means "now",
    /// taken when the record is appended to a batch.
    pub timestamp: Option<i64>,
    /// The application's own tag for this record (librdkafka's
    /// `msg_opaque`): never written to Kafka, carried to its delivery
    /// report (a success report does not carry the record; a failure hands
    /// it back, tag and all), so a report can be matched to the
    /// application's context (a line number, a request id, an index into
    /// its own table) without keeping the record's content around or one
    /// future per record. 0 unless set.
    pub opaque: u64,
}

/// Drops a record a batch has written (its bytes are in the batch now).
/// Most records have no headers: an empty header list owns no memory, so
/// it is let go of without the call that would drop it, which every
/// record on the produce path would pay.
#[inline(always)]
pub(crate) fn release_written(record: Record) {
    let Record {
        key,
        value,
        headers,
        ..
    } = record;
    drop((key, value));
    if headers.capacity() == 0 {
        std::mem::forget(headers);
    } else {
        drop(headers);
    }
}

impl Record {
    /// Its key, value and header bytes: about what it holds in memory.
    pub fn approx_size(&self) -> usize {
        let bytes = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
        bytes(&self.key)
            + bytes(&self.value)
            + self
                .headers
                .iter()
                .map(|h| h.key.len() + bytes(&h.value))
                .sum::<usize>()
    }

    /// A record for `topic` with no key, value, headers, partition or
    /// timestamp yet.
    pub fn to(topic: impl Into<Topic>) -> Self {
        Record {
            topic: topic.into(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
            opaque: 0,
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Appends a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value: Some(value.into()),
        });
        self
    }

    /// Sends to this partition, bypassing the partitioner.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the create timestamp, in milliseconds since the Unix epoch.
    pub fn timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }

    /// Sets the application's tag ([`Record::opaque`]), which comes back
    /// in its delivery report (`Delivered::opaque`, or with the record
    /// handed back in a failure) and is never sent.
    ///
    /// ```
    /// use courier_kafka::record::Record;
    /// let r = Record::to("orders").value("v").opaque(41);
    /// assert_eq!(r.opaque, 41);
    /// ```
    pub fn opaque(mut self, tag: u64) -> Self {
        self.opaque = tag;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_fits_in_128_bytes_and_a_topic_in_one_word() {
        // Past 128 bytes every move of a record (produce, place, append,
        // its owed entry) becomes a `memcpy` call.
        assert_eq!(std::mem::size_of::<Topic>(), 8);
        assert!(
            std::mem::size_of::<Record>() <= 128,
            "{}",
            std::mem::size_of::<Record>()
        );
    }

    #[test]
    fn topics_of_one_name_are_one_topic_whichever_way_made() {
        let owned = Topic::from(String::from("courier-record-test"));
        let fixed = Topic::from_static("courier-record-test");
        assert_eq!(owned, fixed);
        assert_eq!(owned.as_str().as_ptr(), fixed.as_str().as_ptr());
        assert_ne!(owned, Topic::from("courier-record-test2"));
        assert!(Topic::from("a-topic") < Topic::from("b-topic"));
        let map: std::collections::HashMap<Topic, i32> = [(owned, 1)].into();
        assert_eq!(map.get(&Topic::from("courier-record-test")), Some(&1));
    }
}
