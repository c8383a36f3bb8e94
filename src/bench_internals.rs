//! Hooks for the micro-benchmarks: the crate-internal report routing for
//! criterion (`benches/hot_path.rs`), and a whole producer with no actors
//! or broker for the instruction counts (`benches/instructions`), driven
//! with no broker. Compiled only with
//! the `unstable-internals` feature, which the crate's own dev-dependency on
//! itself turns on; not part of the API.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use futures::StreamExt;

use crate::clock::Mono;
use crate::delivery::owed::{Owed, ReplyTo};
use crate::delivery::router::route;
use crate::delivery::settlement::Outcome;
use crate::delivery::subscription::{ReportStream, SubscriptionShared};
use crate::record::{Record, Topic};
use crate::report::ReportMode;
use crate::stats::Stats;

/// One batch's owed reports, ready to route: `records` records spread
/// round-robin in runs of `run` over `subscribers` subscriptions.
pub struct PreparedBatch {
    owed: Owed,
    records: usize,
    streams: Vec<ReportStream>,
    stats: Stats,
}

impl PreparedBatch {
    /// Builds the batch (records, owed entries, subscriptions).
    pub fn new(records: usize, subscribers: usize, run: usize) -> PreparedBatch {
        let closed = Arc::new(AtomicBool::new(false));
        let subs: Vec<_> = (0..subscribers)
            .map(|_| {
                SubscriptionShared::new(
                    ReportMode::All,
                    crate::delivery::subscription::Bound::Records,
                    usize::MAX >> 4,
                    closed.clone(),
                )
            })
            .collect();
        let streams = subs.iter().map(|s| ReportStream::new(s.clone())).collect();
        let topic = Topic::from("bench");
        let value = bytes::Bytes::from_static(&[b'x'; 100]);
        let now = Mono::now();
        let mut owed = Owed::default();
        for i in 0..records {
            let record = Record::to(topic).value(value.clone());
            let s = &subs[(i / run.max(1)) % subscribers];
            owed.push(i as u32, 0, now, &record, ReplyTo::Subscription(s, 1));
        }
        // A producer's stats, publishing with the `metrics` feature; the
        // topic's handles resolved here (its batch was sealed), as a
        // producer resolves them once, not in the timed routing.
        let stats = Stats::new("bench");
        stats.metrics.produced(topic, records as u64);
        PreparedBatch {
            owed,
            records,
            streams,
            stats,
        }
    }

    /// Routes the batch as delivered and reads every report from the
    /// subscriptions' streams, one `poll_next` a report (as a `Stream`
    /// user does) or one `next_batch` at a time; returns the reports read.
    pub fn route_and_read(mut self, batched: bool) -> usize {
        route(
            Topic::from("bench"),
            0,
            self.records as i32,
            1,
            std::mem::take(&mut self.owed),
            Outcome::Delivered {
                base_offset: Some(0),
                log_append_time: None,
            },
            None,
            &self.stats,
        );
        self.streams
            .iter_mut()
            .map(|s| read_arrived(s, batched))
            .sum()
    }
}

/// A producer with no actors and no broker, for counting what a record
/// costs in the library itself: the public produce calls and report
/// stream, with batches sealed and answered here as a connection actor
/// would (`actors/broker/drain.rs`, then `Engine::answer`), so no socket,
/// actor message or thread is involved and the work is deterministic
/// (`benches/instructions/instructions.rs` counts it under callgrind).
///
/// One topic, `bench`, with 6 partitions led by broker 1, is known from
/// the start; the producer's settings are the defaults but for
/// `enable.idempotence=false` (no producer id to ask for) and those given.
pub struct Pipeline {
    producer: crate::producer::Producer,
    sub: crate::producer::Subscriber,
    stream: ReportStream,
}

/// The actor tree of a [`Pipeline`]: nothing to wake, no metadata to ask.
struct NoActors;

impl crate::engine::ActorTree for NoActors {
    fn wake(&self, _broker: i32) {}
    fn wake_all(&self) {}
    fn request_topic(&self, _topic: Topic) -> bool {
        false
    }
    fn ensure_topic(
        &self,
        _topic: Topic,
    ) -> futures::future::BoxFuture<'static, Option<Result<(), (crate::report::ErrorKind, String)>>>
    {
        Box::pin(futures::future::ready(None))
    }
}

/// The topic every [`Pipeline`] knows.
pub const PIPELINE_TOPIC: &str = "bench";

