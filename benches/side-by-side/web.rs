//! The seed's own case (issue 33, item 6): an actix-web service whose
//! handler produces one record (100 B) and answers with its delivery
//! report, on Courier and on rust-rdkafka's `FutureProducer`, driven by
//! `wrk` over C keep-alive connections, on a broker this bench starts.
//!
//! ```text
//! cargo bench -p courier-side-by-side --bench web -- --bench                  # Tansu, 3 runs a point
//! cargo bench -p courier-side-by-side --bench web -- --bench --broker kafka   # one Apache Kafka broker
//! cargo bench -p courier-side-by-side --bench web -- --bench --connections 300 --seconds 10  # a probe: printed, not written
//! cargo bench -p courier-side-by-side --bench web -- --smoke                  # seconds; what CI runs (no timing claims)
//! ```
//!
//! Each client's service is a child process (this binary with
//! `--child`): one actix-web worker, as a service on one core would run,
//! each request producing one record and waiting for its report before
//! it answers (200 with the offset, 500 with the error). Courier's
//! producer starts in that worker's actix system (`ProducerBuilder::start`
//! in the app factory), its actors on the worker's thread; the
//! `FutureProducer` is made once and shared, librdkafka's threads its own.
//! `courier-own-thread` is Courier built that way too: once, beforehand,
//! on an actor thread of its own (`ProducerBuilder::build`), and shared.
//! All at their defaults, with `linger.ms=5` and `acks=all` set alike.
//!
//! `wrk -t1 -cC -dS --latency` gives requests a second and the latency
//! percentiles; the service's CPU per request is its process's user+sys
//! time over wrk's run. Clients alternate, each round starting with the
//! next; the tables show medians. A run with a non-2xx answer or a socket
//! error is flagged. `wrk` comes from `scripts/install-tools.sh`; the
//! bench fails, never skips, without it.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOPIC: &str = "web";
const PARTITIONS: i32 = 6;
/// `courier`: started in the worker's actix system (`start`);
/// `courier-own-thread`: built once with its own actor thread (`build`)
/// and shared, as `FutureProducer` is.
const CLIENTS: &[&str] = &["courier", "courier-own-thread", "rdkafka"];
/// Bytes of each record's value.
const VALUE: usize = 100;
const LINGER_MS: &str = "5";
const ACKS: &str = "all";
/// A service that has not said its port by then has failed to start.
const START_LIMIT: Duration = Duration::from_secs(60);
/// A service still running then exits on its own (the bench stops each
/// after its run; this outlives a bench that was killed).
const SERVICE_LIMIT: Duration = Duration::from_secs(600);

/// What one wrk run against one service measured.
#[derive(Clone, Debug, Default)]
struct Sample {
    /// Requests a second (wrk's `Requests/sec`).
    rate: f64,
    /// Latency percentiles, µs.
    p50_us: f64,
    p99_us: f64,
    /// The service's CPU µs per answered request.
    cpu_us: f64,
    /// Non-2xx answers and socket errors (connect, read, write, timeout).
    errors: u64,
    /// Requests answered.
    requests: u64,
}

fn main() {
    let Some(args) = common::Args::bench_or_child(child) else {
        return;
    };
    let smoke = args.smoke();
    let runs: usize = args.number("--runs", 1, 3);
    let seconds: u64 = args.number("--seconds", 1, 5);
    let given = args.value("--connections");
    let conns: Vec<usize> = given
        .as_ref()
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| {
            if smoke {
                vec![10]
            } else {
                vec![1, 10, 100, 300]
            }
        });
    let kafka = args.value("--broker").as_deref() == Some("kafka");
    let wrk = which_wrk();
    let target = common::Target::start(if kafka {
        common::On::Kafka
    } else {
        common::On::Tansu
    });
    target.create_topic(TOPIC, PARTITIONS);
    let started = Instant::now();
    let mut results: Vec<(usize, BTreeMap<&str, Vec<Sample>>)> = Vec::new();
    for &c in &conns {
        eprintln!("== {c} connection(s)");
        let mut by: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for run in 0..runs {
            let first = run % CLIENTS.len();
            for &client in CLIENTS[first..].iter().chain(&CLIENTS[..first]) {
                let s = measure(&target, &wrk, client, c, seconds)
                    .unwrap_or_else(|e| panic!("{client} at {c} connections: {e}"));
                eprintln!(
                    "  run {run} {client:<8} {:>8.0} req/s  p50 {:>7.0} µs  p99 {:>7.0} µs  cpu {:>7.1} µs/req  errors {}",
                    s.rate, s.p50_us, s.p99_us, s.cpu_us, s.errors
                );
                by.entry(client).or_default().push(s);
            }
        }
        results.push((c, by));
    }
    if smoke {
        for (c, by) in &results {
            for (client, samples) in by {
                for s in samples {
                    assert!(s.requests > 0, "{client} at {c}: no request answered");
                    assert_eq!(s.errors, 0, "{client} at {c}: errors");
                }
            }
        }
        assert!(chart(&results).contains("<svg"), "no chart");
        println!(
            "web smoke: {} point(s), every service answered every request",
            results.len()
        );
        return;
    }
    let md = page(&results, runs, seconds, kafka, started.elapsed());
    println!("{md}");
    if given.is_some() {
        eprintln!("--connections: a probe; nothing written");
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks");
    let name = if kafka { "web-kafka" } else { "web" };
    let path = dir.join(format!("{name}.md"));
    std::fs::write(&path, common::with_history(&path, md)).unwrap();
    std::fs::write(dir.join(format!("{name}.svg")), chart(&results)).unwrap();
    eprintln!("wrote docs/benchmarks/{name}.md");
}

