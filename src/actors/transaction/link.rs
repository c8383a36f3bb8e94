//! The transaction actor's exchanges with the coordinators (`Link`):
//! each request through the connection actor of the broker concerned, or
//! the testing double's script, and what each answer's error code makes
//! of the step (`Step`: retry, find the coordinator again, abortable,
//! fatal).

use crate::clock::Instant;
use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest,
    GroupId, InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::actors::addresses::Addresses;
use crate::actors::msgs::Ask;
use crate::actors::scripted::Script;
use crate::clock::backoff;
use crate::engine::Engine;
use crate::idempotence::FetchError;
use crate::kafka_error::{classify, BrokerError, ResponseError};
use crate::protocol::versions::TransactionVersion;
use crate::protocol::ApiKey;
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::sync::lock;
use crate::transaction::{is_fatal_code, GroupMetadata, TransactionError, Transactions};

/// How one coordinator exchange went wrong.
#[derive(Debug)]
enum Step {
    /// Try again after a backoff.
    Retry(String),
    /// Try again soon (20 ms): CONCURRENT_TRANSACTIONS, which the
    /// coordinator answers while it still writes the previous
    /// transaction's markers, typically for a few milliseconds (the Java
    /// client retries AddPartitionsToTxn after it at 20 ms, KAFKA-5477).
    RetrySoon(String),
    /// The coordinator moved or is unknown: find it again, then retry.
    Recoordinate(String),
    /// The transaction must be aborted.
    Abortable(ErrorKind, String),
    /// The coordinator no longer knows the producer id (UNKNOWN_PRODUCER_ID,
    /// INVALID_PRODUCER_ID_MAPPING, say after `transactional.id.expiration.ms`):
    /// the transaction must be aborted and the abort bumps the epoch, or
    /// the next transaction would meet the same error (Java's
    /// `abortableErrorIfPossible`); `true`: the coordinator would refuse
    /// EndTxn too (the mapping is gone), so the abort skips it.
    IdLost(ErrorKind, String, bool),
    /// The producer cannot go on.
    Fatal(ErrorKind, String),
}

/// A coordinator's error code, classified.
fn step_for(code: i16, what: &str) -> Result<(), Step> {
    step_with(code, what, false)
}

/// A coordinator's error code, classified; `other_abortable`: a code no
/// rule names makes the transaction abortable (AddPartitionsToTxn's
/// per-partition errors, as Java's `AddPartitionsToTxnHandler`) rather
/// than fatal (every other coordinator answer, as Java's handlers: an
/// unexpected answer to EndTxn(commit) leaves the outcome unknown, and an
/// abort would not make it known). Codes that are abortable everywhere:
/// TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, the group's
/// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and FENCED_INSTANCE_ID
/// (TxnOffsetCommit), and TRANSACTION_ABORTABLE (KIP-890).
fn step_with(code: i16, what: &str, other_abortable: bool) -> Result<(), Step> {
    let Some(c) = classify(code) else {
        return Ok(());
    };
    let e = c.error;
    let message = format!("{what}: {e:?}");
    Err(match e {
        _ if is_fatal_code(e) => {
            let kind = match e {
                ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
                    ErrorKind::Fenced
                }
                e => ErrorKind::Broker(BrokerError::from_response(e)),
            };
            Step::Fatal(
                kind,
                format!(
                    "{message} (a newer producer with the same transactional.id started, or the coordinator aborted a transaction open longer than transaction.timeout.ms)"
                ),
            )
        }
        ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
            Step::Recoordinate(message)
        }
        ResponseError::UnknownProducerId | ResponseError::InvalidProducerIdMapping => Step::IdLost(
            ErrorKind::Broker(BrokerError::from_response(e)),
            message,
            e == ResponseError::InvalidProducerIdMapping,
        ),
        ResponseError::ConcurrentTransactions => Step::RetrySoon(message),
        ResponseError::CoordinatorLoadInProgress => Step::Retry(message),
        _ if c.retriable => Step::Retry(message),
        ResponseError::TopicAuthorizationFailed
        | ResponseError::GroupAuthorizationFailed
        | ResponseError::UnknownMemberId
        | ResponseError::IllegalGeneration
        | ResponseError::FencedInstanceId
        | ResponseError::TransactionAbortable => {
            Step::Abortable(ErrorKind::Broker(BrokerError::from_response(e)), message)
        }
        e if other_abortable => {
            Step::Abortable(ErrorKind::Broker(BrokerError::from_response(e)), message)
        }
        e => Step::Fatal(
            ErrorKind::Broker(BrokerError::from_response(e)),
            format!("{message} (an answer the transaction cannot go on from)"),
        ),
    })
}

