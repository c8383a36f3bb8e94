//! `courier`: produce from stdin, manage topics, and measure throughput.
//!
//! ```text
//! courier produce -b BROKERS -t TOPIC [-k SEP] [--reports all|errors|none] [-X prop=value]...
//!                 [--transaction-records N]   (with -X transactional.id=ID)
//! courier topic create -b BROKERS NAME --partitions N [--replication-factor R] [--config NAME=VALUE]...
//! courier topic list -b BROKERS
//! courier topic describe -b BROKERS NAME [--json]
//! courier topic delete -b BROKERS NAME
//! courier cluster -b BROKERS [--json]
//! courier perf -b BROKERS -t TOPIC --num-records N --record-size S [--throughput R]
//!              [--reports all|errors|none] [-X prop=value]... [--json]
//! ```
//!
//! `produce` reads one message per line and writes one JSON line per report:
//! `{"seq": N, "topic": "...", "partition": P, "offset": O, "error": null}`.
//! Exit status: 0 when every message was delivered, 1 when any failed, 2 on
//! a usage error. `perf` prints kafka-producer-perf-test style lines.
//!
//! With `-X transactional.id=ID --transaction-records N`, `produce` commits
//! a transaction every N lines and at the end of the input; each line's
//! report is printed once its transaction has ended, so a line reported
//! delivered is committed. A transaction that cannot commit is aborted and
//! its lines reported failed ("transaction aborted"); SIGINT or SIGTERM
//! aborts the open transaction, reports its lines so, and exits 1.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use courier::{DeliveryReport, Producer, ProducerBuilder, Record, ReportMode};

/// Which reports `produce` prints and `perf` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Reports {
    /// Every report.
    All,
    /// Failures only.
    Errors,
    /// None (fire and forget; failures still set the exit status).
    None,
}

/// Produce to Apache Kafka from the command line, manage topics, describe
/// the cluster, and measure throughput. Producer properties take Java or librdkafka names
/// (-X name=value, or -F FILE). Exit status: 0 when every record was
/// delivered, 1 when any failed, 2 on a usage error.
#[derive(Debug, Parser)]
#[command(name = "courier", version, propagate_version = true)]
struct Cli {
    /// More log output on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log only errors on stderr (RUST_LOG, when set, decides instead).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Cmd,
}

/// Where the cluster is and how to reach it.
#[derive(Debug, clap::Args)]
struct Connect {
    /// Brokers to bootstrap from: HOST:PORT[,HOST:PORT...].
    #[arg(short = 'b', long = "bootstrap-server", value_name = "BROKERS")]
    brokers: String,
    /// A producer property, Java or librdkafka name (security.protocol, sasl.*, ssl.*, linger.ms, …); repeatable; wins over -F.
    #[arg(short = 'X', value_name = "NAME=VALUE", value_parser = parse_pair)]
    props: Vec<(String, String)>,
    /// Producer properties from a file: NAME=VALUE lines, # comments (kcat's -F, the Java tools' --producer.config).
    #[arg(short = 'F', long = "producer.config", value_name = "FILE")]
    config_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Produce standard input's lines (bytes, split at newlines), one record each, and print one JSON line per report.
    #[command(after_help = "Examples:
  printf 'k1:v1\\nk2:v2\\n' | courier produce -b localhost:9092 -t orders -k :
  courier produce -b localhost:9092 -t orders -p 0 -H source=cli < lines.txt
  courier produce -b broker:9096 -t orders -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-256 \\
      -X sasl.username=alice -X sasl.password=secret -X ssl.ca.location=ca.pem < lines.txt
  courier produce -b localhost:9092 -t orders -X transactional.id=loader-1 --transaction-records 1000 < lines.txt

Each report line: {\"seq\": N, \"topic\": \"...\", \"partition\": P, \"offset\": O, \"error\": null}")]
    Produce {
        #[command(flatten)]
        connect: Connect,
        /// The topic.
        #[arg(short = 't', long)]
        topic: String,
        /// Split each line at the first SEP into key and value (kcat's -K).
        #[arg(short = 'k', value_name = "SEP")]
        key_sep: Option<String>,
        /// Produce to this partition instead of choosing one.
        #[arg(short = 'p', long, value_name = "PARTITION")]
        partition: Option<i32>,
        /// A header on every record; repeatable.
        #[arg(short = 'H', value_name = "NAME=VALUE", value_parser = parse_pair)]
        headers: Vec<(String, String)>,
        /// Which reports to print.
        #[arg(long, value_enum, default_value_t = Reports::All)]
        reports: Reports,
        /// Commit a transaction every N lines and at the end (needs -X transactional.id=ID); SIGINT/SIGTERM abort the open one.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        transaction_records: Option<u64>,
    },
    /// Create, list, describe and delete topics.
    Topic {
        #[command(subcommand)]
        action: TopicCmd,
    },
    /// Describe the cluster: its id, controller and brokers, and the API versions agreed with the bootstrap broker.
    #[command(after_help = "Examples:
  courier cluster -b localhost:9092
  courier cluster -b localhost:9092 --json

