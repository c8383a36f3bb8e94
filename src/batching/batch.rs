//! A batch's two lives: [`OpenBatch`] while records are written into it,
//! [`SealedBatch`] once it is encoded (compressed, CRC'd) and waits in its
//! queue, travels in a request, or waits to be retried.
//!
//! Sealing is the one step between them (`OpenBatch::seal`); a batch whose
//! records cannot be encoded becomes a [`SealFailure`] instead, which only
//! carries what its reports need.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::Instant;

use tokio::sync::OwnedSemaphorePermit;

use crate::batching::reservation::Reservation;
use crate::clock::Mono;
use crate::delivery::owed::{Owed, ReplyTo};
use crate::delivery::settlement::Readback;
use crate::protocol::record_batch::decode::decode_records;
use crate::protocol::record_batch::{
    increment_sequence, AppendRefused, BatchBuilder, Codec, EncodedBatch, ProducerStamp,
    RECORD_BATCH_OVERHEAD,
};
use crate::record::{Record, Topic};
use crate::sync::lock;

/// The most bytes `record` can take in a batch: its key, value and
/// header bytes, and every varint and field around them at their
/// largest (length 5, attributes 1, timestamp delta 10, offset delta 5,
/// key and value lengths 5 each, header count 5; per header two lengths).
#[inline(always)]
pub(crate) fn encoded_upper_bound(record: &Record) -> usize {
    record.approx_size() + 36 + 10 * record.headers.len()
}

/// Bytes a new batch's buffer starts with: room for a few records like
/// its first. With thousands of partitions most batches hold a handful.
#[inline]
pub(crate) fn first_room(record: &Record) -> usize {
    RECORD_BATCH_OVERHEAD + 4 * encoded_upper_bound(record)
}

/// Sealed batches dropped without being settled (a panic while a
/// connection actor held them): the last line of defence. `SealedBatch`'s
/// drop pays their reports (`Cancelled`, each record read back from the
/// batch); their partition's in-flight count and
/// unacknowledged set, and the flush bookkeeping, are repaired from here
/// by the supervisor's sweep (`Engine::bury_abandoned`), never from the
/// drop itself, which may run while a queue lock is held.
#[derive(Debug, Default)]
pub(crate) struct Graveyard(Mutex<Vec<Abandoned>>);

/// One batch dropped unsettled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Abandoned {
    pub topic: Topic,
    pub partition: i32,
    pub id: u64,
    /// It was counted in its queue's `in_flight`.
    pub in_flight: bool,
}

impl Graveyard {
    /// Takes every batch dropped since the last call.
    pub(crate) fn take(&self) -> Vec<Abandoned> {
        std::mem::take(&mut *lock(&self.0))
    }
}

/// What a sealed batch owes its partition beyond its reports: to leave the
/// in-flight count it entered and to be marked done. Settling the batch
/// clears it; dropping an unsettled one records it in the [`Graveyard`].
#[derive(Debug)]
pub(crate) struct Ledger {
    graveyard: Arc<Graveyard>,
    /// The batch (its `in_flight` unused here).
    batch: Abandoned,
    /// Counted in its queue's `in_flight` (`QueueState::take_off` and
    /// `land` keep this and the count together).
    pub in_flight: bool,
    settled: bool,
}

impl Ledger {
    pub(crate) fn new(graveyard: Arc<Graveyard>, topic: Topic, partition: i32, id: u64) -> Ledger {
        Ledger {
            graveyard,
            batch: Abandoned {
                topic,
                partition,
                id,
                in_flight: false,
            },
            in_flight: false,
            settled: false,
        }
    }

    /// The ledger of part `id` of this batch (a split), not in flight.
    fn part(&self, id: u64) -> Ledger {
        Ledger::new(
            self.graveyard.clone(),
            self.batch.topic,
            self.batch.partition,
            id,
        )
    }

    /// The batch is settled (reported and marked done) or handed on
    /// (split into parts): nothing is left to repair.
    pub(crate) fn settle(&mut self) {
        self.settled = true;
    }
}

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
    /// The `buffer.memory` and `queue.buffering.max.messages` room this
    /// batch reserved; released when the sealed batch is dropped.
    memory: Reservation,
    /// Fault-injection builds: the codec whose failure `seal` reports
    /// (`FAIL_COMPRESSION_TOPIC`).
    #[cfg(feature = "fault-injection")]
    fail_compression: Option<crate::protocol::record_batch::Compression>,
}

