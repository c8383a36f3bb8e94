//! OAUTHBEARER tokens from an OIDC identity provider: the client
//! credentials grant (RFC 6749 section 4.4), as the Java client's
//! `OAuthBearerLoginCallbackHandler` (KIP-768) and librdkafka's
//! `sasl.oauthbearer.method=oidc` do it (the `oidc` feature).
//!
//! - A fetch is one HTTP/1.1 `POST` to `sasl.oauthbearer.token.endpoint.url`
//!   (hyper's client over tokio; tokio-rustls for `https`) with
//!   `grant_type=client_credentials` (and `scope`), the client id and
//!   secret in an HTTP Basic header. The JSON answer's `access_token` is
//!   the token; its lifetime is the JWT's `exp` claim, or `expires_in`,
//!   whichever ends first; its `sub` claim, if any, is only logged.
//! - The token is cached and handed to every new broker connection until
//!   its refresh point: 80 % of its lifetime, moved earlier to leave
//!   `sasl.login.refresh.buffer.seconds` of it, unless that buffer is as
//!   long as the lifetime ([`refresh_after`]). The first connection after
//!   that point fetches a new one; concurrent connections share that one
//!   fetch. Brokers end an OAUTHBEARER session when its token expires
//!   (KIP-368, with `connections.max.reauth.ms` set), and Courier replaces
//!   a connection before its session ends, so each replacement asks here.
//! - All of it is async I/O inside the connection's own connect future
//!   (`Connection::connect`): no actor thread ever waits on the endpoint.
//! - Failures that may pass (no connection, a time-out, HTTP 408, 429 or
//!   5xx) are retried with exponential backoff from
//!   `sasl.login.retry.backoff.ms`, for at most
//!   `sasl.login.retry.backoff.max.ms` in all (the Java client's rule),
//!   unless the cached token is still valid, which is then used. After
//!   that the connection fails as an unreachable broker does and is
//!   retried: records wait, up to `delivery.timeout.ms`. An answer that
//!   retrying cannot mend (401, 400 and other 4xx, a body without
//!   `access_token`, a token without an expiry) fails the connection as
//!   a wrong password does: waiting records fail at once with
//!   `ErrorKind::Authentication`, naming the endpoint and the status.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::{ConfigError, OidcConfig, Secret};

use super::token_failure::TokenFailure;

