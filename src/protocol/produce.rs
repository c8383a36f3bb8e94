//! The Produce request, written by hand as a list of parts that share the
//! record batches' bytes.
//!
//! `kafka-protocol`'s encoder writes a request into one contiguous buffer,
//! which for Produce means copying every batch (up to `max.request.size`,
//! a megabyte by default) into a freshly allocated buffer for each
//! request. This encoder writes only the few bytes around the batches and
//! hands the batches' own `Bytes` through, so the connection can send the
//! request with one vectored write and no copy. `tests/protocol_roundtrip.rs`
//! checks the bytes against `kafka-protocol`'s encoder for every version.
//!
//! Versions 3 to 12 (12 has the same schema as 11; 13 names topics by id).
//!
//! # References
//! - "Produce API (Key: 0)" in <https://kafka.apache.org/protocol#The_Messages_Produce>
//! - KIP-482: from v9 the request is flexible: header v2, compact strings,
//!   arrays and bytes, and tagged fields.

use bytes::{BufMut, Bytes, BytesMut};

use super::frame::LENGTH_PREFIX;
use super::{ApiKey, ProtocolError};

/// The first Produce version with flexible (compact) encodings.
const FIRST_FLEXIBLE: i16 = 9;

/// One partition's batch in a Produce request.
#[derive(Debug, Clone, Copy)]
pub struct PartitionData<'a> {
    /// The partition index.
    pub partition: i32,
    /// One encoded RecordBatch (or several, back to back).
    pub records: &'a Bytes,
}

/// One topic's partitions in a Produce request.
#[derive(Debug, Clone)]
pub struct TopicData<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Its partitions.
    pub partitions: Vec<PartitionData<'a>>,
}

/// The fields of a Produce request other than its batches.
#[derive(Debug, Clone, Copy)]
pub struct ProduceHeader<'a> {
    /// Request version, 3 to 12.
    pub version: i16,
    /// Correlation id.
    pub correlation_id: i32,
    /// Client id (the request header's).
    pub client_id: Option<&'a str>,
    /// `acks`: 0, 1 or -1.
    pub acks: i16,
    /// How long the broker may wait for the acks, in ms.
    pub timeout_ms: i32,
    /// The producer's `transactional.id`, which a transactional batch
    /// must come with (`None`: null).
    pub transactional_id: Option<&'a str>,
}

/// A whole Produce request frame (length prefix included), as parts to be
/// written back to back: the encoder's own bytes between the batches'.
#[derive(Debug, Clone)]
pub struct ProduceFrame {
    /// The parts, in order.
    pub parts: Vec<Bytes>,
    /// Their total length.
    pub len: usize,
}

fn uvarint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_uvarint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// The exact size of the frame [`encode`] would write, length prefix
/// included, without writing it.
pub fn frame_size(header: &ProduceHeader<'_>, topics: &[TopicData<'_>]) -> usize {
    let flexible = header.version >= FIRST_FLEXIBLE;
    let string = |len: usize| {
        if flexible {
            uvarint_len(len as u64 + 1) + len
        } else {
            2 + len
        }
    };
    let array = |count: usize| {
        if flexible {
            uvarint_len(count as u64 + 1)
        } else {
            4
        }
    };
    let tags = if flexible { 1 } else { 0 };
    // Request header: api key, version, correlation id, client id (a
    // classic nullable string even in header v2), then v2's tagged fields.
    let mut n = 2 + 2 + 4 + 2 + header.client_id.map_or(0, str::len) + tags;
    // transactional_id (a nullable string), acks, timeout, topic array.
    n += match header.transactional_id {
        Some(id) => string(id.len()),
        None if flexible => 1,
        None => 2,
    } + 2
        + 4
        + array(topics.len());
    for t in topics {
        n += string(t.name.len()) + array(t.partitions.len());
        for p in &t.partitions {
            let len = p.records.len();
            n +=
                4 + if flexible {
                    uvarint_len(len as u64 + 1)
                } else {
                    4
                } + len
                    + tags;
        }
        n += tags;
    }
    LENGTH_PREFIX + n + tags
}

