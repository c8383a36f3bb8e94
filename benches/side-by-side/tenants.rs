//! Many producers in one process, as a multi-tenant service holds them
//! (a producer per tenant): what each additional producer costs.
//!
//! ```text
//! cargo bench -p courier-side-by-side --bench tenants -- --bench                  # Tansu, to docs/benchmarks/tenants.md
//! cargo bench -p courier-side-by-side --bench tenants -- --bench --broker kafka   # one Apache Kafka broker, to docs/benchmarks/tenants-kafka.md
//! cargo bench -p courier-side-by-side --bench tenants                             # smoke: 1 and 3 producers, one run, nothing written
//! ```
//!
//! Options: `--runs N` (default 3), `--producers 1,10,100,1000`,
//! `--idle S` and `--trickle S` (seconds of each phase, default 5),
//! `--courier-set k=v,k=v` (Courier's producers away from their defaults;
//! nothing is written then).
//!
//! Each client runs in a child process per point and run, which:
//! 1. builds N producers (Courier: `ProducerBuilder::build`, a thread and
//!    actix system each, or `build_on` one shared `ActorThread`;
//!    rust-rdkafka: a `FutureProducer` each);
//! 2. sends each producer's first record, all at once, and times each
//!    from the call to its report (connecting and metadata included);
//! 3. sits idle: `SETTLE` (2 s) first, not measured (Courier's
//!    supervisors stop ticking a second after their last report), then
//!    `--idle` seconds whose CPU time is the idle cost; its threads and
//!    RSS are read at their end;
//! 4. sends a trickle for `--trickle` seconds: every producer one record a
//!    second, each awaited; the CPU over them, per record sent.
//!
//! Every child starts with the same one-worker tokio runtime; its threads
//! and memory are in the counts, the same for each client.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

const TOPIC: &str = "tenants";
const PARTITIONS: i32 = 6;
const CLIENTS: &[&str] = &["courier", "courier-shared", "rdkafka"];
/// A child that takes longer is stopped and its point reported failed.
const CHILD_LIMIT: Duration = Duration::from_secs(240);
/// Idle time before the idle CPU is measured: the first reports' work
/// done (Courier's supervisors stop ticking a second after their last
/// report; librdkafka's threads poll on regardless).
const SETTLE: Duration = Duration::from_secs(2);

fn main() {
    let Some(args) = common::Args::bench_or_child(child) else {
        return;
    };
    let value = |name: &str| args.value(name);
    let smoke = args.smoke();
    let runs: usize = args.number("--runs", 1, 3);
    let counts: Vec<usize> = value("--producers")
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| {
            if smoke {
                vec![1, 3]
            } else {
                vec![1, 10, 100, 1000]
            }
        });
    let phase = |name: &str, default: f64| args.number(name, 0.3, default);
    let (idle, trickle) = (phase("--idle", 5.0), phase("--trickle", 5.0));
    let kafka = value("--broker").as_deref() == Some("kafka");
    let courier_set = value("--courier-set").unwrap_or_default();
    let target = common::Target::start(if kafka {
        common::On::Kafka
    } else {
        common::On::Tansu
    });
    target.create_topic(TOPIC, PARTITIONS);
    let started = Instant::now();
    let mut results: Vec<(usize, BTreeMap<&str, Vec<Sample>>)> = Vec::new();
    let mut failures = Vec::new();
    for &n in &counts {
        eprintln!("== {n} producer(s)");
        let mut by_client: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for run in 0..runs {
            for &client in CLIENTS {
                match run_child(&target, client, n, (idle, trickle), &courier_set) {
                    Ok(s) => {
                        eprintln!(
                            "  run {run} {client:<15} threads {:>5}  rss {:>7.1} MiB  idle cpu {:>8.2} ms/s  first report p50 {:>7.1} ms p99 {:>7.1} ms  trickle cpu {:>7.1} µs/rec  failed {}",
                            s.threads,
                            s.rss_kib as f64 / 1024.0,
                            s.idle_cpu_ms_per_s(),
                            s.first_p50_us / 1e3,
                            s.first_p99_us / 1e3,
                            s.trickle_cpu_us_per_record(),
                            s.failed
                        );
                        by_client.entry(client).or_default().push(s);
                    }
                    Err(why) => {
                        eprintln!("  run {run} {client}: FAILED: {why}");
                        failures.push(format!("{n} producers, {client}, run {run}: {why}"));
                    }
                }
            }
        }
        results.push((n, by_client));
    }
    let md = page(
        &results,
        &failures,
        kafka,
        runs,
        (idle, trickle),
        started.elapsed(),
    );
    println!("{md}");
    if smoke || value("--producers").is_some() || !courier_set.is_empty() {
        eprintln!("smoke, --producers or --courier-set: nothing written");
        return;
    }
    let name = if kafka { "tenants-kafka" } else { "tenants" };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks");
    let path = dir.join(format!("{name}.md"));
    std::fs::write(&path, common::with_history(&path, md)).unwrap();
    std::fs::write(dir.join(format!("{name}.svg")), chart(&results)).unwrap();
    eprintln!("wrote {}", path.display());
}

