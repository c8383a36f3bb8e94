//! The low-level proof, below the actor producer: negotiate versions with a
//! broker, create a topic, and produce keyed records in batches encoded by
//! Courier's RecordBatch encoder, routed with the Java-compatible
//! partitioner.
//!
//! Run it against a local Tansu broker that the script starts and stops:
//!
//! ```text
//! bash scripts/demo.sh
//! ```
//!
//! or against any broker: `cargo run --release --example wire_demo -- HOST:PORT [RECORDS] [CODEC]`.

use std::time::Instant;

use courier_kafka::connection::{Connection, ConnectionOptions};
use courier_kafka::partitioner::partition_for_key;
use courier_kafka::protocol::messages::create_topics_request::CreatableTopic;
use courier_kafka::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use courier_kafka::protocol::messages::{CreateTopicsRequest, ProduceRequest, TopicName};
use courier_kafka::protocol::record_batch::{
    BatchBuilder, Compression, EncodedBatch, ProducerStamp,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "courier-demo";
const PARTITIONS: i32 = 3;
const BATCH_SIZE: usize = 64 * 1024;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let records: usize = args
        .next()
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(100_000);
    let codec: Compression = args
        .next()
        .map(|c| c.parse())
        .transpose()?
        .unwrap_or(Compression::Lz4);

    let mut conn = Connection::connect(&bootstrap, &ConnectionOptions::default()).await?;
    println!(
        "connected to {bootstrap}; agreed versions: {:?}",
        conn.versions()
    );

    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.num_partitions = PARTITIONS;
    topic.replication_factor = 1;
    let mut create = CreateTopicsRequest::default();
    create.topics.push(topic);
    create.timeout_ms = 10_000;
    let created = conn.request(&create).await?;
    println!(
        "create topic {TOPIC}: error code {}",
        created.topics[0].error_code
    );

    let start = Instant::now();
    let mut builders: Vec<BatchBuilder> = (0..PARTITIONS)
        .map(|_| BatchBuilder::new(BATCH_SIZE, codec))
        .collect();
    let mut sent = vec![0usize; PARTITIONS as usize];
    let mut last_offset = vec![-1i64; PARTITIONS as usize];
    let mut requests = 0;
    let value = [b'x'; 100];
    for i in 0..records {
        let key = format!("user-{}", i % 1000);
        let p = partition_for_key(key.as_bytes(), PARTITIONS) as usize;
        let ts = 1_700_000_000_000 + i as i64;
        if builders[p]
            .try_append(ts, Some(key.as_bytes()), Some(&value), &[])
            .is_err()
        {
            let full = std::mem::replace(&mut builders[p], BatchBuilder::new(BATCH_SIZE, codec));
            let batch = full.finish(ProducerStamp::NONE)?;
            last_offset[p] = produce(&mut conn, p as i32, &batch).await?;
            sent[p] += batch.record_count() as usize;
            requests += 1;
            builders[p].try_append(ts, Some(key.as_bytes()), Some(&value), &[])?;
        }
    }
    for (p, b) in builders.into_iter().enumerate() {
        if !b.is_empty() {
            let batch = b.finish(ProducerStamp::NONE)?;
            last_offset[p] = produce(&mut conn, p as i32, &batch).await?;
            sent[p] += batch.record_count() as usize;
            requests += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{records} records ({codec}) in {requests} Produce requests, {secs:.3} s, {:.0} records/s",
        records as f64 / secs
    );
    for p in 0..PARTITIONS as usize {
        println!(
            "  partition {p}: {} records, last offset {}",
            sent[p], last_offset[p]
        );
    }
    Ok(())
}

/// Sends one batch with acks=all and returns the offset of its last record.
async fn produce(
    conn: &mut Connection,
    partition: i32,
    batch: &EncodedBatch,
) -> Result<i64, Box<dyn std::error::Error>> {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch.bytes().clone());
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_static_str(TOPIC));
    td.partition_data.push(pd);
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data.push(td);
    let resp = conn.request(&req).await?;
    let p = &resp.responses[0].partition_responses[0];
    if p.error_code != 0 {
        return Err(format!("partition {partition}: error code {}", p.error_code).into());
    }
    Ok(p.base_offset + batch.record_count() as i64 - 1)
}
