//! What the benches that run each client in a child process share
//! (`vs_rdkafka`, `curves`, `tenants`): the start of `main`
//! ([`Args::bench_or_child`]) and its options ([`Args`]), the broker a
//! workload runs on ([`Target`]: a fresh Tansu, or the tests' shared
//! Apache Kafka broker), running a child and reading its CPU time from
//! `wait4` ([`run_child`]) and the numbers it prints
//! ([`run_child_fields`]), a child's own peak RSS ([`peak_rss_kib`]), the
//! processor's name ([`cpu_model`]), and the statistics over runs
//! ([`med_min_max`], [`percentiles`]).
//!
//! Included by each bench with `mod common;` (a directory module, so that
//! Cargo does not take it for a bench target of its own).

// Each bench uses a part of this module.
#![allow(dead_code)]

#[path = "../../../tests/support/mod.rs"]
pub mod support;

use std::process::{Command, Stdio};
use std::time::Instant;

/// Where a workload runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum On {
    /// A fresh Tansu (memory storage) for the workload.
    Tansu,
    /// The shared Apache Kafka broker's PLAINTEXT listener.
    Kafka,
    /// The same broker's SSL listener (server-authenticated TLS; the
    /// certificate is for `localhost`, checked by both clients).
    KafkaTls,
    /// A shared cluster of three Apache Kafka brokers (PLAINTEXT).
    Kafka3,
}

/// A workload's broker: where clients connect and with what settings, and
/// the plaintext address the bench itself uses to create topics and read
/// them back.
pub struct Target {
    /// The clients' bootstrap address.
    pub connect: String,
    /// Settings both clients get (`security.protocol`, `ssl.ca.location`).
    pub settings: Vec<(String, String)>,
    /// A plaintext address of the same broker.
    pub admin: String,
    /// The broker process, for its CPU time.
    pub pid: u32,
    /// The shared Kafka broker, for Kafka workloads.
    kafka: Option<&'static support::kafka::KafkaCluster>,
    /// A Tansu of this workload's own (`tests/support`), killed on drop.
    _tansu: Option<support::Tansu>,
}

impl Target {
    /// A fresh Tansu (memory storage: it keeps every record, so each
    /// workload gets its own), or the shared Kafka broker, started once
    /// with the tests' secured listeners (its JVM dies with this process).
    pub fn start(on: On) -> Target {
        if on == On::Tansu {
            let tansu = support::Tansu::start();
            return Target {
                connect: tansu.bootstrap(),
                settings: Vec::new(),
                admin: tansu.bootstrap(),
                pid: tansu.pid(),
                kafka: None,
                _tansu: Some(tansu),
            };
        }
        if on == On::Kafka3 {
            return Target::cluster(support::kafka::KafkaCluster::shared(3));
        }
        let kafka = support::kafka::KafkaCluster::shared_secured();
        let (connect, settings) = match on {
            On::KafkaTls => {
                let s = kafka.secured();
                (
                    format!("localhost:{}", s.ssl),
                    vec![
                        ("security.protocol".into(), "SSL".into()),
                        (
                            "ssl.ca.location".into(),
                            s.ca_pem.to_str().unwrap().to_string(),
                        ),
                    ],
                )
            }
            _ => (kafka.bootstrap(), Vec::new()),
        };
        Target {
            connect,
            settings,
            admin: kafka.bootstrap(),
            pid: kafka.pid(0).expect("the Kafka broker runs"),
            kafka: Some(kafka),
            _tansu: None,
        }
    }

    /// A Kafka cluster of the bench's own (`--slow-broker`): clients
    /// connect to its bootstrap address; `pid` is its first broker's.
    pub fn cluster(kafka: &'static support::kafka::KafkaCluster) -> Target {
        Target {
            connect: kafka.bootstrap(),
            settings: Vec::new(),
            admin: kafka.bootstrap(),
            pid: kafka
                .pid(kafka.broker_ids()[0])
                .expect("the Kafka broker runs"),
            kafka: Some(kafka),
            _tansu: None,
        }
    }