/// What the exchanges need: the engine (state, config) and the connection
/// actors, or, under the testing double, its coordinator.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) engine: Arc<Engine>,
    pub(super) addresses: Arc<Addresses>,
    /// The testing double's script (`actors/scripted/txn.rs`), which
    /// answers every request in place of the brokers.
    pub(super) scripted: Option<Arc<Script>>,
}

impl Link {
    pub(super) fn txn(&self) -> &Transactions {
        self.engine
            .txn()
            .expect("a transaction actor runs only for a transactional producer")
    }

    /// Sends a request through broker `node`'s connection actor.
    async fn ask<R>(
        &self,
        node: i32,
        api: ApiKey,
        max: i16,
        build: impl FnOnce(i16) -> R + Send + 'static,
    ) -> Result<(i16, R::Response), Step>
    where
        R: kafka_protocol::protocol::Request + Send + 'static,
        R::Response: Send + 'static,
    {
        if let Some(script) = &self.scripted {
            // A slow double (`MockBroker::set_latency`) answers after its
            // latency, or not before `request.timeout.ms`, as a broker.
            let latency = script.latency();
            if !latency.is_zero() {
                let timeout = self.engine.config().request_timeout;
                tokio::time::sleep(latency.min(timeout)).await;
                if latency >= timeout {
                    return Err(Step::Recoordinate(format!(
                        "broker {node}: {api:?} request timed out"
                    )));
                }
            }
            return script
                .ask(api, max, build)
                .map_err(|e| Step::Recoordinate(format!("broker {node}: {e}")));
        }
        let addr = self
            .addresses
            .connections
            .get(&node)
            .map(|a| a.value().clone())
            .ok_or_else(|| Step::Recoordinate(format!("no connection to broker {node} yet")))?;
        // The address is let go of before the answer is awaited: a strong
        // one held across the await would make actix restart the actor if
        // it were retired meanwhile (its broker left the metadata).
        let answer = addr.send(Ask {
            api,
            max,
            build: Box::new(build),
        });
        drop(addr);
        match answer.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(Step::Recoordinate(format!("broker {node}: {e}"))),
            Err(e) => Err(Step::Recoordinate(format!(
                "broker {node}'s connection actor: {e}"
            ))),
        }
    }

    /// A broker to ask FindCoordinator: a known one (not a bootstrap
    /// address) when there is one, at random.
    fn any_broker(&self) -> Option<i32> {
        if self.scripted.is_some() {
            return Some(crate::actors::scripted::BROKER_ID);
        }
        let mut ids: Vec<i32> = self
            .addresses
            .connections
            .iter()
            .map(|e| *e.key())
            .collect();
        ids.sort_by_key(|id| (*id < 0, fastrand::u32(..)));
        ids.first().copied()
    }

    /// FindCoordinator for `key` (`key_type` 0: a group, 1: a
    /// transactional id): the coordinator's broker id.
    async fn find_coordinator(&self, key: &str, key_type: i8) -> Result<i32, Step> {
        let node = self
            .any_broker()
            .ok_or_else(|| Step::Retry("no broker connection yet".into()))?;
        let k = StrBytes::from_string(key.to_string());
        let (version, resp) = self
            .ask(node, ApiKey::FindCoordinator, 4, move |v| {
                let r = FindCoordinatorRequest::default().with_key_type(key_type);
                if v >= 4 {
                    r.with_coordinator_keys(vec![k])
                } else {
                    r.with_key(k)
                }
            })
            .await?;
        let (code, id) = if version >= 4 {
            let c = resp
                .coordinators
                .first()
                .ok_or_else(|| Step::Retry("FindCoordinator answered no coordinator".into()))?;
            (c.error_code, c.node_id.0)
        } else {
            (resp.error_code, resp.node_id.0)
        };
        step_for(code, "FindCoordinator")?;
        if id < 0 {
            return Err(Step::Retry("FindCoordinator answered no broker".into()));
        }
        Ok(id)
    }

    /// The transaction coordinator, found once and kept until it moves.
    async fn txn_coordinator(&self) -> Result<i32, Step> {
        if let Some(c) = self.txn().coordinator() {
            return Ok(c);
        }
        let id = self.find_coordinator(&self.txn().id, 1).await?;
        tracing::debug!(transactional_id = %self.txn().id, coordinator = id, "transaction coordinator found");
        self.txn().set_coordinator(Some(id));
        Ok(id)
    }

    /// Runs `step` until it succeeds, fails for good, or `max.block.ms`
    /// passes; finds the coordinator again when it moved. Fatal errors
    /// fence the producer; abortable ones make the transaction abortable.
    async fn retrying<T, F, Fut>(&self, what: &str, mut step: F) -> Result<T, TransactionError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Step>>,
    {
        let cfg = self.engine.config();
        let deadline = Instant::now() + cfg.max_block;
        let mut attempt = 0;
        loop {
            let mut soon = false;
            let why = match step().await {
                Ok(t) => return Ok(t),
                Err(Step::Fatal(kind, message)) => {
                    self.engine.fail_transactional(kind, &message);
                    return Err(TransactionError::Fatal { kind, message });
                }
                Err(Step::Abortable(kind, message)) => {
                    self.txn().abortable(kind, message.clone());
                    return Err(TransactionError::Abortable { kind, message });
                }
                Err(Step::IdLost(kind, message, skip_end_txn)) => {
                    self.txn().id_lost(kind, message.clone(), skip_end_txn);
                    return Err(TransactionError::Abortable { kind, message });
                }
                Err(Step::Recoordinate(why)) => {
                    self.txn().set_coordinator(None);
                    why
                }
                Err(Step::Retry(why)) => why,
                Err(Step::RetrySoon(why)) => {
                    soon = true;
                    why
                }
            };
            // A closing producer still flushes (its partitions must join
            // the transaction to be sent): steps give up only once the
            // actors are being stopped.
            if self.engine.shutting_down() {
                return Err(TransactionError::State(format!(
                    "{what}: the producer is closed ({why})"
                )));
            }
            let wait = if soon {
                cfg.retry_backoff.min(std::time::Duration::from_millis(20))
            } else {
                backoff(cfg.retry_backoff, cfg.retry_backoff_max, attempt)
            };
            if Instant::now() + wait > deadline {
                return Err(TransactionError::TimedOut(format!(
                    "{what} did not succeed within max.block.ms ({} ms): {why}",
                    cfg.max_block.as_millis()
                )));
            }
            tracing::debug!(what, %why, "transaction step retried");
            attempt += 1;
            tokio::time::sleep(wait).await;
        }
    }

    /// The producer id and epoch, waiting for them up to `max.block.ms`.
    async fn producer_id(&self) -> Result<(i64, i16), TransactionError> {
        self.retrying("waiting for the producer id", || async {
            let idem = self.engine.idem().expect("transactional is idempotent");
            if let Some((kind, message)) = idem.refused() {
                return Err(Step::Fatal(kind, message));
            }
            idem.ready()
                .ok_or_else(|| Step::Retry("no producer id yet".into()))
        })
        .await
    }

    /// InitProducerId for the transactional id at its coordinator.
    pub(super) async fn init(
        &self,
        bump_from: Option<(i64, i16)>,
    ) -> Result<(i64, i16), FetchError> {
        let _one = self.txn().ops.lock().await;
        let coordinator = self
            .txn_coordinator()
            .await
            .map_err(|s| FetchError::Transient(format!("{s:?}")))?;
        let id = TransactionalId(StrBytes::from_string(self.txn().id.clone()));
        let timeout_ms = self.txn().timeout.as_millis().min(i32::MAX as u128) as i32;
        let (_, resp) = self
            .ask(coordinator, ApiKey::InitProducerId, 5, move |v| {
                let mut r = InitProducerIdRequest::default()
                    .with_transactional_id(Some(id))
                    .with_transaction_timeout_ms(timeout_ms);
                if v >= 3 {
                    let (pid, epoch) = bump_from.unwrap_or((-1, -1));
                    r = r
                        .with_producer_id(ProducerId(pid))
                        .with_producer_epoch(epoch);
                }
                r
            })
            .await
            .map_err(|s| {
                self.txn().set_coordinator(None);
                FetchError::Transient(format!("{s:?}"))
            })?;
        match step_for(resp.error_code, "InitProducerId") {
            // A transactional producer bumps only when an abort asks for it,
            // after its EndTxn (`Link::end`): no transaction is open on the
            // coordinator then, and the one the application may have begun
            // meanwhile is sent under the new epoch (nothing is stamped
            // while the bump is pending), so it stays whole. (A bump that
            // found a transaction open would abort it there; `end_txn`
            // still checks the epoch it began under.)
            Ok(()) => {
                // A fresh id (not a bump): choose the transaction protocol
                // from the cluster's features, as Java's initTransactions.
                if bump_from.is_none() {
                    self.txn().refresh_version(true);
                }
                Ok((resp.producer_id.0, resp.producer_epoch))
            }
            // Fenced (a newer instance holds the id) or refused: the
            // producer is done, and must not ask for a fresh id, which
            // would fence its successor.
            Err(Step::Fatal(kind, message)) => {
                self.engine.fail_transactional(kind, &message);
                Err(FetchError::Refused(kind, message))
            }
            Err(Step::Recoordinate(m)) => {
                self.txn().set_coordinator(None);
                Err(FetchError::Transient(m))
            }
            // A bump whose id the coordinator lost is retried as a
            // request for a fresh id (`Idempotence::fetched`).
            Err(Step::Retry(m)) | Err(Step::RetrySoon(m)) | Err(Step::IdLost(_, m, _)) => {
                Err(FetchError::Transient(m))
            }
            Err(Step::Abortable(kind, message)) => Err(FetchError::Refused(kind, message)),
        }
    }

    /// Adds every wanted partition to the open transaction, until none is
    /// wanted. A partition refused (say TOPIC_AUTHORIZATION_FAILED) makes
    /// the transaction abortable and fails that partition's waiting
    /// batches with the cause.
    pub(super) async fn add_partitions(&self) {
        loop {
            let (generation, wanted) = self.txn().wanted();
            if wanted.is_empty() || self.txn().sendable() != Some(generation) {
                return;
            }
            // Abortable or being aborted: no partition joins any more, so
            // what waits to join fails now with the transaction's cause
            // (the Java client's Sender aborts undrained batches then), not
            // at delivery.timeout.ms.
            if !self.txn().accepts_steps(generation) {
                let (kind, message) = self.txn().abort_cause();
                self.txn().drop_wanted(generation, &wanted);
                for (topic, partition) in &wanted {
                    let q = self.engine.acc().queue(topic, *partition);
                    self.engine.fail_waiting(&q, kind, &message);
                }
                return;
            }
            let id = match self.producer_id().await {
                Ok(id) => id,
                Err(e) => return self.drop_wanted(generation, &wanted, ErrorKind::Aborted, &e),
            };
            let result = {
                let _one = self.txn().ops.lock().await;
                // An abort or commit may have ended the transaction while
                // this waited for its turn: nothing to add then.
                if !self.txn().accepts_steps(generation) {
                    return;
                }
                self.retrying("AddPartitionsToTxn", || self.add_once(id, &wanted))
                    .await
            };
            match result {
                Ok(()) => {
                    if !self.txn().is_generation(generation) {
                        continue;
                    }
                    for (topic, partition) in &wanted {
                        let q = self.engine.acc().queue(topic, *partition);
                        lock(&q.state).txn_added = generation;
                    }
                    self.txn().added(generation, &wanted, id);
                    self.engine.wake_all();
                }
                Err(e) => {
                    let kind = match &e {
                        TransactionError::Abortable { kind, .. }
                        | TransactionError::Fatal { kind, .. } => *kind,
                        _ => ErrorKind::Aborted,
                    };
                    return self.drop_wanted(generation, &wanted, kind, &e);
                }
            }
        }
    }

    /// Partitions that could not be added: their waiting batches fail with
    /// the cause, and the transaction can only be aborted.
    fn drop_wanted(
        &self,
        generation: u64,
        wanted: &[(Topic, i32)],
        kind: ErrorKind,
        e: &TransactionError,
    ) {
        let message = format!("the partition could not be added to the transaction: {e}");
        self.txn().abortable(kind, message.clone());
        self.txn().drop_wanted(generation, wanted);
        for (topic, partition) in wanted {
            let q = self.engine.acc().queue(topic, *partition);
            self.engine.fail_waiting(&q, kind, &message);
        }
    }

    async fn add_once(&self, id: (i64, i16), wanted: &[(Topic, i32)]) -> Result<(), Step> {
        let coordinator = self.txn_coordinator().await?;
        let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in wanted {
            topics.entry(t.as_str()).or_default().push(*p);
        }
        let topics: Vec<AddPartitionsToTxnTopic> = topics
            .into_iter()
            .map(|(t, ps)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_partitions(ps)
            })
            .collect();
        let txn_id = TransactionalId(StrBytes::from_string(self.txn().id.clone()));
        let (_, resp) = self
            .ask(coordinator, ApiKey::AddPartitionsToTxn, 3, move |_| {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id)
                    .with_v3_and_below_producer_id(ProducerId(id.0))
                    .with_v3_and_below_producer_epoch(id.1)
                    .with_v3_and_below_topics(topics)
            })
            .await?;
        step_for(resp.error_code, "AddPartitionsToTxn")?;
        // The worst answer decides: fatal, then a coordinator move or a
        // retry, then a refusal (OPERATION_NOT_ATTEMPTED marks partitions
        // held back because another one failed).
        let mut worst: Option<Step> = None;
        for t in &resp.results_by_topic_v3_and_below {
            for p in &t.results_by_partition {
                if p.partition_error_code == ResponseError::OperationNotAttempted.code() {
                    continue;
                }
                let what = format!(
                    "AddPartitionsToTxn for {}/{}",
                    t.name.0.as_str(),
                    p.partition_index
                );
                if let Err(s) = step_with(p.partition_error_code, &what, true) {
                    let rank = |s: &Step| match s {
                        Step::Fatal(..) => 4,
                        Step::IdLost(..) => 3,
                        Step::Abortable(..) => 2,
                        Step::Recoordinate(_) | Step::Retry(_) | Step::RetrySoon(_) => 1,
                    };
                    if worst.as_ref().is_none_or(|w| rank(&s) > rank(w)) {
                        worst = Some(s);
                    }
                }
            }
        }
        worst.map_or(Ok(()), Err)
    }

    /// Ends transaction `generation`: EndTxn when the coordinator knows
    /// of it, then `Transactions::finish`, both under `ops`, so that a
    /// transaction ends once however many calls race to end it (the
    /// application's commit and `close` finishing it). A call for a
    /// transaction that has ended learns how it ended.
    pub(super) async fn end(
        &self,
        commit: bool,
        generation: u64,
        plan: crate::transaction::AbortPlan,
    ) -> Result<(), TransactionError> {
        let _one = self.txn().ops.lock().await;
        if let Some(committed) = self.txn().ended(generation) {
            return match (committed, commit) {
                (true, true) | (false, false) => Ok(()),
                (false, true) => Err(TransactionError::State(
                    "the transaction was aborted".into(),
                )),
                (true, false) => Err(TransactionError::State(
                    "the transaction was committed".into(),
                )),
            };
        }
        if !self.txn().is_generation(generation) {
            return Err(TransactionError::State(
                "the transaction has already ended".into(),
            ));
        }
        // Under `ops`, right before the send: a commit is sent only while
        // the transaction is being committed with nothing against it (a
        // racing commit or the flush may have made it abortable; `close`
        // may have declared it aborted).
        if commit {
            self.txn().may_send_commit(generation)?;
            self.txn().commit_sent();
        }
        let mut plan = plan;
        let ids_lost = self.txn().ids_lost();
        let result = match if plan.end_txn {
            self.end_txn(commit).await
        } else {
            Ok(None)
        } {
            // Transaction version 2: EndTxn bumped the epoch (or, with the
            // epoch used up, gave a new id). The next transaction is
            // stamped with it, every partition's sequences from 0; no
            // InitProducerId bump is needed after an abort.
            Ok(Some(next)) => {
                if let (Some(idem), Some(started)) =
                    (self.engine.idem(), self.txn().started_under())
                {
                    idem.advanced(started, next);
                }
                plan.bump = false;
                Ok(())
            }
            Ok(None) => Ok(()),
            // EndTxn(abort) answered that the coordinator no longer knows
            // the producer id: there is no transaction of it to abort
            // there; the bump gets the producer going again.
            Err(TransactionError::Abortable { .. })
                if !commit && self.txn().ids_lost() > ids_lost =>
            {
                plan.bump = true;
                Ok(())
            }
            // The coordinator answered EndTxn(commit) with an abortable
            // error: the commit did not happen, and the transaction can
            // only be aborted now (as Java's ABORTABLE_ERROR).
            Err(e @ TransactionError::Abortable { .. }) if commit => {
                self.txn().commit_refused(generation);
                Err(e)
            }
            Err(e) => Err(e),
        };
        if result.is_ok() {
            // The cluster moved to transaction version 2: the next
            // transaction speaks it, under a new epoch (Java's
            // `clientSideEpochBumpRequired` on the upgrade).
            if self.txn().refresh_version(false) {
                plan.bump = true;
            }
            // The bump goes after EndTxn and before the transaction counts
            // as ended, so no record of the next one is stamped with the
            // old epoch; the supervisor drives it (`drive_idempotence`).
            if let Some(idem) = self.engine.idem().filter(|_| plan.bump) {
                if let Some(current) = idem.ready() {
                    idem.needs_bump(current);
                }
            }
            self.txn().finish(generation, commit);
        }
        result
    }

    /// EndTxn for the open transaction, when the coordinator knows of it.
    /// Under transaction version 2 (EndTxn v5), the id and epoch the
    /// coordinator bumped to.
    async fn end_txn(&self, commit: bool) -> Result<Option<(i64, i16)>, TransactionError> {
        let Some(started) = self.txn().started_under() else {
            return Ok(None); // nothing was added: nothing to end
        };
        let current = self.engine.idem().and_then(|i| i.ready());
        if current != Some(started) {
            // The epoch was bumped since (a sequence error), which aborted
            // the transaction on the coordinator already.
            return if commit {
                let message =
                    "the producer's epoch was bumped during the transaction, which aborted it"
                        .to_string();
                self.txn().abortable(ErrorKind::Aborted, message.clone());
                Err(TransactionError::Abortable {
                    kind: ErrorKind::Aborted,
                    message,
                })
            } else {
                Ok(None)
            };
        }
        let cap = self.version().caps().end_txn;
        let what = if commit {
            "EndTxn(commit)"
        } else {
            "EndTxn(abort)"
        };
        self.retrying(what, || async {
            let coordinator = self.txn_coordinator().await?;
            let txn_id = TransactionalId(StrBytes::from_string(self.txn().id.clone()));
            let (version, resp) = self
                .ask(coordinator, ApiKey::EndTxn, cap, move |_| {
                    EndTxnRequest::default()
                        .with_transactional_id(txn_id)
                        .with_producer_id(ProducerId(started.0))
                        .with_producer_epoch(started.1)
                        .with_committed(commit)
                })
                .await?;
            step_for(resp.error_code, what)?;
            // v5 and later (transaction version 2): the epoch the
            // coordinator bumped to; -1 from an older coordinator.
            Ok((version >= 5 && resp.producer_id.0 >= 0)
                .then_some((resp.producer_id.0, resp.producer_epoch)))
        })
        .await
    }

    /// The transaction protocol in use (version 1 until the producer has
    /// its id).
    fn version(&self) -> TransactionVersion {
        self.txn().version().unwrap_or(TransactionVersion::V1)
    }

    /// AddOffsetsToTxn at the transaction coordinator, then TxnOffsetCommit
    /// at the group's coordinator; under transaction version 2,
    /// TxnOffsetCommit v5 alone (the group's coordinator adds the offsets
    /// to the transaction).
    pub(super) async fn send_offsets(
        &self,
        offsets: Vec<(Topic, i32, i64)>,
        group: GroupMetadata,
    ) -> Result<(), TransactionError> {
        let id = self.producer_id().await?;
        let _one = self.txn().ops.lock().await;
        if self.txn().phase() != crate::transaction::Phase::Open {
            return Err(TransactionError::State(
                "the transaction is no longer open".into(),
            ));
        }
        let version = self.version();
        if version == TransactionVersion::V1 {
            self.add_offsets_to_txn(id, &group).await?;
        }
        self.txn().offsets_added(id);
        self.commit_offsets(id, offsets, &group, version.caps().txn_offset_commit)
            .await
    }

    /// AddOffsetsToTxn: the group's offsets join the transaction, at the
    /// transaction's coordinator.
    async fn add_offsets_to_txn(
        &self,
        id: (i64, i16),
        group: &GroupMetadata,
    ) -> Result<(), TransactionError> {
        let txn_id = self.txn().id.clone();
        self.retrying("AddOffsetsToTxn", || async {
            let coordinator = self.txn_coordinator().await?;
            let (t, g) = (txn_id.clone(), group.group_id.clone());
            let (_, resp) = self
                .ask(coordinator, ApiKey::AddOffsetsToTxn, 3, move |_| {
                    AddOffsetsToTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(t)))
                        .with_producer_id(ProducerId(id.0))
                        .with_producer_epoch(id.1)
                        .with_group_id(GroupId(StrBytes::from_string(g)))
                })
                .await?;
            step_for(resp.error_code, "AddOffsetsToTxn")
        })
        .await
    }

    /// TxnOffsetCommit: the offsets, at the group's coordinator (found
    /// once, and again when it moves).
    async fn commit_offsets(
        &self,
        id: (i64, i16),
        offsets: Vec<(Topic, i32, i64)>,
        group: &GroupMetadata,
        cap: i16,
    ) -> Result<(), TransactionError> {
        let txn_id = self.txn().id.clone();
        let found: std::cell::Cell<Option<i32>> = std::cell::Cell::new(None);
        self.retrying("TxnOffsetCommit", || {
            let topics = offset_topics(&offsets);
            let group = group.clone();
            let txn_id = txn_id.clone();
            let found = &found;
            async move {
                let coordinator = match found.get() {
                    Some(c) => c,
                    None => {
                        let c = self.find_coordinator(&group.group_id, 0).await?;
                        found.set(Some(c));
                        c
                    }
                };
                let result = self
                    .ask(coordinator, ApiKey::TxnOffsetCommit, cap, move |_| {
                        TxnOffsetCommitRequest::default()
                            .with_transactional_id(TransactionalId(StrBytes::from_string(txn_id)))
                            .with_group_id(GroupId(StrBytes::from_string(group.group_id)))
                            .with_producer_id(ProducerId(id.0))
                            .with_producer_epoch(id.1)
                            .with_generation_id(group.generation_id)
                            .with_member_id(StrBytes::from_string(group.member_id))
                            .with_group_instance_id(
                                group.group_instance_id.map(StrBytes::from_string),
                            )
                            .with_topics(topics)
                    })
                    .await;
                let (_, resp) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        found.set(None);
                        return Err(e);
                    }
                };
                for t in &resp.topics {
                    for p in &t.partitions {
                        match step_for(p.error_code, "TxnOffsetCommit") {
                            Ok(()) => {}
                            // The group's coordinator moved, not the
                            // transaction's.
                            Err(Step::Recoordinate(m)) => {
                                found.set(None);
                                return Err(Step::Retry(m));
                            }
                            Err(s) => return Err(s),
                        }
                    }
                }
                Ok(())
            }
        })
        .await
    }
}

/// TxnOffsetCommit's topics: `offsets` grouped by topic, in topic order.
fn offset_topics(offsets: &[(Topic, i32, i64)]) -> Vec<TxnOffsetCommitRequestTopic> {
    let mut topics: BTreeMap<Topic, Vec<(i32, i64)>> = BTreeMap::new();
    for (t, p, o) in offsets {
        topics.entry(*t).or_default().push((*p, *o));
    }
    topics
        .into_iter()
        .map(|(t, ps)| {
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.as_str().to_string())))
                .with_partitions(
                    ps.into_iter()
                        .map(|(p, o)| {
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o)
                                .with_committed_leader_epoch(-1)
                        })
                        .collect(),
                )
        })
        .collect()
}
