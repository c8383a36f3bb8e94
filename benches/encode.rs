//! Record batch encoding cost per record: `cargo bench --bench encode`.
//!
//! Each iteration appends 1,000 records of one value size into a fresh
//! `BatchBuilder` and finishes the batch (compression and CRC included), so
//! the per-batch work is spread over the records the way a producer sees it.
//! Criterion reports time per iteration and throughput in records per
//! second; ns per record is the iteration time divided by 1,000.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use courier_kafka::protocol::record_batch::{BatchBuilder, Compression, ProducerStamp};

const RECORDS: usize = 1_000;

fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    for size in [10usize, 100, 1_000] {
        // Text-like values, so the codecs have something to compress.
        let value: Vec<u8> = b"courier-record-"
            .iter()
            .cycle()
            .take(size)
            .copied()
            .collect();
        let key = b"key-0001";
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            group.throughput(Throughput::Elements(RECORDS as u64));
            group.bench_with_input(
                BenchmarkId::new(codec.name(), format!("{size}B")),
                &value,
                |b, value| {
                    b.iter(|| {
                        let mut batch = BatchBuilder::new(usize::MAX, codec);
                        for i in 0..RECORDS {
                            batch
                                .try_append(
                                    1_700_000_000_000 + i as i64,
                                    Some(key),
                                    Some(value),
                                    &[],
                                )
                                .unwrap();
                        }
                        black_box(batch.finish(ProducerStamp::NONE).unwrap())
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
