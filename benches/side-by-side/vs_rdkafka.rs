//! Courier side by side with rust-rdkafka (librdkafka), in one run, on
//! brokers this bench starts itself: Tansu, and for the `kafka` workloads
//! one Apache Kafka broker (the tests' harness), over PLAINTEXT and over
//! TLS (its SSL listener; librdkafka built with OpenSSL, Courier with
//! rustls); for the `kafka3` workloads three brokers (replication factor 1
//! and 3).
//!
//! ```text
//! cargo bench -p courier-side-by-side --bench vs_rdkafka                     # everything: the workload matrix, then latency
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --runs 3 --records 200000
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --only keys      # workloads whose name contains "keys"
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --only "kafka plaintext|kafka tls" --no-latency --out tls
//!                                                    # Apache Kafka, plaintext and TLS, to docs/benchmarks/tls.md
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --only "kafka txn" --no-latency --out transactions
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --only "linger 5 ms:" --latency-rate 800000 \
//!     --latency-clients courier-stream,rdkafka-base --out equal-rate
//!                                                    # latency at one rate for all, to docs/benchmarks/equal-rate.md
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --defaults --only baseline --clients courier-stream,wire-ceiling
//!                                                    # some of a workload's clients
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --defaults --only "kafka plaintext|kafka3" --no-latency --out kafka3-defaults
//!                                                    # one broker and three, to docs/benchmarks/kafka3-defaults.md
//! cargo bench -p courier-side-by-side --bench vs_rdkafka -- --smoke          # seconds; what CI runs (no timing claims)
//! ```
//!
//! The bench is a package of its own (`benches/side-by-side`), so the
//! Courier it measures, in its clients and in `courier perf`, is built at
//! its default features as an application gets it, not with the features
//! the root package's dev-dependency on itself turns on for its tests.
//!
//! Each client runs in a child process (this binary with `--child`), so
//! CPU time is the whole client's (user + sys, from `wait4`'s rusage) and
//! peak RSS is the child's own (`VmHWM`, which it reports at exit).
//! Clients alternate A B C … A B C … so drift on a noisy machine spreads
//! over all of them. Each Tansu workload gets a fresh broker (Tansu's memory
//! storage keeps every record); the Kafka workloads share one broker and
//! delete each run's topic once it is read back. The broker's own CPU per
//! run is read from /proc.
//! Every client's delivered count comes from its success reports; the first
//! run of each client is read back with the rdkafka consumer and a client
//! that lost records is flagged, not just timed.
//!
//! In `--defaults` runs `wire-ceiling` stands beside the clients: not a
//! client, but the most one connection to the broker moves with 1 MiB
//! requests (encoded beforehand, then written back to back, 5 unanswered
//! at most). Its median bounds the medians of the clients here, each of
//! which sends a broker its requests on one connection; single runs spread
//! past one another.
//!
//! Latency runs are open loop: each client produces at a fixed rate, half
//! of its own median throughput in the `linger.ms=5` workload, and a
//! record's latency runs from the instant it was due (written into its
//! value) to its delivery report, so a client that falls behind is charged
//! for it. Results: a markdown table and an SVG chart in `docs/benchmarks/`.

mod common;

use common::{cpu_model, med_min_max, On, Target};

#[cfg(feature = "bench-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const CLIENTS: &[&str] = &[
    "courier-stream",
    "courier-stream-batch",
    "courier-errors-only",
    "courier-no-reports",
    "courier-send",
    "rdkafka-base",
    "rdkafka-future",
];

/// Clients of `--defaults` runs: each client at its own defaults, with
/// only `linger.ms`, `acks` and `compression.type` set alike. `courier-cli`
/// is `courier perf` (the release binary), `java-perf` the Java client's
/// own `ProducerPerformance` (kafka-tools, from the Apache Kafka harness);
/// `courier-cli-produce` is `courier produce --reports errors` reading
/// the run's records as lines from a file on stdin.
const DEFAULTS_CLIENTS: &[&str] = &[
    "courier-stream",
    "courier-stream-batch",
    "courier-cli",
    "courier-cli-produce",
    "rdkafka-base",
    "java-perf",
    "wire-ceiling",
];

/// In a child: whether its workload runs each client at its defaults
/// (`BENCH_DEFAULTS=1`, from `Workload::defaults`).
fn at_defaults() -> bool {
    std::env::var_os("BENCH_DEFAULTS").is_some_and(|v| v == "1")
}

/// Clients that write a "warm" record before the timed ones.
fn warms_up(client: &str) -> bool {
    client.starts_with("courier") && !client.starts_with("courier-cli")
}

/// Clients of the transactional workloads: a Courier subscription whose
/// reports are all read, and a `BaseProducer` with a counting callback,
/// each committing a transaction every `Workload::txn` records.
/// `courier-txn` runs with the broker's `transaction.version` at 2 (Kafka
/// 4.x's default, KIP-890), `courier-txn-v1` on the same broker with it
/// set to 1 for its run (`Target::set_transaction_version`); rdkafka
/// speaks version 1 either way and runs at 2.
const TXN_CLIENTS: &[&str] = &["courier-txn", "courier-txn-v1", "rdkafka-txn"];

/// The `transaction.version` the broker runs while `client` runs.
fn transaction_version_for(client: &str) -> i16 {
    if client == "courier-txn-v1" {
        1
    } else {
        2
    }
}

/// Clients of the open-loop latency runs.
const LATENCY_CLIENTS: &[&str] = &[
    "courier-stream",
    "courier-send",
    "rdkafka-base",
    "rdkafka-future",
];

/// Seconds of load per latency run.
const LATENCY_SECONDS: f64 = 3.0;

#[derive(Clone, Debug)]
struct Workload {
    name: String,
    records: usize,
    size: usize,
    partitions: i32,
    linger_ms: u64,
    acks: &'static str,
    compression: &'static str,
    /// Key scheme: none, "k0..k999", or the seed's constant "yow".
    keys: Keys,
    /// The broker, and how clients reach it.
    on: On,
    /// Records per transaction; 0: not transactional.
    txn: usize,
    /// Replicas of each partition (on `On::Kafka3`; else 1).
    replication: i16,
    /// Each client at its own defaults (`--defaults`; the children see
    /// `BENCH_DEFAULTS=1`): only linger, acks and compression set alike.
    defaults: bool,
}

impl Workload {
    fn clients(&self) -> Vec<&'static str> {
        if self.txn > 0 {
            return TXN_CLIENTS.to_vec();
        }
        if !self.defaults {
            return CLIENTS.to_vec();
        }
        // The perf tools write keyless records only, and the Java one gets
        // no TLS settings here.
        DEFAULTS_CLIENTS
            .iter()
            .copied()
            .filter(|c| {
                !matches!(
                    *c,
                    "courier-cli" | "courier-cli-produce" | "java-perf" | "wire-ceiling"
                ) || (self.keys == Keys::None && self.on != On::KafkaTls)
            })
            // The ceiling writes uncompressed batches.
            .filter(|c| *c != "wire-ceiling" || self.compression == "none")
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Keys {
    None,
    Thousand,
    Yow,
}

impl Keys {
    fn name(self) -> &'static str {
        match self {
            Keys::None => "none",
            Keys::Thousand => "k0..k999",
            Keys::Yow => "yow",
        }
    }
    fn parse(s: &str) -> Keys {
        match s {
            "k0..k999" => Keys::Thousand,
            "yow" => Keys::Yow,
            _ => Keys::None,
        }
    }
    /// Record `i`'s key, written into `buf`: no allocation, so each client
    /// pays only for what its own API makes it do with a key (rdkafka
    /// copies it into its message; a Courier record owns it as `Bytes`).
    fn key(self, i: usize, buf: &mut [u8; 8]) -> Option<&str> {
        use std::io::Write;
        let n = match self {
            Keys::None => return None,
            Keys::Thousand => {
                let mut w = &mut buf[..];
                write!(w, "k{}", i % 1000).expect("fits");
                8 - w.len()
            }
            Keys::Yow => {
                buf[..3].copy_from_slice(b"yow");
                3
            }
        };
        std::str::from_utf8(&buf[..n]).ok()
    }
}

/// The name of the workload whose throughputs set the latency runs' rates.
const LINGER5: &str = "linger 5 ms";

/// The workload matrix: a baseline (100 B, 6 partitions, no keys, linger
/// 100 ms, acks=all, no compression) and one change at a time from it,
/// then the seed's own benchmark.
fn workloads(records: usize, smoke: bool, defaults: bool) -> Vec<Workload> {
    let base = Workload {
        name: String::new(),
        records,
        size: 100,
        partitions: 6,
        linger_ms: 100,
        acks: "all",
        compression: "none",
        keys: Keys::None,
        on: On::Tansu,
        txn: 0,
        replication: 1,
        defaults,
    };
    let with = |name: &str, f: &dyn Fn(&mut Workload)| {
        let mut w = base.clone();
        f(&mut w);
        w.name = format!(
            "{name}: {} x {} B, {} partition(s), keys {}, linger {} ms, acks={}, {}{}",
            w.records,
            w.size,
            w.partitions,
            w.keys.name(),
            w.linger_ms,
            w.acks,
            w.compression,
            match w.on {
                On::Tansu => "",
                On::Kafka => ", Apache Kafka",
                On::KafkaTls => ", Apache Kafka over TLS",
                On::Kafka3 => ", 3 Apache Kafka brokers",
            }
        );
        if w.on == On::Kafka3 {
            w.name
                .push_str(&format!(", replication factor {}", w.replication));
        }
        if w.txn > 0 {
            w.name
                .push_str(&format!(", {} records per transaction", w.txn));
        }
        if w.defaults {
            w.name.push_str(", each client at its defaults");
        }
        w
    };
    let mut all = vec![
        with("baseline", &|_| {}),
        with("keys", &|w| w.keys = Keys::Thousand),
        with(LINGER5, &|w| w.linger_ms = 5),
        with("kafka tls", &|w| w.on = On::KafkaTls),
    ];
    if smoke {
        // The perf tools (courier perf, Java's ProducerPerformance) too.
        all.push(with("baseline", &|w| w.defaults = true));
        all.push(with("kafka txn", &|w| {
            w.on = On::Kafka;
            w.txn = 1000;
            w.linger_ms = 5;
        }));
        return all;
    }
    // The same broker without TLS: what TLS costs each client.
    all.insert(3, with("kafka plaintext", &|w| w.on = On::Kafka));
    // Transactions on the same broker, small and large ones (fewer
    // records: each commit costs round trips), with linger.ms=5.
    for per in [100, 10_000] {
        all.insert(
            5,
            with(&format!("kafka txn {per}"), &|w| {
                w.on = On::Kafka;
                w.txn = per;
                // 200 transactions of 100, 20 of 10,000 (at 1M records).
                w.records = (records / if per == 100 { 50 } else { 5 }).max(per);
                // A commit sends what lingers anyway; 5 ms (the Java
                // default) keeps linger out of the way of small ones.
                w.linger_ms = 5;
            }),
        );
    }
    // Three brokers, each leading two of the six partitions: a client's
    // requests spread over three connections; with replication factor 3
    // (and acks=all) each batch is also fetched by two followers.
    for rf in [3, 1] {
        all.insert(
            4,
            with(&format!("kafka3 rf{rf}"), &|w| {
                w.on = On::Kafka3;
                w.replication = rf;
            }),
        );
    }
    all.extend([
        with("10 B", &|w| w.size = 10),
        // 1 KB records: a fifth as many, so one run stays near 200 MB.
        with("1 KB", &|w| {
            w.size = 1000;
            w.records = (records / 5).max(1)
        }),
        with("1 partition", &|w| w.partitions = 1),
        with("acks 1", &|w| w.acks = "1"),
        with("lz4", &|w| w.compression = "lz4"),
        with("zstd", &|w| w.compression = "zstd"),
    ]);
    let mut seed = with("seed", &|w| {
        w.records = 100_000;
        w.size = 0;
        w.keys = Keys::Yow
    });
    seed.name = "seed: 100000 records, key yow, empty values, linger 100 ms (reports on: courier-stream; off: courier-no-reports)".into();
    all.push(seed);
    all
}

