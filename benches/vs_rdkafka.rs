//! Courier side by side with rust-rdkafka (librdkafka), in one run, on one
//! Tansu broker that this bench starts itself.
//!
//! ```text
//! cargo bench --bench vs_rdkafka                 # the main comparison, 5 alternating runs each
//! cargo bench --bench vs_rdkafka -- --runs 3 --records 200000
//! cargo bench --bench vs_rdkafka -- --smoke      # seconds; what CI runs (no timing claims)
//! ```
//!
//! Each client runs in a child process (this binary with `--child`), so
//! CPU time is the whole client's (user + sys, from `wait4`'s rusage) and
//! peak RSS is the child's own (`VmHWM`, which it reports at exit).
//! Clients alternate A B C … A B C … so drift on a noisy machine spreads
//! over all of them. Tansu's own CPU per run is read from /proc. Every
//! client's delivered count comes from its success reports; the first run
//! of each client is read back with the rdkafka consumer and a client that
//! lost records is flagged, not just timed. Results: a markdown table and
//! an SVG chart in `docs/benchmarks/`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
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
    fn key(self, i: usize) -> Option<String> {
        match self {
            Keys::None => None,
            Keys::Thousand => Some(format!("k{}", i % 1000)),
            Keys::Yow => Some("yow".into()),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let flag = |name: &str| args.iter().any(|a| a == name);
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // binary without it, and then only the smoke version runs.
    let smoke = flag("--smoke") || !flag("--bench");
    let runs: usize = value("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 1 } else { 5 });
    let records: usize = value("--records")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 20_000 } else { 1_000_000 });

    let mut workloads = vec![
        Workload {
            name: format!("{records} x 100 B, 6 partitions, no keys, linger 100 ms, acks=all"),
            records,
            size: 100,
            partitions: 6,
            linger_ms: 100,
            acks: "all",
            compression: "none",
            keys: Keys::None,
        },
        Workload {
            name: format!(
                "{records} x 100 B, 6 partitions, keys k0..k999, linger 100 ms, acks=all"
            ),
            records,
            size: 100,
            partitions: 6,
            linger_ms: 100,
            acks: "all",
            compression: "none",
            keys: Keys::Thousand,
        },
    ];
    if !smoke {
        workloads.push(Workload {
            name: "seed: 100000 records, key yow, linger 100 ms".into(),
            records: 100_000,
            size: 0,
            partitions: 6,
            linger_ms: 100,
            acks: "all",
            compression: "none",
            keys: Keys::Yow,
        });
    }

    let tansu = Broker::start();
    let mut table: Vec<(String, String, Stats)> = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        eprintln!("== {}", w.name);
        let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for run in 0..runs {
            for client in CLIENTS {
                let topic = format!("bench-{wi}-{client}-{run}");
                create_topic(&tansu.addr, &topic, w.partitions);
                let broker_cpu_before = tansu.cpu();
                let s = run_child(&tansu.addr, &topic, client, w);
                let broker_cpu = tansu.cpu() - broker_cpu_before;
                let mut s = s;
                s.broker_cpu = broker_cpu;
                if run == 0 {
                    s.verified = Some(count_in_log(&tansu.addr, &topic, w.partitions, w.records));
                }
                eprintln!(
                    "  run {run} {client:<20} {:>9.0} msg/s  cpu {:>6.3} µs/msg  rss {:>5} MiB  delivered {}{}",
                    s.rate(w.records),
                    s.cpu_us_per_msg(w.records),
                    s.max_rss_kib / 1024,
                    s.delivered,
                    s.verified.map_or(String::new(), |v| format!("  (log: {v})"))
                );
                samples.entry(client).or_default().push(s);
            }
        }
        for client in CLIENTS {
            let stats = Stats::of(&samples[client], w.records);
            table.push((w.name.clone(), client.to_string(), stats));
        }
    }
    drop(tansu);
    if smoke {
        // Only that every client ran and none lost records: no timing claims.
        for (w, c, s) in &table {
            assert!(s.lost == 0, "{c} lost records in {w}");
        }
        println!(
            "vs_rdkafka smoke: {} client runs, all delivered",
            table.len()
        );
        return;
    }
    write_results(&table, runs);
}

#[derive(Clone, Debug, Default)]
struct Sample {
    wall: f64,
    cpu: f64,
    max_rss_kib: i64,
    delivered: usize,
    verified: Option<usize>,
    broker_cpu: f64,
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
    lost: usize,
}

