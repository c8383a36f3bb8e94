//! The examples, run as a user would, against a Tansu broker started here.
//! Each must finish (or answer) and report every message delivered.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Tansu;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/examples-<hash> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --examples` first (scripts/test.sh does)",
        path.display()
    );
    path
}

fn run(name: &str, args: &[&str]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run example");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn quickstart_stream_and_actor_examples() {
    let broker = Tansu::start();
    let b = broker.bootstrap();
    let out = run("quickstart", &[&b]);
    assert!(
        out.contains("100000 messages, 100000 delivered, 0 failed"),
        "{out}"
    );
    let out = run("stream_subscriber", &[&b]);
    assert_eq!(
        out.matches("1000 reports, 1000 delivered").count(),
        4,
        "{out}"
    );
    let out = run("actor_subscriber", &[&b]);
    assert!(out.contains("auditor: 1000 delivered, 0 failed"), "{out}");
    let out = run("retry_dead_letter", &[&b]);
    assert!(
        out.contains("8 delivered, 2 dead-lettered, 0 failed"),
        "{out}"
    );
    let out = run("wire_demo", &[&b, "10000"]);
    assert!(out.contains("10000 records"), "{out}");
}

#[test]
fn actix_web_example_answers_with_the_records_offset() {
    let broker = Tansu::start();
    let port = support::free_port();
    let mut server = KillOnDrop(
        Command::new(example("actix_web"))
            .arg(broker.bootstrap())
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("listening"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut bodies = Vec::new();
    for i in 0..3 {
        let mut conn = loop {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("server not up: {e}"),
            }
        };
        let body = format!("hello-{i}");
        write!(
            conn,
            "POST /events/user-1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        conn.read_to_string(&mut resp).unwrap();
        bodies.push(resp);
    }
    drop(server);
    for (i, resp) in bodies.iter().enumerate() {
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        // Same key, same partition: offsets 0, 1, 2.
        assert!(resp.contains(&format!("offset Some({i})")), "{resp}");
    }
}

/// Stops the example server also when an assertion fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// examples/prometheus.rs: 1,000 records delivered and two refused at once
/// (too large, unknown partition); `/metrics`, scraped over HTTP, counts
/// exactly those, and the delivered records' latencies. The example needs
/// the `metrics` feature: scripts/test.sh runs this in its second build.
#[cfg(feature = "metrics")]
#[test]
fn prometheus_example_serves_the_producers_counts() {
    let broker = Tansu::start();
    let port = support::free_port();
    let mut server = KillOnDrop(
        Command::new(example("prometheus"))
            .arg(broker.bootstrap())
            .env("PORT", port.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let summary = lines.next().unwrap().unwrap();
    assert_eq!(summary, "1000 delivered, 2 failed");
    assert!(lines.next().unwrap().unwrap().contains("/metrics"));
    let labels = r#"client_id="metrics-demo",topic="metrics-demo""#;
    let value = |text: &str, series: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.trim().parse().unwrap())
    };
    // The gauges are sampled at the supervisor's tick (100 ms): scrape
    // until they show nothing left in flight.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(port);
        let in_flight = value(
            &text,
            r#"courier_records_in_flight{client_id="metrics-demo"}"#,
        );
        if in_flight == Some(0.0) || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(server);
    let counted =
        |series: &str| value(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    assert_eq!(
        counted(&format!("courier_records_produced_total{{{labels}}}")),
        1002.0
    );
    assert_eq!(
        counted(&format!("courier_records_delivered_total{{{labels}}}")),
        1000.0
    );
    for kind in ["record_too_large", "unknown_partition"] {
        assert_eq!(
            counted(&format!(
                r#"courier_records_failed_total{{{labels},kind="{kind}"}}"#
            )),
            1.0
        );
    }
    // Records refused before reaching a batch have no delivery latency.
    // The example has read every report before it says so, and a batch's
    // latencies are counted before its reports are handed over, so all
    // 1,000 are here.
    assert_eq!(
        counted(&format!(
            "courier_delivery_latency_seconds_count{{{labels}}}"
        )),
        1000.0
    );
    let latency_sum = counted(&format!("courier_delivery_latency_seconds_sum{{{labels}}}"));
    assert!(
        latency_sum > 0.0 && latency_sum < 1000.0 * 10.0,
        "{latency_sum}"
    );
    assert_eq!(
        counted(r#"courier_records_in_flight{client_id="metrics-demo"}"#),
        0.0
    );
    assert_eq!(
        counted(r#"courier_buffered_bytes{client_id="metrics-demo"}"#),
        0.0
    );
    // Per broker: Tansu is one broker; the Produce requests it answered.
    let requests: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with(r#"courier_broker_requests_total{client_id="metrics-demo",broker="#)
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(requests >= 1.0, "{text}");
    assert!(
        text.contains("courier_broker_request_latency_seconds_count{"),
        "{text}"
    );
    assert_eq!(
        counted(r#"courier_actor_restarts_total{client_id="metrics-demo"}"#),
        0.0
    );
}

/// `GET /metrics` on 127.0.0.1:`port`, the body.
#[cfg(feature = "metrics")]
fn scrape(port: u16) -> String {
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics listener");
    write!(
        conn,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    resp.split_once("\r\n\r\n").unwrap().1.to_string()
}
