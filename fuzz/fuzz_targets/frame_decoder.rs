//! Any byte stream, split at any points, through the frame decoder: frames
//! come out whole or the decoder errors; it never panics or reserves what a
//! length prefix claims.
//!
//! `bash scripts/fuzz.sh frame_decoder 60` (needs cargo-fuzz).
#![no_main]

use bytes::BytesMut;
use courier_kafka::protocol::frame::FrameDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let decoder = FrameDecoder::new(4096);
    let mut buf = BytesMut::new();
    for chunk in rest.chunks(split as usize + 1) {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => assert!(frame.len() <= 4096),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
