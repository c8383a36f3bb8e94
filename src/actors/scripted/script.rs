//! The script and the double's state: the test's rules, the log, held
//! requests, idempotent producers' state (`ProducerEntry`), and the
//! coordinator's (`txn.rs`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use crate::batching::batch::SealedBatch;
use crate::clock::Instant;
use crate::delivery::settlement::Outcome;
use crate::engine::answer::BatchAnswer;
use crate::engine::Engine;
use crate::kafka_error::BrokerError;
use crate::protocol::record_batch::decode::decode_records;
use crate::protocol::record_batch::increment_sequence;
use crate::protocol::ApiKey;
use crate::record::{Record, Topic};
use crate::report::ErrorKind;
use crate::sync::lock;

use super::network::{publish, Held, Network};
use super::txn::{self, TxnCoordinator, TxnState};
use super::verdict::{Answer, Arrival, Request, Stamp, Verdict, BROKER_ID};

/// What the broker keeps of one idempotent producer for one partition
/// (Kafka's `ProducerStateEntry`).
#[derive(Debug)]
struct ProducerEntry {
    epoch: i16,
    last_sequence: i32,
    /// The last batches written under `epoch` (`BATCHES_KEPT`): (first
    /// sequence, last sequence, base offset), for recognising a retry.
    recent: VecDeque<(i32, i32, i64)>,
}

/// How many written batches per producer and partition the double keeps
/// for recognising retries. Kafka keeps five (`NUM_BATCHES_TO_RETAIN`),
/// enough for a producer with at most five requests in flight; the double
/// keeps more, because its per-record split makes many batches of one
/// request.
const BATCHES_KEPT: usize = 5_000;

/// The first producer id the double hands out.
const FIRST_PRODUCER_ID: i64 = 1000;

/// The next producer id, counting `handed_out`.
fn fresh_producer_id(handed_out: &mut i64) -> i64 {
    let id = FIRST_PRODUCER_ID + *handed_out;
    *handed_out += 1;
    id
}

/// What the coordinator reaches of the rest of the double's state.
struct Rest<'a> {
    producer_ids: &'a mut i64,
    history: &'a mut Vec<Arrival>,
}

impl txn::Broker for Rest<'_> {
    fn node_id(&self) -> i32 {
        BROKER_ID
    }

    fn fresh_producer_id(&mut self) -> i64 {
        fresh_producer_id(self.producer_ids)
    }

    fn mark(&mut self, arrival: usize, state: TxnState) {
        self.history[arrival].txn = Some(state);
    }
}

/// A test's rule: records it matches get its verdicts, one per arrival,
/// until they run out (or forever).
struct Rule {
    matches: Box<dyn Fn(&Record) -> bool + Send + Sync>,
    verdicts: VecDeque<Verdict>,
    forever: Option<Verdict>,
}

#[derive(Default)]
pub(super) struct State {
    /// Topic name → partitions.
    topics: BTreeMap<Topic, i32>,
    /// Partitions of a topic created on first use; `None`: no auto-creation.
    auto_create: Option<i32>,
    rules: Vec<Rule>,
    default: Option<Verdict>,
    next_offset: HashMap<(Topic, i32), i64>,
    pub(super) history: Vec<Arrival>,
    pub(super) held: VecDeque<Held>,
    pub(super) engines: Vec<Weak<Engine>>,
    /// Producer ids handed out so far.
    producer_ids: i64,
    /// Idempotent producers' state, by producer id and partition.
    producers: HashMap<(i64, Topic, i32), ProducerEntry>,
    /// The transaction coordinator (`actors/scripted/txn.rs`).
    txn: TxnCoordinator,
    /// Producers and partitions whose state the broker forgot
    /// (`forget_producers`): their next batch is taken whatever its
    /// sequence, as Kafka takes one from a producer it has no state for.
    forgotten: HashSet<(i64, Topic, i32)>,
    /// Connections dropped, the broker down, slow answers
    /// (`network.rs`).
    pub(super) network: Network,
}

/// The script and the broker's state, shared by the test's `MockBroker`
/// and every producer built from it.
pub(crate) struct Script {
    pub(super) state: Mutex<State>,
    /// Topics were added or grew: topic waits look again.
    pub(super) topics_changed: Notify,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = lock(&self.state);
        f.debug_struct("Script")
            .field("topics", &st.topics)
            .field("rules", &st.rules.len())
            .field("history", &st.history.len())
            .field("held", &st.held.len())
            .finish_non_exhaustive()
    }
}

