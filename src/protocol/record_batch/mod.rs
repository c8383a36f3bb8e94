//! The RecordBatch v2 encoder: the one part of the protocol on the per-record
//! hot path, so it is written by hand.
//!
//! A [`BatchBuilder`] owns one growing buffer. The 61-byte batch header is
//! reserved up front; each record is sized exactly, checked against the
//! batch limit, then written straight into the buffer. Nothing is allocated
//! per record once the buffer has its capacity. [`BatchBuilder::finish`]
//! compresses the records section once, fills in the header (counts,
//! timestamps, producer id, epoch and base sequence) and computes the
//! CRC-32C, giving an [`EncodedBatch`] whose bytes go into a Produce request
//! unchanged.
//!
//! Size rules, as the Java client:
//! - A batch holds records while its uncompressed size stays within the
//!   limit (`batch.size`). The one exception is a batch's first record: a
//!   record larger than `batch.size` gets a batch of its own, so records up to
//!   `max.request.size` can be sent at all. The caller refuses records that
//!   do not fit a request, with [`single_record_batch_size`].
//! - Compression never makes a batch larger than its uncompressed size: when
//!   a codec does not shrink the records, the batch is sent uncompressed.
//!
//! # References
//! - <https://kafka.apache.org/documentation/#recordbatch>
//! - KIP-98 (producer id, epoch and base sequence in the batch header)

mod compression;
pub mod decode;
pub mod varint;

pub use compression::{Codec, Compression, CompressionError, UnknownCompression};

use bytes::Bytes;

use varint::{put_varint, varint_len, varlong_len};

/// One record header: a string key and an optional byte value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header key.
    pub key: String,
    /// The header value; `None` is a null value on the wire.
    pub value: Option<Bytes>,
}

/// Size of the RecordBatch v2 header, before the first record.
pub const RECORD_BATCH_OVERHEAD: usize = 61;

const MAGIC: u8 = 2;
// Offsets of the header fields, from the start of the batch.
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const PRODUCER_ID_AT: usize = 43;
/// The length field counts from the partition leader epoch on.
const LENGTH_COUNTED_FROM: usize = PARTITION_LEADER_EPOCH_AT;

/// The producer identity stamped into a batch header: producer id, epoch and
/// the sequence number of the batch's first record (KIP-98).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    /// Producer id, or -1 without idempotence.
    pub producer_id: i64,
    /// Producer epoch, or -1 without idempotence.
    pub producer_epoch: i16,
    /// Sequence of the first record, or -1 without idempotence.
    pub base_sequence: i32,
    /// Whether the batch belongs to a transaction (attribute bit 4): a
    /// read_committed consumer holds it back until the transaction's
    /// marker.
    pub transactional: bool,
}

impl ProducerStamp {
    /// The stamp of a non-idempotent producer: all fields -1.
    pub const NONE: ProducerStamp = ProducerStamp {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
    };
}

/// The record did not fit in the open batch; close it and start another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("batch is full")]
pub struct BatchFull;

/// Why [`BatchBuilder::try_append_within`] did not take a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendRefused {
    /// It would take the batch past its limit ([`BatchFull`]).
    Full,
    /// It fits the limit, but the batch would then hold this many bytes,
    /// more than the room it was given.
    Room(usize),
}

/// Appends records into one RecordBatch v2 buffer.
///
/// ```
/// use courier_kafka::protocol::record_batch::{BatchBuilder, Compression, ProducerStamp};
///
/// let mut batch = BatchBuilder::new(16 * 1024, Compression::None);
/// batch.try_append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[]).unwrap();
/// batch.try_append(1_700_000_000_001, None, Some(b"v2"), &[]).unwrap();
/// let encoded = batch.finish(ProducerStamp::NONE).unwrap();
/// assert_eq!(encoded.record_count(), 2);
/// assert!(encoded.len() <= 16 * 1024);
/// ```
#[derive(Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    limit: usize,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    compression: Codec,
}

/// The largest buffer a builder reserves up front; past this it grows on
/// demand, so a huge `batch.size` does not pin memory for a near-empty batch.
const MAX_INITIAL_CAPACITY: usize = 1 << 20;