Text: 'Cluster ID: ID', 'Controller: ID', one 'Broker ID: HOST:PORT (rack: RACK)' line per broker,
then one '  API: vN' line per API Courier uses ('not offered' when the broker does not offer a version Courier speaks).
JSON: {\"cluster_id\": \"...\", \"controller\": 1, \"brokers\": [{\"id\": 1, \"host\": \"...\", \"port\": 9092, \"rack\": null}],
       \"bootstrap_broker\": \"HOST:PORT\", \"api_versions\": {\"Produce\": 12, ...}}")]
    Cluster {
        #[command(flatten)]
        connect: Connect,
        /// One JSON object instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// Measure throughput and latency, as kafka-producer-perf-test does.
    #[command(after_help = "Example:
  courier perf -b localhost:9092 -t bench --num-records 1000000 --record-size 100 -X linger.ms=5")]
    Perf {
        #[command(flatten)]
        connect: Connect,
        /// The topic.
        #[arg(short = 't', long)]
        topic: String,
        /// Records to produce.
        #[arg(long, value_name = "N")]
        num_records: u64,
        /// Bytes per record value.
        #[arg(long, value_name = "BYTES")]
        record_size: usize,
        /// Records per second at most (0 or absent: as fast as it goes).
        #[arg(long, value_name = "RATE")]
        throughput: Option<f64>,
        /// Which reports to read.
        #[arg(long, value_enum, default_value_t = Reports::All)]
        reports: Reports,
        /// One JSON object instead of the text line.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = "Example:
  courier completions bash > ~/.local/share/bash-completion/completions/courier")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
enum TopicCmd {
    /// Create a topic.
    #[command(after_help = "Examples:
  courier topic create -b localhost:9092 orders --partitions 6 --replication-factor 3
  courier topic create -b localhost:9092 events --partitions 3 --config retention.ms=86400000 --config cleanup.policy=compact")]
    Create {
        #[command(flatten)]
        connect: Connect,
        /// Its name.
        name: String,
        /// Its partitions.
        #[arg(long, value_name = "N")]
        partitions: i32,
        /// Replicas per partition.
        #[arg(long, value_name = "R", default_value_t = 1)]
        replication_factor: i16,
        /// A topic config (retention.ms, cleanup.policy, …), as kafka-topics.sh's --config; repeatable.
        #[arg(long = "config", value_name = "NAME=VALUE", value_parser = parse_pair)]
        configs: Vec<(String, String)>,
    },
    /// List topics: name and partition count, tab-separated.
    #[command(after_help = "Example:
  courier topic list -b localhost:9092")]
    List {
        #[command(flatten)]
        connect: Connect,
    },
    /// Describe a topic: its partitions with their leaders, replicas and in-sync replicas.
    #[command(after_help = "Examples:
  courier topic describe -b localhost:9092 orders
  courier topic describe -b localhost:9092 orders --json

Text, as kafka-topics.sh --describe:
  Topic: orders	TopicId: ID	PartitionCount: 3	ReplicationFactor: 3
  	Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2,0	Isr: 1,2,0
JSON: {\"topic\": \"orders\", \"topic_id\": \"...\", \"partitions\": [{\"partition\": 0, \"leader\": 1,
       \"replicas\": [1, 2, 0], \"isr\": [1, 2, 0], \"offline_replicas\": []}]} (leader null when there is none).
An unknown topic exits 1.")]
    Describe {
        #[command(flatten)]
        connect: Connect,
        /// The topic.
        name: String,
        /// One JSON object instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete a topic (an unknown topic exits 1).
    #[command(after_help = "Example:
  courier topic delete -b localhost:9092 orders")]
    Delete {
        #[command(flatten)]
        connect: Connect,
        /// The topic.
        name: String,
    },
}

/// `NAME=VALUE`.
fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

/// The settings of a command: the -F file's, then -X's (which win).
fn settings(connect: &Connect) -> Result<Vec<(String, String)>, String> {
    let mut props = Vec::new();
    if let Some(path) = &connect.config_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            props.push(parse_pair(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?);
        }
    }
    // -X replaces the file's value for the same name (it is never set).
    props.retain(|(k, _)| !connect.props.iter().any(|(x, _)| x == k));
    props.extend(connect.props.iter().cloned());
    Ok(props)
}

/// What the commands read, from whichever subcommand was given.
#[derive(Debug, Default)]
struct Args {
    brokers: Option<String>,
    topic: Option<String>,
    key_sep: Option<String>,
    partition: Option<i32>,
    headers: Vec<(String, String)>,
    reports: Option<Reports>,
    props: Vec<(String, String)>,
    num_records: Option<u64>,
    record_size: Option<usize>,
    throughput: Option<f64>,
    json: bool,
    transaction_records: Option<u64>,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("courier: {msg}\n(see courier --help)");
    ExitCode::from(2)
}

fn builder(brokers: &str, props: &[(String, String)]) -> ProducerBuilder {
    let mut b = Producer::builder().bootstrap(brokers);
    for (k, v) in props {
        b = b.set(k, v);
    }
    b
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `line` split at the first `sep` (which is not empty).
fn split_once_bytes<'a>(line: &'a [u8], sep: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    if sep.is_empty() {
        return None;
    }
    let at = line.windows(sep.len()).position(|w| w == sep)?;
    Some((&line[..at], &line[at + sep.len()..]))
}

fn report_line(seq: u64, topic: &str, report: &DeliveryReport) -> String {
    match report {
        DeliveryReport::Delivered(d) => format!(
            "{{\"seq\": {seq}, \"topic\": {}, \"partition\": {}, \"offset\": {}, \"error\": null}}",
            json_str(topic),
            d.partition,
            d.offset.map_or("null".to_string(), |o| o.to_string())
        ),
        DeliveryReport::Failed(e) => format!(
            "{{\"seq\": {seq}, \"topic\": {}, \"partition\": {}, \"offset\": null, \"error\": {}}}",
            json_str(topic),
            e.partition.map_or("null".to_string(), |p| p.to_string()),
            json_str(&e.to_string())
        ),
    }
}

/// Standard input's lines, as bytes (keys and values are bytes; nothing
/// needs to be UTF-8), split at '\n', from a thread of their own. A read
/// error ends the input loudly.
fn stdin_lines() -> tokio::sync::mpsc::Receiver<Result<Vec<u8>, String>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, String>>(1024);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        for n in 1u64.. {
            let Some(line) = read_line(&mut input, n) else {
                break;
            };
            let end = line.is_err();
            if tx.blocking_send(line).is_err() || end {
                break;
            }
        }
    });
    rx
}

