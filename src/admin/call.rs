//! What the admin calls share: the connection to a bootstrap broker (or
//! to another broker the cluster names), a broker's refusal as an
//! [`AdminError`], Metadata, and the group coordinator (FindCoordinator,
//! retried while the coordinator loads or moves, as the Java admin client
//! does).

use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::types::{text, AdminError, AdminOptions};
use crate::connection::Connection;
use crate::kafka_error::BrokerError;
use crate::protocol::ApiKey;

/// `Err(Refused)` for a non-zero `code`; `resource` names what it concerns
/// (a topic, `topic-partition`, a group, an ACL's resource).
pub(super) fn refused(
    resource: &str,
    code: i16,
    message: Option<&StrBytes>,
) -> Result<(), AdminError> {
    if code == 0 {
        return Ok(());
    }
    Err(AdminError::Refused {
        topic: resource.to_string(),
        code,
        message: message.map(|m| m.to_string()),
    })
}

/// A refusal for `resource` when the broker's answer holds no result for it.
pub(super) fn no_result(resource: &str, api: &str) -> AdminError {
    malformed(
        resource,
        format!("the {api} response holds no result for it"),
    )
}

/// A refusal for `resource` when the broker's answer cannot be read
/// (a missing entry, a value Kafka does not define): UNKNOWN_SERVER_ERROR
/// (-1) with what was wrong, never a default in its place.
pub(super) fn malformed(resource: &str, what: String) -> AdminError {
    AdminError::Refused {
        topic: resource.to_string(),
        code: -1,
        message: Some(what),
    }
}

/// A connection to the first bootstrap address that answers.
pub(super) async fn connect(
    bootstrap: &str,
    opts: &AdminOptions,
) -> Result<Connection, AdminError> {
    let mut last = None;
    for addr in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        match Connection::connect(addr, &opts.connection).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(AdminError::NoBootstrap, AdminError::from))
}

/// `host:port`, with an IPv6 host in brackets.
pub(super) fn address(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A connection to `addr`, or `conn` itself when that is where it goes.
pub(super) async fn connect_to(
    conn: Connection,
    addr: &str,
    opts: &AdminOptions,
) -> Result<Connection, AdminError> {
    if conn.addr() == addr {
        return Ok(conn);
    }
    Ok(Connection::connect(addr, &opts.connection).await?)
}

/// Metadata for `topics` (`None`: every topic; `Some(&[])`: none, only
/// brokers and cluster), never creating a topic.
pub(super) async fn metadata(
    conn: &mut Connection,
    topics: Option<&[&str]>,
) -> Result<MetadataResponse, AdminError> {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(text(t)))))
            .collect()
    });
    let req = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(false);
    Ok(conn.request(&req).await?)
}

/// The address of every live broker in `resp`, by id.
pub(super) fn broker_addresses(resp: &MetadataResponse) -> Vec<(i32, String)> {
    let mut brokers: Vec<(i32, String)> = resp
        .brokers
        .iter()
        .map(|b| (b.node_id.0, address(&b.host, b.port)))
        .collect();
    brokers.sort();
    brokers
}

/// How long coordinator errors are retried before the last one is
/// returned: the Java admin client retries them until its
/// `default.api.timeout.ms` (60 s); a command-line call wants an answer
/// sooner.
const COORDINATOR_RETRY_FOR: Duration = Duration::from_secs(15);

/// The errors after which the Java admin client asks again, finding the
/// coordinator anew: it is still loading the group (COORDINATOR_LOAD_IN_PROGRESS),
/// has none yet (COORDINATOR_NOT_AVAILABLE, while `__consumer_offsets` is
/// made), or has moved (NOT_COORDINATOR).
pub(super) fn coordinator_retriable(code: i16) -> bool {
    matches!(
        BrokerError::from_code(code),
        Some(
            BrokerError::CoordinatorLoadInProgress
                | BrokerError::CoordinatorNotAvailable
                | BrokerError::NotCoordinator
        )
    )
}

/// Backoff between coordinator retries: 100 ms doubling up to 1 s (the
/// Java client's `retry.backoff.ms` and `retry.backoff.max.ms`), for
/// [`COORDINATOR_RETRY_FOR`] at most.
pub(super) struct Retry {
    started: Instant,
    wait: Duration,
}

impl Retry {
    pub(super) fn new() -> Retry {
        Retry {
            started: Instant::now(),
            wait: Duration::from_millis(100),
        }
    }

    /// Waits before the next attempt; `false` when the time for retries is
    /// over (the caller returns the error it has).
    pub(super) async fn again(&mut self) -> bool {
        if self.started.elapsed() + self.wait > COORDINATOR_RETRY_FOR {
            return false;
        }
        tokio::time::sleep(self.wait).await;
        self.wait = (self.wait * 2).min(Duration::from_secs(1));
        true
    }
}

/// A connection to `group`'s coordinator (FindCoordinator, key type
/// group), asked of the first bootstrap broker that answers; retriable
/// coordinator errors are retried (see [`coordinator_retriable`]).
pub(super) async fn group_coordinator(
    opts: &AdminOptions,
    bootstrap: &str,
    group: &str,
) -> Result<(Connection, i32), AdminError> {
    let mut conn = connect(bootstrap, opts).await?;
    let mut retry = Retry::new();
    loop {
        match find_coordinator(&mut conn, group).await? {
            Ok((node, addr)) => return Ok((connect_to(conn, &addr, opts).await?, node)),
            Err(e) => {
                let code = match &e {
                    AdminError::Refused { code, .. } => *code,
                    _ => return Err(e),
                };
                if !(coordinator_retriable(code) && retry.again().await) {
                    return Err(e);
                }
            }
        }
    }
}

/// One FindCoordinator for `group`: its node id and address, or the
/// broker's refusal (inner `Err`); the outer `Err` is a failed request.
async fn find_coordinator(
    conn: &mut Connection,
    group: &str,
) -> Result<Result<(i32, String), AdminError>, AdminError> {
    // Key type 0: a group (1 is a transactional id).
    let req = FindCoordinatorRequest::default().with_key_type(0);
    // v4 asks for a list of keys (KIP-699); v1 to v3 for one.
    let batched = conn.versions().get(ApiKey::FindCoordinator) >= Some(4);
    let req = if batched {
        req.with_coordinator_keys(vec![text(group)])
    } else {
        req.with_key(text(group))
    };
    let resp = conn.request(&req).await?;
    let (code, message, node, host, port) = if batched {
        let Some(c) = resp.coordinators.iter().find(|c| c.key.as_str() == group) else {
            return Ok(Err(no_result(group, "FindCoordinator")));
        };
        (
            c.error_code,
            c.error_message.as_ref(),
            c.node_id.0,
            &c.host,
            c.port,
        )
    } else {
        (
            resp.error_code,
            resp.error_message.as_ref(),
            resp.node_id.0,
            &resp.host,
            resp.port,
        )
    };
    if let Err(e) = refused(group, code, message) {
        return Ok(Err(e));
    }
    if node < 0 || host.is_empty() {
        return Ok(Err(malformed(
            group,
            format!("FindCoordinator named no coordinator (node {node}, host {host:?})"),
        )));
    }
    Ok(Ok((node, address(host, port))))
}