fn main() {
    let Some(args) = common::Args::bench_or_child(child) else {
        return;
    };
    let flag = |name: &str| args.flag(name);
    let value = |name: &str| args.value(name);
    let smoke = args.smoke();
    if flag("--slow-broker") {
        return slow_broker(&args);
    }
    let runs: usize = args.number("--runs", 1, 5);
    let records: usize = args.number("--records", 20_000, 1_000_000);
    let only = value("--only");

    let mut table: Vec<(String, String, Stats)> = Vec::new();
    for (wi, w) in workloads(records, smoke, flag("--defaults"))
        .iter()
        .enumerate()
    {
        // `--only "a|b"`: workloads whose name contains a or b.
        if only
            .as_ref()
            .is_some_and(|o| !o.split('|').any(|o| w.name.contains(o)))
        {
            continue;
        }
        // `--clients a,b`: only those of the workload's clients.
        let picked: Option<Vec<String>> =
            value("--clients").map(|p| p.split(',').map(str::to_string).collect());
        for name in picked.iter().flatten() {
            if !w.clients().contains(&name.as_str()) {
                eprintln!("--clients: {name} is not a client of this workload");
            }
        }
        let clients = |w: &Workload| -> Vec<&'static str> {
            w.clients()
                .into_iter()
                .filter(|c| picked.as_ref().is_none_or(|p| p.iter().any(|p| p == c)))
                .collect()
        };
        eprintln!("== {}", w.name);
        let target = Target::start(w.on);
        let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        // Apache Kafka's JIT warms up over the first runs (each client
        // moved 1.5-2.9x more in its fifth run than in its first, one
        // client after another): one untimed round first, every client
        // once, so that no client's median falls on a cold broker.
        let warm_up = usize::from(w.on != On::Tansu && !smoke);
        for round in 0..runs + warm_up {
            let run = round.wrapping_sub(warm_up);
            for client in clients(w) {
                let topic = format!("bench-{wi}-{client}-{round}");
                target.create_replicated_topic(&topic, w.partitions, w.replication);
                if w.txn > 0 {
                    target.set_transaction_version(transaction_version_for(client));
                }
                let broker_cpu_before = target.brokers_cpu();
                let mut s = run_child(&target, &topic, client, w, 0.0);
                s.broker_cpu = target.brokers_cpu() - broker_cpu_before;
                if run == 0 {
                    s.verified = Some(count_in_log(
                        &target.admin,
                        &topic,
                        w.partitions,
                        w.records,
                        warms_up(client),
                    ));
                    // One JVM start (DumpLogSegments) a client: not in smokes.
                    if !smoke {
                        s.batch_fill = target.batch_fill(&topic, &[]);
                    }
                }
                target.done_with(&topic);
                if round < warm_up {
                    eprintln!(
                        "  warm-up {client:<18} {:>9.0} msg/s (not counted)",
                        s.rate(w.records)
                    );
                    continue;
                }
                eprintln!(
                    "  run {run} {client:<21} {:>9.0} msg/s  cpu {:>6.3} µs/msg  rss {:>5} MiB  delivered {}{}",
                    s.rate(w.records),
                    s.cpu_us_per_msg(w.records),
                    s.max_rss_kib / 1024,
                    s.delivered,
                    s.verified.map_or(String::new(), |v| format!("  (log: {v})"))
                );
                if let Some(fill) = s.batch_fill {
                    eprintln!("        stored: {fill}");
                }
                samples.entry(client).or_default().push(s);
            }
        }
        for client in clients(w) {
            let stats = Stats::of(&samples[client], w.records);
            table.push((w.name.clone(), client.to_string(), stats));
        }
    }

    // The open-loop latency runs are of the tuned clients only.
    let latency = if flag("--no-latency") || flag("--defaults") {
        Vec::new()
    } else {
        let fixed = value("--latency-rate").and_then(|r| r.parse::<f64>().ok());
        let clients: Vec<String> = value("--latency-clients")
            .map(|c| c.split(',').map(str::to_string).collect())
            .unwrap_or_else(|| LATENCY_CLIENTS.iter().map(|c| c.to_string()).collect());
        latency_runs(&table, runs, smoke, fixed, &clients)
    };

    if smoke {
        // Only that every client ran and none lost records: no timing claims.
        for (w, c, s) in &table {
            assert!(s.lost == 0, "{c} lost records in {w}");
        }
        for l in &latency {
            assert!(l.lost == 0, "{} lost records in its latency run", l.client);
            assert!(l.p50.0 > 0.0, "{}: no latencies measured", l.client);
        }
        // The chart is drawn (not written), so its code runs in CI too.
        assert!(svg(&table).contains("<svg"), "no chart");
        println!(
            "vs_rdkafka smoke: {} client runs and {} latency runs, all delivered",
            table.len(),
            latency.len()
        );
        return;
    }
    // `--out NAME` writes docs/benchmarks/NAME.md (and NAME.svg) instead of
    // results.md and throughput.svg, so a partial run does not replace the
    // full one.
    let out = value("--out");
    write_results(&table, &latency, runs, out.as_deref());
}

/// One client's open-loop latency results.
#[derive(Debug)]
struct Latency {
    client: String,
    rate: f64,
    records: usize,
    p50: (f64, f64, f64),
    p99: (f64, f64, f64),
    p999: (f64, f64, f64),
    lost: usize,
}

/// Open-loop runs at half of each client's median throughput in the
/// `linger.ms=5` workload, with `linger.ms=5`.
/// `fixed` replaces every client's rate with one rate (`--latency-rate`).
fn latency_runs(
    table: &[(String, String, Stats)],
    runs: usize,
    smoke: bool,
    fixed: Option<f64>,
    clients: &[String],
) -> Vec<Latency> {
    let Some((lw, _, _)) = table.iter().find(|(w, _, _)| w.starts_with(LINGER5)) else {
        eprintln!("(no latency runs: the {LINGER5:?} workload was not run)");
        return Vec::new();
    };
    let rate_of = |client: &str| {
        table
            .iter()
            .find(|(w, c, _)| w == lw && c == client)
            .map(|(_, _, s)| s.rate.0 / 2.0)
    };
    let mut w = workloads(0, true, false)
        .into_iter()
        .find(|w| w.name.starts_with(LINGER5))
        .expect("the linger-5 workload");
    let target = Target::start(On::Tansu);
    let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
    let mut sized: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    eprintln!("== latency, open loop at half of each client's linger-5 throughput");
    for run in 0..runs {
        for client in clients.iter().map(String::as_str) {
            let Some(mut rate) = fixed.or_else(|| rate_of(client)) else {
                continue;
            };
            if smoke {
                rate = rate.min(20_000.0);
            }
            let n = if smoke {
                2_000
            } else {
                (rate * LATENCY_SECONDS) as usize
            };
            w.records = n;
            sized.insert(client, (rate, n));
            let topic = format!("latency-{client}-{run}");
            target.create_topic(&topic, w.partitions);
            let s = run_child(&target, &topic, client, &w, rate);
            eprintln!(
                "  run {run} {client:<21} {rate:>9.0} msg/s offered  p50 {:>8.0} µs  p99 {:>8.0} µs  p99.9 {:>8.0} µs  delivered {}/{n}",
                s.latency_us[0], s.latency_us[1], s.latency_us[2], s.delivered
            );
            samples.entry(client).or_default().push(s);
        }
    }
    samples
        .into_iter()
        .map(|(client, s)| {
            let (rate, records) = sized[client];
            let pick = |i: usize| med_min_max(s.iter().map(|x| x.latency_us[i]).collect());
            Latency {
                client: client.to_string(),
                rate,
                records,
                p50: pick(0),
                p99: pick(1),
                p999: pick(2),
                lost: s
                    .iter()
                    .map(|x| records.saturating_sub(x.delivered))
                    .max()
                    .unwrap_or(0),
            }
        })
        .collect()
}

#[derive(Clone, Debug, Default)]
struct Sample {
    wall: f64,
    cpu: f64,
    max_rss_kib: i64,
    delivered: usize,
    verified: Option<usize>,
    /// How full the batches the broker stored were (Kafka, first run).
    batch_fill: Option<common::BatchFill>,
    broker_cpu: f64,
    /// p50, p99, p99.9 in µs (open-loop runs only).
    latency_us: [f64; 3],
}

