//! The fuzz targets' seed corpus, `fuzz/corpus/<target>/`: real response
//! frames, built here with `kafka-protocol`'s encoders as a broker would
//! send them (the connect-time ApiVersions answer, then Metadata, Produce,
//! InitProducerId and CreateTopics answers).
//!
//! The test checks that the committed files are exactly these and nothing
//! else, and that each seed decodes the way its target reads it. A seed
//! that no longer parses would start the fuzzer off the valid path, which
//! the short CI runs (`scripts/fuzz.sh`) cannot afford.
//! `COURIER_BLESS_CORPUS=1 cargo test --test fuzz_corpus` rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use courier_kafka::protocol::frame::{peek_correlation_id, FrameDecoder};
use courier_kafka::protocol::message::decode_response;
use courier_kafka::protocol::messages::*;
use courier_kafka::protocol::versions::{negotiate, ApiVersions};
use courier_kafka::protocol::ApiKey;
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

/// The versions the seed broker's ApiVersions answer lets Courier agree on.
const AGREED: ApiVersions = ApiVersions {
    api_versions: 3,
    metadata: 12,
    produce: 12,
    init_producer_id: Some(5),
    create_topics: Some(7),
    sasl_handshake: None,
    sasl_authenticate: None,
    find_coordinator: None,
    add_partitions_to_txn: None,
    add_offsets_to_txn: None,
    end_txn: None,
    txn_offset_commit: None,
    delete_topics: None,
    create_partitions: None,
    describe_configs: None,
    incremental_alter_configs: None,
    describe_quorum: None,
    create_acls: None,
    describe_acls: None,
    delete_acls: None,
    list_groups: None,
    describe_groups: None,
    offset_fetch: None,
    offset_commit: None,
    offset_delete: None,
    delete_groups: None,
    delete_records: None,
    get_telemetry_subscriptions: None,
    push_telemetry: None,
    transaction_feature: (-1, 0),
};

fn topic(name: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(name))
}

/// One response frame body (header and body, no length prefix).
fn body<T: Encodable + HeaderVersion>(resp: &T, correlation_id: i32, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, T::header_version(version))
        .unwrap();
    resp.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// The answers a connection reads, in order, each with the correlation id
