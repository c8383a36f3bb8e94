//! Request and response messages: headers, bodies and the frame around them.
//!
//! The schema types come from the `kafka-protocol` crate; this module only
//! adds the parts every message shares: the length prefix, the request header
//! (API key, version, correlation id, client id) and the response header, each
//! at the header version that the API and version call for.
//!
//! # References
//! - "Request Header" and "Response Header" in <https://kafka.apache.org/protocol#protocol_messages>
//! - KIP-482: header v2 (requests) and v1 (responses) carry tagged fields.
//!   ApiVersions responses always use response header v0, so that a client
//!   can parse the answer before it knows any versions.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::frame::LENGTH_PREFIX;
use super::{ApiKey, ProtocolError};

/// The API key of request type `R`.
pub fn api_key<R: Request>() -> ApiKey {
    ApiKey::try_from(R::KEY).expect("kafka-protocol request types have valid keys")
}

fn request_header<R: Request>(
    correlation_id: i32,
    client_id: Option<&StrBytes>,
    version: i16,
) -> RequestHeader {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = client_id.cloned();
    header
}

/// Appends one whole request frame (length prefix, header, body) to `buf`.
///
/// ```
/// use bytes::BytesMut;
/// use courier_kafka::protocol::message::encode_request;
/// use courier_kafka::protocol::messages::MetadataRequest;
///
/// let mut buf = BytesMut::new();
/// encode_request(&mut buf, 7, None, 12, &MetadataRequest::default()).unwrap();
/// let len = i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
/// assert_eq!(len + 4, buf.len());
/// ```
pub fn encode_request<R: Request>(
    buf: &mut BytesMut,
    correlation_id: i32,
    client_id: Option<&StrBytes>,
    version: i16,
    body: &R,
) -> Result<(), ProtocolError> {
    let api = api_key::<R>();
    let fail = |e: anyhow::Error| ProtocolError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    let header = request_header::<R>(correlation_id, client_id, version);
    let start = buf.len();
    buf.put_i32(0); // patched below, once the size is known
    header
        .encode(buf, R::header_version(version))
        .map_err(fail)?;
    body.encode(buf, version).map_err(fail)?;
    let len = buf.len() - start - LENGTH_PREFIX;
    let len = i32::try_from(len).map_err(|_| ProtocolError::Encode {
        api,
        version,
        reason: format!("request of {len} bytes does not fit a frame"),
    })?;
    buf[start..start + LENGTH_PREFIX].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The exact size of a request frame, length prefix included, without
/// encoding it.
pub fn request_frame_size<R: Request>(
    client_id: Option<&StrBytes>,
    version: i16,
    body: &R,
) -> Result<usize, ProtocolError> {
    let api = api_key::<R>();
    let fail = |e: anyhow::Error| ProtocolError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    let header = request_header::<R>(0, client_id, version);
    let header_size = header
        .compute_size(R::header_version(version))
        .map_err(fail)?;
    Ok(LENGTH_PREFIX + header_size + body.compute_size(version).map_err(fail)?)
}

/// Decodes a response frame body (the bytes after the length prefix) that
/// answers a request of type `R` sent at `version`. Returns the correlation
/// id and the response.
///
/// Malformed bytes give an error, never a panic; trailing bytes after the
/// body are ignored, as newer brokers may add fields we do not know.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    version: i16,
) -> Result<(i32, R::Response), ProtocolError> {
    let api = api_key::<R>();
    let fail = |e: anyhow::Error| ProtocolError::Decode {
        api,
        version,
        reason: e.to_string(),
    };
    let header = ResponseHeader::decode(
        &mut frame,
        <R::Response as HeaderVersion>::header_version(version),
    )
    .map_err(fail)?;
    let body = R::Response::decode(&mut frame, version).map_err(fail)?;
    Ok((header.correlation_id, body))
}