/// Line `n` (counted from 1) of `input` without its '\n'; `None` at the
/// end. The vector's capacity is its length, so that the record's `Bytes`
/// takes it as it is: a vector with room to spare (a line read with its
/// '\n', then popped) costs `Bytes` a second allocation, and its drop a
/// second free.
fn read_line(input: &mut impl BufRead, n: u64) -> Option<Result<Vec<u8>, String>> {
    let failed = |e: std::io::Error| format!("reading line {n} of standard input failed: {e}");
    // Usually the whole line is in the buffer already: copied out as it
    // is, without its '\n'.
    let whole = match input.fill_buf() {
        Ok(buf) => memchr::memchr(b'\n', buf).map(|i| (buf[..i].to_vec(), i + 1)),
        Err(e) => return Some(Err(failed(e))),
    };
    if let Some((line, used)) = whole {
        input.consume(used);
        return Some(Ok(line));
    }
    // A line that goes past the buffer's end, or the last one with no
    // '\n'.
    let mut line = Vec::new();
    match input.read_until(b'\n', &mut line) {
        Ok(0) => None,
        Ok(_) => {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            line.shrink_to_fit();
            Some(Ok(line))
        }
        Err(e) => Some(Err(failed(e))),
    }
}

/// How the input thread hands lines over to `produce`.
enum Input {
    /// Records of consecutive lines, each tagged with its line's sequence
    /// number ([`Record::opaque`]).
    Run(Vec<Record>),
    /// Reading failed; the message names the line.
    Failed(String),
}

/// Lines per run, at most: one channel message and one `produce_batch`
/// call per run, instead of one each per line.
const LINES_PER_RUN: usize = 1024;

