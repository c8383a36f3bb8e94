//! Wire round trips for every request and response Courier uses, at every
//! version it implements (`protocol::versions::SUPPORTED`).
//!
//! Requests: encoded by `courier_kafka::protocol::message::encode_request`, then
//! parsed back as a broker would (length prefix, request header at the
//! right header version, body). Responses: written as a broker would by
//! `kafka-protocol`, then read by `courier_kafka::protocol::message::decode_response`.
//! Each sample sets every field that exists at that version to a
//! non-default value, so a header-version or field mix-up changes the result.

use bytes::{Buf, Bytes, BytesMut};
use courier_kafka::protocol::message::{decode_response, encode_request, request_frame_size};
use courier_kafka::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use courier_kafka::protocol::messages::*;
use courier_kafka::protocol::versions::{supported, SUPPORTED};
use courier_kafka::protocol::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let v = supported(api).expect("supported");
    v.min..=v.max
}

/// Encodes with our framing, decodes as a broker, and checks both parts.
fn request_round_trip<R: Request + PartialEq + std::fmt::Debug>(req: R, version: i16) {
    let client_id = s("courier-test");
    let mut buf = BytesMut::new();
    encode_request(&mut buf, 0x1234_5678, Some(&client_id), version, &req).unwrap();
    assert_eq!(
        buf.len(),
        request_frame_size(Some(&client_id), version, &req).unwrap(),
        "size computed without encoding must match"
    );
    let mut frame = buf.freeze();
    let len = frame.get_i32() as usize;
    assert_eq!(len, frame.len(), "length prefix");
    let header = RequestHeader::decode(&mut frame, R::header_version(version)).unwrap();
    assert_eq!(header.request_api_key, R::KEY);
    assert_eq!(header.request_api_version, version);
    assert_eq!(header.correlation_id, 0x1234_5678);
    assert_eq!(header.client_id.as_deref(), Some("courier-test"));
    let back = R::decode(&mut frame, version).unwrap();
    assert_eq!(back, req, "{:?} v{version}", R::KEY);
    assert!(!frame.has_remaining(), "no trailing bytes");
}

/// Encodes as a broker would, then decodes with our response path.
fn response_round_trip<R: Request>(resp: R::Response, version: i16)
where
    R::Response: PartialEq + std::fmt::Debug,
{
    let mut buf = BytesMut::new();
    let mut header = ResponseHeader::default();
    header.correlation_id = -42;
    header
        .encode(
            &mut buf,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .unwrap();
    resp.encode(&mut buf, version).unwrap();
    let (id, back) = decode_response::<R>(buf.freeze(), version).unwrap();
    assert_eq!(id, -42);
    assert_eq!(back, resp, "{:?} v{version} response", R::KEY);
}

#[test]
fn the_table_covers_the_five_apis_we_need() {
    let apis: Vec<ApiKey> = SUPPORTED.iter().map(|s| s.api).collect();
    for api in [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::Produce,
        ApiKey::InitProducerId,
        ApiKey::CreateTopics,
    ] {
        assert!(apis.contains(&api), "{api:?}");
        let ours = supported(api).unwrap();
        let lib = api.valid_versions();
        assert!(
            lib.min <= ours.min && ours.max <= lib.max,
            "{api:?}: we claim v{}..=v{} but kafka-protocol knows {lib}",
            ours.min,
            ours.max
        );
    }
}

#[test]
fn api_versions() {
    for v in versions(ApiKey::ApiVersions) {
        let mut req = ApiVersionsRequest::default();
        if v >= 3 {
            req = req
                .with_client_software_name(s("courier"))
                .with_client_software_version(s("0.1.0"));
        }
        request_round_trip(req, v);

        let keys = (0..3)
            .map(|k| {
                api_versions_response::ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(k)
                    .with_max_version(k + 7)
            })
            .collect();
        let mut resp = ApiVersionsResponse::default()
            .with_error_code(35)
            .with_api_keys(keys);
        if v >= 1 {
            resp = resp.with_throttle_time_ms(17);
        }
        if v >= 3 {
            resp = resp
                .with_finalized_features_epoch(9)
                .with_supported_features(vec![
                    api_versions_response::SupportedFeatureKey::default()
                        .with_name(s("metadata.version"))
                        .with_min_version(1)
                        .with_max_version(20),
                ]);
        }
        response_round_trip::<ApiVersionsRequest>(resp, v);
    }
}

#[test]
fn metadata() {
    for v in versions(ApiKey::Metadata) {
        let topics = vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(s("orders")))),
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(s("payments")))),
        ];
        let mut req = MetadataRequest::default().with_topics(Some(topics));
        if v >= 4 {
            req = req.with_allow_auto_topic_creation(false);
        }
        if (8..=10).contains(&v) {
            req = req.with_include_cluster_authorized_operations(true);
        }
        if v >= 8 {
            req = req.with_include_topic_authorized_operations(true);
        }
        request_round_trip(req, v);
        // A null topic list asks for every topic.
        request_round_trip(MetadataRequest::default().with_topics(None), v);

        let brokers = (1..=3)
            .map(|id| {
                metadata_response::MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id))
                    .with_host(s(&format!("broker-{id}")))
                    .with_port(9090 + id)
                    .with_rack(Some(s("rack-a")))
            })
            .collect();
        let partitions = (0..3)
            .map(|p| {
                let mut part = metadata_response::MetadataResponsePartition::default()
                    .with_error_code(if p == 2 { 5 } else { 0 })
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(p + 1))
                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                    .with_isr_nodes(vec![BrokerId(p + 1)]);
                if v >= 7 {
                    part = part.with_leader_epoch(11);
                }
                if v >= 5 {
                    part = part.with_offline_replicas(vec![BrokerId(3)]);
                }
                part
            })
            .collect();
        let mut topic = metadata_response::MetadataResponseTopic::default()
            .with_name(Some(TopicName(s("orders"))))
            .with_is_internal(true)
            .with_partitions(partitions);
        if v >= 8 {
            topic = topic.with_topic_authorized_operations(0x0f);
        }
        if v >= 10 {
            topic = topic.with_topic_id(uuid::Uuid::from_u128(7));
        }
        let mut resp = MetadataResponse::default()
            .with_brokers(brokers)
            .with_controller_id(BrokerId(2))
            .with_topics(vec![topic]);
        if v >= 2 {
            resp = resp.with_cluster_id(Some(s("cluster-1")));
        }
        if v >= 3 {
            resp = resp.with_throttle_time_ms(5);
        }
        if (8..=10).contains(&v) {
            resp = resp.with_cluster_authorized_operations(3);
        }
        response_round_trip::<MetadataRequest>(resp, v);
    }
}

