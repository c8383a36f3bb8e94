//! From a new producer to its first delivery report, Courier side by side
//! with rust-rdkafka's `FutureProducer` created the same way, on a Tansu
//! broker this bench starts (loopback). What a CLI call that produces one
//! line, a serverless handler or a service's first request pays.
//!
//! ```text
//! cargo bench --bench first_report                 # 21 alternating runs each, medians
//! cargo bench --bench first_report -- --runs 51
//! ```
//!
//! Each run builds a producer (each client at its defaults, `linger.ms`
//! set alike, 5 ms), sends one record to an existing topic and awaits its
//! report; the time runs from just before the build to the report. Runs
//! alternate between the clients. Under `cargo test` (no `--bench`) it
//! runs 2 of each and claims nothing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use courier_kafka::{Producer, Record};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 21 } else { 2 });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let broker = support::Tansu::start();
    let bootstrap = broker.bootstrap();
    rt.block_on(support::create_topic(&bootstrap, "first", 1));
    let (mut courier, mut rdkafka) = (Vec::new(), Vec::new());
    // One of each first, untimed: the broker's own first requests.
    for i in 0..=runs {
        let start = Instant::now();
        rt.block_on(async {
            let p = Producer::builder()
                .bootstrap(&bootstrap)
                .set("linger.ms", "5")
                .build()
                .unwrap();
            p.send(Record::to("first").value("x")).await.unwrap();
            let took = start.elapsed();
            p.close().await;
            if i > 0 {
                courier.push(took);
            }
        });
        let start = Instant::now();
        rt.block_on(async {
            let p: FutureProducer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("linger.ms", "5")
                .create()
                .unwrap();
            p.send(
                FutureRecord::<(), str>::to("first").payload("x"),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            let took = start.elapsed();
            if i > 0 {
                rdkafka.push(took);
            }
        });
    }
    let (c, r) = (median(courier), median(rdkafka));
    if !bench {
        // Under `cargo test`: the path ran for both clients; no timing claim.
        println!("first_report smoke: {runs} run(s) of each client completed");
        return;
    }
    println!(
        "first report after build, median of {runs}: courier {:.1} ms, rdkafka FutureProducer {:.1} ms, courier ÷ rdkafka {:.2}",
        c.as_secs_f64() * 1e3,
        r.as_secs_f64() * 1e3,
        c.as_secs_f64() / r.as_secs_f64()
    );
}
