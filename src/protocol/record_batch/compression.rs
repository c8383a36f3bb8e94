//! Batch compression codecs: gzip, snappy, lz4 and zstd.
//!
//! A batch compresses the whole records section (everything after the 61-byte
//! header) in one go, so each codec is called once per batch, never per
//! record. Each writes the framing the Java client writes, which every broker
//! and consumer reads:
//! - gzip: a gzip member (RFC 1952), default level 6, or 1 to 9.
//! - snappy: xerial's `SnappyOutputStream` framing (magic header, then
//!   length-prefixed raw snappy blocks of up to 32 KiB), as the Java client.
//!   It has no levels.
//! - lz4: an LZ4 frame with 64 KiB independent blocks (KIP-57 framing).
//!   Without a level (or at 9, Java's default, which the Java client also
//!   encodes with LZ4's fast compressor) it is `lz4_flex`'s fast encoder;
//!   any other level from 1 to 17 goes to liblz4's frame encoder at that
//!   level (1 fast, 2 its middle mode, 3 and up high compression; liblz4
//!   gains nothing past 12), as the Java client's `highCompressor(level)`.
//! - zstd: a zstd frame at level 3, the library default, or any level from
//!   -131072 to 22.
//!
//! Levels are Java's (KIP-390: `compression.gzip.level`,
//! `compression.lz4.level`, `compression.zstd.level`); a [`Codec`] carries
//! one beside its [`Compression`]. With no level set, each codec runs
//! exactly the code it ran before levels existed.
//!
//! # References
//! - <https://kafka.apache.org/documentation/#brokerconfigs_compression.type>
//! - KIP-57 (LZ4 framing), KIP-110 (zstd), KIP-390 (compression levels)
//! - xerial snappy-java stream format: "SnappyOutputStream" compatibility notes

use std::fmt;
use std::io::Write;
use std::ops::RangeInclusive;
use std::str::FromStr;

/// A record batch compression codec, as `compression.type` names them.
///
/// ```
/// use courier_kafka::protocol::record_batch::Compression;
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

    /// The levels the codec takes (Java's, KIP-390), or `None` for a
    /// codec without levels (`none`, `snappy`).
    ///
    /// ```
    /// use courier_kafka::protocol::record_batch::Compression;
    /// assert_eq!(Compression::Gzip.levels(), Some(1..=9));
    /// assert_eq!(Compression::Lz4.levels(), Some(1..=17));
    /// assert_eq!(Compression::Zstd.levels(), Some(-131072..=22));
    /// assert_eq!(Compression::Snappy.levels(), None);
    /// ```
    pub fn levels(self) -> Option<RangeInclusive<i32>> {
        match self {
            Compression::None | Compression::Snappy => None,
            Compression::Gzip => Some(1..=9),
            Compression::Lz4 => Some(1..=17),
            Compression::Zstd => Some(-131072..=22),
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

/// A codec and the level to compress at: what a
/// [`BatchBuilder`](super::BatchBuilder) compresses its batches with.
/// `level: None` is the codec's default (gzip 6, lz4 fast, zstd 3); a
/// [`Compression`] converts into one.
///
/// ```
/// use courier_kafka::protocol::record_batch::{Codec, Compression};
/// let c: Codec = Compression::Zstd.into();
/// assert_eq!(c, Codec { compression: Compression::Zstd, level: None });
/// assert_eq!(Compression::Gzip.at_level(9).level, Some(9));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Codec {
    /// The codec.
    pub compression: Compression,
    /// Its level, within [`Compression::levels`]; `None` for the default.
    /// A level out of range is clamped to it (the producer's settings are
    /// checked before they get here); a codec without levels ignores it.
    pub level: Option<i32>,
}

impl From<Compression> for Codec {
    fn from(compression: Compression) -> Codec {
        Codec {
            compression,
            level: None,
        }
    }
}

impl Compression {
    /// This codec at `level`.
    pub fn at_level(self, level: i32) -> Codec {
        Codec {
            compression: self,
            level: Some(level),
        }
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
/// Java's default LZ4 level, which the Java client encodes with LZ4's fast
/// compressor (`KafkaLZ4BlockOutputStream`), as Courier does.
const LZ4_JAVA_DEFAULT: i32 = 9;

thread_local! {
    /// The thread's zstd context and the level it is set to.
    static ZSTD: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends `input`, compressed with `codec` at its level, to `out`.
pub(crate) fn compress(
    codec: Codec,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let Codec {
        compression: codec,
        level,
    } = codec;
    let fail = |e: &dyn fmt::Display| CompressionError {
        codec,
        reason: e.to_string(),
    };
    // Within the codec's range (a codec without levels has no level).
    let level = level.and_then(|l| codec.levels().map(|r| l.clamp(*r.start(), *r.end())));
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let level = level.map_or_else(flate2::Compression::default, |l| {
                flate2::Compression::new(l as u32)
            });
            let mut enc = flate2::write::GzEncoder::new(out, level);
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
        Compression::Lz4 if level.is_some_and(|l| l != LZ4_JAVA_DEFAULT) => {
            use lz4::liblz4::BlockChecksum;
            use lz4::{BlockMode, BlockSize, ContentChecksum, EncoderBuilder};
            // The frame lz4_flex writes below (64 KiB independent blocks,
            // no checksums), at the level asked for. liblz4 treats levels
            // above its maximum (12) as 12.
            let mut enc = EncoderBuilder::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent)
                .checksum(ContentChecksum::NoChecksum)
                .block_checksum(BlockChecksum::NoBlockChecksum)
                .level(level.unwrap_or_default().max(1) as u32)
                .build(out)
                .map_err(|e| fail(&e))?;
            enc.write_all(input).map_err(|e| fail(&e))?;
            let (_, done) = enc.finish();
            done.map_err(|e| fail(&e))?;
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
            let level = level.unwrap_or(ZSTD_LEVEL);
            let mut slot = cell.borrow_mut();
            let (at, ctx) = match slot.as_mut() {
                Some(c) => c,
                None => slot.insert((
                    level,
                    zstd::bulk::Compressor::new(level).map_err(|e| fail(&e))?,
                )),
            };
            // Producers with different levels may share a thread.
            if *at != level {
                ctx.set_compression_level(level).map_err(|e| fail(&e))?;
                *at = level;
            }
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