impl Sample {
    fn rate(&self, n: usize) -> f64 {
        n as f64 / self.wall
    }
    fn cpu_us_per_msg(&self, n: usize) -> f64 {
        self.cpu * 1e6 / n as f64
    }
}

#[derive(Debug)]
struct Stats {
    rate: (f64, f64, f64),
    cpu_us: (f64, f64, f64),
    rss_mib: (f64, f64, f64),
    broker_cpu: f64,
    /// The first run's batch fill, as stored (Kafka workloads).
    batch_fill: Option<common::BatchFill>,
    lost: usize,
}

impl Stats {
    fn of(s: &[Sample], n: usize) -> Stats {
        Stats {
            rate: med_min_max(s.iter().map(|x| x.rate(n)).collect()),
            cpu_us: med_min_max(s.iter().map(|x| x.cpu_us_per_msg(n)).collect()),
            rss_mib: med_min_max(s.iter().map(|x| x.max_rss_kib as f64 / 1024.0).collect()),
            broker_cpu: med_min_max(s.iter().map(|x| x.broker_cpu).collect()).0,
            batch_fill: s.iter().find_map(|x| x.batch_fill),
            lost: s
                .iter()
                .map(|x| {
                    n.saturating_sub(x.delivered) + x.verified.map_or(0, |v| n.saturating_sub(v))
                })
                .max()
                .unwrap_or(0),
        }
    }
}

fn write_results(
    table: &[(String, String, Stats)],
    latency: &[Latency],
    runs: usize,
    out: Option<&str>,
) {
    let dir = common::support::repo_root().join("docs/benchmarks");
    std::fs::create_dir_all(&dir).unwrap();
    let mut md = String::new();
    let date = common::today();
    let cmd = common::command_line("vs_rdkafka", &[]);
    md.push_str(&format!(
        "# Courier vs rust-rdkafka\n\nRun on {date}: `{cmd}` ({runs} alternating runs per client; medians, with min–max; \
         on Apache Kafka after one untimed round of every client, which warms the broker's JIT).\n\
         Machine: {} cores, {}; brokers on the same machine: Tansu 0.6.0 (memory storage, a fresh one per workload), and for the `kafka` workloads one Apache Kafka 4.1.1 broker (KRaft, 512 MiB heap, its data on tmpfs; TLS on its SSL listener, the certificate checked against a CA made for the run), for the `kafka3` ones a cluster of three such brokers (plaintext; broker CPU is the three's sum); rdkafka 0.38 (librdkafka 2.12.1, OpenSSL 3 for TLS; Courier uses rustls with ring). \
         Courier is built at its default features, as an application gets it (the bench is a package of its own, `benches/side-by-side`).\n\
         Every report is consumed; CPU is the client process's user+sys time per message; RSS is its peak. \
         On Apache Kafka, `records / KiB a batch` is how full the batches the brokers stored from each client's first run were, \
         read from one replica's segment files by Kafka's `DumpLogSegments` (mean records and KiB a batch). \
         In workloads marked \"each client at its defaults\" (`--defaults`) every client runs at its own defaults with only linger.ms, acks and compression.type set alike \
         (and rdkafka's `partitioner=murmur2_random`); there `courier-cli` is `courier perf` (the optimised binary, every report read) and `java-perf` the Java client's \
         `ProducerPerformance` from kafka-tools 4.1.1 (`-Xmx512m`; its CPU includes the JVM's start and JIT). Elsewhere \
         Courier runs with `batch.size=1000000` (librdkafka's default) and `buffer.memory=8388608` (256 MiB for `courier-send`, whose million futures all wait at once); rdkafka with its defaults plus \
         `queue.buffering.max.messages=2000000`, `queue.buffering.max.kbytes=1048576` and `partitioner=murmur2_random` (Java-compatible keys).\n\n\
         Clients: `courier-stream` produces with `Subscriber::produce` one record at a time and reads every report from the `ReportStream`; \
         `courier-stream-batch` hands records over with `Subscriber::produce_batch`, 1,000 at a time, and reads reports with `next_batch`; \
         `courier-errors-only` is a subscription in `ReportMode::ErrorsOnly`; `courier-no-reports` uses `Producer::produce`; \
         `courier-send` keeps one `send().await` future per record; `rdkafka-base` is a `BaseProducer` with a counting delivery callback, \
         polled; `rdkafka-future` keeps one `FutureProducer::send` future per record; \
         in the `kafka txn` workloads, `courier-txn` (a subscription, every report read) and `rdkafka-txn` (a `BaseProducer`, counting callback) \
         each commit a transaction every N records (the commit flushes and waits for the coordinator); the broker runs `transaction.version` 2 (Kafka 4.x's default, KIP-890), which Courier speaks and librdkafka does not (it speaks version 1 to it), \
         except for `courier-txn-v1`'s runs, for which it is set to 1 (`kafka-features downgrade`, and `upgrade` after): Courier on the first transaction protocol, on the same broker. \
         `wire-ceiling` (in `--defaults` runs, plaintext, no keys) is not a client but the most one connection a broker moves \
         (its median bounds the medians of these clients, each of which sends a broker its requests on one connection; on three brokers, one connection to each partition leader, each on its own thread, the records dealt out by partitions): every Produce request is encoded before its clock starts \
         (each partition's batch an equal share of 1 MiB, no producer id, so the broker checks no sequence), then written \
         with up to 5 unanswered; its CPU is mostly that encoding, its RSS the encoded records.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model()
    ));
    let mut current = String::new();
    for (w, c, s) in table {
        if *w != current {
            current = w.clone();
            md.push_str(&format!("\n## {w}\n\n| client | msgs/s | MB/s | client CPU µs/msg | peak RSS MiB | broker CPU s/run | records / KiB a batch | lost |\n|---|---|---|---|---|---|---|---|\n"));
        }
        let size = workload_size(w);
        md.push_str(&format!(
            "| {c} | {:.0} ({:.0}–{:.0}) | {:.1} | {:.3} ({:.3}–{:.3}) | {:.0} ({:.0}–{:.0}) | {:.2} | {} | {} |\n",
            s.rate.0,
            s.rate.1,
            s.rate.2,
            s.rate.0 * size as f64 / 1e6,
            s.cpu_us.0,
            s.cpu_us.1,
            s.cpu_us.2,
            s.rss_mib.0,
            s.rss_mib.1,
            s.rss_mib.2,
            s.broker_cpu,
            s.batch_fill.map_or("–".to_string(), |f| format!(
                "{:.0} / {:.1}",
                f.records_per_batch(),
                f.kib_per_batch()
            )),
            s.lost
        ));
    }
    let find = |w: &str, c: &str| {
        table
            .iter()
            .find(|(tw, tc, _)| tw == w && tc == c)
            .map(|(_, _, s)| s)
    };
    let mut seen = Vec::new();
    let mut rows = Vec::new();
    for (w, _, _) in table {
        if seen.contains(w) {
            continue;
        }
        seen.push(w.clone());
        let (Some(cs), Some(cb), Some(rb), Some(cf), Some(rf), Some(cn)) = (
            find(w, "courier-stream"),
            find(w, "courier-stream-batch"),
            find(w, "rdkafka-base"),
            find(w, "courier-send"),
            find(w, "rdkafka-future"),
            find(w, "courier-no-reports"),
        ) else {
            continue;
        };
        let short = w.split(':').next().unwrap_or(w);
        rows.push(format!(
            "| {short} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} % |\n",
            cs.rate.0 / rb.rate.0,
            cb.rate.0 / rb.rate.0,
            cs.cpu_us.0 / rb.cpu_us.0,
            cb.cpu_us.0 / rb.cpu_us.0,
            cs.rss_mib.0 / rb.rss_mib.0,
            cb.rss_mib.0 / rb.rss_mib.0,
            cf.rate.0 / rf.rate.0,
            100.0 * (1.0 - cs.rate.0 / cn.rate.0)
        ));
    }
    if !rows.is_empty() {
        // Ratios against rdkafka, per workload.
        md.push_str("\n## Ratios (median / median)\n\n\
        `stream` is courier-stream, `batch` courier-stream-batch, `base` rdkafka-base. \
        The goals: throughput ≥ 2× base, CPU ≤ 0.5× base, RSS ≤ base, reporting cost (1 − stream ÷ no-reports) ≤ 5 %, send ≥ 3× future.\n\n\
        | workload | stream ÷ base msgs/s | batch ÷ base msgs/s | stream ÷ base CPU | batch ÷ base CPU | stream ÷ base RSS | batch ÷ base RSS | send ÷ future msgs/s | reporting cost (stream vs no-reports) |\n|---|---|---|---|---|---|---|---|---|\n");
        for row in rows {
            md.push_str(&row);
        }
    }
    // Courier's transactions against rdkafka's, and transaction version
    // 2 against 1 (Courier on both, the same broker).
    let ratio_rows = |a: &str, b: &str| -> Vec<String> {
        seen.iter()
            .filter_map(|w| {
                let (x, y) = (find(w, a)?, find(w, b)?);
                Some(format!(
                    "| {} | {:.2} | {:.2} | {:.2} |\n",
                    w.split(':').next().unwrap_or(w),
                    x.rate.0 / y.rate.0,
                    x.cpu_us.0 / y.cpu_us.0,
                    x.rss_mib.0 / y.rss_mib.0
                ))
            })
            .collect()
    };
    for (a, b, heading) in [
        (
            "courier-txn",
            "rdkafka-txn",
            "Transactions: courier-txn ÷ rdkafka-txn",
        ),
        (
            "courier-txn",
            "courier-txn-v1",
            "Transaction version 2 ÷ version 1: courier-txn ÷ courier-txn-v1",
        ),
    ] {
        let rows = ratio_rows(a, b);
        if rows.is_empty() {
            continue;
        }
        md.push_str(&format!(
            "\n## {heading} (median / median)\n\n| workload | msgs/s | CPU | RSS |\n|---|---|---|---|\n"
        ));
        for row in rows {
            md.push_str(&row);
        }
    }
    if !latency.is_empty() {
        md.push_str(&format!(
            "\n## Delivery latency, open loop\n\n\
            Each client produces at the offered rate shown (half of its own median throughput in the `{LINGER5}` workload, \
            unless `--latency-rate` set one rate for all), with `linger.ms=5`, \
            for {LATENCY_SECONDS} s; a record's latency runs from when it was due to its delivery report. µs; medians of the runs' percentiles, with min–max.\n\n\
            | client | offered msgs/s | records | p50 µs | p99 µs | p99.9 µs | lost |\n|---|---|---|---|---|---|---|\n"
        ));
        for l in latency {
            md.push_str(&format!(
                "| {} | {:.0} | {} | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {} |\n",
                l.client, l.rate, l.records, l.p50.0, l.p50.1, l.p50.2, l.p99.0, l.p99.1, l.p99.2, l.p999.0, l.p999.1, l.p999.2, l.lost
            ));
        }
        let of = |c: &str| latency.iter().find(|l| l.client == c);
        if let (Some(cs), Some(rb)) = (of("courier-stream"), of("rdkafka-base")) {
            md.push_str(&format!(
                "\ncourier-stream ÷ rdkafka-base: p50 {:.2}, p99 {:.2}, p99.9 {:.2} (goal: p50 and p99 ≤ 1).\n",
                cs.p50.0 / rb.p50.0,
                cs.p99.0 / rb.p99.0,
                cs.p999.0 / rb.p999.0
            ));
        }
    }
    let (md_name, svg_name) = match out {
        Some(name) => (format!("{name}.md"), format!("{name}.svg")),
        None => ("results.md".to_string(), "throughput.svg".to_string()),
    };
    let md = common::with_history(&dir.join(&md_name), md);
    std::fs::write(dir.join(&md_name), &md).unwrap();
    std::fs::write(dir.join(&svg_name), svg(table)).unwrap();
    println!("{md}");
    eprintln!("wrote docs/benchmarks/{md_name} and {svg_name}");
}