fn invalid(property: &str, value: &str, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidValue {
        property: property.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// The token endpoint and what fetching from it needs; the cached token.
pub(crate) struct OidcTokens {
    /// The URL as given, for messages.
    url: String,
    uri: Uri,
    host: String,
    port: u16,
    tls: Option<Arc<ClientConfig>>,
    /// `Basic …`, built once (never printed: `Debug` shows the URL only).
    authorization: String,
    /// The form body, built once.
    body: String,
    refresh_buffer: Duration,
    retry_backoff: Duration,
    retry_backoff_max: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    /// The current token; held across a fetch, so that concurrent
    /// connections wait for one fetch rather than each making their own.
    cache: tokio::sync::Mutex<Option<Cached>>,
}

impl std::fmt::Debug for OidcTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcTokens")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// A token and when to stop handing it out.
struct Cached {
    token: String,
    refresh_at: Instant,
    expires_at: Instant,
}

/// A token as the endpoint gave it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub token: String,
    /// From now (the answer's arrival) to its expiry.
    pub lifetime: Duration,
    /// The JWT's `sub` claim, if it is a JWT with one.
    pub principal: Option<String>,
}

/// When a token of `lifetime` is refreshed, from when it was fetched: at
/// 80 % of it, or earlier so that `buffer` of it is left when the buffer
/// is shorter than the lifetime (as the Java client's
/// `sasl.login.refresh.window.factor` 0.8 and
/// `sasl.login.refresh.buffer.seconds`; there is no jitter or minimum
/// period, since a token is only fetched when a connection asks for one).
pub(crate) fn refresh_after(lifetime: Duration, buffer: Duration) -> Duration {
    let at = lifetime.mul_f64(0.8);
    if buffer < lifetime && lifetime - at < buffer {
        lifetime - buffer
    } else {
        at
    }
}

/// Whether an HTTP status is worth another try (the request timed out,
/// too many requests, the server failed) rather than a refusal.
pub(crate) fn retriable_status(status: u16) -> bool {
    matches!(status, 408 | 429) || status >= 500
}

/// `Basic base64(id:secret)`, each form-URL-encoded first when
/// `urlencode` (RFC 6749 section 2.3.1).
pub(crate) fn basic_authorization(id: &str, secret: &str, urlencode: bool) -> String {
    let enc = |s: &str| -> String {
        if urlencode {
            form_urlencoded::byte_serialize(s.as_bytes()).collect()
        } else {
            s.to_string()
        }
    };
    let pair = format!("{}:{}", enc(id), enc(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// The JWT claims read: `exp` (seconds since the epoch) and `sub`.
/// `None` for a token that is not a JWT with a JSON payload.
pub(crate) fn jwt_claims(token: &str) -> Option<(Option<u64>, Option<String>)> {
    let mut parts = token.split('.');
    let (_header, payload) = (parts.next()?, parts.next()?);
    parts.next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp").and_then(|e| {
        e.as_u64()
            .or_else(|| e.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    });
    let sub = claims
        .get("sub")
        .and_then(|s| s.as_str())
        .map(str::to_string);
    Some((exp, sub))
}

/// The token endpoint's JSON answer, read at `now` (since the epoch):
/// `access_token`, and a lifetime from the JWT's `exp` or the answer's
/// `expires_in` (a number, or a string of one), the shorter if both. A
/// token with neither has no known expiry and is refused. `exp` is
/// counted from `now` to the millisecond: a token issued late in a second
/// lives up to a second less than its whole-second claims say.
pub(crate) fn parse_token_response(body: &[u8], now: Duration) -> Result<Fetched, String> {
    let json: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("the answer is not JSON ({e}): {}", excerpt(body)))?;
    let token = json
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("the answer has no access_token: {}", excerpt(body)))?
        .to_string();
    let expires_in = json.get("expires_in").and_then(|e| {
        e.as_u64()
            .or_else(|| e.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .or_else(|| e.as_str().and_then(|s| s.trim().parse().ok()))
    });
    let (exp, principal) = jwt_claims(&token).unwrap_or((None, None));
    let from_exp = exp.map(|exp| Duration::from_secs(exp).saturating_sub(now));
    let expires_in = expires_in.map(Duration::from_secs);
    let lifetime = match (from_exp, expires_in) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => {
            return Err(
                "the token has no expiry: no exp claim and no expires_in in the answer".into(),
            )
        }
    };
    if lifetime.is_zero() {
        return Err("the token has already expired (exp or expires_in)".into());
    }
    Ok(Fetched {
        token,
        lifetime,
        principal,
    })
}

/// The start of a body, for an error message: its `error` and
/// `error_description` (RFC 6749 section 5.2) if it has them, else at
/// most 200 characters of it.
fn excerpt(body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(error) = json.get("error").and_then(|e| e.as_str()) {
            return match json.get("error_description").and_then(|d| d.as_str()) {
                Some(d) => format!("{error}: {d}"),
                None => error.to_string(),
            };
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None if text.is_empty() => "(empty body)".into(),
        None => text.to_string(),
    }
}

/// Why one fetch failed, and whether another may do better.
struct Failure {
    reason: String,
    retriable: bool,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl OidcTokens {
    /// The fetcher the settings describe, or the setting that is wrong.
    /// Reads `https.ca.location` if given.
    pub(crate) fn from_config(c: &OidcConfig) -> Result<OidcTokens, ConfigError> {
        let name = "sasl.oauthbearer.token.endpoint.url";
        let url = c.token_endpoint_url.clone().ok_or_else(|| {
            ConfigError::Inconsistent(format!(
                "sasl.oauthbearer.method=oidc needs {name} (the identity provider's token endpoint)"
            ))
        })?;
        let uri: Uri = url.parse().map_err(|e| invalid(name, &url, e))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(invalid(name, &url, "expected an http:// or https:// URL")),
        };
        let host = uri
            .host()
            .ok_or_else(|| invalid(name, &url, "no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let client_id = c.client_id.as_deref().filter(|s| !s.is_empty());
        let client_secret = c
            .client_secret
            .as_ref()
            .map(Secret::expose)
            .filter(|s| !s.is_empty());
        let (Some(id), Some(secret)) = (client_id, client_secret) else {
            return Err(ConfigError::Inconsistent(
                "OIDC needs sasl.oauthbearer.client.credentials.client.id and .client.secret (or librdkafka's sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret)".into(),
            ));
        };
        if c.retry_backoff_max < c.retry_backoff {
            return Err(ConfigError::Inconsistent(
                "sasl.login.retry.backoff.max.ms must be at least sasl.login.retry.backoff.ms"
                    .into(),
            ));
        }
        let tls = if https {
            Some(Arc::new(https_config(c)?))
        } else {
            tracing::warn!(
                url = %url,
                "the OIDC token endpoint is plain http: the client secret and tokens travel unencrypted"
            );
            None
        };
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.append_pair("grant_type", "client_credentials");
        if let Some(scope) = &c.scope {
            body.append_pair("scope", scope);
        }
        Ok(OidcTokens {
            url,
            uri,
            host,
            port,
            tls,
            authorization: basic_authorization(id, secret, c.header_urlencode),
            body: body.finish(),
            refresh_buffer: c.refresh_buffer,
            retry_backoff: c.retry_backoff,
            retry_backoff_max: c.retry_backoff_max,
            connect_timeout: c.connect_timeout,
            read_timeout: c.read_timeout,
            cache: tokio::sync::Mutex::new(None),
        })
    }

    /// The cached token while it is before its refresh point, else a new
    /// one (retried as the module says); a still-valid cached token if
    /// that fails.
    pub(crate) async fn token(&self) -> Result<String, TokenFailure> {
        let mut cache = self.cache.lock().await;
        let now = Instant::now();
        let valid = cache.as_ref().filter(|c| now < c.expires_at);
        if let Some(c) = valid.filter(|c| now < c.refresh_at) {
            return Ok(c.token.clone());
        }
        // With a token still valid, one attempt: the next connection
        // tries again, and this one goes on with the old token.
        let fetched = if valid.is_some() {
            self.fetch().await
        } else {
            self.fetch_with_retries().await
        };
        match fetched {
            Ok(f) => {
                let fetched_at = Instant::now();
                tracing::debug!(
                    url = %self.url,
                    principal = f.principal.as_deref().unwrap_or("(no sub claim)"),
                    lifetime_s = f.lifetime.as_secs(),
                    "OAUTHBEARER token fetched"
                );
                let token = f.token.clone();
                *cache = Some(Cached {
                    token: f.token,
                    refresh_at: fetched_at + refresh_after(f.lifetime, self.refresh_buffer),
                    expires_at: fetched_at + f.lifetime,
                });
                Ok(token)
            }
            Err(e) => match cache.as_ref().filter(|c| Instant::now() < c.expires_at) {
                Some(c) => {
                    tracing::warn!(url = %self.url, error = %e.reason, "OAUTHBEARER token refresh failed; the current token is still valid");
                    Ok(c.token.clone())
                }
                None => Err(TokenFailure {
                    reason: e.reason,
                    retriable: e.retriable,
                }),
            },
        }
    }

    /// Fetches until one succeeds, one fails for good, or
    /// `sasl.login.retry.backoff.max.ms` has passed (the Java client's
    /// rule: waits of `retry.backoff.ms`, doubling, cut to what is left).
    async fn fetch_with_retries(&self) -> Result<Fetched, Failure> {
        let end = Instant::now() + self.retry_backoff_max;
        let mut attempt = 0u32;
        loop {
            let e = match self.fetch().await {
                Ok(f) => return Ok(f),
                Err(e) if !e.retriable => return Err(e),
                Err(e) => e,
            };
            let left = end.saturating_duration_since(Instant::now());
            let wait = self
                .retry_backoff
                .saturating_mul(1u32 << attempt.min(20))
                .min(left);
            if wait.is_zero() {
                return Err(Failure {
                    reason: format!(
                        "{} (after {} attempt(s) in sasl.login.retry.backoff.max.ms)",
                        e.reason,
                        attempt + 1
                    ),
                    retriable: true,
                });
            }
            tracing::debug!(url = %self.url, error = %e.reason, ?wait, "OAUTHBEARER token fetch failed; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One `POST` to the token endpoint, and its answer read.
    async fn fetch(&self) -> Result<Fetched, Failure> {
        let url = &self.url;
        let again = |reason: String| Failure {
            reason: format!("token endpoint {url}: {reason}"),
            retriable: true,
        };
        let io = tokio::time::timeout(self.connect_timeout, self.connect())
            .await
            .map_err(|_| {
                again(format!(
                    "no connection within sasl.login.connect.timeout.ms ({} ms)",
                    self.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| Failure {
                reason: format!("token endpoint {url}: {}", e.reason),
                retriable: e.retriable,
            })?;
        let (status, body) = tokio::time::timeout(self.read_timeout, self.exchange(io))
            .await
            .map_err(|_| {
                again(format!(
                    "no answer within sasl.login.read.timeout.ms ({} ms)",
                    self.read_timeout.as_millis()
                ))
            })?
            .map_err(again)?;
        if !(200..300).contains(&status) {
            let reason = hyper::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            return Err(Failure {
                reason: format!(
                    "token endpoint {url} answered HTTP {status} {reason}: {}",
                    excerpt(&body)
                ),
                retriable: retriable_status(status),
            });
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        parse_token_response(&body, now).map_err(|e| Failure {
            reason: format!("token endpoint {url}: {e}"),
            retriable: false,
        })
    }

    /// TCP, and TLS for `https`.
    async fn connect(&self) -> Result<Box<dyn Io>, Failure> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| Failure {
                reason: format!("cannot connect: {e}"),
                retriable: true,
            })?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let name = ServerName::try_from(self.host.clone()).map_err(|e| Failure {
            reason: format!("{:?} is not a valid server name: {e}", self.host),
            retriable: false,
        })?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                // As for brokers: TLS's own verdict (an untrusted
                // certificate) will not mend; a cut handshake may.
                let verdict = e
                    .get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
                Failure {
                    reason: format!("TLS failed: {e}"),
                    retriable: !verdict,
                }
            })?;
        Ok(Box::new(stream))
    }

    /// The request on `io`, and the answer's status and body.
    async fn exchange(&self, io: Box<dyn Io>) -> Result<(u16, Bytes), String> {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| e.to_string())?;
        let authority = match self.uri.port_u16() {
            Some(p) => format!("{}:{p}", self.uri.host().unwrap_or_default()),
            None => self.uri.host().unwrap_or_default().to_string(),
        };
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let req = hyper::Request::post(path)
            .header(hyper::header::HOST, authority)
            .header(
                hyper::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::AUTHORIZATION, self.authorization.as_str())
            .header(hyper::header::CONNECTION, "close")
            .body(Full::new(Bytes::from(self.body.clone())))
            .map_err(|e| e.to_string())?;
        let exchange = async move {
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        };
        // The connection's own future drives the socket; it ends when the
        // server closes it (Connection: close), perhaps before `exchange`
        // has taken the body it already received.
        tokio::pin!(exchange, conn);
        tokio::select! {
            r = &mut exchange => r.map_err(|e| e.to_string()),
            c = &mut conn => {
                c.map_err(|e| e.to_string())?;
                exchange.await.map_err(|e| e.to_string())
            }
        }
    }
}

/// The TLS client for an `https` token endpoint: `https.ca.location` or
/// `https.ca.pem`, else the platform's trusted roots.
fn https_config(c: &OidcConfig) -> Result<ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let given: Option<(&str, String, Vec<CertificateDer<'static>>)> =
        match (&c.https_ca_location, &c.https_ca_pem) {
            (Some(path), _) => {
                let shown = path.display().to_string();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| invalid("https.ca.location", &shown, e))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| invalid("https.ca.location", &shown, e))?;
                Some(("https.ca.location", shown, certs))
            }
            (None, Some(pem)) => {
                let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| invalid("https.ca.pem", "(PEM)", e))?;
                Some(("https.ca.pem", "(PEM)".to_string(), certs))
            }
            (None, None) => None,
        };
    match given {
        Some((name, shown, certs)) => {
            if certs.is_empty() {
                return Err(invalid(name, &shown, "no certificate in it"));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| invalid(name, &shown, e))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(ConfigError::Inconsistent(format!(
                    "the https token endpoint needs trusted roots: no https.ca.location or https.ca.pem, and none found on this system ({} error(s))",
                    found.errors.len()
                )));
            }
            roots.add_parsable_certificates(found.certs);
        }
    }
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Inconsistent(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A JWT-shaped token with `claims` (unsigned: only read here).
    fn jwt(claims: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b(r#"{"alg":"RS256"}"#), b(claims))
    }

    #[test]
    fn a_jwt_answer_takes_its_lifetime_from_exp_and_its_principal_from_sub() {
        let token = jwt(r#"{"sub":"alice","exp":1060,"iat":1000}"#);
        let body = format!(r#"{{"access_token":"{token}","token_type":"Bearer"}}"#);
        let f = parse_token_response(body.as_bytes(), secs(1000)).unwrap();
        assert_eq!(f.token, token);
        assert_eq!(f.lifetime, Duration::from_secs(60));
        assert_eq!(f.principal.as_deref(), Some("alice"));
        // expires_in shorter than exp: the shorter wins; and it may be a
        // string.
        let body = format!(r#"{{"access_token":"{token}","expires_in":"30"}}"#);
        let f = parse_token_response(body.as_bytes(), secs(1000)).unwrap();
        assert_eq!(f.lifetime, Duration::from_secs(30));
        // Issued late in a second: exp counts from now, to the millisecond.
        let f = parse_token_response(body.as_bytes(), Duration::from_millis(1_040_750)).unwrap();
        assert_eq!(f.lifetime, Duration::from_millis(19_250));
    }

    #[test]
    fn an_opaque_token_needs_expires_in() {
        let f = parse_token_response(br#"{"access_token":"opaque","expires_in":300}"#, secs(5))
            .unwrap();
        assert_eq!(f.lifetime, Duration::from_secs(300));
        assert_eq!(f.principal, None);
        let e = parse_token_response(br#"{"access_token":"opaque"}"#, secs(5)).unwrap_err();
        assert!(e.contains("no expiry"), "{e}");
    }

    #[test]
    fn bad_answers_say_what_is_wrong() {
        let e = parse_token_response(b"<html>oops</html>", secs(0)).unwrap_err();
        assert!(
            e.contains("not JSON") && e.contains("<html>oops</html>"),
            "{e}"
        );
        let e = parse_token_response(br#"{"token_type":"Bearer"}"#, secs(0)).unwrap_err();
        assert!(e.contains("no access_token"), "{e}");
        let expired = jwt(r#"{"exp":10}"#);
        let body = format!(r#"{{"access_token":"{expired}"}}"#);
        let e = parse_token_response(body.as_bytes(), secs(20)).unwrap_err();
        assert!(e.contains("expired"), "{e}");
        assert_eq!(
            excerpt(br#"{"error":"invalid_client","error_description":"bad secret"}"#),
            "invalid_client: bad secret"
        );
        assert_eq!(excerpt(b""), "(empty body)");
    }

    #[test]
    fn refresh_at_80_percent_or_earlier_to_keep_the_buffer() {
        let s = Duration::from_secs;
        // An hour's token, 5 minutes' buffer: 80 % leaves 12 minutes.
        assert_eq!(refresh_after(s(3600), s(300)), s(2880));
        // Ten minutes: 80 % would leave 2, so at 5 minutes.
        assert_eq!(refresh_after(s(600), s(300)), s(300));
        // A buffer as long as the token: ignored, 80 %.
        assert_eq!(refresh_after(s(5), s(300)), s(4));
        assert_eq!(refresh_after(s(300), s(300)), s(240));
        // No buffer: 80 %.
        assert_eq!(refresh_after(s(100), s(0)), s(80));
    }

    #[test]
    fn statuses_worth_retrying() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(retriable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 405] {
            assert!(!retriable_status(s), "{s}");
        }
    }

    #[test]
    fn basic_credentials_are_form_url_encoded_first() {
        let decoded = |h: String| {
            let b64 = h.strip_prefix("Basic ").unwrap();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(
            decoded(basic_authorization("my client", "s:e/c+r=t", true)),
            "my+client:s%3Ae%2Fc%2Br%3Dt"
        );
        assert_eq!(
            decoded(basic_authorization("my client", "s:e/c", false)),
            "my client:s:e/c"
        );
    }

    #[test]
    fn settings_are_checked_when_built() {
        let mut c = OidcConfig {
            method: crate::config::OAuthBearerMethod::Oidc,
            ..OidcConfig::default()
        };
        let e = OidcTokens::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("sasl.oauthbearer.token.endpoint.url"), "{e}");
        c.token_endpoint_url = Some("ftp://idp/token".into());
        let e = OidcTokens::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("http:// or https://"), "{e}");
        c.token_endpoint_url = Some("http://127.0.0.1:1/token".into());
        let e = OidcTokens::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("client.id"), "{e}");
        c.client_id = Some("courier".into());
        c.client_secret = Some(Secret("s".into()));
        let t = OidcTokens::from_config(&c).unwrap();
        assert_eq!(t.body, "grant_type=client_credentials");
        assert_eq!(t.port, 1);
        c.scope = Some("kafka write".into());
        let t = OidcTokens::from_config(&c).unwrap();
        assert_eq!(t.body, "grant_type=client_credentials&scope=kafka+write");
    }

    /// An endpoint nothing listens on: a retriable failure that names the
    /// endpoint, after the retries the backoff settings allow.
    #[tokio::test]
    async fn an_unreachable_endpoint_is_retried_then_reported_as_passing() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let c = OidcConfig {
            token_endpoint_url: Some(format!("http://127.0.0.1:{port}/token")),
            client_id: Some("id".into()),
            client_secret: Some(Secret("secret".into())),
            retry_backoff: Duration::from_millis(1),
            retry_backoff_max: Duration::from_millis(20),
            ..OidcConfig::default()
        };
        let e = OidcTokens::from_config(&c)
            .unwrap()
            .token()
            .await
            .unwrap_err();
        assert!(e.retriable, "{}", e.reason);
        assert!(
            e.reason
                .contains(&format!("token endpoint http://127.0.0.1:{port}/token")),
            "{}",
            e.reason
        );
    }
}
