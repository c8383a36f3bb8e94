//! Per-record costs of the hot pieces other than encoding (for that, see
//! `benches/encode.rs`): `cargo bench --bench hot_path`.
//!
//! - `partition`: the default partitioner, keyed (Java's murmur2) and
//!   keyless (KIP-480 sticky), per record.
//! - `report_routing`: one delivered batch of 1,000 records routed to its
//!   subscriptions and every report read back from their streams, report by
//!   report (`poll_next`) or a batch at a time (`next_batch`); with one
//!   subscription, and with four whose records interleave in runs of 10
//!   (chunks that mix targets are split). Building the batch is setup, not
//!   timed. Time per iteration ÷ 1,000 is the cost per report. The crate's
//!   dev-dependency on itself turns the `metrics` feature on, so this
//!   includes the published counters and latency histogram with no
//!   recorder installed (no-op handles).
//! - `report_routing_prometheus`: the same with `metrics-exporter-prometheus`'s
//!   recorder installed (upkeep run between iterations, not timed): the
//!   cost of publishing the batch's counts to a real exporter.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use courier_kafka::bench_internals::PreparedBatch;
use courier_kafka::partitioner::{DefaultPartitioner, Partitioner, TopicLayout};

const RECORDS: usize = 1_000;

fn partition(c: &mut Criterion) {
    let mut group = c.benchmark_group("partition");
    group.throughput(Throughput::Elements(1));
    let p = DefaultPartitioner::new();
    let available = [0, 1, 2, 3, 4, 5];
    let layout = TopicLayout::new(6, &available);
    let keys: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
    let mut i = 0;
    group.bench_function("keyed", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(p.partition("orders", Some(keys[i].as_bytes()), &layout))
        })
    });
    group.bench_function("keyless_sticky", |b| {
        b.iter(|| black_box(p.partition(black_box("orders"), None, &layout)))
    });
    group.finish();
}

fn report_routing(c: &mut Criterion) {
    routing(c, "report_routing", &|| {});
}

fn report_routing_prometheus(c: &mut Criterion) {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the first recorder of this process");
    routing(c, "report_routing_prometheus", &|| handle.run_upkeep());
}

fn routing(c: &mut Criterion, name: &str, between: &dyn Fn()) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(RECORDS as u64));
    for (name, subscribers, run) in [
        ("1_subscriber", 1, RECORDS),
        ("4_subscribers_runs_of_10", 4, 10),
    ] {
        for (how, batched) in [("poll_next", false), ("next_batch", true)] {
            group.bench_function(format!("{name}/{how}"), |b| {
                b.iter_batched(
                    || {
                        between();
                        PreparedBatch::new(RECORDS, subscribers, run)
                    },
                    |batch| assert_eq!(batch.route_and_read(batched), RECORDS),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    partition,
    report_routing,
    report_routing_prometheus
);
criterion_main!(benches);
