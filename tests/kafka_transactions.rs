//! Transactions on Apache Kafka (3 brokers beside a dedicated controller,
//! started once for this binary), checked with read_committed and
//! read_uncommitted rdkafka consumers: committed records visible once,
//! aborted ones never; zombie fencing; a transaction that outlives
//! `transaction.timeout.ms`; the transaction coordinator killed
//! mid-transaction.
//!
//! Two clusters: one formatted as Kafka 4.1 formats by default, with
//! `transaction.version` 2 (KIP-890: Produce v12 adds partitions, EndTxn
//! bumps the epoch), where every test runs; and one formatted with
//! `transaction.version=1`, where commit and abort, fencing, the
//! coordinator kill, the exactly-once example's kill loop and the epoch
//! check run again (the `_v1` tests).
//!
//! A fault test kills a broker, so it takes its cluster for itself
//! (`write()` on the cluster's lock); the others share it (`read()`).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use courier_kafka::{DeliveryReport, ErrorKind, Producer, ProducerBuilder, Record, ReportMode};
use futures::StreamExt;
use support::kafka::KafkaCluster;
use support::{read_until_quiet, ReadRecord};

static CLUSTER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
static CLUSTER_V1: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// One of the two clusters, with the lock its tests take.
#[derive(Clone, Copy)]
struct Cluster {
    kafka: fn() -> &'static KafkaCluster,
    lock: &'static tokio::sync::RwLock<()>,
    /// The `transaction.version` it was formatted with.
    version: u8,
}

/// Kafka 4.1's default format: transaction version 2.
const V2: Cluster = Cluster {
    kafka,
    lock: &CLUSTER,
    version: 2,
};

/// Formatted with `transaction.version=1`.
const V1: Cluster = Cluster {
    kafka: kafka_v1,
    lock: &CLUSTER_V1,
    version: 1,
};

fn kafka() -> &'static KafkaCluster {
    KafkaCluster::shared_with_controller(3)
}

fn kafka_v1() -> &'static KafkaCluster {
    static ONE: std::sync::OnceLock<KafkaCluster> = std::sync::OnceLock::new();
    ONE.get_or_init(|| KafkaCluster::start_with_controller_features(3, &["transaction.version=1"]))
}

fn unique(name: &str) -> String {
    format!("{name}-{:08x}", fastrand::u32(..))
}

fn transactional(kafka: &KafkaCluster, id: &str) -> ProducerBuilder {
    Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .set("transactional.id", id)
        .set("linger.ms", "5")
}

/// The values a consumer with `isolation` reads from `topic`.
fn values(kafka: &KafkaCluster, topic: &str, partitions: i32, isolation: &str) -> Vec<String> {
    let read: Vec<ReadRecord> = read_until_quiet(
        &kafka.bootstrap(),
        &[("isolation.level", isolation)],
        topic,
        partitions,
        Duration::from_secs(3),
    );
    read.into_iter()
        .map(|r| String::from_utf8(r.value.expect("a value")).unwrap())
        .collect()
}

fn value_of(r: &DeliveryReport) -> String {
    support::tagged_value(r)
}

/// The producer epoch the transaction coordinator holds for `id`, as
/// Kafka's own `kafka-transactions describe` prints it.
fn coordinator_epoch(kafka: &KafkaCluster, id: &str) -> i32 {
    let out = kafka.run(
        "org.apache.kafka.tools.TransactionsCommand",
        &[
            "--bootstrap-server",
            &kafka.bootstrap(),
            "describe",
            "--transactional-id",
            id,
        ],
    );
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .find(|l| l.contains("ProducerEpoch"))
        .unwrap_or_else(|| panic!("no header in:\n{out}"))
        .split_whitespace()
        .collect();
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    let at = header.iter().position(|h| *h == "ProducerEpoch").unwrap();
    row[at]
        .parse()
        .unwrap_or_else(|_| panic!("an epoch in:\n{out}"))
}

