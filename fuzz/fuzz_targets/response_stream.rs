//! A broker's byte stream as an application's connection reads it: the
//! bytes, split at any points, go through the frame decoder (as
//! `connection.rs`'s reader uses it) and every whole frame through the
//! response decoder of the request it answers. The first frame is the
//! ApiVersions answer, negotiated as on connect (v3, and v0 when that does
//! not parse); later frames are Metadata, Produce, InitProducerId and
//! CreateTopics answers, at the agreed versions, picked by correlation id as
//! a connection matches a response to its request. An error is fine; a
//! panic or an abort is a bug.
//!
//! This crate depends on `courier` as an application does (no `[patch]`),
//! so it decodes with the `kafka-protocol` that applications get.
//!
//! Input: byte 0 sets the read size (1 to 256 bytes), the rest is the
//! stream. Seeds: `fuzz/corpus/response_stream/` (written by
//! `tests/fuzz_corpus.rs`). `bash scripts/fuzz.sh response_stream 60`.
#![no_main]

use bytes::{Bytes, BytesMut};
use courier_kafka::protocol::frame::{peek_correlation_id, FrameDecoder, DEFAULT_MAX_FRAME};
use courier_kafka::protocol::message::decode_response;
use courier_kafka::protocol::messages::*;
use courier_kafka::protocol::versions::{api_versions_fallback, negotiate, supported, ApiVersions};
use courier_kafka::protocol::ApiKey;
use libfuzzer_sys::fuzz_target;

/// The API a later frame answers: correlation id 1 is Metadata, 2 Produce,
/// 3 InitProducerId, 4 CreateTopics, 5 Metadata again, and so on.
const LATER: [ApiKey; 4] = [
    ApiKey::Metadata,
    ApiKey::Produce,
    ApiKey::InitProducerId,
    ApiKey::CreateTopics,
];

/// The first frame, decoded as `Connection::negotiate` decodes it.
fn negotiated(frame: Bytes) -> Option<ApiVersions> {
    let max = supported(ApiKey::ApiVersions).unwrap().max;
    match decode_response::<ApiVersionsRequest>(frame.clone(), max) {
        Ok((_, resp)) if resp.error_code != 35 => negotiate(&resp).ok(),
        _ => {
            let (_, resp) = decode_response::<ApiVersionsRequest>(frame, 0).ok()?;
            let _ = api_versions_fallback(&resp);
            None
        }
    }
}

/// A later frame, decoded as the answer its correlation id names. Without
/// agreed versions the id picks the version too, so all are reached.
fn answer(frame: Bytes, versions: Option<&ApiVersions>) {
    let Ok(id) = peek_correlation_id(&frame) else {
        return;
    };
    let n = LATER.len() as i32;
    let api = LATER[(id.wrapping_sub(1)).rem_euclid(n) as usize];
    let s = supported(api).unwrap();
    let version = versions.and_then(|v| v.get(api)).unwrap_or_else(|| {
        let span = i32::from(s.max - s.min) + 1;
        s.min + (id.wrapping_sub(1).div_euclid(n)).rem_euclid(span) as i16
    });
    let _ = match api {
        ApiKey::Metadata => decode_response::<MetadataRequest>(frame, version).map(|_| ()),
        ApiKey::Produce => decode_response::<ProduceRequest>(frame, version).map(|_| ()),
        ApiKey::InitProducerId => {
            decode_response::<InitProducerIdRequest>(frame, version).map(|_| ())
        }
        _ => decode_response::<CreateTopicsRequest>(frame, version).map(|_| ()),
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME);
    let mut buf = BytesMut::new();
    let mut first = true;
    let mut versions = None;
    for chunk in rest.chunks(split as usize + 1) {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) if first => {
                    first = false;
                    versions = negotiated(frame);
                }
                Ok(Some(frame)) => answer(frame, versions.as_ref()),
                Ok(None) => break,
                // The connection is closed: frame boundaries are lost.
                Err(_) => return,
            }
        }
    }
});