/// The record size a workload name states.
fn workload_size(name: &str) -> usize {
    name.split(" B,")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A bar chart (plotters) of median throughput, a bar per client, grouped
/// by workload, top to bottom in the table's order.
fn svg(table: &[(String, String, Stats)]) -> String {
    use plotters::prelude::*;
    // Rows from the top: a workload's heading (no bar), then its clients.
    let mut rows: Vec<(String, Option<(&str, f64)>)> = Vec::new();
    let mut current = "";
    for (w, c, s) in table {
        if w != current {
            current = w;
            rows.push((w.split(':').next().unwrap_or(w).to_string(), None));
        }
        rows.push((c.clone(), Some((c.as_str(), s.rate.0))));
    }
    let n = rows.len().max(1) as u32;
    let max = table.iter().map(|(_, _, s)| s.rate.0).fold(1.0, f64::max);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 90 + 16 * n)).into_drawing_area();
        root.fill(&WHITE).unwrap();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Median throughput, every report consumed (Courier blue, rdkafka orange)",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(190)
            .build_cartesian_2d(0.0..max * 1.2, (0..n).into_segmented())
            .unwrap();
        let label = |v: &SegmentValue<u32>| match v {
            // The range's end is a key point too: no row there.
            SegmentValue::CenterOf(i) if *i < n => {
                rows.get((n - 1 - i) as usize)
                    .map_or(String::new(), |(l, bar)| {
                        if bar.is_some() {
                            l.clone()
                        } else {
                            format!("[{l}]")
                        }
                    })
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n as usize)
            .y_label_formatter(&label)
            .x_desc("records/s")
            .x_label_formatter(&|v| format!("{:.0}k", v / 1e3))
            .draw()
            .unwrap();
        let courier = RGBColor(0x2b, 0x6c, 0xb0);
        let rdkafka = RGBColor(0xc0, 0x56, 0x21);
        for (k, (_, bar)) in rows.iter().enumerate() {
            let Some((client, rate)) = bar else { continue };
            let row = n - 1 - k as u32;
            let color = if client.starts_with("courier") {
                courier
            } else if client.starts_with("rdkafka") {
                rdkafka
            } else {
                RGBColor(0x71, 0x80, 0x96)
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(row)),
                    (*rate, SegmentValue::Exact(row + 1)),
                ],
                color.filled(),
            );
            bar.set_margin(2, 2, 0, 0);
            chart.draw_series([bar]).unwrap();
            chart
                .draw_series([Text::new(
                    format!("{rate:.0}"),
                    (*rate + max * 0.01, SegmentValue::Exact(row + 1)),
                    ("sans-serif", 11),
                )])
                .unwrap();
        }
        root.present().unwrap();
    }
    out
}

/// Runs one client in a child process ([`common::run_child_fields`]: its
/// CPU time from wait4). `rate` > 0 makes it an open-loop latency run at
/// that many records a second.
fn run_child(target: &Target, topic: &str, client: &str, w: &Workload, rate: f64) -> Sample {
    let settings: Vec<String> = target
        .settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("BENCH_SETTINGS", settings.join("\n"))
        .env("BENCH_TXN", w.txn.to_string())
        .env("BENCH_DEFAULTS", if w.defaults { "1" } else { "0" })
        .env("BENCH_PARTITIONS", w.partitions.to_string())
        .env(
            "BENCH_CEILING_LEADERS",
            if client == "wire-ceiling" {
                target.leaders(topic)
            } else {
                String::new()
            },
        )
        .args(["--child", client, &target.connect, topic])
        .args([
            w.records.to_string(),
            w.size.to_string(),
            w.linger_ms.to_string(),
        ])
        .args([w.acks, w.compression, w.keys.name()])
        .arg(rate.to_string());
    // The child's stderr shows as it runs; a failure stops the bench.
    let (done, [wall, delivered, max_rss_kib, p50, p99, p999]) =
        common::run_child_fields(cmd, common::ChildStderr::Shown)
            .unwrap_or_else(|failed| panic!("{client} failed: {}", failed.done.out));
    Sample {
        wall: if wall > 0.0 { wall } else { done.wall },
        cpu: done.cpu,
        max_rss_kib: max_rss_kib as i64,
        delivered: delivered as usize,
        verified: None,
        batch_fill: None,
        broker_cpu: 0.0,
        latency_us: [p50, p99, p999],
    }
}

/// What a child runs.
struct Job {
    client: String,
    addr: String,
    topic: String,
    n: usize,
    size: usize,
    linger: String,
    acks: String,
    compression: String,
    keys: Keys,
    /// Records a second for an open-loop run; 0 for closed loop.
    rate: f64,
    /// Settings both clients take by the same (librdkafka) names: how to
    /// reach a TLS listener. From `BENCH_SETTINGS`, `name=value` lines.
    settings: Vec<(String, String)>,
    /// Records per transaction (`BENCH_TXN`); 0: not transactional.
    txn: usize,
}

/// What a child measured.
struct Outcome {
    wall: f64,
    delivered: usize,
    /// Open loop: each delivered record's latency in µs.
    latencies: Vec<u64>,
}

/// The instant every child measures from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// An open-loop record's value: when it was due, then padding.
fn due_value(due: Instant, size: usize) -> Vec<u8> {
    let mut v = vec![b'x'; size.max(8)];
    v[..8].copy_from_slice(&(due - epoch()).as_nanos().to_le_bytes()[..8]);
    v
}

/// Microseconds from a record's due instant (read from its value) to now.
fn latency_of(value: Option<&[u8]>) -> Option<u64> {
    let v = value?.get(..8)?;
    let due = u64::from_le_bytes(v.try_into().ok()?);
    let now = (Instant::now() - epoch()).as_nanos() as u64;
    Some(now.saturating_sub(due) / 1000)
}