/// `wrk` on PATH; a clear failure without it.
fn which_wrk() -> String {
    let ok = Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("wrk"));
    assert!(
        ok,
        "wrk not found on PATH: `bash scripts/install-tools.sh wrk` installs it"
    );
    "wrk".to_string()
}

/// Starts `client`'s service, warms it (one request: the topic's
/// metadata), loads it with wrk and stops it.
fn measure(
    target: &common::Target,
    wrk: &str,
    client: &str,
    conns: usize,
    seconds: u64,
) -> Result<Sample, String> {
    let mut service = Service::start(client, &target.connect)?;
    let port = service.port;
    let answer = get(port).map_err(|e| format!("warm-up request: {e}"))?;
    if !answer.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "warm-up request answered {}",
            answer.lines().next().unwrap_or("")
        ));
    }
    let cpu0 = common::cpu_of(service.child.id());
    let out = Command::new(wrk)
        .args([
            "-t1".to_string(),
            format!("-c{conns}"),
            format!("-d{seconds}s"),
            "--timeout".into(),
            "10s".into(),
            "--latency".into(),
            format!("http://127.0.0.1:{port}/"),
        ])
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let cpu = common::cpu_of(service.child.id()) - cpu0;
    service.stop();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("wrk failed: {text}{err}"));
    }
    let mut s = parse_wrk(&text).ok_or_else(|| format!("wrk's output not understood:\n{text}"))?;
    s.cpu_us = cpu * 1e6 / s.requests.max(1) as f64;
    Ok(s)
}

/// A service child: its process and the port it listens on.
struct Service {
    child: Child,
    port: u16,
}

impl Service {
    fn start(client: &str, bootstrap: &str) -> Result<Service, String> {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--child", client, bootstrap, TOPIC])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the service: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let port = rx
            .recv_timeout(START_LIMIT)
            .ok()
            .and_then(|l| l.trim().parse().ok());
        match port {
            Some(port) => Ok(Service { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err("the service did not say its port".into())
            }
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `GET /` on a connection of its own; the whole answer.
fn get(port: u16) -> std::io::Result<String> {
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    conn.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)?;
    Ok(answer)
}

/// wrk's summary: requests a second, the 50 % and 99 % latencies, the
/// requests, and the errors it counted.
fn parse_wrk(text: &str) -> Option<Sample> {
    let mut s = Sample::default();
    let (mut p50, mut p99, mut rate) = (None, None, None);
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("50%") => p50 = words.next().and_then(duration_us),
            Some("99%") => p99 = words.next().and_then(duration_us),
            Some("Requests/sec:") => rate = words.next().and_then(|v| v.parse().ok()),
            Some("Non-2xx") => s.errors += line.rsplit(' ').next()?.parse::<u64>().ok()?,
            Some("Socket") => {
                // "Socket errors: connect 0, read 0, write 0, timeout 0"
                s.errors += line
                    .split([' ', ','])
                    .filter_map(|w| w.parse::<u64>().ok())
                    .sum::<u64>();
            }
            Some(n) if line.contains(" requests in ") => s.requests = n.parse().ok()?,
            _ => {}
        }
    }
    s.p50_us = p50?;
    s.p99_us = p99?;
    s.rate = rate?;
    Some(s)
}

/// A wrk duration (`812.00us`, `5.83ms`, `1.02s`) in µs.
fn duration_us(v: &str) -> Option<f64> {
    let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => n,
        "ms" => n * 1e3,
        "s" => n * 1e6,
        "m" => n * 60e6,
        _ => return None,
    })
}

