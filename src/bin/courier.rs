//! `courier`: produce from stdin, manage topics, and measure throughput.
//!
//! ```text
//! courier produce -b BROKERS -t TOPIC [-k SEP] [--reports all|errors|none] [-X prop=value]...
//!                 [--transaction-records N]   (with -X transactional.id=ID)
//! courier topic create -b BROKERS NAME --partitions N [--replication-factor R]
//! courier topic list -b BROKERS
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
use std::process::ExitCode;
use std::time::{Duration, Instant};

use courier::{DeliveryReport, Producer, ProducerBuilder, Record, ReportMode};
use futures::stream::{FuturesUnordered, StreamExt};

const USAGE: &str = "usage:
  courier produce -b BROKERS -t TOPIC [-k SEP] [--reports all|errors|none] [-X prop=value]...
                  [--transaction-records N]   (with -X transactional.id=ID)
  courier topic create -b BROKERS NAME --partitions N [--replication-factor R]
  courier topic list -b BROKERS
  courier perf -b BROKERS -t TOPIC --num-records N --record-size S [--throughput R]
               [--reports all|errors|none] [-X prop=value]... [--json]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reports {
    All,
    Errors,
    None,
}

#[derive(Debug, Default)]
struct Args {
    positional: Vec<String>,
    brokers: Option<String>,
    topic: Option<String>,
    key_sep: Option<String>,
    reports: Option<Reports>,
    props: Vec<(String, String)>,
    partitions: Option<i32>,
    replication: Option<i16>,
    num_records: Option<u64>,
    record_size: Option<usize>,
    throughput: Option<f64>,
    json: bool,
    transaction_records: Option<u64>,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("courier: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "-b" | "--bootstrap-server" => a.brokers = Some(value(&arg)?),
            "-t" | "--topic" => a.topic = Some(value(&arg)?),
            "-k" => a.key_sep = Some(value(&arg)?),
            "--reports" => {
                a.reports = Some(match value(&arg)?.as_str() {
                    "all" => Reports::All,
                    "errors" => Reports::Errors,
                    "none" => Reports::None,
                    other => {
                        return Err(format!(
                            "--reports takes all, errors or none, not {other:?}"
                        ))
                    }
                })
            }
            "-X" => {
                let kv = value(&arg)?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or(format!("-X takes prop=value, not {kv:?}"))?;
                a.props.push((k.to_string(), v.to_string()));
            }
            "--partitions" => {
                a.partitions = Some(
                    value(&arg)?
                        .parse()
                        .map_err(|_| "--partitions takes a number")?,
                )
            }
            "--replication-factor" => {
                a.replication = Some(
                    value(&arg)?
                        .parse()
                        .map_err(|_| "--replication-factor takes a number")?,
                )
            }
            "--num-records" => {
                a.num_records = Some(
                    value(&arg)?
                        .parse()
                        .map_err(|_| "--num-records takes a number")?,
                )
            }
            "--record-size" => {
                a.record_size = Some(
                    value(&arg)?
                        .parse()
                        .map_err(|_| "--record-size takes a number")?,
                )
            }
            "--throughput" => {
                a.throughput = Some(
                    value(&arg)?
                        .parse()
                        .map_err(|_| "--throughput takes a number")?,
                )
            }
            "--json" => a.json = true,
            "--transaction-records" => {
                a.transaction_records = Some(
                    value(&arg)?
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or("--transaction-records takes a number above 0")?,
                )
            }
            "-h" | "--help" => return Err("help".into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => a.positional.push(arg),
        }
    }
    Ok(a)
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
            let mut line = Vec::new();
            let line = match input.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    Ok(line)
                }
                Err(e) => Err(format!("reading line {n} of standard input failed: {e}")),
            };
            let end = line.is_err();
            if tx.blocking_send(line).is_err() || end {
                break;
            }
        }
    });
    rx
}

