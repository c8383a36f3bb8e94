//! Cost as work grows (issue 15, item 4): Courier and rust-rdkafka
//! (librdkafka) along four curves, each from 1 to large, on a Tansu broker
//! this bench starts itself (a fresh one for each client run: its memory
//! storage keeps every record and every producer's state).
//!
//! ```text
//! cargo bench -p courier-side-by-side --bench curves -- --bench                # every curve, 3 runs per point
//! cargo bench -p courier-side-by-side --bench curves -- --bench --only size    # one curve
//! cargo bench -p courier-side-by-side --bench curves -- --bench --runs 5 --records 100000
//! cargo bench -p courier-side-by-side --bench curves -- --bench --only partitions --x 10000  # a probe: printed, not written
//! cargo bench -p courier-side-by-side --bench curves -- --bench --only partitions --x 10000 --clients courier  # a probe of one client
//! cargo bench -p courier-side-by-side --bench curves -- --smoke                # seconds; what CI runs (no timing claims)
//! cargo bench -p courier-side-by-side --bench curves -- --bench --only partitions --broker kafka3 --per-partition 100
//! ```
//!
//! `--broker` picks where the curves run: `tansu` (the default), `kafka`
//! (one Apache Kafka broker) or `kafka3` (three, every topic with
//! replication factor 3). `--per-partition N` gives the partitions curve
//! at least N records a partition (more records than `--records` at its
//! large points). Each run also reads the brokers' CPU time, so a table
//! shows where the broker was the limit, and on Apache Kafka (up to 100
//! partitions) how full the batches the brokers stored were.
//!
//! The curves:
//! - `partitions`: one topic of P partitions (1 → 10,000), keyed records
//!   (a distinct key per record, so every partition gets some), 100 B;
//! - `subscriptions`: S tasks (1 → 10,000), each producing its share of
//!   the records and reading its own reports. Courier: a subscription per
//!   task (`Producer::subscribe`). rdkafka has no report stream per
//!   producer handle; its fair equivalent is one `ThreadedProducer` whose
//!   delivery callback routes each report by its opaque (the task's
//!   index) to that task's channel;
//! - `web-service`: T tasks (1 → 10,000), each awaiting one send at a
//!   time for a fixed time: Courier's `send().await` against
//!   `FutureProducer::send().await`; also p50 and p99 of the awaited send;
//! - `size`: record size 10 B → 1 MB (keyless, 6 partitions), a fixed
//!   number of bytes per point (fewer records as they grow).
//!
//! The bench is a package of its own (`benches/side-by-side`) so that
//! Courier is built at its default features, as an application gets it.
//!
//! Both clients run at their defaults except the swept parameter, with
//! `linger.ms=5` and `acks=all` set alike (both are also both clients'
//! defaults). Each client runs in a child process (this binary with
//! `--child`): CPU is the whole client's user + sys time (`wait4`), RSS its
//! own peak (`VmHWM`). Clients alternate A B A B over the runs (each round
//! starting with the next client); the tables
//! show medians. Every client's delivered count comes from its success
//! reports, and a client that lost records is flagged. A point that fails
//! (a child that exits with an error, or runs past its time limit) is
//! recorded with the reason, and the curve goes on with the next point.
//!
//! Results: `docs/benchmarks/curves.md` and an SVG chart per curve,
//! `docs/benchmarks/curves-<curve>.svg` (drawn with plotters).

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{med_min_max, Target};

/// The curves, in the order they run.
const CURVES: [&str; 5] = [
    "partitions",
    "subscriptions",
    "web-service",
    "web-service-on-actix",
    "size",
];

/// Whether `curve` is one of the web-service curves: tasks awaiting one
/// send at a time for a fixed time, with latencies.
fn is_web(curve: &str) -> bool {
    curve.starts_with("web-service")
}

/// The clients of `curve`, alternating in this order (each round starting
/// one further along).
///
/// Courier is idempotent by default (as the Java client is since 3.0);
/// librdkafka is not. The partitions curve, where idempotence costs the
/// broker most, also runs librdkafka with `enable.idempotence=true`, so
/// that the two clients are compared doing the same work as well as at
/// their defaults.
fn clients(curve: &str) -> &'static [&'static str] {
    if curve == "partitions" {
        &["courier", "rdkafka", "rdkafka-idempotent"]
    } else {
        &["courier", "rdkafka"]
    }
}

/// `linger.ms` for both clients in every curve.
const LINGER_MS: &str = "5";

/// `acks` for both clients in every curve.
const ACKS: &str = "all";

/// A child that has not finished after this long is stopped and its point
/// recorded as failed.
const CHILD_LIMIT: Duration = Duration::from_secs(180);

/// Where the curves run (`--broker`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Broker {
    /// A fresh Tansu for each client run.
    Tansu,
    /// The tests' shared one-broker Apache Kafka (KRaft).
    Kafka,
    /// A three-broker Apache Kafka cluster; topics with replication
    /// factor 3.
    Kafka3,
}

impl Broker {
    fn parse(v: Option<&str>) -> Broker {
        match v {
            None | Some("tansu") => Broker::Tansu,
            Some("kafka") => Broker::Kafka,
            Some("kafka3") => Broker::Kafka3,
            Some(other) => panic!("--broker {other}: tansu, kafka or kafka3"),
        }
    }

    /// The results' file names end in this.
    fn suffix(self) -> &'static str {
        match self {
            Broker::Tansu => "",
            Broker::Kafka => "-kafka",
            Broker::Kafka3 => "-kafka3",
        }
    }

    /// For the results' page.
    fn describe(self) -> &'static str {
        match self {
            Broker::Tansu => "Tansu 0.6.0 (memory storage), a fresh one for each client run",
            Broker::Kafka => {
                "Apache Kafka 4.1.1 (KRaft, one broker, 512 MiB heap, its data on tmpfs), one topic per point for its client runs"
            }
            Broker::Kafka3 => {
                "Apache Kafka 4.1.1 (KRaft, three brokers, 512 MiB heap each, their data on tmpfs), topics with replication factor 3 \
                 (`acks=all` waits for all three), one topic per point for its client runs"
            }
        }
    }

    fn replication(self) -> i16 {
        if self == Broker::Kafka3 {
            3
        } else {
            1
        }
    }

    /// A client run's broker: a fresh Tansu, or the shared Kafka cluster.
    fn target(self) -> Target {
        match self {
            Broker::Tansu => Target::start(common::On::Tansu),
            Broker::Kafka => Target::start(common::On::Kafka),
            Broker::Kafka3 => Target::cluster(common::support::kafka::KafkaCluster::shared(3)),
        }
    }
}