    /// Creates `topic` with `partitions` partitions (replication 1).
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.create_replicated_topic(topic, partitions, 1);
    }

    /// Creates `topic` with `partitions` partitions, each with
    /// `replication` replicas (a Kafka cluster of that many brokers).
    pub fn create_replicated_topic(&self, topic: &str, partitions: i32, replication: i16) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match self.kafka {
            // Waits until every partition has a leader.
            // Kafka's controller refuses one operation of more than
            // 10,000 records ("excessively large batch operation"), a
            // record a partition: larger topics grow in steps.
            Some(kafka) => {
                const STEP: i32 = 5_000;
                rt.block_on(kafka.create_topic(topic, partitions.min(STEP), replication, &[]));
                let mut have = partitions.min(STEP);
                while have < partitions {
                    have = (have + STEP).min(partitions);
                    kafka.add_partitions(topic, have);
                }
            }
            None => rt
                .block_on(courier_kafka::admin::create_topic(
                    &self.admin,
                    topic,
                    partitions,
                    1,
                ))
                .expect("create topic"),
        }
    }

    /// Each leader of `topic`'s partitions and the partitions it leads,
    /// as `host:port=p,p;…` (`wire-ceiling`'s `BENCH_CEILING_LEADERS`);
    /// empty on Tansu, whose one broker leads them all.
    pub fn leaders(&self, topic: &str) -> String {
        let Some(kafka) = self.kafka else {
            return String::new();
        };
        let mut by: std::collections::BTreeMap<i32, Vec<String>> = Default::default();
        for (p, leader) in kafka.leaders(topic).into_iter().enumerate() {
            assert!(leader >= 0, "{topic}: partition {p} has no leader");
            by.entry(leader).or_default().push(p.to_string());
        }
        by.into_iter()
            .map(|(id, ps)| format!("{}={}", kafka.address(id), ps.join(",")))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Kafka keeps its logs on disk: a run's topic is deleted once read.
    pub fn done_with(&self, topic: &str) {
        if let Some(kafka) = self.kafka {
            kafka.delete_topic(topic);
        }
    }

    /// Sets the Kafka broker's finalized `transaction.version` (Kafka's
    /// `FeatureCommand`, as `kafka-features upgrade|downgrade`), and waits
    /// until the broker's own ApiVersions answers say it (what
    /// `describe` reads): the next producer started speaks that
    /// transaction protocol.
    pub fn set_transaction_version(&self, level: i16) {
        let Some(kafka) = self.kafka else {
            return;
        };
        let main = "org.apache.kafka.tools.FeatureCommand";
        let bootstrap = self.admin.as_str();
        let finalized = || -> i16 {
            let out = kafka.run(main, &["--bootstrap-server", bootstrap, "describe"]);
            out.lines()
                .find(|l| l.contains("Feature: transaction.version"))
                .and_then(|l| l.split("FinalizedVersionLevel:").nth(1))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let now = finalized();
        if now == level {
            return;
        }
        let verb = if level > now { "upgrade" } else { "downgrade" };
        let feature = format!("transaction.version={level}");
        kafka.run(
            main,
            &["--bootstrap-server", bootstrap, verb, "--feature", &feature],
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while finalized() != level {
            assert!(
                std::time::Instant::now() < deadline,
                "transaction.version did not become {level}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Each partition's log end offset (Kafka only; empty on Tansu): what
    /// [`Target::batch_fill`] counts from.
    pub fn end_offsets(&self, topic: &str, partitions: i32) -> Vec<i64> {
        self.kafka
            .map_or_else(Vec::new, |kafka| kafka.end_offsets(topic, partitions))
    }

    /// How full the batches were that `topic`'s leaders stored from
    /// `since` (each partition's [`Target::end_offsets`] before a run) on,
    /// as Kafka's `DumpLogSegments` reads them from the segment files: the
    /// brokers' own account of what a client sent, the same for every
    /// client. Each partition counts once, from the replica that holds
    /// most of it (followers store the leader's batches as they are);
    /// transaction markers (control batches) are not counted. `None` on
    /// Tansu.
    pub fn batch_fill(&self, topic: &str, since: &[i64]) -> Option<BatchFill> {
        let kafka = self.kafka?;
        let mut best: std::collections::BTreeMap<i32, (i64, BatchFill)> = Default::default();
        for ((partition, _broker), batches) in kafka.dump_log(topic) {
            let from = since.get(partition as usize).copied().unwrap_or(0);
            let mut fill = BatchFill::default();
            let mut end = -1;
            for b in &batches {
                end = end.max(b.last_offset);
                if b.base_offset < from || b.fields.get("isControl").is_some_and(|c| c == "true") {
                    continue;
                }
                fill.batches += 1;
                fill.records += b.count as u64;
                fill.bytes += b
                    .fields
                    .get("size")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
            let kept = best.entry(partition).or_insert((end, fill));
            if end > kept.0 {
                *kept = (end, fill);
            }
        }
        Some(
            best.into_values()
                .fold(BatchFill::default(), |sum, (_, f)| BatchFill {
                    batches: sum.batches + f.batches,
                    records: sum.records + f.records,
                    bytes: sum.bytes + f.bytes,
                }),
        )
    }

    /// The broker's CPU seconds so far.
    pub fn cpu(&self) -> f64 {
        cpu_of(self.pid)
    }

    /// Every broker's CPU seconds so far, summed (a Kafka cluster's
    /// brokers, or the one Tansu).
    pub fn brokers_cpu(&self) -> f64 {
        match self.kafka {
            Some(kafka) => kafka
                .broker_ids()
                .into_iter()
                .filter_map(|id| kafka.pid(id))
                .map(cpu_of)
                .sum(),
            None => self.cpu(),
        }
    }
}

/// Record batches a broker stored for one run ([`Target::batch_fill`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchFill {
    /// Batches stored.
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// Their stored bytes (headers included).
    pub bytes: u64,
}

impl BatchFill {
    /// Mean records a batch.
    pub fn records_per_batch(&self) -> f64 {
        self.records as f64 / self.batches.max(1) as f64
    }

    /// Mean KiB a batch.
    pub fn kib_per_batch(&self) -> f64 {
        self.bytes as f64 / 1024.0 / self.batches.max(1) as f64
    }
}

impl std::fmt::Display for BatchFill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} batches, {:.0} records / {:.1} KiB each",
            self.batches,
            self.records_per_batch(),
            self.kib_per_batch()
        )
    }
}

/// A process's CPU seconds so far (user + system), from /proc.
pub fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf reads a constant; no memory is involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// The processor's model name, from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The `cargo bench` command that ran `bench` with this process's
/// arguments (cargo adds a `--bench` of its own, left out; `always` goes
/// first, for a bench that needs it to measure rather than smoke-test),
/// quoted where the shell needs it, for the results to name.
pub fn command_line(bench: &str, always: &[&str]) -> String {
    let args: Vec<String> = always
        .iter()
        .map(|a| a.to_string())
        .chain(
            std::env::args()
                .skip(1)
                .filter(|a| !always.contains(&a.as_str()) && a != "--bench"),
        )
        .map(|a| {
            if a.contains([' ', '|']) {
                format!("\"{a}\"")
            } else {
                a
            }
        })
        .collect();
    format!(
        "cargo bench -p courier-side-by-side --bench {bench}{}{}",
        if args.is_empty() { "" } else { " -- " },
        args.join(" ")
    )
}

/// Puts the Apache Kafka brokers' data in memory (`/dev/shm`, where there
/// is one), unless `COURIER_KAFKA_DIR` already says where. On this
/// project's machines the first write into a new page of a sparse,
/// memory-mapped file on the disk's ext4 costs 2-9 ms of system time (3 µs
/// on tmpfs), and a Kafka partition pays it for its offset and time
/// indexes once its log passes `index.interval.bytes` (4 KiB): 20,000 such
/// writes at 10,000 partitions, charged to whichever client's run passed
/// that mark. Call it first thing in `main`, before any thread starts.
pub fn kafka_data_in_memory() {
    if std::env::var_os("COURIER_KAFKA_DIR").is_none() && std::path::Path::new("/dev/shm").is_dir()
    {
        std::env::set_var("COURIER_KAFKA_DIR", "/dev/shm/courier-kafka");
    }
}

/// Today's date, `YYYY-MM-DD`.
pub fn today() -> String {
    Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The heading above which a results page in `docs/benchmarks/` is the
/// bench's to rewrite: everything from it on (notes on the runs, earlier
/// runs, each under its date) is written by hand and kept.
pub const HISTORY: &str = "\n## History\n";

/// `md`, a page the bench wrote, followed by the `## History` section of
/// the page at `path` as it stands, so that a new run replaces the result
/// at the top and keeps the dated history below it. Move the replaced
/// result's summary into the history by hand, under its date.
pub fn with_history(path: &std::path::Path, mut md: String) -> String {
    if let Ok(old) = std::fs::read_to_string(path) {
        if let Some(at) = old.find(HISTORY) {
            if !md.ends_with('\n') {
                md.push('\n');
            }
            md.push_str(&old[at..]);
        }
    }
    md
}

/// This process's peak RSS since exec, in KiB (`VmHWM`). A child reports
/// it at exit: `wait4`'s `ru_maxrss` is no good for that, since Linux
/// carries the parent's peak across fork and exec, so every child would
/// report the bench's own peak.
pub fn peak_rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// A finished child process: its stdout, exit status, CPU and wall time.
pub struct Finished {
    /// Everything it wrote to stdout.
    pub out: String,
    /// `wait4`'s status word.
    pub status: i32,
    /// User + system seconds, its waited-for children's included.
    pub cpu: f64,
    /// Its `ru_maxrss` in KiB (see [`peak_rss_kib`] for when that is not
    /// the process's own).
    pub max_rss_kib: i64,
    /// Seconds from spawn to exit.
    pub wall: f64,
}

impl Finished {
    /// Whether it exited with one of `codes`.
    pub fn exited_with(&self, codes: &[i32]) -> bool {
        libc::WIFEXITED(self.status) && codes.contains(&libc::WEXITSTATUS(self.status))
    }
}

/// Runs `cmd` with its stdout piped, reads that to the end, and reaps the
/// child with `wait4` for its rusage (CPU time is the whole process's,
/// every thread's, user + system).
// The child is reaped by `libc::wait4` (for its rusage), not `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn run_child(mut cmd: Command) -> Finished {
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as i32;
    let mut out = String::new();
    use std::io::Read;
    child.stdout.unwrap().read_to_string(&mut out).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain old data, written by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid, with valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Finished {
        out,
        status,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss,
        wall: started.elapsed().as_secs_f64(),
    }
}

/// Where [`run_child_fields`] sends a child's stderr.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChildStderr {
    /// The bench's own stderr: the child's shows as it runs.
    Shown,
    /// A temporary file, removed once the child is done: a failure's
    /// [`ChildFailed::stderr_tail`].
    Kept,
}

