//! A producer that writes to ever new topics holds flat memory: what it
//! keeps per topic (queues, metadata, the partitioner's sets, metric
//! handles) goes once the topic has been idle for `metadata.max.idle.ms`.
//! What stays per topic is the interned name (`Topic`) and, for an
//! idempotent producer, each partition's sequence (the broker keeps its
//! state for `producer.id.expiration.ms`, a day by default).
//!
//! Memory is the bytes the process holds from Rust's allocator (a counting
//! global allocator in this binary, which has this one test). The broker
//! is a stand-in in this process (`WideBroker`): every topic exists, with
//! one partition, and every batch is written at once. The real brokers at
//! hand cannot serve 100,000 topics in a test's time: Tansu creates about
//! 90 a second, and librdkafka's mock cluster finds a topic by walking a
//! list of all of them. The stand-in keeps nothing per topic, so what
//! grows is the producer's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use courier_kafka::{Producer, Record};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes allocated and not yet freed.
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A broker that hosts every topic name asked about, with one partition led
/// by itself, and writes every batch (offsets from one counter). It
/// speaks ApiVersions, Metadata, InitProducerId and Produce, the versions
/// Courier asks for.
struct WideBroker {
    port: u16,
}

impl WideBroker {
    async fn start() -> WideBroker {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, port));
            }
        });
        WideBroker { port }
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

static NEXT_OFFSET: AtomicI64 = AtomicI64::new(0);

async fn serve(mut socket: tokio::net::TcpStream, port: u16) {
    loop {
        let Ok(len) = socket.read_i32().await else {
            return;
        };
        let mut frame = vec![0u8; len.max(0) as usize];
        if socket.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut buf = Bytes::from(frame);
        let (key, version) = (
            i16::from_be_bytes([buf[0], buf[1]]),
            i16::from_be_bytes([buf[2], buf[3]]),
        );
        let api = ApiKey::try_from(key).expect("a known API");
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version)).unwrap();
        let mut body = BytesMut::new();
        match api {
            ApiKey::ApiVersions => {
                let range = |api: ApiKey, min: i16, max: i16| {
                    ApiVersion::default()
                        .with_api_key(api as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                };
                ApiVersionsResponse::default()
                    .with_api_keys(vec![
                        range(ApiKey::ApiVersions, 0, 3),
                        range(ApiKey::Metadata, 1, 12),
                        range(ApiKey::Produce, 3, 11),
                        range(ApiKey::InitProducerId, 0, 4),
                    ])
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::Metadata => {
                let request = MetadataRequest::decode(&mut buf, version).unwrap();
                let topics = request
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|t| t.name)
                    .map(|name| {
                        MetadataResponseTopic::default()
                            .with_name(Some(name))
                            .with_topic_id(uuid::Uuid::from_u128(1))
                            .with_partitions(vec![MetadataResponsePartition::default()
                                .with_partition_index(0)
                                .with_leader_id(BrokerId(0))
                                .with_leader_epoch(0)
                                .with_replica_nodes(vec![BrokerId(0)])
                                .with_isr_nodes(vec![BrokerId(0)])])
                    })
                    .collect();
                MetadataResponse::default()
                    .with_brokers(vec![MetadataResponseBroker::default()
                        .with_node_id(BrokerId(0))
                        .with_host(StrBytes::from_static_str("127.0.0.1"))
                        .with_port(i32::from(port))])
                    .with_controller_id(BrokerId(0))
                    .with_topics(topics)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::InitProducerId => {
                InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(1))
                    .with_producer_epoch(0)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::Produce => {
                let request = ProduceRequest::decode(&mut buf, version).unwrap();
                let responses = request
                    .topic_data
                    .into_iter()
                    .map(|t| {
                        let partitions = t
                            .partition_data
                            .iter()
                            .map(|p| {
                                let records = p.records.as_ref().map_or(0, |r| {
                                    // The batch's record count (offset 57).
                                    let mut at = r.slice(57..61);
                                    i64::from(at.get_i32())
                                });
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_base_offset(
                                        NEXT_OFFSET.fetch_add(records, Ordering::Relaxed),
                                    )
                                    .with_log_append_time_ms(-1)
                            })
                            .collect();
                        TopicProduceResponse::default()
                            .with_name(t.name)
                            .with_partition_responses(partitions)
                    })
                    .collect();
                ProduceResponse::default()
                    .with_responses(responses)
                    .encode(&mut body, version)
                    .unwrap();
            }
            other => panic!("the stand-in broker does not speak {other:?}"),
        }
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut frame, api.response_header_version(version))
            .unwrap();
        frame.put(body);
        let mut out = Vec::with_capacity(frame.len() + 4);
        out.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        out.extend_from_slice(&frame);
        if socket.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

const WAVE: usize = 2_000;
const WAVES: usize = 50;
/// What a topic may still cost once forgotten: its interned name (about
/// 70 bytes for these names with the table's entry) and its partition's
/// kept sequence (about 60 with the map's entry and its spare room), with
/// room to spare. Kept whole (this test without the forgetting), a topic
/// cost about 1.3 kB: 68.8 MB live after 54,000 topics, and each wave
/// slower than the last, every Metadata request naming every topic.
const BYTES_PER_TOPIC: i64 = 300;

fn name(i: usize) -> String {
    format!("wide-{i:06}")
}

/// One record to each of `WAVE` new topics, all at once (their metadata
/// waits share requests), all delivered.
async fn wave(p: &Producer, w: usize) {
    let sends = (w * WAVE..(w + 1) * WAVE).map(|i| p.send(Record::to(name(i)).value("v")));
    for d in futures::future::join_all(sends).await {
        d.unwrap_or_else(|e| panic!("not delivered: {e}"));
    }
}

/// Waits until the live bytes are at most `bound`, or fails after 60 s
/// (the idle topics are forgotten at the first metadata fetch at least
/// `metadata.max.idle.ms`, 5 s, after their last record).
async fn settles_under(bound: i64, what: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = live();
        if now <= bound {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {now} bytes live, over the bound of {bound}"
        );
    }
}

