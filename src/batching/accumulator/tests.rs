use super::*;

fn accumulator() -> Accumulator {
    Accumulator::new(
        16384,
        1 << 20,
        10_000,
        1 << 20,
        1_000,
        Codec::default(),
        Duration::from_secs(1),
        Arc::new(AtomicBool::new(false)),
    )
}

/// `record` appended to `q` with no report owed, now, with the sticky
/// rule `stick` and no memory or record room reserved beforehand.
fn append_to<'a>(
    a: &'a Accumulator,
    q: &PartitionQueue,
    record: &Record,
    stick: Stick,
) -> Result<Appended, AppendError<'a>> {
    a.append(
        q,
        record,
        None,
        Mono::now(),
        stick,
        &mut Reserved::default(),
        &mut Vec::new(),
    )
}

/// A topic's cached queues are its live queues, created only when
/// first used, and only for the accumulator that made the slots.
#[test]
fn cached_queues_are_the_live_ones_and_only_for_their_accumulator() {
    let (a, b) = (accumulator(), accumulator());
    let t = Topic::from("t");
    let early = a.queue(&t, 0);
    let cached = a.topic_queues(3);
    assert_eq!(a.all_queues().len(), 1, "slots create no queue");
    let q0 = a.cached_queue(&cached, &t, 0).expect("a slot");
    assert!(Arc::ptr_eq(q0, &early), "the existing queue");
    let q2 = a.cached_queue(&cached, &t, 2).expect("a slot").clone();
    assert_eq!(a.all_queues().len(), 3, "created up to the one used");
    assert!(Arc::ptr_eq(&q2, &a.queue(&t, 2)));
    // Growing the topic later leaves the cached queues live.
    assert!(Arc::ptr_eq(&a.queue(&t, 5), &a.queue(&t, 5)));
    assert!(Arc::ptr_eq(
        a.cached_queue(&cached, &t, 2).unwrap(),
        &a.queue(&t, 2)
    ));
    assert!(a.cached_queue(&cached, &t, 3).is_none(), "past the slots");
    assert!(a.cached_queue(&cached, &t, -1).is_none());
    assert!(
        b.cached_queue(&cached, &t, 0).is_none(),
        "another producer's cache is ignored"
    );
}

/// `forget`: refused while a queue of the topic holds a batch; once
/// done, an append through a queue taken before (a cached slot) finds
/// it retired and the partition gets a new queue, which starts from
/// the sequences kept for the current producer id and epoch only.
#[test]
fn forgotten_queues_are_retired_and_keep_the_current_sequences() {
    let a = accumulator();
    let t = Topic::from("forget-me");
    let old = a.queue(&t, 0);
    let append = |q: &PartitionQueue| {
        append_to(&a, q, &Record::to("forget-me").value("v"), Stick::No).map(|_| ())
    };
    append(&old).unwrap();
    assert!(!a.forget(&t, None), "an open batch keeps the topic");
    assert!(Arc::ptr_eq(&old, &a.queue(&t, 0)));
    let open = lock(&old.state).open.take().unwrap();
    drop(a.seal(open, &old));
    {
        let mut st = lock(&old.state);
        st.next_sequence = 42;
        st.sequence_owner = Some((7, 1));
        st.confirmed = Some((7, 1));
    }
    let other = a.queue(&t, 1);
    lock(&other.state).sequence_owner = Some((7, 0));
    lock(&other.state).next_sequence = 9;
    assert_eq!(a.appended(), 1);
    assert!(a.forget(&t, Some((7, 1))));
    assert!(a.all_queues().is_empty());
    assert_eq!(a.appended(), 1, "the count does not go back");
    assert_eq!(a.kept_sequences(), 1, "only the current epoch's");
    assert!(matches!(append(&old), Err(AppendError::Retired(None))));
    let new = a.queue(&t, 0);
    assert!(!Arc::ptr_eq(&old, &new));
    {
        let st = lock(&new.state);
        assert_eq!(
            (st.next_sequence, st.sequence_owner, st.confirmed),
            (42, Some((7, 1)), None),
            "the sequence, not the confirmation (the topic may be new)"
        );
    }
    assert_eq!(lock(&a.queue(&t, 1).state).next_sequence, 0);
    assert_eq!(a.kept_sequences(), 0, "handed to the new queue");
    append(&new).unwrap();
}