/// How many of a failed child's last stderr lines [`ChildFailed`] keeps.
const STDERR_TAIL: usize = 5;

/// A child that did not exit 0 ([`run_child_fields`]).
pub struct ChildFailed {
    /// Its stdout, exit status and times.
    pub done: Finished,
    /// The last [`STDERR_TAIL`] lines of its stderr, oldest first (none
    /// with [`ChildStderr::Shown`]).
    pub stderr_tail: Vec<String>,
}

impl ChildFailed {
    /// `exit status 0x… after … s; stderr: ` and the stderr tail, oldest
    /// first, joined by ` / `.
    pub fn why(&self) -> String {
        format!(
            "exit status {:#x} after {:.1} s; stderr: {}",
            self.done.status,
            self.done.wall,
            self.stderr_tail.join(" / ")
        )
    }
}

/// Runs `cmd` as [`run_child`] does, its stderr where `stderr` says, and
/// reads its stdout as `N` numbers separated by white space: a missing one,
/// or one that does not parse, is 0; any past the `N`th are left out. An
/// error: the child did not exit 0.
pub fn run_child_fields<const N: usize>(
    mut cmd: Command,
    stderr: ChildStderr,
) -> Result<(Finished, [f64; N]), ChildFailed> {
    let stderr_path = (stderr == ChildStderr::Kept)
        .then(|| std::env::temp_dir().join(format!("courier-child-{}.err", std::process::id())));
    if let Some(path) = &stderr_path {
        cmd.stderr(std::fs::File::create(path).unwrap());
    }
    let done = run_child(cmd);
    let err = stderr_path.map_or_else(String::new, |path| {
        let err = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        err
    });
    if !done.exited_with(&[0]) {
        let mut stderr_tail: Vec<String> = err
            .lines()
            .rev()
            .take(STDERR_TAIL)
            .map(str::to_string)
            .collect();
        stderr_tail.reverse();
        return Err(ChildFailed { done, stderr_tail });
    }
    let mut fields = [0.0; N];
    for (field, v) in fields.iter_mut().zip(done.out.split_whitespace()) {
        *field = v.parse().unwrap_or(0.0);
    }
    Ok((done, fields))
}