/// One point of a curve: what each of its client runs does.
#[derive(Clone, Debug)]
struct Point {
    /// The curve's name (one of [`CURVES`]).
    curve: &'static str,
    /// The swept parameter's value (partitions, subscriptions, tasks, or
    /// bytes per record).
    x: usize,
    /// Records per run (the `web-service` curve runs for `seconds` instead).
    records: usize,
    /// Bytes per record value.
    size: usize,
    /// The topic's partitions.
    partitions: i32,
    /// Seconds of load per `web-service` run.
    seconds: f64,
}

/// The points of `curve`: log-spaced parameters, and records per run from
/// `records` (`--records`).
fn points(
    curve: &'static str,
    smoke: bool,
    records: usize,
    per_partition: usize,
    seconds: f64,
) -> Vec<Point> {
    let counts: &[usize] = if smoke {
        &[1, 10]
    } else {
        &[1, 10, 100, 1000, 10_000]
    };
    let base = Point {
        curve,
        x: 0,
        records,
        size: 100,
        partitions: 6,
        seconds,
    };
    match curve {
        "partitions" => counts
            .iter()
            .map(|&p| Point {
                x: p,
                partitions: p as i32,
                records: records.max(per_partition * p),
                ..base.clone()
            })
            .collect(),
        "subscriptions" | "web-service" | "web-service-on-actix" => counts
            .iter()
            .map(|&x| Point { x, ..base.clone() })
            .collect(),
        "size" => {
            let sizes: &[usize] = if smoke {
                &[10, 1000]
            } else {
                &[10, 100, 1000, 10_000, 100_000, 1_000_000]
            };
            // At most `records` of them, and at most 100 such records' worth
            // of 1 KB ones in bytes (200 MB at the default 200,000): the
            // broker keeps every run's records.
            let bytes = records * 1000;
            sizes
                .iter()
                .map(|&size| Point {
                    x: size,
                    size,
                    records: records.min(bytes / size).max(1),
                    ..base.clone()
                })
                .collect()
        }
        other => panic!("unknown curve {other}"),
    }
}

/// What one client run measured.
#[derive(Clone, Debug, Default)]
struct Sample {
    /// Seconds of producing, from the first record to the last report.
    wall: f64,
    /// The client process's CPU seconds (user + sys), its start included.
    cpu: f64,
    /// Its peak RSS in KiB.
    rss_kib: i64,
    /// Records with a success report.
    delivered: usize,
    /// Records reported failed (or, in the web-service curve, sends that
    /// returned an error).
    failed: usize,
    /// The awaited send's p50 in µs (web-service only).
    p50_us: f64,
    /// Its p99 in µs.
    p99_us: f64,
    /// The brokers' CPU seconds over the run (creating its topic not
    /// included).
    broker_cpu: f64,
    /// Mean records a batch the brokers stored from the run (Kafka, up
    /// to 100 partitions: `Target::batch_fill`).
    records_per_batch: Option<f64>,
}

/// A client's medians at one point.
#[derive(Clone, Debug)]
struct Stats {
    /// Records a second (delivered ÷ wall).
    rate: f64,
    /// Client CPU µs per delivered record.
    cpu_us: f64,
    /// Peak RSS MiB.
    rss_mib: f64,
    /// Send latency p50, µs (web-service only).
    p50_us: f64,
    /// Send latency p99, µs.
    p99_us: f64,
    /// The brokers' CPU µs per delivered record.
    broker_cpu_us: f64,
    /// Mean records a stored batch, median over the runs that measured it.
    records_per_batch: Option<f64>,
    /// The most records any run lost (expected − delivered, or failed sends).
    lost: usize,
    /// Runs completed (fewer than asked when a later run failed).
    runs: usize,
}

impl Stats {
    /// The medians of a client's runs at `p`.
    fn of(samples: &[Sample], p: &Point) -> Stats {
        let pick = |f: &dyn Fn(&Sample) -> f64| med_min_max(samples.iter().map(f).collect()).0;
        Stats {
            rate: pick(&|s| s.delivered as f64 / s.wall),
            cpu_us: pick(&|s| s.cpu * 1e6 / s.delivered.max(1) as f64),
            rss_mib: pick(&|s| s.rss_kib as f64 / 1024.0),
            p50_us: pick(&|s| s.p50_us),
            p99_us: pick(&|s| s.p99_us),
            broker_cpu_us: pick(&|s| s.broker_cpu * 1e6 / s.delivered.max(1) as f64),
            records_per_batch: {
                let fills: Vec<f64> = samples.iter().filter_map(|s| s.records_per_batch).collect();
                (!fills.is_empty()).then(|| med_min_max(fills).0)
            },
            lost: samples
                .iter()
                .map(|s| {
                    if is_web(p.curve) {
                        s.failed
                    } else {
                        p.records.saturating_sub(s.delivered)
                    }
                })
                .max()
                .unwrap_or(0),
            runs: samples.len(),
        }
    }
}

/// A point's outcome: each client's medians, and why a run failed if one
/// did.
struct Measured {
    /// The point.
    point: Point,
    /// Each client's medians over its completed runs.
    by_client: BTreeMap<&'static str, Stats>,
    /// The failed run and why (no runs of the point were made after it).
    failure: Option<String>,
    /// The machine's 1-minute load average before and after the point's
    /// runs (/proc/loadavg): above the bench's own ~2, something else ran.
    load: (f64, f64),
}

