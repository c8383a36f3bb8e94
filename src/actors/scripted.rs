//! The scripted broker behind `courier::testing::MockBroker`: an
//! in-process stand-in for the connection actors and the partitioner
//! actor, so that a producer can run with no broker, no socket and no
//! network, and still take every record through its real path.
//!
//! Everything above the sockets is the real producer's: records are
//! partitioned by the engine's partitioner against metadata this module
//! publishes (one broker, id 0, leading every partition of the scripted
//! topics), appended into the real accumulator, sealed into real batches
//! (linger, `batch.size`, compression), and their reports routed by
//! `delivery::router::route` to `send`, subscriptions and actors. What
//! replaces the connection actors is [`ScriptedBroker`], one actor per
//! producer under its `ProducerSupervisor`: it drains the queues as a
//! connection actor does and answers each batch as a broker would, per
//! record, by the script ([`Verdict`]). Answers go through
//! `Engine::answer` and `Engine::retry_or_fail`, the code a real Produce
//! response goes through, so a retriable error is retried within
//! `retries` and `delivery.timeout.ms` and MESSAGE_TOO_LARGE splits a
//! batch, exactly as with a broker.
//!
//! A batch whose records get different verdicts is split into one batch
//! per record (`Accumulator::split`, as for MESSAGE_TOO_LARGE) and each
//! part answered on its own; so is a held batch, so that a test releases
//! held records one at a time. Held batches are in flight: counted in
//! their queue's `in_flight`, answered when the test releases them, timed
//! out after `request.timeout.ms` (then retried, as a request the broker
//! never answered), cancelled by `close_timeout` or the last handle's drop
//! (`CancelInFlight`), put back by a retiring close (`Retire`).
//!
//! With `enable.idempotence=true` (asked for explicitly: the double's
//! default is without) the double is an idempotent broker too: it hands
//! the producer an id (and a new epoch when the producer bumps it), the
//! drain stamps sequences as a connection actor's does
//! (`Accumulator::stamp`), and a batch the script lets through is first
//! checked as Kafka's `ProducerAppendInfo` checks it: the same batch
//! again (same epoch and sequences, among the partition's last batches) is
//! a duplicate, answered with the offset it was written at and not
//! written again; an older epoch is INVALID_PRODUCER_EPOCH; a new epoch
//! must start at sequence 0 and the same epoch must continue where the
//! last batch ended, else OUT_OF_ORDER_SEQUENCE_NUMBER. So must a
//! producer's first batch in a partition: unless the test made the
//! double forget (`forget_producers`), a first batch not at 0 means
//! sequences were skipped (Kafka, which cannot tell a new producer from
//! one whose state expired, takes any sequence from a producer it knows
//! nothing of). `forget_producers` drops every producer's state, as Kafka
//! does after `producer.id.expiration.ms` without traffic or when
//! retention deletes the segments that held it (KIP-854, KAFKA-7190):
//! the next batch of each is then taken whatever its sequence, and a
//! retry of a batch written before is written again. In flight per
//! partition: one batch until the broker has acknowledged one of the
//! epoch, then up to `max.in.flight.requests.per.connection`.
//!
//! Deliberately absent: transactions (refused at build), and, without
//! idempotence, `max.in.flight` (each batch is a request of its own,
//! answered or held independently).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use actix::prelude::*;
use futures::future::BoxFuture;
use kafka_protocol::error::ResponseError;
use tokio::sync::Notify;

pub use super::scripted_txn::TxnState;
use super::scripted_txn::{self, TxnCoordinator};
use crate::actors::msgs::{AddPartitionsWanted, CancelInFlight, Retire, Wake};
use crate::batching::batch::SealedBatch;
use crate::batching::queue::QueueState;
use crate::clock::Instant;
use crate::delivery::settlement::Outcome;
use crate::engine::answer::BatchAnswer;
use crate::engine::{ActorTree, Engine};
use crate::idempotence::Fetch;
use crate::kafka_error::BrokerError;
use crate::metadata::{MetadataSnapshot, TopicMetadata};
use crate::protocol::record_batch::decode::decode_records;
use crate::protocol::record_batch::increment_sequence;
use crate::protocol::ApiKey;
use crate::record::{Record, Topic};
use crate::report::ErrorKind;
use crate::sync::lock;

