//! `courier topic` and `courier cluster`: the admin calls.

use std::process::ExitCode;

use crate::cli::{failed, json_opt_str, json_str, settings, usage, Connect, TopicCmd};

/// Connection options from `-X` properties (security.protocol, ssl.*,
/// sasl.*; the producer's settings are accepted and ignored here).
pub(crate) fn admin_options(
    props: &[(String, String)],
) -> Result<courier_kafka::admin::AdminOptions, String> {
    courier_kafka::admin::AdminOptions::from_properties(props.iter().map(|(k, v)| (k, v)))
        .map_err(|e| e.to_string())
}

/// Broker ids as `1,2,0` (kafka-topics.sh's form) or `[1, 2, 0]` (JSON).
pub(crate) fn id_list(ids: &[i32], sep: &str) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(sep)
}

pub(crate) fn describe_text(d: &courier_kafka::admin::TopicDescription) -> String {
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

pub(crate) fn describe_json(d: &courier_kafka::admin::TopicDescription) -> String {
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

pub(crate) async fn topic(action: TopicCmd) -> ExitCode {
    let connect = match &action {
        TopicCmd::Create { connect, .. }
        | TopicCmd::List { connect }
        | TopicCmd::Describe { connect, .. }
        | TopicCmd::Delete { connect, .. } => connect,
    };
    let (opts, brokers) = match settings(connect)
        .and_then(|props| Ok((admin_options(&props)?, connect.brokers(&props)?)))
    {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let brokers = brokers.as_str();
    match &action {
        TopicCmd::Create {
            name,
            partitions,
            replication_factor,
            configs,
            ..
        } => {
            match courier_kafka::admin::create_topic_with_configs(
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
        TopicCmd::List { .. } => match courier_kafka::admin::list_topics_with(&opts, brokers).await
        {
            Ok(topics) => {
                for (name, partitions) in topics {
                    println!("{name}\t{partitions}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => failed(e),
        },
        TopicCmd::Describe { name, json, .. } => {
            match courier_kafka::admin::describe_topic_with(&opts, brokers, name).await {
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
            match courier_kafka::admin::delete_topic_with(&opts, brokers, name).await {
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
pub(crate) async fn cluster(connect: Connect, json: bool) -> ExitCode {
    let (opts, brokers) = match settings(&connect)
        .and_then(|props| Ok((admin_options(&props)?, connect.brokers(&props)?)))
    {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let c = match courier_kafka::admin::describe_cluster_with(&opts, &brokers).await {
        Ok(c) => c,
        Err(e) => return failed(e),
    };
    let versions: Vec<(String, Option<i16>)> = c
        .api_versions
        .iter()
        .map(|v| (v.api.clone(), v.version))
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