/// The live bytes once they have stopped falling: the same, within 1 kB,
/// over three looks a second apart, the first past `metadata.max.idle.ms`.
async fn settled() -> i64 {
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut looks = vec![live()];
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        looks.push(live());
        let last = &looks[looks.len().saturating_sub(3)..];
        if last.len() == 3 && last.iter().max().unwrap() - last.iter().min().unwrap() < 1024 {
            return *last.last().unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_writing_to_100000_topics_over_time_holds_flat_memory() {
    let broker = WideBroker::start().await;
    let p = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .set("linger.ms", "5")
        .set("metadata.max.idle.ms", "5000")
        .set("metadata.max.age.ms", "500")
        .build()
        .unwrap();
    // The first wave, then everything it left forgotten: the baseline.
    wave(&p, 0).await;
    let baseline = settled().await;
    let started = Instant::now();
    for w in 1..WAVES {
        wave(&p, w).await;
    }
    let written = live();
    let topics = (WAVE * (WAVES - 1)) as i64;
    let bound = baseline + topics * BYTES_PER_TOPIC;
    let after = settles_under(bound, "after all waves").await;
    println!(
        "{topics} more topics in {:.1} s: {:.0} bytes each while written, {:.0} each once idle",
        started.elapsed().as_secs_f64(),
        (written - baseline) as f64 / topics as f64,
        (after - baseline) as f64 / topics as f64,
    );
    // And it still produces, to a forgotten topic and to a new one.
    p.send(Record::to(name(3)).value("again")).await.unwrap();
    p.send(Record::to(name(WAVE * WAVES - 1)).value("again"))
        .await
        .unwrap();
    p.close().await;
}
