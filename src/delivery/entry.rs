//! One owed report: what a batch keeps of a record until its outcome is
//! known (not the record: its encoded copy in the batch is read back if
//! it fails), and where its report goes. Also the pool that recycles the fixed-size
//! vectors these entries travel in.
//!
//! These are the smallest parts of the report path, so every other
//! delivery module builds on them and they build on nothing above the
//! report and record types.

use std::sync::Mutex;

use actix::Recipient;
use tokio::sync::oneshot;

use crate::clock::Mono;
use crate::record::Record;
use crate::report::DeliveryReport;
use crate::sync::lock;

/// Where one owed entry's report goes, as stored in its batch.
/// Subscriptions are stored once per batch (`Owed::subscribers`) and
/// referred to by index, so a run of records from one subscriber costs no
/// reference-count traffic. (`ReplyTo` is the caller's form, before the
/// record is in a batch.)
#[derive(Debug)]
pub(crate) enum OwedTo {
    /// `send().await`.
    Oneshot(oneshot::Sender<DeliveryReport>),
    /// The batch's subscription at this index.
    Subscription(u32),
    /// An actor (`Produce { reply_to }`, `produce_to`).
    Actor(Recipient<DeliveryReport>),
    /// Nobody: a fire-and-forget record of a producer with interceptors,
    /// owed only so that they see its report.
    Nobody,
}

/// A record waiting for its report. Fire-and-forget records have none.
///
/// The record itself is not kept: a success report does not carry it, and
/// a failure reads its key, value and headers back from the batch
/// (`Settlement`), so an outstanding record costs its encoded bytes and
/// this entry, not a second copy of its content.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Offset delta within the batch.
    pub index: u32,
    /// The subscription permits its record holds (`Weigh::of`, taken
    /// when it was produced; 0 for other targets), given back with its
    /// report.
    pub weight: u32,
    /// The create time written into the batch.
    pub timestamp: i64,
    /// When the producer took the record (start of its latency).
    pub accepted: Mono,
    /// The record's `opaque` tag.
    pub opaque: u64,
    pub to: OwedTo,
    /// What the record left to the producer: its partition
    /// ([`EXPLICIT_PARTITION`]) and its timestamp ([`GIVEN_TIMESTAMP`]),
    /// so that a record handed back is the record as it was produced.
    pub flags: u8,
}

/// `Pending::flags`: the record named its partition.
pub(crate) const EXPLICIT_PARTITION: u8 = 1;
/// `Pending::flags`: the record had its own timestamp.
pub(crate) const GIVEN_TIMESTAMP: u8 = 2;

/// `Pending::flags` for `record`.
#[inline(always)]
pub(crate) fn flags_of(record: &Record) -> u8 {
    (if record.partition.is_some() {
        EXPLICIT_PARTITION
    } else {
        0
    }) | (if record.timestamp.is_some() {
        GIVEN_TIMESTAMP
    } else {
        0
    })
}

/// Owed entries per chunk, at most (16 KiB of entries).
pub(crate) const CHUNK: usize = 256;

/// Full-size chunk vectors that report streams have emptied, for new
/// batches to fill again: a busy producer then does not allocate (and
/// fault in) a fresh 16 KiB vector for every 256 records, and the reader's
/// thread does not free memory the producer's thread allocated.
static SPARE_CHUNKS: Mutex<Vec<Vec<Pending>>> = Mutex::new(Vec::new());

/// Spare chunk vectors kept at most (1 MiB).
const MAX_SPARE_CHUNKS: usize = 64;

/// An empty vector for `n` owed entries: a recycled one when `n` is a
/// full chunk and one is spare.
pub(crate) fn chunk_vec(n: usize) -> Vec<Pending> {
    let spare = if n == CHUNK {
        lock(&SPARE_CHUNKS).pop()
    } else {
        None
    };
    spare.unwrap_or_else(|| Vec::with_capacity(n))
}

/// Gives a chunk vector back for reuse (entries still in it are let go
/// of). An entry that names a subscription (an index into its batch's
/// subscribers) owns nothing, so those are forgotten in one pass instead
/// of an out-of-line drop call each; any other is dropped as usual.
#[inline(always)]
pub(crate) fn recycle_chunk(mut entries: Vec<Pending>) {
    for p in entries.drain(..) {
        match p.to {
            OwedTo::Subscription(_) => std::mem::forget(p),
            _ => drop(p),
        }
    }
    if entries.capacity() == CHUNK {
        keep_spare(entries);
    }
}

/// Keeps an empty full-size chunk vector in the spare pool, if it has room.
fn keep_spare(entries: Vec<Pending>) {
    let mut spare = lock(&SPARE_CHUNKS);
    if spare.len() < MAX_SPARE_CHUNKS {
        spare.push(entries);
    }
}
