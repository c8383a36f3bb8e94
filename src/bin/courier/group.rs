//! `courier group` (list, describe, read, reset and delete consumer
//! groups' offsets, with kafka-consumer-groups.sh's flags) and `courier
//! records delete` (kafka-delete-records.sh).

use std::process::ExitCode;

use courier_kafka::admin::{AdminOptions, GroupDescription};

use crate::admin::admin_options;
use crate::cli::{failed, json_opt_str, json_str, settings, usage, Connect};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum GroupCmd {
    /// List groups: name, state and type, tab-separated (kafka-consumer-groups.sh --list --state).
    #[command(after_help = "Examples:
  courier group list -b localhost:9092
  courier group list -b localhost:9092 --json

Text: 'GROUP<TAB>STATE<TAB>TYPE<TAB>PROTOCOL_TYPE' per group ('-' where the broker is too old to say).
JSON: [{\"group\": \"billing\", \"state\": \"Stable\", \"type\": \"classic\", \"protocol_type\": \"consumer\"}]")]
    List {
        #[command(flatten)]
        connect: Connect,
        /// One JSON array instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// Describe a group: state, assignor, members and what each is assigned (kafka-consumer-groups.sh --describe --members).
    #[command(after_help = "Examples:
  courier group describe -b localhost:9092 --group billing
  courier group describe -b localhost:9092 --group billing --json

Text:
  Group: billing	State: Stable	ProtocolType: consumer	Protocol: range	Coordinator: 1
  	Member: ID	ClientId: C	Host: /10.0.0.7	Assignment: orders-0,orders-1
JSON: {\"group\": \"billing\", \"state\": \"Stable\", \"protocol_type\": \"consumer\", \"protocol\": \"range\",
       \"coordinator\": 1, \"members\": [{\"member_id\": \"...\", \"group_instance_id\": null, \"client_id\": \"...\",
       \"client_host\": \"...\", \"assignment\": {\"orders\": [0, 1]}}]}
A group that does not exist is described with state Dead.")]
    Describe {
        #[command(flatten)]
        connect: Connect,
        /// The group.
        #[arg(short = 'g', long)]
        group: String,
        /// One JSON object instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// A group's committed offsets: topic, partition and offset, tab-separated.
    #[command(after_help = "Examples:
  courier group offsets -b localhost:9092 --group billing
  courier group offsets -b localhost:9092 --group billing --json

JSON: [{\"topic\": \"orders\", \"partition\": 0, \"offset\": 42, \"leader_epoch\": null, \"metadata\": null}]")]
    Offsets {
        #[command(flatten)]
        connect: Connect,
        /// The group.
        #[arg(short = 'g', long)]
        group: String,
        /// One JSON array instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// Set a group's offsets (kafka-consumer-groups.sh --reset-offsets --to-offset N --execute). The group must have no members.
    #[command(after_help = "Examples:
  courier group reset-offsets -b localhost:9092 --group billing --topic orders --to-offset 0
  courier group reset-offsets -b localhost:9092 --group billing --topic orders:0,2 --to-offset 1000

--topic T means every partition of T; T:0,2 only those. A group with members is refused
(UNKNOWN_MEMBER_ID): stop its consumers first. Prints 'TOPIC<TAB>PARTITION<TAB>OFFSET' per partition set.")]
    ResetOffsets {
        #[command(flatten)]
        connect: Connect,
        /// The group.
        #[arg(short = 'g', long)]
        group: String,
        /// A topic, or TOPIC:P,P for some of its partitions; repeatable.
        #[arg(long = "topic", value_name = "TOPIC[:P,P]", required = true)]
        topics: Vec<String>,
        /// The offset to set.
        #[arg(long, value_name = "OFFSET", value_parser = clap::value_parser!(i64).range(0..))]
        to_offset: i64,
    },
    /// Delete a group's offsets for a topic's partitions (kafka-consumer-groups.sh --delete-offsets).
    #[command(after_help = "Example:
  courier group delete-offsets -b localhost:9092 --group billing --topic orders
  courier group delete-offsets -b localhost:9092 --group billing --topic orders:1")]
    DeleteOffsets {
        #[command(flatten)]
        connect: Connect,
        /// The group.
        #[arg(short = 'g', long)]
        group: String,
        /// A topic, or TOPIC:P,P for some of its partitions; repeatable.
        #[arg(long = "topic", value_name = "TOPIC[:P,P]", required = true)]
        topics: Vec<String>,
    },
    /// Delete a group and its offsets (kafka-consumer-groups.sh --delete); it must have no members.
    #[command(after_help = "Example:
  courier group delete -b localhost:9092 --group billing")]
    Delete {
        #[command(flatten)]
        connect: Connect,
        /// The group.
        #[arg(short = 'g', long)]
        group: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum RecordsCmd {
    /// Delete a topic's records before an offset, per partition (kafka-delete-records.sh); prints each partition's new low watermark.
    #[command(after_help = "Examples:
  courier records delete -b localhost:9092 orders --before 0:1000 --before 1:1200
  courier records delete -b localhost:9092 orders --before 0:-1   (every record of partition 0)

Prints 'TOPIC<TAB>PARTITION<TAB>LOW_WATERMARK' per partition.")]
    Delete {
        #[command(flatten)]
        connect: Connect,
        /// The topic.
        topic: String,
        /// PARTITION:OFFSET: delete the partition's records before OFFSET (-1: all of them); repeatable.
        #[arg(long = "before", value_name = "PARTITION:OFFSET", required = true, value_parser = parse_before)]
        before: Vec<(i32, i64)>,
    },
}

/// `PARTITION:OFFSET`.
fn parse_before(s: &str) -> Result<(i32, i64), String> {
    let (p, o) = s
        .split_once(':')
        .ok_or_else(|| format!("expected PARTITION:OFFSET, got {s:?}"))?;
    let p = p
        .trim()
        .parse()
        .map_err(|e| format!("partition {p:?}: {e}"))?;
    let o = o.trim().parse().map_err(|e| format!("offset {o:?}: {e}"))?;
    Ok((p, o))
}

/// The admin options and brokers of `connect`, or the usage error.
fn reach(connect: &Connect) -> Result<(AdminOptions, String), ExitCode> {
    settings(connect)
        .and_then(|props| Ok((admin_options(&props)?, connect.brokers(&props)?)))
        .map_err(|e| usage(&e))
}

/// `--topic T` (every partition, from the topic's metadata) or
/// `--topic T:0,2`, as (topic, partition) pairs.
async fn partitions_of(
    opts: &AdminOptions,
    brokers: &str,
    topics: &[String],
) -> Result<Vec<(String, i32)>, ExitCode> {
    let mut out = Vec::new();
    for t in topics {
        match t.split_once(':') {
            Some((name, list)) => {
                for p in list.split(',') {
                    match p.trim().parse::<i32>() {
                        Ok(p) => out.push((name.to_string(), p)),
                        Err(e) => return Err(usage(&format!("--topic {t}: partition {p:?}: {e}"))),
                    }
                }
            }
            None => match courier_kafka::admin::describe_topic_with(opts, brokers, t).await {
                Ok(d) => out.extend(d.partitions.iter().map(|p| (t.clone(), p.partition))),
                Err(e) => return Err(failed(e)),
            },
        }
    }
    Ok(out)
}

fn describe_text(d: &GroupDescription) -> String {
    let mut out = format!(
        "Group: {}\tState: {}\tProtocolType: {}\tProtocol: {}\tCoordinator: {}\n",
        d.group_id, d.state, d.protocol_type, d.protocol, d.coordinator
    );
    for m in &d.members {
        let assigned: Vec<String> = m
            .assignment
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| format!("{t}-{p}")))
            .collect();
        out.push_str(&format!(
            "\tMember: {}\tClientId: {}\tHost: {}\tAssignment: {}\n",
            m.member_id,
            m.client_id,
            m.client_host,
            assigned.join(",")
        ));
    }
    out
}

fn describe_json(d: &GroupDescription) -> String {
    let members: Vec<String> = d
        .members
        .iter()
        .map(|m| {
            let assignment: Vec<String> = m
                .assignment
                .iter()
                .map(|(t, ps)| {
                    let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                    format!("{}: [{}]", json_str(t), ps.join(", "))
                })
                .collect();
            format!(
                "{{\"member_id\": {}, \"group_instance_id\": {}, \"client_id\": {}, \"client_host\": {}, \"assignment\": {{{}}}}}",
                json_str(&m.member_id),
                json_opt_str(m.group_instance_id.as_deref()),
                json_str(&m.client_id),
                json_str(&m.client_host),
                assignment.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"group\": {}, \"state\": {}, \"protocol_type\": {}, \"protocol\": {}, \"coordinator\": {}, \"members\": [{}]}}",
        json_str(&d.group_id),
        json_str(&d.state),
        json_str(&d.protocol_type),
        json_str(&d.protocol),
        d.coordinator,
        members.join(", ")
    )
}

/// `courier group …`.
pub(crate) async fn group(action: GroupCmd) -> ExitCode {
    use courier_kafka::admin as a;
    match action {
        GroupCmd::List { connect, json } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let groups = match a::list_groups_with(&opts, &brokers).await {
                Ok(g) => g,
                Err(e) => return failed(e),
            };
            if json {
                let items: Vec<String> = groups
                    .iter()
                    .map(|g| {
                        format!(
                            "{{\"group\": {}, \"state\": {}, \"type\": {}, \"protocol_type\": {}}}",
                            json_str(&g.group_id),
                            json_opt_str(g.state.as_deref()),
                            json_opt_str(g.group_type.as_deref()),
                            json_str(&g.protocol_type)
                        )
                    })
                    .collect();
                println!("[{}]", items.join(", "));
            } else {
                for g in &groups {
                    println!(
                        "{}\t{}\t{}\t{}",
                        g.group_id,
                        g.state.as_deref().unwrap_or("-"),
                        g.group_type.as_deref().unwrap_or("-"),
                        g.protocol_type
                    );
                }
            }
            ExitCode::SUCCESS
        }
        GroupCmd::Describe {
            connect,
            group,
            json,
        } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            match a::describe_group_with(&opts, &brokers, &group).await {
                Ok(d) if json => println!("{}", describe_json(&d)),
                Ok(d) => print!("{}", describe_text(&d)),
                Err(e) => return failed(e),
            }
            ExitCode::SUCCESS
        }
        GroupCmd::Offsets {
            connect,
            group,
            json,
        } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let offsets = match a::list_group_offsets_with(&opts, &brokers, &group).await {
                Ok(o) => o,
                Err(e) => return failed(e),
            };
            if json {
                let items: Vec<String> = offsets
                    .iter()
                    .map(|o| {
                        format!(
                            "{{\"topic\": {}, \"partition\": {}, \"offset\": {}, \"leader_epoch\": {}, \"metadata\": {}}}",
                            json_str(&o.topic),
                            o.partition,
                            o.offset,
                            o.leader_epoch.map_or("null".to_string(), |e| e.to_string()),
                            json_opt_str(o.metadata.as_deref())
                        )
                    })
                    .collect();
                println!("[{}]", items.join(", "));
            } else {
                for o in &offsets {
                    println!("{}\t{}\t{}", o.topic, o.partition, o.offset);
                }
            }
            ExitCode::SUCCESS
        }
        GroupCmd::ResetOffsets {
            connect,
            group,
            topics,
            to_offset,
        } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let partitions = match partitions_of(&opts, &brokers, &topics).await {
                Ok(p) => p,
                Err(code) => return code,
            };
            let offsets: Vec<(&str, i32, i64)> = partitions
                .iter()
                .map(|(t, p)| (t.as_str(), *p, to_offset))
                .collect();
            match a::alter_group_offsets_with(&opts, &brokers, &group, &offsets).await {
                Ok(()) => {
                    for (t, p, o) in &offsets {
                        println!("{t}\t{p}\t{o}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        GroupCmd::DeleteOffsets {
            connect,
            group,
            topics,
        } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let partitions = match partitions_of(&opts, &brokers, &topics).await {
                Ok(p) => p,
                Err(code) => return code,
            };
            let pairs: Vec<(&str, i32)> =
                partitions.iter().map(|(t, p)| (t.as_str(), *p)).collect();
            match a::delete_group_offsets_with(&opts, &brokers, &group, &pairs).await {
                Ok(()) => {
                    for (t, p) in &pairs {
                        println!("deleted {group}'s offset of {t}-{p}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        GroupCmd::Delete { connect, group } => {
            let (opts, brokers) = match reach(&connect) {
                Ok(r) => r,
                Err(code) => return code,
            };
            match a::delete_group_with(&opts, &brokers, &group).await {
                Ok(()) => {
                    println!("deleted group {group}");
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
    }
}

/// `courier records …`.
pub(crate) async fn records(action: RecordsCmd) -> ExitCode {
    let RecordsCmd::Delete {
        connect,
        topic,
        before,
    } = action;
    let (opts, brokers) = match reach(&connect) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match courier_kafka::admin::delete_records_with(&opts, &brokers, &topic, &before).await {
        Ok(low) => {
            for (p, o) in low {
                println!("{topic}\t{p}\t{o}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}