/// Transaction version 2 bumps the producer epoch at the end of every
/// transaction (EndTxn v5), committed or aborted, and the next
/// transaction's records go under the new epoch (or the broker would
/// refuse them: a late write of a finished transaction is what the bump
/// fences); version 1 keeps one epoch. Kafka's TransactionsCommand reads
/// the coordinator's epoch before and after three transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transaction_ends_with_an_epoch_bump_under_version_2() {
    epoch_per_transaction(V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_epoch_serves_every_transaction_under_version_1() {
    epoch_per_transaction(V1).await
}

async fn epoch_per_transaction(cluster: Cluster) {
    let _shared = cluster.lock.read().await;
    let kafka = (cluster.kafka)();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-epochs");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let id = unique("txn-epochs");
    let p = transactional(kafka, &id).build().unwrap();
    // The first transaction waits for the producer id; the epoch is read
    // once the coordinator has a transaction of this id.
    p.begin_transaction().unwrap();
    p.send(Record::to(topic.as_str()).value("t0"))
        .await
        .unwrap();
    let before = coordinator_epoch(kafka, &id);
    p.commit_transaction().await.unwrap();
    for (n, commit) in [(1, false), (2, true)] {
        p.begin_transaction().unwrap();
        for i in 0..30 {
            p.send(Record::to(topic.as_str()).value(format!("t{n}-{i}")))
                .await
                .unwrap();
        }
        if commit {
            p.commit_transaction().await.unwrap();
        } else {
            p.abort_transaction().await.unwrap();
        }
    }
    assert_eq!(p.stats().transaction_version, Some(cluster.version));
    p.close().await;
    let after = coordinator_epoch(kafka, &id);
    let bumps = if cluster.version == 2 { 3 } else { 0 };
    assert_eq!(
        after - before,
        bumps,
        "epoch bumps over three transactions under transaction version {}",
        cluster.version
    );
    let mut got = values(kafka, &topic, 3, "read_committed");
    got.sort();
    let mut want: Vec<String> = std::iter::once("t0".to_string())
        .chain((0..30).map(|i| format!("t2-{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want, "the committed transactions, once");
}

/// Three transactions, the middle one aborted, interleaved with a plain
/// producer's records on the same topic, through `send`, a subscription
/// and fire-and-forget. A read_committed reader sees the committed
/// records and the plain ones, each once, and none of the aborted; every
/// record got exactly one report; the aborted transaction's records were
/// each either written (then hidden by the abort marker) or failed
/// `Aborted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_seen_once_and_aborted_ones_never() {
    committed_and_aborted(V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_seen_once_and_aborted_ones_never_v1() {
    committed_and_aborted(V1).await
}

async fn committed_and_aborted(cluster: Cluster) {
    let _shared = cluster.lock.read().await;
    let kafka = (cluster.kafka)();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-commit-abort");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let txn = transactional(kafka, &unique("txn-a")).build().unwrap();
    let plain = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    let rec = |v: String| support::tagged_record(&topic, &v, true);

    // 1: send().await, committed.
    txn.begin_transaction().unwrap();
    let sent = futures::future::join_all((0..100).map(|i| txn.send(rec(format!("c1-{i}"))))).await;
    for r in &sent {
        assert!(r.is_ok(), "{r:?}");
    }
    for i in 0..50 {
        plain.send(rec(format!("plain-{i}"))).await.unwrap();
    }
    txn.commit_transaction().await.unwrap();

    // 2: a subscription, aborted part-way.
    txn.begin_transaction().unwrap();
    let (sub, stream) = txn.subscribe(ReportMode::All);
    let reader = tokio::spawn(stream.collect::<Vec<DeliveryReport>>());
    for i in 0..300 {
        sub.produce(rec(format!("a-{i}"))).await.unwrap();
    }
    drop(sub);
    txn.abort_transaction().await.unwrap();
    let aborted = reader.await.unwrap();
    assert_eq!(
        aborted.len(),
        300,
        "one report per aborted-transaction record"
    );
    let distinct: BTreeSet<String> = aborted.iter().map(value_of).collect();
    assert_eq!(distinct.len(), 300);
    for r in &aborted {
        match r {
            DeliveryReport::Delivered(_) => {}
            DeliveryReport::Failed(e) => assert_eq!(e.kind, ErrorKind::Aborted, "{e}"),
        }
    }

    // Outside a transaction nothing is taken.
    let e = txn.send(rec("outside".into())).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Aborted, "{e}");
    assert!(e.message.contains("begin_transaction"), "{e}");

    assert_eq!(
        txn.stats().transaction_version,
        Some(cluster.version),
        "the transaction protocol the cluster runs"
    );

    // 3: fire and forget, committed; more plain records meanwhile.
    txn.begin_transaction().unwrap();
    for i in 0..100 {
        txn.produce(rec(format!("c3-{i}"))).await.unwrap();
    }
    for i in 50..100 {
        plain.send(rec(format!("plain-{i}"))).await.unwrap();
    }
    txn.commit_transaction().await.unwrap();
    txn.close().await;
    plain.close().await;

    let committed = values(kafka, &topic, 3, "read_committed");
    let mut want: Vec<String> = (0..100)
        .map(|i| format!("c1-{i}"))
        .chain((0..100).map(|i| format!("plain-{i}")))
        .chain((0..100).map(|i| format!("c3-{i}")))
        .collect();
    let mut got = committed.clone();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "read_committed: the committed and plain records, each once"
    );
    // The aborted records that were written are in the log, hidden.
    let written_aborted = aborted.iter().filter(|r| r.is_delivered()).count();
    let all = values(kafka, &topic, 3, "read_uncommitted");
    let in_log = all.iter().filter(|v| v.starts_with("a-")).count();
    assert_eq!(
        in_log, written_aborted,
        "read_uncommitted sees what was written"
    );
}

/// A second producer with the same transactional.id fences the first,
/// whose transaction is open: the coordinator aborts it, the first's next
/// records fail `Fenced` (INVALID_PRODUCER_EPOCH), which makes its
/// transaction abortable, as in the Java client since KIP-588; its abort's
/// EndTxn is answered PRODUCER_FENCED, which is fatal. The second commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_producer_with_the_same_id_fences_the_older() {
    fencing(V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_producer_with_the_same_id_fences_the_older_v1() {
    fencing(V1).await
}

async fn fencing(cluster: Cluster) {
    let _shared = cluster.lock.read().await;
    let kafka = (cluster.kafka)();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-fence");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let id = unique("txn-zombie");
    let rec = |v: String| Record::to(topic.as_str()).value(v);

    let old = transactional(kafka, &id).build().unwrap();
    old.begin_transaction().unwrap();
    for i in 0..20 {
        old.send(rec(format!("old-{i}"))).await.unwrap();
    }
    // The newer instance: its InitProducerId bumps the epoch and aborts
    // the older one's open transaction.
    let new = transactional(kafka, &id).build().unwrap();
    new.begin_transaction().unwrap();
    new.send(rec("new-0".into())).await.unwrap();

    let started = Instant::now();
    let e = old.send(rec("old-late".into())).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Fenced, "{e}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let e = old.commit_transaction().await.unwrap_err();
    assert!(e.is_abortable(), "{e}");
    let e = old.abort_transaction().await.unwrap_err();
    assert!(e.is_fatal(), "{e}");
    let e = old.begin_transaction().unwrap_err();
    assert!(e.is_fatal(), "{e}");
    old.close().await;

    for i in 1..20 {
        new.send(rec(format!("new-{i}"))).await.unwrap();
    }
    new.commit_transaction().await.unwrap();
    new.close().await;

    let mut got = values(kafka, &topic, 3, "read_committed");
    got.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("new-{i}")).collect();
    want.sort();
    assert_eq!(got, want, "only the newer producer's committed records");
}

/// A transaction left open past `transaction.timeout.ms` is aborted by the
/// coordinator (which bumps the epoch): the commit fails at once with a
/// fatal error that names the cause, instead of hanging, and nothing of
/// it is visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_past_its_timeout_is_aborted_and_says_so() {
    let _shared = CLUSTER.read().await;
    let kafka = kafka();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-timeout");
    kafka.create_topic(&topic, 1, 3, &[]).await;
    let p = transactional(kafka, &unique("txn-slow"))
        .set("transaction.timeout.ms", "2000")
        .build()
        .unwrap();
    p.begin_transaction().unwrap();
    for i in 0..10 {
        p.send(Record::to(topic.as_str()).value(format!("late-{i}")))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(90), p.commit_transaction())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(e.to_string().contains("transaction.timeout.ms"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30));
    p.close().await;
    assert!(values(kafka, &topic, 1, "read_committed").is_empty());
}

/// The transaction coordinator's broker is killed mid-transaction: the
/// commit either succeeds once the coordinator has moved or fails with a
/// clear error, and a read_committed reader sees all of the transaction or
/// none of it. Then the broker comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_mid_transaction_leaves_all_or_nothing() {
    coordinator_killed(V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_mid_transaction_leaves_all_or_nothing_v1() {
    coordinator_killed(V1).await
}

async fn coordinator_killed(cluster: Cluster) {
    let _alone = cluster.lock.write().await;
    let kafka = (cluster.kafka)();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-coordinator");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let p = transactional(kafka, &unique("txn-moving")).build().unwrap();
    let rec = |v: String| Record::to(topic.as_str()).value(v);
    p.begin_transaction().unwrap();
    let mut reports = Vec::new();
    for i in 0..200 {
        reports.push(p.send(rec(format!("t-{i}"))));
    }
    let first: Vec<_> = futures::future::join_all(reports).await;
    let coordinator = kafka.leader("__transaction_state", 0).await;
    eprintln!("killing the transaction coordinator, broker {coordinator}");
    kafka.kill(coordinator);
    let second: Vec<_> =
        futures::future::join_all((200..400).map(|i| p.send(rec(format!("t-{i}"))))).await;
    let outcome = tokio::time::timeout(Duration::from_secs(120), p.commit_transaction())
        .await
        .expect("commit does not hang");
    eprintln!("commit after the coordinator was killed: {outcome:?}");
    let ok = outcome.is_ok();
    if !ok {
        let _ = p.abort_transaction().await;
    }
    p.close().await;
    kafka.restart(coordinator);
    kafka.wait_for_brokers();
    let delivered = first
        .iter()
        .chain(second.iter())
        .filter(|r| r.is_ok())
        .count();
    let got = values(kafka, &topic, 3, "read_committed");
    if ok {
        assert_eq!(
            delivered, 400,
            "a committed transaction had every record delivered"
        );
        let distinct: BTreeSet<&String> = got.iter().collect();
        assert_eq!((got.len(), distinct.len()), (400, 400), "all of it, once");
    } else {
        assert!(got.is_empty(), "none of it: {} records visible", got.len());
    }
}

fn example(name: &str) -> std::path::PathBuf {
    // target/<profile>/deps/kafka_transactions-<hash> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --examples` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Consume-transform-produce (`examples/exactly_once.rs`: the rdkafka
/// consumer in, Courier transactions out, offsets sent to each
/// transaction), killed with SIGKILL at random points in 6 runs, then run
/// to the end: the output topic, read committed, holds each input
/// record's transform exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_survives_kills_exactly_once() {
    exactly_once_kill_loop(V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_survives_kills_exactly_once_v1() {
    exactly_once_kill_loop(V1).await
}

async fn exactly_once_kill_loop(cluster: Cluster) {
    use std::process::{Command, Stdio};
    const N: usize = 5000;
    let _shared = cluster.lock.read().await;
    let kafka = (cluster.kafka)();
    let _logs = kafka.logs_on_panic();
    let (input, output) = (unique("eos-in"), unique("eos-out"));
    kafka.create_topic(&input, 3, 3, &[]).await;
    kafka.create_topic(&output, 3, 3, &[]).await;
    let feeder = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    for i in 0..N {
        feeder
            .produce(
                Record::to(input.as_str())
                    .key(format!("k{}", i % 13))
                    .value(format!("in-{i}")),
            )
            .await
            .unwrap();
    }
    feeder.close().await;
    let (group, txn_id) = (unique("eos-group"), unique("eos-txn"));
    let run = |idle_exit_ms: &str| {
        Command::new(example("exactly_once"))
            .args([
                &kafka.bootstrap(),
                &input,
                &output,
                &group,
                &txn_id,
                idle_exit_ms,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start examples/exactly_once")
    };
    for round in 0..6 {
        let mut child = run("60000");
        let after = Duration::from_millis(fastrand::u64(300..2500));
        tokio::time::sleep(after).await;
        child.kill().unwrap();
        let status = child.wait().unwrap();
        eprintln!("round {round}: killed after {after:?} ({status})");
    }
    let last = run("3000");
    let out = tokio::task::spawn_blocking(move || last.wait_with_output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("last run: {stdout}");
    let mut got = values(kafka, &output, 3, "read_committed");
    got.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("out:in-{i}")).collect();
    want.sort();
    let dupes = got.len() - got.iter().collect::<BTreeSet<_>>().len();
    assert_eq!(dupes, 0, "no transform twice");
    assert_eq!(got, want, "each input record's transform exactly once");
}

/// `courier produce -X transactional.id=ID --transaction-records N`:
/// commits every N lines and at the end (each line reported once its
/// transaction ended); SIGINT aborts the open transaction, reports its
/// lines as aborted and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_commits_every_n_lines_and_aborts_on_sigint() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let _shared = CLUSTER.read().await;
    let kafka = kafka();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-cli");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let cli = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_courier"))
            .args(["produce", "-b", &kafka.bootstrap(), "-t", &topic])
            .args(["-X", &format!("transactional.id={id}")])
            .args(["--transaction-records", "10"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run courier")
    };

    let mut whole = cli(&unique("cli-txn"));
    let lines: String = (0..25).map(|i| format!("whole-{i}\n")).collect();
    whole
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let out = whole.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 25, "{stdout}");
    assert!(
        stdout.lines().all(|l| l.contains("\"error\": null")),
        "{stdout}"
    );

    let mut stopped = cli(&unique("cli-txn"));
    let mut stdin = stopped.stdin.take().unwrap();
    let lines: String = (0..15).map(|i| format!("cut-{i}\n")).collect();
    stdin.write_all(lines.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The first 10 lines commit; 5 wait in the open transaction.
    tokio::time::sleep(Duration::from_secs(4)).await;
    unsafe { libc::kill(stopped.id() as i32, libc::SIGINT) };
    let out = stopped.wait_with_output().unwrap();
    drop(stdin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let delivered = stdout
        .lines()
        .filter(|l| l.contains("\"error\": null"))
        .count();
    let aborted = stdout
        .lines()
        .filter(|l| l.contains("transaction aborted"))
        .count();
    assert_eq!((delivered, aborted), (10, 5), "{stdout}");
    // The kind says "transaction aborted" once; the message says why.
    assert!(
        !stdout.contains("transaction aborted: transaction aborted")
            && stdout.contains("transaction aborted: stopped by"),
        "{stdout}"
    );

    let mut got = values(kafka, &topic, 3, "read_committed");
    got.sort();
    let mut want: Vec<String> = (0..25)
        .map(|i| format!("whole-{i}"))
        .chain((0..10).map(|i| format!("cut-{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want, "committed lines once; the aborted five never");
}

/// `subscribe_transactional`: reports wait for their transaction's end
/// (none comes while it is open, even once every record is written) and
/// say committed or aborted; a read_committed reader agrees with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_reports_wait_for_the_end_and_say_how_it_ended() {
    use courier_kafka::TransactionReport;
    let _shared = CLUSTER.read().await;
    let kafka = kafka();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-reports");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    let p = transactional(kafka, &unique("txn-rep")).build().unwrap();
    let (sub, mut reports) = p.subscribe_transactional().unwrap();
    let rec = |v: String| support::tagged_record(&topic, &v, true);

    for (name, n, commit) in [
        ("one", 200, true),
        ("two", 200, false),
        ("three", 100, true),
    ] {
        p.begin_transaction().unwrap();
        for i in 0..n {
            sub.produce(rec(format!("{name}-{i}"))).await.unwrap();
        }
        // Every record written, the transaction still open: nothing yet.
        p.flush().await;
        let early = tokio::time::timeout(Duration::from_millis(500), reports.next()).await;
        assert!(
            early.is_err(),
            "{name}: a report before the transaction ended: {early:?}"
        );
        if commit {
            p.commit_transaction().await.unwrap();
        } else {
            p.abort_transaction().await.unwrap();
        }
        let mut seen = BTreeSet::new();
        for _ in 0..n {
            let r = tokio::time::timeout(Duration::from_secs(30), reports.next())
                .await
                .expect("released at the end")
                .expect("a report");
            let value = match (&r, commit) {
                (TransactionReport::Committed(d), true) => {
                    value_of(&DeliveryReport::Delivered(d.clone()))
                }
                (TransactionReport::Aborted(r @ DeliveryReport::Delivered(_)), false) => {
                    value_of(r)
                }
                other => panic!("{name}: {other:?}"),
            };
            seen.insert(value);
        }
        let want: BTreeSet<String> = (0..n).map(|i| format!("{name}-{i}")).collect();
        assert_eq!(seen, want, "{name}: one report per record");
    }
    // Closing with a transaction open (no flush first): as the Java
    // client, close sends what is pending, then aborts the transaction,
    // promptly (not at delivery.timeout.ms), and its reports say aborted.
    p.begin_transaction().unwrap();
    for i in 0..10 {
        sub.produce(rec(format!("four-{i}"))).await.unwrap();
    }
    drop(sub);
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(30), p.close())
        .await
        .expect("close with an open transaction returns promptly");
    let mut seen = BTreeSet::new();
    for _ in 0..10 {
        match reports.next().await {
            Some(TransactionReport::Aborted(r)) => {
                seen.insert(value_of(&r));
            }
            other => panic!("four: {other:?}"),
        }
    }
    assert_eq!(seen.len(), 10, "one report per record");
    assert!(reports.next().await.is_none(), "the stream ends");
    eprintln!(
        "close with an open transaction took {:?}",
        started.elapsed()
    );
    // The abort reached the coordinator: plain records written after it
    // on every partition are visible to read_committed at once (behind a
    // transaction left open they would wait for transaction.timeout.ms).
    let plain = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    for partition in 0..3 {
        plain
            .send(
                Record::to(topic.as_str())
                    .partition(partition)
                    .value(format!("after-{partition}")),
            )
            .await
            .unwrap();
    }
    plain.close().await;
    let got = values(kafka, &topic, 3, "read_committed");
    assert_eq!(got.len(), 303, "{got:?}");
    assert!(
        got.iter().all(|v| !v.starts_with("four-")),
        "the transaction open at close never visible"
    );
    assert!(
        got.iter().all(|v| !v.starts_with("two-")),
        "aborted never visible"
    );
}

/// `close` racing `commit_transaction` (issue: the close's abort could
/// overtake the commit's EndTxn, so the commit returned `Ok` for an
/// aborted transaction; and `close` announced "aborted" to transactional
/// reports while a commit went on to succeed). Now, as the Java client,
/// a commit under way is finished by `close`, and an open transaction
/// can no longer start committing once `close` began (it is aborted). In
/// every round, at a random offset between the two calls, the commit's
/// result, the transactional reports and a read_committed reader agree:
/// all of the round's records visible exactly when the commit says `Ok`
/// and every report says `Committed`, none otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_racing_a_commit_never_contradicts_read_committed() {
    use courier_kafka::TransactionReport;
    const ROUNDS: usize = 24;
    const RECORDS: usize = 20;
    let _shared = CLUSTER.read().await;
    let kafka = kafka();
    let _logs = kafka.logs_on_panic();
    let topic = unique("txn-race");
    kafka.create_topic(&topic, 3, 3, &[]).await;
    // (commit said Ok, every report Committed, every report Aborted)
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let p = transactional(kafka, &unique("txn-race"))
            .set("max.request.size", "20000")
            .build()
            .unwrap();
        p.init_transactions().await.unwrap();
        let (sub, mut reports) = p.subscribe_transactional().unwrap();
        p.begin_transaction().unwrap();
        for i in 0..RECORDS {
            let v = format!("r{round}-{i}");
            sub.produce(support::tagged_record(&topic, &v, true))
                .await
                .unwrap();
        }
        // In odd rounds one record fails (larger than max.request.size):
        // that transaction must never commit, whichever of the racing
        // commits looks at it first.
        let bad = round % 2 == 1;
        if bad {
            let v = format!("big{round}-{}", "x".repeat(30_000));
            sub.produce(support::tagged_record(&topic, &v, true))
                .await
                .unwrap();
        }
        drop(sub);
        // Each call after its own random delay: from "close first" (the
        // commit refused) to "close during the commit's flush or EndTxn".
        let (close_after, commit_after) = (
            Duration::from_micros(fastrand::u64(0..12_000)),
            Duration::from_micros(fastrand::u64(0..8_000)),
        );
        let commit = {
            let p = p.clone();
            tokio::spawn(async move {
                tokio::time::sleep(commit_after).await;
                p.commit_transaction().await
            })
        };
        let close = {
            let p = p.clone();
            tokio::spawn(async move {
                tokio::time::sleep(close_after).await;
                p.close().await
            })
        };
        tokio::time::timeout(Duration::from_secs(60), close)
            .await
            .unwrap_or_else(|_| panic!("round {round}: close hangs"))
            .unwrap();
        let committed = tokio::time::timeout(Duration::from_secs(60), commit)
            .await
            .unwrap_or_else(|_| panic!("round {round}: commit hangs"))
            .unwrap();
        let delay = (close_after, commit_after);
        drop(p);
        let (mut yes, mut no) = (0, 0);
        let mut seen = BTreeSet::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(30), reports.next())
                .await
                .unwrap_or_else(|_| panic!("round {round}: the reports never end"))
            {
                None => break,
                Some(TransactionReport::Committed(d)) => {
                    yes += 1;
                    seen.insert(value_of(&DeliveryReport::Delivered(d)));
                }
                Some(TransactionReport::Aborted(r)) => {
                    no += 1;
                    seen.insert(value_of(&r));
                }
                Some(other) => panic!("round {round}: after a close that ended: {other:?}"),
            }
        }
        let records = RECORDS + usize::from(bad);
        assert_eq!(seen.len(), records, "round {round}: one report per record");
        assert_eq!(yes + no, records, "round {round}: one report per record");
        assert!(
            !(bad && committed.is_ok()),
            "round {round}: a transaction with a failed record committed"
        );
        eprintln!(
            "round {round}: (close, commit) after {delay:?}: commit {committed:?}, reports {yes} committed {no} aborted"
        );
        rounds.push((committed.is_ok(), yes == records, no == records));
    }
    let got = values(kafka, &topic, 3, "read_committed");
    for (round, (commit_ok, all_committed, all_aborted)) in rounds.iter().enumerate() {
        let visible = got
            .iter()
            .filter(|v| v.starts_with(&format!("r{round}-")))
            .count();
        assert!(
            visible == 0 || visible == RECORDS,
            "round {round}: {visible} of {RECORDS} visible: all or nothing"
        );
        let visible = visible == RECORDS;
        assert_eq!(
            *commit_ok, visible,
            "round {round}: commit_transaction said {commit_ok}, read_committed sees {visible}"
        );
        assert_eq!(
            (*all_committed, *all_aborted),
            (visible, !visible),
            "round {round}: the transactional reports contradict read_committed (visible: {visible})"
        );
    }
    let commits = rounds.iter().filter(|r| r.0).count();
    eprintln!("{commits} of {ROUNDS} rounds committed");
}
