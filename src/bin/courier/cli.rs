//! The command line: its arguments (clap), and what every subcommand
//! shares (settings, the producer builder, exit codes, JSON strings).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use courier_kafka::{Producer, ProducerBuilder};

/// Which reports `produce` prints and `perf` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Reports {
    /// Every report.
    All,
    /// Failures only.
    Errors,
    /// None (fire and forget; failures still set the exit status).
    None,
}

/// Produce to Apache Kafka from the command line, manage topics, ACLs and
/// consumer groups, describe the cluster, and measure throughput. Producer properties take Java or librdkafka names
/// (-X name=value, or -F FILE). Exit status: 0 when every record was
/// delivered, 1 when any failed, 2 on a usage error.
#[derive(Debug, Parser)]
#[command(
    name = "courier",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("CARGO_PKG_NAME"), ")"),
    propagate_version = true
)]
pub(crate) struct Cli {
    /// More log output on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// Log only errors on stderr (RUST_LOG, when set, decides instead).
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

/// Where the cluster is and how to reach it.
#[derive(Debug, clap::Args)]
pub(crate) struct Connect {
    /// Brokers to bootstrap from: HOST:PORT[,HOST:PORT...]; without it, bootstrap.servers from -F or -X.
    #[arg(short = 'b', long = "bootstrap-server", value_name = "BROKERS")]
    pub(crate) brokers: Option<String>,
    /// A producer property, Java or librdkafka name (security.protocol, sasl.*, ssl.*, linger.ms, …); repeatable; wins over -F.
    #[arg(short = 'X', value_name = "NAME=VALUE", value_parser = parse_pair)]
    pub(crate) props: Vec<(String, String)>,
    /// Producer properties from a Java properties file, as a provider's client.properties gives them (kcat's -F, the Java tools' --producer.config).
    #[arg(short = 'F', long = "producer.config", value_name = "FILE")]
    pub(crate) config_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
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
    /// Create, list and delete ACLs (kafka-acls.sh's flags).
    Acl {
        #[command(subcommand)]
        action: crate::acl::AclCmd,
    },
    /// List and describe consumer groups, read, reset and delete their offsets, delete them (kafka-consumer-groups.sh's flags).
    Group {
        #[command(subcommand)]
        action: crate::group::GroupCmd,
    },
    /// Delete a topic's records before an offset (kafka-delete-records.sh).
    Records {
        #[command(subcommand)]
        action: crate::group::RecordsCmd,
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
pub(crate) enum TopicCmd {
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
pub(crate) fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

/// The settings of a command: the -F file's, then -X's (which win).
pub(crate) fn settings(connect: &Connect) -> Result<Vec<(String, String)>, String> {
    let mut props = match &connect.config_file {
        Some(path) => {
            courier_kafka::config::read_properties_file(path).map_err(|e| e.to_string())?
        }
        None => Vec::new(),
    };
    // -X replaces the file's value for the same name (it is never set).
    props.retain(|(k, _)| !connect.props.iter().any(|(x, _)| x == k));
    props.extend(connect.props.iter().cloned());
    Ok(props)
}

impl Connect {
    /// The brokers: -b's, else the last `bootstrap.servers` (or
    /// librdkafka's `metadata.broker.list`) of `props`, as kcat takes them.
    pub(crate) fn brokers(&self, props: &[(String, String)]) -> Result<String, String> {
        if let Some(b) = &self.brokers {
            return Ok(b.clone());
        }
        props
            .iter()
            .rev()
            .find(|(k, _)| k == "bootstrap.servers" || k == "metadata.broker.list")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| {
                "no brokers: give -b BROKERS, or bootstrap.servers in -F FILE or -X".into()
            })
    }
}

/// What the commands read, from whichever subcommand was given.
#[derive(Debug, Default)]
pub(crate) struct Args {
    pub(crate) brokers: Option<String>,
    pub(crate) topic: Option<String>,
    pub(crate) key_sep: Option<String>,
    pub(crate) partition: Option<i32>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) reports: Option<Reports>,
    pub(crate) props: Vec<(String, String)>,
    pub(crate) num_records: Option<u64>,
    pub(crate) record_size: Option<usize>,
    pub(crate) throughput: Option<f64>,
    pub(crate) json: bool,
    pub(crate) transaction_records: Option<u64>,
}

pub(crate) fn usage(msg: &str) -> ExitCode {
    eprintln!("courier: {msg}\n(see courier --help)");
    ExitCode::from(2)
}

/// A producer builder with `props`, bootstrapping from `brokers` (which
/// win over a `bootstrap.servers` among them, as -b does in kcat).
pub(crate) fn builder(brokers: &str, props: &[(String, String)]) -> ProducerBuilder {
    let mut b = Producer::builder();
    for (k, v) in props {
        b = b.set(k, v);
    }
    b.bootstrap(brokers)
}

pub(crate) fn json_str(s: &str) -> String {
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

/// `courier: ERROR` on stderr, exit status 1.
pub(crate) fn failed(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("courier: {e}");
    ExitCode::from(1)
}

pub(crate) fn json_opt_str(s: Option<&str>) -> String {
    s.map_or("null".to_string(), json_str)
}
