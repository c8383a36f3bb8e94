//! Reading a record batch (v2) back into its records.
//!
//! The producer needs this in one place: a batch the broker refused as too
//! large (MESSAGE_TOO_LARGE) is split so that each record can go, or fail,
//! on its own, as the Java client's `splitAndReenqueue` does; a batch of
//! fire-and-forget records keeps no other copy of them. The decoder trusts
//! nothing it reads: every length is checked against the bytes there, and
//! a decompressed size is bounded.
//!
//! # References
//! - <https://kafka.apache.org/documentation/#recordbatch>
//! - <https://kafka.apache.org/documentation/#record>

use std::io::Read;

use bytes::Bytes;

use super::varint::{get_varint, get_varlong};
use super::{Compression, Header, RECORD_BATCH_OVERHEAD};

/// One record as a batch holds it, with its absolute timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    /// Create (or log-append) time, ms since the epoch.
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

/// Why a batch could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the record batch back: {0}")]
pub struct DecodeError(pub String);

fn err(what: impl Into<String>) -> DecodeError {
    DecodeError(what.into())
}

/// The records of one v2 record batch (`bytes` from its base offset on),
/// decompressed, in offset order. `max_size` bounds the decompressed
/// records section.
pub fn decode_records(bytes: &[u8], max_size: usize) -> Result<Vec<DecodedRecord>, DecodeError> {
    if bytes.len() < RECORD_BATCH_OVERHEAD {
        return Err(err("shorter than a batch header"));
    }
    let be_i64 = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let be_i32 = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let length = be_i32(8);
    if length < 0 || 12 + length as usize != bytes.len() {
        return Err(err(format!(
            "batch length {length} does not match {} bytes",
            bytes.len()
        )));
    }
    if bytes[16] != 2 {
        return Err(err(format!("magic {} (only v2 batches)", bytes[16])));
    }
    let attributes = i16::from_be_bytes([bytes[21], bytes[22]]);
    let base_timestamp = be_i64(27);
    let count = be_i32(57);
    if count < 0 {
        return Err(err(format!("record count {count}")));
    }
    let body = &bytes[RECORD_BATCH_OVERHEAD..];
    let plain = decompress(attributes, body, max_size)?;
    let mut buf: &[u8] = &plain;
    let mut records = Vec::with_capacity((count as usize).min(buf.len() / 7 + 1));
    for i in 0..count {
        let len = get_varint(&mut buf).ok_or_else(|| err(format!("record {i}: length")))?;
        let len = usize::try_from(len).map_err(|_| err(format!("record {i}: length {len}")))?;
        if len > buf.len() {
            return Err(err(format!("record {i}: {len} bytes, {} left", buf.len())));
        }
        let (mut rec, rest) = buf.split_at(len);
        buf = rest;
        records.push(
            decode_record(&mut rec, base_timestamp, &plain)
                .map_err(|e| err(format!("record {i}: {}", e.0)))?,
        );
    }
    if !buf.is_empty() {
        return Err(err(format!("{} bytes after the last record", buf.len())));
    }
    Ok(records)
}

fn decode_record(
    buf: &mut &[u8],
    base_timestamp: i64,
    whole: &Bytes,
) -> Result<DecodedRecord, DecodeError> {
    let (_attributes, rest) = buf.split_first().ok_or_else(|| err("attributes"))?;
    *buf = rest;
    let delta = get_varlong(buf).ok_or_else(|| err("timestamp delta"))?;
    let _offset_delta = get_varint(buf).ok_or_else(|| err("offset delta"))?;
    let key = bytes_field(buf, whole, "key")?;
    let value = bytes_field(buf, whole, "value")?;
    let n = get_varint(buf).ok_or_else(|| err("header count"))?;
    let n = usize::try_from(n).map_err(|_| err(format!("header count {n}")))?;
    let mut headers = Vec::with_capacity(n.min(buf.len() / 2));
    for _ in 0..n {
        let key = bytes_field(buf, whole, "header key")?.ok_or_else(|| err("null header key"))?;
        let key = String::from_utf8(key.to_vec()).map_err(|_| err("header key is not UTF-8"))?;
        let value = bytes_field(buf, whole, "header value")?;
        headers.push(Header { key, value });
    }
    if !buf.is_empty() {
        return Err(err("bytes after the headers"));
    }
    Ok(DecodedRecord {
        timestamp: base_timestamp.saturating_add(delta),
        key,
        value,
        headers,
    })
}

/// A length-prefixed byte field (-1: null), sliced out of `whole` without
/// a copy.
fn bytes_field(buf: &mut &[u8], whole: &Bytes, what: &str) -> Result<Option<Bytes>, DecodeError> {
    let len = get_varint(buf).ok_or_else(|| err(format!("{what} length")))?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    if len > buf.len() {
        return Err(err(format!("{what}: {len} bytes, {} left", buf.len())));
    }
    let (field, rest) = buf.split_at(len);
    *buf = rest;
    Ok(Some(whole.slice_ref(field)))
}