impl Default for Script {
    fn default() -> Self {
        Script {
            state: Mutex::new(State {
                auto_create: Some(1),
                default: Some(Verdict::Deliver),
                ..State::default()
            }),
            topics_changed: Notify::new(),
        }
    }
}

impl Script {
    /// Creates `topic` with `partitions`, or grows it to that many (a topic
    /// never shrinks, as in Kafka).
    pub(crate) fn set_topic(&self, topic: Topic, partitions: i32) {
        let partitions = partitions.max(1);
        {
            let mut st = lock(&self.state);
            let n = st.topics.entry(topic).or_insert(partitions);
            *n = (*n).max(partitions);
            publish(&st.engines, &st.topics);
        }
        self.topics_changed.notify_waiters();
    }

    pub(crate) fn set_auto_create(&self, partitions: Option<i32>) {
        lock(&self.state).auto_create = partitions.map(|p| p.max(1));
    }

    pub(crate) fn set_default(&self, verdict: Verdict) {
        lock(&self.state).default = Some(verdict);
    }

    pub(crate) fn add_rule(
        &self,
        matches: Box<dyn Fn(&Record) -> bool + Send + Sync>,
        verdicts: VecDeque<Verdict>,
        forever: Option<Verdict>,
    ) {
        lock(&self.state).rules.push(Rule {
            matches,
            verdicts,
            forever,
        });
    }

    pub(crate) fn clear_rules(&self) {
        lock(&self.state).rules.clear();
    }

    pub(crate) fn history(&self) -> Vec<Arrival> {
        lock(&self.state).history.clone()
    }

    pub(crate) fn held(&self) -> usize {
        lock(&self.state)
            .held
            .iter()
            .filter(|h| h.due.is_none())
            .count()
    }

    /// Scripts `codes` for the next coordinator requests, one each.
    pub(crate) fn script_coordinator(&self, codes: impl IntoIterator<Item = i16>) {
        lock(&self.state).txn.faults.extend(codes);
    }

    /// Scripts `codes` for the next `request`s, one each.
    pub(crate) fn script_request(&self, request: Request, codes: impl IntoIterator<Item = i16>) {
        let mut st = lock(&self.state);
        st.txn
            .faults_for
            .entry(request.api())
            .or_default()
            .extend(codes);
    }

    /// The coordinator aborts every open transaction, bumping its epoch,
    /// as when `transaction.timeout.ms` passes; how many it aborted.
    pub(crate) fn expire_transactions(&self) -> usize {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let mut rest = Rest {
            producer_ids: &mut st.producer_ids,
            history: &mut st.history,
        };
        st.txn.expire(&mut rest, Instant::now(), true)
    }

    /// Forgets every idempotent producer's state (module docs).
    pub(crate) fn forget_producers(&self) {
        let mut st = lock(&self.state);
        let keys: Vec<_> = st.producers.drain().map(|(k, _)| k).collect();
        st.forgotten.extend(keys);
    }

    /// Topic name → partitions.
    pub(crate) fn topics(&self) -> BTreeMap<Topic, i32> {
        lock(&self.state).topics.clone()
    }

    /// A producer's engine runs on this script: it gets the metadata.
    pub(crate) fn attach(&self, engine: &Arc<Engine>) {
        let mut st = lock(&self.state);
        st.engines.retain(|e| e.strong_count() > 0);
        st.engines.push(Arc::downgrade(engine));
        publish(&st.engines, &st.topics);
    }

    /// Whether `topic` exists now, creating it if the script and the
    /// producer (`allow.auto.create.topics`) allow.
    pub(super) fn known_or_created(&self, topic: Topic, may_create: bool) -> bool {
        let partitions = {
            let st = lock(&self.state);
            if st.topics.contains_key(&topic) {
                return true;
            }
            // Down: no metadata to learn a new topic from.
            if st.network.down {
                return false;
            }
            match st.auto_create.filter(|_| may_create) {
                Some(p) => p,
                None => return false,
            }
        };
        self.set_topic(topic, partitions);
        true
    }

