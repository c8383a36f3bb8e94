//! `courier perf`: kafka-producer-perf-test style throughput and latency.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use courier_kafka::{DeliveryReport, Record, ReportMode};

use crate::cli::{builder, usage, Args, Reports};

/// Latencies are recorded in microseconds, from 1 µs to an hour, to three
/// significant digits: a fixed-size histogram (tens of KiB) whatever
/// `--num-records` is, as kafka-producer-perf-test's own is not.
pub(crate) fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// The progress bar on a terminal (stderr), as records are produced.
pub(crate) fn progress_bar(n: u64, tty: bool) -> indicatif::ProgressBar {
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
pub(crate) const PROGRESS_EVERY: u64 = 4096;

pub(crate) async fn perf(a: Args) -> ExitCode {
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
    let (sub, stream) = producer.subscribe(mode);
    // One value for every record, kept for the process's life: cloning a
    // `'static` `Bytes` touches no reference count, so the producing and
    // the report-reading threads do not contend over one counter per
    // record (a shared `Bytes::from(vec)` would).
    let payload = bytes::Bytes::from_static(Box::leak(vec![b'x'; size].into_boxed_slice()));
    let topic_name = courier_kafka::Topic::from(topic.as_str());
    let throughput = a.throughput.filter(|t| *t > 0.0);
    let bar = progress_bar(n, std::io::stderr().is_terminal() && !a.json);
    let start = Instant::now();

    let reader = tokio::spawn(read_reports(stream));
    let load = Load {
        n,
        topic: topic_name,
        payload,
        throughput,
        reports,
    };
    if let Err(e) = load.send(&producer, &sub, &bar, start).await {
        eprintln!("courier: {e}");
        return ExitCode::from(1);
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
    print_summary(n, size, elapsed, failed, &lat, first_error, a.json);
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// What `perf` produces: `n` records of one value to one topic, at
/// `throughput` records a second at most, with reports as `reports` says.
struct Load {
    n: u64,
    topic: courier_kafka::Topic,
    payload: bytes::Bytes,
    throughput: Option<f64>,
    reports: Reports,
}

impl Load {
    /// Produces every record (through `sub` unless reports are off),
    /// paced, moving the progress bar.
    async fn send(
        &self,
        producer: &courier_kafka::Producer,
        sub: &courier_kafka::Subscriber,
        bar: &indicatif::ProgressBar,
        start: Instant,
    ) -> Result<(), courier_kafka::ProduceError> {
        for i in 0..self.n {
            if let Some(rate) = self.throughput {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                let now = Instant::now();
                if due > now {
                    tokio::time::sleep(due - now).await;
                }
            }
            let record = Record::to(self.topic).value(self.payload.clone());
            if self.reports == Reports::None {
                producer.produce(record).await?;
            } else {
                sub.produce(record).await?;
            }
            if (i + 1) % PROGRESS_EVERY == 0 {
                bar.set_position(i + 1);
            }
        }
        Ok(())
    }
}

/// Reads the subscription's reports to the end: the delivered records'
/// latencies, the failures, and the first failure's message.
async fn read_reports(
    mut stream: courier_kafka::ReportStream,
) -> (hdrhistogram::Histogram<u64>, u64, Option<String>) {
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
}

/// The run's line, as kafka-producer-perf-test.sh prints it (or JSON).
fn print_summary(
    n: u64,
    size: usize,
    elapsed: f64,
    failed: u64,
    lat: &hdrhistogram::Histogram<u64>,
    first_error: Option<String>,
    json: bool,
) {
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
    if json {
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
}
