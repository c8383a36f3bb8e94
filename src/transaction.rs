//! Transactions (KIP-98): the state of a transactional producer, kept
//! outside every actor so that it survives their restarts.
//!
//! ```text
//!            begin_transaction            commit_transaction: gate shut, barrier, flush, EndTxn(commit)
//!   Idle ───────────────────────▶ Open ───────────────────────▶ Committing ──▶ Idle
//!    ▲                             │ a coordinator step refused   │ a record of the transaction failed
//!    │                             │ (`abortable`), or a Produce  │ (found after the flush,
//!    │                             │ answer that loses the        │ `check_commit`), a step refused,
//!    │                             │ sequences or the epoch       │ or EndTxn(commit) refused
//!    │                             │ (`sequence_lost`, `id_lost`) │ (`commit_refused`)
//!    │                             ▼                              ▼
//!    │        abort_transaction   Abortable ◀─────────────────────┘
//!    └──── Aborting ◀──────────── (from Open or Abortable; never from Committing)
//!          gate shut, fail what is queued (`Aborted`), wait for what is in flight,
//!          EndTxn(abort) (none when the coordinator lost the id's mapping), then an
//!          epoch bump when sequences were lost or a stamped batch of the
//!          transaction failed (`abort_plan`)
//!
//!   any state ──▶ Fatal: PRODUCER_FENCED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
//!                 CLUSTER_AUTHORIZATION_FAILED, … (`is_fatal_produce_code` on a Produce
//!                 answer, `is_fatal_code` on a coordinator's). Every queued record
//!                 fails with the cause (in-flight ones get their own answers); every
//!                 later call returns it.
//! ```
//!
//! Commit and abort are serialised as in the Java client: no abort while
//! committing, `close` finishes a commit under way and aborts any other,
//! and a transaction ends once (`ended`, `finish`). ARCHITECTURE.md's
//! "Errors, as the Java client classifies them" lists what each answer does.
//!
//! Records are taken only while a transaction is open: the `gate` flag is
//! checked under each partition lock (as `closed` is), so no record slips
//! into a batch after `commit` or `abort` closed it. `QueueState::txn_added`
//! holds the transaction `generation` a partition joined in.
//!
//! Two transaction protocols (`TransactionVersion`), chosen as the Java
//! client chooses, from the cluster's finalized `transaction.version`
//! (`features_seen`, from every connection's ApiVersions answer): when the
//! producer gets its id, and again at the end of every transaction
//! (`refresh_version`; a switch from version 1 to 2 bumps the epoch once,
//! so no partition added under the old protocol counts as added under the
//! new one).
//! - Version 1 (KIP-98): a partition's batches are sent only once the
//!   coordinator has added the partition (AddPartitionsToTxn); Produce up
//!   to v11, EndTxn up to v4, TxnOffsetCommit up to v3 after
//!   AddOffsetsToTxn.
//! - Version 2 (KIP-890): Produce v12 adds the partition itself (the
//!   partition's leader asks the coordinator), so the first batch of a
//!   partition goes at once and the transaction counts as started
//!   (`joined`); TxnOffsetCommit v5 adds the group's offsets without
//!   AddOffsetsToTxn; EndTxn v5 bumps the epoch and answers with the new
//!   id and epoch, which the next transaction uses.
//!
//! # References
//! - KIP-98 (transactions), KIP-447 (group metadata in TxnOffsetCommit),
//!   KIP-890 (transaction version 2)
//! - Java: `TransactionManager`

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::protocol::versions::TransactionVersion;
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::sync::lock;

/// Where the transactional producer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No transaction open; `begin_transaction` opens one.
    Idle,
    /// Records are taken into the transaction.
    Open,
    /// Flushing, then EndTxn(commit). A commit that timed out stays here;
    /// calling commit again resumes it.
    Committing,
    /// A coordinator step was refused, or a sequence, the epoch or the
    /// producer id was lost: the transaction can only be aborted.
    Abortable,
    /// Failing what is queued, then EndTxn(abort).
    Aborting,
    /// The producer cannot go on (fenced, or refused): close it.
    Fatal,
}