    /// The verdict for one arrival of `record`: the first rule that matches
    /// it and has a verdict left, else the default.
    fn verdict(st: &mut State, record: &Record) -> Verdict {
        for rule in &mut st.rules {
            if !(rule.matches)(record) {
                continue;
            }
            if let Some(v) = rule.verdicts.pop_front() {
                return v;
            }
            if let Some(v) = rule.forever {
                return v;
            }
        }
        st.default.unwrap_or(Verdict::Deliver)
    }

    /// InitProducerId of an idempotent producer: a new id (`None`), or
    /// the next epoch of `bumped` (a new id once the epoch is used up, as
    /// Kafka's coordinator does); `Err`: the error code the test scripted
    /// for it (`MockBroker::script_request`).
    pub(super) fn grant(&self, bumped: Option<(i64, i16)>) -> Result<(i64, i16), i16> {
        let mut st = lock(&self.state);
        let scripted = st
            .txn
            .faults_for
            .get_mut(&ApiKey::InitProducerId)
            .and_then(VecDeque::pop_front);
        if let Some(code) = scripted {
            return Err(code);
        }
        Ok(match bumped {
            Some((id, epoch)) if epoch < i16::MAX - 1 => (id, epoch + 1),
            _ => (fresh_producer_id(&mut st.producer_ids), 0),
        })
    }

    /// Answers a coordinator request as the double's transaction
    /// coordinator (`actors/scripted/txn.rs`): `build` makes it for
    /// version `max`, which the double speaks for every request; it goes
    /// over as bytes and comes back as the decoded response, as from a
    /// broker.
    pub(crate) fn ask<R>(
        &self,
        api: ApiKey,
        max: i16,
        build: impl FnOnce(i16) -> R,
    ) -> Result<(i16, R::Response), String>
    where
        R: kafka_protocol::protocol::Request,
    {
        use kafka_protocol::protocol::Decodable;
        let mut request = bytes::BytesMut::new();
        build(max)
            .encode(&mut request, max)
            .map_err(|e| format!("could not write {api:?}: {e}"))?;
        let mut response = {
            let mut st = lock(&self.state);
            let st = &mut *st;
            if st.network.down {
                return Err(format!(
                    "connection to broker {BROKER_ID} refused (MockBroker::go_down)"
                ));
            }
            let mut rest = Rest {
                producer_ids: &mut st.producer_ids,
                history: &mut st.history,
            };
            st.txn.answer(&mut rest, api, max, request.freeze())?
        };
        let r = R::Response::decode(&mut response, max)
            .map_err(|e| format!("could not read the double's {api:?} answer: {e}"))?;
        Ok((max, r))
    }

    /// Whether `b` is a retry of a batch written already: the offset it
    /// was written at.
    fn duplicate_of(st: &State, b: &SealedBatch) -> Option<i64> {
        let s = b.encoded.stamp();
        if s.producer_id < 0 {
            return None;
        }
        let e = st
            .producers
            .get(&(s.producer_id, b.topic, b.partition))
            .filter(|e| e.epoch == s.producer_epoch)?;
        let last = increment_sequence(s.base_sequence, b.record_count - 1);
        e.recent
            .iter()
            .find(|r| (r.0, r.1) == (s.base_sequence, last))
            .map(|r| r.2)
    }