/// Waits until `at`: sleeping while it is more than 2 ms away (tokio's
/// timer has 1 ms ticks), then spinning, so records go out on time rather
/// than in bursts at the next tick (rdkafka-base's loop polls with a zero
/// timeout for the last millisecond, which spins the same way).
async fn pace(at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at {
            return;
        }
        if at - now > Duration::from_millis(2) {
            tokio::time::sleep_until((at - Duration::from_millis(1)).into()).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// When record `i` of an open-loop run is due.
fn due(start: Instant, i: usize, rate: f64) -> Instant {
    start + Duration::from_secs_f64(i as f64 / rate)
}

/// Child: produce and consume every report; print
/// "wall_seconds delivered peak_rss_kib p50_us p99_us p999_us".
fn child(args: &[String]) {
    epoch();
    let job = Job {
        client: args[0].clone(),
        addr: args[1].clone(),
        topic: args[2].clone(),
        n: args[3].parse().unwrap(),
        size: args[4].parse().unwrap(),
        linger: args[5].clone(),
        acks: args[6].clone(),
        compression: args[7].clone(),
        keys: Keys::parse(&args[8]),
        rate: args.get(9).and_then(|r| r.parse().ok()).unwrap_or(0.0),
        settings: std::env::var("BENCH_SETTINGS")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        txn: std::env::var("BENCH_TXN")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let out = match (job.client.as_str(), job.rate > 0.0) {
        ("courier-cli", false) => perf_tool(&job, courier_perf_command(&job)),
        ("courier-cli-produce", false) => cli_produce(&job),
        ("java-perf", false) => perf_tool(&job, java_perf_command(&job)),
        (c, false) if c.starts_with("courier") => rt.block_on(courier_client(&job)),
        (c, true) if c.starts_with("courier") => rt.block_on(courier_open_loop(&job)),
        ("rdkafka-base", false) => rdkafka_base(&job),
        ("wire-ceiling", false) => wire_ceiling(&job),
        ("rdkafka-txn", false) => rdkafka_txn(&job),
        ("rdkafka-base", true) => rdkafka_base_open_loop(&job),
        ("rdkafka-future", false) => rt.block_on(rdkafka_future(&job)),
        ("rdkafka-future", true) => rt.block_on(rdkafka_future_open_loop(&job)),
        (other, _) => panic!("unknown client {other}"),
    };
    // Peak RSS of this process's own memory since exec, or its tool's.
    let hwm_kib =
        common::peak_rss_kib().max(HWM_OVERRIDE_KIB.load(std::sync::atomic::Ordering::Relaxed));
    let [p50, p99, p999] = common::percentiles(out.latencies, [0.5, 0.99, 0.999]);
    println!(
        "{} {} {hwm_kib} {p50} {p99} {p999}",
        out.wall, out.delivered
    );
}

/// `-X` properties for the `courier` tool: the job's linger, acks,
/// compression and listener settings, `BENCH_COURIER_EXTRA`, and the
/// bench's tuning unless this is a `--defaults` run.
fn courier_tool_props(job: &Job, cmd: &mut Command) {
    let mut props = vec![
        ("linger.ms".to_string(), job.linger.clone()),
        ("acks".to_string(), job.acks.clone()),
        ("compression.type".to_string(), job.compression.clone()),
    ];
    props.extend(job.settings.iter().cloned());
    props.extend(courier_extra());
    if !at_defaults() {
        props.push(("batch.size".into(), "1000000".into()));
        props.push(("buffer.memory".into(), "8388608".into()));
    }
    for (k, v) in props {
        cmd.args(["-X", &format!("{k}={v}")]);
    }
}

/// `courier perf` for the job.
fn courier_perf_command(job: &Job) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_courier-at-defaults"));
    c.args(["perf", "-q", "--json", "-b", &job.addr, "-t", &job.topic])
        .args(["--num-records", &job.n.to_string()])
        .args(["--record-size", &job.size.to_string()]);
    courier_tool_props(job, &mut c);
    c
}

/// `courier produce --reports errors` with the job's records as lines of
/// a file on stdin (written once per size and count, outside the timing);
/// every line it prints is a failure (and makes it exit 1).
fn cli_produce(job: &Job) -> Outcome {
    let path = std::env::temp_dir().join(format!("courier-bench-lines-{}x{}", job.n, job.size));
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some((job.n * (job.size + 1)) as u64) {
        let mut line = vec![b'x'; job.size];
        line.push(b'\n');
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for _ in 0..job.n {
            w.write_all(&line).unwrap();
        }
        w.flush().unwrap();
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_courier-at-defaults"));
    c.args(["produce", "-q", "--reports", "errors"])
        .args(["-b", &job.addr, "-t", &job.topic]);
    courier_tool_props(job, &mut c);
    c.stdin(std::fs::File::open(&path).unwrap());
    let (out, wall) = run_tool(job, c, &[0, 1]);
    let failed = out.lines().count();
    Outcome {
        wall,
        delivered: job.n - failed.min(job.n),
        latencies: Vec::new(),
    }
}

/// Runs a tool as this child's own child: its stdout, and the wall time
/// from its start to its exit. The CPU of both is in the bench's `wait4`
/// (a waited-for grandchild's time is added to its parent's), and the
/// tool's peak RSS is its `ru_maxrss` (this small process's peak, carried
/// across the exec, is far below it), reported instead of this
/// process's own. An exit status outside `ok` fails the run.
fn run_tool(job: &Job, mut cmd: Command, ok: &[i32]) -> (String, f64) {
    cmd.stderr(Stdio::null());
    let done = common::run_child(cmd);
    assert!(done.exited_with(ok), "{} failed: {}", job.client, done.out);
    HWM_OVERRIDE_KIB.store(done.max_rss_kib, std::sync::atomic::Ordering::Relaxed);
    (done.out, done.wall)
}

/// The Java client's `ProducerPerformance` for the job, at the Java
/// client's defaults, with a bounded heap.
fn java_perf_command(job: &Job) -> Command {
    let libs = common::support::kafka::libs_dir();
    let libs = libs.display();
    let mut c = Command::new("java");
    c.args(["-Xms64m", "-Xmx512m", "-cp", &format!("{libs}/*")])
        .arg("org.apache.kafka.tools.ProducerPerformance")
        .args(["--topic", &job.topic])
        .args(["--num-records", &job.n.to_string()])
        .args(["--record-size", &job.size.to_string()])
        .args(["--throughput", "-1", "--producer-props"])
        .arg(format!("bootstrap.servers={}", job.addr))
        .arg(format!("linger.ms={}", job.linger))
        .arg(format!("acks={}", job.acks))
        .arg(format!("compression.type={}", job.compression));
    c
}

/// Runs a perf tool ([`run_tool`]) and reads its result. Both tools
/// print their rate; `courier perf --json` also its count of delivered
/// records, ProducerPerformance only errors (its lost records show in the
/// first run's read-back).
fn perf_tool(job: &Job, cmd: Command) -> Outcome {
    let (out, _) = run_tool(job, cmd, &[0]);
    let number_after = |text: &str, key: &str| -> f64 {
        text.split(key)
            .nth(1)
            .and_then(|rest| {
                rest.trim_start_matches([':', ' ', '"'])
                    .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .next()
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or_else(|| panic!("{}: no {key} in {out}", job.client))
    };
    if job.client == "courier-cli" {
        Outcome {
            wall: number_after(&out, "\"elapsed_s\""),
            delivered: number_after(&out, "\"delivered\"") as usize,
            latencies: Vec::new(),
        }
    } else {
        // "N records sent, R records/sec (…)": the last such line.
        let line = out
            .lines()
            .rev()
            .find(|l| l.contains("records/sec") && l.contains("avg latency"))
            .unwrap_or_else(|| panic!("{}: no summary in {out}", job.client));
        let sent: f64 = line.split_whitespace().next().unwrap().parse().unwrap();
        let rate: f64 = line
            .split(", ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Outcome {
            wall: sent / rate,
            delivered: sent as usize,
            latencies: Vec::new(),
        }
    }
}

/// Settings for Courier's clients only, for experiments
/// (`BENCH_COURIER_EXTRA="batch.size=262144 linger.ms=5"`; in a
/// `--defaults` run too).
fn courier_extra() -> Vec<(String, String)> {
    std::env::var("BENCH_COURIER_EXTRA")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A subscription: the library's default bound on unread reports in a
/// `--defaults` run, else room for every record of a run.
fn subscribe(
    producer: &courier_kafka::Producer,
    mode: courier_kafka::ReportMode,
) -> (courier_kafka::Subscriber, courier_kafka::ReportStream) {
    if at_defaults() {
        producer.subscribe(mode)
    } else {
        producer.subscribe_with_capacity(mode, 1_000_000)
    }
}

/// A perf tool's peak RSS (KiB), reported instead of this process's own.
static HWM_OVERRIDE_KIB: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn courier_producer(job: &Job) -> courier_kafka::Producer {
    let mut builder = courier_kafka::Producer::builder();
    for (k, v) in &job.settings {
        builder = builder.set(k, v);
    }
    if job.txn > 0 {
        builder = builder.set("transactional.id", &format!("bench-{}", std::process::id()));
    }
    builder = builder
        .bootstrap(&job.addr)
        .set("linger.ms", &job.linger)
        .set("acks", &job.acks)
        .set("compression.type", &job.compression);
    for (k, v) in courier_extra() {
        builder = builder.set(&k, &v);
    }
    if job.client.ends_with("-uniform") {
        // `--slow-broker`: KIP-794's partitioner without its adaptive
        // choice (each move uniform among the partitions).
        builder = builder.set("partitioner.adaptive.partitioning.enable", "false");
    }
    if at_defaults() {
        return builder.build().unwrap();
    }
    builder
        // librdkafka's batch.size default.
        .set("batch.size", "1000000")
        // 8 MiB: Courier outruns the broker here, so buffer.memory is what
        // sets its peak RSS (batches, plus the owed-report entries of their
        // records); more buffer buys no throughput on this machine. The
        // one-future-per-record client gets 256 MiB instead: it creates all
        // its futures up front, and a future waiting for buffer room holds
        // its record and a timer, which costs more memory than a buffered
        // record does (as rdkafka's FutureProducer gets a 1 GiB queue).
        // BENCH_BUFFER_MEMORY overrides both for experiments.
        .set(
            "buffer.memory",
            &std::env::var("BENCH_BUFFER_MEMORY").unwrap_or_else(|_| {
                if job.client == "courier-send" {
                    "268435456".into()
                } else {
                    "8388608".into()
                }
            }),
        )
        .build()
        .unwrap()
}

async fn courier_client(job: &Job) -> Outcome {
    use courier_kafka::{DeliveryReport, Record, ReportMode, Topic};
    use futures::StreamExt;
    let producer = courier_producer(job);
    let n = job.n;
    let topic = Topic::from(job.topic.as_str());
    // Every record carries the same value, shared without a copy (the
    // zero-copy end of Courier's `Bytes` API, as rdkafka's clients pass a
    // borrowed slice that librdkafka copies). A `'static` value: cloning
    // and dropping it touch no reference count, so two threads do not
    // contend over one counter a million times.
    let value = bytes::Bytes::from_static(Box::leak(vec![b'x'; job.size].into_boxed_slice()));
    let keys = job.keys;
    let record = |i: usize| Record {
        topic,
        partition: None,
        key: keys
            .key(i, &mut [0; 8])
            .map(|k| bytes::Bytes::copy_from_slice(k.as_bytes())),
        value: Some(value.clone()),
        headers: Vec::new(),
        timestamp: None,
        opaque: 0,
    };
    // Metadata first, outside the timing, as rdkafka's clients also fetch
    // it before producing (in a transaction of its own when transactional).
    if job.txn > 0 {
        producer.init_transactions().await.unwrap();
        producer.begin_transaction().unwrap();
    }
    let _ = producer.send(Record::to(topic).value("warm")).await;
    if job.txn > 0 {
        producer.commit_transaction().await.unwrap();
    }
    let start = Instant::now();
    let delivered = match job.client.as_str() {
        "courier-stream" | "courier-errors-only" => {
            let mode = if job.client == "courier-stream" {
                ReportMode::All
            } else {
                ReportMode::ErrorsOnly
            };
            let (sub, mut stream) = subscribe(&producer, mode);
            let reader = tokio::spawn(async move {
                let (mut ok, mut failed) = (0usize, 0usize);
                while let Some(r) = stream.next().await {
                    match r {
                        DeliveryReport::Delivered(_) => ok += 1,
                        DeliveryReport::Failed(_) => failed += 1,
                    }
                }
                (ok, failed)
            });
            for i in 0..n {
                sub.produce(record(i)).await.unwrap();
            }
            drop(sub);
            producer.flush().await;
            let (ok, failed) = reader.await.unwrap();
            if mode == ReportMode::All {
                ok
            } else {
                n - failed
            }
        }
        "courier-txn" | "courier-txn-v1" => {
            // The protocol the broker was set to for this client's run.
            assert_eq!(
                producer.stats().transaction_version,
                Some(transaction_version_for(&job.client) as u8),
                "{}: the transaction protocol in use",
                job.client
            );
            // As courier-stream, with a commit every `job.txn` records
            // (each commit flushes and waits for the coordinator).
            let (sub, mut stream) = subscribe(&producer, ReportMode::All);
            let reader = tokio::spawn(async move {
                let mut ok = 0usize;
                while let Some(r) = stream.next().await {
                    ok += usize::from(r.is_delivered());
                }
                ok
            });
            for chunk in (0..n).collect::<Vec<_>>().chunks(job.txn) {
                producer.begin_transaction().unwrap();
                for &i in chunk {
                    sub.produce(record(i)).await.unwrap();
                }
                producer.commit_transaction().await.unwrap();
            }
            drop(sub);
            reader.await.unwrap()
        }
        "courier-stream-batch" => {
            // The batch APIs: records handed over 1,000 at a time, reports
            // read a batch at a time. Every report is still consumed.
            let (sub, mut stream) = subscribe(&producer, ReportMode::All);
            let reader = tokio::spawn(async move {
                let mut ok = 0usize;
                while let Some(batch) = stream.next_batch().await {
                    for r in batch {
                        if r.is_delivered() {
                            ok += 1;
                        }
                    }
                }
                ok
            });
            let mut i = 0;
            while i < n {
                let end = (i + 1000).min(n);
                sub.produce_batch((i..end).map(record).collect())
                    .await
                    .unwrap();
                i = end;
            }
            drop(sub);
            producer.flush().await;
            reader.await.unwrap()
        }
        "courier-no-reports" => {
            for i in 0..n {
                producer.produce(record(i)).await.unwrap();
            }
            producer.flush().await;
            let s = producer.stats();
            (s.delivered - 1) as usize
        }
        "courier-send" => {
            let futs: futures::stream::FuturesUnordered<_> =
                (0..n).map(|i| producer.send(record(i))).collect();
            futs.filter(|r| futures::future::ready(r.is_ok()))
                .count()
                .await
        }
        other => panic!("{other}"),
    };
    let wall = start.elapsed().as_secs_f64();
    producer.close().await;
    Outcome {
        wall,
        delivered,
        latencies: Vec::new(),
    }
}

/// Courier at a fixed rate: `courier-stream` (a subscription) or
/// `courier-send` (a task per `send`).
async fn courier_open_loop(job: &Job) -> Outcome {
    use courier_kafka::{Record, ReportMode, Topic};
    use futures::StreamExt;
    let producer = courier_producer(job);
    let topic = Topic::from(job.topic.as_str());
    let _ = producer.send(Record::to(topic).value("warm")).await;
    let start = Instant::now();
    // The due instant rides in the value (for rdkafka's reports, which
    // hand the payload back) and in the tag (Courier's success reports
    // carry the tag, as an application matches reports to its context).
    let record = |i: usize| {
        let value = due_value(due(start, i, job.rate), job.size);
        let tag = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
        Record::to(topic).value(value).opaque(tag)
    };
    let pace = |i: usize| pace(due(start, i, job.rate));
    let latencies = match job.client.as_str() {
        "courier-stream" | "courier-stream-uniform" => {
            let (sub, mut stream) = subscribe(&producer, ReportMode::All);
            let reader = tokio::spawn(async move {
                let mut lat = Vec::new();
                while let Some(r) = stream.next().await {
                    if let Ok(d) = r.into_result() {
                        lat.extend(latency_of(Some(&d.opaque.to_le_bytes())));
                    }
                }
                lat
            });
            for i in 0..job.n {
                pace(i).await;
                sub.produce(record(i)).await.unwrap();
            }
            drop(sub);
            reader.await.unwrap()
        }
        "courier-send" => {
            let mut tasks = Vec::with_capacity(job.n);
            for i in 0..job.n {
                pace(i).await;
                let p = producer.clone();
                let r = record(i);
                tasks.push(tokio::spawn(async move {
                    p.send(r)
                        .await
                        .ok()
                        .and_then(|d| latency_of(Some(&d.opaque.to_le_bytes())))
                }));
            }
            let mut lat = Vec::with_capacity(job.n);
            for t in tasks {
                lat.extend(t.await.unwrap());
            }
            lat
        }
        other => panic!("no open-loop mode for {other}"),
    };
    let wall = start.elapsed().as_secs_f64();
    producer.close().await;
    Outcome {
        wall,
        delivered: latencies.len(),
        latencies,
    }
}

fn rdkafka_config(job: &Job) -> rdkafka::ClientConfig {
    let mut c = rdkafka::ClientConfig::new();
    for (k, v) in &job.settings {
        c.set(k, v);
    }
    c.set("bootstrap.servers", &job.addr)
        .set("linger.ms", &job.linger)
        .set("acks", &job.acks)
        .set("compression.type", &job.compression)
        .set("partitioner", "murmur2_random");
    if !at_defaults() {
        c.set("queue.buffering.max.messages", "2000000")
            .set("queue.buffering.max.kbytes", "1048576");
    }
    c
}

/// The rdkafka delivery callback's state: a count of successes, and in
/// open-loop runs each one's latency.
struct Count {
    ok: std::sync::atomic::AtomicUsize,
    latencies: Option<std::sync::Mutex<Vec<u64>>>,
}

impl rdkafka::ClientContext for Count {}

impl rdkafka::producer::ProducerContext for Count {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        use rdkafka::message::Message;
        if let Ok(m) = r {
            self.ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(l) = &self.latencies {
                l.lock().unwrap().extend(latency_of(m.payload()));
            }
        }
    }
}

fn base_producer(job: &Job, latencies: bool) -> rdkafka::producer::BaseProducer<Count> {
    use rdkafka::producer::Producer;
    let p: rdkafka::producer::BaseProducer<Count> = rdkafka_config(job)
        .create_with_context(Count {
            ok: Default::default(),
            latencies: latencies.then(Default::default),
        })
        .unwrap();
    let _ = p
        .client()
        .fetch_metadata(Some(&job.topic), Duration::from_secs(10));
    p
}

/// Sends one record, polling (which serves delivery callbacks) while the
/// queue is full.
fn base_send(
    p: &rdkafka::producer::BaseProducer<Count>,
    topic: &str,
    key: Option<&str>,
    payload: &[u8],
) {
    let mut rec = rdkafka::producer::BaseRecord::to(topic).payload(payload);
    if let Some(k) = key {
        rec = rec.key(k);
    }
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((_, back)) => {
                p.poll(Duration::from_millis(1));
                rec = back;
            }
        }
    }
}

fn rdkafka_base(job: &Job) -> Outcome {
    use rdkafka::producer::Producer;
    let p = base_producer(job, false);
    let payload = vec![b'x'; job.size];
    let start = Instant::now();
    for i in 0..job.n {
        base_send(&p, &job.topic, job.keys.key(i, &mut [0; 8]), &payload);
        if i % 1000 == 0 {
            p.poll(Duration::ZERO);
        }
    }
    p.flush(Duration::from_secs(120)).unwrap();
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered: p.context().ok.load(std::sync::atomic::Ordering::Relaxed),
        latencies: Vec::new(),
    }
}

/// Records per Produce request in `wire_ceiling`'s requests: each
/// partition's batch takes an equal share of 1 MiB, Courier's (and the Java
/// client's) default `max.request.size`.
fn ceiling_batch_records(size: usize, partitions: i32) -> usize {
    // A probe's other request size: `BENCH_CEILING_REQUEST_BYTES`.
    let request = std::env::var("BENCH_CEILING_REQUEST_BYTES")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1 << 20);
    let share = request / partitions.max(1) as usize;
    let mut probe = courier_kafka::protocol::record_batch::BatchBuilder::new(
        share,
        courier_kafka::Compression::None,
    );
    let payload = vec![b'x'; size];
    while probe.try_append(0, None, Some(&payload), &[]).is_ok() {}
    probe.record_count() as usize
}

/// Not a client: the most one connection a broker moves, the bound of
/// any client that sends each broker its requests on one connection, as
/// Courier, librdkafka and the Java client do. Every Produce request is
/// encoded before the clock starts (keyless records of `job.size` bytes,
/// each partition's batch an equal share of 1 MiB, no producer id: the
/// broker checks no sequence), then written back to back with up to 5
/// unanswered (`max.in.flight.requests.per.connection`'s default), each
/// answer checked for errors. Plaintext. On a cluster
/// (`BENCH_CEILING_LEADERS`, `host:port=p,p;…`: each leader's partitions)
/// one connection a leader, each on a thread of its own, the records
/// dealt out by partitions; else the bootstrap address leads every
/// partition. The run lasts until the last connection is done.
fn wire_ceiling(job: &Job) -> Outcome {
    assert!(job.settings.is_empty(), "wire-ceiling is plaintext only");
    assert!(
        job.keys == Keys::None,
        "wire-ceiling writes keyless records"
    );
    assert_eq!(
        job.compression, "none",
        "wire-ceiling writes uncompressed batches"
    );
    let acks: i16 = match job.acks.as_str() {
        "all" | "-1" => -1,
        a => a.parse().unwrap(),
    };
    // With acks=0 the broker answers nothing: there would be nothing to count.
    assert!(acks != 0, "wire-ceiling needs acks 1 or all");
    let partitions: i32 = std::env::var("BENCH_PARTITIONS")
        .ok()
        .and_then(|p| p.parse().ok())
        .expect("BENCH_PARTITIONS");
    let leaders: Vec<(String, Vec<i32>)> = match std::env::var("BENCH_CEILING_LEADERS") {
        Ok(map) if !map.is_empty() => map
            .split(';')
            .map(|l| {
                let (addr, ps) = l.split_once('=').expect("host:port=p,p");
                (
                    addr.to_string(),
                    ps.split(',').map(|p| p.parse().unwrap()).collect(),
                )
            })
            .collect(),
        _ => vec![(job.addr.clone(), (0..partitions).collect())],
    };
    assert_eq!(
        leaders.iter().map(|(_, ps)| ps.len()).sum::<usize>(),
        partitions as usize,
        "every partition has one leader"
    );
    // Each leader's share of the records, by its partitions.
    let mut left = job.n;
    let mut connections = Vec::new();
    for (i, (addr, ps)) in leaders.iter().enumerate() {
        let share = if i + 1 == leaders.len() {
            left
        } else {
            job.n * ps.len() / partitions as usize
        };
        left -= share;
        connections.push(CeilingConnection::prepare(job, addr, ps, share, acks));
    }
    let start = std::sync::Barrier::new(connections.len() + 1);
    let (wall, delivered) = std::thread::scope(|scope| {
        let runs: Vec<_> = connections
            .into_iter()
            .map(|c| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    c.run()
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let delivered: usize = runs.into_iter().map(|r| r.join().unwrap()).sum();
        (t0.elapsed().as_secs_f64(), delivered)
    });
    Outcome {
        wall,
        delivered,
        latencies: Vec::new(),
    }
}

/// One `wire-ceiling` connection: its requests, encoded.
struct CeilingConnection {
    conn: std::net::TcpStream,
    version: i16,
    /// Each request's frame in one buffer (one write, as Courier's one
    /// `writev`), its record count, its partition count.
    requests: Vec<(Vec<u8>, usize, usize)>,
}

impl CeilingConnection {
    fn read_frame(&mut self) -> bytes::Bytes {
        use std::io::Read;
        let mut len = [0u8; 4];
        self.conn.read_exact(&mut len).unwrap();
        let len = u32::from_be_bytes(len) as usize;
        assert!(len <= 64 << 20, "a {len}-byte answer frame");
        let mut body = vec![0u8; len];
        self.conn.read_exact(&mut body).unwrap();
        body.into()
    }

    /// Connects to `addr`, agrees versions, and encodes `records` of the
    /// job's records dealt out over `partitions` (each batch an equal
    /// share of a 1 MiB request).
    fn prepare(job: &Job, addr: &str, partitions: &[i32], records: usize, acks: i16) -> Self {
        use courier_kafka::protocol::message::{decode_response, encode_request};
        use courier_kafka::protocol::messages::ApiVersionsRequest;
        use courier_kafka::protocol::produce::{
            encode, PartitionData, ProduceFrame, ProduceHeader, TopicData,
        };
        use courier_kafka::protocol::record_batch::{BatchBuilder, ProducerStamp};

        let conn = std::net::TcpStream::connect(addr).unwrap();
        conn.set_nodelay(true).unwrap();
        let mut me = CeilingConnection {
            conn,
            version: 0,
            requests: Vec::new(),
        };
        let mut buf = bytes::BytesMut::new();
        encode_request(&mut buf, 0, None, 0, &ApiVersionsRequest::default()).unwrap();
        me.conn.write_all(&buf).unwrap();
        let frame = me.read_frame();
        let (_, versions) = decode_response::<ApiVersionsRequest>(frame, 0).unwrap();
        me.version = courier_kafka::protocol::versions::negotiate(&versions)
            .unwrap()
            .produce;
        let payload = vec![b'x'; job.size];
        let per_batch = ceiling_batch_records(job.size, partitions.len() as i32);
        // CreateTime now, as a client's records carry: a timestamp of 0
        // would be past Kafka's time-based retention, which may delete the
        // segment before the log is read back.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let batch = |records: usize| {
            let mut b = BatchBuilder::new(usize::MAX, courier_kafka::Compression::None);
            for _ in 0..records {
                b.try_append(now_ms, None, Some(&payload), &[]).unwrap();
            }
            b.finish(ProducerStamp {
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                transactional: false,
            })
            .unwrap()
            .bytes()
            .clone()
        };
        // Each request: a batch per partition, records dealt out in order.
        let mut left = records;
        while left > 0 {
            let mut batches = Vec::new();
            for &p in partitions {
                let take = per_batch.min(left);
                if take == 0 {
                    break;
                }
                batches.push((p, batch(take), take));
                left -= take;
            }
            let topics = [TopicData {
                name: &job.topic,
                partitions: batches
                    .iter()
                    .map(|(p, records, _)| PartitionData {
                        partition: *p,
                        records,
                    })
                    .collect(),
            }];
            let header = ProduceHeader {
                version: me.version,
                correlation_id: me.requests.len() as i32 + 1,
                client_id: Some("wire-ceiling"),
                acks,
                timeout_ms: 30_000,
                transactional_id: None,
            };
            let frame: ProduceFrame = encode(&header, &topics).unwrap();
            me.requests.push((
                frame.parts.concat(),
                batches.iter().map(|b| b.2).sum(),
                batches.len(),
            ));
        }
        me
    }

    /// Writes every request, at most 5 unanswered; returns the records
    /// the broker took.
    fn run(mut self) -> usize {
        use courier_kafka::protocol::message::decode_response;
        use courier_kafka::protocol::messages::ProduceRequest;
        let (mut sent, mut answered, mut delivered) = (0, 0, 0);
        while answered < self.requests.len() {
            while sent < self.requests.len() && sent - answered < 5 {
                self.conn.write_all(&self.requests[sent].0).unwrap();
                sent += 1;
            }
            let frame = self.read_frame();
            let (correlation, resp) =
                decode_response::<ProduceRequest>(frame, self.version).unwrap();
            assert_eq!(correlation, answered as i32 + 1, "answers come in order");
            let answered_partitions: usize = resp
                .responses
                .iter()
                .map(|t| t.partition_responses.len())
                .sum();
            assert_eq!(
                answered_partitions, self.requests[answered].2,
                "an answer for every partition sent"
            );
            for t in &resp.responses {
                for p in &t.partition_responses {
                    assert_eq!(
                        p.error_code, 0,
                        "partition {}: error {}",
                        p.index, p.error_code
                    );
                }
            }
            delivered += self.requests[answered].1;
            answered += 1;
        }
        delivered
    }
}

/// A transactional `BaseProducer`: a commit (which flushes) every
/// `job.txn` records.
fn rdkafka_txn(job: &Job) -> Outcome {
    use rdkafka::producer::Producer;
    let p: rdkafka::producer::BaseProducer<Count> = rdkafka_config(job)
        .set("transactional.id", format!("bench-{}", std::process::id()))
        .create_with_context(Count {
            ok: Default::default(),
            latencies: None,
        })
        .unwrap();
    let t = Duration::from_secs(60);
    p.init_transactions(t).unwrap();
    let _ = p.client().fetch_metadata(Some(&job.topic), t);
    let payload = vec![b'x'; job.size];
    let start = Instant::now();
    let mut i = 0;
    while i < job.n {
        p.begin_transaction().unwrap();
        let end = (i + job.txn).min(job.n);
        for j in i..end {
            base_send(&p, &job.topic, job.keys.key(j, &mut [0; 8]), &payload);
            if j % 1000 == 0 {
                p.poll(Duration::ZERO);
            }
        }
        p.commit_transaction(t).unwrap();
        i = end;
    }
    p.flush(t).unwrap();
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered: p.context().ok.load(std::sync::atomic::Ordering::Relaxed),
        latencies: Vec::new(),
    }
}