/// Why a transaction call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The producer has no `transactional.id`.
    #[error("the producer is not transactional (set transactional.id)")]
    NotTransactional,
    /// The call does not fit the transaction's state (say
    /// `begin_transaction` with one open, `commit_transaction` with none).
    #[error("{0}")]
    State(String),
    /// The transaction cannot be committed (one of its records failed, or
    /// the coordinator refused a step): abort it, then carry on.
    #[error("the transaction must be aborted: {kind}: {message}")]
    Abortable {
        /// What failed.
        kind: ErrorKind,
        /// Details, for people.
        message: String,
    },
    /// The producer cannot go on: a newer producer with the same
    /// `transactional.id` fenced it, or the coordinator aborted a
    /// transaction that outlived `transaction.timeout.ms`, or the cluster
    /// refused it. Close it (and start a new one).
    #[error("the producer can no longer be used: {kind}: {message}")]
    Fatal {
        /// What failed.
        kind: ErrorKind,
        /// Details, for people.
        message: String,
    },
    /// The coordinator did not answer within `max.block.ms`; calling the
    /// same method again resumes where this one stopped.
    #[error("timed out: {0}")]
    TimedOut(String),
}

impl TransactionError {
    /// Whether the producer must be closed (a fatal error).
    pub fn is_fatal(&self) -> bool {
        matches!(self, TransactionError::Fatal { .. })
    }

    /// Whether aborting the transaction lets the producer go on.
    pub fn is_abortable(&self) -> bool {
        matches!(self, TransactionError::Abortable { .. })
    }
}

/// A consumer group's identity for `send_offsets_to_transaction` (KIP-447:
/// the coordinator refuses offsets from a member that is no longer in the
/// group's current generation, which fences zombie consumers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The group's generation, or -1 when unknown (no fencing by
    /// generation then).
    pub generation_id: i32,
    /// The member id, or "" when unknown.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl GroupMetadata {
    /// Metadata with only the group id (no generation fencing), as the
    /// Java client's `sendOffsetsToTransaction(offsets, groupId)` sends.
    pub fn new(group_id: impl Into<String>) -> GroupMetadata {
        GroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    /// Counts transactions begun; a partition's `txn_added` equal to it
    /// means it is in the current transaction.
    generation: u64,
    /// Partitions with batches waiting for AddPartitionsToTxn.
    wanted: BTreeSet<(Topic, i32)>,
    /// The producer id and epoch the coordinator saw this transaction
    /// under (set by its first AddPartitionsToTxn or AddOffsetsToTxn):
    /// `Some` means EndTxn is needed. An epoch bump since then aborted it
    /// on the coordinator already.
    started_under: Option<(i64, i16)>,
    /// `stats.failed` when the transaction began: more at commit means a
    /// record of it failed.
    failed_before: u64,
    /// An abortable cause (a step the coordinator refused), or the fatal one.
    error: Option<(ErrorKind, String)>,
    /// The transaction coordinator, once found.
    coordinator: Option<i32>,
    /// The last transaction that ended: its generation and whether it
    /// committed. A second commit (or abort) of the same transaction, say
    /// `close` finishing a commit the application also awaits, learns the
    /// outcome from here instead of ending it twice.
    ended: Option<(u64, bool)>,
    /// `close` has begun: no transaction may start committing any more
    /// (one already committing is finished by `close`).
    closing: bool,
    /// EndTxn(commit) has been sent for this transaction: if its answer
    /// never comes, its outcome is the coordinator's to decide.
    commit_sent: bool,
    /// A sequence error (OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest batch,
    /// UNKNOWN_PRODUCER_ID) lost the broker's sequence state: the abort
    /// bumps the epoch after its EndTxn (InitProducerId with the current
    /// id and epoch), so the next transaction starts with fresh
    /// sequences, as the Java client does (`epochBumpRequired`).
    bump_on_abort: bool,
    /// `Accumulator::stamped_lost` when the transaction began: more at the
    /// abort means a stamped batch failed (a hole in its partition's
    /// sequences), so the abort bumps the epoch too.
    lost_before: u64,
    /// The coordinator no longer knows this producer id
    /// (INVALID_PRODUCER_ID_MAPPING): it would refuse EndTxn, so the abort
    /// goes straight to the epoch bump (Java's `beginAbort`).
    skip_end_txn: bool,
    /// Counts coordinator answers saying the producer id is lost.
    ids_lost: u64,
    /// `close` told transactional reports this transaction is aborted
    /// (`left_at_close`): its commit must never be sent now.
    declared_aborted: bool,
    /// The cluster's finalized features, the newest any connection has
    /// seen: their epoch and the `transaction.version` level.
    cluster_feature: (i64, i16),
    /// The protocol transactions use (`None` until the producer has its
    /// id): fixed from the start of a transaction to its end.
    version: Option<TransactionVersion>,
}

