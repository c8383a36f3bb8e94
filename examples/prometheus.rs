//! Metrics for Prometheus: the producer's counters, gauges and histograms,
//! published through the `metrics` crate facade (Courier's `metrics`
//! feature), served at `/metrics` by `metrics-exporter-prometheus`.
//!
//! It produces 1,000 records to topic `metrics-demo`, plus two that fail
//! at once (one larger than `max.request.size`, one to a partition the
//! topic does not have), prints what the reports said, then serves the
//! metrics until Ctrl-C. Against a local Tansu broker (`bash
//! scripts/demo.sh` starts one) or any broker:
//!
//! ```text
//! PORT=9000 cargo run --example prometheus -- HOST:PORT
//! curl http://127.0.0.1:9000/metrics
//! ```
//!
//! In an application, depend on `courier` with `features = ["metrics"]`,
//! and install the recorder before building the producer: a producer
//! resolves its metric handles when it is built.

use std::net::SocketAddr;

use courier_kafka::{DeliveryReport, Producer, Record, ReportMode};
use futures::StreamExt;
use metrics_exporter_prometheus::PrometheusBuilder;

const TOPIC: &str = "metrics-demo";
const RECORDS: usize = 1_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "courier=info".into()))
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let port: u16 = std::env::var("PORT").map_or(Ok(9000), |p| p.parse())?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));

    // First the recorder (its HTTP listener runs on this tokio runtime),
    // then the producer.
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;

    courier_kafka::admin::create_topic_if_missing(&bootstrap, TOPIC, 3, 1).await?;
    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .set("client.id", "metrics-demo")
        .set("linger.ms", "5")
        .build()?;
    let (subscriber, mut reports) = producer.subscribe(ReportMode::All);
    let reader = tokio::spawn(async move {
        let (mut delivered, mut failed) = (0u64, 0u64);
        while let Some(report) = reports.next().await {
            match report {
                DeliveryReport::Delivered(_) => delivered += 1,
                DeliveryReport::Failed(e) => {
                    failed += 1;
                    eprintln!("failed as intended: {}", e.kind);
                }
            }
        }
        (delivered, failed)
    });
    for i in 0..RECORDS {
        let record = Record::to(TOPIC)
            .key(format!("user-{}", i % 100))
            .value(format!("{{\"event\": {i}}}"));
        subscriber.produce(record).await?;
    }
    // Over max.request.size (1 MiB by default): RecordTooLarge at once.
    subscriber
        .produce(Record::to(TOPIC).value(vec![0u8; 2 << 20]))
        .await?;
    // The topic has 3 partitions: UnknownPartition at once.
    subscriber
        .produce(Record::to(TOPIC).partition(99).value("lost"))
        .await?;
    drop(subscriber);
    let (delivered, failed) = reader.await?;
    println!("{delivered} delivered, {failed} failed");
    println!("serving http://{addr}/metrics until Ctrl-C");
    tokio::signal::ctrl_c().await?;
    producer.close().await;
    Ok(())
}
