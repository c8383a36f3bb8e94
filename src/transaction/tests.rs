//! Unit tests of `transaction.rs`.

use super::*;

fn t() -> Transactions {
    Transactions::new("t".into(), Duration::from_secs(60))
}

#[test]
fn a_transaction_moves_through_its_states() {
    let txn = t();
    assert!(matches!(
        txn.start_commit(),
        Err(TransactionError::State(_))
    ));
    txn.begin(0, 0).unwrap();
    assert!(matches!(txn.begin(0, 0), Err(TransactionError::State(_))));
    assert_eq!(txn.sendable(), Some(1));
    txn.start_commit().unwrap();
    assert!(!txn.gate.load(std::sync::atomic::Ordering::Acquire));
    assert_eq!(txn.check_commit(1, 0), Ok(None));
    txn.finish(1, true);
    assert_eq!(txn.phase(), Phase::Idle);
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.sendable(), Some(2), "a new generation");
}

#[test]
fn a_failed_record_makes_the_commit_abortable() {
    let txn = t();
    txn.begin(5, 0).unwrap();
    txn.start_commit().unwrap();
    let e = txn.check_commit(1, 7).unwrap_err();
    assert!(e.is_abortable(), "{e}");
    assert!(e.to_string().contains("2 record(s)"), "{e}");
    assert!(matches!(txn.begin(7, 0), Err(TransactionError::State(_))));
    txn.start_abort().unwrap();
    txn.finish(1, false);
    txn.begin(7, 0).unwrap();
}

/// Java refuses COMMITTING → ABORTING: a commit under way, whether its
/// EndTxn went or not, can only be finished (calling commit again), so
/// two EndTxn of opposite outcomes never race.
#[test]
fn a_commit_under_way_cannot_be_aborted_only_resumed() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.start_commit(), Ok(1));
    let e = txn.start_abort().unwrap_err();
    assert!(e.to_string().contains("commit_transaction"), "{e}");
    assert_eq!(txn.phase(), Phase::Committing, "still committing");
    assert_eq!(txn.start_commit(), Ok(1), "resumed");
    txn.commit_sent();
    assert!(txn.start_abort().is_err());
}

/// Two commits of one transaction racing (the application's and the
/// one `close` finishes): the first to look finds a failed record and
/// makes it abortable; the second must see that too, never go on to
/// EndTxn(commit) (`may_send_commit` is the last check, under `ops`).
#[test]
fn a_racing_commit_sees_what_the_first_found() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    let first = txn.start_commit().unwrap();
    let second = txn.start_commit().unwrap();
    assert!(txn.check_commit(first, 1).unwrap_err().is_abortable());
    assert!(
        txn.check_commit(second, 1).unwrap_err().is_abortable(),
        "the second commit sees the failed record too"
    );
    assert!(txn.may_send_commit(second).is_err());
}

/// Once `close` declared the transaction aborted to transactional
/// reports, a commit still queued behind `ops` is never sent.
#[test]
fn a_transaction_declared_aborted_is_never_committed() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    let g = txn.start_commit().unwrap();
    assert_eq!(txn.check_commit(g, 0), Ok(None));
    assert_eq!(txn.may_send_commit(g), Ok(()));
    assert_eq!(txn.left_at_close(), Some(Ending::Aborted));
    assert!(matches!(
        txn.may_send_commit(g),
        Err(TransactionError::State(_))
    ));
}

/// A transaction ends once: the second `finish` (a commit racing
/// `close` finishing the same commit) announces nothing, and `ended`
/// tells it how the first ended.
#[test]
fn a_transaction_ends_once() {
    let txn = t();
    let told = Arc::new(Mutex::new(Vec::new()));
    let t2 = told.clone();
    txn.on_end(Box::new(move |how, all| {
        t2.lock().unwrap().push((how, all));
        true
    }));
    txn.begin(0, 0).unwrap();
    let g = txn.start_commit().unwrap();
    assert_eq!(txn.ended(g), None);
    txn.finish(g, true);
    txn.finish(g, true);
    txn.finish(g, false);
    assert_eq!(txn.ended(g), Some(true));
    assert_eq!(*told.lock().unwrap(), vec![(Ending::Committed, false)]);
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.ended(g + 1), None, "a new transaction");
    txn.finish(g, false);
    assert_eq!(
        txn.phase(),
        Phase::Open,
        "an old generation's finish is ignored"
    );
}

/// Once `close` began, an open transaction can no longer start
/// committing (close aborts it); one already committing is left to
/// finish, and `left_at_close` says what a close that could not finish
/// it must announce.
#[test]
fn close_finishes_a_commit_and_refuses_a_new_one() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.closing(), Some(Phase::Open));
    assert!(matches!(
        txn.start_commit(),
        Err(TransactionError::State(_))
    ));
    assert_eq!(txn.left_at_close(), Some(Ending::Aborted));
    let txn = t();
    txn.begin(0, 0).unwrap();
    txn.start_commit().unwrap();
    assert_eq!(txn.closing(), Some(Phase::Committing));
    assert_eq!(txn.start_commit(), Ok(1), "a commit under way goes on");
    assert_eq!(
        txn.left_at_close(),
        Some(Ending::Aborted),
        "EndTxn not sent"
    );
    txn.commit_sent();
    assert_eq!(txn.left_at_close(), Some(Ending::Unknown));
    txn.finish(1, true);
    assert_eq!(txn.left_at_close(), None);
}