fn rdkafka_base_open_loop(job: &Job) -> Outcome {
    use rdkafka::producer::Producer;
    let p = base_producer(job, true);
    let start = Instant::now();
    for i in 0..job.n {
        let at = due(start, i, job.rate);
        // Wait for the due instant in polls, so reports are served while
        // waiting, as a real application's poll loop would.
        loop {
            let now = Instant::now();
            if now >= at {
                break;
            }
            p.poll((at - now).min(Duration::from_millis(1)));
        }
        base_send(&p, &job.topic, None, &due_value(at, job.size));
        if i % 100 == 0 {
            p.poll(Duration::ZERO);
        }
    }
    p.flush(Duration::from_secs(120)).unwrap();
    let wall = start.elapsed().as_secs_f64();
    let latencies = std::mem::take(&mut *p.context().latencies.as_ref().unwrap().lock().unwrap());
    Outcome {
        wall,
        delivered: latencies.len(),
        latencies,
    }
}

/// A `FutureProducer` with the topic's metadata already fetched.
fn future_producer(job: &Job) -> rdkafka::producer::FutureProducer {
    use rdkafka::producer::Producer;
    let p: rdkafka::producer::FutureProducer = rdkafka_config(job).create().unwrap();
    let _ = p
        .client()
        .fetch_metadata(Some(&job.topic), Duration::from_secs(10));
    p
}