/// The scripted broker's id: it leads every partition.
pub(crate) const BROKER_ID: i32 = 0;

/// What the broker does with one record each time it arrives (once per
/// attempt: a record the producer retries arrives again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Written: the next offset of its partition, reported delivered.
    Deliver,
    /// Refused with this error code, as a broker's Produce response would:
    /// the producer retries a retriable one (NOT_ENOUGH_REPLICAS,
    /// NOT_LEADER_OR_FOLLOWER, …) within `retries` and
    /// `delivery.timeout.ms`, splits a batch refused MESSAGE_TOO_LARGE,
    /// and reports any other failed (`ErrorKind::Broker`).
    Fail(BrokerError),
    /// No answer: the request times out (as when `request.timeout.ms`
    /// passes with no response), now. The producer counts the attempt and
    /// retries it, or reports `ErrorKind::Timeout` once `retries` or
    /// `delivery.timeout.ms` are used up.
    TimeOut,
    /// Not answered until the test releases it
    /// (`MockBroker::complete_next`, `error_next`, `release_next`,
    /// `release_all`). Meanwhile the record is in flight, as if the broker
    /// were slow: `flush` and `close` wait for it, `close_timeout` and
    /// dropping the producer report it `Cancelled` ("may or may not have
    /// been written"), and after `request.timeout.ms` its request times
    /// out and is retried.
    Hold,
    /// Written (the next offset of its partition, as `Deliver`), but the
    /// answer is lost: the request times out, as when a connection drops
    /// after the broker wrote the batch and before its response arrived.
    /// The producer retries it: an idempotent producer's retry is a
    /// duplicate the broker recognises (`Answer::Duplicate`), any other's
    /// is written again.
    LoseAnswer,
}

/// What became of one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Held (`Verdict::Hold`): not answered yet.
    Held,
    /// Written at this offset of its partition (whether or not the
    /// producer heard so: `Verdict::LoseAnswer`).
    Written {
        /// Its offset.
        offset: i64,
    },
    /// An idempotent producer's retry of a batch already written (its
    /// earlier answer lost): not written again, answered with the offset
    /// it holds.
    Duplicate {
        /// The offset it was written at.
        offset: i64,
    },
    /// Refused with this error code.
    Refused(BrokerError),
    /// Never answered: its request timed out (scripted, or a held record
    /// past `request.timeout.ms`), or the producer gave up on it (closed
    /// or dropped while it was held).
    NoAnswer,
}

/// One record as it reached the broker: one entry per attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The record as the producer wrote it into its batch, read back from
    /// the batch's bytes: its topic, its partition (`Some`, as chosen by
    /// the producer's partitioner), key, value, headers and create time
    /// (`Some`).
    pub record: Record,
    /// The producer's attempt: 1 for the first request that carried it.
    pub attempt: u32,
    /// What the broker answered (updated when a held record is released).
    pub answer: Answer,
    /// The idempotent producer's stamp on it; `None` without idempotence.
    pub stamp: Option<Stamp>,
    /// A transactional producer's record, once written: whether its
    /// transaction is open, committed or aborted (what a read_committed
    /// reader sees); `None` for any other.
    pub txn: Option<TxnState>,
}

/// An idempotent producer's stamp on one record, as its batch carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The producer id the broker handed out.
    pub producer_id: i64,
    /// Its epoch (0 at first; each bump adds one).
    pub epoch: i16,
    /// The record's sequence in its partition.
    pub sequence: i32,
}

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

impl scripted_txn::Broker for Rest<'_> {
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

/// A held record: one batch of one record, in flight.
#[derive(Debug)]
struct Held {
    engine: Weak<Engine>,
    batch: SealedBatch,
    arrivals: Range<usize>,
    sent_at: Instant,
}