    /// Writes `b` at the end of its partition, after the idempotent
    /// producer's checks (module docs); `Err` is the broker's refusal.
    fn write(
        st: &mut State,
        b: &SealedBatch,
        arrivals: Range<usize>,
        transactional_id: Option<&str>,
    ) -> Result<i64, BrokerError> {
        let s = b.encoded.stamp();
        let key = (s.producer_id, b.topic, b.partition);
        let last = increment_sequence(s.base_sequence, b.record_count - 1);
        if let Some(t) = transactional_id {
            let mut rest = Rest {
                producer_ids: &mut st.producer_ids,
                history: &mut st.history,
            };
            st.txn
                .admit(
                    &mut rest,
                    t,
                    (s.producer_id, s.producer_epoch),
                    b.topic,
                    b.partition,
                )
                .map_err(BrokerError::from_response)?;
        }
        if s.producer_id >= 0 {
            let expected = match st.producers.get(&key) {
                Some(e) if s.producer_epoch < e.epoch => {
                    return Err(BrokerError::InvalidProducerEpoch)
                }
                Some(e) if s.producer_epoch == e.epoch => {
                    Some(increment_sequence(e.last_sequence, 1))
                }
                Some(_) => Some(0),
                // State forgotten: any sequence (Kafka's
                // `ProducerAppendInfo` with no entry).
                None if st.forgotten.remove(&key) => None,
                // The producer's first batch here.
                None => Some(0),
            };
            if expected.is_some_and(|x| s.base_sequence != x) {
                return Err(BrokerError::OutOfOrderSequenceNumber);
            }
        }
        let next = st.next_offset.entry((b.topic, b.partition)).or_insert(0);
        let base = *next;
        *next += i64::from(b.record_count);
        for (i, a) in arrivals.clone().enumerate() {
            st.history[a].answer = Answer::Written {
                offset: base + i as i64,
            };
            if transactional_id.is_some() {
                st.history[a].txn = Some(TxnState::Open);
            }
        }
        if transactional_id.is_some() {
            st.txn.written(s.producer_id, arrivals);
        }
        if s.producer_id >= 0 {
            let e = st.producers.entry(key).or_insert(ProducerEntry {
                epoch: s.producer_epoch,
                last_sequence: -1,
                recent: VecDeque::new(),
            });
            if e.epoch != s.producer_epoch {
                e.epoch = s.producer_epoch;
                e.recent.clear();
            }
            e.last_sequence = last;
            e.recent.push_back((s.base_sequence, last, base));
            if e.recent.len() > BATCHES_KEPT {
                e.recent.pop_front();
            }
        }
        Ok(base)
    }

    /// Answers the in-flight batch `b` (its arrivals at `arrivals` in the
    /// history) with `verdict`, as a broker's response would.
    pub(super) fn apply(
        &self,
        engine: &Arc<Engine>,
        b: SealedBatch,
        arrivals: Range<usize>,
        verdict: Verdict,
        now: Instant,
    ) {
        let acks0 = engine.config().acks.wire() == 0;
        let mut st = lock(&self.state);
        let mut lost = None;
        let answer = match verdict {
            Verdict::Deliver | Verdict::LoseAnswer => {
                let transactional_id = engine.txn().map(|t| t.id.as_str());
                match Self::write(&mut st, &b, arrivals.clone(), transactional_id) {
                    Ok(_) if verdict == Verdict::LoseAnswer => None,
                    Ok(base) => Some(BatchAnswer::written(base)),
                    Err(error) => {
                        for a in arrivals.clone() {
                            st.history[a].answer = if verdict == Verdict::LoseAnswer {
                                Answer::NoAnswer
                            } else {
                                Answer::Refused(error)
                            };
                        }
                        (verdict == Verdict::Deliver).then(|| {
                            BatchAnswer::refused(
                                error,
                                "refused by courier_kafka::testing::MockBroker's sequence check",
                            )
                        })
                    }
                }
            }
            Verdict::Fail(error) => {
                for a in arrivals.clone() {
                    st.history[a].answer = Answer::Refused(error);
                }
                Some(BatchAnswer::refused(
                    error,
                    "scripted by courier_kafka::testing::MockBroker",
                ))
            }
            Verdict::TimeOut => {
                for a in arrivals.clone() {
                    st.history[a].answer = Answer::NoAnswer;
                }
                None
            }
            Verdict::Disconnect => {
                for a in arrivals.clone() {
                    st.history[a].answer = Answer::NoAnswer;
                }
                lost = Some(format!(
                    "connection to broker {BROKER_ID} lost (scripted: Verdict::Disconnect)"
                ));
                None
            }
            Verdict::Hold if !acks0 => {
                st.held.push_back(Held {
                    engine: Arc::downgrade(engine),
                    batch: b,
                    arrivals,
                    sent_at: now,
                    due: None,
                });
                return;
            }
            // With acks=0 nothing waits for an answer: held is written.
            Verdict::Hold => {
                drop(st);
                return self.apply(engine, b, arrivals, Verdict::Deliver, now);
            }
        };
        drop(st);
        if let Some(why) = lost {
            // The connection drops as the request arrives: the request and
            // every other one of this producer in flight lose their
            // answers, as on a dropped socket.
            engine.retry_or_fail(b, now, ErrorKind::Timeout, &why, true);
            self.drop_connections(Some(engine), false, &why);
            return;
        }
        if acks0 {
            // No response comes with acks=0: "sent, offset unknown",
            // whatever the broker did with it.
            engine.land_and_settle(
                b,
                Outcome::Delivered {
                    base_offset: None,
                    log_append_time: None,
                },
            );
            return;
        }
        match answer {
            Some(a) => {
                engine.answer(b, BROKER_ID, &a, now);
            }
            None => engine.retry_or_fail(
                b,
                now,
                ErrorKind::Timeout,
                &format!("request to broker {BROKER_ID} timed out (scripted)"),
                true,
            ),
        }
    }

