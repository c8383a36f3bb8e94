//! The hand-written RecordBatch v2 encoder, checked against an independent
//! decoder: `kafka-protocol`'s `RecordBatchDecoder`, which also verifies the
//! CRC-32C and decompresses every codec.

use bytes::Bytes;
use courier_kafka::protocol::record_batch::{
    single_record_batch_size, AppendRefused, BatchBuilder, Compression, EncodedBatch,
    ProducerStamp, RECORD_BATCH_OVERHEAD,
};
use courier_kafka::record::Header;
use kafka_protocol::records::{Compression as LibCompression, RecordBatchDecoder};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Rec {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
}

fn rec() -> impl Strategy<Value = Rec> {
    let bytes =
        |max| proptest::option::weighted(0.9, proptest::collection::vec(any::<u8>(), 0..max));
    (
        -5_000i64..5_000,
        bytes(64),
        // Mostly compressible text-like values, some random.
        prop_oneof![
            bytes(2_000),
            (0usize..3_000)
                .prop_map(|n| Some(b"abcabcabd".iter().cycle().take(n).copied().collect())),
        ],
        proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            0..4,
        ),
    )
        .prop_map(|(dt, key, value, hvals)| Rec {
            timestamp: 1_700_000_000_000 + dt,
            key,
            value,
            // Distinct keys: the oracle keeps headers in a map.
            headers: hvals
                .into_iter()
                .enumerate()
                .map(|(i, v)| Header {
                    key: format!("h{i}"),
                    value: v.map(Bytes::from),
                })
                .collect(),
        })
}

fn codec() -> impl Strategy<Value = Compression> {
    proptest::sample::select(Compression::ALL.to_vec())
}

fn lib(c: Compression) -> LibCompression {
    match c {
        Compression::None => LibCompression::None,
        Compression::Gzip => LibCompression::Gzip,
        Compression::Snappy => LibCompression::Snappy,
        Compression::Lz4 => LibCompression::Lz4,
        Compression::Zstd => LibCompression::Zstd,
    }
}

fn append(b: &mut BatchBuilder, r: &Rec) -> bool {
    b.try_append(
        r.timestamp,
        r.key.as_deref(),
        r.value.as_deref(),
        &r.headers,
    )
    .is_ok()
}

