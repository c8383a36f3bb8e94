//! `courier`: produce from stdin, manage topics, ACLs and consumer groups,
//! and measure throughput.
//!
//! ```text
//! courier produce -b BROKERS -t TOPIC [-k SEP] [--reports all|errors|none] [-X prop=value]...
//!                 [--transaction-records N]   (with -X transactional.id=ID)
//! courier topic create -b BROKERS NAME --partitions N [--replication-factor R] [--config NAME=VALUE]...
//! courier topic list -b BROKERS
//! courier topic describe -b BROKERS NAME [--json]
//! courier topic delete -b BROKERS NAME
//! courier cluster -b BROKERS [--json]
//! courier acl create|delete -b BROKERS (--allow-principal|--deny-principal) P --operation OP
//!                 (--topic T|--group G|--cluster|--transactional-id ID) [--resource-pattern-type literal|prefixed]
//! courier acl list -b BROKERS [--topic T|--group G|…] [--principal P] [--json]
//! courier group list -b BROKERS [--json]
//! courier group describe|offsets -b BROKERS --group G [--json]
//! courier group reset-offsets -b BROKERS --group G --topic T[:P,P] --to-offset N
//! courier group delete-offsets -b BROKERS --group G --topic T[:P,P]
//! courier group delete -b BROKERS --group G
//! courier records delete -b BROKERS TOPIC --before PARTITION:OFFSET...
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

mod acl;
mod admin;
mod cli;
mod group;
mod perf;
mod produce;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::acl::acl;
use crate::admin::{cluster, topic};
use crate::cli::{settings, usage, Args, Cli, Cmd, Connect};
use crate::group::{group, records};
use crate::perf::perf;
use crate::produce::produce;

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
            tracing_subscriber::EnvFilter::new(format!("courier_kafka={level},courier={level}"))
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
        let props = settings(connect).map_err(|e| usage(&e))?;
        Ok(Args {
            brokers: Some(connect.brokers(&props).map_err(|e| usage(&e))?),
            props,
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
        Cmd::Acl { action } => rt.block_on(acl(action)),
        Cmd::Group { action } => rt.block_on(group(action)),
        Cmd::Records { action } => rt.block_on(records(action)),
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