impl Pipeline {
    /// The producer, with `properties` set over the defaults; its
    /// subscription reports every record (`ReportMode::All`, the default
    /// bound of 10,000 outstanding reports).
    pub fn new(properties: &[(&str, &str)]) -> Pipeline {
        let mut config = crate::config::ProducerConfig::default();
        for (k, v) in [
            ("bootstrap.servers", "bench:0"),
            ("enable.idempotence", "false"),
        ]
        .iter()
        .chain(properties)
        {
            config.set(k, v).expect("a valid property");
        }
        config.validate().expect("valid settings");
        let engine = crate::engine::Engine::new(
            config,
            None,
            Arc::new(NoActors),
            None,
            Default::default(),
            crate::resolve::Resolver::default(),
        );
        let mut snapshot = crate::metadata::MetadataSnapshot::default();
        snapshot.brokers.insert(1, "bench:0".into());
        snapshot.topics.insert(
            Topic::from(PIPELINE_TOPIC),
            Arc::new(crate::metadata::TopicMetadata {
                partition_count: 6,
                leaders: vec![1; 6],
                available: (0..6).collect(),
                leader_epochs: Vec::new(),
                topic_id: 0,
                sticky: Default::default(),
                cache: Default::default(),
            }),
        );
        engine.metadata().store(Arc::new(snapshot));
        // A supervisor address whose actor never runs: what the handle
        // sends it on drop goes nowhere.
        let (tx, _) = actix::dev::channel::channel(1);
        let producer = crate::producer::Producer::from_parts(
            engine,
            Arc::new(crate::actors::addresses::Addresses::default()),
            actix::Addr::new(tx),
        );
        let (sub, stream) = producer.subscribe(ReportMode::All);
        Pipeline {
            producer,
            sub,
            stream,
        }
    }

    /// `count` records to the pipeline's topic with `value_len`-byte
    /// values, keyless or each with its own key.
    pub fn records(count: usize, value_len: usize, keyed: bool) -> Vec<Record> {
        static VALUE: [u8; 1 << 16] = [b'x'; 1 << 16];
        let value = bytes::Bytes::from_static(&VALUE[..value_len.min(VALUE.len())]);
        let topic = Topic::from(PIPELINE_TOPIC);
        (0..count)
            .map(|i| {
                let r = Record::to(topic).value(value.clone());
                if keyed {
                    r.key(format!("key-{i}"))
                } else {
                    r
                }
            })
            .collect()
    }

    /// Produces each record with `Subscriber::produce`, which completes at
    /// once here (metadata known, room in the batch); returns how many.
    pub fn produce(&self, records: Vec<Record>) -> usize {
        let sub = &self.sub;
        let n = records.len();
        for r in records {
            futures::FutureExt::now_or_never(sub.produce(r))
                .expect("nothing to wait for")
                .expect("accepted");
        }
        n
    }

    /// Produces the records with one `Subscriber::produce_batch` call.
    pub fn produce_batch(&self, records: Vec<Record>) -> usize {
        let n = records.len();
        futures::FutureExt::now_or_never(self.sub.produce_batch(records))
            .expect("nothing to wait for")
            .expect("accepted");
        n
    }

    /// Seals every open batch and answers each batch as delivered, as a
    /// connection actor and a broker's success would; returns the number
    /// of batches.
    pub fn deliver(&self) -> usize {
        let engine = &self.producer.engine;
        let mut sealed = Vec::new();
        // The topic's queues by partition, not `all_queues`: iterating a
        // DashMap costs per shard, and dashmap's shard count follows the
        // machine's cores, which would make the count machine-dependent.
        let topic = Topic::from(PIPELINE_TOPIC);
        for q in (0..6).map(|p| engine.acc().queue(&topic, p)) {
            let mut state = crate::sync::lock(&q.state);
            let mut batches: Vec<_> = state.ready.drain(..).collect();
            if let Some(open) = state.open.take() {
                batches.push(engine.acc().seal(open, &q).expect("sealed"));
            }
            for mut b in batches {
                state.take_off(&mut b);
                sealed.push(b);
            }
        }
        let n = sealed.len();
        let answer = crate::engine::answer::BatchAnswer::written(0);
        let now = crate::clock::Instant::now();
        for b in sealed {
            engine.answer(b, 1, &answer, now);
        }
        n
    }

    /// Reads every report that has arrived, one `poll_next` a report or
    /// one `next_batch` at a time; returns how many were delivered.
    pub fn read(&mut self, batched: bool) -> usize {
        read_arrived(&mut self.stream, batched)
    }
}

/// Reads every report `s` has now, one `poll_next` a report (as a
/// `Stream` user does) or one `next_batch` at a time; returns how many
/// were delivered.
#[inline]
fn read_arrived(s: &mut ReportStream, batched: bool) -> usize {
    let mut read = 0;
    if batched {
        while let Some(Some(b)) = futures::FutureExt::now_or_never(s.next_batch()) {
            read += b.filter(|r| r.is_delivered()).count();
        }
    } else {
        while let Some(Some(r)) = futures::FutureExt::now_or_never(s.next()) {
            read += r.is_delivered() as usize;
        }
    }
    read
}

/// How `producer` learnt where partitions are: Metadata requests its
/// partitioner actor sent, and partitions it moved to a leader a Produce
/// answer named (KIP-951), with no Metadata round trip. For the tests that
/// check a leader move took none.
pub fn metadata_counts(producer: &crate::producer::Producer) -> (u64, u64) {
    use std::sync::atomic::Ordering;
    let stats = producer.engine.stats();
    (
        stats.metadata_requests.load(Ordering::Relaxed),
        stats.leader_hints.load(Ordering::Relaxed),
    )
}