/// How an abort ends its transaction (Java's `beginAbort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortPlan {
    /// Send EndTxn(abort) (when the coordinator knows of the transaction).
    pub end_txn: bool,
    /// Then bump the epoch (InitProducerId with the current id and epoch).
    pub bump: bool,
}

/// How a transaction ended, as the hooks are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The coordinator committed it.
    Committed,
    /// It was aborted, or is sure to be (the coordinator aborts it at
    /// `transaction.timeout.ms`).
    Aborted,
    /// `close` ran out of time after EndTxn(commit) was sent and before
    /// its answer: the coordinator decides, and the producer never learns.
    Unknown,
}

/// Hooks told when a transaction ends: `(how, everything)`.
type EndHooks = Mutex<Vec<Box<dyn Fn(Ending, bool) -> bool + Send + Sync>>>;

/// A transactional producer's state (`Engine::txn`).
pub(crate) struct Transactions {
    /// `transactional.id`.
    pub id: String,
    /// `transaction.timeout.ms`.
    pub timeout: Duration,
    /// Open for records: read under each partition lock by the accumulator.
    pub gate: Arc<AtomicBool>,
    /// One coordinator exchange at a time (AddPartitionsToTxn, EndTxn,
    /// AddOffsetsToTxn, InitProducerId).
    pub ops: tokio::sync::Mutex<()>,
    inner: Mutex<Inner>,
    /// Told when a transaction ends: `(committed, everything)`, where
    /// `everything` means every later report too (the producer is fenced).
    /// A hook returns false once it is no longer wanted.
    hooks: EndHooks,
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions")
            .field("id", &self.id)
            .field("phase", &self.phase())
            .finish_non_exhaustive()
    }
}

impl Transactions {
    pub fn new(id: String, timeout: Duration) -> Transactions {
        Transactions {
            id,
            timeout,
            gate: Arc::new(AtomicBool::new(false)),
            ops: tokio::sync::Mutex::new(()),
            hooks: Mutex::new(Vec::new()),
            inner: Mutex::new(Inner {
                phase: Phase::Idle,
                generation: 0,
                wanted: BTreeSet::new(),
                started_under: None,
                failed_before: 0,
                error: None,
                coordinator: None,
                ended: None,
                closing: false,
                commit_sent: false,
                bump_on_abort: false,
                lost_before: 0,
                skip_end_txn: false,
                ids_lost: 0,
                declared_aborted: false,
                cluster_feature: (-1, 0),
                version: None,
            }),
        }
    }

    pub fn phase(&self) -> Phase {
        lock(&self.inner).phase
    }