#[test]
fn produce() {
    for v in versions(ApiKey::Produce) {
        let partitions = (0..2)
            .map(|p| {
                produce_request::PartitionProduceData::default()
                    .with_index(p)
                    .with_records(Some(Bytes::from(vec![p as u8; 100 + p as usize])))
            })
            .collect();
        let req = ProduceRequest::default()
            .with_transactional_id(None)
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(s("orders")))
                .with_partition_data(partitions)]);
        request_round_trip(req, v);

        let parts = (0..2)
            .map(|p| {
                let mut pr = produce_response::PartitionProduceResponse::default()
                    .with_index(p)
                    .with_error_code(if p == 1 { 6 } else { 0 })
                    .with_base_offset(1_000 + p as i64)
                    .with_log_append_time_ms(1_700_000_000_000);
                if v >= 5 {
                    pr = pr.with_log_start_offset(3);
                }
                if v >= 8 {
                    pr = pr
                        .with_record_errors(vec![
                            produce_response::BatchIndexAndErrorMessage::default()
                                .with_batch_index(4)
                                .with_batch_index_error_message(Some(s("bad record"))),
                        ])
                        .with_error_message(Some(s("partition error")));
                }
                if v >= 10 {
                    pr = pr.with_current_leader(
                        produce_response::LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(2))
                            .with_leader_epoch(8),
                    );
                }
                pr
            })
            .collect();
        let mut resp = ProduceResponse::default()
            .with_responses(vec![produce_response::TopicProduceResponse::default()
                .with_name(TopicName(s("orders")))
                .with_partition_responses(parts)])
            .with_throttle_time_ms(12);
        if v >= 10 {
            resp = resp.with_node_endpoints(vec![produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(s("broker-2"))
                .with_port(9092)]);
        }
        response_round_trip::<ProduceRequest>(resp, v);
    }
}

#[test]
fn init_producer_id() {
    for v in versions(ApiKey::InitProducerId) {
        let mut req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000);
        if v >= 3 {
            req = req.with_producer_id(ProducerId(77)).with_producer_epoch(3);
        }
        request_round_trip(req, v);

        let resp = InitProducerIdResponse::default()
            .with_throttle_time_ms(1)
            .with_error_code(0)
            .with_producer_id(ProducerId(4_000_000_001))
            .with_producer_epoch(5);
        response_round_trip::<InitProducerIdRequest>(resp, v);
    }
}

