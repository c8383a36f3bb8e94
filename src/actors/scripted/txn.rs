//! The testing double's transaction coordinator: what
//! `courier_kafka::testing::MockBroker` answers a transactional producer's
//! coordinator requests with (FindCoordinator, InitProducerId,
//! AddPartitionsToTxn, EndTxn, AddOffsetsToTxn, TxnOffsetCommit).
//!
//! The transaction actor's requests reach it as they would reach a broker:
//! built for a version, encoded, decoded here as the request that version
//! defines, answered with the response encoded and decoded again on the
//! actor's side (`Script::ask`). So the transaction actor's whole exchange
//! code runs, bytes included, with no socket.
//!
//! What it keeps, per transactional id, is what a Kafka coordinator keeps:
//! the producer id and epoch, the open transaction's partitions, and how
//! the last transaction ended. InitProducerId hands out an id (epoch 0),
//! or, for an id it knows, bumps the epoch, which fences the older
//! producer and aborts the transaction it left open; a request carrying an
//! older epoch is PRODUCER_FENCED, an unknown producer id
//! INVALID_PRODUCER_ID_MAPPING. EndTxn ends the open transaction: every
//! record written in it becomes committed or aborted (`TxnState`), as
//! Kafka's markers make them for a read_committed reader; a retried EndTxn
//! for a transaction that ended the same way is answered as done, one that
//! asks the other outcome is INVALID_TXN_STATE. A transactional batch for
//! a partition not added to the open transaction is refused
//! INVALID_TXN_STATE (Kafka's verification, KIP-890), which the producer
//! should never meet. A test may script errors for the next coordinator
//! requests (`MockBroker::script_coordinator`): each answers one request
//! in place of its result, changing nothing, as a coordinator that is
//! loading, moving or busy does.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, BrokerId, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, ProducerId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::clock::Instant;
use crate::kafka_error::ResponseError;
use crate::protocol::ApiKey;
use crate::record::Topic;

/// Where a transactional record stands, as a read_committed reader sees
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxnState {
    /// Written in a transaction that has not ended: a read_committed
    /// reader does not see it yet.
    Open,
    /// Its transaction committed: a read_committed reader sees it.
    Committed,
    /// Its transaction aborted: no read_committed reader ever sees it.
    Aborted,
}

/// One transactional id at the coordinator.
#[derive(Debug)]
struct Entry {
    producer_id: i64,
    epoch: i16,
    /// The open transaction's partitions (`None`: no transaction open).
    open: Option<BTreeSet<(Topic, i32)>>,
    /// How the last transaction ended (`true`: committed).
    last_end: Option<bool>,
    /// The producer's `transaction.timeout.ms` (its InitProducerId's).
    timeout: Duration,
    /// When the open transaction began at the coordinator (its first
    /// partition added), as Kafka's `txnStartTimestamp`.
    started: Option<Instant>,
}

/// The coordinator's state (inside the script's lock).
#[derive(Debug, Default)]
pub(crate) struct TxnCoordinator {
    /// Error codes the test scripted for the next requests, one each
    /// (`MockBroker::script_coordinator`).
    pub(crate) faults: VecDeque<i16>,
    /// Error codes the test scripted for the next requests of one kind
    /// (`MockBroker::script_request`), taken before `faults`.
    pub(crate) faults_for: HashMap<ApiKey, VecDeque<i16>>,
    ids: HashMap<String, Entry>,
    /// History indexes of records written in each producer id's open
    /// transaction.
    open_arrivals: HashMap<i64, Vec<usize>>,
}

/// What the coordinator needs of the rest of the double: fresh producer
/// ids, and the history's records to mark when a transaction ends.
pub(crate) trait Broker {
    /// The broker's id, which FindCoordinator names.
    fn node_id(&self) -> i32;
    fn fresh_producer_id(&mut self) -> i64;
    fn mark(&mut self, arrival: usize, state: TxnState);
}