#[derive(Default)]
struct State {
    /// Topic name → partitions.
    topics: BTreeMap<Topic, i32>,
    /// Partitions of a topic created on first use; `None`: no auto-creation.
    auto_create: Option<i32>,
    rules: Vec<Rule>,
    default: Option<Verdict>,
    next_offset: HashMap<(Topic, i32), i64>,
    history: Vec<Arrival>,
    held: VecDeque<Held>,
    engines: Vec<Weak<Engine>>,
    /// Producer ids handed out so far.
    producer_ids: i64,
    /// Idempotent producers' state, by producer id and partition.
    producers: HashMap<(i64, Topic, i32), ProducerEntry>,
    /// The transaction coordinator (`actors/scripted_txn.rs`).
    txn: TxnCoordinator,
    /// Producers and partitions whose state the broker forgot
    /// (`forget_producers`): their next batch is taken whatever its
    /// sequence, as Kafka takes one from a producer it has no state for.
    forgotten: HashSet<(i64, Topic, i32)>,
}

/// The script and the broker's state, shared by the test's `MockBroker`
/// and every producer built from it.
pub(crate) struct Script {
    state: Mutex<State>,
    /// Topics were added or grew: topic waits look again.
    topics_changed: Notify,
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
            Self::publish(&st);
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
        lock(&self.state).held.len()
    }

    /// Scripts `codes` for the next coordinator requests, one each.
    pub(crate) fn script_coordinator(&self, codes: impl IntoIterator<Item = i16>) {
        lock(&self.state).txn.faults.extend(codes);
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
        Self::publish(&st);
    }

    /// Every attached producer's metadata: every topic, all led by
    /// `BROKER_ID`. Each producer keeps its own sticky partitions.
    fn publish(st: &State) {
        for e in st.engines.iter().filter_map(Weak::upgrade) {
            let previous = e.metadata.load();
            let mut snapshot = MetadataSnapshot {
                brokers: HashMap::from([(BROKER_ID, "courier-mock-broker:0".to_string())]),
                fetched_at: Some(Instant::now()),
                ..MetadataSnapshot::default()
            };
            for (topic, n) in &st.topics {
                snapshot.topics.insert(
                    *topic,
                    Arc::new(TopicMetadata {
                        partition_count: *n,
                        leaders: vec![BROKER_ID; *n as usize],
                        available: (0..*n).collect(),
                        leader_epochs: Vec::new(),
                        topic_id: 0,
                        sticky: previous
                            .topics
                            .get(topic)
                            .map(|t| t.sticky.clone())
                            .unwrap_or_default(),
                        cache: previous
                            .topics
                            .get(topic)
                            .filter(|t| t.partition_count == *n)
                            .map(|t| t.cache.clone())
                            .unwrap_or_default(),
                    }),
                );
            }
            e.metadata.store(Arc::new(snapshot));
        }
    }

    /// Whether `topic` exists now, creating it if the script and the
    /// producer (`allow.auto.create.topics`) allow.
    fn known_or_created(&self, topic: Topic, may_create: bool) -> bool {
        let partitions = {
            let st = lock(&self.state);
            if st.topics.contains_key(&topic) {
                return true;
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

    /// InitProducerId: a new id (`None`), or the next epoch of `bumped`
    /// (a new id once the epoch is used up, as Kafka's coordinator does).
    fn grant(&self, bumped: Option<(i64, i16)>) -> (i64, i16) {
        let mut st = lock(&self.state);
        match bumped {
            Some((id, epoch)) if epoch < i16::MAX - 1 => (id, epoch + 1),
            _ => (fresh_producer_id(&mut st.producer_ids), 0),
        }
    }

    /// Answers a coordinator request as the double's transaction
    /// coordinator (`actors/scripted_txn.rs`): `build` makes it for
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
            st.txn
                .admit(t, s.producer_id, b.topic, b.partition)
                .map_err(BrokerError::from)?;
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
    fn apply(
        &self,
        engine: &Arc<Engine>,
        mut b: SealedBatch,
        arrivals: Range<usize>,
        verdict: Verdict,
        now: Instant,
    ) {
        let acks0 = engine.config.acks.wire() == 0;
        let mut st = lock(&self.state);
        let answer = match verdict {
            Verdict::Deliver | Verdict::LoseAnswer => {
                let transactional_id = engine.txn.as_ref().map(|t| t.id.as_str());
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
                                "refused by courier::testing::MockBroker's sequence check",
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
                    "scripted by courier::testing::MockBroker",
                ))
            }
            Verdict::TimeOut => {
                for a in arrivals.clone() {
                    st.history[a].answer = Answer::NoAnswer;
                }
                None
            }
            Verdict::Hold if !acks0 => {
                st.held.push_back(Held {
                    engine: Arc::downgrade(engine),
                    batch: b,
                    arrivals,
                    sent_at: now,
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
        if acks0 {
            // No response comes with acks=0: "sent, offset unknown",
            // whatever the broker did with it.
            let q = engine.acc.queue(&b.topic, b.partition);
            lock(&q.state).land(&mut b);
            engine.settle(
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
    fn arrive(&self, engine: &Arc<Engine>, mut b: SealedBatch, now: Instant) {
        b.attempts += 1;
        b.owed.sent = true;
        let max_size = engine.config.batch_size.max(engine.config.max_request_size) * 2;
        let records = match decode_records(b.encoded.bytes(), max_size) {
            Ok(r) if r.len() == b.record_count as usize => r,
            other => {
                // Our own batches always read back; say so loudly if not.
                let why = match other {
                    Ok(r) => format!("{} records read back, {} written", r.len(), b.record_count),
                    Err(e) => e.to_string(),
                };
                tracing::error!(%why, "the scripted broker could not read a batch back");
                let q = engine.acc.queue(&b.topic, b.partition);
                lock(&q.state).land(&mut b);
                engine.settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Broker(ResponseError::CorruptMessage.into()),
                        message: why,
                    },
                );
                return;
            }
        };
        let stamp = b.encoded.stamp();
        let (start, verdicts, duplicate) = {
            let mut st = lock(&self.state);
            let start = st.history.len();
            // A retry of a batch written already is answered as one,
            // whatever the script says: the broker recognises it before
            // anything else.
            let duplicate = Self::duplicate_of(&st, &b);
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
        };
        if let Some(base) = duplicate {
            engine.answer(b, BROKER_ID, &BatchAnswer::written(base), now);
            return;
        }
        let first = verdicts[0];
        let alike = verdicts.iter().all(|v| *v == first);
        if b.record_count == 1 || (alike && first != Verdict::Hold) {
            let end = start + verdicts.len();
            return self.apply(engine, b, start..end, first, now);
        }
        let q = engine.acc.queue(&b.topic, b.partition);
        lock(&q.state).land(&mut b);
        match engine.acc.split(b) {
            Ok(parts) => {
                for (i, (mut p, v)) in parts.into_iter().zip(verdicts).enumerate() {
                    lock(&q.state).take_off(&mut p);
                    self.apply(engine, p, start + i..start + i + 1, v, now);
                }
            }
            Err((b, why)) => {
                tracing::error!(%why, "the scripted broker could not split a batch");
                let end = start + verdicts.len();
                engine.settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Broker(ResponseError::CorruptMessage.into()),
                        message: why,
                    },
                );
                let mut st = lock(&self.state);
                for a in start..end {
                    st.history[a].answer = Answer::NoAnswer;
                }
            }
        }
    }

    /// How many of `engine`'s requests are held.
    fn held_by(&self, engine: &Arc<Engine>) -> usize {
        let target = Arc::downgrade(engine);
        lock(&self.state)
            .held
            .iter()
            .filter(|h| h.engine.ptr_eq(&target))
            .count()
    }

    /// Takes the oldest `n` held records out.
    /// Takes out the `n` oldest held records, or the `n` newest (newest
    /// first).
    fn take_held(&self, n: usize, newest_first: bool) -> Vec<Held> {
        let mut st = lock(&self.state);
        let len = st.held.len();
        let n = n.min(len);
        if newest_first {
            st.held.drain(len - n..).rev().collect()
        } else {
            st.held.drain(..n).collect()
        }
    }

    /// Takes out the held records of `engine` that match `which`.
    fn take_held_of(&self, engine: &Arc<Engine>, which: impl Fn(&Held) -> bool) -> Vec<Held> {
        let mut st = lock(&self.state);
        let target = Arc::downgrade(engine);
        let (mine, rest): (VecDeque<Held>, VecDeque<Held>) = std::mem::take(&mut st.held)
            .into_iter()
            .partition(|h| h.engine.ptr_eq(&target) && which(h));
        st.held = rest;
        mine.into_iter().collect()
    }

    /// Answers the oldest `n` held records with `verdict` (`Hold` holds
    /// them again, at the back); returns how many there were.
    pub(crate) fn release(&self, n: usize, verdict: Verdict, newest_first: bool) -> usize {
        let held = self.take_held(n, newest_first);
        let count = held.len();
        let now = Instant::now();
        for h in held {
            match h.engine.upgrade() {
                Some(engine) => {
                    self.apply(&engine, h.batch, h.arrivals, verdict, now);
                    // A retried batch, or a split's parts, wait in their
                    // queue: drain again.
                    engine.wake_all();
                }
                // The producer is gone: dropping the batch pays its
                // reports Cancelled (`SealedBatch`'s drop, each record
                // read back from the batch).
                None => drop(h),
            }
        }
        count
    }
}

/// The scripted broker of one producer: drains its queues and answers by
/// the script. Stands where the connection actors and the partitioner
/// actor stand in a real producer.
pub(crate) struct ScriptedBroker {
    engine: Arc<Engine>,
    script: Arc<Script>,
    tree: Arc<ScriptedTree>,
    wake_at: Option<(Instant, SpawnHandle)>,
    stopping: bool,
}

impl std::fmt::Debug for ScriptedBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedBroker").finish_non_exhaustive()
    }
}

impl ScriptedBroker {
    pub(crate) fn new(engine: Arc<Engine>, tree: Arc<ScriptedTree>) -> ScriptedBroker {
        ScriptedBroker {
            engine,
            script: tree.script.clone(),
            tree,
            wake_at: None,
            stopping: false,
        }
    }

    /// Takes every sendable batch (as `BrokerConnection::drain`: the front
    /// ready batch once its retry backoff is over, the open batch once it
    /// is full, its linger has passed, or a flush or close is under way)
    /// and answers it; held requests past `request.timeout.ms` time out.
    fn drain(&mut self, ctx: &mut Context<Self>) {
        if self.stopping {
            return;
        }
        let engine = self.engine.clone();
        let now = Instant::now();
        let timeout = engine.config.request_timeout;
        for h in self
            .script
            .take_held_of(&engine, |h| now.duration_since(h.sent_at) >= timeout)
        {
            self.script
                .apply(&engine, h.batch, h.arrivals, Verdict::TimeOut, now);
        }
        // The idempotent producer sends nothing until it has an id, and
        // nothing while an epoch bump is due; the bump waits until none of
        // its requests is held. A transactional producer's id comes from
        // the coordinator, through the supervisor and the transaction
        // actor (which wake this actor when it is there).
        let idem = match &engine.idem {
            None => None,
            Some(i) => match i.ready() {
                Some(id) => Some(id),
                None if engine.txn.is_some() => return,
                None => match i.begin_fetch(self.script.held_by(&engine), now) {
                    Fetch::Start(bumped) => {
                        i.fetched(Ok(self.script.grant(bumped)), now);
                        i.ready()
                    }
                    Fetch::After(at) => {
                        self.schedule_wake(at, ctx);
                        return;
                    }
                    // Woken again when a held request is answered or times
                    // out (the supervisor's tick).
                    Fetch::Nothing => return,
                },
            },
        };
        // Idempotent: one batch in flight per partition until the broker
        // has acknowledged one of this epoch, then up to max.in.flight.
        let max_in_flight = engine.config.max_in_flight;
        let waits = |qi: &QueueState| match idem {
            None => false,
            Some(id) => qi.in_flight >= max_in_flight || qi.awaits_confirmation(id),
        };
        let flushing = engine.flushing.load(Ordering::Acquire) > 0
            || engine.starved.load(Ordering::Acquire) > 0
            || engine.closed.load(Ordering::Acquire);
        let linger = engine.config.linger;
        // Transactional: nothing is sent outside a transaction (or once
        // fenced), and only partitions the coordinator has added to the
        // current one; the others are asked for, as `drain` does.
        let txn_generation = match &engine.txn {
            None => None,
            Some(t) => match t.sendable() {
                Some(g) => Some(g),
                None => return,
            },
        };
        let mut wanted = Vec::new();
        // Take everything sendable first, then answer it: a batch put back
        // for a retry waits for a later pass (after its backoff).
        let mut taken = Vec::new();
        for q in engine.acc.all_queues() {
            let mut qi = lock(&q.state);
            if txn_generation.is_some_and(|g| qi.txn_added != g) {
                if !qi.ready.is_empty() || qi.open.is_some() {
                    wanted.push((q.topic, q.partition));
                }
                continue;
            }
            loop {
                if waits(&qi) {
                    break;
                }
                let mut b = if let Some(front) = qi.ready.front() {
                    if front.retry_at.is_some_and(|at| at > now) {
                        break;
                    }
                    qi.ready.pop_front().expect("checked")
                } else if let Some(open) = &qi.open {
                    if open.created + linger > now && !flushing && !open.full {
                        break;
                    }
                    let open = qi.open.take().expect("checked");
                    match engine.acc.seal(open, &q) {
                        Ok(b) => b,
                        Err(f) => {
                            drop(qi);
                            let reason = f.reason.clone();
                            engine.acc.fail_unsent(
                                Err(f),
                                ErrorKind::Compression,
                                |_| reason,
                                &engine.stats,
                            );
                            qi = lock(&q.state);
                            continue;
                        }
                    }
                } else {
                    break;
                };
                if let Some(id) = idem {
                    engine
                        .acc
                        .stamp(&mut qi, &mut b, id, txn_generation.is_some());
                }
                qi.take_off(&mut b);
                taken.push(b);
            }
        }
        if let (Some(t), false) = (&engine.txn, wanted.is_empty()) {
            if t.want(wanted) {
                if let Some(to) = lock(&self.tree.add_partitions).as_ref() {
                    to.do_send(AddPartitionsWanted);
                }
            }
        }
        for b in taken {
            self.script.arrive(&engine, b, now);
        }
        // When to look again: a retry's backoff, a lingering batch.
        let now = Instant::now();
        let mut next_wake: Option<Instant> = None;
        for q in engine.acc.all_queues() {
            let qi = lock(&q.state);
            // Woken when its request is answered, or when the partition
            // has joined the transaction.
            if waits(&qi) || txn_generation.is_some_and(|g| qi.txn_added != g) {
                continue;
            }
            let at = match (qi.ready.front(), &qi.open) {
                (Some(front), _) => front.retry_at.unwrap_or(now),
                (None, Some(open)) if open.full || flushing => now,
                (None, Some(open)) => open.created + linger,
                (None, None) => continue,
            };
            next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
        }
        match next_wake {
            Some(at) if at <= now => ctx.notify(Wake),
            Some(at) => self.schedule_wake(at, ctx),
            None => {}
        }
    }

    fn schedule_wake(&mut self, at: Instant, ctx: &mut Context<Self>) {
        if let Some((existing, _)) = self.wake_at {
            if existing <= at {
                return;
            }
        }
        if let Some((_, h)) = self.wake_at.take() {
            ctx.cancel_future(h);
        }
        let delay = at.saturating_duration_since(Instant::now());
        let h = ctx.run_later(delay, |act, ctx| {
            act.wake_at = None;
            act.drain(ctx);
        });
        self.wake_at = Some((at, h));
    }

    /// The producer is stopping: topic waits end, nothing more is drained.
    fn stop(&mut self, ctx: &mut Context<Self>) {
        self.stopping = true;
        self.tree.closed.store(true, Ordering::Release);
        self.script.topics_changed.notify_waiters();
        ctx.stop();
    }
}

impl Actor for ScriptedBroker {
    type Context = Context<Self>;

    /// A restarted broker (its predecessor panicked) finds the queues and
    /// the held requests where they were: drain them.
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.notify(Wake);
    }
}

