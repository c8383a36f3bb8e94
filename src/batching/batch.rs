//! A batch's two lives: [`OpenBatch`] while records are written into it,
//! [`SealedBatch`] once it is encoded (compressed, CRC'd) and waits in its
//! queue, travels in a request, or waits to be retried.
//!
//! Sealing is the one step between them (`OpenBatch::seal`); a batch whose
//! records cannot be encoded becomes a [`SealFailure`] instead, which only
//! carries what its reports need.

use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use crate::clock::Mono;
use crate::delivery::owed::{Owed, ReplyTo};
use crate::protocol::record_batch::{
    BatchBuilder, Compression, EncodedBatch, ProducerStamp, RECORD_BATCH_OVERHEAD,
};
use crate::record::{Record, Topic};

/// The batch being filled for one partition.
#[derive(Debug)]
pub(crate) struct OpenBatch {
    pub id: u64,
    builder: BatchBuilder,
    owed: Owed,
    pub created: Instant,
    /// `created` on the per-record clock.
    created_mono: Mono,
    /// Set when a record did not fit: the batch is ready to send without
    /// waiting for linger (the sticky partitioner has moved on from it).
    pub full: bool,
    /// The wall clock at `created`, in ms since the epoch: records' create
    /// times are derived from it and their own monotonic reading, so a
    /// record costs one clock reading, not two.
    created_wall_ms: i64,
    /// The `buffer.memory` this batch reserved; released when the sealed
    /// batch is dropped.
    memory: OwnedSemaphorePermit,
}

impl OpenBatch {
    /// A new batch holding `record` as its first record (an empty batch
    /// accepts any record, however large). `reply`'s report is owed from
    /// the start; with `max_records` it sizes the first owed chunk.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        id: u64,
        batch_size: usize,
        max_records: i32,
        compression: Compression,
        memory: OwnedSemaphorePermit,
        record: Record,
        reply: Option<ReplyTo<'_>>,
        accepted: Mono,
    ) -> OpenBatch {
        let mut open = OpenBatch {
            id,
            builder: BatchBuilder::new(batch_size, compression),
            owed: Owed::default(),
            created: Instant::now(),
            created_mono: Mono::now(),
            created_wall_ms: wall_clock_ms(),
            full: false,
            memory,
        };
        let timestamp = record.timestamp.unwrap_or(open.created_wall_ms);
        open.builder
            .try_append(
                timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &record.headers,
            )
            .expect("an empty batch accepts any record");
        if let Some(reply) = reply {
            // Size the first owed chunk from the first record, so a small
            // batch does not reserve a whole chunk.
            let per_record = (open.builder.size() - RECORD_BATCH_OVERHEAD).max(1);
            open.owed.first_capacity = (batch_size / per_record).min(max_records as usize);
            open.owed.push(0, timestamp, accepted, record, reply);
        }
        open
    }

    /// Writes `record` into the batch unless the batch is full: at
    /// `batch.size` bytes or `max_records` records. A record that does not
    /// fit marks the batch full (ready to send without waiting for linger).
    /// Its report, if any, is owed once it is in (`owe`).
    #[inline(always)]
    pub(crate) fn try_add(&mut self, record: &Record, timestamp: i64, max_records: i32) -> bool {
        let added = self.builder.record_count() < max_records
            && self
                .builder
                .try_append(
                    timestamp,
                    record.key.as_deref(),
                    record.value.as_deref(),
                    &record.headers,
                )
                .is_ok();
        self.full |= !added;
        added
    }

    /// Owes `reply` the report of the record just added at `index`.
    #[inline(always)]
    pub(crate) fn owe(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Mono,
        record: Record,
        reply: ReplyTo<'_>,
    ) {
        self.owed.push(index, timestamp, accepted, record, reply);
    }

    /// Records in the batch; the next record's offset delta.
    #[inline(always)]
    pub(crate) fn record_count(&self) -> i32 {
        self.builder.record_count()
    }

    /// Create time for a record accepted at `accepted`.
    #[inline]
    pub(crate) fn timestamp_at(&self, accepted: Mono) -> i64 {
        self.created_wall_ms + accepted.millis_since(self.created_mono)
    }

    /// Encodes the batch (compression, CRC) for `topic`/`partition`; its
    /// delivery deadline is `delivery_timeout` after it was opened.
    pub(crate) fn seal(
        self,
        topic: Topic,
        partition: i32,
        delivery_timeout: Duration,
    ) -> Result<SealedBatch, SealFailure> {
        let record_count = self.builder.record_count();
        match self.builder.finish(ProducerStamp::NONE) {
            Ok(encoded) => Ok(SealedBatch {
                id: self.id,
                topic,
                partition,
                encoded,
                owed: self.owed,
                record_count,
                deadline: self.created + delivery_timeout,
                attempts: 0,
                retry_at: None,
                _memory: self.memory,
            }),
            Err(e) => Err(SealFailure {
                id: self.id,
                partition,
                owed: self.owed,
                record_count,
                reason: e.to_string(),
            }),
        }
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A sealed (encoded) batch: queued, in flight, or waiting to retry.
#[derive(Debug)]
pub(crate) struct SealedBatch {
    pub id: u64,
    pub topic: Topic,
    pub partition: i32,
    pub encoded: EncodedBatch,
    pub owed: Owed,
    pub record_count: i32,
    /// Batch creation + `delivery.timeout.ms`: past this the batch fails.
    pub deadline: Instant,
    pub attempts: u32,
    /// Not before this instant (retry backoff).
    pub retry_at: Option<Instant>,
    _memory: OwnedSemaphorePermit,
}

/// A batch whose records could not be encoded (a compression error).
#[derive(Debug)]
pub(crate) struct SealFailure {
    pub id: u64,
    pub partition: i32,
    pub owed: Owed,
    pub record_count: i32,
    pub reason: String,
}
