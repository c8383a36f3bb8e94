//! ACLs: create, describe and delete them (CreateAcls, DescribeAcls,
//! DeleteAcls, KIP-140 with KIP-290's pattern types), as the Java admin
//! client's `createAcls`, `describeAcls` and `deleteAcls` and
//! `kafka-acls.sh` do. In KRaft any broker takes them and hands changes
//! to the controller; the brokers' authorizers apply a change once they
//! have the metadata record, a moment after the call returns.

use std::fmt;
use std::str::FromStr;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::call::{connect, malformed, refused};
use super::types::{text, AdminError, AdminOptions};

/// Defines one of the ACL enums: its variants with their wire codes and
/// Java names, `code`, `from_code`, `name`, `Display` and a `FromStr`
/// that takes the Java name in any case, with or without underscores
/// (`IDEMPOTENT_WRITE`, `IdempotentWrite`, `idempotent-write`), as
/// `kafka-acls.sh` takes them.
macro_rules! acl_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $code:literal, $java:literal;)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every value, in wire-code order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The code the Kafka protocol sends for it.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value with wire code `code`, if Kafka defines one
            /// (0, `UNKNOWN`, is none).
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name for it (the Java enum constant), as
            /// `kafka-acls.sh --list` prints it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $java,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<$name, String> {
                let plain = |s: &str| -> String {
                    s.chars()
                        .filter(|c| *c != '_' && *c != '-')
                        .flat_map(char::to_lowercase)
                        .collect()
                };
                let want = plain(s);
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| plain(v.name()) == want)
                    .ok_or_else(|| {
                        let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                        format!("unknown {} {s:?} (one of {})", stringify!($name), names.join(", "))
                    })
            }
        }
    };
}

acl_enum! {
    /// What kind of resource an ACL is for (Java's `ResourceType`).
    ResourceType {
        /// Any kind (filters only).
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (named `kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (for delegation tokens: KIP-373).
        User = 7, "USER";
    }
}

acl_enum! {
    /// How an ACL's resource name matches resources (Java's `PatternType`,
    /// KIP-290).
    PatternType {
        /// Any pattern type (filters only).
        Any = 1, "ANY";
        /// Every ACL that applies to the filter's name: literal ones of that
        /// name or `*`, and prefixed ones of a prefix of it (filters only).
        Match = 2, "MATCH";
        /// The name itself (`*` meaning every resource).
        Literal = 3, "LITERAL";
        /// Every resource whose name starts with the name.
        Prefixed = 4, "PREFIXED";
    }
}

acl_enum! {
    /// What an ACL allows or denies (Java's `AclOperation`).
    AclOperation {
        /// Any operation (filters only).
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Read (consume; a group's offsets).
        Read = 3, "READ";
        /// Write (produce).
        Write = 4, "WRITE";
        /// Create topics.
        Create = 5, "CREATE";
        /// Delete topics, records, groups.
        Delete = 6, "DELETE";
        /// Alter (ACLs on the cluster, partitions of a topic).
        Alter = 7, "ALTER";
        /// Describe.
        Describe = 8, "DESCRIBE";
        /// Broker-to-broker requests.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce (a producer id without a transaction).
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        /// Two-phase commit transactions (KIP-939).
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
}

acl_enum! {
    /// Whether an ACL allows or denies (Java's `AclPermissionType`).
    AclPermission {
        /// Either (filters only).
        Any = 1, "ANY";
        /// Denies; a deny wins over any allow.
        Deny = 2, "DENY";
        /// Allows.
        Allow = 3, "ALLOW";
    }
}

/// One ACL (Java's `AclBinding`): `principal` from `host` is allowed or
/// denied `operation` on the resources the pattern names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct AclBinding {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource's name (`*` with [`PatternType::Literal`]: all of
    /// them; `kafka-cluster` for the cluster).
    pub resource_name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
    /// Who: `User:alice` (`User:*` for everyone).
    pub principal: String,
    /// From where: an IP address, or `*` for any host.
    pub host: String,
    /// What.
    pub operation: AclOperation,
    /// Allowed or denied.
    pub permission: AclPermission,
}

impl AclBinding {
    /// An ACL from any host (`*`, as `kafka-acls.sh` makes them without
    /// `--allow-host`).
    ///
    /// ```
    /// use courier_kafka::admin::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
    /// let acl = AclBinding::new(
    ///     ResourceType::Topic,
    ///     "orders",
    ///     PatternType::Literal,
    ///     "User:alice",
    ///     AclOperation::Write,
    ///     AclPermission::Allow,
    /// );
    /// assert_eq!(acl.host, "*");
    /// ```
    pub fn new(
        resource_type: ResourceType,
        resource_name: impl Into<String>,
        pattern_type: PatternType,
        principal: impl Into<String>,
        operation: AclOperation,
        permission: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: resource_name.into(),
            pattern_type,
            principal: principal.into(),
            host: "*".to_string(),
            operation,
            permission,
        }
    }

    /// This ACL, for `host` only.
    pub fn with_host(mut self, host: impl Into<String>) -> AclBinding {
        self.host = host.into();
        self
    }
}

impl fmt::Display for AclBinding {
    /// As `kafka-acls.sh --list` prints an ACL (its resource on a line
    /// before).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={}): (principal={}, host={}, operation={}, permissionType={})",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission
        )
    }
}