/// Makes the scripted broker panic inside a handler (tests of its
/// supervision: `Producer::inject_partitioner_panic` under the double).
#[cfg(feature = "fault-injection")]
impl Handler<crate::actors::msgs::InjectPanic> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: crate::actors::msgs::InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in the scripted broker");
    }
}

impl Handler<Wake> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.drain(ctx);
    }
}

/// `close` after its flush (or a close that gave up): held records go
/// back to their queues, not counted as an attempt (as a retiring
/// connection actor's), where the supervisor's shutdown cancels them.
impl Handler<Retire> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let engine = self.engine.clone();
        for h in self.script.take_held_of(&engine, |_| true) {
            self.script.mark(h.arrivals, Answer::NoAnswer);
            engine.retry_or_fail(
                h.batch,
                now,
                ErrorKind::Timeout,
                "connection retired",
                false,
            );
        }
        self.stop(ctx);
    }
}

/// `close_timeout` ran out, or the last handle was dropped: held records
/// fail `Cancelled`, as a connection actor's in-flight batches do.
impl Handler<CancelInFlight> for ScriptedBroker {
    type Result = ();
    fn handle(&mut self, _: CancelInFlight, ctx: &mut Context<Self>) {
        self.script.cancel_held(&self.engine);
        self.stop(ctx);
    }
}