/// The records section, decompressed per the batch's attributes.
fn decompress(attributes: i16, body: &[u8], max_size: usize) -> Result<Bytes, DecodeError> {
    let codec = match attributes & 0x7 {
        0 => return Ok(Bytes::copy_from_slice(body)),
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => return Err(err(format!("unknown compression {other}"))),
    };
    let fail = |e: &dyn std::fmt::Display| err(format!("{codec}: {e}"));
    let mut out = Vec::new();
    let bounded = |r: &mut dyn Read, out: &mut Vec<u8>| -> Result<(), DecodeError> {
        let n = r
            .take(max_size as u64 + 1)
            .read_to_end(out)
            .map_err(|e| fail(&e))?;
        if n > max_size {
            return Err(err(format!(
                "{codec}: more than {max_size} bytes decompressed"
            )));
        }
        Ok(())
    };
    match codec {
        Compression::Gzip => bounded(&mut flate2::read::MultiGzDecoder::new(body), &mut out)?,
        Compression::Lz4 => bounded(&mut lz4_flex::frame::FrameDecoder::new(body), &mut out)?,
        Compression::Zstd => bounded(
            &mut zstd::stream::read::Decoder::new(body).map_err(|e| fail(&e))?,
            &mut out,
        )?,
        Compression::Snappy => out = unsnappy(body, max_size)?,
        Compression::None => unreachable!("handled above"),
    }
    Ok(Bytes::from(out))
}

/// Snappy as Kafka writes it: xerial framing (a 16-byte header, then
/// length-prefixed blocks), or one raw block.
fn unsnappy(body: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    let fail = |e: &dyn std::fmt::Display| err(format!("snappy: {e}"));
    let mut dec = snap::raw::Decoder::new();
    let mut block = |input: &[u8], out: &mut Vec<u8>| -> Result<(), DecodeError> {
        let n = snap::raw::decompress_len(input).map_err(|e| fail(&e))?;
        if out.len() + n > max_size {
            return Err(err(format!(
                "snappy: more than {max_size} bytes decompressed"
            )));
        }
        let start = out.len();
        out.resize(start + n, 0);
        dec.decompress(input, &mut out[start..])
            .map_err(|e| fail(&e))?;
        Ok(())
    };
    let mut out = Vec::new();
    if !body.starts_with(b"\x82SNAPPY\x00") {
        block(body, &mut out)?;
        return Ok(out);
    }
    let mut rest = body
        .get(16..)
        .ok_or_else(|| err("snappy: short xerial header"))?;
    while !rest.is_empty() {
        let len = rest
            .get(..4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| err("snappy: block length"))?;
        let data = rest
            .get(4..4 + len)
            .ok_or_else(|| err("snappy: block shorter than its length"))?;
        block(data, &mut out)?;
        rest = &rest[4 + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::{BatchBuilder, ProducerStamp};

    #[test]
    fn every_codec_reads_back_what_was_written() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = BatchBuilder::new(1 << 20, codec);
            let mut want = Vec::new();
            for i in 0..50i64 {
                let key = (i % 3 != 0).then(|| Bytes::from(format!("k{i}")));
                let value = (i % 7 != 0).then(|| Bytes::from(vec![b'x'; i as usize * 10]));
                let headers = if i % 5 == 0 {
                    vec![
                        Header {
                            key: "h".into(),
                            value: Some(Bytes::from_static(b"v")),
                        },
                        Header {
                            key: "null".into(),
                            value: None,
                        },
                    ]
                } else {
                    Vec::new()
                };
                let ts = 1_700_000_000_000 + i * 3 - (i % 4);
                b.try_append(ts, key.as_deref(), value.as_deref(), &headers)
                    .unwrap();
                want.push(DecodedRecord {
                    timestamp: ts,
                    key,
                    value,
                    headers,
                });
            }
            let batch = b.finish(ProducerStamp::NONE).unwrap();
            let got = decode_records(batch.bytes(), 1 << 24).unwrap();
            assert_eq!(got, want, "{codec}");
        }
    }

    #[test]
    fn damaged_batches_are_errors_not_panics() {
        let mut b = BatchBuilder::new(1 << 20, Compression::None);
        b.try_append(1, Some(b"key"), Some(b"value"), &[]).unwrap();
        let batch = b.finish(ProducerStamp::NONE).unwrap();
        let bytes = batch.bytes().to_vec();
        for cut in 0..bytes.len() {
            assert!(
                decode_records(&bytes[..cut], 1 << 20).is_err(),
                "cut at {cut}"
            );
        }
        // A record claiming more bytes than there are.
        let mut lying = bytes.clone();
        lying[RECORD_BATCH_OVERHEAD] = 0x7e;
        assert!(decode_records(&lying, 1 << 20).is_err());
        // Decompression past the bound.
        let mut b = BatchBuilder::new(1 << 20, Compression::Zstd);
        b.try_append(1, None, Some(&[0u8; 100_000]), &[]).unwrap();
        let z = b.finish(ProducerStamp::NONE).unwrap();
        assert!(decode_records(z.bytes(), 1000).is_err());
        assert!(decode_records(z.bytes(), 1 << 20).is_ok());
    }
}