fn check_decodes_to(
    batch: &EncodedBatch,
    recs: &[Rec],
    stamp: ProducerStamp,
) -> Result<(), TestCaseError> {
    let mut bytes = batch.bytes().clone();
    let set = RecordBatchDecoder::decode(&mut bytes)
        .map_err(|e| TestCaseError::fail(format!("oracle: {e:#}")))?;
    prop_assert!(bytes.is_empty(), "one batch, nothing after it");
    prop_assert_eq!(set.compression, lib(batch.compression()));
    prop_assert_eq!(set.records.len(), recs.len());
    for (i, (got, want)) in set.records.iter().zip(recs).enumerate() {
        prop_assert_eq!(got.offset, i as i64);
        prop_assert_eq!(got.timestamp, want.timestamp);
        prop_assert_eq!(got.key.as_deref(), want.key.as_deref());
        prop_assert_eq!(got.value.as_deref(), want.value.as_deref());
        prop_assert_eq!(got.producer_id, stamp.producer_id);
        prop_assert_eq!(got.producer_epoch, stamp.producer_epoch);
        prop_assert_eq!(got.transactional, stamp.transactional);
        if stamp.base_sequence >= 0 {
            prop_assert_eq!(got.sequence, stamp.base_sequence + i as i32);
        }
        let headers: Vec<(String, Option<Vec<u8>>)> = got
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
            .collect();
        let want_headers: Vec<(String, Option<Vec<u8>>)> = want
            .headers
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        prop_assert_eq!(headers, want_headers);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any record set, any codec, any producer stamp: the oracle reads back
    /// exactly what went in, and the CRC checks out.
    #[test]
    fn oracle_decodes_what_we_encode(
        recs in proptest::collection::vec(rec(), 1..40),
        codec in codec(),
        pid in prop_oneof![Just(-1i64), 0i64..i64::MAX],
        epoch in 0i16..i16::MAX,
        seq in prop_oneof![Just(-1i32), 0i32..1_000_000],
    ) {
        let mut b = BatchBuilder::new(usize::MAX, codec);
        for r in &recs {
            prop_assert!(append(&mut b, r));
        }
        let uncompressed = b.size();
        let stamp = if pid < 0 { ProducerStamp::NONE } else {
            ProducerStamp {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                transactional: pid % 2 == 0,
            }
        };
        let batch = b.finish(stamp).unwrap();
        prop_assert!(batch.len() <= uncompressed, "compression never grows a batch");
        if codec == Compression::None {
            prop_assert_eq!(batch.len(), uncompressed, "size accounting is exact");
        }
        prop_assert_eq!(batch.stamp(), stamp);
        check_decodes_to(&batch, &recs, stamp)?;

        // A restamp (epoch bump on retry) keeps the records and fixes the
        // CRC; the transactional attribute goes on or off with the stamp.
        let bumped = ProducerStamp {
            producer_id: 42,
            producer_epoch: 7,
            base_sequence: 100,
            transactional: !stamp.transactional,
        };
        check_decodes_to(&batch.restamp(bumped), &recs, bumped)?;
        // In place: a shared batch is copied (the original keeps its stamp),
        // an unshared one is patched without a copy.
        let mut shared = batch.clone();
        shared.set_stamp(bumped);
        check_decodes_to(&shared, &recs, bumped)?;
        check_decodes_to(&batch, &recs, stamp)?;
        let mut unique = batch;
        unique.set_stamp(bumped);
        check_decodes_to(&unique, &recs, bumped)?;
    }

    /// Fields whose varints take three bytes and more (timestamp deltas of
    /// years either way, keys and values around the one-, two- and
    /// three-byte length boundaries, more than 8,191 records for the offset
    /// delta) in a buffer that starts at the header's size and grows: the
    /// oracle reads back exactly what went in, and the size is exact.
    #[test]
    fn wide_varints_and_a_growing_buffer_encode_exactly(
        recs in proptest::collection::vec((
            prop_oneof![Just(0i64), -(1i64 << 45)..(1i64 << 45)],
            proptest::sample::select(vec![None, Some(0usize), Some(63), Some(64), Some(8_191), Some(8_192)]),
            proptest::sample::select(vec![None, Some(0usize), Some(1), Some(63), Some(64), Some(8_191), Some(8_192), Some(70_000)]),
            any::<bool>(),
        ), 1..12),
        filler in prop_oneof![Just(0usize), Just(8_200usize)],
    ) {
        let bytes = |n: Option<usize>, b: u8| n.map(|n| vec![b; n]);
        let mut all: Vec<Rec> = (0..filler)
            .map(|i| Rec { timestamp: 1_700_000_000_000 + i as i64, key: None, value: Some(vec![7]), headers: Vec::new() })
            .collect();
        all.extend(recs.into_iter().map(|(dt, key, value, header)| Rec {
            timestamp: 1_700_000_000_000 + dt,
            key: bytes(key, b'k'),
            value: bytes(value, b'v'),
            headers: if header {
                vec![Header { key: "h".into(), value: Some(Bytes::from(vec![b'h'; 200])) }]
            } else {
                Vec::new()
            },
        }));
        let mut b = BatchBuilder::with_capacity(usize::MAX, 0, Compression::None);
        for r in &all {
            prop_assert!(append(&mut b, r));
        }
        let uncompressed = b.size();
        let batch = b.finish(ProducerStamp::NONE).unwrap();
        prop_assert_eq!(batch.len(), uncompressed, "size accounting is exact");
        check_decodes_to(&batch, &all, ProducerStamp::NONE)?;
    }

    /// Filling batches under a limit: every batch stays within `batch.size`
    /// unless it is a single record that alone is larger (the Java rule), and
    /// nothing is lost or reordered across batches.
    #[test]
    fn batches_never_exceed_the_limit(
        recs in proptest::collection::vec(rec(), 1..80),
        limit in 100usize..6_000,
        codec in codec(),
    ) {
        let mut batches: Vec<(EncodedBatch, Vec<Rec>)> = Vec::new();
        let mut b = BatchBuilder::new(limit, codec);
        let mut in_batch = Vec::new();
        for r in &recs {
            if !append(&mut b, r) {
                prop_assert!(!b.is_empty(), "an empty batch takes any record");
                let full = std::mem::replace(&mut b, BatchBuilder::new(limit, codec));
                batches.push((full.finish(ProducerStamp::NONE).unwrap(), std::mem::take(&mut in_batch)));
                prop_assert!(append(&mut b, r));
            }
            in_batch.push(r.clone());
            if b.record_count() > 1 {
                prop_assert!(b.size() <= limit);
            }
        }
        batches.push((b.finish(ProducerStamp::NONE).unwrap(), in_batch));
        let mut total = 0;
        for (batch, recs) in &batches {
            let single = single_record_batch_size(recs[0].key.as_deref(), recs[0].value.as_deref(), &recs[0].headers);
            if recs.len() == 1 && single > limit {
                prop_assert!(batch.len() <= single);
            } else {
                prop_assert!(batch.len() <= limit, "batch of {} > limit {limit}", batch.len());
            }
            check_decodes_to(batch, recs, ProducerStamp::NONE)?;
            total += recs.len();
        }
        prop_assert_eq!(total, recs.len());
    }

    /// Appending within a room (a producer's share of `buffer.memory`): a
    /// record that would take the batch past the room is refused with the
    /// exact size the batch would then have, and nothing of it is written;
    /// given that room, it is taken and the batch has that size. The
    /// batch decodes to every record taken, in order.
    #[test]
    fn a_refused_room_names_the_exact_size_and_writes_nothing(
        recs in proptest::collection::vec(rec(), 1..60),
        short in 1usize..64,
    ) {
        let mut b = BatchBuilder::new(usize::MAX, Compression::None);
        for r in &recs {
            let before = b.size();
            let room = before + short;
            match b.try_append_within(r.timestamp, r.key.as_deref(), r.value.as_deref(), &r.headers, room) {
                Ok(()) => prop_assert!(b.size() <= room),
                Err(AppendRefused::Room(need)) => {
                    prop_assert!(need > room);
                    prop_assert_eq!(b.size(), before, "nothing written");
                    prop_assert_eq!(
                        b.try_append_within(r.timestamp, r.key.as_deref(), r.value.as_deref(), &r.headers, need),
                        Ok(())
                    );
                    prop_assert_eq!(b.size(), need, "the size it named");
                }
                Err(AppendRefused::Full) => prop_assert!(false, "no limit"),
            }
        }
        check_decodes_to(&b.finish(ProducerStamp::NONE).unwrap(), &recs, ProducerStamp::NONE)?;
    }

    /// `single_record_batch_size` is the exact size of a one-record batch,
    /// which is what a producer compares with `max.request.size`.
    #[test]
    fn single_record_size_is_exact(r in rec()) {
        let mut b = BatchBuilder::new(0, Compression::None);
        prop_assert!(append(&mut b, &r));
        let batch = b.finish(ProducerStamp::NONE).unwrap();
        prop_assert_eq!(batch.len(), single_record_batch_size(r.key.as_deref(), r.value.as_deref(), &r.headers));
    }
}

#[test]
fn an_empty_builder_has_just_the_header() {
    let b = BatchBuilder::new(1024, Compression::Zstd);
    assert_eq!(b.size(), RECORD_BATCH_OVERHEAD);
    assert!(b.is_empty());
}

#[test]
fn incompressible_records_are_sent_uncompressed() {
    let mut b = BatchBuilder::new(1 << 20, Compression::Gzip);
    let mut rng = fastrand::Rng::with_seed(7);
    let noise: Vec<u8> = (0..4096).map(|_| rng.u8(..)).collect();
    b.try_append(0, None, Some(&noise), &[]).unwrap();
    let size = b.size();
    let batch = b.finish(ProducerStamp::NONE).unwrap();
    assert_eq!(batch.compression(), Compression::None);
    assert_eq!(batch.len(), size);
}