/// Fault-injection builds only: the batches of a topic whose name starts
/// with this fail to seal as a codec library's error would make them (with
/// any codec but `none`), so that tests can follow the reports of a
/// compression failure. The seam is here, not in the codec: such a batch
/// is encoded without compression, and `seal` reports the failure.
#[cfg(feature = "fault-injection")]
pub const FAIL_COMPRESSION_TOPIC: &str = "courier-fault-fail-compression";

/// The codec to encode `record`'s batch with, and the codec whose failure
/// to inject at `seal` (`FAIL_COMPRESSION_TOPIC`).
#[cfg(feature = "fault-injection")]
fn injected_compression_failure(
    record: &Record,
    codec: Codec,
) -> (Codec, Option<crate::protocol::record_batch::Compression>) {
    use crate::protocol::record_batch::Compression;
    if codec.compression != Compression::None
        && record.topic.as_str().starts_with(FAIL_COMPRESSION_TOPIC)
    {
        (Codec::from(Compression::None), Some(codec.compression))
    } else {
        (codec, None)
    }
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
        compression: Codec,
        memory: Reservation,
        record: &Record,
        reply: Option<ReplyTo<'_>>,
        accepted: Mono,
    ) -> OpenBatch {
        #[cfg(feature = "fault-injection")]
        let (compression, fail_compression) = injected_compression_failure(record, compression);
        let mut open = OpenBatch {
            id,
            // Room for a few records like the first, within what it
            // reserved of buffer.memory: with thousands of partitions most
            // batches hold a handful. The buffer grows as records come
            // (`BatchBuilder::try_append`), the reservation with it
            // (`try_add`).
            builder: BatchBuilder::with_capacity(
                batch_size,
                first_room(record).min(memory.memory_bytes()),
                compression,
            ),
            owed: Owed::default(),
            created: Instant::now(),
            created_mono: Mono::now(),
            created_wall_ms: wall_clock_ms(),
            full: false,
            memory,
            #[cfg(feature = "fault-injection")]
            fail_compression,
        };
        // Once per batch, not per owed entry: the topic its dropped
        // reports name (`Owed::pay_dropped`).
        open.owed.topic = Some(record.topic);
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
        if self.builder.record_count() >= max_records {
            self.full = true;
            return false;
        }
        // A batch starts with a share of buffer.memory
        // (config::INITIAL_RESERVATION, or its first record) and takes
        // more as it grows, so a large batch.size does not pin memory
        // for partitions that get little: the encoder refuses a record
        // that would take the batch past what it holds, with the size it
        // needs, and the batch asks for more (at least doubling). Once.
        let mut grown = false;
        loop {
            match self.builder.try_append_within(
                timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &record.headers,
                self.memory.memory_bytes(),
            ) {
                Ok(()) => return true,
                Err(AppendRefused::Room(need))
                    if !grown && self.memory.grow_memory(need, self.builder.limit()) =>
                {
                    grown = true;
                }
                Err(_) => {
                    self.full = true;
                    return false;
                }
            }
        }
    }

    /// Whether `queue.buffering.max.messages` leaves room for one more
    /// record (`Reservation::room_for_record`; `carried` is room a produce
    /// call waited for).
    #[inline(always)]
    pub(crate) fn record_room(
        &mut self,
        max_records: i32,
        carried: &mut Option<OwnedSemaphorePermit>,
    ) -> bool {
        let count = self.builder.record_count();
        self.memory.room_for_record(count, max_records, carried)
    }

    /// Owes `reply` the report of the record just added at `index`.
    #[inline(always)]
    pub(crate) fn owe(
        &mut self,
        index: u32,
        timestamp: i64,
        accepted: Mono,
        record: &Record,
        reply: ReplyTo<'_>,
    ) {
        self.owed.push(index, timestamp, accepted, record, reply);
    }

    /// The batch's encoded size so far, in bytes.
    #[inline(always)]
    pub(crate) fn size(&self) -> usize {
        self.builder.size()
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
        graveyard: &Arc<Graveyard>,
    ) -> Result<SealedBatch, SealFailure> {
        let record_count = self.builder.record_count();
        let mut memory = self.memory;
        memory.trim(record_count);
        let finished = self.builder.finish_or_uncompressed(ProducerStamp::NONE);
        #[cfg(feature = "fault-injection")]
        let finished = match (finished, self.fail_compression) {
            (Ok(encoded), Some(codec)) => Err((
                crate::protocol::record_batch::CompressionError {
                    codec,
                    reason: "injected failure (fault-injection build)".to_string(),
                },
                encoded,
            )),
            (finished, _) => finished,
        };
        match finished {
            Ok(encoded) => Ok(SealedBatch {
                // What the batch holds from here on is its encoded bytes:
                // the rest of its reservation goes back to the pool now,
                // not once it is settled.
                _memory: Some(memory.trimmed_to(encoded.bytes().len())),
                id: self.id,
                topic,
                partition,
                encoded,
                owed: self.owed,
                record_count,
                deadline: self.created + delivery_timeout,
                attempts: 0,
                retry_at: None,
                ledger: Ledger::new(graveyard.clone(), topic, partition, self.id),
            }),
            Err((e, uncompressed)) => Err(SealFailure {
                id: self.id,
                topic,
                partition,
                owed: self.owed,
                record_count,
                reason: e.to_string(),
                uncompressed,
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
    /// The batch's `buffer.memory` and record room (after a split, the
    /// last part holds them).
    _memory: Option<Reservation>,
    /// Last: dropped after `owed` has paid the reports of an unsettled
    /// batch.
    pub ledger: Ledger,
}

/// A sealed batch dropped with reports still owed (a panic while a
/// connection actor held it; see [`Graveyard`]): each is paid `Cancelled`
/// here, its record read back from the batch, before the fields drop (the
/// ledger last).
impl Drop for SealedBatch {
    fn drop(&mut self) {
        if self.owed.len() == 0 {
            return;
        }
        let readback = Readback {
            bytes: self.encoded.bytes(),
            // Our own batch: decompressed, at most about batch.size or one
            // record; the bound only guards a bug.
            max_size: 1 << 30,
        };
        self.owed
            .pay_dropped(Some(self.partition), Some(self.attempts), Some(readback));
    }
}

/// An unsettled batch dropped: its partition and the flush bookkeeping are
/// repaired later (see [`Graveyard`]).
impl Drop for Ledger {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        tracing::error!(
            topic = %self.batch.topic,
            partition = self.batch.partition,
            batch = self.batch.id,
            "batch dropped unsettled; its reports are paid Cancelled and its partition repaired"
        );
        let mut dropped = self.batch;
        dropped.in_flight = self.in_flight;
        lock(&self.graveyard.0).push(dropped);
    }
}

impl SealedBatch {
    /// Splits this batch into one batch per record, in order, with ids
    /// `first_id`, `first_id + 1`, …: for a batch the broker refused as too
    /// large (MESSAGE_TOO_LARGE), so that each record goes, or fails, on
    /// its own. Each part owes its record's report, keeps this batch's
    /// deadline and attempts, and, if this batch was stamped, carries the
    /// stamp of its record's own sequence (so the partition's sequences
    /// stay contiguous). `Err` hands the batch back with the reason when
    /// its records cannot be read back (`max_size` bounds decompression).
    pub(crate) fn split(
        mut self,
        first_id: u64,
        max_size: usize,
    ) -> Result<Vec<SealedBatch>, (SealedBatch, String)> {
        let records = match decode_records(self.encoded.bytes(), max_size) {
            Ok(r) if r.len() == self.record_count as usize => r,
            Ok(r) => {
                let why = format!(
                    "{} records read back, {} written",
                    r.len(),
                    self.record_count
                );
                return Err((self, why));
            }
            Err(e) => return Err((self, e.to_string())),
        };
        let stamp = self.encoded.stamp();
        let codec = self.encoded.compression();
        let mut encoded = Vec::with_capacity(records.len());
        for (j, r) in records.iter().enumerate() {
            let mut b = BatchBuilder::new(self.encoded.len(), codec);
            b.try_append(
                r.timestamp,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            )
            .expect("an empty batch accepts any record");
            let part_stamp = if stamp.producer_id >= 0 {
                ProducerStamp {
                    base_sequence: increment_sequence(stamp.base_sequence, j as i32),
                    ..stamp
                }
            } else {
                ProducerStamp::NONE
            };
            match b.finish(part_stamp) {
                Ok(e) => encoded.push(e),
                Err(e) => return Err((self, e.to_string())),
            }
        }
        let mut owed: std::collections::BTreeMap<u32, Owed> = std::mem::take(&mut self.owed)
            .into_singles()
            .into_iter()
            .collect();
        let last = encoded.len() - 1;
        let mut memory = self._memory.take();
        // The parts carry on for this batch (the first under its id).
        self.ledger.settle();
        let ledger = &self.ledger;
        Ok(encoded
            .into_iter()
            .enumerate()
            .map(|(j, encoded)| SealedBatch {
                id: first_id + j as u64,
                topic: self.topic,
                partition: self.partition,
                encoded,
                owed: owed.remove(&(j as u32)).unwrap_or_default(),
                record_count: 1,
                deadline: self.deadline,
                attempts: self.attempts,
                retry_at: None,
                _memory: if j == last { memory.take() } else { None },
                ledger: ledger.part(first_id + j as u64),
            })
            .collect())
    }
}

/// A batch whose records could not be encoded (a compression error).
#[derive(Debug)]
pub(crate) struct SealFailure {
    pub id: u64,
    pub topic: Topic,
    pub partition: i32,
    pub owed: Owed,
    pub record_count: i32,
    pub reason: String,
    /// The batch encoded without compression: where its failed records
    /// are read back from.
    pub uncompressed: EncodedBatch,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::{oneshot, Semaphore};

    use super::*;
    use crate::protocol::record_batch::Compression;
    use crate::report::DeliveryReport;

    /// A batch of up to `batch_size` bytes holding `first`, owing no
    /// reports, with `memory` of buffer.memory reserved.
    fn unreported(batch_size: usize, memory: OwnedSemaphorePermit, first: Record) -> OpenBatch {
        OpenBatch::start(
            1 << 16,
            batch_size,
            10_000,
            Compression::None.into(),
            Reservation::memory_only(memory),
            &first,
            None,
            Mono::now(),
        )
    }

    /// A batch's buffer starts with room for a few records like its
    /// first (thousands of partitions mostly hold a handful each), doubles
    /// up to 4 KiB, then grows to batch.size in one step.
    #[test]
    fn a_batch_buffer_starts_small_doubles_to_4_kib_then_takes_batch_size() {
        let batch_size = 256 * 1024;
        let pool = Arc::new(Semaphore::new(1 << 20));
        let memory = pool.clone().try_acquire_many_owned(4 * 1024).unwrap();
        let rec = || Record::to("t").value(vec![7u8; 100]);
        let mut open = unreported(batch_size, memory, rec());
        let first = open.builder.capacity();
        assert!(first < 1024, "room for a few records: {first}");
        let mut seen = vec![first];
        for _ in 0..1_000 {
            assert!(open.try_add(&rec(), 1000, 10_000));
            let now = open.builder.capacity();
            if now != *seen.last().unwrap() {
                seen.push(now);
            }
        }
        assert_eq!(
            seen[1..],
            [2 * first, 4 * first, 4 * 1024, batch_size],
            "doubling to 4 KiB, then batch.size"
        );
    }

    /// Past MAX_INITIAL_CAPACITY (1 MiB, with a larger batch.size) the
    /// buffer still grows by doubling, not by each record's size: a few
    /// reallocations, not one a record.
    #[test]
    fn a_buffer_past_a_mebibyte_doubles() {
        let batch_size = 8 << 20;
        let pool = Arc::new(Semaphore::new(16 << 20));
        let memory = pool.clone().try_acquire_many_owned(8 << 20).unwrap();
        let rec = || Record::to("t").value(vec![7u8; 100]);
        let mut open = unreported(batch_size, memory, rec());
        let mut grown = 0;
        let mut last = open.builder.capacity();
        while open.size() < 6 << 20 {
            assert!(open.try_add(&rec(), 1000, i32::MAX));
            if open.builder.capacity() != last {
                last = open.builder.capacity();
                grown += 1;
            }
        }
        assert!(grown <= 8, "the buffer grew {grown} times");
    }

    /// A batch takes buffer.memory as it fills, doubling from what it
    /// started with, never past batch.size, and is full (not over the
    /// pool) once the pool has no more: what it holds always covers what
    /// it has written.
    #[test]
    fn a_batch_takes_memory_as_it_fills_and_is_full_when_the_pool_is() {
        let batch_size = 256 * 1024;
        let pool = Arc::new(Semaphore::new(100 * 1024));
        let memory = pool.clone().try_acquire_many_owned(16 * 1024).unwrap();
        let value = vec![7u8; 1000];
        let rec = || Record::to("t").value(value.clone());
        let mut open = unreported(batch_size, memory, rec());
        let mut held = vec![open.memory.memory_bytes()];
        while open.try_add(&rec(), 1000, 10_000) {
            let now = open.memory.memory_bytes();
            assert!(now >= open.builder.size(), "holds what it wrote");
            if now != *held.last().unwrap() {
                held.push(now);
            }
        }
        assert!(open.full, "the pool ran out before batch.size");
        assert_eq!(held[..3], [16 * 1024, 32 * 1024, 64 * 1024], "doubling");
        let total: usize = open.memory.memory_bytes();
        assert!(total <= 100 * 1024, "never past the pool");
        assert_eq!(pool.available_permits(), 100 * 1024 - total);
        assert!(
            open.builder.size() > 64 * 1024,
            "the last growth took what the pool had left"
        );
    }

    /// A split keeps the batch's place and order, hands each record's
    /// report obligation to its own part, and gives stamped parts the
    /// sequences their records had.
    #[test]
    fn a_split_batch_keeps_order_sequences_and_reports() {
        let pool = Arc::new(Semaphore::new(1 << 20));
        let memory = pool.clone().try_acquire_many_owned(1000).unwrap();
        let topic = Topic::from("t");
        let rec = |i: usize| Record::to("t").key(format!("k{i}")).value(format!("v{i}"));
        let mut receivers = Vec::new();
        let (tx, rx) = oneshot::channel();
        receivers.push(Some(rx));
        let mut open = OpenBatch::start(
            7 << 16,
            1 << 20,
            10_000,
            Compression::Lz4.into(),
            Reservation::memory_only(memory),
            &rec(0),
            Some(ReplyTo::Oneshot(tx)),
            Mono::now(),
        );
        for i in 1..5 {
            let r = rec(i);
            assert!(open.try_add(&r, 1000 + i as i64, 10_000));
            // Record 2 is fire-and-forget: it owes no report.
            if i == 2 {
                receivers.push(None);
                continue;
            }
            let (tx, rx) = oneshot::channel();
            receivers.push(Some(rx));
            open.owe(
                i as u32,
                1000 + i as i64,
                Mono::now(),
                &r,
                ReplyTo::Oneshot(tx),
            );
        }
        let mut sealed = open
            .seal(topic, 3, Duration::from_secs(60), &Arc::default())
            .unwrap();
        sealed.encoded.set_stamp(ProducerStamp {
            producer_id: 42,
            producer_epoch: 1,
            base_sequence: i32::MAX - 1,
            transactional: false,
        });
        // Sealed, the batch holds its encoded bytes of what it reserved.
        let held = sealed.encoded.bytes().len();
        assert!(held < 1000);
        assert_eq!(pool.available_permits(), (1 << 20) - held, "trimmed");
        let parts = sealed.split(7 << 16, 1 << 20).unwrap();
        assert_eq!(parts.len(), 5);
        assert_eq!(
            pool.available_permits(),
            (1 << 20) - held,
            "memory still held"
        );
        for (j, p) in parts.iter().enumerate() {
            assert_eq!(p.id, (7 << 16) + j as u64);
            assert_eq!((p.record_count, p.partition), (1, 3));
            let s = p.encoded.stamp();
            assert_eq!((s.producer_id, s.producer_epoch), (42, 1));
            // Sequences wrap past i32::MAX, as Kafka's do.
            let want = [i32::MAX - 1, i32::MAX, 0, 1, 2][j];
            assert_eq!(s.base_sequence, want);
            let read =
                crate::protocol::record_batch::decode::decode_records(p.encoded.bytes(), 1 << 20)
                    .unwrap();
            assert_eq!(read[0].value.as_deref(), Some(format!("v{j}").as_bytes()));
            assert_eq!(p.owed.len(), usize::from(j != 2));
        }
        // Each part pays its own record's report: failed, each hands back
        // its own record, read back from the part.
        for mut p in parts {
            p.ledger.settle();
            crate::delivery::router::route(
                p.topic,
                p.partition,
                p.record_count,
                1,
                std::mem::take(&mut p.owed),
                crate::delivery::settlement::Outcome::Failed {
                    kind: crate::report::ErrorKind::Timeout,
                    message: "late".into(),
                },
                Some(crate::delivery::settlement::Readback {
                    bytes: p.encoded.bytes(),
                    max_size: 1 << 20,
                }),
                &crate::stats::Stats::default(),
            );
        }
        assert_eq!(pool.available_permits(), 1 << 20, "memory released");
        for (j, rx) in receivers.into_iter().enumerate() {
            let Some(mut rx) = rx else { continue };
            match rx.try_recv().expect("one report") {
                DeliveryReport::Failed(e) => assert_eq!(*e.record, rec(j)),
                other => panic!("{other:?}"),
            }
        }
    }
}