/// The 1-minute load average.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The bench (`--bench`, else the smoke version), or a child (`--child`).
fn main() {
    let Some(args) = common::Args::bench_or_child(child) else {
        return;
    };
    let value = |name: &str| args.value(name);
    let smoke = args.smoke();
    let runs: usize = args.number("--runs", 1, 3);
    let records: usize = args.number("--records", 2_000, 100_000);
    let seconds: f64 = args.number("--seconds", 0.3, 3.0);
    let only = value("--only");
    let broker = Broker::parse(value("--broker").as_deref());
    let per_partition: usize = value("--per-partition")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // `--x 1000,10000`: only those points of each curve.
    let only_x: Option<Vec<usize>> =
        value("--x").map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect());
    // `--courier-set max.request.size=2048,linger.ms=10`: Courier away from
    // its defaults; a probe too.
    let courier_set = value("--courier-set").unwrap_or_default();
    // `--clients courier`: only those clients run; a probe too.
    let only_clients: Option<Vec<String>> =
        value("--clients").map(|v| v.split(',').map(str::to_string).collect());
    let started = Instant::now();

    let mut results: Vec<Measured> = Vec::new();
    for curve in CURVES {
        if only.as_ref().is_some_and(|o| !curve.contains(o.as_str())) {
            continue;
        }
        for point in points(curve, smoke, records, per_partition, seconds) {
            if only_x.as_ref().is_some_and(|xs| !xs.contains(&point.x)) {
                continue;
            }
            eprintln!(
                "== {curve} {} ({} records of {} B, {} partition(s))",
                point.x, point.records, point.size, point.partitions
            );
            let all = clients(curve);
            let clients: Vec<&'static str> = all
                .iter()
                .copied()
                .filter(|c| {
                    only_clients
                        .as_ref()
                        .is_none_or(|o| o.iter().any(|x| x == c))
                })
                .collect();
            assert!(!clients.is_empty(), "--clients names none of {all:?}");
            results.push(measure(&point, &clients, runs, &courier_set, broker));
        }
    }
    let took = started.elapsed().as_secs_f64();

    if smoke {
        // Only that every client ran and none lost records: no timing claims.
        for m in &results {
            let p = &m.point;
            assert!(m.failure.is_none(), "{} {}: {:?}", p.curve, p.x, m.failure);
            for (client, s) in &m.by_client {
                assert_eq!(s.lost, 0, "{client} lost records at {} {}", p.curve, p.x);
                if is_web(p.curve) {
                    assert!(s.p50_us > 0.0, "{client}: no latencies measured");
                }
            }
        }
        // The charts are drawn (not written), so their code runs in CI too.
        for curve in CURVES {
            assert!(chart(curve, &results).contains("<svg"), "no {curve} chart");
        }
        println!(
            "curves smoke: {} points, both clients delivered everything",
            results.len()
        );
        return;
    }
    // A run of some points only is a probe: printed, not written over a
    // curve's results.
    let files = only_x.is_none() && courier_set.is_empty() && only_clients.is_none();
    write_results(
        &results,
        runs,
        records,
        seconds,
        took,
        only.as_deref(),
        files,
        broker,
    );
}

/// Runs the clients at `p`, alternating, each run on a fresh broker.
///
/// A fresh Tansu per client run, not per point: Tansu's memory storage
/// keeps every record and every producer id's state, and with idempotence
/// its produce path slows as that grows (at 10,000 partitions a point's
/// third round ran at a fraction of its first's), so a shared broker
/// would charge each client for the runs before it. On Kafka, one topic
/// for the point's runs, deleted after them: Kafka holds files open per
/// partition until a deleted topic's are removed (a minute later), and a
/// topic of 10,000 partitions per client run ran the broker out of file
/// descriptors (20,000 here) at the fourth.
fn measure(
    p: &Point,
    clients: &[&'static str],
    runs: usize,
    courier_set: &str,
    broker: Broker,
) -> Measured {
    let load_before = load_average();
    let mut samples: BTreeMap<&'static str, Vec<Sample>> = BTreeMap::new();
    let topic = format!("curve-{}-{}", p.curve, p.x);
    let create = |target: &Target| {
        let t = Instant::now();
        target.create_replicated_topic(&topic, p.partitions, broker.replication());
        if p.partitions > 100 {
            eprintln!(
                "  created {} partitions in {:.1} s",
                p.partitions,
                t.elapsed().as_secs_f64()
            );
        }
    };
    let kafka = (broker != Broker::Tansu).then(|| {
        let target = broker.target();
        create(&target);
        target
    });
    let measured = |samples: &BTreeMap<&'static str, Vec<Sample>>, failure: Option<String>| {
        if let Some(target) = &kafka {
            target.done_with(&topic);
        }
        Measured {
            point: p.clone(),
            by_client: samples.iter().map(|(c, s)| (*c, Stats::of(s, p))).collect(),
            failure,
            load: (load_before, load_average()),
        }
    };
    for run in 0..runs {
        // Each round starts with the next client: on Kafka the point's
        // first run writes the topic's fresh partitions (their first
        // segment and index entries), slower than the runs after it, and
        // that run should not always be the same client's.
        let first = run % clients.len().max(1);
        for &client in clients[first..].iter().chain(&clients[..first]) {
            let fresh;
            let target = match &kafka {
                Some(target) => target,
                None => {
                    fresh = broker.target();
                    create(&fresh);
                    &fresh
                }
            };
            // How full the run's batches were: read from the segment
            // files after the run (one JVM), where that stays cheap.
            let since = (kafka.is_some() && p.partitions <= 100)
                .then(|| target.end_offsets(&topic, p.partitions));
            let broker_cpu = target.brokers_cpu();
            let outcome = run_client(target, &topic, client, p, courier_set);
            let broker_cpu = target.brokers_cpu() - broker_cpu;
            let records_per_batch = since
                .and_then(|since| target.batch_fill(&topic, &since))
                .map(|f| f.records_per_batch());
            match outcome.map(|s| Sample {
                broker_cpu,
                records_per_batch,
                ..s
            }) {
                Ok(s) => {
                    eprintln!(
                        "  run {run} {client:<8} {:>9.0} msg/s  cpu {:>7.3} µs/msg  broker cpu {:>7.3} µs/msg  rss {:>6.1} MiB  {}delivered {}{}",
                        s.delivered as f64 / s.wall,
                        s.cpu * 1e6 / s.delivered.max(1) as f64,
                        s.broker_cpu * 1e6 / s.delivered.max(1) as f64,
                        s.rss_kib as f64 / 1024.0,
                        s.records_per_batch
                            .map_or(String::new(), |r| format!("{r:.0} rec/batch  ")),
                        s.delivered,
                        if is_web(p.curve) {
                            format!("  p50 {:.0} µs  p99 {:.0} µs  failed {}", s.p50_us, s.p99_us, s.failed)
                        } else {
                            format!("/{}", p.records)
                        }
                    );
                    samples.entry(client).or_default().push(s);
                }
                Err(why) => {
                    // The runs before it stand; no more runs of this point.
                    eprintln!("  run {run} {client}: FAILED: {why}");
                    return measured(&samples, Some(format!("{client}, run {run}: {why}")));
                }
            }
        }
    }
    measured(&samples, None)
}