/// The first step of a buffer that started smaller: a quiet partition's
/// batch of a few records stays about this small.
const SMALL_BATCH: usize = 4 << 10;

impl BatchBuilder {
    /// A builder whose batches stay within `limit` bytes (uncompressed),
    /// compressed with `compression` (a [`Compression`], or a [`Codec`]
    /// with a level) at [`finish`](Self::finish).
    pub fn new(limit: usize, compression: impl Into<Codec>) -> Self {
        Self::with_capacity(limit, MAX_INITIAL_CAPACITY, compression)
    }

    /// A builder as [`new`](Self::new) makes, whose buffer starts with
    /// room for `capacity` bytes (at most `limit`, at least the batch
    /// header) and grows as records come: a producer sizes it to the
    /// memory it reserved for the batch, so that a batch of a few records
    /// does not allocate (and, past malloc's mmap threshold, map and unmap)
    /// a whole `batch.size`.
    pub fn with_capacity(limit: usize, capacity: usize, compression: impl Into<Codec>) -> Self {
        let compression = compression.into();
        let capacity = limit
            .min(capacity)
            .clamp(RECORD_BATCH_OVERHEAD, MAX_INITIAL_CAPACITY);
        let mut buf = Vec::with_capacity(capacity);
        buf.resize(RECORD_BATCH_OVERHEAD, 0);
        BatchBuilder {
            buf,
            limit,
            count: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            compression,
        }
    }

    /// Appends one record, or returns [`BatchFull`] when it would take the
    /// batch past its limit. The first record of a batch is always taken.
    #[inline]
    pub fn try_append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> Result<(), BatchFull> {
        self.try_append_within(timestamp, key, value, headers, usize::MAX)
            .map_err(|_| BatchFull)
    }