async fn rdkafka_future(job: &Job) -> Outcome {
    use futures::StreamExt;
    use rdkafka::producer::FutureRecord;
    let p = future_producer(job);
    let payload = vec![b'x'; job.size];
    let start = Instant::now();
    let keys_v: Vec<Option<String>> = (0..job.n)
        .map(|i| job.keys.key(i, &mut [0; 8]).map(str::to_string))
        .collect();
    let futs: futures::stream::FuturesUnordered<_> = (0..job.n)
        .map(|i| {
            let mut rec = FutureRecord::<str, [u8]>::to(&job.topic).payload(&payload);
            if let Some(k) = &keys_v[i] {
                rec = rec.key(k.as_str());
            }
            p.send(rec, Duration::from_secs(120))
        })
        .collect();
    let ok = futs
        .filter(|r| futures::future::ready(r.is_ok()))
        .count()
        .await;
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered: ok,
        latencies: Vec::new(),
    }
}

/// A task per record awaiting its `DeliveryFuture`, at a fixed rate.
async fn rdkafka_future_open_loop(job: &Job) -> Outcome {
    use rdkafka::producer::FutureRecord;
    let p = future_producer(job);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(job.n);
    for i in 0..job.n {
        let at = due(start, i, job.rate);
        pace(at).await;
        let value = due_value(at, job.size);
        let mut rec = FutureRecord::<str, [u8]>::to(&job.topic).payload(&value);
        let delivery = loop {
            match p.send_result(rec) {
                Ok(d) => break d,
                Err((_, back)) => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    rec = back;
                }
            }
        };
        tasks.push(tokio::spawn(async move {
            match delivery.await {
                Ok(Ok(_)) => latency_of(Some(&value)),
                _ => None,
            }
        }));
    }
    let mut latencies = Vec::with_capacity(job.n);
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered: latencies.len(),
        latencies,
    }
}