/// that `fuzz/fuzz_targets/response_stream.rs` maps to its API: the first
/// frame is ApiVersions, then 1 is Metadata, 2 Produce, 3 InitProducerId
/// and 4 CreateTopics.
fn answers() -> Vec<(&'static str, Bytes)> {
    use api_versions_response::ApiVersion;
    let offered = [
        (ApiKey::Produce, 3, 12),
        (ApiKey::Metadata, 0, 13),
        (ApiKey::ApiVersions, 0, 4),
        (ApiKey::CreateTopics, 2, 7),
        (ApiKey::InitProducerId, 0, 5),
    ];
    let api_versions = ApiVersionsResponse::default().with_api_keys(
        offered
            .iter()
            .map(|&(api, min, max)| {
                ApiVersion::default()
                    .with_api_key(api as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    );
    let metadata = MetadataResponse::default()
        .with_brokers(vec![metadata_response::MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("localhost"))
            .with_port(9092)])
        .with_cluster_id(Some(StrBytes::from_static_str("seed")))
        .with_controller_id(BrokerId(1))
        .with_topics(vec![metadata_response::MetadataResponseTopic::default()
            .with_name(Some(topic("t")))
            .with_partitions(
                (0..2)
                    .map(|i| {
                        metadata_response::MetadataResponsePartition::default()
                            .with_partition_index(i)
                            .with_leader_id(BrokerId(1))
                            .with_replica_nodes(vec![BrokerId(1)])
                            .with_isr_nodes(vec![BrokerId(1)])
                    })
                    .collect(),
            )]);
    let produce = ProduceResponse::default().with_responses(vec![
        produce_response::TopicProduceResponse::default()
            .with_name(topic("t"))
            .with_partition_responses(vec![produce_response::PartitionProduceResponse::default()
                .with_index(1)
                .with_base_offset(42)
                .with_log_append_time_ms(-1)]),
    ]);
    let init_producer_id = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(1000))
        .with_producer_epoch(0);
    let create_topics = CreateTopicsResponse::default().with_topics(vec![
        create_topics_response::CreatableTopicResult::default()
            .with_name(topic("t"))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    vec![
        ("api_versions-v3", body(&api_versions, 0, 3)),
        ("metadata-v12", body(&metadata, 1, 12)),
        ("produce-v12", body(&produce, 2, 12)),
        ("init_producer_id-v5", body(&init_producer_id, 3, 5)),
        ("create_topics-v7", body(&create_topics, 4, 7)),
    ]
}

/// Input of `frame_decoder` and `response_stream`: byte 0 sets the read
/// size (`split + 1` bytes), the rest is every answer as a length-prefixed
/// frame.
fn stream(split: u8) -> Vec<u8> {
    let mut out = vec![split];
    for (_, frame) in answers() {
        out.put_i32(frame.len() as i32);
        out.extend_from_slice(&frame);
    }
    out
}

/// Every seed: (target, file name, bytes).
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds: Vec<_> = answers()
        .into_iter()
        .map(|(name, frame)| ("response_decoders", name.to_string(), frame.to_vec()))
        .collect();
    for target in ["frame_decoder", "response_stream"] {
        seeds.push((target, "stream-reads-of-256".into(), stream(255)));
        seeds.push((target, "stream-reads-of-7".into(), stream(6)));
    }
    seeds
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

#[test]
fn the_committed_seed_corpus_is_the_one_built_here() {
    let mut want: BTreeMap<&str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (target, name, bytes) in seeds() {
        want.entry(target).or_default().insert(name, bytes);
    }
    let bless = std::env::var_os("COURIER_BLESS_CORPUS").is_some();
    for (target, files) in &want {
        let dir = corpus_dir(target);
        if bless {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in files {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        }
        let mut found = BTreeMap::new();
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (bless to create it)", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            found.insert(name, std::fs::read(&path).unwrap());
        }
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            files.keys().collect::<Vec<_>>(),
            "files in {} (COURIER_BLESS_CORPUS=1 rewrites them)",
            dir.display()
        );
        for (name, bytes) in files {
            assert!(
                found[name] == *bytes,
                "{}/{name} differs from the seed built here (COURIER_BLESS_CORPUS=1 rewrites it)",
                dir.display()
            );
        }
    }
}

/// Decodes a later answer as `response_stream` does with agreed versions.
fn decode_answer(frame: Bytes) -> Result<(), String> {
    let id = peek_correlation_id(&frame).map_err(|e| e.to_string())?;
    let r = match id {
        1 => decode_response::<MetadataRequest>(frame, AGREED.metadata).map(|_| ()),
        2 => decode_response::<ProduceRequest>(frame, AGREED.produce).map(|_| ()),
        3 => decode_response::<InitProducerIdRequest>(frame, AGREED.init_producer_id.unwrap())
            .map(|_| ()),
        4 => {
            decode_response::<CreateTopicsRequest>(frame, AGREED.create_topics.unwrap()).map(|_| ())
        }
        _ => return Err(format!("no answer has correlation id {id}")),
    };
    r.map_err(|e| e.to_string())
}

#[test]
fn every_stream_seed_negotiates_and_decodes_whole() {
    for (_, name, bytes) in seeds() {
        if !name.starts_with("stream") {
            continue;
        }
        let (split, rest) = bytes.split_first().unwrap();
        let decoder = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for chunk in rest.chunks(*split as usize + 1) {
            buf.extend_from_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        assert!(buf.is_empty(), "{name}: bytes left after the last frame");
        assert_eq!(frames.len(), 5, "{name}");
        let (id, resp) = decode_response::<ApiVersionsRequest>(frames[0].clone(), 3).unwrap();
        assert_eq!(id, 0);
        assert_eq!(negotiate(&resp).unwrap(), AGREED, "{name}");
        for frame in &frames[1..] {
            decode_answer(frame.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn every_single_frame_seed_decodes_at_its_version() {
    for (name, frame) in answers() {
        let r = if name.starts_with("api_versions") {
            decode_response::<ApiVersionsRequest>(frame, 3)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            decode_answer(frame)
        };
        r.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