    /// [`try_append`](Self::try_append) within `room` bytes as well: a
    /// record that fits the limit but would take the batch's
    /// [`size`](Self::size) past `room` is refused with the size it needs
    /// ([`AppendRefused::Room`]), so that the caller can make room (a
    /// producer's share of `buffer.memory`) and try again. What the record
    /// takes is known exactly here, with no bound computed beforehand.
    #[inline]
    pub fn try_append_within(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        room: usize,
    ) -> Result<(), AppendRefused> {
        let timestamp_delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.base_timestamp)
        };
        // The varints before the key (and, with no key, the value's length
        // too) are written into a scratch array first, after room for the
        // record's length: what they take is then known from the cursor,
        // not computed field by field, and the length goes right before
        // them. They reach the buffer in one fixed-size copy.
        let mut s = [0u8; Scratch::SIZE];
        let mut n = Scratch::BODY_AT + 1; // record attributes (0): unused in v2
        n = Scratch::uvarint(&mut s, n, varint::zigzag64(timestamp_delta));
        n = Scratch::varint(&mut s, n, self.count);
        let value_len = value.map_or(-1, |v| v.len() as i32);
        let after_value = value.map_or(0, <[u8]>::len) + headers_size(headers);
        let body = match key {
            None => {
                n = Scratch::varint(&mut s, n, -1);
                n = Scratch::varint(&mut s, n, value_len);
                n - Scratch::BODY_AT + after_value
            }
            Some(k) => {
                n = Scratch::varint(&mut s, n, k.len() as i32);
                n - Scratch::BODY_AT + k.len() + varint_len(value_len) + after_value
            }
        };
        let from = Scratch::BODY_AT - varint_len(body as i32);
        Scratch::varint(&mut s, from, body as i32);
        let total = Scratch::BODY_AT - from + body;
        let before = self.buf.len();
        if self.count > 0 && before + total > self.limit {
            return Err(AppendRefused::Full);
        }
        if self.count == i32::MAX {
            return Err(AppendRefused::Full);
        }
        if before + total > room {
            return Err(AppendRefused::Room(before + total));
        }
        if self.buf.capacity() - before >= total + Scratch::WINDOW {
            // The common case, with room to spare in the buffer.
            Scratch::append_window(&s, from, n, &mut self.buf);
        } else {
            // Out of room, or nearly: a buffer smaller than SMALL_BATCH
            // doubles up to it (its memory grows as the batch's share of
            // buffer.memory does, so thousands of quiet partitions hold
            // about what they wrote), a larger one grows to the batch's
            // limit (at most MAX_INITIAL_CAPACITY) in one step, not by
            // doubling, so that a batch that turns out busy is copied a
            // few times while small and once past SMALL_BATCH, instead of
            // at every doubling. (A record that fits but leaves less than
            // the copy's window spare is copied exactly, and the buffer
            // grows only as it would for a record that does not fit: to
            // its next step, if it is below it.)
            if self.buf.capacity() < SMALL_BATCH {
                // Exactly the step: `reserve` could double past it.
                let target = (self.buf.capacity() * 2).min(SMALL_BATCH).min(self.limit);
                self.buf
                    .reserve_exact(total.max(target.saturating_sub(before)));
            } else {
                // Past MAX_INITIAL_CAPACITY (a batch.size over 1 MiB) the
                // target is behind and `reserve` doubles, so the buffer is
                // not grown for each record.
                let target = self.limit.min(MAX_INITIAL_CAPACITY);
                self.buf.reserve(total.max(target.saturating_sub(before)));
            }
            self.buf.extend_from_slice(&s[from..n]);
        }
        let buf = &mut self.buf;
        if let Some(k) = key {
            buf.extend_from_slice(k);
            put_varint(buf, value_len);
        }
        if let Some(v) = value {
            buf.extend_from_slice(v);
        }
        if headers.is_empty() {
            // The header count, 0: most records have none, and the
            // general call below is dear for this one byte.
            buf.push(0);
        } else {
            put_headers(buf, headers);
        }
        debug_assert_eq!(self.buf.len() - before, total, "record size accounting");
        if self.count == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        } else {
            self.max_timestamp = self.max_timestamp.max(timestamp);
        }
        self.count += 1;
        Ok(())
    }

    /// Bytes the buffer has room for (tests of its growth).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Records appended so far.
    pub fn record_count(&self) -> i32 {
        self.count
    }

    /// True before the first record.
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code))] // wire tests
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Uncompressed size of the batch so far, header included. A finished
    /// batch is never larger than this.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// The limit this builder was made with.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Compresses the records, fills in the header and checksum, and returns
    /// the encoded batch.
    pub fn finish(self, stamp: ProducerStamp) -> Result<EncodedBatch, CompressionError> {
        self.finish_or_uncompressed(stamp).map_err(|(e, _)| e)
    }

    /// As [`BatchBuilder::finish`], but a compression failure also hands
    /// back the batch encoded without compression (so that its records can
    /// still be read back, to hand them to whoever produced them).
    pub fn finish_or_uncompressed(
        self,
        stamp: ProducerStamp,
    ) -> Result<EncodedBatch, (CompressionError, EncodedBatch)> {
        let BatchBuilder {
            mut buf,
            count,
            base_timestamp,
            max_timestamp,
            compression,
            ..
        } = self;
        let mut codec = Compression::None;
        let mut failed = None;
        if compression.compression != Compression::None && count > 0 {
            let records = &buf[RECORD_BATCH_OVERHEAD..];
            let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() / 2);
            out.resize(RECORD_BATCH_OVERHEAD, 0);
            let compressed = compression::compress(compression, records, &mut out);
            match compressed {
                // Keep the compressed form only when it is smaller: a batch
                // never grows past its uncompressed size.
                Ok(()) if out.len() < buf.len() => {
                    buf = out;
                    codec = compression.compression;
                }
                Ok(()) => {}
                Err(e) => failed = Some(e),
            }
        }
        // A sealed batch counts its encoded length of buffer.memory, so it
        // should hold about that: a buffer grown in one step to batch.size,
        // or a compression output sized for the uncompressed records, gives
        // back what it did not use (glibc shrinks in place).
        if buf.capacity() - buf.len() > buf.len() / 4 {
            buf.shrink_to_fit();
        }
        let batch_length = (buf.len() - LENGTH_COUNTED_FROM) as i32;
        let header = &mut buf[..RECORD_BATCH_OVERHEAD];
        header[0..8].copy_from_slice(&0i64.to_be_bytes()); // base offset: the broker assigns it
        header[BATCH_LENGTH_AT..12].copy_from_slice(&batch_length.to_be_bytes());
        header[PARTITION_LEADER_EPOCH_AT..16].copy_from_slice(&(-1i32).to_be_bytes());
        header[MAGIC_AT] = MAGIC;
        header[ATTRIBUTES_AT..23].copy_from_slice(&codec.attribute().to_be_bytes());
        header[23..27].copy_from_slice(&(count - 1).max(0).to_be_bytes()); // last offset delta
        header[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
        header[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
        header[57..61].copy_from_slice(&count.to_be_bytes());
        write_stamp(&mut buf, stamp);
        let batch = EncodedBatch {
            bytes: Bytes::from(buf),
            record_count: count,
            compression: codec,
        };
        match failed {
            None => Ok(batch),
            Some(e) => Err((e, batch)),
        }
    }
}

