//! `courier acl`: create, list and delete ACLs, with kafka-acls.sh's
//! flags.

use std::process::ExitCode;

use courier_kafka::admin::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType,
};

use crate::admin::admin_options;
use crate::cli::{failed, json_str, settings, usage, Connect};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum AclCmd {
    /// Create ACLs (kafka-acls.sh --add): every principal × operation × resource given.
    #[command(after_help = "Examples:
  courier acl create -b localhost:9092 --allow-principal User:alice --operation Write --topic orders
  courier acl create -b localhost:9092 --allow-principal User:bob --operation Read --operation Describe \\
      --topic audit- --resource-pattern-type prefixed --group audit

Operations take Kafka's names in any case (Write, WRITE, IdempotentWrite, idempotent_write).")]
    Create {
        #[command(flatten)]
        connect: Connect,
        #[command(flatten)]
        acl: AclArgs,
    },
    /// List ACLs (kafka-acls.sh --list): all, or those of the resources and principal given.
    #[command(after_help = "Examples:
  courier acl list -b localhost:9092
  courier acl list -b localhost:9092 --topic orders --resource-pattern-type match
  courier acl list -b localhost:9092 --principal User:alice --json

Text: one line per ACL, as kafka-acls.sh prints them:
  ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL): (principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)
JSON: [{\"resource_type\": \"TOPIC\", \"resource_name\": \"orders\", \"pattern_type\": \"LITERAL\",
        \"principal\": \"User:alice\", \"host\": \"*\", \"operation\": \"WRITE\", \"permission\": \"ALLOW\"}]")]
    List {
        #[command(flatten)]
        connect: Connect,
        #[command(flatten)]
        resources: Resources,
        /// Only the ACLs of this principal (User:alice).
        #[arg(long, value_name = "PRINCIPAL")]
        principal: Option<String>,
        /// How the resources' names match: any (default), match, literal, prefixed.
        #[arg(long, value_name = "TYPE", default_value = "any")]
        resource_pattern_type: PatternType,
        /// One JSON array instead of the text lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete ACLs (kafka-acls.sh --remove): those of the resources given, narrowed by principal, operation and host when given; prints what was deleted.
    #[command(after_help = "Examples:
  courier acl delete -b localhost:9092 --allow-principal User:alice --operation Write --topic orders
  courier acl delete -b localhost:9092 --topic orders   (every ACL of the literal topic orders)")]
    Delete {
        #[command(flatten)]
        connect: Connect,
        #[command(flatten)]
        acl: AclArgs,
    },
}

/// The resources an ACL command names, as kafka-acls.sh's flags.
#[derive(Debug, clap::Args)]
pub(crate) struct Resources {
    /// A topic (`*`: every topic); repeatable.
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// A consumer group (`*`: every group); repeatable.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// The cluster.
    #[arg(long)]
    cluster: bool,
    /// A transactional id (`*`: every one); repeatable.
    #[arg(long = "transactional-id", value_name = "ID")]
    transactional_ids: Vec<String>,
}

impl Resources {
    fn list(&self) -> Vec<(ResourceType, String)> {
        let mut out: Vec<(ResourceType, String)> = Vec::new();
        out.extend(self.topics.iter().map(|t| (ResourceType::Topic, t.clone())));
        out.extend(self.groups.iter().map(|g| (ResourceType::Group, g.clone())));
        if self.cluster {
            out.push((ResourceType::Cluster, "kafka-cluster".into()));
        }
        out.extend(
            self.transactional_ids
                .iter()
                .map(|t| (ResourceType::TransactionalId, t.clone())),
        );
        out
    }
}

/// What `create` and `delete` take.
#[derive(Debug, clap::Args)]
pub(crate) struct AclArgs {
    #[command(flatten)]
    resources: Resources,
    /// A principal to allow (User:alice); repeatable.
    #[arg(long = "allow-principal", value_name = "PRINCIPAL")]
    allow: Vec<String>,
    /// A principal to deny; repeatable.
    #[arg(long = "deny-principal", value_name = "PRINCIPAL")]
    deny: Vec<String>,
    /// An operation (Read, Write, Describe, All, …); repeatable.
    #[arg(long = "operation", value_name = "OPERATION")]
    operations: Vec<AclOperation>,
    /// The host allowed or denied from (default: any, `*`).
    #[arg(
        long = "host",
        value_name = "HOST",
        alias = "allow-host",
        alias = "deny-host"
    )]
    host: Option<String>,
    /// How the resource names match: literal (default) or prefixed.
    #[arg(long, value_name = "TYPE", default_value = "literal")]
    resource_pattern_type: PatternType,
}

impl AclArgs {
    /// The principals with their permissions.
    fn principals(&self) -> Vec<(String, AclPermission)> {
        let allow = self.allow.iter().map(|p| (p.clone(), AclPermission::Allow));
        allow
            .chain(self.deny.iter().map(|p| (p.clone(), AclPermission::Deny)))
            .collect()
    }