/// One child's measurements.
#[derive(Clone, Debug, Default)]
struct Sample {
    threads: u64,
    rss_kib: i64,
    idle_cpu_s: f64,
    idle_s: f64,
    first_p50_us: f64,
    first_p99_us: f64,
    trickle_cpu_s: f64,
    trickle_records: u64,
    failed: u64,
}

impl Sample {
    fn idle_cpu_ms_per_s(&self) -> f64 {
        self.idle_cpu_s * 1e3 / self.idle_s.max(1e-9)
    }

    fn trickle_cpu_us_per_record(&self) -> f64 {
        self.trickle_cpu_s * 1e6 / self.trickle_records.max(1) as f64
    }
}

fn run_child(
    target: &common::Target,
    client: &str,
    n: usize,
    (idle, trickle): (f64, f64),
    courier_set: &str,
) -> Result<Sample, String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--child", client, &target.connect]).args([
        n.to_string(),
        idle.to_string(),
        trickle.to_string(),
        format!("set:{courier_set}"),
    ]);
    let (_, f) = common::run_child_fields::<9>(cmd, common::ChildStderr::Kept)
        .map_err(|failed| failed.why())?;
    Ok(Sample {
        threads: f[0] as u64,
        rss_kib: f[1] as i64,
        idle_cpu_s: f[2],
        idle_s: f[3],
        first_p50_us: f[4],
        first_p99_us: f[5],
        trickle_cpu_s: f[6],
        trickle_records: f[7] as u64,
        failed: f[8] as u64,
    })
}

// ---------------------------------------------------------------------------
// The child.

/// One tenant's producer.
enum Tenant {
    Courier(courier_kafka::Producer),
    Rdkafka(rdkafka::producer::FutureProducer),
}

impl Tenant {
    /// Sends one record and waits for its report: whether it was delivered.
    async fn send(&self, i: usize) -> bool {
        match self {
            Tenant::Courier(p) => p
                .send(courier_kafka::Record::to(TOPIC).value(format!("tenant {i}")))
                .await
                .is_ok(),
            Tenant::Rdkafka(p) => {
                let value = format!("tenant {i}");
                p.send(
                    rdkafka::producer::FutureRecord::<(), _>::to(TOPIC).payload(&value),
                    Duration::from_secs(30),
                )
                .await
                .is_ok()
            }
        }
    }

    async fn close(self) {
        match self {
            Tenant::Courier(p) => p.close().await,
            Tenant::Rdkafka(p) => {
                use rdkafka::producer::Producer;
                let _ = tokio::task::spawn_blocking(move || p.flush(Duration::from_secs(10))).await;
            }
        }
    }
}