/// One client run in a child process; an error says why it failed (its
/// exit status and the end of its stderr).
fn run_client(
    target: &Target,
    topic: &str,
    client: &str,
    p: &Point,
    courier_set: &str,
) -> Result<Sample, String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--child", client, p.curve, &target.connect, topic])
        .args([
            p.x.to_string(),
            p.records.to_string(),
            p.size.to_string(),
            p.seconds.to_string(),
            format!("set:{courier_set}"),
        ]);
    let (done, [wall, delivered, failed, rss_kib, p50_us, p99_us]) =
        common::run_child_fields(cmd, common::ChildStderr::Kept).map_err(|f| f.why())?;
    Ok(Sample {
        wall,
        delivered: delivered as usize,
        failed: failed as usize,
        rss_kib: rss_kib as i64,
        p50_us,
        p99_us,
        cpu: done.cpu,
        broker_cpu: 0.0,
        records_per_batch: None,
    })
}

/// What a child runs.
struct Job {
    /// `courier` or `rdkafka`.
    client: String,
    /// The curve (one of [`CURVES`]).
    curve: String,
    /// The broker's bootstrap address.
    addr: String,
    /// The point's topic.
    topic: String,
    /// The swept parameter ([`Point::x`]).
    x: usize,
    /// Records to produce ([`Point::records`]).
    records: usize,
    /// Bytes per value.
    size: usize,
    /// Seconds of load (web-service).
    seconds: f64,
    /// Courier settings away from its defaults (`--courier-set`).
    courier_set: Vec<(String, String)>,
}

/// What a child measured.
#[derive(Default)]
struct Outcome {
    /// Seconds from the first record to the last report.
    wall: f64,
    /// Success reports.
    delivered: usize,
    /// Failure reports, refused sends, failed awaits.
    failed: usize,
    /// Web-service: each awaited send's latency in µs.
    latencies: Vec<u64>,
}

/// Child: run one client at one point; print
/// "wall_seconds delivered failed peak_rss_kib p50_us p99_us".
fn child(args: &[String]) {
    let job = Job {
        client: args[0].clone(),
        curve: args[1].clone(),
        addr: args[2].clone(),
        topic: args[3].clone(),
        x: args[4].parse().unwrap(),
        records: args[5].parse().unwrap(),
        size: args[6].parse().unwrap(),
        seconds: args[7].parse().unwrap(),
        courier_set: args[8]
            .trim_start_matches("set:")
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_LIMIT);
        eprintln!("timed out after {} s", CHILD_LIMIT.as_secs());
        std::process::exit(3);
    });
    // Both clients' tasks run on one tokio worker thread; each client's
    // own threads (Courier's actix system, librdkafka's) come on top.
    let rt = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    };
    let out = match (job.client.as_str(), job.curve.as_str()) {
        ("courier", "partitions" | "size") => rt().block_on(courier_stream(&job)),
        ("courier", "subscriptions") => rt().block_on(courier_subscriptions(&job)),
        ("courier", "web-service") => rt().block_on(courier_web(&job)),
        ("rdkafka" | "rdkafka-idempotent", "partitions" | "size") => rdkafka_base(&job),
        ("rdkafka", "subscriptions") => rt().block_on(rdkafka_routed(&job)),
        ("rdkafka", "web-service") => rt().block_on(rdkafka_web(&job)),
        // The application's own actix system on this thread, as an actix
        // (actix-web) worker runs its handlers.
        ("courier", "web-service-on-actix") => actix::System::new().block_on(courier_web(&job)),
        ("rdkafka", "web-service-on-actix") => actix::System::new().block_on(rdkafka_web(&job)),
        (c, k) => panic!("unknown client {c} or curve {k}"),
    };
    let [p50, p99] = common::percentiles(out.latencies, [0.5, 0.99]);
    println!(
        "{} {} {} {} {p50} {p99}",
        out.wall,
        out.delivered,
        out.failed,
        common::peak_rss_kib()
    );
}

/// Whether record `i` carries a key (the partitions curve's are keyed).
fn keyed(job: &Job) -> bool {
    job.curve == "partitions"
}

/// Record `i`'s key: distinct per record, so that keyed records spread
/// over every partition.
fn key_of(i: usize) -> String {
    format!("k{i}")
}

/// A Courier producer at its defaults, with the bench's linger and acks.
fn courier_producer(job: &Job) -> courier_kafka::Producer {
    courier_builder(job).build().unwrap()
}

/// Courier's settings: its defaults, with the bench's linger and acks.
fn courier_builder(job: &Job) -> courier_kafka::ProducerBuilder {
    let mut b = courier_kafka::Producer::builder()
        .bootstrap(&job.addr)
        .set("linger.ms", LINGER_MS)
        .set("acks", ACKS);
    for (k, v) in &job.courier_set {
        b = b.set(k, v);
    }
    b
}

/// The record value, shared without a copy (as rdkafka's clients pass a
/// borrowed slice that librdkafka copies).
fn courier_value(job: &Job) -> bytes::Bytes {
    bytes::Bytes::from_static(Box::leak(vec![b'x'; job.size].into_boxed_slice()))
}

/// A Courier record for `topic`.
fn courier_record(
    topic: courier_kafka::Topic,
    value: &bytes::Bytes,
    key: Option<String>,
) -> courier_kafka::Record {
    courier_kafka::Record {
        topic,
        partition: None,
        key: key.map(bytes::Bytes::from),
        value: Some(value.clone()),
        headers: Vec::new(),
        timestamp: None,
        opaque: 0,
    }
}

/// Topic metadata first, outside the timing (rdkafka's clients fetch it
/// too): one record, sent and awaited.
async fn courier_warm(producer: &courier_kafka::Producer, topic: courier_kafka::Topic) {
    let _ = producer
        .send(courier_kafka::Record::to(topic).value("warm"))
        .await;
}

/// One subscription: every record produced with `Subscriber::produce`,
/// every report read from its stream by another task.
async fn courier_stream(job: &Job) -> Outcome {
    let producer = courier_producer(job);
    let topic = courier_kafka::Topic::from(job.topic.as_str());
    let value = courier_value(job);
    courier_warm(&producer, topic).await;
    let start = Instant::now();
    let (sub, stream) = producer.subscribe(courier_kafka::ReportMode::All);
    let reader = tokio::spawn(count_reports(stream));
    for i in 0..job.records {
        let key = keyed(job).then(|| key_of(i));
        sub.produce(courier_record(topic, &value, key))
            .await
            .unwrap();
    }
    drop(sub);
    let (delivered, failed) = reader.await.unwrap();
    let wall = start.elapsed().as_secs_f64();
    producer.close().await;
    Outcome {
        wall,
        delivered,
        failed,
        latencies: Vec::new(),
    }
}