#[test]
fn create_topics() {
    for v in versions(ApiKey::CreateTopics) {
        let topic = create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s("orders")))
            .with_num_partitions(6)
            .with_replication_factor(3)
            .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("compact")))]);
        let req = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(10_000)
            .with_validate_only(true);
        request_round_trip(req, v);

        let mut t = create_topics_response::CreatableTopicResult::default()
            .with_name(TopicName(s("orders")))
            .with_error_code(36)
            .with_error_message(Some(s("already exists")));
        if v >= 5 {
            t = t
                .with_num_partitions(6)
                .with_replication_factor(3)
                .with_configs(Some(vec![
                    create_topics_response::CreatableTopicConfigs::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("compact")))
                        .with_read_only(true),
                ]));
        }
        if v >= 7 {
            t = t.with_topic_id(uuid::Uuid::from_u128(9));
        }
        let resp = CreateTopicsResponse::default()
            .with_throttle_time_ms(2)
            .with_topics(vec![t]);
        response_round_trip::<CreateTopicsRequest>(resp, v);
    }
}

/// The hand-written Produce encoder writes exactly the bytes
/// `kafka-protocol` writes for the same request, at every version, with
/// and without a client id, for several topics and partitions; the batches
/// are passed through, not copied.
#[test]
fn hand_written_produce_frames_match_kafka_protocol() {
    use courier_kafka::protocol::produce::{
        encode, frame_size, PartitionData, ProduceHeader, TopicData,
    };
    let batches: Vec<Bytes> = (0..5)
        .map(|i| Bytes::from(vec![i as u8; 10 + 300 * i]))
        .collect();
    let layout: [(&str, &[(i32, usize)]); 3] = [
        ("orders", &[(0, 0), (3, 1)]),
        (
            "a-much-longer-topic-name.with.dots_and_underscores",
            &[(7, 2)],
        ),
        ("t", &[(1, 3), (2, 4)]),
    ];
    for version in 3..=12 {
        for (client_id, transactional_id) in [
            (Some("courier-test"), None),
            (None, None),
            (Some("courier-test"), Some("orders-writer-1")),
        ] {
            let header = ProduceHeader {
                version,
                correlation_id: 0x0102_0304,
                client_id,
                acks: -1,
                timeout_ms: 30_000,
                transactional_id,
            };
            let topics: Vec<TopicData> = layout
                .iter()
                .map(|(name, parts)| TopicData {
                    name,
                    partitions: parts
                        .iter()
                        .map(|&(partition, b)| PartitionData {
                            partition,
                            records: &batches[b],
                        })
                        .collect(),
                })
                .collect();
            let frame = encode(&header, &topics).unwrap();
            let ours: Vec<u8> = frame.parts.iter().flat_map(|p| p.iter().copied()).collect();
            assert_eq!(ours.len(), frame.len);
            assert_eq!(frame.len, frame_size(&header, &topics));
            for b in &batches {
                assert!(
                    frame
                        .parts
                        .iter()
                        .any(|p| p.as_ptr() == b.as_ptr() && p.len() == b.len()),
                    "v{version}: a batch was copied"
                );
            }

            let mut req = ProduceRequest::default();
            req.transactional_id = transactional_id.map(|t| TransactionalId(s(t)));
            req.acks = -1;
            req.timeout_ms = 30_000;
            req.topic_data = layout
                .iter()
                .map(|(name, parts)| {
                    TopicProduceData::default()
                        .with_name(TopicName(s(name)))
                        .with_partition_data(
                            parts
                                .iter()
                                .map(|&(partition, b)| {
                                    PartitionProduceData::default()
                                        .with_index(partition)
                                        .with_records(Some(batches[b].clone()))
                                })
                                .collect(),
                        )
                })
                .collect();
            let mut theirs = BytesMut::new();
            let cid = client_id.map(s);
            encode_request(&mut theirs, 0x0102_0304, cid.as_ref(), version, &req).unwrap();
            assert_eq!(
                ours,
                theirs.to_vec(),
                "v{version}, client id {client_id:?}, transactional id {transactional_id:?}"
            );
        }
    }
    let bad = ProduceHeader {
        version: 13,
        correlation_id: 1,
        client_id: None,
        acks: 1,
        timeout_ms: 1,
        transactional_id: None,
    };
    assert!(encode(&bad, &[]).is_err(), "v13 names topics by id");
}

#[test]
fn every_range_we_claim_is_one_kafka_protocol_knows() {
    for ours in SUPPORTED {
        let lib = ours.api.valid_versions();
        assert!(
            lib.min <= ours.min && ours.max <= lib.max,
            "{:?}: we claim v{}..=v{} but kafka-protocol knows {lib}",
            ours.api,
            ours.min,
            ours.max
        );
    }
}