impl Script {
    /// Fails `engine`'s held requests `Cancelled`, as a connection actor's
    /// in-flight batches are when `close_timeout` runs out or the last
    /// handle is dropped.
    fn cancel_held(&self, engine: &Arc<Engine>) {
        for mut h in self.take_held_of(engine, |_| true) {
            self.mark(h.arrivals, Answer::NoAnswer);
            let q = engine.acc.queue(&h.batch.topic, h.batch.partition);
            lock(&q.state).land(&mut h.batch);
            engine.settle(
                h.batch,
                Outcome::Failed {
                    kind: ErrorKind::Cancelled,
                    message: "producer closed or dropped before the broker answered; the record may or may not have been written".into(),
                },
            );
        }
    }

    fn mark(&self, arrivals: Range<usize>, answer: Answer) {
        let mut st = lock(&self.state);
        for a in arrivals {
            st.history[a].answer = answer;
        }
    }
}

/// The actor tree as the engine of a scripted producer sees it
/// (`engine::ActorTree`, which `actors::addresses::Addresses` implements
/// for a real one): wakes go to its `ScriptedBroker`, topic waits to the
/// script.
#[derive(Debug)]
pub(crate) struct ScriptedTree {
    script: Arc<Script>,
    /// The broker actor, once started (again, when one died).
    broker: Mutex<Option<Addr<ScriptedBroker>>>,
    /// Set once the engine exists (weak: the engine holds this tree).
    engine: OnceLock<Weak<Engine>>,
    /// The producer is stopping: topic waits answer `None`.
    closed: AtomicBool,
    /// A transactional producer's transaction actor, which the drain asks
    /// to add partitions to the open transaction (as a connection actor's
    /// `Upstream::add_partitions`).
    add_partitions: Mutex<Option<Recipient<AddPartitionsWanted>>>,
}

