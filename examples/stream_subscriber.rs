//! Several tokio tasks share one producer; each reads exactly its own
//! delivery reports from its own `futures::Stream`.
//!
//! Start a broker (`bash scripts/demo.sh` starts one for the quickstart), or
//! run against any broker with a topic `events`:
//! `cargo run --example stream_subscriber -- HOST:PORT`.

use courier_kafka::{DeliveryReport, Producer, Record, ReportMode};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter("courier=info")
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let _ = courier_kafka::admin::create_topic(&bootstrap, "events", 3, 1).await;
    let producer = Producer::builder().bootstrap(&bootstrap).build()?;

    let mut tasks = Vec::new();
    for worker in 0..4 {
        let producer = producer.clone();
        tasks.push(tokio::spawn(async move {
            let (subscriber, reports) = producer.subscribe(ReportMode::All);
            let reader = tokio::spawn(reports.collect::<Vec<DeliveryReport>>());
            for i in 0..1000 {
                let record = Record::to("events")
                    .key(format!("worker-{worker}"))
                    .value(format!("{i}"));
                subscriber.produce(record).await.expect("producer open");
            }
            drop(subscriber);
            let reports = reader.await.unwrap();
            let delivered = reports.iter().filter(|r| r.is_delivered()).count();
            println!(
                "worker {worker}: {} reports, {delivered} delivered",
                reports.len()
            );
        }));
    }
    for t in tasks {
        t.await?;
    }
    producer.close().await;
    Ok(())
}
