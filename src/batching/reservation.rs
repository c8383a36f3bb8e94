//! What a batch holds of the producer's two buffer bounds: its bytes of
//! `buffer.memory`, and room for its records under
//! `queue.buffering.max.messages` (librdkafka's bound on records
//! buffered: appended and not yet settled).
//!
//! Both are semaphore permits that the batch holds until it is dropped,
//! after its reports are routed, so room comes back once per batch. The
//! record bound must not cost a shared atomic per record, so a batch takes
//! room for its records in chunks of [`CHUNK`]: the open batch compares
//! its record count with the room it holds (a plain integer compare under
//! the partition lock it holds anyway) and only when that is used up asks
//! the shared [`RecordPool`] for more (one atomic a chunk). Sealing gives
//! back what its records did not use. So the bound is never passed, and it
//! can be met early by at most `CHUNK - 1` records per open batch (a chunk
//! asks for no more than the pool has left, so a small bound is not met
//! early by a whole chunk).
//!
//! A produce call that had to wait for room (or memory) carries what it
//! got into its next try as [`Reserved`].

use std::sync::Arc;

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Records a batch takes room for at a time, beyond its first.
pub(crate) const CHUNK: usize = 64;

/// The shared count behind `queue.buffering.max.messages`: one permit per
/// record buffered.
#[derive(Debug)]
pub(crate) struct RecordPool {
    sem: Arc<Semaphore>,
}

impl RecordPool {
    /// A pool for at most `max` records.
    pub(crate) fn new(max: usize) -> RecordPool {
        RecordPool {
            sem: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
        }
    }

    /// Room for one record now (a new batch's first), if there is any.
    pub(crate) fn try_one(&self) -> Option<OwnedSemaphorePermit> {
        self.sem.clone().try_acquire_owned().ok()
    }

    /// Waits for room for one record; `Err` once the pool is closed.
    pub(crate) async fn one(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        self.sem.clone().acquire_owned().await
    }

    /// Closes the pool (the producer is closing): waiters get `Err`.
    pub(crate) fn close(&self) {
        self.sem.close();
    }

    /// Room for this many more records right now (tests).
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.sem.available_permits()
    }
}

/// What a produce call reserved while it waited, for its next try.
#[derive(Debug, Default)]
pub(crate) struct Reserved {
    /// A `buffer.memory` reservation (for a new batch).
    pub memory: Option<OwnedSemaphorePermit>,
    /// Room for the record under `queue.buffering.max.messages`.
    pub record: Option<OwnedSemaphorePermit>,
}

/// A batch's share of both bounds, released when the batch is dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    _memory: OwnedSemaphorePermit,
    /// Room for this many records (`None`: not counted, for tests).
    records: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    /// A new batch's reservation: its memory and its first record's room.
    pub(crate) fn new(memory: OwnedSemaphorePermit, first: OwnedSemaphorePermit) -> Reservation {
        Reservation {
            _memory: memory,
            records: Some(first),
        }
    }

    /// Memory only; records not counted (tests of batches alone).
    #[cfg(test)]
    pub(crate) fn memory_only(memory: OwnedSemaphorePermit) -> Reservation {
        Reservation {
            _memory: memory,
            records: None,
        }
    }

    /// Whether a batch of `count` records has room for one more under the
    /// record bound: the room it holds, or `carried` (room a produce call
    /// waited for), or another chunk from the pool. A batch at
    /// `max_records` has room (it is full: the caller opens a new batch).
    #[inline(always)]
    pub(crate) fn room_for_record(
        &mut self,
        count: i32,
        max_records: i32,
        carried: &mut Option<OwnedSemaphorePermit>,
    ) -> bool {
        match &mut self.records {
            Some(held) if count as usize >= held.num_permits() && count < max_records => {
                more_room(held, count, max_records, carried)
            }
            _ => true,
        }
    }

    /// Gives back the room the batch's `count` records did not use (at
    /// seal: no record is added after).
    pub(crate) fn trim(&mut self, count: i32) {
        if let Some(held) = &mut self.records {
            let unused = held.num_permits().saturating_sub(count.max(0) as usize);
            drop(held.split(unused));
        }
    }

    /// Gives back the `buffer.memory` held beyond `bytes` (at seal: the
    /// batch's encoded size).
    pub(crate) fn trimmed_to(mut self, bytes: usize) -> Reservation {
        let held = self._memory.num_permits();
        if held > bytes {
            drop(self._memory.split(held - bytes));
        }
        self
    }

    /// Bytes of `buffer.memory` the batch holds.
    #[inline(always)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self._memory.num_permits()
    }

    /// Grows the batch's memory to hold `need` bytes (at most `limit`,
    /// its `batch.size`): at least doubling, so a batch asks the pool a
    /// few times in its life, not per record; when the pool cannot give
    /// the doubling, just what `need` lacks. `false` when the pool has no
    /// room for that either: the batch is full at what it holds.
    #[cold]
    #[inline(never)]
    pub(crate) fn grow_memory(&mut self, need: usize, limit: usize) -> bool {
        let held = self._memory.num_permits();
        let target = need.max(held * 2).min(limit.max(held));
        if target <= held {
            // At batch.size already: the builder's own limit decides.
            return true;
        }
        let sem = self._memory.semaphore().clone();
        // The doubling, or (the pool nearly used up) just this record's.
        let more = sem
            .clone()
            .try_acquire_many_owned((target - held) as u32)
            .or_else(|_| sem.try_acquire_many_owned((need.min(limit) - held) as u32));
        match more {
            Ok(more) => {
                self._memory.merge(more);
                true
            }
            Err(_) => false,
        }
    }

    /// Records' room held (tests).
    #[cfg(test)]
    pub(crate) fn records_held(&self) -> usize {
        self.records.as_ref().map_or(0, |p| p.num_permits())
    }
}

