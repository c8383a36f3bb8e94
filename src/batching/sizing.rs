//! Whether a record can ever be sent: the size of the smallest Produce
//! request that carries it, against `max.request.size`.
//!
//! Checked once per record before it is placed, so a record that no
//! request could carry fails at once (`RecordTooLarge`) instead of sitting
//! in a batch. Ordinary records pass a quick upper bound without being
//! sized exactly.

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;

use crate::protocol::message::request_frame_size;
use crate::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::messages::{ProduceRequest, TopicName};
use crate::protocol::record_batch::{single_record_batch_size, RECORD_BATCH_OVERHEAD};
use crate::protocol::versions::supported;
use crate::protocol::ApiKey;
use crate::record::Record;

/// The request-size check for one producer (its client id and
/// `max.request.size`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestSizing {
    /// Bytes a Produce request needs around one topic's batch, without the
    /// topic name.
    overhead: usize,
    max_request_size: usize,
}

impl RequestSizing {
    pub(crate) fn new(client_id: &StrBytes, max_request_size: usize) -> RequestSizing {
        RequestSizing {
            overhead: produce_overhead(client_id),
            max_request_size,
        }
    }

    /// The largest batch a Produce request of `max.request.size` can
    /// carry (with the longest topic name Kafka allows): `batch.size` is
    /// capped by it, so a batch never makes a request the broker refuses
    /// as too large. (A single record larger than this still goes alone,
    /// if `too_large` lets it through.)
    pub(crate) fn batch_cap(&self) -> usize {
        const MAX_TOPIC_NAME: usize = 249;
        self.max_request_size
            .saturating_sub(self.overhead + MAX_TOPIC_NAME)
            .max(1)
    }

    /// The Produce request size `record` needs, when that is over
    /// `max.request.size`. A record well under the limit is let through on
    /// a quick upper bound, without sizing it exactly.
    #[inline]
    pub(crate) fn too_large(&self, record: &Record) -> Option<usize> {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len());
        // Length, attributes, timestamp and offset deltas, key and value
        // lengths and header count take at most 36 bytes as varints.
        let bound = RECORD_BATCH_OVERHEAD
            + 36
            + len(&record.key)
            + len(&record.value)
            + self.overhead
            + record.topic.len();
        if record.headers.is_empty() && bound <= self.max_request_size {
            return None;
        }
        let needed = single_record_batch_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        ) + self.overhead
            + record.topic.len();
        (needed > self.max_request_size).then_some(needed)
    }
}

/// The size of a Produce request around one partition's batch, without the
/// topic name and the batch: the most any version we use needs, plus room
/// for the batch's length prefix.
fn produce_overhead(client_id: &StrBytes) -> usize {
    let mut req = ProduceRequest::default();
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_static_str(""));
    let mut pd = PartitionProduceData::default();
    pd.records = Some(Bytes::new());
    td.partition_data.push(pd);
    req.topic_data.push(td);
    let range = supported(ApiKey::Produce).expect("Produce is supported");
    (range.min..=range.max)
        .filter_map(|v| request_frame_size(Some(client_id), v, &req).ok())
        .max()
        .unwrap_or(128)
        + 5 // the batch's length varint may grow to 5 bytes
        + 2 // the topic name's length varint may grow
}