/// A line as a record: `key SEP value` when a separator is given and found.
fn line_record(topic: &str, key_sep: Option<&str>, line: Vec<u8>) -> Record {
    let record = Record::to(topic);
    match key_sep.and_then(|sep| split_once_bytes(&line, sep.as_bytes())) {
        Some((k, v)) => record.key(k.to_vec()).value(v.to_vec()),
        None => record.value(line),
    }
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
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    let mut pending = FuturesUnordered::new();
    let mut rx = stdin_lines();
    let mut seq = 0u64;
    let mut input_done = false;
    let max_pending = 50_000;
    loop {
        tokio::select! {
            line = rx.recv(), if !input_done && pending.len() < max_pending => {
                let line = match line {
                    None => { input_done = true; continue }
                    Some(Err(e)) => {
                        eprintln!("courier: {e}");
                        failed = true;
                        input_done = true;
                        continue;
                    }
                    Some(Ok(line)) => line,
                };
                let record = line_record(&topic, a.key_sep.as_deref(), line);
                if reports == Reports::None {
                    if let Err(e) = producer.produce(record).await {
                        eprintln!("courier: {e}");
                        failed = true;
                    }
                } else {
                    let p = producer.clone();
                    let s = seq;
                    pending.push(async move { (s, p.send(record).await) });
                }
                seq += 1;
            }
            Some((s, result)) = pending.next(), if !pending.is_empty() => {
                let report = match result {
                    Ok(d) => DeliveryReport::Delivered(d),
                    Err(e) => DeliveryReport::Failed(e),
                };
                failed |= !report.is_delivered();
                if reports == Reports::All || !report.is_delivered() {
                    let _ = writeln!(out, "{}", report_line(s, &topic, &report));
                }
            }
            else => break,
        }
        if input_done && pending.is_empty() {
            break;
        }
    }
    producer.close().await;
    let _ = out.flush();
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
        let record = line_record(topic, a.key_sep.as_deref(), line);
        // Taken before the next line, so the commit covers it.
        match producer.submit(record).await {
            Ok(report) => open.push((seq, report)),
            Err(e) => {
                let report = DeliveryReport::Failed(courier::DeliveryError {
                    kind: courier::ErrorKind::Aborted,
                    message: e.to_string(),
                    partition: None,
                    attempts: 0,
                    record: e.into_record(),
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
        Err(e) => {
            if !e.is_fatal() {
                if let Err(a) = producer.abort_transaction().await {
                    eprintln!("courier: aborting the transaction failed: {a}");
                }
            }
            Some(format!("transaction aborted: {e}"))
        }
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
                record: d.record,
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
    Ok(courier::connection::ConnectionOptions {
        client_id: Some(config.client_id.clone()),
        security,
        ..Default::default()
    })
}

async fn topic(a: Args) -> ExitCode {
    let Some(brokers) = a.brokers.as_deref() else {
        return usage("topic needs -b BROKERS");
    };
    let opts = match admin_options(&a.props) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    match a.positional.get(1).map(String::as_str) {
        Some("create") => {
            let (Some(name), Some(partitions)) = (a.positional.get(2), a.partitions) else {
                return usage("topic create needs NAME and --partitions N");
            };
            match courier::admin::create_topic_with(
                &opts,
                brokers,
                name,
                partitions,
                a.replication.unwrap_or(1),
            )
            .await
            {
                Ok(()) => {
                    println!("created topic {name} with {partitions} partitions");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("courier: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some("list") => match courier::admin::list_topics_with(&opts, brokers).await {
            Ok(topics) => {
                for (name, partitions) in topics {
                    println!("{name}\t{partitions}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("courier: {e}");
                ExitCode::from(1)
            }
        },
        _ => usage("topic takes create or list"),
    }
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

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
    let (sub, mut stream) = producer.subscribe_with_capacity(mode, 1_000_000);
    let payload = bytes::Bytes::from(vec![b'x'; size]);
    let topic_name = courier::Topic::from(topic.as_str());
    let throughput = a.throughput.filter(|t| *t > 0.0);
    let tty = std::io::stderr().is_terminal() && !a.json;
    let start = Instant::now();

    let reader = tokio::spawn(async move {
        let mut lat_us: Vec<u64> = Vec::new();
        let mut failed = 0u64;
        let mut first_error = None;
        while let Some(r) = stream.next().await {
            match r {
                DeliveryReport::Delivered(d) => lat_us.push(d.latency.as_micros() as u64),
                DeliveryReport::Failed(e) => {
                    failed += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        (lat_us, failed, first_error)
    });

    let mut last_print = Instant::now();
    for i in 0..n {
        if let Some(rate) = throughput {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                tokio::time::sleep(due - now).await;
            }
        }
        let record = courier::Record {
            topic: topic_name,
            partition: None,
            key: None,
            value: Some(payload.clone()),
            headers: Vec::new(),
            timestamp: None,
        };
        let r = if reports == Reports::None {
            producer.produce(record).await
        } else {
            sub.produce(record).await
        };
        if let Err(e) = r {
            eprintln!("courier: {e}");
            return ExitCode::from(1);
        }
        if tty && last_print.elapsed() > Duration::from_millis(200) {
            last_print = Instant::now();
            let pct = (i + 1) as f64 * 100.0 / n as f64;
            let bar = "#".repeat((pct / 5.0) as usize);
            eprint!("\r[{bar:<20}] {pct:5.1}%  {} records", i + 1);
        }
    }
    drop(sub);
    producer.flush().await;
    let elapsed = start.elapsed().as_secs_f64();
    let (mut lat, failed, first_error) = reader.await.expect("report reader");
    producer.close().await;
    if tty {
        eprintln!();
    }
    let stats = producer.stats();
    let failed = if reports == Reports::None {
        stats.failed
    } else {
        failed
    };
    lat.sort_unstable();
    let delivered = n - failed;
    let rps = n as f64 / elapsed;
    let mbps = rps * size as f64 / (1024.0 * 1024.0);
    let avg = if lat.is_empty() {
        0.0
    } else {
        lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1000.0
    };
    let max = lat.last().copied().unwrap_or(0) as f64 / 1000.0;
    let (p50, p95, p99, p999) = (
        percentile(&lat, 0.50),
        percentile(&lat, 0.95),
        percentile(&lat, 0.99),
        percentile(&lat, 0.999),
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

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage(&e),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match args.positional.first().map(String::as_str) {
        Some("produce") => rt.block_on(produce(args)),
        Some("topic") => rt.block_on(topic(args)),
        Some("perf") => rt.block_on(perf(args)),
        Some(other) => usage(&format!("unknown command {other:?}")),
        None => usage("no command"),
    }
}