impl ScriptedTree {
    pub(crate) fn new(script: Arc<Script>) -> ScriptedTree {
        ScriptedTree {
            script,
            broker: Mutex::new(None),
            engine: OnceLock::new(),
            closed: AtomicBool::new(false),
            add_partitions: Mutex::new(None),
        }
    }

    /// The script, whose coordinator a transactional producer's
    /// transaction actor asks (`Script::ask`).
    pub(crate) fn script(&self) -> Arc<Script> {
        self.script.clone()
    }

    /// Where the drain asks for partitions to join the open transaction.
    pub(crate) fn set_add_partitions(&self, to: Recipient<AddPartitionsWanted>) {
        *lock(&self.add_partitions) = Some(to);
    }

    /// Requests of `engine` the double holds (in flight).
    pub(crate) fn in_flight(&self, engine: &Arc<Engine>) -> usize {
        self.script.held_by(engine)
    }

    /// The engine built on this tree: it gets the script's metadata.
    pub(crate) fn attach(&self, engine: &Arc<Engine>) {
        let _ = self.engine.set(Arc::downgrade(engine));
        self.script.attach(engine);
    }

    /// Starts the broker actor (in the current actix system).
    pub(crate) fn start_broker(self: &Arc<Self>, engine: Arc<Engine>) -> Addr<ScriptedBroker> {
        let addr = ScriptedBroker::new(engine, self.clone()).start();
        *lock(&self.broker) = Some(addr.clone());
        addr
    }