impl TxnCoordinator {
    /// Answers one request (`api` at `version`, `request` its encoded
    /// body) with its encoded response.
    pub(crate) fn answer(
        &mut self,
        broker: &mut impl Broker,
        api: ApiKey,
        version: i16,
        mut request: Bytes,
    ) -> Result<Bytes, String> {
        let r = &mut request;
        // Transactions open longer than their timeout are aborted first,
        // as Kafka's coordinator aborts them on its own.
        self.expire(broker, Instant::now(), false);
        // A scripted error answers the request instead, changing nothing.
        let own = self.faults_for.get_mut(&api).and_then(VecDeque::pop_front);
        let general = own.is_none();
        let fault = own.or_else(|| self.faults.pop_front());
        match api {
            ApiKey::FindCoordinator => self.find_coordinator(broker, r, version, fault),
            ApiKey::InitProducerId => self.init_producer_id(broker, r, version, fault),
            ApiKey::AddPartitionsToTxn if version <= 3 => {
                self.add_partitions_to_txn(r, version, fault)
            }
            ApiKey::EndTxn => self.end_txn(broker, r, version, fault),
            ApiKey::AddOffsetsToTxn => self.add_offsets_to_txn(r, version, fault),
            ApiKey::TxnOffsetCommit => self.txn_offset_commit(r, version, fault),
            // Not a coordinator request: a scripted error waits for one.
            api => {
                match fault {
                    Some(f) if general => self.faults.push_front(f),
                    Some(f) => self.faults_for.entry(api).or_default().push_front(f),
                    None => {}
                }
                Err(format!(
                    "courier_kafka::testing::MockBroker does not answer {api:?} (version {version})"
                ))
            }
        }
    }

    /// FindCoordinator: this broker coordinates every key.
    fn find_coordinator(
        &mut self,
        broker: &mut impl Broker,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<FindCoordinatorRequest>(r, version)?;
        let node = BrokerId(broker.node_id());
        let code = fault.unwrap_or(0);
        let c = |key: StrBytes| {
            Coordinator::default()
                .with_key(key)
                .with_node_id(node)
                .with_host(StrBytes::from_static_str("courier-mock-broker"))
                .with_port(0)
                .with_error_code(code)
        };
        let resp = if version >= 4 {
            FindCoordinatorResponse::default()
                .with_coordinators(q.coordinator_keys.into_iter().map(c).collect())
        } else {
            FindCoordinatorResponse::default()
                .with_node_id(node)
                .with_host(StrBytes::from_static_str("courier-mock-broker"))
                .with_error_code(code)
        };
        encode(&resp, version)
    }

    /// InitProducerId: a fresh id for an idempotent producer; for a
    /// transactional one, `init`'s fencing and epochs.
    fn init_producer_id(
        &mut self,
        broker: &mut impl Broker,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<InitProducerIdRequest>(r, version)?;
        let resp = match q.transactional_id {
            _ if fault.is_some() => InitProducerIdResponse::default()
                .with_error_code(fault.unwrap_or_default())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            None => {
                let id = broker.fresh_producer_id();
                InitProducerIdResponse::default().with_producer_id(ProducerId(id))
            }
            Some(t) => match self.init(
                broker,
                t.0.as_str(),
                (q.producer_id.0, q.producer_epoch),
                q.transaction_timeout_ms,
            ) {
                Ok((id, epoch)) => InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch),
                Err(e) => InitProducerIdResponse::default()
                    .with_error_code(e.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            },
        };
        encode(&resp, version)
    }

