//! [`TokenFailure`]: why no OAUTHBEARER token could be had (its own file
//! so that `security/oidc.rs` can make one without importing
//! `security.rs`).

/// Why no token could be had for a connection.
#[derive(Debug)]
pub(crate) struct TokenFailure {
    /// What went wrong (naming the token endpoint, for OIDC).
    pub reason: String,
    /// Whether it may pass (the endpoint unreachable, or answering 408,
    /// 429 or 5xx): the connection then fails as an unreachable broker's
    /// does, and is retried; otherwise as a wrong password does.
    pub retriable: bool,
}