/// Standard input as records, from a thread of its own, in runs of up to
/// [`LINES_PER_RUN`] lines; a run is handed over early whenever no more
/// input is buffered, so an interactive line is produced at once.
fn stdin_records(shape: LineShape) -> tokio::sync::mpsc::Receiver<Input> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Input>(8);
    std::thread::spawn(move || {
        // Our own buffer, so the thread can see whether more input is
        // already read without waiting for it.
        let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
        let mut run = Vec::with_capacity(LINES_PER_RUN);
        for seq in 0u64.. {
            let item = match read_line(&mut input, seq + 1) {
                None => break,
                Some(Ok(line)) => {
                    run.push(shape.record(line).opaque(seq));
                    if run.len() < LINES_PER_RUN && !input.buffer().is_empty() {
                        continue;
                    }
                    Input::Run(std::mem::replace(
                        &mut run,
                        Vec::with_capacity(LINES_PER_RUN),
                    ))
                }
                Some(Err(e)) => {
                    if !run.is_empty()
                        && tx
                            .blocking_send(Input::Run(std::mem::take(&mut run)))
                            .is_err()
                    {
                        return;
                    }
                    let _ = tx.blocking_send(Input::Failed(e));
                    return;
                }
            };
            if tx.blocking_send(item).is_err() {
                return;
            }
        }
        if !run.is_empty() {
            let _ = tx.blocking_send(Input::Run(run));
        }
    });
    rx
}

/// What makes a line a record: the topic, `-k`'s separator, `-p` and `-H`.
struct LineShape {
    topic: courier::Topic,
    key_sep: Option<Vec<u8>>,
    partition: Option<i32>,
    headers: Vec<(String, String)>,
}

impl LineShape {
    fn new(a: &Args, topic: &str) -> LineShape {
        LineShape {
            topic: courier::Topic::from(topic),
            key_sep: a.key_sep.as_ref().map(|s| s.as_bytes().to_vec()),
            partition: a.partition,
            headers: a.headers.clone(),
        }
    }

    /// A line as a record: `key SEP value` when a separator is given and
    /// found. With `-p` the partition, with `-H` the headers.
    fn record(&self, line: Vec<u8>) -> Record {
        let mut record = Record::to(self.topic);
        if let Some(p) = self.partition {
            record = record.partition(p);
        }
        for (k, v) in &self.headers {
            record = record.header(k.clone(), v.clone().into_bytes());
        }
        match self
            .key_sep
            .as_deref()
            .and_then(|sep| split_once_bytes(&line, sep))
        {
            Some((k, v)) => record.key(k.to_vec()).value(v.to_vec()),
            None => record.value(line),
        }
    }
}

/// Prints `produce`'s reports as they come, one JSON line each (the
/// stream of `--reports errors` carries failures only), the line's number
/// taken from the record's tag. Returns whether any failed.
async fn print_reports(mut reports: courier::ReportStream, topic: String) -> bool {
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut failed = false;
    while let Some(batch) = reports.next_batch().await {
        for report in batch {
            failed |= !report.is_delivered();
            let seq = report.opaque();
            let _ = writeln!(out, "{}", report_line(seq, &topic, &report));
        }
        // Written as they arrive, not held until the input ends.
        let _ = out.flush();
    }
    failed
}