    /// The broker actor, started again if it died (a panic: actix does
    /// not catch it). What it worked on lives outside it (the queues, the
    /// script's held requests), so its successor carries on. Returns the
    /// address and whether it was restarted.
    pub(crate) fn live_broker(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
    ) -> (Addr<ScriptedBroker>, bool) {
        if let Some(addr) = lock(&self.broker).clone().filter(Addr::connected) {
            return (addr, false);
        }
        (self.start_broker(engine.clone()), true)
    }

    /// The producer is stopping and its broker actor died before it could
    /// report what it held (a panic racing the shutdown: the `Retire` or
    /// `CancelInFlight` sent to it died with its mailbox): the held
    /// requests fail `Cancelled` here instead, so that no report waits
    /// for a broker actor that will never answer.
    pub(crate) fn cancel_if_dead(&self, engine: &Arc<Engine>) {
        if lock(&self.broker).as_ref().is_some_and(Addr::connected) {
            return;
        }
        self.script.cancel_held(engine);
        self.closed.store(true, Ordering::Release);
        self.script.topics_changed.notify_waiters();
    }

    fn may_create(&self) -> bool {
        self.engine
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|e| e.config.allow_auto_create_topics)
    }
}

impl ActorTree for ScriptedTree {
    fn wake(&self, _broker: i32) {
        self.wake_all();
    }