    /// A batch arrives at the broker: its records are read back into the
    /// history and each gets its verdict; a batch whose records get
    /// different verdicts, or that is held, is split into one batch per
    /// record first.
    pub(super) fn arrive(&self, engine: &Arc<Engine>, mut b: SealedBatch, now: Instant) {
        b.attempts += 1;
        b.owed.sent = true;
        if lock(&self.state).network.is_cut(engine) {
            // Sent on a connection that has just dropped: it never
            // arrives.
            let why = format!("connection to broker {BROKER_ID} lost");
            engine.retry_or_fail(b, now, ErrorKind::Timeout, &why, true);
            return;
        }
        let records = match read_back(engine, &b) {
            Ok(records) => records,
            Err(why) => {
                // Our own batches always read back; say so loudly if not.
                tracing::error!(%why, "the scripted broker could not read a batch back");
                let kind = ErrorKind::Broker(BrokerError::CorruptMessage);
                let failed = Outcome::Failed { kind, message: why };
                engine.land_and_settle(b, failed);
                return;
            }
        };
        let (start, verdicts, duplicate) = self.record_arrivals(&b, records);
        if let Some(base) = duplicate {
            engine.answer(b, BROKER_ID, &BatchAnswer::written(base), now);
            return;
        }
        let first = verdicts[0];
        let alike = verdicts.iter().all(|v| *v == first);
        if b.record_count == 1 || (alike && first != Verdict::Hold) {
            let end = start + verdicts.len();
            return self.answer(engine, b, start..end, first, now);
        }
        self.apply_apart(engine, b, start, verdicts, now);
    }

    /// Adds `b`'s records to the history as they arrived: where they
    /// start in it, each record's verdict, and, for a retry of a batch
    /// written already, the offset it was written at (answered as a
    /// duplicate, whatever the script says: the broker recognises it
    /// before anything else).
    fn record_arrivals(
        &self,
        b: &SealedBatch,
        records: Vec<crate::protocol::record_batch::decode::DecodedRecord>,
    ) -> (usize, Vec<Verdict>, Option<i64>) {
        let stamp = b.encoded.stamp();
        let mut st = lock(&self.state);
        let start = st.history.len();
        let duplicate = Self::duplicate_of(&st, b);
        let mut verdicts = Vec::with_capacity(records.len());
        for (i, r) in records.into_iter().enumerate() {
            let record = Record {
                topic: b.topic,
                partition: Some(b.partition),
                key: r.key,
                value: r.value,
                headers: r.headers,
                timestamp: Some(r.timestamp),
                // As written: the application's tag is never sent.
                opaque: 0,
            };
            let answer = match duplicate {
                Some(base) => Answer::Duplicate {
                    offset: base + i as i64,
                },
                None => {
                    verdicts.push(Self::verdict(&mut st, &record));
                    Answer::Held
                }
            };
            st.history.push(Arrival {
                record,
                attempt: b.attempts,
                answer,
                stamp: (stamp.producer_id >= 0).then(|| Stamp {
                    producer_id: stamp.producer_id,
                    epoch: stamp.producer_epoch,
                    sequence: increment_sequence(stamp.base_sequence, i as i32),
                }),
                txn: None,
            });
        }
        (start, verdicts, duplicate)
    }

    /// Answers the batch that has just arrived with `verdict`: now, or,
    /// with a latency set (`MockBroker::set_latency`), once it has passed
    /// (in flight meanwhile, as a held request: timed out if
    /// `request.timeout.ms` passes first, lost if the connection drops).
    fn answer(
        &self,
        engine: &Arc<Engine>,
        b: SealedBatch,
        arrivals: Range<usize>,
        verdict: Verdict,
        now: Instant,
    ) {
        let acks0 = engine.config().acks.wire() == 0;
        {
            let mut st = lock(&self.state);
            let latency = st.network.latency;
            let answered = !matches!(verdict, Verdict::Hold | Verdict::Disconnect);
            if !latency.is_zero() && !acks0 && answered {
                st.held.push_back(Held {
                    engine: Arc::downgrade(engine),
                    batch: b,
                    arrivals,
                    sent_at: now,
                    due: Some((now + latency, verdict)),
                });
                return;
            }
        }
        self.apply(engine, b, arrivals, verdict, now);
    }