/// `job.x` tasks, each with a subscription of its own: it produces its
/// share of the records and reads its own reports, both at once.
async fn courier_subscriptions(job: &Job) -> Outcome {
    let producer = courier_producer(job);
    let topic = courier_kafka::Topic::from(job.topic.as_str());
    let value = courier_value(job);
    courier_warm(&producer, topic).await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..job.x)
        .map(|t| {
            let (sub, stream) = producer.subscribe(courier_kafka::ReportMode::All);
            let share = share(job.records, job.x, t);
            let value = value.clone();
            tokio::spawn(async move {
                let produce = async move {
                    for _ in 0..share {
                        sub.produce(courier_record(topic, &value, None))
                            .await
                            .unwrap();
                    }
                };
                futures::join!(produce, count_reports(stream)).1
            })
        })
        .collect();
    let (mut delivered, mut failed) = (0, 0);
    for t in tasks {
        let (ok, bad) = t.await.unwrap();
        delivered += ok;
        failed += bad;
    }
    let wall = start.elapsed().as_secs_f64();
    producer.close().await;
    Outcome {
        wall,
        delivered,
        failed,
        latencies: Vec::new(),
    }
}

/// Task `t`'s share of `records` over `tasks` tasks.
fn share(records: usize, tasks: usize, t: usize) -> usize {
    records / tasks + usize::from(t < records % tasks)
}

/// `job.x` tasks, each awaiting one `send()` at a time until
/// `job.seconds` have passed; each send's latency.
async fn courier_web(job: &Job) -> Outcome {
    let producer = if job.curve == "web-service-on-actix" {
        courier_builder(job).start().unwrap()
    } else {
        courier_producer(job)
    };
    let topic = courier_kafka::Topic::from(job.topic.as_str());
    let value = courier_value(job);
    courier_warm(&producer, topic).await;
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(job.seconds);
    let tasks: Vec<_> = (0..job.x)
        .map(|_| {
            let producer = producer.clone();
            let value = value.clone();
            tokio::spawn(async move {
                let (mut lat, mut failed) = (Vec::new(), 0);
                while Instant::now() < until {
                    let t0 = Instant::now();
                    match producer.send(courier_record(topic, &value, None)).await {
                        Ok(_) => lat.push(t0.elapsed().as_micros() as u64),
                        Err(_) => failed += 1,
                    }
                }
                (lat, failed)
            })
        })
        .collect();
    web_outcome(tasks, start, || producer.close()).await
}

/// Gathers the web-service tasks' latencies and failures; `close` is
/// awaited after the wall time is taken.
async fn web_outcome<F: std::future::Future<Output = ()>>(
    tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, usize)>>,
    start: Instant,
    close: impl FnOnce() -> F,
) -> Outcome {
    let mut out = Outcome::default();
    for t in tasks {
        let (lat, failed) = t.await.unwrap();
        out.latencies.extend(lat);
        out.failed += failed;
    }
    out.wall = start.elapsed().as_secs_f64();
    out.delivered = out.latencies.len();
    close().await;
    out
}

/// librdkafka at its defaults, with the bench's linger and acks, and
/// the topic's metadata fetched.
///
/// librdkafka refuses a record whose size on the wire exceeds
/// `message.max.bytes` (default 1,000,000, overhead included), so a
/// 1,000,000-byte value needs it raised; it is, to Courier's
/// `max.request.size` default (1,048,576), for records that large only.
fn rdkafka_config(job: &Job) -> rdkafka::ClientConfig {
    let mut c = rdkafka::ClientConfig::new();
    c.set("bootstrap.servers", &job.addr)
        .set("linger.ms", LINGER_MS)
        .set("acks", ACKS);
    if job.size + 1024 > 1_000_000 {
        c.set("message.max.bytes", "1048576");
    }
    if job.client == "rdkafka-idempotent" {
        c.set("enable.idempotence", "true");
    }
    c
}

/// Fetches `topic`'s metadata (outside the timing, as Courier's warm-up).
fn rdkafka_metadata<C: rdkafka::producer::ProducerContext, P: rdkafka::producer::Producer<C>>(
    p: &P,
    topic: &str,
) {
    let _ = p
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(30));
}

/// A counting delivery callback (successes, failures).
#[derive(Default)]
struct Count {
    ok: std::sync::atomic::AtomicUsize,
    failed: std::sync::atomic::AtomicUsize,
}

impl rdkafka::ClientContext for Count {}

impl rdkafka::producer::ProducerContext for Count {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        let c = if r.is_ok() { &self.ok } else { &self.failed };
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A `BaseProducer` with a counting callback, polled every 1,000 records
/// and while its queue is full.
fn rdkafka_base(job: &Job) -> Outcome {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use std::sync::atomic::Ordering::Relaxed;
    let p: BaseProducer<Count> = rdkafka_config(job)
        .create_with_context(Count::default())
        .unwrap();
    rdkafka_metadata(&p, &job.topic);
    let payload = vec![b'x'; job.size];
    let start = Instant::now();
    let mut refused = 0;
    for i in 0..job.records {
        let key = keyed(job).then(|| key_of(i));
        let mut rec = BaseRecord::<str, [u8]>::to(&job.topic).payload(&payload);
        if let Some(k) = &key {
            rec = rec.key(k.as_str());
        }
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((e, back)) if is_queue_full(&e) => {
                    p.poll(Duration::from_millis(1));
                    rec = back;
                }
                // Refused outright (too large, say): no report will come.
                Err(_) => {
                    refused += 1;
                    break;
                }
            }
        }
        if i % 1000 == 0 {
            p.poll(Duration::ZERO);
        }
    }
    // Until every report is in, polling in 1 ms steps: `flush` would poll
    // in 100 ms ones (rust-rdkafka's `poll` waits out its whole timeout),
    // and charge rdkafka up to 100 ms for nothing.
    let deadline = Instant::now() + Duration::from_secs(120);
    let reported = || p.context().ok.load(Relaxed) + p.context().failed.load(Relaxed) + refused;
    while reported() < job.records && Instant::now() < deadline {
        p.poll(Duration::from_millis(1));
    }
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered: p.context().ok.load(Relaxed),
        failed: p.context().failed.load(Relaxed) + refused,
        latencies: Vec::new(),
    }
}

