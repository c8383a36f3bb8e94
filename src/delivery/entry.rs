//! One owed report: the record a batch holds until its outcome is known,
//! and where its report goes. Also the pool that recycles the fixed-size
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
}

/// A record waiting for its report. Fire-and-forget records have none.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Offset delta within the batch.
    pub index: u32,
    /// The create time written into the batch.
    pub timestamp: i64,
    /// When the producer took the record (start of its latency).
    pub accepted: Mono,
    pub record: Record,
    pub to: OwedTo,
    /// The subscription permits its record holds (`Weigh::of`, taken
    /// when it was produced; 0 for other targets), given back with its
    /// report.
    pub weight: u32,
}

/// Owed entries per chunk, at most (about 45 KiB of entries).
pub(crate) const CHUNK: usize = 256;

/// Full-size chunk vectors that report streams have emptied, for new
/// batches to fill again: a busy producer then does not allocate (and
/// fault in) a fresh 45 KiB vector for every 256 records, and the reader's
/// thread does not free memory the producer's thread allocated.
static SPARE_CHUNKS: Mutex<Vec<Vec<Pending>>> = Mutex::new(Vec::new());

/// Spare chunk vectors kept at most (about 3 MiB).
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

/// Gives a chunk vector back for reuse (entries still in it are dropped).
pub(crate) fn recycle_chunk(mut entries: Vec<Pending>) {
    if entries.capacity() != CHUNK {
        return;
    }
    entries.clear();
    let mut spare = lock(&SPARE_CHUNKS);
    if spare.len() < MAX_SPARE_CHUNKS {
        spare.push(entries);
    }
}