#[test]
fn a_lost_sequence_makes_the_transaction_abortable_and_asks_for_a_bump() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    txn.sequence_lost(ErrorKind::Aborted, "lost".into());
    assert_eq!(txn.phase(), Phase::Abortable);
    assert!(
        !txn.gate.load(std::sync::atomic::Ordering::Acquire),
        "gate shut"
    );
    assert!(txn.start_commit().unwrap_err().is_abortable());
    txn.start_abort().unwrap();
    assert_eq!(
        txn.abort_plan(0),
        AbortPlan {
            end_txn: true,
            bump: true
        }
    );
}

/// A stamped batch lost during the transaction makes its abort bump
/// the epoch; a lost producer-id mapping skips EndTxn; a new
/// transaction starts with neither.
#[test]
fn the_abort_plan_follows_what_was_lost() {
    let txn = t();
    txn.begin(0, 3).unwrap();
    txn.start_abort().unwrap();
    let plain = AbortPlan {
        end_txn: true,
        bump: false,
    };
    assert_eq!(txn.abort_plan(3), plain);
    assert!(txn.abort_plan(4).bump, "a stamped batch failed");
    txn.finish(1, false);
    txn.begin(0, 4).unwrap();
    assert_eq!(txn.abort_plan(4), plain, "counted from the new transaction");
    txn.id_lost(ErrorKind::Aborted, "mapping".into(), true);
    assert_eq!(txn.phase(), Phase::Abortable);
    assert_eq!(
        txn.abort_plan(4),
        AbortPlan {
            end_txn: false,
            bump: true
        }
    );
}

#[test]
fn fatal_is_final() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    assert_eq!(
        txn.set_fatal(ErrorKind::Fenced, "fenced by a newer producer".into()),
        Some(Ending::Aborted)
    );
    assert_eq!(txn.set_fatal(ErrorKind::Fenced, "again".into()), None);
    assert_eq!(txn.sendable(), None);
    for e in [
        txn.start_commit().unwrap_err(),
        txn.start_abort().unwrap_err(),
        txn.begin(0, 0).unwrap_err(),
    ] {
        assert!(e.is_fatal(), "{e}");
        assert!(e.to_string().contains("newer producer"), "{e}");
    }
    txn.finish(1, false);
    assert_eq!(txn.phase(), Phase::Fatal);
}

#[test]
fn partitions_are_added_once_per_generation() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    let p = (Topic::from("a"), 0);
    assert!(txn.want([p]));
    assert!(!txn.want([p]), "already asked for");
    let (g, parts) = txn.wanted();
    txn.added(g, &parts, (7, 0));
    assert_eq!(txn.wanted().1, vec![]);
    assert_eq!(txn.started_under(), Some((7, 0)));
    // An answer for an older generation changes nothing.
    txn.start_abort().unwrap();
    txn.finish(g, false);
    txn.begin(0, 0).unwrap();
    txn.want([p]);
    txn.added(g, &parts, (7, 0));
    assert_eq!(txn.wanted().1, vec![p]);
}

#[test]
fn the_protocol_follows_the_newest_finalized_features() {
    let txn = t();
    assert_eq!(txn.version(), None, "chosen when the producer has its id");
    // A broker without the feature, then one with version 2 at a newer
    // features epoch, then a stale answer (an older epoch) saying 1.
    txn.features_seen((-1, 0));
    assert!(!txn.refresh_version(true));
    assert_eq!(txn.version(), Some(TransactionVersion::V1));
    txn.features_seen((12, 2));
    txn.features_seen((11, 1));
    txn.begin(0, 0).unwrap();
    assert_eq!(
        txn.sendable_as(),
        Some((1, TransactionVersion::V1)),
        "a transaction keeps the protocol it began with"
    );
    // The end of the transaction moves to version 2, with an epoch bump.
    assert!(
        txn.refresh_version(false),
        "1 to 2 between transactions bumps"
    );
    txn.finish(1, true);
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.sendable_as(), Some((2, TransactionVersion::V2)));
    assert!(!txn.refresh_version(false), "staying on 2: no bump");
    // A downgrade (an older level at a newer epoch) goes back without one.
    txn.features_seen((13, 1));
    assert!(!txn.refresh_version(false));
    assert_eq!(txn.version(), Some(TransactionVersion::V1));
}

#[test]
fn under_version_2_a_sent_batch_starts_the_transaction() {
    let txn = t();
    txn.begin(0, 0).unwrap();
    assert_eq!(txn.started_under(), None);
    txn.joined(7, (3, 0));
    assert_eq!(txn.started_under(), None, "another transaction's batch");
    txn.joined(1, (3, 0));
    txn.joined(1, (3, 1));
    assert_eq!(txn.started_under(), Some((3, 0)), "the first batch's stamp");
}