/// This process's user + system CPU seconds so far.
fn cpu_now() -> f64 {
    // SAFETY: rusage is plain old data, written by getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to it.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// A field of /proc/self/status ("Threads", "VmRSS"), as a number.
fn status(field: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(&format!("{field}:")))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Child: `client addr n idle_s trickle_s set:k=v,...`; prints "threads rss_kib
/// idle_cpu_s idle_s first_p50_us first_p99_us trickle_cpu_s
/// trickle_records failed".
fn child(args: &[String]) {
    let (client, addr) = (args[0].clone(), args[1].clone());
    let n: usize = args[2].parse().unwrap();
    let idle: f64 = args[3].parse().unwrap();
    let trickle: f64 = args[4].parse().unwrap();
    let courier_set: Vec<(String, String)> = args[5]
        .trim_start_matches("set:")
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_LIMIT);
        eprintln!("timed out after {} s", CHILD_LIMIT.as_secs());
        std::process::exit(3);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let shared = (client == "courier-shared").then(courier_kafka::ActorThread::new);
        let tenants: Vec<Tenant> = (0..n)
            .map(|i| match client.as_str() {
                "courier" | "courier-shared" => {
                    let mut b = courier_kafka::Producer::builder()
                        .bootstrap(&addr)
                        .set("client.id", &format!("tenant-{i}"));
                    for (k, v) in &courier_set {
                        b = b.set(k, v);
                    }
                    Tenant::Courier(match &shared {
                        Some(actors) => b.build_on(actors).unwrap(),
                        None => b.build().unwrap(),
                    })
                }
                "rdkafka" => Tenant::Rdkafka(
                    rdkafka::ClientConfig::new()
                        .set("bootstrap.servers", &addr)
                        .set("client.id", format!("tenant-{i}"))
                        .create()
                        .unwrap(),
                ),
                other => panic!("unknown client {other}"),
            })
            .collect();
        let mut failed = 0;
        // First reports, all producers at once.
        let firsts =
            futures::future::join_all(tenants.iter().enumerate().map(|(i, t)| async move {
                let at = Instant::now();
                let ok = t.send(i).await;
                (ok, at.elapsed().as_micros() as u64)
            }))
            .await;
        failed += firsts.iter().filter(|(ok, _)| !ok).count() as u64;
        let [p50, p99] =
            common::percentiles(firsts.iter().map(|(_, us)| *us).collect(), [0.5, 0.99]);
        // Idle: settled first, then measured.
        tokio::time::sleep(SETTLE).await;
        let (cpu0, at) = (cpu_now(), Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(idle)).await;
        let (idle_cpu, idle_s) = (cpu_now() - cpu0, at.elapsed().as_secs_f64());
        let (threads, rss) = (status("Threads"), status("VmRSS"));
        // The trickle: each producer a record a second, awaited, its
        // start spread over the first second.
        let cpu0 = cpu_now();
        let until = Instant::now() + Duration::from_secs_f64(trickle);
        let sent = futures::future::join_all(tenants.iter().enumerate().map(|(i, t)| async move {
            tokio::time::sleep(Duration::from_secs_f64(i as f64 / n as f64)).await;
            let (mut ok, mut bad) = (0u64, 0u64);
            while Instant::now() < until {
                let next = Instant::now() + Duration::from_secs(1);
                if t.send(i).await {
                    ok += 1;
                } else {
                    bad += 1;
                }
                tokio::time::sleep_until(next.into()).await;
            }
            (ok, bad)
        }))
        .await;
        let trickle_cpu = cpu_now() - cpu0;
        let records: u64 = sent.iter().map(|(ok, bad)| ok + bad).sum();
        failed += sent.iter().map(|(_, bad)| bad).sum::<u64>();
        futures::future::join_all(tenants.into_iter().map(Tenant::close)).await;
        println!(
            "{threads} {rss} {idle_cpu} {idle_s} {p50} {p99} {trickle_cpu} {records} {failed}"
        );
    });
}

// ---------------------------------------------------------------------------
// The page.

