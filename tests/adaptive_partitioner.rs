//! The built-in partitioner of KIP-794 (the Java client's since 3.3), on
//! librdkafka's mock cluster (three brokers, per-broker round-trip times):
//!
//! - keyless records move to another partition after `batch.size` bytes,
//!   not at every new batch (at a slow rate every batch goes at its
//!   linger holding one record, and KIP-480's rule never moved);
//! - `partitioner.adaptive.partitioning.enable` (default true) sends fewer
//!   records to the partitions of a slow broker than `false` does;
//! - `partitioner.availability.timeout.ms` leaves a stuck broker's
//!   partitions out;
//! - `partitioner.ignore.keys` places keyed records as keyless ones.
//!
//! Every test checks one report per record too. Shares are compared with
//! wide margins (the choices are random draws).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use courier_kafka::report::ReportMode;
use courier_kafka::{DeliveryReport, Producer, Record};
use futures::StreamExt;
use rdkafka::mocking::MockCluster;

const PARTITIONS: i32 = 6;

/// Three mock brokers; the topic's partitions 0 and 1 led by broker 1,
/// 2 and 3 by broker 2, 4 and 5 by broker 3.
fn cluster(topic: &str) -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    let m = MockCluster::new(3).expect("mock cluster");
    m.create_topic(topic, PARTITIONS, 1).expect("create topic");
    for p in 0..PARTITIONS {
        m.partition_leader(topic, p, Some(1 + p / 2))
            .expect("set leader");
    }
    m
}

fn leader(partition: i32) -> i32 {
    1 + partition / 2
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Producer {
    let mut b = Producer::builder()
        .bootstrap(bootstrap)
        .set("linger.ms", "5")
        .set("retry.backoff.ms", "20");
    for (k, v) in extra {
        b = b.set(k, v);
    }
    b.build().unwrap()
}

/// Produces one record to warm up, then `n` records (`make(i)`, tagged
/// with `i`) at `per_ms` a millisecond through one subscription, and returns each record's
/// partition, in the order produced; exactly one report per record, every
/// one a success.
async fn produce(
    p: &Producer,
    n: usize,
    per_ms: usize,
    make: impl Fn(usize) -> Record,
) -> Vec<i32> {
    // Warm up: the producer id and the topic's metadata known (asked of
    // any broker, maybe the slow one), so the choices measured are the
    // partitioner's, not a wait for the producer's start.
    p.send(make(0)).await.expect("the warm-up record");
    let (sub, mut reports) = p.subscribe(ReportMode::All);
    let reader = tokio::spawn(async move {
        let mut placed = vec![-1; n];
        let mut seen = 0;
        while seen < n {
            let r = tokio::time::timeout(Duration::from_secs(60), reports.next())
                .await
                .expect("a report within 60 s")
                .expect("the stream ends only after every report");
            let i = r.opaque() as usize;
            match r {
                DeliveryReport::Delivered(d) => {
                    assert_eq!(placed[i], -1, "a second report for record {i}");
                    placed[i] = d.partition;
                }
                other => panic!("record {i} failed: {other:?}"),
            }
            seen += 1;
        }
        placed
    });
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut i = 0;
    while i < n {
        tick.tick().await;
        for _ in 0..per_ms.min(n - i) {
            sub.produce(make(i).opaque(i as u64)).await.unwrap();
            i += 1;
        }
    }
    drop(sub);
    p.flush().await;
    let placed = reader.await.unwrap();
    assert!(placed.iter().all(|p| *p >= 0), "a report for every record");
    placed
}

/// Runs of consecutive records on one partition.
fn runs(placed: &[i32]) -> Vec<usize> {
    let mut runs = vec![];
    let mut len = 0;
    for (i, p) in placed.iter().enumerate() {
        if i > 0 && placed[i - 1] != *p {
            runs.push(len);
            len = 0;
        }
        len += 1;
    }
    runs.push(len);
    runs
}

/// The share of `placed` (after the first `skip`) led by `broker`.
fn share(placed: &[i32], skip: usize, broker: i32) -> f64 {
    let rest = &placed[skip..];
    rest.iter().filter(|p| leader(**p) == broker).count() as f64 / rest.len() as f64
}

/// One record at a time, each awaited: every batch holds one record and
/// goes at its linger. The partition still moves after `batch.size` bytes
/// (2,000 here: about eight 200-byte records), and every partition gets
/// its turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_move_after_batch_size_bytes_at_a_slow_rate() {
    let m = cluster("slow-rate");
    let p = producer(&m.bootstrap_servers(), &[("batch.size", "2000")]);
    let mut placed = vec![];
    for _ in 0..120 {
        let d = p
            .send(Record::to("slow-rate").value(vec![b'x'; 200]))
            .await
            .unwrap();
        placed.push(d.partition);
    }
    p.close().await;
    let runs = runs(&placed);
    // The first and last runs may be cut short; a move may draw the same
    // partition again (the weights do not leave it out, as in Java), so a
    // run is one stay or more.
    let mut inner = runs[1..runs.len() - 1].to_vec();
    inner.sort_unstable();
    assert!(
        inner.iter().all(|r| *r >= 6) && (6..=10).contains(&inner[inner.len() / 2]),
        "runs of {runs:?}: a stay of 2,000 bytes holds about 8 records"
    );
    let partitions: HashSet<i32> = placed.iter().copied().collect();
    assert!(partitions.len() >= 4, "{partitions:?} of 6 partitions used");
}