/// Which ACLs to describe or delete (Java's `AclBindingFilter`): `None` and
/// the `Any` values match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclFilter {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource's name.
    pub resource_name: Option<String>,
    /// How ACLs' names match it ([`PatternType::Match`]: every ACL that
    /// applies to the named resource).
    pub pattern_type: PatternType,
    /// The principal.
    pub principal: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The operation.
    pub operation: AclOperation,
    /// The permission.
    pub permission: AclPermission,
}

impl AclFilter {
    /// Every ACL.
    ///
    /// ```
    /// use courier_kafka::admin::{AclFilter, AclOperation, PatternType, ResourceType};
    /// // What kafka-acls.sh --list --topic orders --operation Write shows.
    /// let f = AclFilter::any()
    ///     .with_resource(ResourceType::Topic, "orders")
    ///     .with_pattern_type(PatternType::Literal)
    ///     .with_operation(AclOperation::Write);
    /// assert_eq!(f.principal, None);
    /// ```
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }

    /// ACLs for resources of `resource_type` named `name`.
    pub fn with_resource(mut self, resource_type: ResourceType, name: impl Into<String>) -> Self {
        self.resource_type = resource_type;
        self.resource_name = Some(name.into());
        self
    }

    /// ACLs for resources of `resource_type`, any name.
    pub fn with_resource_type(mut self, resource_type: ResourceType) -> Self {
        self.resource_type = resource_type;
        self
    }

    /// ACLs whose names match so.
    pub fn with_pattern_type(mut self, pattern_type: PatternType) -> Self {
        self.pattern_type = pattern_type;
        self
    }

    /// ACLs of `principal` (`User:alice`).
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// ACLs for `host`.
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// ACLs for `operation`.
    pub fn with_operation(mut self, operation: AclOperation) -> Self {
        self.operation = operation;
        self
    }

    /// ACLs that allow, or deny.
    pub fn with_permission(mut self, permission: AclPermission) -> Self {
        self.permission = permission;
        self
    }
}

impl From<&AclBinding> for AclFilter {
    /// The filter that matches exactly that ACL.
    fn from(b: &AclBinding) -> AclFilter {
        AclFilter {
            resource_type: b.resource_type,
            resource_name: Some(b.resource_name.clone()),
            pattern_type: b.pattern_type,
            principal: Some(b.principal.clone()),
            host: Some(b.host.clone()),
            operation: b.operation,
            permission: b.permission,
        }
    }
}

/// An [`AclBinding`] from a broker's codes; an unknown code is an error.
#[allow(clippy::too_many_arguments)]
fn binding(
    resource_type: i8,
    resource_name: &StrBytes,
    pattern_type: i8,
    principal: &StrBytes,
    host: &StrBytes,
    operation: i8,
    permission: i8,
    api: &str,
) -> Result<AclBinding, AdminError> {
    let name = resource_name.as_str();
    let bad = |what: &str, code: i8| {
        malformed(
            name,
            format!("{api} answered {what} code {code}, which Kafka does not define"),
        )
    };
    Ok(AclBinding {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| bad("resource type", resource_type))?,
        resource_name: name.to_string(),
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or_else(|| bad("pattern type", pattern_type))?,
        principal: principal.to_string(),
        host: host.to_string(),
        operation: AclOperation::from_code(operation).ok_or_else(|| bad("operation", operation))?,
        permission: AclPermission::from_code(permission)
            .ok_or_else(|| bad("permission type", permission))?,
    })
}

/// Creates `acls` (Java's `createAcls`; `kafka-acls.sh --add`). Creating
/// one that exists is no error. Needs ALTER on the cluster. The first
/// refusal is returned (with the ACL's resource name); the broker applies
/// each ACL on its own, so the others may have been created.
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// use courier_kafka::admin::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
/// // kafka-acls.sh --add --allow-principal User:alice --operation Write --topic orders
/// let acl = AclBinding::new(
///     ResourceType::Topic,
///     "orders",
///     PatternType::Literal,
///     "User:alice",
///     AclOperation::Write,
///     AclPermission::Allow,
/// );
/// courier_kafka::admin::create_acls("127.0.0.1:9092", &[acl]).await
/// # }
/// ```
pub async fn create_acls(bootstrap: &str, acls: &[AclBinding]) -> Result<(), AdminError> {
    create_acls_with(&AdminOptions::default(), bootstrap, acls).await
}