/// Records in the topic, read back with the rdkafka consumer (the warm-up
/// record of Courier's clients excluded).
fn count_in_log(addr: &str, topic: &str, partitions: i32, expected: usize, courier: bool) -> usize {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "bench-verify")
        .set("log_level", "3")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let (mut n, mut warm) = (0, 0);
    let mut last = Instant::now();
    // Until every record (and, for Courier's clients, the warm-up record)
    // is in, or the log has been quiet for 3 s.
    let done = |n: usize, warm: usize| n > expected || (n == expected && (warm == 1 || !courier));
    while last.elapsed() < Duration::from_secs(3) && !done(n, warm) {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            last = Instant::now();
            if m.payload() == Some(b"warm".as_slice()) {
                warm += 1;
            } else {
                n += 1;
            }
        }
    }
    let _ = std::io::stderr().flush();
    n
}

/// The clients of `--slow-broker`: Courier with KIP-794's adaptive choice
/// (its default), without it, and librdkafka's `BaseProducer` (sticky
/// for `sticky.partitioning.linger.ms`, no adaptive choice).
const SLOW_BROKER_CLIENTS: &[&str] = &["courier-stream", "courier-stream-uniform", "rdkafka-base"];

/// `--slow-broker [--rate R] [--seconds S] [--runs N] [--delay-ms D]`:
/// issue 32's measurement of the adaptive partitioner. Three Apache Kafka
/// brokers; broker 3 behind a relay that holds every byte it sends back
/// `D` ms (default 50), so each of its answers comes that much later;
/// keyless records of 100 B at `R` a second (default 10,000) for `S`
/// seconds (default 10), open loop, to a topic of 6 partitions (two led
/// by each broker), each client in turn, `N` runs (default 5). Writes
/// `docs/benchmarks/slow-broker.md`: per client the rate it kept, p50 and
/// p99 latency (from the record's due instant to its report), and the
/// share of the records the slow broker took (from the partitions' end
/// offsets).
fn slow_broker(args: &common::Args) {
    let value = |name: &str, default: f64| {
        args.value(name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let rate = value("--rate", 10_000.0);
    let seconds = value("--seconds", 10.0);
    let runs = value("--runs", 5.0) as usize;
    let delay = Duration::from_millis(value("--delay-ms", 50.0) as u64);
    let partitions = 6;
    let kafka = common::support::kafka::KafkaCluster::shared(3);
    let slow = *kafka.broker_ids().last().expect("three brokers");
    let upstream: std::net::SocketAddr = kafka.address(slow).parse().expect("the broker's address");
    let port = common::support::free_port();
    start_delaying_relay(port, upstream, delay);
    kafka.readvertise(slow, port);
    kafka.wait_for_brokers();
    let target = Target::cluster(kafka);
    let w = Workload {
        name: "slow broker".into(),
        records: (rate * seconds) as usize,
        size: 100,
        partitions,
        linger_ms: 5,
        acks: "all",
        compression: "none",
        keys: Keys::None,
        on: On::Kafka,
        txn: 0,
        replication: 1,
        // Each client at its own defaults (Courier's batch.size,
        // 1,000,000 bytes, is a stay's length; librdkafka's sticky time
        // 10 ms).
        defaults: true,
    };
    eprintln!(
        "== slow broker: broker {slow} answers {delay:?} late; {rate:.0} records/s for {seconds} s"
    );
    let mut samples: BTreeMap<&str, Vec<(Sample, f64)>> = BTreeMap::new();
    // One untimed round first: the brokers' JIT warms up.
    for round in 0..=runs {
        for client in SLOW_BROKER_CLIENTS {
            // Two partitions led by each broker (a broker that has just
            // come back may get none: then the topic is made again).
            let (topic, leaders) = (0..20)
                .find_map(|attempt| {
                    let topic = format!("slow-broker-{client}-{round}-{attempt}");
                    target.create_topic(&topic, partitions);
                    let leaders = kafka.leaders(&topic);
                    let even = kafka
                        .broker_ids()
                        .iter()
                        .all(|b| leaders.iter().filter(|l| *l == b).count() == 2);
                    if even {
                        return Some((topic, leaders));
                    }
                    target.done_with(&topic);
                    std::thread::sleep(Duration::from_secs(1));
                    None
                })
                .expect("a topic with two partitions led by each broker");
            let s = run_child(&target, &topic, client, &w, rate);
            let ends = kafka.end_offsets(&topic, partitions);
            let on_slow: i64 = ends
                .iter()
                .zip(&leaders)
                .filter(|(_, l)| **l == slow)
                .map(|(e, _)| *e)
                .sum();
            let share = on_slow as f64 / ends.iter().sum::<i64>().max(1) as f64;
            target.done_with(&topic);
            eprintln!(
                "  {} {client:<23} {:>8.0} msg/s  p50 {:>7.0} µs  p99 {:>7.0} µs  slow broker {:>4.1} %  delivered {}/{}",
                if round == 0 { "warm-up".to_string() } else { format!("run {}", round - 1) },
                s.rate(w.records),
                s.latency_us[0],
                s.latency_us[1],
                share * 100.0,
                s.delivered,
                w.records
            );
            if round > 0 {
                samples.entry(client).or_default().push((s, share));
            }
        }
    }
    let mut md = format!(
        "# A slow broker: the adaptive partitioner\n\n\
         Run on {}: `{}` ({runs} alternating runs per client after one untimed round; medians, with min–max).\n\
         Machine: {} cores, {}; three Apache Kafka 4.1.1 brokers (KRaft, one controller among them, 512 MiB heap each, their data on tmpfs) on the same machine; \
         broker {slow} is reached through a relay that holds every byte it sends back {} ms, so each of its answers comes that much later. \
         The topic has {partitions} partitions, two led by each broker, replication 1. Each client produces {} keyless records of 100 B at {rate:.0} a second \
         (open loop: a record's latency runs from when it was due to its report), `linger.ms=5`, `acks=all`, and reads every report. \
         `courier-stream` is Courier at its defaults (KIP-794's partitioner, `partitioner.adaptive.partitioning.enable=true`), \
         `courier-stream-uniform` the same with it `false`, `rdkafka-base` a `BaseProducer` (librdkafka 2.12.1: sticky for `sticky.partitioning.linger.ms`, \
         10 ms, no adaptive choice); each client at its own defaults otherwise (Courier's `batch.size` is 1,000,000 bytes, so a stay takes that many; \
         the subscription's default bound of unread reports). \
         \"Slow broker\" is the share of the records written to the slow broker's partitions (their end offsets).\n\n\
         | client | msgs/s kept | p50 ms | p99 ms | slow broker's share | lost |\n|---|---|---|---|---|---|\n",
        common::today(),
        common::command_line("vs_rdkafka", &["--slow-broker"]),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        common::cpu_model(),
        delay.as_millis(),
        w.records,
    );
    let fmt = |(m, lo, hi): (f64, f64, f64), scale: f64, digits: usize| {
        format!(
            "{:.*} ({:.*}–{:.*})",
            digits,
            m / scale,
            digits,
            lo / scale,
            digits,
            hi / scale
        )
    };
    let mut p99s = BTreeMap::new();
    for (client, s) in &samples {
        let rates = med_min_max(s.iter().map(|(x, _)| x.rate(w.records)).collect());
        let p50 = med_min_max(s.iter().map(|(x, _)| x.latency_us[0]).collect());
        let p99 = med_min_max(s.iter().map(|(x, _)| x.latency_us[1]).collect());
        let share = med_min_max(s.iter().map(|(_, sh)| sh * 100.0).collect());
        let lost = s
            .iter()
            .map(|(x, _)| w.records.saturating_sub(x.delivered))
            .max()
            .unwrap_or(0);
        p99s.insert(*client, (rates.0, p99.0));
        md.push_str(&format!(
            "| {client} | {} | {} | {} | {} % | {lost} |\n",
            fmt(rates, 1.0, 0),
            fmt(p50, 1000.0, 1),
            fmt(p99, 1000.0, 1),
            fmt(share, 1.0, 1)
        ));
    }
    if let (Some(a), Some(u), Some(r)) = (
        p99s.get("courier-stream"),
        p99s.get("courier-stream-uniform"),
        p99s.get("rdkafka-base"),
    ) {
        md.push_str(&format!(
            "\nRatios of medians: p99 adaptive ÷ uniform {:.2}, adaptive ÷ rdkafka-base {:.2}; \
             rate kept adaptive ÷ rdkafka-base {:.2}.\n",
            a.1 / u.1,
            a.1 / r.1,
            a.0 / r.0
        ));
    }
    let path = common::support::repo_root().join("docs/benchmarks/slow-broker.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    // The current run first; earlier runs stay below, under "History".
    let history = old
        .split_once("\n## History\n")
        .map(|(current, rest)| {
            let current =
                current.replacen("# A slow broker: the adaptive partitioner\n\n", "### ", 1);
            format!("{current}\n{rest}")
        })
        .or_else(|| {
            (!old.is_empty())
                .then(|| old.replacen("# A slow broker: the adaptive partitioner\n\n", "### ", 1))
        })
        .unwrap_or_default();
    md.push_str("\n## History\n\n");
    md.push_str(&history);
    std::fs::write(&path, md).unwrap();
    println!("wrote {}", path.display());
}

/// A relay on 127.0.0.1:`port` to `upstream` that holds every chunk the
/// upstream sends back `delay` before passing it on (in order), on a
/// thread of its own for the rest of the process.
fn start_delaying_relay(port: u16, upstream: std::net::SocketAddr, delay: Duration) {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the relay");
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut cr, &mut sw).await;
                        let _ = sw.shutdown().await;
                    });
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
                    tokio::spawn(async move {
                        while let Some((due, chunk)) = rx.recv().await {
                            tokio::time::sleep_until(due.into()).await;
                            if cw.write_all(&chunk).await.is_err() {
                                return;
                            }
                        }
                        let _ = cw.shutdown().await;
                    });
                    // Whatever arrives, a short read included, is passed on
                    // as it came, `delay` later.
                    loop {
                        let mut chunk = Vec::with_capacity(64 * 1024);
                        match sr.read_buf(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {
                                if tx.send((Instant::now() + delay, chunk)).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
    });
}
