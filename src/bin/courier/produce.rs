//! `courier produce`: one message per line of stdin, one JSON line per
//! report; transactions with `--transaction-records`.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use courier_kafka::{DeliveryReport, Producer, Record, ReportMode};

use crate::cli::{builder, json_str, usage, Args, Reports};

/// `line` split at the first `sep` (which is not empty).
pub(crate) fn split_once_bytes<'a>(line: &'a [u8], sep: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    if sep.is_empty() {
        return None;
    }
    let at = line.windows(sep.len()).position(|w| w == sep)?;
    Some((&line[..at], &line[at + sep.len()..]))
}

pub(crate) fn report_line(seq: u64, topic: &str, report: &DeliveryReport) -> String {
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
pub(crate) fn stdin_lines() -> tokio::sync::mpsc::Receiver<Result<Vec<u8>, String>> {
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
pub(crate) fn read_line(input: &mut impl BufRead, n: u64) -> Option<Result<Vec<u8>, String>> {
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
pub(crate) enum Input {
    /// Records of consecutive lines, each tagged with its line's sequence
    /// number ([`Record::opaque`]).
    Run(Vec<Record>),
    /// Reading failed; the message names the line.
    Failed(String),
}

/// Lines per run, at most: one channel message and one `produce_batch`
/// call per run, instead of one each per line.
pub(crate) const LINES_PER_RUN: usize = 1024;

/// Standard input as records, from a thread of its own, in runs of up to
/// [`LINES_PER_RUN`] lines; a run is handed over early whenever no more
/// input is buffered, so an interactive line is produced at once.
pub(crate) fn stdin_records(shape: LineShape) -> tokio::sync::mpsc::Receiver<Input> {
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
pub(crate) struct LineShape {
    pub(crate) topic: courier_kafka::Topic,
    pub(crate) key_sep: Option<Vec<u8>>,
    pub(crate) partition: Option<i32>,
    pub(crate) headers: Vec<(String, String)>,
}

impl LineShape {
    fn new(a: &Args, topic: &str) -> LineShape {
        LineShape {
            topic: courier_kafka::Topic::from(topic),
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
pub(crate) async fn print_reports(mut reports: courier_kafka::ReportStream, topic: String) -> bool {
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

pub(crate) async fn produce(a: Args) -> ExitCode {
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
pub(crate) async fn produce_transactional(
    a: Args,
    producer: Producer,
    topic: &str,
    n: u64,
) -> ExitCode {
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
    let mut open: Vec<(u64, courier_kafka::DeliveryFuture)> = Vec::new();
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
                let message = e.to_string();
                let report = DeliveryReport::Failed(courier_kafka::DeliveryError::new(
                    courier_kafka::ErrorKind::Aborted,
                    message,
                    e.into_record(),
                ));
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
pub(crate) async fn end_transaction(
    producer: &Producer,
    open: &mut Vec<(u64, courier_kafka::DeliveryFuture)>,
    stop: Option<&str>,
    topic: &str,
    reports: Reports,
    out: &mut impl Write,
) -> bool {
    let outcome = match stop {
        None => producer.commit_transaction().await,
        Some(signal) => Err(courier_kafka::TransactionError::State(format!(
            "stopped by {signal}"
        ))),
    };
    // What the transaction's records are reported as when it did not
    // commit: the kind says aborted (or, when only the coordinator knows,
    // cancelled: "may or may not have been written"), the message why.
    let aborted = match outcome {
        Ok(()) => None,
        // Stopped, or a record failed: abort it here.
        Err(e) if stop.is_some() || e.is_abortable() => {
            if let Err(a) = producer.abort_transaction().await {
                eprintln!("courier: aborting the transaction failed: {a}");
            }
            Some((courier_kafka::ErrorKind::Aborted, e.to_string()))
        }
        // Fenced: the coordinator aborted it for the newer producer.
        Err(e) if e.is_fatal() => Some((courier_kafka::ErrorKind::Aborted, e.to_string())),
        // The coordinator did not answer the commit in time: it may have
        // committed or not, and only it knows.
        Err(e) => Some((
            courier_kafka::ErrorKind::Cancelled,
            format!("transaction outcome unknown: {e}"),
        )),
    };
    let (seqs, sends): (Vec<u64>, Vec<_>) = open.drain(..).unzip();
    let results = futures::future::join_all(sends).await;
    let mut failed = false;
    for (s, result) in seqs.into_iter().zip(results) {
        let report = match (result, &aborted) {
            (Ok(d), None) => DeliveryReport::Delivered(d),
            (Ok(d), Some((kind, why))) => {
                // A success report does not hand its record back; the line
                // printed names its sequence number, not its content.
                let mut e = courier_kafka::DeliveryError::new(
                    *kind,
                    why.clone(),
                    courier_kafka::Record::to(d.topic).opaque(d.opaque),
                );
                e.partition = Some(d.partition);
                e.attempts = 1;
                DeliveryReport::Failed(e)
            }
            (Err(e), _) => DeliveryReport::Failed(e),
        };
        failed |= !report.is_delivered();
        if reports == Reports::All || !report.is_delivered() {
            let _ = writeln!(out, "{}", report_line(s, topic, &report));
        }
    }
    failed
}