fn med_min_max(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

impl Stats {
    fn of(s: &[Sample], n: usize) -> Stats {
        Stats {
            rate: med_min_max(s.iter().map(|x| x.rate(n)).collect()),
            cpu_us: med_min_max(s.iter().map(|x| x.cpu_us_per_msg(n)).collect()),
            rss_mib: med_min_max(s.iter().map(|x| x.max_rss_kib as f64 / 1024.0).collect()),
            broker_cpu: med_min_max(s.iter().map(|x| x.broker_cpu).collect()).0,
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

fn write_results(table: &[(String, String, Stats)], runs: usize) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks");
    std::fs::create_dir_all(&dir).unwrap();
    let mut md = String::new();
    let date = Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    md.push_str(&format!(
        "# Courier vs rust-rdkafka\n\nRun on {date}: `cargo bench --bench vs_rdkafka` ({runs} alternating runs per client; medians, with min–max).\n\
         Machine: {} cores, {}; broker: Tansu 0.6.0 (memory storage) on the same machine; rdkafka 0.38 (librdkafka 2.12.1).\n\
         Every report is consumed; CPU is the client process's user+sys time per message; RSS is its peak.\n\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model()
    ));
    let mut current = String::new();
    for (w, c, s) in table {
        if *w != current {
            current = w.clone();
            md.push_str(&format!("\n## {w}\n\n| client | msgs/s | client CPU µs/msg | peak RSS MiB | broker CPU s/run | lost |\n|---|---|---|---|---|---|\n"));
        }
        md.push_str(&format!(
            "| {c} | {:.0} ({:.0}–{:.0}) | {:.3} ({:.3}–{:.3}) | {:.0} ({:.0}–{:.0}) | {:.2} | {} |\n",
            s.rate.0, s.rate.1, s.rate.2, s.cpu_us.0, s.cpu_us.1, s.cpu_us.2, s.rss_mib.0, s.rss_mib.1, s.rss_mib.2, s.broker_cpu, s.lost
        ));
    }
    // Ratios against rdkafka's BaseProducer, per workload.
    md.push_str("\n## Ratios (median / median)\n\n| workload | courier-stream ÷ rdkafka-base msgs/s | courier-stream ÷ rdkafka-base CPU | courier-send ÷ rdkafka-future msgs/s | courier-stream ÷ courier-no-reports msgs/s |\n|---|---|---|---|---|\n");
    let find = |w: &str, c: &str| {
        table
            .iter()
            .find(|(tw, tc, _)| tw == w && tc == c)
            .map(|(_, _, s)| s)
    };
    let mut seen = Vec::new();
    for (w, _, _) in table {
        if seen.contains(w) {
            continue;
        }
        seen.push(w.clone());
        let (Some(cs), Some(rb), Some(cf), Some(rf), Some(cn)) = (
            find(w, "courier-stream"),
            find(w, "rdkafka-base"),
            find(w, "courier-send"),
            find(w, "rdkafka-future"),
            find(w, "courier-no-reports"),
        ) else {
            continue;
        };
        md.push_str(&format!(
            "| {w} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            cs.rate.0 / rb.rate.0,
            cs.cpu_us.0 / rb.cpu_us.0,
            cf.rate.0 / rf.rate.0,
            cs.rate.0 / cn.rate.0
        ));
    }
    std::fs::write(dir.join("results.md"), &md).unwrap();
    std::fs::write(dir.join("throughput.svg"), svg(table)).unwrap();
    println!("{md}");
    eprintln!("wrote docs/benchmarks/results.md and throughput.svg");
}

/// A plain SVG bar chart of median throughput, one group per workload.
fn svg(table: &[(String, String, Stats)]) -> String {
    let max = table.iter().map(|(_, _, s)| s.rate.0).fold(1.0, f64::max);
    let bar_h = 16.0;
    let mut y = 30.0;
    let mut body = String::new();
    let mut current = String::new();
    for (w, c, s) in table {
        if *w != current {
            current = w.clone();
            y += 14.0;
            body.push_str(&format!(
                "<text x=\"10\" y=\"{y}\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                esc(w)
            ));
            y += 8.0;
        }
        let width = 520.0 * s.rate.0 / max;
        let color = if c.starts_with("courier") {
            "#2b6cb0"
        } else {
            "#c05621"
        };
        body.push_str(&format!(
            "<text x=\"10\" y=\"{}\" font-size=\"12\">{c}</text><rect x=\"170\" y=\"{}\" width=\"{width:.1}\" height=\"{}\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\">{:.0} msg/s</text>\n",
            y + 12.0,
            y,
            bar_h - 3.0,
            175.0 + width,
            y + 11.0,
            s.rate.0
        ));
        y += bar_h;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"{}\" font-family=\"sans-serif\">\n<text x=\"10\" y=\"20\" font-size=\"15\">Median throughput, every report consumed (Courier blue, rdkafka orange)</text>\n{body}</svg>\n",
        y + 20.0
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Runs one client in a child process; its CPU time from wait4.
// The child is reaped by `libc::wait4` (for its rusage), not `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_child(addr: &str, topic: &str, client: &str, w: &Workload) -> Sample {
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let child = Command::new(exe)
        .args(["--child", client, addr, topic])
        .args([
            w.records.to_string(),
            w.size.to_string(),
            w.linger_ms.to_string(),
        ])
        .args([w.acks, w.compression, w.keys.name()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn bench child");
    let pid = child.id() as i32;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // The child writes one short line, well under a pipe buffer: waiting
    // before reading cannot deadlock.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let wall_outer = started.elapsed().as_secs_f64();
    let mut out = String::new();
    use std::io::Read;
    child.stdout.unwrap().read_to_string(&mut out).unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{client} failed: {out}"
    );
    let mut fields = out.split_whitespace();
    let wall: f64 = fields
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(wall_outer);
    let delivered: usize = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let hwm_kib: i64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Sample {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_kib: hwm_kib,
        delivered,
        verified: None,
        broker_cpu: 0.0,
    }
}

/// Child: produce and consume every report; print "wall_seconds delivered".
fn child(args: &[String]) {
    let client = args[0].as_str();
    let addr = args[1].clone();
    let topic = args[2].clone();
    let n: usize = args[3].parse().unwrap();
    let size: usize = args[4].parse().unwrap();
    let linger = args[5].clone();
    let acks = args[6].clone();
    let compression = args[7].clone();
    let keys = Keys::parse(&args[8]);
    let payload = vec![b'x'; size];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (wall, delivered) = match client {
        c if c.starts_with("courier") => rt.block_on(courier_client(
            c,
            &addr,
            &topic,
            n,
            &payload,
            &linger,
            &acks,
            &compression,
            keys,
        )),
        "rdkafka-base" => rdkafka_base(
            &addr,
            &topic,
            n,
            &payload,
            &linger,
            &acks,
            &compression,
            keys,
        ),
        "rdkafka-future" => rt.block_on(rdkafka_future(
            &addr,
            &topic,
            n,
            &payload,
            &linger,
            &acks,
            &compression,
            keys,
        )),
        other => panic!("unknown client {other}"),
    };
    // Peak RSS of this process's own memory since exec. (wait4's
    // ru_maxrss is no good here: Linux carries the parent's peak across
    // fork and exec, so every child would report the bench's own peak.)
    let hwm_kib: i64 = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    println!("{wall} {delivered} {hwm_kib}");
}

#[allow(clippy::too_many_arguments)]
async fn courier_client(
    client: &str,
    addr: &str,
    topic: &str,
    n: usize,
    payload: &[u8],
    linger: &str,
    acks: &str,
    compression: &str,
    keys: Keys,
) -> (f64, usize) {
    use courier::{DeliveryReport, Producer, Record, ReportMode, Topic};
    use futures::StreamExt;
    let producer = Producer::builder()
        .bootstrap(addr)
        .set("linger.ms", linger)
        .set("acks", acks)
        .set("compression.type", compression)
        .set("batch.size", "1000000")
        .set("buffer.memory", "268435456")
        .build()
        .unwrap();
    let topic = Topic::from(topic);
    let value = bytes::Bytes::copy_from_slice(payload);
    let key_of = |i: usize| keys.key(i).map(bytes::Bytes::from);
    let record = |i: usize| Record {
        topic,
        partition: None,
        key: key_of(i),
        value: Some(value.clone()),
        headers: Vec::new(),
        timestamp: None,
    };
    // Metadata first, outside the timing, as rdkafka's clients also fetch it before producing.
    let _ = producer.send(Record::to(topic).value("warm")).await;
    let start = Instant::now();
    let delivered = match client {
        "courier-stream" | "courier-errors-only" => {
            let mode = if client == "courier-stream" {
                ReportMode::All
            } else {
                ReportMode::ErrorsOnly
            };
            let (sub, mut stream) = producer.subscribe_with_capacity(mode, 1_000_000);
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
        "courier-stream-batch" => {
            // The batch APIs: records handed over 1,000 at a time, reports
            // read a batch at a time. Every report is still consumed.
            let (sub, mut stream) = producer.subscribe_with_capacity(ReportMode::All, 1_000_000);
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
    (wall, delivered)
}

fn rdkafka_config(
    addr: &str,
    linger: &str,
    acks: &str,
    compression: &str,
) -> rdkafka::ClientConfig {
    let mut c = rdkafka::ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("linger.ms", linger)
        .set("acks", acks)
        .set("compression.type", compression)
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("partitioner", "murmur2_random");
    c
}

#[allow(clippy::too_many_arguments)]
fn rdkafka_base(
    addr: &str,
    topic: &str,
    n: usize,
    payload: &[u8],
    linger: &str,
    acks: &str,
    compression: &str,
    keys: Keys,
) -> (f64, usize) {
    use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Count(AtomicUsize);
    impl rdkafka::ClientContext for Count {}
    impl ProducerContext for Count {
        type DeliveryOpaque = ();
        fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
            if r.is_ok() {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let p: BaseProducer<Count> = rdkafka_config(addr, linger, acks, compression)
        .create_with_context(Count(AtomicUsize::new(0)))
        .unwrap();
    let _ = p
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(10));
    let start = Instant::now();
    for i in 0..n {
        let key = keys.key(i);
        let mut rec = BaseRecord::to(topic).payload(payload);
        if let Some(k) = &key {
            rec = rec.key(k.as_str());
        }
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    p.poll(Duration::from_millis(1));
                    rec = back;
                }
            }
        }
        if i % 1000 == 0 {
            p.poll(Duration::ZERO);
        }
    }
    p.flush(Duration::from_secs(120)).unwrap();
    let wall = start.elapsed().as_secs_f64();
    (wall, p.context().0.load(Ordering::Relaxed))
}

#[allow(clippy::too_many_arguments)]
async fn rdkafka_future(
    addr: &str,
    topic: &str,
    n: usize,
    payload: &[u8],
    linger: &str,
    acks: &str,
    compression: &str,
    keys: Keys,
) -> (f64, usize) {
    use futures::StreamExt;
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    let p: FutureProducer = rdkafka_config(addr, linger, acks, compression)
        .create()
        .unwrap();
    let _ = p
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(10));
    let start = Instant::now();
    let keys_v: Vec<Option<String>> = (0..n).map(|i| keys.key(i)).collect();
    let futs: futures::stream::FuturesUnordered<_> = (0..n)
        .map(|i| {
            let mut rec = FutureRecord::<str, [u8]>::to(topic).payload(payload);
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
    let wall = start.elapsed().as_secs_f64();
    (wall, ok)
}

/// A Tansu broker for the whole bench.
struct Broker {
    child: std::process::Child,
    addr: String,
}

impl Broker {
    fn start() -> Broker {
        let bin = std::env::var_os("COURIER_TANSU")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/tansu")
            });
        assert!(
            bin.exists(),
            "run `bash scripts/install-tools.sh` first (Tansu not at {})",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
                "--storage-engine",
                "memory://tansu/",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "Tansu did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Broker { child, addr }
    }

    /// The broker's CPU seconds so far (user + system), from /proc.
    fn cpu(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks(11) + ticks(12)) / hz
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn create_topic(addr: &str, topic: &str, partitions: i32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(courier::admin::create_topic(addr, topic, partitions, 1))
        .expect("create topic");
}

/// Records in the topic, read back with the rdkafka consumer (the warm-up
/// record of Courier's clients excluded).
fn count_in_log(addr: &str, topic: &str, partitions: i32, expected: usize) -> usize {
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
    let mut n = 0;
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(3) && n < expected + 1 {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            last = Instant::now();
            if m.payload() != Some(b"warm".as_slice()) {
                n += 1;
            }
        }
    }
    let _ = std::io::stderr().flush();
    n
}
