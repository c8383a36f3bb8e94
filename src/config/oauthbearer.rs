//! OAUTHBEARER tokens from an OIDC identity provider (the client
//! credentials grant): the settings, by the Java client's names (KIP-768)
//! and librdkafka's. The fetching and refreshing is `src/security/oidc.rs`
//! (the `oidc` feature).

use std::path::PathBuf;
use std::time::Duration;

use super::secret::Secret;

/// `sasl.oauthbearer.method` (librdkafka's): where OAUTHBEARER tokens
/// come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OAuthBearerMethod {
    /// `default`: the application's `TokenProvider`, or unsecured JWTs
    /// (`enable.sasl.oauthbearer.unsecure.jwt`); OIDC still if
    /// `sasl.oauthbearer.token.endpoint.url` is set (the Java client needs
    /// no method setting).
    #[default]
    Default,
    /// `oidc`: from `sasl.oauthbearer.token.endpoint.url`, with the client
    /// credentials grant.
    Oidc,
}

/// OIDC client credentials (`sasl.oauthbearer.*`, `sasl.login.*`,
/// `https.ca.*`): what the built-in token fetcher needs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OidcConfig {
    /// `sasl.oauthbearer.method` (default `default`).
    pub method: OAuthBearerMethod,
    /// `sasl.oauthbearer.token.endpoint.url`: the identity provider's
    /// token endpoint (`https://…`; `http://` is taken, with a warning,
    /// since the client secret then travels in the clear). Setting it
    /// turns OIDC on, as in the Java client.
    pub token_endpoint_url: Option<String>,
    /// `sasl.oauthbearer.client.credentials.client.id` (Java 4.1; earlier
    /// Java clients take it as `clientId` in `sasl.jaas.config`), or
    /// librdkafka's `sasl.oauthbearer.client.id`.
    pub client_id: Option<String>,
    /// `sasl.oauthbearer.client.credentials.client.secret`, or
    /// librdkafka's `sasl.oauthbearer.client.secret`.
    pub client_secret: Option<Secret>,
    /// `sasl.oauthbearer.scope`: the `scope` asked for, if any.
    pub scope: Option<String>,
    /// `sasl.oauthbearer.header.urlencode` (Java 4.1): whether the client
    /// id and secret are form-URL-encoded before they are joined in the
    /// HTTP Basic header, as RFC 6749 section 2.3.1 says. Default true
    /// (Java's default is false; an id and secret of letters, digits,
    /// `-`, `.`, `_` and `*` are the same either way).
    pub header_urlencode: bool,
    /// `sasl.login.refresh.buffer.seconds` (default 300, at most 3600): a
    /// token is refreshed at 80 % of its lifetime, or earlier so that at
    /// least this much of it is left, unless the buffer is as long as
    /// the lifetime itself (then at 80 %).
    pub refresh_buffer: Duration,
    /// `sasl.login.retry.backoff.ms` (default 100 ms): the first wait
    /// before fetching a token again after a failure that may pass (no
    /// answer, HTTP 408, 429 or 5xx); it doubles after each.
    pub retry_backoff: Duration,
    /// `sasl.login.retry.backoff.max.ms` (default 10 s): how long one
    /// fetch keeps retrying, as in the Java client. After that the broker
    /// connection fails as if unreachable and is retried with
    /// `reconnect.backoff.ms`; records wait, up to `delivery.timeout.ms`.
    pub retry_backoff_max: Duration,
    /// `sasl.login.connect.timeout.ms` (default 10 s; Java has none):
    /// the limit on connecting to the token endpoint (TCP and TLS).
    pub connect_timeout: Duration,
    /// `sasl.login.read.timeout.ms` (default 30 s; Java has none): the
    /// limit on the request and its answer once connected.
    pub read_timeout: Duration,
    /// `https.ca.location` (librdkafka's): CA certificates (PEM) to trust
    /// for an `https` token endpoint. With neither this nor
    /// `https.ca.pem`, the platform's trusted roots.
    pub https_ca_location: Option<PathBuf>,
    /// `https.ca.pem` (librdkafka's): the same, inline.
    pub https_ca_pem: Option<String>,
}

impl OidcConfig {
    /// Whether OAUTHBEARER tokens come from the token endpoint.
    pub fn enabled(&self) -> bool {
        self.method == OAuthBearerMethod::Oidc || self.token_endpoint_url.is_some()
    }
}

impl Default for OidcConfig {
    fn default() -> Self {
        OidcConfig {
            method: OAuthBearerMethod::Default,
            token_endpoint_url: None,
            client_id: None,
            client_secret: None,
            scope: None,
            header_urlencode: true,
            refresh_buffer: Duration::from_secs(300),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            https_ca_location: None,
            https_ca_pem: None,
        }
    }
}