/// The child: `--child <client> <bootstrap> <topic>`. Serves until
/// killed, after printing its port.
fn child(args: &[String]) {
    let (client, bootstrap, topic) = (args[0].clone(), args[1].clone(), args[2].clone());
    std::thread::spawn(|| {
        std::thread::sleep(SERVICE_LIMIT);
        eprintln!("service still running after {} s", SERVICE_LIMIT.as_secs());
        std::process::exit(3);
    });
    actix_web::rt::System::new()
        .block_on(async move {
            match client.as_str() {
                "courier" => courier_server(bootstrap, topic, false).await,
                "courier-own-thread" => courier_server(bootstrap, topic, true).await,
                "rdkafka" => rdkafka_server(&bootstrap, topic).await,
                other => panic!("unknown client {other}"),
            }
        })
        .unwrap();
}

/// Tells the bench where the service listens (its first line out).
fn say_port(addrs: &[std::net::SocketAddr]) {
    println!("{}", addrs[0].port());
    std::io::stdout().flush().unwrap();
}

/// What each Courier handler holds: the worker's producer and the value.
struct CourierApp {
    producer: courier_kafka::Producer,
    topic: courier_kafka::Topic,
    value: bytes::Bytes,
}

/// One actix-web worker. Its app factory starts the producer in the
/// worker's actix system, so its actors share the worker's thread; or,
/// with `own_thread`, one producer built beforehand on a thread of its
/// own is shared.
async fn courier_server(bootstrap: String, topic: String, own_thread: bool) -> std::io::Result<()> {
    use actix_web::{web, App, HttpServer};
    let value = bytes::Bytes::from(vec![b'x'; VALUE]);
    let builder = move || {
        courier_kafka::Producer::builder()
            .bootstrap(&bootstrap)
            .set("linger.ms", LINGER_MS)
            .set("acks", ACKS)
    };
    let shared = own_thread.then(|| builder().build().expect("a producer"));
    let server = HttpServer::new(move || {
        let producer = match &shared {
            Some(p) => p.clone(),
            None => builder()
                .start()
                .expect("a producer in the worker's actix system"),
        };
        App::new()
            .app_data(web::Data::new(CourierApp {
                producer,
                topic: courier_kafka::Topic::from(topic.as_str()),
                value: value.clone(),
            }))
            .route("/", web::get().to(courier_handler))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))?;
    say_port(&server.addrs());
    server.run().await
}

