//! Hostile bytes: random, truncated and lying frames fed to the frame
//! decoder and the response decoders. They must return errors, never panic,
//! and never allocate what a length field claims.
//!
//! A counting global allocator records the largest single allocation made on
//! the test's own thread, so "never allocates the claimed size" is measured,
//! not assumed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use courier_kafka::protocol::frame::FrameDecoder;
use courier_kafka::protocol::message::decode_response;
use courier_kafka::protocol::messages::*;
use courier_kafka::protocol::versions::supported;
use courier_kafka::protocol::{ApiKey, ProtocolError};
use proptest::prelude::*;

struct MaxAlloc;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for MaxAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(layout.size())));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(new_size)));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: MaxAlloc = MaxAlloc;

/// Runs `f` and returns the largest single allocation it made on this thread.
fn largest_allocation(f: impl FnOnce()) -> usize {
    LARGEST.with(|m| m.set(0));
    f();
    LARGEST.with(|m| m.get())
}

/// Decodes `frame` as the response to every API and version we use.
fn decode_as_everything(frame: &Bytes) {
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
}

/// A real v12 Metadata response, to truncate and corrupt.
fn valid_metadata_frame() -> Bytes {
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
    let resp = MetadataResponse::default()
        .with_brokers(vec![metadata_response::MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("localhost"))
            .with_port(9092)])
        .with_topics(vec![metadata_response::MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(vec![
                metadata_response::MetadataResponsePartition::default()
                    .with_replica_nodes(vec![BrokerId(1)])
                    .with_isr_nodes(vec![BrokerId(1)]);
                3
            ])]);
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(3)
        .encode(&mut buf, MetadataResponse::header_version(12))
        .unwrap();
    resp.encode(&mut buf, 12).unwrap();
    buf.freeze()
}

#[test]
fn an_array_claiming_two_billion_elements_allocates_nothing_near_that() {
    // ApiVersions v0 body: error_code, then an int32 array count of i32::MAX
    // with only a few bytes behind it.
    let mut b = BytesMut::new();
    b.put_i32(1); // correlation id
    b.put_i16(0); // error code
    b.put_i32(i32::MAX); // "2^31 - 1 api keys follow"
    b.put_slice(&[0; 12]);
    let frame = b.freeze();
    let largest = largest_allocation(|| {
        let r = decode_response::<ApiVersionsRequest>(frame.clone(), 0);
        assert!(r.is_err(), "a lying count must fail to decode");
    });
    assert!(
        largest < 64 * 1024,
        "largest allocation was {largest} bytes"
    );

    // The same lie in a compact (flexible) array: Metadata v12 brokers.
    let mut b = BytesMut::new();
    b.put_i32(1);
    b.put_u8(0); // response header tagged fields
    b.put_i32(0); // throttle
    b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // unsigned varint 2^31 - 1
    b.put_slice(&[0; 12]);
    let frame = b.freeze();
    let largest = largest_allocation(|| {
        assert!(decode_response::<MetadataRequest>(frame.clone(), 12).is_err());
    });
    assert!(
        largest < 64 * 1024,
        "largest allocation was {largest} bytes"
    );
}

#[test]
fn every_truncation_of_a_valid_response_is_an_error() {
    let frame = valid_metadata_frame();
    assert!(decode_response::<MetadataRequest>(frame.clone(), 12).is_ok());
    for cut in 0..frame.len() {
        let r = decode_response::<MetadataRequest>(frame.slice(..cut), 12);
        assert!(
            matches!(r, Err(ProtocolError::Decode { .. })),
            "cut at {cut} of {}",
            frame.len()
        );
    }
}

#[test]
fn frame_longer_than_the_maximum_is_refused_before_reading_it() {
    let decoder = FrameDecoder::new(1024);
    let mut buf = BytesMut::new();
    buf.put_i32(1025);
    let largest = largest_allocation(|| {
        assert_eq!(
            decoder.decode(&mut buf),
            Err(ProtocolError::FrameTooLarge {
                len: 1025,
                max: 1024
            })
        );
    });
    assert!(largest < 1024);
    let mut buf = BytesMut::new();
    buf.put_i32(-5);
    assert_eq!(
        decoder.decode(&mut buf),
        Err(ProtocolError::NegativeFrameLength(-5))
    );
    let mut buf = BytesMut::new();
    buf.put_i32(i32::MAX);
    assert!(FrameDecoder::default().decode(&mut buf).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic_or_over_allocate(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let frame = Bytes::from(bytes);
        let largest = largest_allocation(|| decode_as_everything(&frame));
        // Decoded values can be bigger than their wire form (a Vec of
        // structs), but stay within a small multiple of the frame.
        prop_assert!(largest <= 64 * 1024, "largest allocation {largest} for {} bytes", frame.len());
    }

    #[test]
    fn corrupted_valid_responses_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = valid_metadata_frame().to_vec();
        for (i, b) in flips {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        decode_as_everything(&Bytes::from(bytes));
    }

    #[test]
    fn frames_survive_any_split_into_reads(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..10),
        cuts in proptest::collection::vec(1usize..64, 1..200),
    ) {
        let mut stream = Vec::new();
        for b in &bodies {
            stream.extend_from_slice(&(b.len() as i32).to_be_bytes());
            stream.extend_from_slice(b);
        }
        let decoder = FrameDecoder::new(300);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut cut = cuts.iter().cycle();
        while pos < stream.len() {
            let n = (*cut.next().unwrap()).min(stream.len() - pos);
            buf.extend_from_slice(&stream[pos..pos + n]);
            pos += n;
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                out.push(frame.to_vec());
            }
        }
        prop_assert_eq!(out, bodies);
        prop_assert!(buf.is_empty());
    }
}