/// The median, minimum and maximum of `v` (not empty); the median of an
/// even count is the upper middle value.
pub fn med_min_max(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// The `qs` quantiles of `v` (nearest rank); zeros when `v` is empty.
pub fn percentiles<const N: usize>(mut v: Vec<u64>, qs: [f64; N]) -> [f64; N] {
    if v.is_empty() {
        return [0.0; N];
    }
    v.sort_unstable();
    qs.map(|q| v[((v.len() - 1) as f64 * q).round() as usize] as f64)
}

/// The bench's own arguments (after `--`), as the benches read them:
/// `--name` flags and `--name value` pairs.
pub struct Args(pub Vec<String>);

impl Args {
    /// The start of each bench's `main`. In a child (the bench starting
    /// itself as `--child …`): runs `child` with the arguments after
    /// `--child`, and gives `None` (`main` returns). In the bench itself:
    /// puts Kafka's data in memory ([`kafka_data_in_memory`], before any
    /// thread starts) and gives its arguments.
    pub fn bench_or_child(child: fn(&[String])) -> Option<Args> {
        let args = Args::from_env();
        if args.0.first().map(String::as_str) == Some("--child") {
            child(&args.0[1..]);
            return None;
        }
        kafka_data_in_memory();
        Some(args)
    }

    /// This process's arguments, without the program name.
    pub fn from_env() -> Self {
        Args(std::env::args().skip(1).collect())
    }

    /// Whether `name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }

    /// The argument after `name`, if any.
    pub fn value(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.0.get(i + 1))
            .cloned()
    }

    /// Whether this is the smoke version: `cargo bench` passes `--bench`;
    /// `cargo test --benches` runs the binary without it.
    pub fn smoke(&self) -> bool {
        self.flag("--smoke") || !self.flag("--bench")
    }

    /// The argument after `name` as a `T`; where there is none, or it does
    /// not parse, `smoke` in the smoke version ([`Args::smoke`]) and
    /// `bench` otherwise.
    pub fn number<T: std::str::FromStr>(&self, name: &str, smoke: T, bench: T) -> T {
        self.value(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(if self.smoke() { smoke } else { bench })
    }
}

/// The median of `v` (NaN when empty is not allowed: `v` has a value).
pub fn median(v: Vec<f64>) -> f64 {
    med_min_max(v).0
}

/// A client's line on a chart: its name, colour and (x, y) points.
pub type Line = (&'static str, plotters::style::RGBColor, Vec<(f64, f64)>);

/// Each client's medians against the points (`x`, samples by client):
/// one line of `(x, median of y)` a client, in `colors`' order.
pub fn median_lines<S>(
    results: &[(usize, std::collections::BTreeMap<&str, Vec<S>>)],
    colors: &[(&'static str, plotters::style::RGBColor)],
    y: impl Fn(&S) -> f64,
) -> Vec<Line> {
    colors
        .iter()
        .map(|&(client, color)| {
            let pts = results
                .iter()
                .filter_map(|(n, by)| {
                    let s = by.get(client).filter(|s| !s.is_empty())?;
                    Some((*n as f64, median(s.iter().map(&y).collect())))
                })
                .collect();
            (client, color, pts)
        })
        .collect()
}

/// Four log–log panels, 2 × 2, as an SVG: each a caption and its lines
/// (a client's name, colour and points) against `x_desc`. Values at or
/// below zero sit on the panel's floor.
pub fn chart_2x2(title: &str, x_desc: &str, panels: Vec<(&str, Vec<Line>)>) -> String {
    use plotters::prelude::*;
    let x1 = panels
        .iter()
        .flat_map(|(_, lines)| lines.iter().flat_map(|(_, _, p)| p.iter().map(|&(x, _)| x)))
        .fold(10.0, f64::max);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 700)).into_drawing_area();
        root.fill(&WHITE).unwrap();
        let root = root.titled(title, ("sans-serif", 16)).unwrap();
        for (area, (caption, lines)) in root.split_evenly((2, 2)).iter().zip(panels) {
            let ys: Vec<f64> = lines
                .iter()
                .flat_map(|(_, _, p)| p.iter().map(|&(_, y)| y))
                .filter(|y| *y > 0.0)
                .collect();
            let y0 = ys.iter().copied().fold(f64::MAX, f64::min).min(1.0) / 1.5;
            let y1 = ys.iter().copied().fold(1.0, f64::max) * 1.5;
            let mut c = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d((0.7..x1 * 1.5).log_scale(), (y0..y1).log_scale())
                .unwrap();
            c.configure_mesh().x_desc(x_desc).draw().unwrap();
            for (name, color, pts) in &lines {
                draw_line(&mut c, name, *color, 2, 3, pts, y0);
            }
            draw_legend(&mut c);
        }
        root.present().unwrap();
    }
    out
}

/// A log–log chart panel of `chart_2x2` and the curves bench.
pub type LogLog<'a, 'b> = plotters::chart::ChartContext<
    'a,
    plotters::backend::SVGBackend<'b>,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

/// Draws one client's line on `c`, `width` pixels wide with points of
/// `point_size`, labelled `name` for the legend; values below `y0` sit on
/// the panel's floor.
pub fn draw_line<'b>(
    c: &mut LogLog<'b, 'b>,
    name: &str,
    color: plotters::style::RGBColor,
    width: u32,
    point_size: u32,
    pts: &[(f64, f64)],
    y0: f64,
) {
    use plotters::prelude::*;
    let pts: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x, y.max(y0))).collect();
    c.draw_series(LineSeries::new(pts, color.stroke_width(width)).point_size(point_size))
        .unwrap()
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
}

/// Draws `c`'s legend in its upper left corner.
pub fn draw_legend<'b>(c: &mut LogLog<'b, 'b>) {
    use plotters::prelude::*;
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .unwrap();
}