/// [`create_acls`] over connections made with `opts` (TLS, SASL).
pub async fn create_acls_with(
    opts: &AdminOptions,
    bootstrap: &str,
    acls: &[AclBinding],
) -> Result<(), AdminError> {
    if acls.is_empty() {
        return Ok(());
    }
    let mut conn = connect(bootstrap, opts).await?;
    let creations = acls
        .iter()
        .map(|a| {
            AclCreation::default()
                .with_resource_type(a.resource_type.code())
                .with_resource_name(text(&a.resource_name))
                .with_resource_pattern_type(a.pattern_type.code())
                .with_principal(text(&a.principal))
                .with_host(text(&a.host))
                .with_operation(a.operation.code())
                .with_permission_type(a.permission.code())
        })
        .collect();
    let resp = conn
        .request(&CreateAclsRequest::default().with_creations(creations))
        .await?;
    if resp.results.len() != acls.len() {
        return Err(malformed(
            &acls[0].resource_name,
            format!(
                "CreateAcls answered {} results for {} ACLs",
                resp.results.len(),
                acls.len()
            ),
        ));
    }
    for (a, r) in acls.iter().zip(&resp.results) {
        refused(&a.resource_name, r.error_code, r.error_message.as_ref())?;
    }
    Ok(())
}

/// The ACLs that `filter` matches (Java's `describeAcls`; `kafka-acls.sh
/// --list`), sorted. Needs DESCRIBE on the cluster.
///
/// ```no_run
/// # async fn run() -> Result<(), courier_kafka::admin::AdminError> {
/// use courier_kafka::admin::{AclFilter, ResourceType};
/// let acls = courier_kafka::admin::describe_acls(
///     "127.0.0.1:9092",
///     &AclFilter::any().with_resource_type(ResourceType::Topic),
/// )
/// .await?;
/// for acl in acls {
///     println!("{acl}");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn describe_acls(
    bootstrap: &str,
    filter: &AclFilter,
) -> Result<Vec<AclBinding>, AdminError> {
    describe_acls_with(&AdminOptions::default(), bootstrap, filter).await
}

/// [`describe_acls`] over connections made with `opts` (TLS, SASL).
pub async fn describe_acls_with(
    opts: &AdminOptions,
    bootstrap: &str,
    filter: &AclFilter,
) -> Result<Vec<AclBinding>, AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(filter.resource_type.code())
        .with_resource_name_filter(filter.resource_name.as_deref().map(text))
        .with_pattern_type_filter(filter.pattern_type.code())
        .with_principal_filter(filter.principal.as_deref().map(text))
        .with_host_filter(filter.host.as_deref().map(text))
        .with_operation(filter.operation.code())
        .with_permission_type(filter.permission.code());
    let resp = conn.request(&req).await?;
    let what = filter.resource_name.as_deref().unwrap_or("ACLs");
    refused(what, resp.error_code, resp.error_message.as_ref())?;
    let mut acls = Vec::new();
    for r in &resp.resources {
        for a in &r.acls {
            acls.push(binding(
                r.resource_type,
                &r.resource_name,
                r.pattern_type,
                &a.principal,
                &a.host,
                a.operation,
                a.permission_type,
                "DescribeAcls",
            )?);
        }
    }
    acls.sort();
    Ok(acls)
}

/// Deletes every ACL that one of `filters` matches (Java's `deleteAcls`;
/// `kafka-acls.sh --remove`) and returns them, sorted. Needs ALTER on the
/// cluster. A filter that matches nothing is no error.
pub async fn delete_acls(
    bootstrap: &str,
    filters: &[AclFilter],
) -> Result<Vec<AclBinding>, AdminError> {
    delete_acls_with(&AdminOptions::default(), bootstrap, filters).await
}

/// [`delete_acls`] over connections made with `opts` (TLS, SASL).
pub async fn delete_acls_with(
    opts: &AdminOptions,
    bootstrap: &str,
    filters: &[AclFilter],
) -> Result<Vec<AclBinding>, AdminError> {
    if filters.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = connect(bootstrap, opts).await?;
    let wire = filters
        .iter()
        .map(|f| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(f.resource_type.code())
                .with_resource_name_filter(f.resource_name.as_deref().map(text))
                .with_pattern_type_filter(f.pattern_type.code())
                .with_principal_filter(f.principal.as_deref().map(text))
                .with_host_filter(f.host.as_deref().map(text))
                .with_operation(f.operation.code())
                .with_permission_type(f.permission.code())
        })
        .collect();
    let resp = conn
        .request(&DeleteAclsRequest::default().with_filters(wire))
        .await?;
    let what = |f: &AclFilter| f.resource_name.clone().unwrap_or_else(|| "ACLs".into());
    if resp.filter_results.len() != filters.len() {
        return Err(malformed(
            &what(&filters[0]),
            format!(
                "DeleteAcls answered {} results for {} filters",
                resp.filter_results.len(),
                filters.len()
            ),
        ));
    }
    let mut deleted = Vec::new();
    for (f, r) in filters.iter().zip(&resp.filter_results) {
        refused(&what(f), r.error_code, r.error_message.as_ref())?;
        for m in &r.matching_acls {
            refused(&m.resource_name, m.error_code, m.error_message.as_ref())?;
            deleted.push(binding(
                m.resource_type,
                &m.resource_name,
                m.pattern_type,
                &m.principal,
                &m.host,
                m.operation,
                m.permission_type,
                "DeleteAcls",
            )?);
        }
    }
    deleted.sort();
    Ok(deleted)
}