    fn bindings(&self) -> Result<Vec<AclBinding>, String> {
        let resources = self.resources.list();
        let principals = self.principals();
        if resources.is_empty() || principals.is_empty() || self.operations.is_empty() {
            return Err(
                "give a resource (--topic, --group, --cluster, --transactional-id), \
                 a principal (--allow-principal, --deny-principal) and an --operation"
                    .into(),
            );
        }
        let mut out = Vec::new();
        for (rt, name) in &resources {
            for (principal, permission) in &principals {
                for op in &self.operations {
                    let mut b = AclBinding::new(
                        *rt,
                        name,
                        self.resource_pattern_type,
                        principal,
                        *op,
                        *permission,
                    );
                    if let Some(h) = &self.host {
                        b = b.with_host(h);
                    }
                    out.push(b);
                }
            }
        }
        Ok(out)
    }

    /// The filters of `delete`: each resource, narrowed by each principal
    /// and operation given (none given: any).
    fn filters(&self) -> Result<Vec<AclFilter>, String> {
        let resources = self.resources.list();
        if resources.is_empty() {
            return Err(
                "give a resource (--topic, --group, --cluster, --transactional-id) to delete ACLs of"
                    .into(),
            );
        }
        let principals: Vec<Option<(String, AclPermission)>> = match self.principals() {
            p if p.is_empty() => vec![None],
            p => p.into_iter().map(Some).collect(),
        };
        let operations: Vec<AclOperation> = match &self.operations {
            o if o.is_empty() => vec![AclOperation::Any],
            o => o.clone(),
        };
        let mut out = Vec::new();
        for (rt, name) in &resources {
            for p in &principals {
                for op in &operations {
                    let mut f = AclFilter::any()
                        .with_resource(*rt, name)
                        .with_pattern_type(self.resource_pattern_type)
                        .with_operation(*op);
                    if let Some((principal, permission)) = p {
                        f = f.with_principal(principal).with_permission(*permission);
                    }
                    if let Some(h) = &self.host {
                        f = f.with_host(h);
                    }
                    out.push(f);
                }
            }
        }
        Ok(out)
    }
}

fn acl_json(a: &AclBinding) -> String {
    format!(
        "{{\"resource_type\": {}, \"resource_name\": {}, \"pattern_type\": {}, \"principal\": {}, \"host\": {}, \"operation\": {}, \"permission\": {}}}",
        json_str(a.resource_type.name()),
        json_str(&a.resource_name),
        json_str(a.pattern_type.name()),
        json_str(&a.principal),
        json_str(&a.host),
        json_str(a.operation.name()),
        json_str(a.permission.name()),
    )
}

/// `courier acl …`.
pub(crate) async fn acl(action: AclCmd) -> ExitCode {
    let connect = match &action {
        AclCmd::Create { connect, .. }
        | AclCmd::List { connect, .. }
        | AclCmd::Delete { connect, .. } => connect,
    };
    let (opts, brokers) = match settings(connect)
        .and_then(|props| Ok((admin_options(&props)?, connect.brokers(&props)?)))
    {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    match &action {
        AclCmd::Create { acl, .. } => {
            let bindings = match acl.bindings() {
                Ok(b) => b,
                Err(e) => return usage(&e),
            };
            match courier_kafka::admin::create_acls_with(&opts, &brokers, &bindings).await {
                Ok(()) => {
                    for b in &bindings {
                        println!("created {b}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        AclCmd::List {
            resources,
            principal,
            resource_pattern_type,
            json,
            ..
        } => {
            let mut filters: Vec<AclFilter> = resources
                .list()
                .into_iter()
                .map(|(rt, name)| AclFilter::any().with_resource(rt, name))
                .collect();
            if filters.is_empty() {
                filters.push(AclFilter::any());
            }
            let mut all = Vec::new();
            for f in filters {
                let mut f = f.with_pattern_type(*resource_pattern_type);
                if let Some(p) = principal {
                    f = f.with_principal(p);
                }
                match courier_kafka::admin::describe_acls_with(&opts, &brokers, &f).await {
                    Ok(acls) => all.extend(acls),
                    Err(e) => return failed(e),
                }
            }
            all.sort();
            all.dedup();
            if *json {
                let items: Vec<String> = all.iter().map(acl_json).collect();
                println!("[{}]", items.join(", "));
            } else {
                for a in &all {
                    println!("{a}");
                }
            }
            ExitCode::SUCCESS
        }
        AclCmd::Delete { acl, .. } => {
            let filters = match acl.filters() {
                Ok(f) => f,
                Err(e) => return usage(&e),
            };
            match courier_kafka::admin::delete_acls_with(&opts, &brokers, &filters).await {
                Ok(deleted) => {
                    for b in &deleted {
                        println!("deleted {b}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
    }
}