    /// Opens a transaction (`Idle` → `Open`); `failed_now` is the
    /// producer's failed-record count, `lost_now` its count of stamped
    /// batches that failed (`Accumulator::stamped_lost`).
    pub fn begin(&self, failed_now: u64, lost_now: u64) -> Result<(), TransactionError> {
        let mut i = lock(&self.inner);
        match i.phase {
            Phase::Idle => {}
            Phase::Fatal => return Err(fatal_error(&i)),
            Phase::Open => {
                return Err(TransactionError::State(
                    "a transaction is already open".into(),
                ))
            }
            p => {
                return Err(TransactionError::State(format!(
                    "the previous transaction is not finished ({p:?}): commit or abort it first"
                )))
            }
        }
        i.phase = Phase::Open;
        i.generation += 1;
        i.wanted.clear();
        i.started_under = None;
        i.failed_before = failed_now;
        i.error = None;
        i.commit_sent = false;
        i.bump_on_abort = false;
        i.lost_before = lost_now;
        i.skip_end_txn = false;
        i.declared_aborted = false;
        self.gate.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// The generation whose partitions may be sent: `None` when nothing
    /// may be sent at all (no transaction, or the producer is fenced).
    pub fn sendable(&self) -> Option<u64> {
        self.sendable_as().map(|(generation, _)| generation)
    }

    /// [`sendable`](Self::sendable), with the protocol the transaction
    /// speaks.
    pub fn sendable_as(&self) -> Option<(u64, TransactionVersion)> {
        let i = lock(&self.inner);
        match i.phase {
            Phase::Open | Phase::Committing | Phase::Abortable | Phase::Aborting => {
                Some((i.generation, i.version.unwrap_or(TransactionVersion::V1)))
            }
            Phase::Idle | Phase::Fatal => None,
        }
    }

    /// A connection's ApiVersions answer gave the cluster's finalized
    /// features `(epoch, transaction.version level)`: kept when newer than
    /// what another connection gave.
    pub fn features_seen(&self, feature: (i64, i16)) {
        let mut i = lock(&self.inner);
        if feature.0 > i.cluster_feature.0 {
            i.cluster_feature = feature;
        }
    }

    /// Chooses the protocol from the newest finalized features seen (the
    /// Java client's `maybeUpdateTransactionV2Enabled`): when the producer
    /// gets its id (`on_init`), and at the end of every transaction.
    /// Returns true when transactions move from version 1 to version 2
    /// between two transactions: the epoch is then bumped once, so that
    /// nothing of the old protocol's state carries over.
    pub fn refresh_version(&self, on_init: bool) -> bool {
        let mut i = lock(&self.inner);
        let chosen = TransactionVersion::for_level(i.cluster_feature.1);
        let before = i.version.replace(chosen);
        if before != Some(chosen) {
            tracing::debug!(
                transactional_id = %self.id,
                transaction_version = chosen.number(),
                features_epoch = i.cluster_feature.0,
                "transactions use transaction version {}",
                chosen.number()
            );
        }
        !on_init && before == Some(TransactionVersion::V1) && chosen == TransactionVersion::V2
    }

    /// The protocol transactions use, once the producer has its id.
    pub fn version(&self) -> Option<TransactionVersion> {
        lock(&self.inner).version
    }

    /// Transaction version 2: a batch of transaction `generation` was sent
    /// under `id` to a partition that joins the transaction with it, so
    /// the coordinator knows of the transaction (EndTxn is needed).
    pub fn joined(&self, generation: u64, id: (i64, i16)) {
        let mut i = lock(&self.inner);
        if i.generation == generation {
            i.started_under.get_or_insert(id);
        }
    }

    /// Partitions that have batches but are not in the transaction yet;
    /// true when one of them is new (the coordinator must be asked).
    pub fn want(&self, partitions: impl IntoIterator<Item = (Topic, i32)>) -> bool {
        let mut i = lock(&self.inner);
        let mut new = false;
        for p in partitions {
            new |= i.wanted.insert(p);
        }
        new
    }

    /// The partitions to add, and the generation they are for.
    pub fn wanted(&self) -> (u64, Vec<(Topic, i32)>) {
        let i = lock(&self.inner);
        (i.generation, i.wanted.iter().copied().collect())
    }

    /// The coordinator added `partitions` in `generation` under `id`.
    pub fn added(&self, generation: u64, partitions: &[(Topic, i32)], id: (i64, i16)) {
        let mut i = lock(&self.inner);
        if i.generation != generation {
            return;
        }
        for p in partitions {
            i.wanted.remove(p);
        }
        i.started_under.get_or_insert(id);
    }

    /// Partitions that could not be added: no longer wanted (nothing is
    /// recorded as started: the coordinator added none of them).
    pub fn drop_wanted(&self, generation: u64, partitions: &[(Topic, i32)]) {
        let mut i = lock(&self.inner);
        if i.generation == generation {
            for p in partitions {
                i.wanted.remove(p);
            }
        }
    }

    /// Whether coordinator steps for `generation` may still be taken: it
    /// is the current transaction and it is open or being committed.
    pub fn accepts_steps(&self, generation: u64) -> bool {
        let i = lock(&self.inner);
        i.generation == generation && matches!(i.phase, Phase::Open | Phase::Committing)
    }

    /// The broker lost this producer's sequence state: the transaction can
    /// only be aborted, and the abort bumps the epoch.
    pub fn sequence_lost(&self, kind: ErrorKind, message: String) {
        let mut i = lock(&self.inner);
        i.bump_on_abort = true;
        drop(i);
        self.abortable(kind, message);
    }

    /// The coordinator no longer knows this producer id (UNKNOWN_PRODUCER_ID
    /// or INVALID_PRODUCER_ID_MAPPING from a coordinator step): the
    /// transaction can only be aborted, and the abort bumps the epoch so
    /// the next transaction does not meet the same error; with
    /// `skip_end_txn` (INVALID_PRODUCER_ID_MAPPING) the abort sends no
    /// EndTxn, which the coordinator would refuse.
    pub fn id_lost(&self, kind: ErrorKind, message: String, skip_end_txn: bool) {
        let mut i = lock(&self.inner);
        i.bump_on_abort = true;
        i.skip_end_txn |= skip_end_txn;
        i.ids_lost += 1;
        drop(i);
        self.abortable(kind, message);
    }

    /// How many times a coordinator said it lost the producer id.
    pub fn ids_lost(&self) -> u64 {
        lock(&self.inner).ids_lost
    }

    /// The coordinator refused EndTxn(commit) with an abortable error: the
    /// commit did not happen, so the transaction can be aborted at once
    /// (`Committing` → `Abortable`, which only this answer may do).
    pub fn commit_refused(&self, generation: u64) {
        let mut i = lock(&self.inner);
        if i.generation == generation && i.phase == Phase::Committing {
            i.phase = Phase::Abortable;
            i.commit_sent = false;
        }
    }

    /// How the abort ends the transaction: EndTxn unless the coordinator
    /// lost the producer id's mapping; an epoch bump after it when the
    /// broker lost the sequence state or a stamped batch of the
    /// transaction failed (`lost_now`: `Accumulator::stamped_lost`), as
    /// the Java client bumps when a transactional batch fails.
    pub fn abort_plan(&self, lost_now: u64) -> AbortPlan {
        let i = lock(&self.inner);
        AbortPlan {
            end_txn: !i.skip_end_txn,
            bump: i.bump_on_abort || lost_now > i.lost_before,
        }
    }

    /// AddOffsetsToTxn succeeded under `id`.
    pub fn offsets_added(&self, id: (i64, i16)) {
        lock(&self.inner).started_under.get_or_insert(id);
    }

    /// Whether the current generation is still `generation`.
    pub fn is_generation(&self, generation: u64) -> bool {
        lock(&self.inner).generation == generation
    }

    /// Starts a commit: `Open` → `Committing` (closing the gate), or
    /// resumes one that timed out. Returns the transaction's generation.
    /// Once `close` has begun, only a commit already under way may go on
    /// (`close` aborts an open transaction, as the Java client does).
    pub fn start_commit(&self) -> Result<u64, TransactionError> {
        let mut i = lock(&self.inner);
        match i.phase {
            Phase::Open if i.closing => Err(TransactionError::State(
                "the producer is closing, which aborts the open transaction".into(),
            )),
            Phase::Open | Phase::Committing => {
                i.phase = Phase::Committing;
                self.gate.store(false, std::sync::atomic::Ordering::Release);
                Ok(i.generation)
            }
            Phase::Idle => Err(TransactionError::State(
                "no transaction is open: call begin_transaction first".into(),
            )),
            Phase::Abortable => Err(abortable_error(&i)),
            Phase::Aborting => Err(TransactionError::State(
                "the transaction is being aborted".into(),
            )),
            Phase::Fatal => Err(fatal_error(&i)),
        }
    }

    /// After the commit's flush: whether the transaction may be committed
    /// (`failed_now`: the producer's failed-record count). If a record
    /// failed, or a step was refused, it becomes `Abortable`.
    /// Transaction `generation` only: a commit racing another one that
    /// ended it leaves the answer to `end`.
    pub fn check_commit(
        &self,
        generation: u64,
        failed_now: u64,
    ) -> Result<Option<(i64, i16)>, TransactionError> {
        let mut i = lock(&self.inner);
        if i.phase == Phase::Fatal {
            return Err(fatal_error(&i));
        }
        // Another transaction by now: this one ended, and `end` says how.
        if i.generation != generation {
            return Ok(None);
        }
        // A racing commit of this transaction found it cannot commit (or
        // the coordinator refused the commit): never EndTxn(commit) now.
        if matches!(i.phase, Phase::Abortable | Phase::Aborting) {
            return Err(abortable_error(&i));
        }
        if i.phase != Phase::Committing {
            return Ok(None);
        }
        let failed = failed_now.saturating_sub(i.failed_before);
        if failed > 0 && i.error.is_none() {
            i.error = Some((
                ErrorKind::Aborted,
                format!("{failed} record(s) of the transaction failed (see their reports)"),
            ));
        }
        if i.error.is_some() {
            i.phase = Phase::Abortable;
            return Err(abortable_error(&i));
        }
        Ok(i.started_under)
    }

    /// Starts an abort (closing the gate): from `Open` or `Abortable`, or
    /// resumes one that timed out. Returns the transaction's generation.
    /// A transaction being committed cannot be aborted (Java refuses
    /// COMMITTING → ABORTING too): its commit may already be the
    /// coordinator's to decide, and two EndTxn of opposite outcomes would
    /// race. A commit that found a failed record has made it `Abortable`.
    pub fn start_abort(&self) -> Result<u64, TransactionError> {
        let mut i = lock(&self.inner);
        match i.phase {
            Phase::Committing => Err(TransactionError::State(
                "the transaction is being committed: call commit_transaction (again) to finish it"
                    .into(),
            )),
            Phase::Open | Phase::Abortable | Phase::Aborting => {
                i.phase = Phase::Aborting;
                self.gate.store(false, std::sync::atomic::Ordering::Release);
                Ok(i.generation)
            }
            Phase::Idle => Err(TransactionError::State(
                "no transaction is open: call begin_transaction first".into(),
            )),
            Phase::Fatal => Err(fatal_error(&i)),
        }
    }

    /// Under which id and epoch the coordinator knows this transaction
    /// (`None`: it never heard of it, so no EndTxn is needed).
    pub fn started_under(&self) -> Option<(i64, i16)> {
        lock(&self.inner).started_under
    }

    /// Calls `hook` at the end of every transaction (see `announce`).
    pub fn on_end(&self, hook: Box<dyn Fn(Ending, bool) -> bool + Send + Sync>) {
        lock(&self.hooks).push(hook);
    }

    /// Tells the hooks a transaction ended (before `finished`, so that no
    /// record of the next one exists yet): committed or not, and whether
    /// this covers everything from now on (fenced).
    pub fn announce(&self, how: Ending, everything: bool) {
        lock(&self.hooks).retain(|h| h(how, everything));
    }

    /// How transaction `generation` ended, if it has: `Some(committed)`.
    /// Read under `ops` before an EndTxn, so that a transaction is ended
    /// once however many calls try.
    pub fn ended(&self, generation: u64) -> Option<bool> {
        match lock(&self.inner).ended {
            Some((g, committed)) if g == generation => Some(committed),
            _ => None,
        }
    }

    /// Transaction `generation` ended (committed or aborted): the hooks are
    /// told (before the phase leaves it, so that no record of the next one
    /// exists yet), then `Idle`. Called under `ops`, once per transaction.
    pub fn finish(&self, generation: u64, committed: bool) {
        {
            let mut i = lock(&self.inner);
            if i.generation != generation || i.ended.is_some_and(|(g, _)| g == generation) {
                return;
            }
            i.ended = Some((generation, committed));
        }
        let how = if committed {
            Ending::Committed
        } else {
            Ending::Aborted
        };
        self.announce(how, false);
        let mut i = lock(&self.inner);
        if i.phase != Phase::Fatal {
            i.phase = Phase::Idle;
            i.wanted.clear();
            i.started_under = None;
            i.error = None;
        }
    }

    /// `close` begins: from now on no open transaction may start
    /// committing. Returns the phase of the transaction under way, if any:
    /// one `Committing` is finished by `close`; any other is sure to be
    /// aborted.
    pub fn closing(&self) -> Option<Phase> {
        let mut i = lock(&self.inner);
        i.closing = true;
        (!matches!(i.phase, Phase::Idle | Phase::Fatal)).then_some(i.phase)
    }

    /// EndTxn(commit) is about to be sent.
    pub fn commit_sent(&self) {
        lock(&self.inner).commit_sent = true;
    }

    /// How a transaction that `close` could not end will end: `None` when
    /// none is left under way; `Unknown` when its EndTxn(commit) went
    /// unanswered; else `Aborted` (the coordinator aborts it at
    /// `transaction.timeout.ms`).
    /// Once it has said `Aborted`, no EndTxn(commit) may go out for this
    /// transaction any more (`may_send_commit`): a commit still queued
    /// behind `ops` when `close_timeout` gave up would otherwise commit
    /// what the reports were told is aborted.
    pub fn left_at_close(&self) -> Option<Ending> {
        let mut i = lock(&self.inner);
        match i.phase {
            Phase::Idle | Phase::Fatal => None,
            Phase::Committing if i.commit_sent => Some(Ending::Unknown),
            _ => {
                i.declared_aborted = true;
                Some(Ending::Aborted)
            }
        }
    }

    /// Whether EndTxn(commit) may be sent for transaction `generation`:
    /// it is being committed, nothing made it abortable, and `close` has
    /// not declared it aborted. Read under `ops`, right before the send,
    /// which `commit_sent` then marks.
    pub fn may_send_commit(&self, generation: u64) -> Result<(), TransactionError> {
        let i = lock(&self.inner);
        if i.phase == Phase::Fatal {
            return Err(fatal_error(&i));
        }
        if i.declared_aborted {
            return Err(TransactionError::State(
                "the producer closed and declared the transaction aborted".into(),
            ));
        }
        if i.generation != generation || i.phase != Phase::Committing || i.error.is_some() {
            return Err(abortable_error(&i));
        }
        Ok(())
    }

    /// A step failed in a way only an abort mends. An open transaction
    /// becomes `Abortable` at once (a commit then fails without flushing);
    /// one being committed fails its commit after the flush.
    pub fn abortable(&self, kind: ErrorKind, message: String) {
        let mut i = lock(&self.inner);
        if matches!(i.phase, Phase::Open | Phase::Committing) && i.error.is_none() {
            i.error = Some((kind, message));
            if i.phase == Phase::Open {
                i.phase = Phase::Abortable;
                self.gate.store(false, std::sync::atomic::Ordering::Release);
            }
        }
    }

    /// Why records of the current transaction can no longer be sent: the
    /// abortable cause, or the abort under way.
    pub fn abort_cause(&self) -> (ErrorKind, String) {
        let i = lock(&self.inner);
        match &i.error {
            Some((kind, message)) => (
                *kind,
                format!("the transaction can only be aborted: {message}"),
            ),
            None => (
                ErrorKind::Aborted,
                "the transaction was aborted before this record's write was acknowledged".into(),
            ),
        }
    }

    /// Whether a transaction is under way (`close` aborts it; a producer
    /// dropped with one leaves it to the coordinator's timeout).
    pub fn is_under_way(&self) -> bool {
        !matches!(lock(&self.inner).phase, Phase::Idle | Phase::Fatal)
    }

    /// The producer is fenced or refused: nothing more is sent or taken.
    /// Returns whether this call made it so (the caller then fails what is
    /// pending).
    /// The producer cannot go on: `None` when it was fatal already, else
    /// how the transaction under way ends as far as the producer can
    /// tell: `Unknown` once its EndTxn(commit) was sent (the coordinator
    /// may have committed it before the fatal answer: a fenced producer's
    /// prepared commit is completed by its successor's InitProducerId),
    /// `Aborted` otherwise (the coordinator aborts it).
    pub fn set_fatal(&self, kind: ErrorKind, message: String) -> Option<Ending> {
        let mut i = lock(&self.inner);
        self.gate.store(false, std::sync::atomic::Ordering::Release);
        if i.phase == Phase::Fatal {
            return None;
        }
        let ending = if i.phase == Phase::Committing && i.commit_sent {
            Ending::Unknown
        } else {
            Ending::Aborted
        };
        i.phase = Phase::Fatal;
        i.error = Some((kind, message));
        Some(ending)
    }

    pub fn coordinator(&self) -> Option<i32> {
        lock(&self.inner).coordinator
    }

    pub fn set_coordinator(&self, node: Option<i32>) {
        lock(&self.inner).coordinator = node;
    }
}

fn fatal_error(i: &Inner) -> TransactionError {
    let (kind, message) = i
        .error
        .clone()
        .unwrap_or((ErrorKind::Fenced, "the producer is fenced".into()));
    TransactionError::Fatal { kind, message }
}

fn abortable_error(i: &Inner) -> TransactionError {
    let (kind, message) = i
        .error
        .clone()
        .unwrap_or((ErrorKind::Aborted, "the transaction must be aborted".into()));
    TransactionError::Abortable { kind, message }
}

/// Errors on a Produce answer after which a transactional producer cannot
/// go on: Java's `TransactionManager::maybeTransitionToErrorState` makes
/// only these fatal. INVALID_PRODUCER_EPOCH (KIP-588), INVALID_TXN_STATE
/// and UNSUPPORTED_FOR_MESSAGE_FORMAT make the transaction abortable with
/// an epoch bump instead (`abortable_on_produce`); a producer really
/// fenced then learns it from the abort's EndTxn (PRODUCER_FENCED).
pub(crate) fn is_fatal_produce_code(e: crate::kafka_error::ResponseError) -> bool {
    use crate::kafka_error::ResponseError as E;
    matches!(
        e,
        E::ProducerFenced
            | E::TransactionalIdAuthorizationFailed
            | E::ClusterAuthorizationFailed
            | E::UnsupportedVersion
    )
}

/// Errors on a Produce answer that make the transaction abortable with an
/// epoch bump at the abort (besides the sequence errors): see
/// `is_fatal_produce_code`.
pub(crate) fn abortable_on_produce(e: crate::kafka_error::ResponseError) -> bool {
    use crate::kafka_error::ResponseError as E;
    matches!(
        e,
        E::InvalidProducerEpoch | E::InvalidTxnState | E::UnsupportedForMessageFormat
    )
}

/// Errors on a coordinator's answer after which a transactional producer
/// cannot go on (Java's fatal errors in `TransactionManager`'s handlers).
pub(crate) fn is_fatal_code(e: crate::kafka_error::ResponseError) -> bool {
    use crate::kafka_error::ResponseError as E;
    matches!(
        e,
        E::ProducerFenced
            | E::InvalidProducerEpoch
            | E::TransactionalIdAuthorizationFailed
            | E::ClusterAuthorizationFailed
            | E::InvalidTxnState
            | E::UnsupportedForMessageFormat
            | E::UnsupportedVersion
    )
}

#[cfg(test)]
mod tests;