/// KIP-794's rule for the built-in sticky partitioner: a stay opens new
/// batches on its partition (say each batch went at its linger, holding
/// one record) until its batches took `batch.size` bytes, then asks to
/// move; a stay whose first batch went moves within its second at
/// `batch.size` bytes; a moved record is never refused; a new stay counts
/// from 0; a user's sticky partitioner (KIP-480) is refused at a full
/// batch only.
#[test]
fn a_sticky_stay_moves_after_batch_size_bytes_not_at_each_new_batch() {
    let a = accumulator();
    let q = a.queue(&Topic::from("stay"), 0);
    let record = Record::to("stay").value(vec![b'v'; 1000]);
    let append = |stick| append_to(&a, &q, &record, stick);
    // Each batch goes out (linger) after one record.
    let send = || {
        let open = lock(&q.state).open.take().expect("an open batch");
        drop(a.seal(open, &q));
    };
    let mut batches = 0;
    loop {
        match append(Stick::Bytes(1)) {
            Ok(Appended::NewBatch | Appended::NewBatchToList) => {
                batches += 1;
                send();
            }
            Err(AppendError::MoveOn(_)) => break,
            other => panic!("{other:?}"),
        }
        assert!(batches < 100, "never asked to move");
    }
    // 16,384 bytes of 1,000-byte records in batches of one (about 1,070
    // bytes each, header included): 14 or 15 batches, not one (KIP-480's
    // rule moved at every new batch), nor all of them (Courier's rule
    // before, which moved at a full batch only).
    assert!(
        (14..=15).contains(&batches),
        "{batches} batches in one stay"
    );
    assert!(matches!(
        append(Stick::Moved(2)),
        Ok(Appended::NewBatch | Appended::NewBatchToList)
    ));
    send();
    // Stay 2: its first batch went, its second fills up to batch.size
    // bytes of the stay and moves on with the batch still open.
    let mut in_second = 0;
    loop {
        match append(Stick::Bytes(2)) {
            Ok(Appended::NewBatch | Appended::NewBatchToList) if in_second == 0 => in_second = 1,
            Ok(Appended::ToOpenBatch) => in_second += 1,
            Err(AppendError::MoveOn(_)) => break,
            other => panic!("{other:?} after {in_second}"),
        }
    }
    assert!(
        (14..=15).contains(&in_second),
        "{in_second} in the second batch"
    );
    assert!(!lock(&q.state).open.as_ref().unwrap().full);
    // A user's sticky partitioner: an open batch with room takes the
    // record; only a full one is refused.
    assert!(matches!(append(Stick::Batch), Ok(Appended::ToOpenBatch)));
    while !matches!(append(Stick::Batch), Err(AppendError::MoveOn(_))) {}
    assert!(lock(&q.state).open.as_ref().unwrap().full);
}

/// Sequences kept for forgotten queues belong to one producer id and
/// epoch: forgetting a topic under a newer one drops the older ones
/// (a new epoch starts every partition at 0), whatever topic they were
/// kept for.
#[test]
fn kept_sequences_of_an_older_epoch_go_when_a_newer_one_forgets() {
    let a = accumulator();
    let keep = |topic: &str, owner: (i64, i16)| {
        let t = Topic::from(topic);
        let q = a.queue(&t, 0);
        {
            let mut st = lock(&q.state);
            st.next_sequence = 5;
            st.sequence_owner = Some(owner);
        }
        assert!(a.forget(&t, Some(owner)));
    };
    keep("epoch-one-a", (7, 1));
    keep("epoch-one-b", (7, 1));
    assert_eq!(a.kept_sequences(), 2);
    keep("epoch-two", (7, 2));
    assert_eq!(a.kept_sequences(), 1, "only epoch 2's");
    assert_eq!(
        lock(&a.queue(&Topic::from("epoch-one-a"), 0).state).next_sequence,
        0,
        "epoch 1's sequence was dropped"
    );
}

