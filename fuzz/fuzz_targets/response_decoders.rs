//! Any bytes, decoded as the response to every API and version Courier uses:
//! an error is fine, a panic or an abort is a bug.
//!
//! `bash scripts/fuzz.sh response_decoders 60` (needs cargo-fuzz).
#![no_main]

use bytes::Bytes;
use courier_kafka::protocol::message::decode_response;
use courier_kafka::protocol::messages::*;
use courier_kafka::protocol::versions::supported;
use courier_kafka::protocol::ApiKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    macro_rules! each {
        ($($req:ty => $api:expr),*) => {$(
            let s = supported($api).unwrap();
            for v in s.min..=s.max {
                let _ = decode_response::<$req>(frame.clone(), v);
            }
        )*};
    }
    each!(
        ApiVersionsRequest => ApiKey::ApiVersions,
        MetadataRequest => ApiKey::Metadata,
        ProduceRequest => ApiKey::Produce,
        InitProducerIdRequest => ApiKey::InitProducerId,
        CreateTopicsRequest => ApiKey::CreateTopics
    );
});