/// The transactional bit of a batch's attributes.
const TRANSACTIONAL: u8 = 0x10;

/// Writes the producer fields (and the transactional attribute) and
/// recomputes the CRC, which covers them.
fn write_stamp(buf: &mut [u8], stamp: ProducerStamp) {
    // The attributes are big-endian: bit 4 is in their second byte.
    if stamp.transactional {
        buf[ATTRIBUTES_AT + 1] |= TRANSACTIONAL;
    } else {
        buf[ATTRIBUTES_AT + 1] &= !TRANSACTIONAL;
    }
    buf[PRODUCER_ID_AT..51].copy_from_slice(&stamp.producer_id.to_be_bytes());
    buf[51..53].copy_from_slice(&stamp.producer_epoch.to_be_bytes());
    buf[53..57].copy_from_slice(&stamp.base_sequence.to_be_bytes());
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &buf[ATTRIBUTES_AT..]) as u32;
    buf[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
}

/// A finished record batch, ready to be placed in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    bytes: Bytes,
    record_count: i32,
    compression: Compression,
}

impl EncodedBatch {
    /// The wire bytes of the batch.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Size on the wire.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a batch has at least its header.
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code))] // wire tests
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Records in the batch.
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code))] // wire tests
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// The codec actually used (`None` when compression did not shrink it).
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The producer fields currently stamped in the header.
    pub fn stamp(&self) -> ProducerStamp {
        let b = &self.bytes;
        ProducerStamp {
            producer_id: i64::from_be_bytes(b[PRODUCER_ID_AT..51].try_into().unwrap()),
            producer_epoch: i16::from_be_bytes(b[51..53].try_into().unwrap()),
            base_sequence: i32::from_be_bytes(b[53..57].try_into().unwrap()),
            transactional: b[ATTRIBUTES_AT + 1] & TRANSACTIONAL != 0,
        }
    }

    /// Stamps the batch in place with a new producer identity (and fixes the
    /// CRC). No copy when nothing else shares the bytes, which is the case
    /// for a batch not yet sent; otherwise the bytes are copied first.
    pub fn set_stamp(&mut self, stamp: ProducerStamp) {
        let bytes = std::mem::take(&mut self.bytes);
        let mut buf = match bytes.try_into_mut() {
            Ok(unique) => unique,
            Err(shared) => bytes::BytesMut::from(&shared[..]),
        };
        write_stamp(&mut buf, stamp);
        self.bytes = buf.freeze();
    }

    /// A copy with a new producer stamp. Prefer [`set_stamp`](Self::set_stamp),
    /// which does not copy an unshared batch.
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code))] // wire tests
    pub fn restamp(&self, stamp: ProducerStamp) -> EncodedBatch {
        let mut buf = self.bytes.to_vec();
        write_stamp(&mut buf, stamp);
        EncodedBatch {
            bytes: Bytes::from(buf),
            record_count: self.record_count,
            compression: self.compression,
        }
    }
}