/// Broker 1 answers 300 ms late and takes one request at a time
/// (`max.in.flight.requests.per.connection=1`), so its partitions' queues
/// grow; 12,000 keyless records at 6 a millisecond. With the adaptive
/// choice broker 1 gets a clearly smaller share than without it (where
/// every partition is drawn alike: about a third).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_choice_sends_less_to_a_slow_broker() {
    let mut shares = HashMap::new();
    for adaptive in ["true", "false"] {
        let topic = format!("adaptive-{adaptive}");
        let m = cluster(&topic);
        m.broker_round_trip_time(1, Duration::from_millis(300))
            .unwrap();
        let p = producer(
            &m.bootstrap_servers(),
            &[
                ("partitioner.adaptive.partitioning.enable", adaptive),
                ("max.in.flight.requests.per.connection", "1"),
                ("batch.size", "4096"),
            ],
        );
        let placed = produce(&p, 12_000, 6, |_| {
            Record::to(topic.as_str()).value(vec![b'x'; 100])
        })
        .await;
        p.close().await;
        shares.insert(adaptive, share(&placed, 2_000, 1));
    }
    let (on, off) = (shares["true"], shares["false"]);
    assert!(
        (0.2..0.45).contains(&off),
        "without the adaptive choice the slow broker had {off:.2} of the records"
    );
    assert!(
        on < off * 0.6,
        "the slow broker had {on:.2} of the records with the adaptive choice, {off:.2} without"
    );
}

/// Broker 1 takes 2 s to answer; with `partitioner.availability.timeout.ms`
/// at 200 its partitions are left out once a batch waited that long, so
/// after the first second it gets (almost) nothing, where the adaptive
/// choice alone still gives it some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_broker_is_left_out_after_the_availability_timeout() {
    let mut shares = HashMap::new();
    for timeout in ["200", "0"] {
        let topic = format!("available-{timeout}");
        let m = cluster(&topic);
        m.broker_round_trip_time(1, Duration::from_secs(2)).unwrap();
        let p = producer(
            &m.bootstrap_servers(),
            &[
                ("partitioner.availability.timeout.ms", timeout),
                ("batch.size", "4096"),
            ],
        );
        let placed = produce(&p, 6_000, 3, |_| {
            Record::to(topic.as_str()).value(vec![b'x'; 100])
        })
        .await;
        p.close().await;
        let windows: Vec<String> = placed
            .chunks(500)
            .map(|c| format!("{:.2}", share(c, 0, 1)))
            .collect();
        shares.insert(timeout, (share(&placed, 3_000, 1), windows));
    }
    let ((with, by_500), (without, _)) = (&shares["200"], &shares["0"]);
    assert!(
        *with < 0.02,
        "the stuck broker had {with:.3} of the records after the first second \
         (its share of each 500: {by_500:?})"
    );
    assert!(
        without > with,
        "without the timeout it had {without:.3}, with it {with:.3}"
    );
}

/// `partitioner.ignore.keys=true`: one key's records spread over the
/// partitions by stays, as keyless ones; without it they all go to the
/// key's partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_keys_places_keyed_records_as_keyless_ones() {
    let m = cluster("keys");
    let mut used = HashMap::new();
    for ignore in ["true", "false"] {
        let p = producer(
            &m.bootstrap_servers(),
            &[("partitioner.ignore.keys", ignore), ("batch.size", "2000")],
        );
        let placed = produce(&p, 2_000, 4, |_| {
            Record::to("keys").key("one-key").value(vec![b'x'; 100])
        })
        .await;
        p.close().await;
        used.insert(ignore, placed.into_iter().collect::<HashSet<i32>>());
    }
    let by_key = courier_kafka::partitioner::partition_for_key(b"one-key", PARTITIONS);
    assert_eq!(used["false"], HashSet::from([by_key]));
    assert!(used["true"].len() >= 4, "{:?}", used["true"]);
}