/// Whether a send was refused because librdkafka's queue is full (the
/// one refusal worth waiting out).
fn is_queue_full(e: &rdkafka::error::KafkaError) -> bool {
    e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
}

/// A delivery callback that routes each report, by its opaque (a task's
/// index), to that task's channel: rdkafka's equivalent of a report
/// stream per task.
struct Router {
    tasks: Vec<tokio::sync::mpsc::UnboundedSender<bool>>,
}

impl rdkafka::ClientContext for Router {}

impl rdkafka::producer::ProducerContext for Router {
    type DeliveryOpaque = usize;
    fn delivery(&self, r: &rdkafka::producer::DeliveryResult<'_>, task: usize) {
        let _ = self.tasks[task].send(r.is_ok());
    }
}

/// `job.x` tasks sharing one `ThreadedProducer` (its thread polls and
/// runs the callback), each producing its share with its index as the
/// opaque and reading its own reports from its channel.
async fn rdkafka_routed(job: &Job) -> Outcome {
    use rdkafka::producer::{BaseRecord, ThreadedProducer};
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..job.x)
        .map(|_| tokio::sync::mpsc::unbounded_channel())
        .unzip();
    let p: Arc<ThreadedProducer<Router>> = Arc::new(
        rdkafka_config(job)
            .create_with_context(Router { tasks: senders })
            .unwrap(),
    );
    rdkafka_metadata(p.as_ref(), &job.topic);
    let payload: Arc<[u8]> = vec![b'x'; job.size].into();
    let start = Instant::now();
    let tasks: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(t, mut reports)| {
            let share = share(job.records, job.x, t);
            let (p, payload, topic) = (p.clone(), payload.clone(), job.topic.clone());
            tokio::spawn(async move {
                let mut refused = 0;
                for _ in 0..share {
                    let mut rec = BaseRecord::<str, [u8], usize>::with_opaque_to(&topic, t)
                        .payload(&payload[..]);
                    loop {
                        match p.send(rec) {
                            Ok(()) => break,
                            Err((e, back)) if is_queue_full(&e) => {
                                // Let the poll thread drain the queue.
                                rec = back;
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            Err(_) => {
                                refused += 1;
                                break;
                            }
                        }
                    }
                }
                let (mut ok, mut failed) = (0, refused);
                for _ in 0..share - refused {
                    match reports.recv().await {
                        Some(true) => ok += 1,
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut delivered, mut failed) = (0, 0);
    for t in tasks {
        let (ok, bad) = t.await.unwrap();
        delivered += ok;
        failed += bad;
    }
    Outcome {
        wall: start.elapsed().as_secs_f64(),
        delivered,
        failed,
        latencies: Vec::new(),
    }
}

/// `job.x` tasks, each awaiting one `FutureProducer::send` at a time
/// until `job.seconds` have passed; each send's latency.
async fn rdkafka_web(job: &Job) -> Outcome {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = rdkafka_config(job).create().unwrap();
    rdkafka_metadata(&p, &job.topic);
    let payload: Arc<[u8]> = vec![b'x'; job.size].into();
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(job.seconds);
    let tasks: Vec<_> = (0..job.x)
        .map(|_| {
            let (p, payload, topic) = (p.clone(), payload.clone(), job.topic.clone());
            tokio::spawn(async move {
                let (mut lat, mut failed) = (Vec::new(), 0);
                while Instant::now() < until {
                    let t0 = Instant::now();
                    let rec = FutureRecord::<str, [u8]>::to(&topic).payload(&payload[..]);
                    match p.send(rec, Duration::from_secs(60)).await {
                        Ok(_) => lat.push(t0.elapsed().as_micros() as u64),
                        Err(_) => failed += 1,
                    }
                }
                (lat, failed)
            })
        })
        .collect();
    web_outcome(tasks, start, || async {}).await
}

/// The x axis's name for `curve`.
fn x_name(curve: &str) -> &'static str {
    match curve {
        "partitions" => "partitions",
        "subscriptions" => "subscriptions (tasks)",
        "web-service" | "web-service-on-actix" => "tasks T",
        _ => "record size (B)",
    }
}

/// One line per client: (x, y) for each point that ran.
type Lines = Vec<(&'static str, Vec<(f64, f64)>)>;

/// Each client's line of `y` along `curve`.
fn lines(curve: &str, results: &[Measured], y: &dyn Fn(&Point, &Stats) -> f64) -> Lines {
    clients(curve)
        .iter()
        .map(|&c| {
            let pts = results
                .iter()
                .filter(|m| m.point.curve == curve)
                .filter_map(|m| {
                    let s = m.by_client.get(c)?;
                    Some((m.point.x as f64, y(&m.point, s)))
                })
                .collect();
            (c, pts)
        })
        .collect()
}

/// The curve's chart (plotters, SVG): a panel per measure, log–log, a
/// line per client.
fn chart(curve: &str, results: &[Measured]) -> String {
    use plotters::prelude::*;
    let mut panels: Vec<(&str, Lines)> = vec![
        ("records/s", lines(curve, results, &|_, s| s.rate)),
        (
            "client CPU µs per record",
            lines(curve, results, &|_, s| s.cpu_us),
        ),
        (
            "client peak RSS MiB",
            lines(curve, results, &|_, s| s.rss_mib),
        ),
    ];
    match curve {
        "web-service" | "web-service-on-actix" => {
            let mut l = lines(curve, results, &|_, s| s.p99_us);
            for (c, pts) in lines(curve, results, &|_, s| s.p50_us) {
                l.push((
                    if c == "courier" {
                        "courier p50"
                    } else {
                        "rdkafka p50"
                    },
                    pts,
                ));
            }
            l[0].0 = "courier p99";
            l[1].0 = "rdkafka p99";
            panels.push(("awaited send µs (p99 solid, p50 thin)", l));
        }
        "size" => panels.push((
            "MB/s",
            lines(curve, results, &|p, s| s.rate * p.size as f64 / 1e6),
        )),
        _ => {}
    }
    let xs: Vec<f64> = results
        .iter()
        .filter(|m| m.point.curve == curve)
        .map(|m| m.point.x as f64)
        .collect();
    let (x0, x1) = (
        xs.iter().copied().fold(f64::MAX, f64::min).min(1.0),
        xs.iter().copied().fold(1.0, f64::max).max(10.0),
    );
    let mut out = String::new();
    {
        let rows = panels.len().div_ceil(2);
        let root =
            SVGBackend::with_string(&mut out, (1000, 40 + 330 * rows as u32)).into_drawing_area();
        root.fill(&WHITE).unwrap();
        let root = root
            .titled(
                &format!(
                    "{curve}: Courier (blue) vs rust-rdkafka (orange{}), medians, log–log",
                    if clients(curve).len() > 2 {
                        "; idempotent: green"
                    } else {
                        ""
                    }
                ),
                ("sans-serif", 18),
            )
            .unwrap();
        let areas = root.split_evenly((rows, 2));
        let courier = RGBColor(0x2b, 0x6c, 0xb0);
        let rdkafka = RGBColor(0xc0, 0x56, 0x21);
        let idempotent = RGBColor(0x2f, 0x8f, 0x4e);
        for (area, (title, lines)) in areas.iter().zip(&panels) {
            let ys: Vec<f64> = lines
                .iter()
                .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
                .filter(|y| *y > 0.0)
                .collect();
            let y0 = ys.iter().copied().fold(f64::MAX, f64::min).min(1.0) / 1.5;
            let y1 = ys.iter().copied().fold(1.0, f64::max) * 1.5;
            let mut c = ChartBuilder::on(area)
                .caption(*title, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d((x0 / 1.5..x1 * 1.5).log_scale(), (y0..y1).log_scale())
                .unwrap();
            c.configure_mesh()
                .x_desc(x_name(curve))
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .draw()
                .unwrap();
            for (name, pts) in lines {
                let color = if name.starts_with("courier") {
                    courier
                } else if name.starts_with("rdkafka-idempotent") {
                    idempotent
                } else {
                    rdkafka
                };
                let thin = name.ends_with("p50");
                let (width, point) = if thin { (1, 2) } else { (2, 3) };
                common::draw_line(&mut c, name, color, width, point, pts, y0);
            }
            common::draw_legend(&mut c);
        }
        root.present().unwrap();
    }
    out
}

/// A number for an axis label: 1k, 10k, 1M, or as is.
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{}k", v / 1e3)
    } else if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `a ÷ b`, or "–" when either is missing or zero.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}

/// Writes `docs/benchmarks/curves.md` (or `curves-<only>.md`) and the
/// charts of the curves that ran.
#[allow(clippy::too_many_arguments)]
fn write_results(
    results: &[Measured],
    runs: usize,
    records: usize,
    seconds: f64,
    took: f64,
    only: Option<&str>,
    files: bool,
    broker: Broker,
) {
    let dir = common::support::repo_root().join("docs/benchmarks");
    let sfx = broker.suffix();
    std::fs::create_dir_all(&dir).unwrap();
    let mut md = String::new();
    let cmd = common::command_line("curves", &["--bench"]);
    writeln!(
        md,
        "# Cost as work grows: Courier vs rust-rdkafka\n\n\
         Run on {}: `{cmd}` ({runs} alternating runs per client and point, each round starting with the next client, medians; the whole run took {:.0} s).\n\
         Machine: {} cores, {}; broker: {}, on the same machine; \
         rdkafka 0.38 (librdkafka 2.12.1); Courier at its default features.\n\n\
         Both clients at their defaults except the swept parameter, with `linger.ms=5` and `acks=all` set alike. \
         CPU is the client process's user+sys time (its start and connection included) per delivered record; \
         RSS its peak (`VmHWM`). Broker CPU is the brokers' user+sys time over the same client run, per delivered record. \
         On Apache Kafka, at up to 100 partitions, `records a batch` is the mean number of records in the batches the brokers stored from each run \
         (Kafka's `DumpLogSegments` on one replica's segment files; median over the runs): how full each client's batches were. \
         Records/s is delivered records over the time from the first record to the last report. \
         Every delivered count comes from success reports; `lost` is the most any run missed.\n\n\
         Curves (charts: log–log, a panel per measure):\n\n\
         - **partitions**: one topic of P partitions, the table's records/run keyed records (a distinct key each) of 100 B. \
         Courier: one subscription, `Subscriber::produce` per record, every report read from its `ReportStream`; \
         rdkafka: a `BaseProducer` with a counting delivery callback, polled. ([chart](curves-partitions{sfx}.svg))\n\
         - **subscriptions**: S tasks, {records} records of 100 B in all (6 partitions, no keys), each task producing its share and reading its own reports. \
         Courier: a subscription per task. rdkafka has no per-handle report stream; its fair equivalent here is one `ThreadedProducer` \
         whose delivery callback routes each report by its opaque (the task's index) to that task's channel (tokio unbounded mpsc). \
         ([chart](curves-subscriptions{sfx}.svg))\n\
         - **web-service**: T tasks, each awaiting one send at a time for {seconds} s (100 B, 6 partitions, no keys): \
         Courier's `Producer::send().await` vs rdkafka's `FutureProducer::send().await`; p50/p99 of the awaited send. \
         ([chart](curves-web-service{sfx}.svg))\n\
         - **web-service-on-actix**: the same tasks on the application's own actix system (one thread, as one actix-web worker runs its handlers) \
         instead of a tokio worker: Courier started in that system (`ProducerBuilder::start`, its actors on the same thread) \
         vs rdkafka's `FutureProducer` on the same thread. ([chart](curves-web-service-on-actix{sfx}.svg))\n\
         - **size**: record size 10 B → 1 MB, 6 partitions, no keys, {records} records or {} MB per run, whichever is fewer. \
         Clients as in `partitions`. At 1 MB only, rdkafka gets `message.max.bytes=1048576`: its default (1,000,000, overhead included) \
         refuses a 1,000,000-byte value; Courier's `max.request.size` default is 1,048,576. ([chart](curves-size{sfx}.svg))\n\n\
         In every curve but web-service-on-actix both clients' tasks run on one tokio worker thread; each library's own threads come on top. \
         The last column of each table is the machine's 1-minute load average before and after the point's runs: \
         the bench and its broker account for up to about 2 on this machine; more means something else was running too.",
        common::today(),
        took,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        common::cpu_model(),
        broker.describe(),
        records / 1000,
    )
    .unwrap();
    for curve in CURVES {
        let of: Vec<&Measured> = results.iter().filter(|m| m.point.curve == curve).collect();
        if of.is_empty() {
            continue;
        }
        writeln!(md, "\n## {curve}\n").unwrap();
        for (n, &other) in clients(curve).iter().enumerate().skip(1) {
            if n > 1 {
                writeln!(
                    md,
                    "\nThe same runs, against `{other}` (librdkafka with `enable.idempotence=true`, \
                     as Courier is by default):\n"
                )
                .unwrap();
            }
            table(&mut md, curve, &of, other);
        }
        for m in of.iter().filter(|m| m.failure.is_some()) {
            let done: Vec<String> = m
                .by_client
                .iter()
                .map(|(c, s)| format!("{c} {}", s.runs))
                .collect();
            writeln!(
                md,
                "\n**{} {}: a run failed**, and the point's later runs were not made: {}. \
                 The row above has the medians of the runs completed before it ({}; of two runs, the higher).",
                x_name(curve),
                m.point.x,
                m.failure.as_deref().unwrap_or_default(),
                if done.is_empty() {
                    "none".into()
                } else {
                    done.join(", ")
                }
            )
            .unwrap();
        }
        if files && (only.is_none() || only.is_some_and(|o| curve.contains(o))) {
            let name = format!("curves-{curve}{sfx}.svg");
            std::fs::write(dir.join(&name), chart(curve, results)).unwrap();
            eprintln!("wrote docs/benchmarks/{name}");
        }
    }
    let name = match only {
        Some(o) => format!("curves-{o}{sfx}.md"),
        None => format!("curves{sfx}.md"),
    };
    println!("{md}");
    if files {
        let md = common::with_history(&dir.join(&name), md);
        std::fs::write(dir.join(&name), &md).unwrap();
        eprintln!("wrote docs/benchmarks/{name}");
    } else {
        eprintln!("--x: some points only; nothing written");
    }
}

/// One table of `curve`'s points: Courier against `other`.
fn table(md: &mut String, curve: &str, of: &[&Measured], other: &str) {
    let web = is_web(curve);
    let mut head = format!(
        "| {} | records/run | courier rec/s | {other} rec/s | ÷ |",
        x_name(curve)
    );
    if curve == "size" {
        write!(head, " courier MB/s | {other} MB/s |").unwrap();
    }
    write!(
        head,
        " courier CPU µs/rec | {other} CPU µs/rec | ÷ | courier RSS MiB | {other} RSS MiB | ÷ |"
    )
    .unwrap();
    if web {
        write!(
            head,
            " courier p50 µs | {other} p50 µs | courier p99 µs | {other} p99 µs | p99 ÷ |"
        )
        .unwrap();
    }
    write!(
        head,
        " broker CPU µs/rec (courier's run) | broker CPU µs/rec ({other}'s run) |"
    )
    .unwrap();
    let fill = of
        .iter()
        .any(|m| m.by_client.values().any(|s| s.records_per_batch.is_some()));
    if fill {
        write!(
            head,
            " records a batch (courier) | records a batch ({other}) |"
        )
        .unwrap();
    }
    write!(head, " lost (courier/{other}) | load avg before/after |").unwrap();
    let cols = head.matches('|').count() - 1;
    writeln!(md, "{head}\n{}", "|---".repeat(cols) + "|").unwrap();
    for m in of {
        let p = &m.point;
        let recs = if web {
            "–".to_string()
        } else {
            p.records.to_string()
        };
        let c = m.by_client.get("courier");
        let r = m.by_client.get(other);
        let f = |s: Option<&Stats>, g: &dyn Fn(&Stats) -> f64, digits: usize| {
            s.map_or("–".into(), |s| format!("{:.*}", digits, g(s)))
        };
        let mut row = format!(
            "| {} | {recs} | {} | {} | {} |",
            p.x,
            f(c, &|s| s.rate, 0),
            f(r, &|s| s.rate, 0),
            ratio(c.map(|s| s.rate), r.map(|s| s.rate))
        );
        if curve == "size" {
            let mb = |s: &Stats| s.rate * p.size as f64 / 1e6;
            write!(row, " {} | {} |", f(c, &mb, 1), f(r, &mb, 1)).unwrap();
        }
        write!(
            row,
            " {} | {} | {} | {} | {} | {} |",
            f(c, &|s| s.cpu_us, 2),
            f(r, &|s| s.cpu_us, 2),
            ratio(c.map(|s| s.cpu_us), r.map(|s| s.cpu_us)),
            f(c, &|s| s.rss_mib, 1),
            f(r, &|s| s.rss_mib, 1),
            ratio(c.map(|s| s.rss_mib), r.map(|s| s.rss_mib)),
        )
        .unwrap();
        if web {
            write!(
                row,
                " {} | {} | {} | {} | {} |",
                f(c, &|s| s.p50_us, 0),
                f(r, &|s| s.p50_us, 0),
                f(c, &|s| s.p99_us, 0),
                f(r, &|s| s.p99_us, 0),
                ratio(c.map(|s| s.p99_us), r.map(|s| s.p99_us)),
            )
            .unwrap();
        }
        write!(
            row,
            " {} | {} |",
            f(c, &|s| s.broker_cpu_us, 2),
            f(r, &|s| s.broker_cpu_us, 2)
        )
        .unwrap();
        if fill {
            let per_batch = |s: Option<&Stats>| {
                s.and_then(|s| s.records_per_batch)
                    .map_or("–".into(), |r| format!("{r:.0}"))
            };
            write!(row, " {} | {} |", per_batch(c), per_batch(r)).unwrap();
        }
        let lost = |s: Option<&Stats>| {
            s.map_or("–".into(), |s| {
                if s.lost == 0 {
                    "0".to_string()
                } else {
                    format!("**{}**", s.lost)
                }
            })
        };
        writeln!(
            row,
            " {}/{} | {:.1}/{:.1} |",
            lost(c),
            lost(r),
            m.load.0,
            m.load.1
        )
        .unwrap();
        md.push_str(&row);
    }
}

/// Reads `stream` to its end: (delivered, failed) reports.
async fn count_reports(mut stream: courier_kafka::ReportStream) -> (usize, usize) {
    use futures::StreamExt;
    let (mut ok, mut failed) = (0, 0);
    while let Some(r) = stream.next().await {
        if r.is_delivered() {
            ok += 1
        } else {
            failed += 1
        }
    }
    (ok, failed)
}