/// `seq + by` as record sequences count: they wrap from `i32::MAX` to 0
/// (Java's `DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(seq: i32, by: i32) -> i32 {
    if seq > i32::MAX - by {
        by - (i32::MAX - seq) - 1
    } else {
        seq + by
    }
}

/// The exact size of a batch holding only this record, uncompressed: what a
/// record needs at the least, to compare with `max.request.size`.
pub fn single_record_batch_size(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    let body = record_body_size(0, 0, key, value, headers);
    RECORD_BATCH_OVERHEAD + varint_len(body as i32) + body
}

#[inline]
fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
}

/// A record's header count and headers.
#[inline]
fn put_headers(buf: &mut Vec<u8>, headers: &[Header]) {
    put_varint(buf, headers.len() as i32);
    for h in headers {
        put_bytes(buf, Some(h.key.as_bytes()));
        put_bytes(buf, h.value.as_deref());
    }
}

/// A record's leading varints, written at a cursor into a stack array and
/// appended with one fixed-size copy (then cut to length), which costs less
/// than a capacity-checked push per byte. The body starts at `BODY_AT`,
/// leaving room before it for the record's length (at most 5 bytes),
/// which is written last, right before the body; then come at most 26
/// bytes: attributes (1), timestamp delta (10), offset delta (5), key
/// length (5) and, for a keyless record, the value's length (5). So the
/// bytes to copy start at 0 to 4 and end by 31, and a `WINDOW` from
/// their start stays inside the array. The cursor is a plain `usize` the
/// caller keeps (in a register), and indexes are masked to the array,
/// which has no bounds check to pay and changes nothing while the cursor
/// stays below `SIZE`.
struct Scratch;

impl Scratch {
    const SIZE: usize = 64;
    const BODY_AT: usize = 5;
    const WINDOW: usize = 32;

    /// Writes `v` as an unsigned varint at `at`; the cursor after it.
    /// One and two bytes (values below 2^14: every length and delta of a
    /// batch up to 16 KiB) take no loop.
    #[inline(always)]
    fn uvarint(s: &mut [u8; Scratch::SIZE], mut at: usize, mut v: u64) -> usize {
        const M: usize = Scratch::SIZE - 1;
        if v < 0x80 {
            s[at & M] = v as u8;
            return at + 1;
        }
        if v < 0x4000 {
            s[at & M] = (v as u8) | 0x80;
            s[(at + 1) & M] = (v >> 7) as u8;
            return at + 2;
        }
        while v >= 0x80 {
            s[at & M] = (v as u8) | 0x80;
            at += 1;
            v >>= 7;
        }
        s[at & M] = v as u8;
        at + 1
    }

    #[inline(always)]
    fn varint(s: &mut [u8; Scratch::SIZE], at: usize, v: i32) -> usize {
        Scratch::uvarint(s, at, varint::zigzag32(v) as u64)
    }

    /// Appends `s[from..to]`; `buf` must have `WINDOW` bytes to spare.
    #[inline(always)]
    fn append_window(s: &[u8; Scratch::SIZE], from: usize, to: usize, buf: &mut Vec<u8>) {
        debug_assert!(from <= Scratch::BODY_AT && to - from <= Scratch::WINDOW);
        let at = buf.len();
        let window: &[u8; Scratch::WINDOW] = s[from & 7..(from & 7) + Scratch::WINDOW]
            .try_into()
            .expect("inside the array");
        buf.extend_from_slice(window);
        buf.truncate(at + (to - from));
    }
}

/// What a record's headers take: their count, then each key and value.
#[inline(always)]
fn headers_size(headers: &[Header]) -> usize {
    if headers.is_empty() {
        return 1;
    }
    let mut n = varint_len(headers.len() as i32);
    for h in headers {
        n += bytes_size(Some(h.key.as_bytes())) + bytes_size(h.value.as_deref());
    }
    n
}

#[inline]
fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
    }
}

/// Size of a record after its length prefix.
#[inline]
fn record_body_size(
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    1 // attributes
        + varlong_len(timestamp_delta)
        + varint_len(offset_delta)
        + bytes_size(key)
        + bytes_size(value)
        + headers_size(headers)
}