async fn courier_handler(app: actix_web::web::Data<CourierApp>) -> actix_web::HttpResponse {
    let record = courier_kafka::Record::to(app.topic).value(app.value.clone());
    match app.producer.send(record).await {
        Ok(d) => actix_web::HttpResponse::Ok().body(format!("{} {:?}", d.partition, d.offset)),
        Err(e) => actix_web::HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// What each rdkafka handler holds: the shared producer and the value.
struct RdkafkaApp {
    producer: rdkafka::producer::FutureProducer,
    topic: String,
    value: Vec<u8>,
}

/// One actix-web worker; one `FutureProducer`, made here and shared.
async fn rdkafka_server(bootstrap: &str, topic: String) -> std::io::Result<()> {
    use actix_web::{web, App, HttpServer};
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", LINGER_MS)
        .set("acks", ACKS)
        .create()
        .expect("a FutureProducer");
    let app = web::Data::new(RdkafkaApp {
        producer,
        topic,
        value: vec![b'x'; VALUE],
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(app.clone())
            .route("/", web::get().to(rdkafka_handler))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))?;
    say_port(&server.addrs());
    server.run().await
}

async fn rdkafka_handler(app: actix_web::web::Data<RdkafkaApp>) -> actix_web::HttpResponse {
    use rdkafka::producer::FutureRecord;
    let record = FutureRecord::<(), [u8]>::to(&app.topic).payload(&app.value[..]);
    match app.producer.send(record, Duration::from_secs(60)).await {
        Ok(d) => actix_web::HttpResponse::Ok().body(format!("{} {}", d.partition, d.offset)),
        Err((e, _)) => actix_web::HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// The results page: what ran, then one table of medians.
fn page(
    results: &[(usize, BTreeMap<&str, Vec<Sample>>)],
    runs: usize,
    seconds: u64,
    kafka: bool,
    took: Duration,
) -> String {
    let broker = if kafka {
        "Apache Kafka 4.1.1 (KRaft, one broker, its data on tmpfs)"
    } else {
        "Tansu 0.6.0 (memory storage)"
    };
    let name = if kafka { "web-kafka" } else { "web" };
    let mut md = format!(
        "# An actix-web service that produces: Courier vs rust-rdkafka\n\n\
         Run on {}: `{}` ({runs} alternating runs per client and point, each round starting with the next client, \
         medians; the whole run took {:.0} s).\n\
         Machine: 2 cores, {}; broker: {broker}, on the same machine, as is `wrk`; \
         rdkafka 0.38 (librdkafka 2.12.1); Courier at its default features.\n\n\
         The service: one actix-web 4 worker; `GET /` produces one 100-byte record (keyless, {PARTITIONS} partitions) \
         and answers once its delivery report is in (200 with its partition and offset, 500 with the error). \
         Courier's producer starts in the worker's actix system (`ProducerBuilder::start` in the app factory), its \
         actors on the worker's thread; rdkafka's `FutureProducer` is made once and shared, with librdkafka's own \
         threads. Both at their defaults with `linger.ms=5` and `acks=all`. \
         `courier-own-thread` is the same service with one Courier producer built beforehand on its own actor \
         thread (`ProducerBuilder::build`) and shared, as the `FutureProducer` is. \
         The load: `wrk -t1 -cC -d{seconds}s --latency` over C keep-alive connections. CPU is the service process's \
         user+sys time over wrk's run, per request answered. ([chart]({name}.svg))\n",
        common::today(),
        common::command_line("web", &["--bench"]),
        took.as_secs_f64(),
        common::cpu_model(),
    );
    for courier in ["courier", "courier-own-thread"] {
        table(&mut md, results, courier);
    }
    md
}

/// One table: `courier` against rdkafka at each point.
fn table(md: &mut String, results: &[(usize, BTreeMap<&str, Vec<Sample>>)], courier: &str) {
    writeln!(
        md,
        "\n| connections | {courier} req/s | rdkafka req/s | ÷ | {courier} p50 µs | rdkafka p50 µs | ÷ | \
         {courier} p99 µs | rdkafka p99 µs | ÷ | {courier} CPU µs/req | rdkafka CPU µs/req | ÷ | errors ({courier}/rdkafka) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    .unwrap();
    for (c, by) in results {
        let m = |client: &str, f: fn(&Sample) -> f64| {
            by.get(client)
                .map_or(f64::NAN, |s| common::median(s.iter().map(f).collect()))
        };
        let errors = |client: &str| {
            by.get(client)
                .map_or(0, |s| s.iter().map(|s| s.errors).max().unwrap_or(0))
        };
        let cell = |f: fn(&Sample) -> f64, digits: usize| {
            let (a, b) = (m(courier, f), m("rdkafka", f));
            format!("{a:.digits$} | {b:.digits$} | {:.2}", a / b)
        };
        writeln!(
            md,
            "| {c} | {} | {} | {} | {} | {}/{} |",
            cell(|s| s.rate, 0),
            cell(|s| s.p50_us, 0),
            cell(|s| s.p99_us, 0),
            cell(|s| s.cpu_us, 1),
            errors(courier),
            errors("rdkafka"),
        )
        .unwrap();
    }
}

/// Four panels against connections (log–log): requests/s, p50, p99, CPU
/// per request; a line per client, medians.
fn chart(results: &[(usize, BTreeMap<&str, Vec<Sample>>)]) -> String {
    use plotters::style::RGBColor;
    let colors = [
        ("courier", RGBColor(0x2b, 0x6c, 0xb0)),
        ("courier-own-thread", RGBColor(0x2f, 0x8f, 0x4e)),
        ("rdkafka", RGBColor(0xc0, 0x56, 0x21)),
    ];
    let panel =
        |caption, y: fn(&Sample) -> f64| (caption, common::median_lines(results, &colors, y));
    common::chart_2x2(
        "actix-web service, one record a request: Courier in the worker's system (blue), on its own thread (green), FutureProducer (orange); medians, log–log",
        "connections",
        vec![
            panel("requests per second", |s| s.rate),
            panel("latency p50 ms", |s| s.p50_us / 1e3),
            panel("latency p99 ms", |s| s.p99_us / 1e3),
            panel("service CPU µs per request", |s| s.cpu_us),
        ],
    )
}
