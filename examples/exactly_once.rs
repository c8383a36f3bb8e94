//! Consume-transform-produce, exactly once: records are read from an input
//! topic with the rdkafka consumer, transformed, and written to an output
//! topic by a transactional Courier producer, with the consumer's offsets
//! sent to the same transaction. Kill it at any point and start it again:
//! the output topic, read committed, holds each input record's transform
//! exactly once.
//!
//! ```text
//! cargo run --example exactly_once -- BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [IDLE_EXIT_MS]
//! ```
//!
//! How: `init_transactions` first (it fences any older instance with the
//! same transactional id and aborts what that one left open), then the
//! group's committed offsets are read (final now) and the consumer is
//! assigned every input partition from there; no group rebalancing is
//! needed for one instance at a time. Each loop reads up to 500 records,
//! produces their transforms and the next offsets in one transaction, and
//! commits. On an abortable error the transaction is aborted and the
//! consumer rewound to the committed offsets. It exits 0 once the input
//! has been idle for IDLE_EXIT_MS (default 3000).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use courier_kafka::{GroupMetadata, Producer, Record};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!(
            "usage: exactly_once BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [IDLE_EXIT_MS]"
        );
        std::process::exit(2);
    }
    let (bootstrap, input, output, group, txn_id) =
        (&args[0], &args[1], &args[2], &args[3], &args[4]);
    let idle_exit = Duration::from_millis(args.get(5).map_or(Ok(3000), |a| a.parse())?);

    let producer = Producer::builder()
        .bootstrap(bootstrap)
        .set("transactional.id", txn_id)
        .set("linger.ms", "5")
        .build()?;
    producer.init_transactions().await?;

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("log_level", "3")
        .create()?;
    let partitions: Vec<i32> = consumer
        .fetch_metadata(Some(input), Duration::from_secs(10))?
        .topics()
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    rewind(&consumer, input, &partitions)?;

    let group = GroupMetadata::new(group.as_str());
    let mut transformed = 0usize;
    let mut last_record = Instant::now();
    loop {
        // Up to 500 records, or what came within 100 ms of the first.
        let mut batch = Vec::new();
        let started = Instant::now();
        while batch.len() < 500 && started.elapsed() < Duration::from_millis(100) {
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(m)) => batch.push((
                    m.partition(),
                    m.offset(),
                    m.key().map(<[u8]>::to_vec),
                    m.payload().map(<[u8]>::to_vec),
                )),
                Some(Err(e)) => return Err(e.into()),
                None if batch.is_empty() => break,
                None => {}
            }
        }
        if batch.is_empty() {
            if last_record.elapsed() > idle_exit {
                break;
            }
            continue;
        }
        last_record = Instant::now();

        producer.begin_transaction()?;
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for (partition, offset, key, value) in &batch {
            let mut out = b"out:".to_vec();
            out.extend_from_slice(value.as_deref().unwrap_or_default());
            let mut r = Record::to(output.as_str()).value(out);
            if let Some(k) = key {
                r = r.key(k.clone());
            }
            producer.produce(r).await?;
            next.insert(*partition, offset + 1);
        }
        let offsets: Vec<(&str, i32, i64)> =
            next.iter().map(|(p, o)| (input.as_str(), *p, *o)).collect();
        let done = async {
            producer
                .send_offsets_to_transaction(&offsets, &group)
                .await?;
            producer.commit_transaction().await
        }
        .await;
        match done {
            Ok(()) => transformed += batch.len(),
            Err(e) if e.is_abortable() => {
                eprintln!("transaction aborted ({e}); rewinding to the committed offsets");
                producer.abort_transaction().await?;
                rewind(&consumer, input, &partitions)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    producer.close().await;
    println!("exactly_once: {transformed} records transformed");
    Ok(())
}

/// Assigns every input partition at the group's committed offset (from
/// the beginning where there is none).
fn rewind(
    consumer: &BaseConsumer,
    input: &str,
    partitions: &[i32],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut wanted = TopicPartitionList::new();
    for p in partitions {
        wanted.add_partition(input, *p);
    }
    let committed = consumer.committed_offsets(wanted, Duration::from_secs(10))?;
    let mut assignment = TopicPartitionList::new();
    for e in committed.elements() {
        let at = match e.offset() {
            Offset::Offset(o) => Offset::Offset(o),
            _ => Offset::Beginning,
        };
        assignment.add_partition_offset(input, e.partition(), at)?;
    }
    consumer.assign(&assignment)?;
    Ok(())
}