    /// A batch whose records got different verdicts, or that is held:
    /// split into one batch per record, each answered by its own verdict.
    fn apply_apart(
        &self,
        engine: &Arc<Engine>,
        mut b: SealedBatch,
        start: usize,
        verdicts: Vec<Verdict>,
        now: Instant,
    ) {
        let q = engine.acc().queue(&b.topic, b.partition);
        lock(&q.state).land(&mut b);
        match engine.acc().split(b) {
            Ok(parts) => {
                for (i, (mut p, v)) in parts.into_iter().zip(verdicts).enumerate() {
                    lock(&q.state).take_off(&mut p);
                    self.answer(engine, p, start + i..start + i + 1, v, now);
                }
            }
            Err((b, why)) => {
                tracing::error!(%why, "the scripted broker could not split a batch");
                let end = start + verdicts.len();
                let kind = ErrorKind::Broker(BrokerError::CorruptMessage);
                engine.settle(b, Outcome::Failed { kind, message: why });
                let mut st = lock(&self.state);
                for a in start..end {
                    st.history[a].answer = Answer::NoAnswer;
                }
            }
        }
    }

    /// Drops the connection of `only` (`None`: of every producer): the
    /// requests in flight on it lose their answers (written first, if
    /// `written` and their verdict writes them) and go back to their
    /// queues as after a lost socket (`Engine::retry_or_fail`, counted as
    /// an attempt; reported `Timeout` once `retries` or
    /// `delivery.timeout.ms` are used up); each producer's broker actor
    /// then notices and reconnects (`network.rs`). Returns how many
    /// requests were lost.
    pub(crate) fn drop_connections(
        &self,
        only: Option<&Arc<Engine>>,
        written: bool,
        why: &str,
    ) -> usize {
        let (engines, lost) = {
            let mut st = lock(&self.state);
            let engines: Vec<Arc<Engine>> = match only {
                Some(e) => vec![e.clone()],
                None => st.engines.iter().filter_map(Weak::upgrade).collect(),
            };
            for e in &engines {
                st.network.cut(e);
            }
            let targets: Vec<Weak<Engine>> = engines.iter().map(Arc::downgrade).collect();
            let (lost, kept): (VecDeque<Held>, VecDeque<Held>) = std::mem::take(&mut st.held)
                .into_iter()
                .partition(|h| targets.iter().any(|t| t.ptr_eq(&h.engine)));
            st.held = kept;
            (engines, lost)
        };
        let now = Instant::now();
        let count = lost.len();
        for h in lost {
            let Some(engine) = h.engine.upgrade() else {
                continue;
            };
            let writes = matches!(
                h.due,
                None | Some((_, Verdict::Deliver | Verdict::LoseAnswer))
            );
            {
                let mut st = lock(&self.state);
                let txn_id = engine.txn().map(|t| t.id.as_str());
                if !(written && writes)
                    || Self::write(&mut st, &h.batch, h.arrivals.clone(), txn_id).is_err()
                {
                    for a in h.arrivals.clone() {
                        st.history[a].answer = Answer::NoAnswer;
                    }
                }
            }
            engine.retry_or_fail(h.batch, now, ErrorKind::Timeout, why, true);
        }
        for e in engines {
            e.wake_all();
        }
        count
    }
}

/// `b`'s records, read back from its encoded batch (all of them, or why
/// not).
fn read_back(
    engine: &Engine,
    b: &SealedBatch,
) -> Result<Vec<crate::protocol::record_batch::decode::DecodedRecord>, String> {
    let config = engine.config();
    let max_size = config.batch_size.max(config.max_request_size) * 2;
    match decode_records(b.encoded.bytes(), max_size) {
        Ok(r) if r.len() == b.record_count as usize => Ok(r),
        Ok(r) => Err(format!(
            "{} records read back, {} written",
            r.len(),
            b.record_count
        )),
        Err(e) => Err(e.to_string()),
    }
}
