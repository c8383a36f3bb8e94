//! Quickstart: produce 100,000 messages, read every delivery report from a
//! subscription stream, and print a summary.
//!
//! Run against a local Tansu broker that the script starts and stops:
//!
//! ```text
//! bash scripts/demo.sh
//! ```
//!
//! or against any broker: `cargo run --release --example quickstart -- HOST:PORT`.

use std::time::Instant;

use courier_kafka::{DeliveryReport, Producer, Record, ReportMode};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "courier=info".into()))
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = "quickstart";
    let messages = 100_000;

    if courier_kafka::admin::create_topic_if_missing(&bootstrap, topic, 6, 1).await? {
        println!("created topic {topic} (6 partitions)");
    } else {
        println!("topic {topic} exists");
    }

    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .build()?;
    let (subscriber, mut reports) = producer.subscribe(ReportMode::All);

    let start = Instant::now();
    let reader = tokio::spawn(async move {
        let (mut delivered, mut failed) = (0u64, 0u64);
        while let Some(report) = reports.next().await {
            match report {
                DeliveryReport::Delivered(_) => delivered += 1,
                DeliveryReport::Failed(e) => {
                    failed += 1;
                    eprintln!("failed: {e}");
                }
            }
        }
        (delivered, failed)
    });
    for i in 0..messages {
        let record = Record::to(topic)
            .key(format!("user-{}", i % 1000))
            .value(format!("{{\"event\": {i}}}"));
        subscriber.produce(record).await?;
    }
    drop(subscriber); // the stream ends after the last report
    let (delivered, failed) = reader.await?;
    let secs = start.elapsed().as_secs_f64();
    let stats = producer.stats();
    producer.close().await;

    println!("{messages} messages, {delivered} delivered, {failed} failed, one report each");
    println!(
        "{secs:.2} s, {:.0} messages/s; delivery latency p50 <= {:?}, p99 <= {:?}",
        messages as f64 / secs,
        stats.latency_quantile(0.5).unwrap_or_default(),
        stats.latency_quantile(0.99).unwrap_or_default()
    );
    for (broker, b) in &stats.brokers {
        println!(
            "  broker {broker}: {} produce requests, mean round trip {:?}",
            b.requests,
            b.mean_latency()
        );
    }
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