    fn wake_all(&self) {
        if let Some(b) = lock(&self.broker).as_ref() {
            b.do_send(Wake);
        }
    }

    fn request_topic(&self, topic: Topic) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.script.known_or_created(topic, self.may_create());
        true
    }

    fn ensure_topic(
        &self,
        topic: Topic,
    ) -> BoxFuture<'static, Option<Result<(), (ErrorKind, String)>>> {
        let script = self.script.clone();
        let may_create = self.may_create();
        let engine = self.engine.get().and_then(Weak::upgrade);
        let closed = self.closed.load(Ordering::Acquire);
        // The future cannot borrow `self`: it watches the flag through the
        // script's notifications and the engine's own closed flag.
        Box::pin(async move {
            let engine = engine?;
            if closed {
                return None;
            }
            let deadline = Instant::now() + engine.config.max_block;
            loop {
                let changed = script.topics_changed.notified();
                if engine.stopped_flag.load(Ordering::Acquire)
                    || engine.shutdown_sent.load(Ordering::Acquire)
                {
                    return None;
                }
                if script.known_or_created(topic, may_create) {
                    return Some(Ok(()));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || engine.timeout(left, changed).await.is_err() {
                    return Some(Err((
                        ErrorKind::UnknownTopic,
                        format!(
                            "the mock broker has no topic {:?} (allow.auto.create.topics is {}; MockBroker::topic creates it)",
                            topic.as_str(),
                            engine.config.allow_auto_create_topics,
                        ),
                    )));
                }
            }
        })
    }
}
