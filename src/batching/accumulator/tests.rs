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
        let record = Record::to("forget-me").value("v");
        a.append(
            q,
            &record,
            None,
            Mono::now(),
            true,
            &mut Reserved::default(),
            &mut Vec::new(),
        )
        .map(|_| ())
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
