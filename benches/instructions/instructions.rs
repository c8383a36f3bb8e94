//! Instructions per hot-path step, counted by callgrind through
//! iai-callgrind: `cargo bench -p courier-instructions --profile
//! instructions` (the
//! `iai-callgrind-runner` binary of the same version must be on PATH or in
//! `IAI_CALLGRIND_RUNNER`; `bash scripts/instructions.sh` finds the one
//! `scripts/install-tools.sh` installs).
//!
//! Timing is noise on shared two-core machines; instruction counts are not
//! (the same binary and inputs give the same count, whatever else runs), so
//! these guard the hot path in CI: each benchmark fails when it runs more
//! than 10 % over the count recorded in `counts.txt`.
//!
//! Every benchmark handles 1,000 records of 100 B (keyless unless it says
//! keyed) to a topic of 6 partitions, through the library's public calls
//! on a producer with no actors and no broker
//! (`courier_kafka::bench_internals::Pipeline`); the setup (building the
//! producer, the records, the earlier steps) is not counted. Divide by
//! 1,000 for a record's share.
//!
//! - `produce`: `Subscriber::produce` per record: outstanding-report
//!   permit, size check, metadata, clock, partitioner, append.
//! - `produce_batch`: one `Subscriber::produce_batch` of the 1,000.
//! - `deliver`: sealing the batches (CRC), and the broker's success
//!   answered as a connection actor does (`Engine::answer`): settling and
//!   routing each record's report to its subscription.
//! - `read`: reading the 1,000 reports from the stream, one `poll_next`
//!   a report or one `next_batch` at a time.
//! - `round_trip`: all of it, produce to report read.
//! - `encode`: the record-batch encoder alone (`BatchBuilder`), appending
//!   and finishing one batch.

use std::hint::black_box;

use courier_kafka::bench_internals::Pipeline;
use courier_kafka::protocol::record_batch::{BatchBuilder, Compression, ProducerStamp};
use courier_kafka::Record;
use iai_callgrind::{
    library_benchmark, library_benchmark_group, main, Callgrind, EventKind, LibraryBenchmarkConfig,
};

const RECORDS: usize = 1_000;
const VALUE: usize = 100;

/// The recorded counts: `name count` lines, `#` comments.
const COUNTS: &str = include_str!("counts.txt");

/// The benchmark `name`'s config: fail above its recorded count plus 10 %.
/// With `COURIER_INSTRUCTIONS_RECORD=1` (`scripts/instructions.sh
/// --record`) there is no limit, so that new counts can be taken.
fn limit(name: &str) -> LibraryBenchmarkConfig {
    let mut config = LibraryBenchmarkConfig::default();
    if std::env::var("COURIER_INSTRUCTIONS_RECORD").is_ok_and(|v| v == "1") {
        eprintln!("{name}: no limit (COURIER_INSTRUCTIONS_RECORD=1)");
        return config;
    }
    let recorded = COUNTS
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(name)).then(|| words.next()?.parse::<u64>().ok())?
        })
        .unwrap_or_else(|| {
            panic!("no count for {name} in counts.txt: bash scripts/instructions.sh --record")
        });
    config.tool(Callgrind::default().hard_limits([(EventKind::Ir, recorded + recorded / 10)]));
    config
}

fn fresh(keyed: bool) -> (Pipeline, Vec<Record>) {
    (Pipeline::new(&[]), Pipeline::records(RECORDS, VALUE, keyed))
}

fn produced() -> Pipeline {
    let (p, records) = fresh(false);
    assert_eq!(p.produce(records), RECORDS);
    p
}

fn delivered(batched: bool) -> (Pipeline, bool) {
    let p = produced();
    p.deliver();
    (p, batched)
}

fn fresh_for(batched: bool) -> (Pipeline, Vec<Record>, bool) {
    let (p, records) = fresh(false);
    (p, records, batched)
}

#[library_benchmark]
#[bench::keyless(args = (false), setup = fresh, config = limit("produce/keyless"))]
#[bench::keyed(args = (true), setup = fresh, config = limit("produce/keyed"))]
fn produce(input: (Pipeline, Vec<Record>)) -> Pipeline {
    let (p, records) = input;
    assert_eq!(p.produce(records), RECORDS);
    p
}

#[library_benchmark]
#[bench::keyless(args = (false), setup = fresh, config = limit("produce_batch/keyless"))]
fn produce_batch(input: (Pipeline, Vec<Record>)) -> Pipeline {
    let (p, records) = input;
    assert_eq!(p.produce_batch(records), RECORDS);
    p
}

#[library_benchmark]
#[bench::all(setup = produced, config = limit("deliver/all"))]
fn deliver(p: Pipeline) -> Pipeline {
    assert!(p.deliver() > 0);
    p
}

#[library_benchmark]
#[bench::poll_next(args = (false), setup = delivered, config = limit("read/poll_next"))]
#[bench::next_batch(args = (true), setup = delivered, config = limit("read/next_batch"))]
fn read(input: (Pipeline, bool)) -> Pipeline {
    let (mut p, batched) = input;
    assert_eq!(p.read(batched), RECORDS);
    p
}

// `produce` and `poll_next`, or `produce_batch` and `next_batch`.
#[library_benchmark]
#[bench::poll_next(args = (false), setup = fresh_for, config = limit("round_trip/poll_next"))]
#[bench::batch_calls(args = (true), setup = fresh_for, config = limit("round_trip/batch_calls"))]
fn round_trip(input: (Pipeline, Vec<Record>, bool)) -> Pipeline {
    let (mut p, records, batch_calls) = input;
    if batch_calls {
        p.produce_batch(records);
    } else {
        p.produce(records);
    }
    p.deliver();
    assert_eq!(p.read(batch_calls), RECORDS);
    p
}

fn text_value() -> Vec<u8> {
    b"courier-record-"
        .iter()
        .cycle()
        .take(VALUE)
        .copied()
        .collect()
}

#[library_benchmark]
#[bench::none(setup = text_value, config = limit("encode/none"))]
fn encode(value: Vec<u8>) -> Vec<u8> {
    let mut batch = BatchBuilder::new(usize::MAX, Compression::None);
    for i in 0..RECORDS {
        batch
            .try_append(1_700_000_000_000 + i as i64, None, Some(&value), &[])
            .expect("room");
    }
    black_box(batch.finish(ProducerStamp::NONE).expect("encoded"));
    value
}

library_benchmark_group!(
    name = hot_path;
    benchmarks = produce, produce_batch, deliver, read, round_trip, encode
);

main!(library_benchmark_groups = hot_path);