async fn produce(a: Args) -> ExitCode {
    let (Some(brokers), Some(topic)) = (a.brokers.clone(), a.topic.clone()) else {
        return usage("produce needs -b BROKERS and -t TOPIC");
    };
    let transactional = a.props.iter().any(|(k, _)| k == "transactional.id");
    if a.transaction_records.is_some() != transactional {
        return usage("--transaction-records N and -X transactional.id=ID go together");
    }
    let producer = match builder(&brokers, &a.props).build() {
        Ok(p) => p,
        Err(e) => return usage(&e.to_string()),
    };
    if let Some(n) = a.transaction_records {
        return produce_transactional(a, producer, &topic, n).await;
    }
    let reports = a.reports.unwrap_or(Reports::All);
    // One subscription for every line, bounded as any (so memory stays
    // flat whatever the input's length): each report comes back with its
    // record, whose tag is the line's number.
    let mode = match reports {
        Reports::All => Some(ReportMode::All),
        Reports::Errors => Some(ReportMode::ErrorsOnly),
        Reports::None => None,
    };
    let (sub, printer) = match mode.map(|m| producer.subscribe(m)) {
        Some((sub, stream)) => (
            Some(sub),
            Some(tokio::spawn(print_reports(stream, topic.clone()))),
        ),
        None => (None, None),
    };
    let mut failed = false;
    let mut input = stdin_records(LineShape::new(&a, &topic));
    while let Some(item) = input.recv().await {
        let run = match item {
            Input::Run(run) => run,
            Input::Failed(e) => {
                eprintln!("courier: {e}");
                failed = true;
                break;
            }
        };
        let taken = match &sub {
            Some(sub) => sub.produce_batch(run).await,
            None => producer.produce_batch(run).await,
        };
        if let Err(rejected) = taken {
            // Only a closed producer refuses here: nothing more is taken.
            let from = rejected.reason.clone().into_record().opaque;
            eprintln!(
                "courier: {}; lines from {} on were not produced",
                rejected.reason,
                from + 1
            );
            failed = true;
            break;
        }
    }
    drop(input);
    drop(sub);
    producer.close().await;
    if let Some(printer) = printer {
        failed |= printer.await.unwrap_or(true);
    }
    if reports == Reports::None && producer.stats().failed > 0 {
        failed = true;
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `produce` in transactions of `n` lines: every line's report is printed
/// once its transaction has ended (committed: as delivered; aborted: as
/// failed, naming why). SIGINT or SIGTERM aborts the open transaction.
async fn produce_transactional(a: Args, producer: Producer, topic: &str, n: u64) -> ExitCode {
    use tokio::signal::unix::{signal, SignalKind};
    let reports = a.reports.unwrap_or(Reports::All);
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        eprintln!("courier: cannot watch for SIGINT and SIGTERM");
        return ExitCode::from(1);
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    let mut rx = stdin_lines();
    let shape = LineShape::new(&a, topic);
    let mut seq = 0u64;
    // The open transaction's lines: their sequence numbers and send futures.
    let mut open: Vec<(u64, courier::DeliveryFuture)> = Vec::new();
    let mut stopped = None;
    loop {
        let line = tokio::select! {
            line = rx.recv() => line,
            _ = interrupt.recv() => { stopped = Some("SIGINT"); break }
            _ = terminate.recv() => { stopped = Some("SIGTERM"); break }
        };
        let line = match line {
            None => break,
            Some(Err(e)) => {
                eprintln!("courier: {e}");
                failed = true;
                break;
            }
            Some(Ok(line)) => line,
        };
        if open.is_empty() {
            if let Err(e) = producer.begin_transaction() {
                eprintln!("courier: {e}");
                failed = true;
                break;
            }
        }
        let record = shape.record(line);
        // Taken before the next line, so the commit covers it.
        match producer.submit(record).await {
            Ok(report) => open.push((seq, report)),
            Err(e) => {
                let report = DeliveryReport::Failed(courier::DeliveryError {
                    kind: courier::ErrorKind::Aborted,
                    message: e.to_string(),
                    partition: None,
                    attempts: 0,
                    record: Box::new(e.into_record()),
                });
                failed = true;
                let _ = writeln!(out, "{}", report_line(seq, topic, &report));
            }
        }
        seq += 1;
        if open.len() as u64 == n {
            failed |= end_transaction(&producer, &mut open, None, topic, reports, &mut out).await;
        }
    }
    if !open.is_empty() {
        failed |= end_transaction(&producer, &mut open, stopped, topic, reports, &mut out).await;
    }
    producer.close().await;
    let _ = out.flush();
    if let Some(s) = stopped {
        eprintln!("courier: stopped by {s}; the open transaction was aborted");
    }
    if failed || stopped.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Commits the open transaction (or aborts it, when `stop` names why),
/// then prints its lines' reports as they now stand. True if any failed.
async fn end_transaction(
    producer: &Producer,
    open: &mut Vec<(u64, courier::DeliveryFuture)>,
    stop: Option<&str>,
    topic: &str,
    reports: Reports,
    out: &mut impl Write,
) -> bool {
    let outcome = match stop {
        None => producer.commit_transaction().await,
        Some(signal) => Err(courier::TransactionError::State(format!(
            "stopped by {signal}"
        ))),
    };
    let aborted = match outcome {
        Ok(()) => None,
        // Stopped, or a record failed: abort it here.
        Err(e) if stop.is_some() || e.is_abortable() => {
            if let Err(a) = producer.abort_transaction().await {
                eprintln!("courier: aborting the transaction failed: {a}");
            }
            Some(format!("transaction aborted: {e}"))
        }
        // Fenced: the coordinator aborted it for the newer producer.
        Err(e) if e.is_fatal() => Some(format!("transaction aborted: {e}")),
        // The coordinator did not answer the commit in time: it may have
        // committed or not, and only it knows.
        Err(e) => Some(format!("transaction outcome unknown: {e}")),
    };
    let (seqs, sends): (Vec<u64>, Vec<_>) = open.drain(..).unzip();
    let results = futures::future::join_all(sends).await;
    let mut failed = false;
    for (s, result) in seqs.into_iter().zip(results) {
        let report = match (result, &aborted) {
            (Ok(d), None) => DeliveryReport::Delivered(d),
            (Ok(d), Some(why)) => DeliveryReport::Failed(courier::DeliveryError {
                kind: courier::ErrorKind::Aborted,
                message: why.clone(),
                partition: Some(d.partition),
                attempts: 1,
                // A success report does not hand its record back; the line
                // printed names its sequence number, not its content.
                record: Box::new(courier::Record::to(d.topic).opaque(d.opaque)),
            }),
            (Err(e), _) => DeliveryReport::Failed(e),
        };
        failed |= !report.is_delivered();
        if reports == Reports::All || !report.is_delivered() {
            let _ = writeln!(out, "{}", report_line(s, topic, &report));
        }
    }
    failed
}

/// Connection options from `-X` properties (security.protocol, ssl.*,
/// sasl.*; the rest are producer settings and ignored here).
fn admin_options(
    props: &[(String, String)],
) -> Result<courier::connection::ConnectionOptions, String> {
    let mut config = courier::config::ProducerConfig::default();
    for (k, v) in props {
        config.set(k, v).map_err(|e| e.to_string())?;
    }
    let security = courier::security::Security::from_config(&config.security, None)
        .map_err(|e| e.to_string())?;
    // Each request waits request.timeout.ms at most, as the Java admin
    // client's; the connection (TCP, TLS, SASL, ApiVersions)
    // socket.connection.setup.timeout.ms.
    Ok(courier::connection::ConnectionOptions {
        client_id: Some(config.client_id.clone()),
        security,
        request_timeout: config.request_timeout,
        connect_timeout: config.connection_setup_timeout,
        ..Default::default()
    })
}

/// `courier: ERROR` on stderr, exit status 1.
fn failed(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("courier: {e}");
    ExitCode::from(1)
}

/// Broker ids as `1,2,0` (kafka-topics.sh's form) or `[1, 2, 0]` (JSON).
fn id_list(ids: &[i32], sep: &str) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(sep)
}

fn json_opt_str(s: Option<&str>) -> String {
    s.map_or("null".to_string(), json_str)
}

fn describe_text(d: &courier::admin::TopicDescription) -> String {
    let rf = d.partitions.first().map_or(0, |p| p.replicas.len());
    let mut out = format!(
        "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {rf}\n",
        d.name,
        d.topic_id.as_deref().unwrap_or("none"),
        d.partitions.len()
    );
    for p in &d.partitions {
        out.push_str(&format!(
            "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
            d.name,
            p.partition,
            p.leader.map_or("none".to_string(), |l| l.to_string()),
            id_list(&p.replicas, ","),
            id_list(&p.isr, ","),
        ));
        if !p.offline_replicas.is_empty() {
            out.push_str(&format!("\tOffline: {}", id_list(&p.offline_replicas, ",")));
        }
        out.push('\n');
    }
    out
}

fn describe_json(d: &courier::admin::TopicDescription) -> String {
    let partitions: Vec<String> = d
        .partitions
        .iter()
        .map(|p| {
            format!(
                "{{\"partition\": {}, \"leader\": {}, \"replicas\": [{}], \"isr\": [{}], \"offline_replicas\": [{}]}}",
                p.partition,
                p.leader.map_or("null".to_string(), |l| l.to_string()),
                id_list(&p.replicas, ", "),
                id_list(&p.isr, ", "),
                id_list(&p.offline_replicas, ", "),
            )
        })
        .collect();
    format!(
        "{{\"topic\": {}, \"topic_id\": {}, \"partitions\": [{}]}}",
        json_str(&d.name),
        json_opt_str(d.topic_id.as_deref()),
        partitions.join(", ")
    )
}

async fn topic(action: TopicCmd) -> ExitCode {
    let connect = match &action {
        TopicCmd::Create { connect, .. }
        | TopicCmd::List { connect }
        | TopicCmd::Describe { connect, .. }
        | TopicCmd::Delete { connect, .. } => connect,
    };
    let opts = match settings(connect).and_then(|props| admin_options(&props)) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let brokers = connect.brokers.as_str();
    match &action {
        TopicCmd::Create {
            name,
            partitions,
            replication_factor,
            configs,
            ..
        } => {
            match courier::admin::create_topic_with_configs(
                &opts,
                brokers,
                name,
                *partitions,
                *replication_factor,
                configs,
            )
            .await
            {
                Ok(()) => {
                    println!("created topic {name} with {partitions} partitions");
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        TopicCmd::List { .. } => match courier::admin::list_topics_with(&opts, brokers).await {
            Ok(topics) => {
                for (name, partitions) in topics {
                    println!("{name}\t{partitions}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => failed(e),
        },
        TopicCmd::Describe { name, json, .. } => {
            match courier::admin::describe_topic_with(&opts, brokers, name).await {
                Ok(d) if *json => {
                    println!("{}", describe_json(&d));
                    ExitCode::SUCCESS
                }
                Ok(d) => {
                    print!("{}", describe_text(&d));
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        TopicCmd::Delete { name, .. } => {
            match courier::admin::delete_topic_with(&opts, brokers, name).await {
                Ok(()) => {
                    println!("deleted topic {name}");
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
    }
}

/// `courier cluster`: id, controller, brokers, and the versions agreed
/// with the bootstrap broker for every API Courier uses.
async fn cluster(connect: Connect, json: bool) -> ExitCode {
    use courier::protocol::versions::SUPPORTED;
    let opts = match settings(&connect).and_then(|props| admin_options(&props)) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let c = match courier::admin::describe_cluster_with(&opts, &connect.brokers).await {
        Ok(c) => c,
        Err(e) => return failed(e),
    };
    let versions: Vec<(String, Option<i16>)> = SUPPORTED
        .iter()
        .map(|s| (format!("{:?}", s.api), c.api_versions.get(s.api)))
        .collect();
    if json {
        let brokers: Vec<String> = c
            .brokers
            .iter()
            .map(|b| {
                format!(
                    "{{\"id\": {}, \"host\": {}, \"port\": {}, \"rack\": {}}}",
                    b.id,
                    json_str(&b.host),
                    b.port,
                    json_opt_str(b.rack.as_deref())
                )
            })
            .collect();
        let versions: Vec<String> = versions
            .iter()
            .map(|(api, v)| {
                format!(
                    "{}: {}",
                    json_str(api),
                    v.map_or("null".to_string(), |v| v.to_string())
                )
            })
            .collect();
        println!(
            "{{\"cluster_id\": {}, \"controller\": {}, \"brokers\": [{}], \"bootstrap_broker\": {}, \"api_versions\": {{{}}}}}",
            json_opt_str(c.cluster_id.as_deref()),
            c.controller.map_or("null".to_string(), |id| id.to_string()),
            brokers.join(", "),
            json_str(&c.bootstrap_broker),
            versions.join(", ")
        );
    } else {
        println!("Cluster ID: {}", c.cluster_id.as_deref().unwrap_or("none"));
        println!(
            "Controller: {}",
            c.controller.map_or("none".to_string(), |id| id.to_string())
        );
        for b in &c.brokers {
            println!(
                "Broker {}: {}:{} (rack: {})",
                b.id,
                b.host,
                b.port,
                b.rack.as_deref().unwrap_or("none")
            );
        }
        println!("API versions agreed with {}:", c.bootstrap_broker);
        for (api, v) in versions {
            match v {
                Some(v) => println!("  {api}: v{v}"),
                None => println!("  {api}: not offered"),
            }
        }
    }
    ExitCode::SUCCESS
}

/// Latencies are recorded in microseconds, from 1 µs to an hour, to three
/// significant digits: a fixed-size histogram (tens of KiB) whatever
/// `--num-records` is, as kafka-producer-perf-test's own is not.
fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// The progress bar on a terminal (stderr), as records are produced.
fn progress_bar(n: u64, tty: bool) -> indicatif::ProgressBar {
    if !tty {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "[{bar:30}] {percent:>3}% {human_pos}/{human_len} records, {per_sec}, {eta} left",
        )
        .expect("valid template")
        .progress_chars("#>-"),
    );
    bar
}

/// Records per progress-bar update: the bar's own cost stays off the
/// per-record path.
const PROGRESS_EVERY: u64 = 4096;

async fn perf(a: Args) -> ExitCode {
    let (Some(brokers), Some(topic), Some(n), Some(size)) =
        (a.brokers, a.topic, a.num_records, a.record_size)
    else {
        return usage("perf needs -b, -t, --num-records and --record-size");
    };
    let producer = match builder(&brokers, &a.props).build() {
        Ok(p) => p,
        Err(e) => return usage(&e.to_string()),
    };
    let reports = a.reports.unwrap_or(Reports::All);
    let mode = if reports == Reports::Errors {
        ReportMode::ErrorsOnly
    } else {
        ReportMode::All
    };
    // The library's default bound on unread reports: memory stays flat
    // whatever --num-records is (the reader keeps up, or producing waits).
    let (sub, mut stream) = producer.subscribe(mode);
    // One value for every record, kept for the process's life: cloning a
    // `'static` `Bytes` touches no reference count, so the producing and
    // the report-reading threads do not contend over one counter per
    // record (a shared `Bytes::from(vec)` would).
    let payload = bytes::Bytes::from_static(Box::leak(vec![b'x'; size].into_boxed_slice()));
    let topic_name = courier::Topic::from(topic.as_str());
    let throughput = a.throughput.filter(|t| *t > 0.0);
    let bar = progress_bar(n, std::io::stderr().is_terminal() && !a.json);
    let start = Instant::now();

    let reader = tokio::spawn(async move {
        let mut latency = latency_histogram();
        let mut failed = 0u64;
        let mut first_error = None;
        while let Some(batch) = stream.next_batch().await {
            for r in batch {
                match r {
                    DeliveryReport::Delivered(d) => {
                        latency.saturating_record(d.latency.as_micros() as u64)
                    }
                    DeliveryReport::Failed(e) => {
                        failed += 1;
                        first_error.get_or_insert(e.to_string());
                    }
                }
            }
        }
        (latency, failed, first_error)
    });

    for i in 0..n {
        if let Some(rate) = throughput {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                tokio::time::sleep(due - now).await;
            }
        }
        let record = Record::to(topic_name).value(payload.clone());
        let r = if reports == Reports::None {
            producer.produce(record).await
        } else {
            sub.produce(record).await
        };
        if let Err(e) = r {
            eprintln!("courier: {e}");
            return ExitCode::from(1);
        }
        if (i + 1) % PROGRESS_EVERY == 0 {
            bar.set_position(i + 1);
        }
    }
    drop(sub);
    producer.flush().await;
    let elapsed = start.elapsed().as_secs_f64();
    let (lat, failed, first_error) = reader.await.expect("report reader");
    producer.close().await;
    bar.finish_and_clear();
    let stats = producer.stats();
    let failed = if reports == Reports::None {
        stats.failed
    } else {
        failed
    };
    let delivered = n - failed;
    let rps = n as f64 / elapsed;
    let mbps = rps * size as f64 / (1024.0 * 1024.0);
    let ms = |us: u64| us as f64 / 1000.0;
    let (avg, max) = if lat.is_empty() {
        (0.0, 0.0)
    } else {
        (lat.mean() / 1000.0, ms(lat.max()))
    };
    let (p50, p95, p99, p999) = (
        ms(lat.value_at_quantile(0.50)),
        ms(lat.value_at_quantile(0.95)),
        ms(lat.value_at_quantile(0.99)),
        ms(lat.value_at_quantile(0.999)),
    );
    if a.json {
        println!(
            "{{\"records\": {n}, \"delivered\": {delivered}, \"failed\": {failed}, \"elapsed_s\": {elapsed:.3}, \"records_per_sec\": {rps:.1}, \"mb_per_sec\": {mbps:.2}, \"latency_ms\": {{\"avg\": {avg:.3}, \"max\": {max:.3}, \"p50\": {p50:.3}, \"p95\": {p95:.3}, \"p99\": {p99:.3}, \"p99.9\": {p999:.3}}}}}"
        );
    } else {
        println!(
            "{n} records sent, {rps:.1} records/sec ({mbps:.2} MB/sec), {avg:.2} ms avg latency, {max:.2} ms max latency, {p50:.0} ms 50th, {p95:.0} ms 95th, {p99:.0} ms 99th, {p999:.0} ms 99.9th."
        );
        if failed > 0 {
            println!(
                "{failed} records failed: {}",
                first_error.unwrap_or_default()
            );
        }
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Logs to stderr (stdout carries the reports): RUST_LOG when set, else
/// Courier's warnings (-q: errors; -v, -vv, -vvv: info, debug, trace).
fn init_logging(verbose: u8, quiet: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => tracing_subscriber::EnvFilter::new(spec),
        _ => {
            let level = match (quiet, verbose) {
                (true, _) => "error",
                (false, 0) => "warn",
                (false, 1) => "info",
                (false, 2) => "debug",
                (false, _) => "trace",
            };
            tracing_subscriber::EnvFilter::new(format!("courier={level}"))
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; usage errors exit 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_logging(cli.verbose, cli.quiet);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let args = |connect: &Connect| -> Result<Args, ExitCode> {
        Ok(Args {
            brokers: Some(connect.brokers.clone()),
            props: settings(connect).map_err(|e| usage(&e))?,
            ..Args::default()
        })
    };
    match cli.command {
        Cmd::Produce {
            connect,
            topic,
            key_sep,
            partition,
            headers,
            reports,
            transaction_records,
        } => match args(&connect) {
            Ok(a) => rt.block_on(produce(Args {
                topic: Some(topic),
                key_sep,
                partition,
                headers,
                reports: Some(reports),
                transaction_records,
                ..a
            })),
            Err(code) => code,
        },
        Cmd::Topic { action } => rt.block_on(topic(action)),
        Cmd::Cluster { connect, json } => rt.block_on(cluster(connect, json)),
        Cmd::Perf {
            connect,
            topic,
            num_records,
            record_size,
            throughput,
            reports,
            json,
        } => match args(&connect) {
            Ok(a) => rt.block_on(perf(Args {
                topic: Some(topic),
                num_records: Some(num_records),
                record_size: Some(record_size),
                throughput,
                reports: Some(reports),
                json,
                ..a
            })),
            Err(code) => code,
        },
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "courier",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
    }
}
