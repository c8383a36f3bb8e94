//! Batch compression codecs: gzip, snappy, lz4 and zstd.
//!
//! A batch compresses the whole records section (everything after the 61-byte
//! header) in one go, so each codec is called once per batch, never per
//! record. Each writes the framing the Java client writes, which every broker
//! and consumer reads:
//! - gzip: a gzip member (RFC 1952), default level.
//! - snappy: xerial's `SnappyOutputStream` framing (magic header, then
//!   length-prefixed raw snappy blocks of up to 32 KiB), as the Java client.
//! - lz4: an LZ4 frame with 64 KiB independent blocks (KIP-57 framing).
//! - zstd: a zstd frame at level 3, the library default.
//!
//! # References
//! - <https://kafka.apache.org/documentation/#brokerconfigs_compression.type>
//! - KIP-57 (LZ4 framing), KIP-110 (zstd)
//! - xerial snappy-java stream format: "SnappyOutputStream" compatibility notes

use std::fmt;
use std::io::Write;
use std::str::FromStr;

/// A record batch compression codec, as `compression.type` names them.
///
/// ```
/// use courier::protocol::record_batch::Compression;
/// assert_eq!("lz4".parse::<Compression>().unwrap(), Compression::Lz4);
/// assert!("brotli".parse::<Compression>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// Snappy, in xerial framing.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// Every codec, `None` first.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec id in the low three bits of a batch's attributes.
    pub fn attribute(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The `compression.type` name.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `compression.type` value that names no codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compression type {0:?}; expected none, gzip, snappy, lz4 or zstd")]
pub struct UnknownCompression(pub String);

impl FromStr for Compression {
    type Err = UnknownCompression;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownCompression(s.to_string()))
    }
}

/// A codec failed. With in-memory output this only happens on a library
/// error, but it is reported rather than unwrapped.
#[derive(Debug, thiserror::Error)]
#[error("{codec} compression failed: {reason}")]
pub struct CompressionError {
    /// The codec.
    pub codec: Compression,
    /// What the library said.
    pub reason: String,
}

const SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const SNAPPY_BLOCK: usize = 32 * 1024;
const ZSTD_LEVEL: i32 = 3;

thread_local! {
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends `input`, compressed with `codec`, to `out`.
pub(crate) fn compress(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let fail = |e: &dyn fmt::Display| CompressionError {
        codec,
        reason: e.to_string(),
    };
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            enc.write_all(input).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))?;
        }
        Compression::Snappy => {
            out.extend_from_slice(SNAPPY_MAGIC);
            let mut enc = snap::raw::Encoder::new();
            for block in input.chunks(SNAPPY_BLOCK) {
                let len_at = out.len();
                out.extend_from_slice(&[0; 4]);
                let start = out.len();
                out.resize(start + snap::raw::max_compress_len(block.len()), 0);
                let n = enc
                    .compress(block, &mut out[start..])
                    .map_err(|e| fail(&e))?;
                out.truncate(start + n);
                out[len_at..start].copy_from_slice(&(n as u32).to_be_bytes());
            }
        }
        Compression::Lz4 => {
            use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
            let info = FrameInfo::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent);
            let mut enc = FrameEncoder::with_frame_info(info, out);
            enc.write_all(input).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))?;
        }
        Compression::Zstd => ZSTD.with(|cell| {
            // A zstd context holds about a megabyte of tables; making one per
            // batch cost more than compressing a small batch. Keep one per
            // thread.
            let mut slot = cell.borrow_mut();
            let ctx = match slot.as_mut() {
                Some(c) => c,
                None => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| fail(&e))?),
            };
            let start = out.len();
            out.resize(start + zstd::zstd_safe::compress_bound(input.len()), 0);
            // The one-shot API records the content size in the frame header,
            // so readers size their output buffer once.
            let n = ctx
                .compress_to_buffer(input, &mut out[start..])
                .map_err(|e| fail(&e))?;
            out.truncate(start + n);
            Ok(())
        })?,
    }
    Ok(())
}