#[test]
fn delete_topics() {
    for v in versions(ApiKey::DeleteTopics) {
        // admin::delete_topic names the topic in `topics` from v6 on, in
        // `topic_names` before.
        let req = if v >= 6 {
            DeleteTopicsRequest::default()
                .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                    .with_name(Some(TopicName(s("orders"))))])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("orders"))])
        };
        request_round_trip(req.with_timeout_ms(30_000), v);

        let mut r = delete_topics_response::DeletableTopicResult::default()
            .with_name(Some(TopicName(s("orders"))))
            .with_error_code(3);
        if v >= 5 {
            r = r.with_error_message(Some(s("unknown")));
        }
        if v >= 6 {
            r = r.with_topic_id(uuid::Uuid::from_u128(7));
        }
        let resp = DeleteTopicsResponse::default()
            .with_throttle_time_ms(1)
            .with_responses(vec![r]);
        response_round_trip::<DeleteTopicsRequest>(resp, v);
    }
}

#[test]
fn create_partitions() {
    for v in versions(ApiKey::CreatePartitions) {
        let t = create_partitions_request::CreatePartitionsTopic::default()
            .with_name(TopicName(s("orders")))
            .with_count(12)
            .with_assignments(None);
        let req = CreatePartitionsRequest::default()
            .with_topics(vec![t])
            .with_timeout_ms(30_000)
            .with_validate_only(true);
        request_round_trip(req, v);

        let r = create_partitions_response::CreatePartitionsTopicResult::default()
            .with_name(TopicName(s("orders")))
            .with_error_code(37)
            .with_error_message(Some(s("fewer")));
        let resp = CreatePartitionsResponse::default()
            .with_throttle_time_ms(3)
            .with_results(vec![r]);
        response_round_trip::<CreatePartitionsRequest>(resp, v);
    }
}

#[test]
fn describe_configs() {
    for v in versions(ApiKey::DescribeConfigs) {
        let resource = describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configuration_keys(Some(vec![s("retention.ms")]));
        let mut req = DescribeConfigsRequest::default()
            .with_resources(vec![resource])
            .with_include_synonyms(true);
        if v >= 3 {
            req = req.with_include_documentation(true);
        }
        request_round_trip(req, v);

        let mut c = describe_configs_response::DescribeConfigsResourceResult::default()
            .with_name(s("retention.ms"))
            .with_value(Some(s("3600000")))
            .with_read_only(true)
            .with_config_source(1)
            .with_is_sensitive(true)
            .with_synonyms(vec![
                describe_configs_response::DescribeConfigsSynonym::default()
                    .with_name(s("log.retention.ms"))
                    .with_value(Some(s("1")))
                    .with_source(5),
            ]);
        if v >= 3 {
            c = c
                .with_config_type(5)
                .with_documentation(Some(s("how long")));
        }
        let r = describe_configs_response::DescribeConfigsResult::default()
            .with_error_code(0)
            .with_error_message(Some(s("none")))
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configs(vec![c]);
        let resp = DescribeConfigsResponse::default()
            .with_throttle_time_ms(4)
            .with_results(vec![r]);
        response_round_trip::<DescribeConfigsRequest>(resp, v);
    }
}

#[test]
fn incremental_alter_configs() {
    for v in versions(ApiKey::IncrementalAlterConfigs) {
        let resource = incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("1000"))),
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("cleanup.policy"))
                    .with_config_operation(1)
                    .with_value(None),
            ]);
        let req = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![resource])
            .with_validate_only(true);
        request_round_trip(req, v);

        let r = incremental_alter_configs_response::AlterConfigsResourceResponse::default()
            .with_error_code(40)
            .with_error_message(Some(s("invalid")))
            .with_resource_type(2)
            .with_resource_name(s("orders"));
        let resp = IncrementalAlterConfigsResponse::default()
            .with_throttle_time_ms(5)
            .with_responses(vec![r]);
        response_round_trip::<IncrementalAlterConfigsRequest>(resp, v);
    }
}

#[test]
fn describe_quorum() {
    for v in versions(ApiKey::DescribeQuorum) {
        let req = DescribeQuorumRequest::default().with_topics(vec![
            describe_quorum_request::TopicData::default()
                .with_topic_name(TopicName(s("__cluster_metadata")))
                .with_partitions(vec![
                    describe_quorum_request::PartitionData::default().with_partition_index(0)
                ]),
        ]);
        request_round_trip(req, v);

        let mut p = describe_quorum_response::PartitionData::default()
            .with_partition_index(0)
            .with_leader_id(BrokerId(2))
            .with_leader_epoch(9)
            .with_high_watermark(1234);
        if v >= 2 {
            p = p.with_error_message(Some(s("none")));
        }
        let mut resp = DescribeQuorumResponse::default().with_topics(vec![
            describe_quorum_response::TopicData::default()
                .with_topic_name(TopicName(s("__cluster_metadata")))
                .with_partitions(vec![p]),
        ]);
        if v >= 2 {
            resp = resp.with_error_message(Some(s("none")));
        }
        response_round_trip::<DescribeQuorumRequest>(resp, v);
    }
}