/// The drain lists (`QueueState::listed`): the append that opens a batch
/// on an unlisted queue says to list it, once; appends while it is
/// listed (into the open batch, or opening the next after a full one)
/// do not, until a drain unlists it.
#[test]
fn only_a_batch_opened_on_an_unlisted_queue_asks_for_a_listing() {
    let a = accumulator();
    let t = Topic::from("listed");
    let q = a.queue(&t, 0);
    let append = |value: &[u8]| {
        append_to(
            &a,
            &q,
            &Record::to("listed").value(value.to_vec()),
            Stick::No,
        )
        .unwrap()
    };
    assert_eq!(append(b"first"), Appended::NewBatchToList);
    assert!(lock(&q.state).listed);
    assert_eq!(append(b"second"), Appended::ToOpenBatch);
    // The open batch fills: the next opens a batch on a listed queue.
    let big = vec![0u8; 10_000];
    let mut next = append(&big);
    while next == Appended::ToOpenBatch {
        next = append(&big);
    }
    assert_eq!(next, Appended::NewBatchAfterFull);
    assert!(lock(&q.state).listed);
    // A drain took everything and found it holding nothing.
    {
        let mut st = lock(&q.state);
        st.open = None;
        st.ready.clear();
        st.listed = false;
    }
    assert_eq!(append(b"again"), Appended::NewBatchToList);
    lock(&q.state).open = None;
    assert_eq!(
        append(b"listed"),
        Appended::NewBatch,
        "a listed queue's new batch is not listed again"
    );
}

/// A keyed producer on a topic of thousands of partitions opens a batch
/// on each: at the defaults (`batch.size` 1,000,000, `buffer.memory`
/// 32 MiB) a new batch takes what its buffer starts with (room for a few
/// records like its first), not a fixed 4 KiB, so 20,000 batches of one
/// 100-byte record fit (at 4 KiB each, about 8,000 did), and once
/// sealed each holds only its encoded bytes.
#[test]
fn twenty_thousand_partitions_open_a_batch_each_within_the_default_buffer_memory() {
    let config = crate::config::ProducerConfig::default();
    let a = Accumulator::new(
        config.batch_size,
        config.max_request_size,
        10_000,
        config.buffer_memory,
        config.queue_buffering_max_messages,
        Codec::default(),
        Duration::from_secs(1),
        Arc::new(AtomicBool::new(false)),
    );
    let t = Topic::from("wide");
    let record = Record::to("wide").key("k").value(vec![7u8; 100]);
    a.queue(&t, 19_999); // the topic's queues grown once, not one by one
    let queues: Vec<_> = (0..20_000).map(|p| a.queue(&t, p)).collect();
    for (opened, q) in queues.iter().enumerate() {
        assert!(
            append_to(&a, q, &record, Stick::No).is_ok(),
            "buffer.memory ran out at {opened} open batches"
        );
    }
    let open_held = config.buffer_memory - a.pool.available_permits();
    assert!(
        open_held < 20_000 * 1024,
        "open batches hold {open_held} bytes"
    );
    let mut sealed = Vec::new();
    for q in &queues {
        let open = lock(&q.state).open.take().unwrap();
        sealed.push(a.seal(open, q).ok().unwrap());
    }
    let encoded: usize = sealed.iter().map(|b| b.encoded.bytes().len()).sum();
    assert_eq!(
        config.buffer_memory - a.pool.available_permits(),
        encoded,
        "sealed batches hold their encoded bytes"
    );
    drop(sealed);
    assert_eq!(a.pool.available_permits(), config.buffer_memory);
}
