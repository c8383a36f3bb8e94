//! Leader discovery from Produce answers (KIP-951): what a Produce response
//! says about where a partition's leadership went.
//!
//! From Produce v10, a broker that refuses a batch because it no longer
//! leads the partition (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) names
//! the leader it knows of in the partition's answer (`CurrentLeader`, a
//! tagged field: leader id and leader epoch), and lists the address of
//! every leader so named at the top of the response (`NodeEndpoints`,
//! tagged). A client can then move the partition at once instead of
//! waiting for a Metadata round trip. This module only reads those fields
//! out of a decoded response; whether a hint is newer than what the
//! producer holds is the metadata's business (`MetadataSnapshot::
//! with_leader_hints`), and acting on it the partitioner actor's.
//!
//! The rules follow the Java client's `Sender.completeBatch`: a hint counts
//! only on those two errors, and only when it names both a leader and an
//! epoch (-1 is "none" for each). An endpoint with a negative node id, an
//! empty host or a port outside 0..=65535 is dropped.
//!
//! # References
//! - KIP-951: <https://cwiki.apache.org/confluence/display/KAFKA/KIP-951%3A+Leader+discovery+optimisations+for+the+client>
//! - `ProduceResponse.json` (v10: `CurrentLeader`, tag 0 of a partition's
//!   answer; `NodeEndpoints`, tag 0 of the response):
//!   <https://github.com/apache/kafka/blob/trunk/clients/src/main/resources/common/message/ProduceResponse.json>

use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::ResponseError;

/// A partition's leader as a refusing broker named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentLeader {
    /// The broker id of the leader.
    pub leader: i32,
    /// Its leader epoch.
    pub epoch: i32,
}

/// The leader a partition's answer names, if the answer is a leadership
/// refusal (NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH) that names both
/// a leader and an epoch. Before v10, or when the broker knows no leader,
/// the field is absent (decoded as -1, -1) and this is `None`.
pub fn current_leader(answer: &PartitionProduceResponse) -> Option<CurrentLeader> {
    let refusal = matches!(
        ResponseError::try_from_code(answer.error_code),
        Some(ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch)
    );
    let hint = &answer.current_leader;
    (refusal && hint.leader_id.0 >= 0 && hint.leader_epoch >= 0).then_some(CurrentLeader {
        leader: hint.leader_id.0,
        epoch: hint.leader_epoch,
    })
}

/// The response's `NodeEndpoints` as (broker id, `host:port`), the form
/// the metadata keeps brokers in. Empty before v10 and when no partition
/// of the response moved.
pub fn node_endpoints(response: &ProduceResponse) -> Vec<(i32, String)> {
    response
        .node_endpoints
        .iter()
        .filter(|e| e.node_id.0 >= 0 && !e.host.is_empty() && (0..=65535).contains(&e.port))
        .map(|e| (e.node_id.0, format!("{}:{}", e.host.as_str(), e.port)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::decode_response;
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_response::{
        LeaderIdAndEpoch, NodeEndpoint, TopicProduceResponse,
    };
    use kafka_protocol::messages::{BrokerId, ProduceRequest, ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

    /// A Produce response as a broker writes it: header and body encoded at
    /// `version` (the header version that version calls for).
    fn wire(response: &ProduceResponse, version: i16) -> bytes::Bytes {
        let mut buf = BytesMut::new();
        let mut header = ResponseHeader::default();
        header.correlation_id = 7;
        header
            .encode(&mut buf, ProduceResponse::header_version(version))
            .unwrap();
        response.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    fn partition(
        index: i32,
        error: ResponseError,
        leader: i32,
        epoch: i32,
    ) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(error.code())
            .with_base_offset(-1)
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch),
            )
    }

    fn endpoint(id: i32, host: &'static str, port: i32) -> NodeEndpoint {
        NodeEndpoint::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_static_str(host))
            .with_port(port)
    }

    fn moved() -> ProduceResponse {
        ProduceResponse::default()
            .with_responses(vec![TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_responses(vec![
                    partition(0, ResponseError::NotLeaderOrFollower, 2, 9),
                    partition(1, ResponseError::FencedLeaderEpoch, 3, 4),
                    // Written: the field is absent.
                    PartitionProduceResponse::default().with_index(2),
                    // A leader error whose broker knows no leader.
                    partition(3, ResponseError::NotLeaderOrFollower, -1, -1),
                    // Another error: a hint there is not one.
                    partition(4, ResponseError::NotEnoughReplicas, 2, 9),
                ])])
            .with_node_endpoints(vec![
                endpoint(2, "broker-2", 9092),
                endpoint(3, "broker-3", 9094),
                endpoint(-1, "nobody", 9092),
                endpoint(4, "", 9092),
                endpoint(5, "broker-5", 70000),
            ])
    }

    /// Read from the wire at v10 and later, the tagged fields give each
    /// refused partition its new leader and the leaders' addresses.
    #[test]
    fn v10_and_later_answers_name_the_new_leader_and_its_address() {
        for version in [10, 11, 12] {
            let (id, resp) =
                decode_response::<ProduceRequest>(wire(&moved(), version), version).unwrap();
            assert_eq!(id, 7);
            let leaders: Vec<_> = resp.responses[0]
                .partition_responses
                .iter()
                .map(current_leader)
                .collect();
            assert_eq!(
                leaders,
                vec![
                    Some(CurrentLeader {
                        leader: 2,
                        epoch: 9
                    }),
                    Some(CurrentLeader {
                        leader: 3,
                        epoch: 4
                    }),
                    None,
                    None,
                    None,
                ],
                "v{version}"
            );
            assert_eq!(
                node_endpoints(&resp),
                vec![
                    (2, "broker-2:9092".to_string()),
                    (3, "broker-3:9094".to_string())
                ],
                "v{version}"
            );
        }
    }

    /// Before v10 the fields do not exist on the wire: a refusal carries no
    /// hint, and the producer asks for metadata as before.
    #[test]
    fn older_answers_carry_no_hint() {
        for version in [3, 8, 9] {
            let (_, resp) =
                decode_response::<ProduceRequest>(wire(&moved(), version), version).unwrap();
            assert!(
                resp.responses[0]
                    .partition_responses
                    .iter()
                    .all(|p| current_leader(p).is_none()),
                "v{version}"
            );
            assert!(node_endpoints(&resp).is_empty(), "v{version}");
        }
    }
}