    /// AddPartitionsToTxn (v3 and below, a client's form): the partitions
    /// join the open transaction.
    fn add_partitions_to_txn(
        &mut self,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<AddPartitionsToTxnRequest>(r, version)?;
        let checked = self.check(
            q.v3_and_below_transactional_id.0.as_str(),
            q.v3_and_below_producer_id.0,
            q.v3_and_below_producer_epoch,
        );
        let code = fault.unwrap_or(checked.err().map_or(0, |e| e.code()));
        let mut results = Vec::new();
        for t in &q.v3_and_below_topics {
            let topic = Topic::from(t.name.0.as_str());
            if code == 0 {
                let e = self
                    .ids
                    .get_mut(q.v3_and_below_transactional_id.0.as_str())
                    .expect("checked");
                if e.open.is_none() {
                    e.started = Some(Instant::now());
                }
                let open = e.open.get_or_insert_with(BTreeSet::new);
                open.extend(t.partitions.iter().map(|p| (topic, *p)));
            }
            results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(
                        t.partitions
                            .iter()
                            .map(|p| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(code)
                            })
                            .collect(),
                    ),
            );
        }
        encode(
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
            version,
        )
    }

    /// EndTxn: commits or aborts the open transaction (`end`).
    fn end_txn(
        &mut self,
        broker: &mut impl Broker,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<EndTxnRequest>(r, version)?;
        let code = match fault {
            Some(code) => Err(code),
            None => Ok(()),
        }
        .and_then(|()| {
            self.end(
                broker,
                q.transactional_id.0.as_str(),
                q.producer_id.0,
                q.producer_epoch,
                q.committed,
            )
            .map_err(|e| e.code())
        });
        let code = code.err().unwrap_or(0);
        encode(&EndTxnResponse::default().with_error_code(code), version)
    }

    /// AddOffsetsToTxn: checks the producer, as the coordinator does.
    fn add_offsets_to_txn(
        &mut self,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<AddOffsetsToTxnRequest>(r, version)?;
        let checked = self.check(
            q.transactional_id.0.as_str(),
            q.producer_id.0,
            q.producer_epoch,
        );
        let code = fault.unwrap_or(checked.err().map_or(0, |e| e.code()));
        encode(
            &AddOffsetsToTxnResponse::default().with_error_code(code),
            version,
        )
    }

    /// TxnOffsetCommit: checks the producer, and answers each partition.
    fn txn_offset_commit(
        &mut self,
        r: &mut Bytes,
        version: i16,
        fault: Option<i16>,
    ) -> Result<Bytes, String> {
        let q = decode::<TxnOffsetCommitRequest>(r, version)?;
        let checked = self.check(
            q.transactional_id.0.as_str(),
            q.producer_id.0,
            q.producer_epoch,
        );
        let code = fault.unwrap_or(checked.err().map_or(0, |e| e.code()));
        let topics = q
            .topics
            .iter()
            .map(|t| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        encode(
            &TxnOffsetCommitResponse::default().with_topics(topics),
            version,
        )
    }

    /// InitProducerId for transactional id `t`: a new id, or the next
    /// epoch of the one it has (`producer_id` and `epoch` -1: a new
    /// instance, which fences the older; else a bump by the instance that
    /// holds them). Either way the open transaction is aborted.
    fn init(
        &mut self,
        broker: &mut impl Broker,
        t: &str,
        (producer_id, epoch): (i64, i16),
        timeout_ms: i32,
    ) -> Result<(i64, i16), ResponseError> {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let Some(e) = self.ids.get_mut(t) else {
            let id = broker.fresh_producer_id();
            self.ids.insert(
                t.to_string(),
                Entry {
                    producer_id: id,
                    epoch: 0,
                    open: None,
                    last_end: None,
                    timeout,
                    started: None,
                },
            );
            return Ok((id, 0));
        };
        e.timeout = timeout;
        if producer_id >= 0 && (producer_id, epoch) != (e.producer_id, e.epoch) {
            return Err(if producer_id == e.producer_id && epoch < e.epoch {
                ResponseError::ProducerFenced
            } else {
                ResponseError::InvalidProducerEpoch
            });
        }
        if e.open.is_some() {
            self.finish(broker, t, false);
        }
        let e = self.ids.get_mut(t).expect("known");
        if e.epoch >= i16::MAX - 1 {
            e.producer_id = broker.fresh_producer_id();
            e.epoch = 0;
        } else {
            e.epoch += 1;
        }
        Ok((e.producer_id, e.epoch))
    }

    /// Whether `producer_id` at `epoch` holds transactional id `t`.
    fn check(&self, t: &str, producer_id: i64, epoch: i16) -> Result<(), ResponseError> {
        match self.ids.get(t) {
            Some(e) if e.producer_id != producer_id => Err(ResponseError::InvalidProducerIdMapping),
            Some(e) if epoch < e.epoch => Err(ResponseError::ProducerFenced),
            Some(e) if epoch > e.epoch => Err(ResponseError::InvalidProducerEpoch),
            Some(_) => Ok(()),
            None => Err(ResponseError::InvalidProducerIdMapping),
        }
    }

    /// EndTxn: ends the open transaction, or answers a retried EndTxn.
    fn end(
        &mut self,
        broker: &mut impl Broker,
        t: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ResponseError> {
        self.check(t, producer_id, epoch)?;
        let e = self.ids.get(t).expect("checked");
        if e.open.is_none() {
            // A retry of an EndTxn that was done, or an end with nothing
            // added (the producer sends none then).
            return match e.last_end {
                Some(c) if c == commit => Ok(()),
                _ => Err(ResponseError::InvalidTxnState),
            };
        }
        self.finish(broker, t, commit);
        Ok(())
    }

    /// Aborts every open transaction begun longer than its producer's
    /// `transaction.timeout.ms` ago (`all`: every open one, whatever its
    /// age: `MockBroker::expire_transactions`), as Kafka's coordinator
    /// does: the abort bumps the epoch, so that the producer that left it
    /// is fenced (its next EndTxn or AddPartitionsToTxn is answered
    /// PRODUCER_FENCED, its next batch INVALID_PRODUCER_EPOCH). Returns
    /// how many it aborted.
    pub(crate) fn expire(&mut self, broker: &mut impl Broker, now: Instant, all: bool) -> usize {
        let due: Vec<String> = self
            .ids
            .iter()
            .filter(|(_, e)| {
                e.open.is_some()
                    && (all
                        || e.started
                            .is_some_and(|s| now.duration_since(s) >= e.timeout))
            })
            .map(|(t, _)| t.clone())
            .collect();
        for t in &due {
            self.finish(broker, t, false);
            let e = self.ids.get_mut(t).expect("known");
            if e.epoch >= i16::MAX - 1 {
                e.producer_id = broker.fresh_producer_id();
                e.epoch = 0;
            } else {
                e.epoch += 1;
            }
        }
        due.len()
    }

    /// Ends `t`'s open transaction: its records committed or aborted.
    fn finish(&mut self, broker: &mut impl Broker, t: &str, commit: bool) {
        let e = self.ids.get_mut(t).expect("known");
        e.open = None;
        e.started = None;
        e.last_end = Some(commit);
        let state = if commit {
            TxnState::Committed
        } else {
            TxnState::Aborted
        };
        for a in self
            .open_arrivals
            .remove(&e.producer_id)
            .unwrap_or_default()
        {
            broker.mark(a, state);
        }
    }

    /// Whether transactional id `t`'s producer `producer_id` at `epoch`
    /// may write to `partition` of `topic` now: the partition is in its
    /// open transaction. An older epoch (fenced by a newer producer, or
    /// by the abort of a transaction that timed out) is
    /// INVALID_PRODUCER_EPOCH, as Kafka's verification answers a Produce.
    pub(crate) fn admit(
        &mut self,
        broker: &mut impl Broker,
        t: &str,
        (producer_id, epoch): (i64, i16),
        topic: Topic,
        partition: i32,
    ) -> Result<(), ResponseError> {
        self.expire(broker, Instant::now(), false);
        match self.ids.get(t) {
            Some(e) if e.producer_id == producer_id && epoch < e.epoch => {
                Err(ResponseError::InvalidProducerEpoch)
            }
            Some(e)
                if e.producer_id == producer_id
                    && e.open
                        .as_ref()
                        .is_some_and(|o| o.contains(&(topic, partition))) =>
            {
                Ok(())
            }
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// The records at `arrivals` were written in `producer_id`'s open
    /// transaction.
    pub(crate) fn written(&mut self, producer_id: i64, arrivals: std::ops::Range<usize>) {
        self.open_arrivals
            .entry(producer_id)
            .or_default()
            .extend(arrivals);
    }
}

fn decode<T: Decodable>(b: &mut Bytes, version: i16) -> Result<T, String> {
    T::decode(b, version).map_err(|e| format!("the double could not read a request: {e}"))
}

fn encode<T: Encodable>(t: &T, version: i16) -> Result<Bytes, String> {
    let mut b = BytesMut::new();
    t.encode(&mut b, version)
        .map_err(|e| format!("the double could not write a response: {e}"))?;
    Ok(b.freeze())
}