fn page(
    results: &[(usize, BTreeMap<&str, Vec<Sample>>)],
    failures: &[String],
    kafka: bool,
    runs: usize,
    (idle, trickle): (f64, f64),
    took: Duration,
) -> String {
    let broker = if kafka {
        "one Apache Kafka 4.1.1 broker (KRaft, 512 MiB heap, its data on tmpfs)"
    } else {
        "Tansu 0.6.0 (memory storage)"
    };
    let mut md = format!(
        "# Many producers in one process: Courier vs rust-rdkafka\n\n\
         Run on {}: `{}` ({runs} alternating runs per client and point, medians; the whole run took {:.0} s).\n\
         Machine: {} cores, {}; broker: {broker}, on the same machine; rdkafka 0.38 (librdkafka 2.12.1); Courier at its default features.\n\n\
         A multi-tenant service holds a producer per tenant. Each client run is a process that builds N producers, each at its \
         defaults with a `client.id` of its own, on one topic of {PARTITIONS} partitions; sends each producer's first record, \
         all at once (**first report**: from the call to the report, connecting and metadata included); sits idle for {} s, then for {idle} s \
         more (**idle CPU**: the process's user+sys time over the {idle} s, in ms per second; **threads** and **RSS** read at their end); then \
         sends a **trickle** for {trickle} s, every producer one record a second, each awaited (CPU per record sent). \
         Every process has the same one-worker tokio runtime, counted in its threads and memory.\n\n\
         - **courier**: `ProducerBuilder::build`, a thread and an actix system per producer.\n\
         - **courier-shared**: `ProducerBuilder::build_on` one `ActorThread`: every producer's actors on one thread.\n\
         - **rdkafka**: a `FutureProducer` per tenant.\n\n\
         ([chart](tenants{}.svg))\n\n\
         | producers | client | threads | RSS MiB | RSS per producer MiB | idle CPU ms/s | first report p50 ms | first report p99 ms | trickle CPU µs/record | failed |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        common::today(),
        common::command_line("tenants", &["--bench"]),
        took.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        common::cpu_model(),
        SETTLE.as_secs(),
        if kafka { "-kafka" } else { "" },
    );
    for (n, by_client) in results {
        for &client in CLIENTS {
            let Some(s) = by_client.get(client).filter(|s| !s.is_empty()) else {
                md.push_str(&format!("| {n} | {client} | failed | | | | | | | |\n"));
                continue;
            };
            let m = |f: &dyn Fn(&Sample) -> f64| common::median(s.iter().map(f).collect());
            let rss = m(&|s| s.rss_kib as f64 / 1024.0);
            md.push_str(&format!(
                "| {n} | {client} | {:.0} | {rss:.1} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.0} |\n",
                m(&|s| s.threads as f64),
                rss / *n as f64,
                m(&|s| s.idle_cpu_ms_per_s()),
                m(&|s| s.first_p50_us / 1e3),
                m(&|s| s.first_p99_us / 1e3),
                m(&|s| s.trickle_cpu_us_per_record()),
                s.iter().map(|s| s.failed).max().unwrap_or(0) as f64,
            ));
        }
    }
    if !failures.is_empty() {
        md.push_str("\nFailed runs:\n\n");
        for f in failures {
            md.push_str(&format!("- {f}\n"));
        }
    }
    md
}

/// Threads, RSS and idle CPU against producers, log–log, a line per
/// client.
fn chart(results: &[(usize, BTreeMap<&str, Vec<Sample>>)]) -> String {
    use plotters::style::RGBColor;
    let colors = [
        ("courier", RGBColor(0x2b, 0x6c, 0xb0)),
        ("courier-shared", RGBColor(0x2f, 0x8f, 0x4e)),
        ("rdkafka", RGBColor(0xc0, 0x56, 0x21)),
    ];
    let panel =
        |caption, y: fn(&Sample) -> f64| (caption, common::median_lines(results, &colors, y));
    common::chart_2x2(
        "Many producers in one process: Courier (blue), Courier on one ActorThread (green), rust-rdkafka (orange); medians, log–log",
        "producers",
        vec![
            panel("threads", |s| s.threads as f64),
            panel("RSS MiB", |s| s.rss_kib as f64 / 1024.0),
            panel("idle CPU ms per s", |s| s.idle_cpu_ms_per_s()),
            panel("first report p99 ms", |s| s.first_p99_us / 1e3),
        ],
    )
}
