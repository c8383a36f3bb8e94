//! A retry actor with a dead-letter topic: records for a topic that exists
//! are delivered; records for one that does not are written to the
//! dead-letter topic with headers saying why. (They are not retried: the
//! default policy retries only failures that can succeed later, and a
//! missing topic does not appear by itself. Timeouts and too few in-sync
//! replicas are retried, up to `max_attempts`.)
//!
//! Run against a local Tansu broker (`bash scripts/demo.sh` starts one for
//! the quickstart), or any broker:
//! `cargo run --example retry_dead_letter -- HOST:PORT`.

use std::time::Duration;

use courier_kafka::retry::{RetryActor, RetryOutcome, RetryPolicy};
use courier_kafka::{Producer, Record};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter("courier=warn")
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    for topic in ["events", "events.dlq"] {
        let _ = courier_kafka::admin::create_topic(&bootstrap, topic, 3, 1).await;
    }
    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .set("allow.auto.create.topics", "false")
        .set("max.block.ms", "500")
        .build()?;

    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .dead_letter_topic("events.dlq")
        .build();
    let (retry, mut outcomes) = RetryActor::start_with_stream(producer.clone(), policy, 1_000);

    for i in 0..10 {
        let topic = if i % 5 == 4 {
            "no-such-topic"
        } else {
            "events"
        };
        retry
            .produce(
                Record::to(topic)
                    .key(format!("k{i}"))
                    .value(format!("event {i}")),
            )
            .await?;
    }
    let (mut delivered, mut dead_lettered, mut failed) = (0, 0, 0);
    while delivered + dead_lettered + failed < 10 {
        match outcomes.next().await.expect("one outcome per record") {
            RetryOutcome::Delivered {
                delivered: d,
                attempts,
            } => {
                delivered += 1;
                println!(
                    "delivered {}/{} at {:?} after {attempts} attempt(s)",
                    d.topic, d.partition, d.offset
                );
            }
            RetryOutcome::DeadLettered {
                error,
                attempts,
                dead_letter,
                ..
            } => {
                dead_lettered += 1;
                println!(
                    "dead-lettered to {}/{} at {:?} after {attempts} attempt(s): {error}",
                    dead_letter.topic, dead_letter.partition, dead_letter.offset
                );
            }
            RetryOutcome::Failed { error, reason, .. } => {
                failed += 1;
                println!("failed ({reason:?}): {error}");
            }
        }
    }
    let s = retry.stats();
    println!(
        "{delivered} delivered, {dead_lettered} dead-lettered, {failed} failed; retried {}",
        s.retried()
    );
    producer.close().await;
    Ok(())
}