/// The batch's room is used up: take the carried room, or a chunk from
/// the pool (no more than it has left), or one last record's worth.
#[cold]
#[inline(never)]
fn more_room(
    held: &mut OwnedSemaphorePermit,
    count: i32,
    max_records: i32,
    carried: &mut Option<OwnedSemaphorePermit>,
) -> bool {
    if let Some(c) = carried.take() {
        if Arc::ptr_eq(c.semaphore(), held.semaphore()) {
            held.merge(c);
            return true;
        }
    }
    let sem = held.semaphore().clone();
    let want = CHUNK
        .min((max_records - count).max(1) as usize)
        .min(sem.available_permits())
        .max(1);
    let got = sem
        .clone()
        .try_acquire_many_owned(want as u32)
        .or_else(|_| sem.try_acquire_owned());
    match got {
        Ok(p) => {
            held.merge(p);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Room is taken a chunk at a time, never past the pool, and whatever
    /// a batch did not use comes back at seal; the rest when it is dropped.
    #[test]
    fn room_comes_in_chunks_and_goes_back_per_batch() {
        let memory = Arc::new(Semaphore::new(1000));
        let pool = RecordPool::new(100);
        let mut r = Reservation::new(
            memory.clone().try_acquire_owned().unwrap(),
            pool.try_one().unwrap(),
        );
        // The first record's room came with the batch.
        let mut none = None;
        assert!(r.room_for_record(0, 10_000, &mut none));
        assert_eq!(pool.available(), 99);
        // The second takes a chunk.
        assert!(r.room_for_record(1, 10_000, &mut none));
        assert_eq!(r.records_held(), 1 + CHUNK);
        for count in 2..=CHUNK as i32 {
            assert!(r.room_for_record(count, 10_000, &mut none));
        }
        assert_eq!(pool.available(), 100 - 1 - CHUNK, "no atomic until used up");
        // The next chunk is what is left.
        assert!(r.room_for_record(1 + CHUNK as i32, 10_000, &mut none));
        assert_eq!(pool.available(), 0);
        assert!(
            !r.room_for_record(100, 10_000, &mut none),
            "the bound holds"
        );
        // Carried room (a produce call waited for it) is used first.
        let other = RecordPool::new(1);
        let mut carried = Some(other.try_one().unwrap());
        assert!(
            !r.room_for_record(100, 10_000, &mut carried),
            "room of another pool is not taken"
        );
        // Sealed at 70 records: 30 come back; dropped: the rest.
        r.trim(70);
        assert_eq!(pool.available(), 30);
        drop(r);
        assert_eq!(pool.available(), 100);
        assert_eq!(memory.available_permits(), 1000);
    }

    /// A full batch (at `batch.num.messages`) has room: the caller opens
    /// a new batch, which takes its own.
    #[test]
    fn a_full_batch_takes_no_room() {
        let memory = Arc::new(Semaphore::new(10));
        let pool = RecordPool::new(5);
        let mut r = Reservation::new(memory.try_acquire_owned().unwrap(), pool.try_one().unwrap());
        assert!(r.room_for_record(3, 3, &mut None));
        assert_eq!(pool.available(), 4);
    }
}
