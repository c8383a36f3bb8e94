//! Length-prefixed framing and correlation ids, with no I/O.
//!
//! Every Kafka request and response travels as `int32 length` followed by
//! `length` bytes. [`FrameDecoder`] pulls whole frames out of a growing read
//! buffer and copes with a frame arriving in any number of pieces.
//!
//! A hostile or broken peer can claim any length. The decoder never reserves
//! the claimed size: it only splits off bytes that have actually arrived, and
//! a claim above the configured maximum is an error before anything is read.
//!
//! # References
//! - Kafka protocol guide, "Common Request and Response Structure":
//!   <https://kafka.apache.org/protocol#protocol_common>

use bytes::{Buf, Bytes, BytesMut};

use super::ProtocolError;

/// Size of the length prefix in front of every frame.
pub const LENGTH_PREFIX: usize = 4;

/// The default largest response frame accepted: 100 MiB, as the Java client's
/// `socket.request.max.bytes` default on the broker side.
pub const DEFAULT_MAX_FRAME: usize = 100 * 1024 * 1024;

/// Splits length-prefixed frames off a read buffer.
///
/// ```
/// use bytes::BytesMut;
/// use courier_kafka::protocol::frame::FrameDecoder;
///
/// let mut decoder = FrameDecoder::new(1024);
/// let mut buf = BytesMut::from(&[0u8, 0, 0, 3, b'a'][..]);
/// assert!(decoder.decode(&mut buf).unwrap().is_none()); // partial frame
/// buf.extend_from_slice(b"bc");
/// assert_eq!(&decoder.decode(&mut buf).unwrap().unwrap()[..], b"abc");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame: usize,
}

impl FrameDecoder {
    /// A decoder that refuses frames longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self { max_frame }
    }

    /// Takes one whole frame body (without its length prefix) off the front of
    /// `buf`, or returns `None` when more bytes are needed.
    ///
    /// On error the buffer is left as it was; the connection is unusable
    /// because frame boundaries are lost.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, ProtocolError> {
        if buf.len() < LENGTH_PREFIX {
            return Ok(None);
        }
        let claimed = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if claimed < 0 {
            return Err(ProtocolError::NegativeFrameLength(claimed));
        }
        let len = claimed as usize;
        if len > self.max_frame {
            return Err(ProtocolError::FrameTooLarge {
                len,
                max: self.max_frame,
            });
        }
        if buf.len() < LENGTH_PREFIX + len {
            return Ok(None);
        }
        buf.advance(LENGTH_PREFIX);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

/// Reads the correlation id at the front of a response frame body, so the
/// caller can find which request (and so which API and version) it answers
/// before decoding the rest.
pub fn peek_correlation_id(frame: &[u8]) -> Result<i32, ProtocolError> {
    match frame.get(..4) {
        Some(b) => Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(ProtocolError::Truncated("response header")),
    }
}