/// Encodes a Produce request frame. The batches are not copied: each is a
/// part of the result.
///
/// ```
/// use bytes::Bytes;
/// use courier_kafka::protocol::produce::{encode, frame_size, PartitionData, ProduceHeader, TopicData};
///
/// let batch = Bytes::from_static(b"(a record batch)");
/// let header = ProduceHeader { version: 9, correlation_id: 7, client_id: Some("courier"), acks: -1, timeout_ms: 30_000, transactional_id: None };
/// let topics = [TopicData { name: "orders", partitions: vec![PartitionData { partition: 2, records: &batch }] }];
/// let frame = encode(&header, &topics).unwrap();
/// assert_eq!(frame.len, frame_size(&header, &topics));
/// assert_eq!(frame.parts.len(), 3); // bytes before the batch, the batch itself, bytes after it
/// assert!(frame.parts.iter().any(|p| p.as_ptr() == batch.as_ptr()));
/// ```
pub fn encode(
    header: &ProduceHeader<'_>,
    topics: &[TopicData<'_>],
) -> Result<ProduceFrame, ProtocolError> {
    let version = header.version;
    let fail = |reason: String| ProtocolError::Encode {
        api: ApiKey::Produce,
        version,
        reason,
    };
    if !(3..=12).contains(&version) {
        return Err(fail("this encoder writes Produce v3 to v12".into()));
    }
    let flexible = version >= FIRST_FLEXIBLE;
    let len = frame_size(header, topics);
    let body_len = i32::try_from(len - LENGTH_PREFIX)
        .map_err(|_| fail(format!("{len} bytes is too large")))?;
    let mut head = BytesMut::with_capacity(64 + topics.len() * 32);
    let mut parts =
        Vec::with_capacity(1 + 2 * topics.iter().map(|t| t.partitions.len()).sum::<usize>());
    let put_string = |buf: &mut BytesMut, s: &str| {
        if flexible {
            put_uvarint(buf, s.len() as u64 + 1);
        } else {
            buf.put_i16(s.len() as i16);
        }
        buf.put_slice(s.as_bytes());
    };
    let put_array = |buf: &mut BytesMut, count: usize| {
        if flexible {
            put_uvarint(buf, count as u64 + 1);
        } else {
            buf.put_i32(count as i32);
        }
    };
    let put_tags = |buf: &mut BytesMut| {
        if flexible {
            buf.put_u8(0);
        }
    };

    head.put_i32(body_len);
    head.put_i16(ApiKey::Produce as i16);
    head.put_i16(version);
    head.put_i32(header.correlation_id);
    match header.client_id {
        Some(id) => {
            let n = i16::try_from(id.len()).map_err(|_| fail("client id too long".into()))?;
            head.put_i16(n);
            head.put_slice(id.as_bytes());
        }
        None => head.put_i16(-1),
    }
    put_tags(&mut head);
    match header.transactional_id {
        Some(id) => {
            if id.len() > i16::MAX as usize {
                return Err(fail(format!("transactional id of {} bytes", id.len())));
            }
            put_string(&mut head, id);
        }
        None if flexible => head.put_u8(0),
        None => head.put_i16(-1),
    }
    head.put_i16(header.acks);
    head.put_i32(header.timeout_ms);
    put_array(&mut head, topics.len());
    for t in topics {
        if t.name.len() > i16::MAX as usize {
            return Err(fail(format!("topic name of {} bytes", t.name.len())));
        }
        put_string(&mut head, t.name);
        put_array(&mut head, t.partitions.len());
        for p in &t.partitions {
            head.put_i32(p.partition);
            let n = p.records.len();
            if flexible {
                put_uvarint(&mut head, n as u64 + 1);
            } else {
                head.put_i32(i32::try_from(n).map_err(|_| fail(format!("batch of {n} bytes")))?);
            }
            parts.push(head.split().freeze());
            parts.push(p.records.clone());
            put_tags(&mut head);
        }
        put_tags(&mut head);
    }
    put_tags(&mut head);
    parts.push(head.freeze());
    debug_assert_eq!(parts.iter().map(Bytes::len).sum::<usize>(), len);
    Ok(ProduceFrame { parts, len })
}
