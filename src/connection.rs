//! One connection to one broker (TCP, or TLS over TCP, authenticated with
//! SASL when configured): the only code in Courier that touches a socket.
//!
//! A [`Connection`] writes request frames built by [`crate::protocol`] and
//! reads response frames with a [`FrameDecoder`], so the bytes-level logic
//! stays testable without I/O. On connect it negotiates API versions
//! (ApiVersions, with the KIP-511 fallback for brokers that do not know our
//! version) and uses the agreed version for every later request.
//!
//! With `security.protocol` SSL or SASL_SSL the TCP stream is wrapped in
//! TLS (rustls) before anything is sent; with SASL_* the connection
//! authenticates (SaslHandshake v1, then SaslAuthenticate, KIP-152) right
//! after ApiVersions and before any other request, on every connection,
//! bootstrap and metadata ones included.
//!
//! This type is deliberately plain async code with no actor inside: the
//! broker-connection actor owns one and drives it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::BytesMut;
use kafka_protocol::messages::{ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::kafka_error::ResponseError;
use crate::protocol::sasl::{oauthbearer_message, plain_message, Mechanism, ScramClient};
use crate::resolve::{targets, Resolver, Target};
use crate::security::{SaslCredentials, Security};

use crate::protocol::frame::{FrameDecoder, DEFAULT_MAX_FRAME};
use crate::protocol::message::{api_key, decode_response, encode_request};
use crate::protocol::versions::{api_versions_fallback, negotiate, supported, ApiVersions};
use crate::protocol::{ApiKey, ProtocolError};

/// Settings for one connection.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// `client.id`, sent in every request header.
    pub client_id: Option<String>,
    /// Time allowed for the first address's connection setup (TCP, TLS,
    /// ApiVersions, SASL): `socket.connection.setup.timeout.ms`. Each
    /// failed address doubles it for the next, up to `connect_timeout_max`.
    pub connect_timeout: Duration,
    /// `socket.connection.setup.timeout.max.ms`.
    pub connect_timeout_max: Duration,
    /// Time allowed for each request's response.
    pub request_timeout: Duration,
    /// The largest response frame accepted.
    pub max_response_frame: usize,
    /// TLS and SASL (`None`: plaintext).
    pub(crate) security: Option<Arc<Security>>,
    /// TCP keepalive on the socket (`socket.keepalive.enable`, librdkafka's
    /// name; off by default as there), so that an idle connection through
    /// a NAT or load balancer that drops silent flows is kept open or found
    /// dead by the kernel.
    pub keepalive: bool,
    /// `broker.address.family`: which of a host name's addresses to use.
    pub family: crate::config::AddressFamily,
    /// Whether the address is a bootstrap server whose name is replaced by
    /// its addresses' canonical names first
    /// (`client.dns.lookup=resolve_canonical_bootstrap_servers_only`).
    pub canonical: bool,
    /// Who looks names up (the system's resolver unless the application
    /// gave its own).
    pub(crate) resolver: Resolver,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            client_id: Some("courier".into()),
            connect_timeout: Duration::from_secs(10),
            connect_timeout_max: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            max_response_frame: DEFAULT_MAX_FRAME,
            security: None,
            keepalive: false,
            family: crate::config::AddressFamily::Any,
            canonical: false,
            resolver: Resolver::default(),
        }
    }
}

/// Why a connection failed. After any of these the connection is closed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// A socket error.
    #[error("I/O error talking to {addr}: {source}")]
    Io {
        /// The broker address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The broker sent bytes that do not parse, or its versions do not fit.
    #[error("protocol error from {addr}: {source}")]
    Protocol {
        /// The broker address.
        addr: String,
        /// The error.
        #[source]
        source: ProtocolError,
    },
    /// The broker did not answer in time.
    #[error("{addr} did not answer {what} within {timeout:?}")]
    Timeout {
        /// The broker address.
        addr: String,
        /// What was being waited for.
        what: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// The broker closed the connection.
    #[error("{addr} closed the connection")]
    Closed {
        /// The broker address.
        addr: String,
    },
    /// The request's API is not offered by this broker.
    #[error("{addr} does not support {api:?}")]
    Unsupported {
        /// The broker address.
        addr: String,
        /// The API.
        api: ApiKey,
    },
    /// TLS refused the connection (an untrusted CA, a certificate for
    /// another host name, an alert from the broker). A handshake the peer
    /// merely cut (EOF, reset) is `Io`, and retried.
    #[error("TLS with {addr} failed: {reason}")]
    Tls {
        /// The broker address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// No OAUTHBEARER token for now: the OIDC token endpoint is
    /// unreachable, or answered 408, 429 or 5xx, past the retries of
    /// `sasl.login.retry.backoff.max.ms`. Not a security verdict: the
    /// connection is retried as an unreachable broker's is.
    #[error("no OAUTHBEARER token to connect to {addr}: {reason}")]
    Token {
        /// The broker address.
        addr: String,
        /// Why (naming the token endpoint).
        reason: String,
    },
    /// SASL authentication failed (wrong password, unknown user, a
    /// mechanism the broker does not enable).
    #[error("SASL authentication with {addr} failed: {reason}")]
    Authentication {
        /// The broker address.
        addr: String,
        /// Why.
        reason: String,
    },
}

impl ConnectionError {
    /// An I/O error that carries rustls' own error is a TLS failure: in
    /// the handshake, or on a read or write after it (TLS 1.3 lets the
    /// broker refuse a missing client certificate only then, with an
    /// alert). Any other I/O error stays one.
    fn tls_alert(self, addr: &str) -> ConnectionError {
        match self {
            ConnectionError::Io { source, .. }
                if source
                    .get_ref()
                    .is_some_and(|e| e.downcast_ref::<rustls::Error>().is_some()) =>
            {
                ConnectionError::Tls {
                    addr: addr.to_string(),
                    reason: source.to_string(),
                }
            }
            other => other,
        }
    }

    /// The report kind of a failure that trying again cannot mend until
    /// the settings or the cluster change (failed TLS or authentication):
    /// records waiting for such a connection fail with it at once.
    pub fn security_kind(&self) -> Option<crate::report::ErrorKind> {
        match self {
            ConnectionError::Tls { .. } => Some(crate::report::ErrorKind::Tls),
            ConnectionError::Authentication { .. } => {
                Some(crate::report::ErrorKind::Authentication)
            }
            _ => None,
        }
    }
}

/// A broker connection's byte stream: TCP, or TLS over TCP.
#[derive(Debug)]
enum BrokerStream {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for BrokerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            BrokerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for BrokerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            BrokerStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            BrokerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            BrokerStream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            BrokerStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            BrokerStream::Tcp(s) => s.is_write_vectored(),
            BrokerStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            BrokerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            BrokerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A connected, version-negotiated broker connection.
#[derive(Debug)]
pub struct Connection {
    addr: String,
    stream: BrokerStream,
    read_buf: BytesMut,
    write_buf: BytesMut,
    decoder: FrameDecoder,
    next_correlation_id: i32,
    client_id: Option<StrBytes>,
    request_timeout: Duration,
    versions: ApiVersions,
    /// The SASL session's lifetime, when the broker limits it
    /// (`connections.max.reauth.ms`, KIP-368).
    session_lifetime: Option<Duration>,
}

/// OAUTHBEARER's token for a connection to `addr`: a failure that may
/// pass is [`ConnectionError::Token`] (retried), any other is
/// [`ConnectionError::Authentication`] (fails what waits, at once).
async fn oauthbearer_token(addr: &str, sasl: &SaslCredentials) -> Result<String, ConnectionError> {
    let Some(tokens) = &sasl.tokens else {
        return Err(ConnectionError::Authentication {
            addr: addr.to_string(),
            reason: "OAUTHBEARER without a token provider".into(),
        });
    };
    tokens.token().await.map_err(|e| {
        if e.retriable {
            ConnectionError::Token {
                addr: addr.to_string(),
                reason: e.reason,
            }
        } else {
            ConnectionError::Authentication {
                addr: addr.to_string(),
                reason: format!("no OAUTHBEARER token: {}", e.reason),
            }
        }
    })
}

/// A TCP connection to `target`, with SO_KEEPALIVE set before the
/// connect when `keepalive`.
async fn tcp_connect(target: &Target, keepalive: bool) -> std::io::Result<TcpStream> {
    let socket = if target.addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if keepalive {
        socket.set_keepalive(true)?;
    }
    socket.connect(target.addr).await
}

/// The setup time-out of a connect attempt after `failed` failed ones:
/// `socket.connection.setup.timeout.ms` doubled per failure up to
/// `.max.ms`, with 20 % jitter (Java's `ExponentialBackoff(timeout, 2,
/// max, 0.2)`). A maximum below the first time-out is the time-out.
pub fn setup_timeout(first: Duration, max: Duration, failed: u32) -> Duration {
    let first = first.min(max);
    crate::clock::backoff(first, max, failed)
}

/// How one connect attempt to a broker ended: the connection (or the last
/// error), and how many addresses failed on the way (each counts as a
/// failed attempt for the next setup time-out, as each address is one
/// attempt in Java).
#[derive(Debug)]
pub struct Attempt {
    /// The connection, or why the last address tried failed.
    pub result: Result<Connection, ConnectionError>,
    /// Addresses that failed before the result (all of them, on an error).
    pub failed: u32,
}

impl Connection {
    /// Connects to `addr` (`host:port`) and negotiates API versions:
    /// [`connect_attempt`](Self::connect_attempt) with no failures before.
    pub async fn connect(addr: &str, opts: &ConnectionOptions) -> Result<Self, ConnectionError> {
        Self::connect_attempt(addr, opts, 0).await.result
    }

    /// One connect attempt to `addr` (`host:port`): the name is looked up
    /// now (nothing is kept from an earlier attempt), and each of its
    /// addresses is tried in turn until one connects, each within its own
    /// setup time-out ([`setup_timeout`] after `failed_before` failed
    /// attempts and the ones of this attempt). A TLS or SASL refusal ends
    /// the attempt at once: another address of the same cluster would say
    /// the same.
    pub async fn connect_attempt(
        addr: &str,
        opts: &ConnectionOptions,
        failed_before: u32,
    ) -> Attempt {
        let timeout = |failed: u32| {
            setup_timeout(
                opts.connect_timeout,
                opts.connect_timeout_max,
                failed_before.saturating_add(failed),
            )
        };
        // OAUTHBEARER's token first, outside socket.connection.setup.timeout.ms:
        // an OIDC fetch has its own time-outs and retries (sasl.login.*).
        let token = match opts.security.as_deref().and_then(|s| s.sasl.as_ref()) {
            Some(sasl) if sasl.mechanism == Mechanism::OAuthBearer => {
                match oauthbearer_token(addr, sasl).await {
                    Ok(t) => Some(t),
                    Err(e) => {
                        return Attempt {
                            result: Err(e),
                            failed: 1,
                        }
                    }
                }
            }
            _ => None,
        };
        // The lookup counts against the first address's time-out: a
        // resolver that hangs is a connection that does not set up.
        let first = timeout(0);
        let found = tokio::time::timeout(
            first,
            targets(addr, opts.family, opts.canonical, &*opts.resolver.0),
        )
        .await;
        let found = match found {
            Ok(Ok(found)) => found,
            Ok(Err(source)) => {
                return Attempt {
                    result: Err(ConnectionError::Io {
                        addr: addr.to_string(),
                        source,
                    }),
                    failed: 1,
                }
            }
            Err(_) => {
                return Attempt {
                    result: Err(ConnectionError::Timeout {
                        addr: addr.to_string(),
                        what: "its name to resolve",
                        timeout: first,
                    }),
                    failed: 1,
                }
            }
        };
        let mut failed = 0;
        let mut last = None;
        for target in &found {
            let limit = timeout(failed);
            match Self::connect_to(addr, target, opts, token.clone(), limit).await {
                Ok(conn) => {
                    return Attempt {
                        result: Ok(conn),
                        failed,
                    }
                }
                Err(e) => {
                    failed += 1;
                    tracing::debug!(%addr, address = %target.addr, error = %e, "address failed");
                    let verdict = e.security_kind().is_some();
                    last = Some(e);
                    if verdict {
                        break;
                    }
                }
            }
        }
        Attempt {
            result: Err(last.expect("targets returns at least one address")),
            failed,
        }
    }

    /// Connects to one address of `addr` and negotiates API versions (and
    /// authenticates), within `timeout`.
    async fn connect_to(
        addr: &str,
        target: &Target,
        opts: &ConnectionOptions,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Self, ConnectionError> {
        // Errors name the address tried when it is not what was asked for.
        let label = if addr.parse::<std::net::SocketAddr>().ok() == Some(target.addr) {
            addr.to_string()
        } else {
            format!("{addr} ({})", target.addr)
        };
        let label = label.as_str();
        let connecting = async {
            let stream = tcp_connect(target, opts.keepalive)
                .await
                .map_err(|source| ConnectionError::Io {
                    addr: label.to_string(),
                    source,
                })?;
            let _ = stream.set_nodelay(true);
            let security = opts.security.as_deref();
            let stream =
                match security.and_then(|s| s.tls.clone()) {
                    Some(tls) => {
                        let host = target.host.as_str();
                        let name = rustls::pki_types::ServerName::try_from(host.to_string())
                            .map_err(|e| ConnectionError::Tls {
                                addr: label.to_string(),
                                reason: format!("{host:?} is not a valid server name: {e}"),
                            })?;
                        // Only a verdict of TLS itself (rustls' own error: a
                        // certificate refused, a name mismatch, an alert, a
                        // version refused) is a TLS failure, which fails what
                        // waits at once. An EOF or reset in the middle of the
                        // handshake (a broker restarting, a load balancer with
                        // no healthy backend) is a plain I/O error: back off
                        // and connect again, as for TCP, as the Java client
                        // and librdkafka do.
                        let tls = tokio_rustls::TlsConnector::from(tls)
                            .connect(name, stream)
                            .await
                            .map_err(|source| {
                                ConnectionError::Io {
                                    addr: label.to_string(),
                                    source,
                                }
                                .tls_alert(label)
                            })?;
                        BrokerStream::Tls(Box::new(tls))
                    }
                    None => BrokerStream::Tcp(stream),
                };
            let mut conn = Connection {
                addr: addr.to_string(),
                stream,
                read_buf: BytesMut::with_capacity(64 * 1024),
                write_buf: BytesMut::with_capacity(64 * 1024),
                decoder: FrameDecoder::new(opts.max_response_frame),
                next_correlation_id: 0,
                client_id: opts.client_id.clone().map(StrBytes::from_string),
                request_timeout: opts.request_timeout,
                versions: placeholder_versions(),
                session_lifetime: None,
            };
            conn.versions = conn.negotiate().await.map_err(|e| e.tls_alert(label))?;
            if let Some(sasl) = security.and_then(|s| s.sasl.as_ref()) {
                conn.authenticate(sasl, token).await?;
            }
            Ok(conn)
        };
        tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| ConnectionError::Timeout {
                addr: label.to_string(),
                what: "connect and ApiVersions",
                timeout,
            })?
    }

    /// The broker address this connection was made to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The versions agreed with this broker.
    pub fn versions(&self) -> &ApiVersions {
        &self.versions
    }

    /// How long the broker lets this connection's SASL session last
    /// (`connections.max.reauth.ms`, KIP-368), if it limits it: the
    /// connection must be authenticated again, or replaced, before then.
    pub fn session_lifetime(&self) -> Option<Duration> {
        self.session_lifetime
    }

    /// Sends `req` at the agreed version and waits for its response.
    pub async fn request<R: Request>(&mut self, req: &R) -> Result<R::Response, ConnectionError> {
        let api = api_key::<R>();
        let version = self.versions.get(api).ok_or(ConnectionError::Unsupported {
            addr: self.addr.clone(),
            api,
        })?;
        let timeout = self.request_timeout;
        tokio::time::timeout(timeout, self.round_trip::<R>(req, version))
            .await
            .map_err(|_| ConnectionError::Timeout {
                addr: self.addr.clone(),
                what: "a response",
                timeout,
            })?
    }

    /// Splits the connection for pipelining: a reader that yields response
    /// frames and a writer that sends encoded request frames, plus the
    /// agreed versions and the next free correlation id.
    pub fn into_pipelined(self) -> (FrameReader, FrameWriter, ApiVersions, i32) {
        // TCP splits without a lock; TLS shares one session between the
        // halves.
        let (read, write): (ReadSide, WriteSide) = match self.stream {
            BrokerStream::Tcp(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            tls => {
                let (r, w) = tokio::io::split(tls);
                (Box::new(r), Box::new(w))
            }
        };
        (
            FrameReader {
                addr: self.addr.clone(),
                half: read,
                buf: self.read_buf,
                decoder: self.decoder,
            },
            FrameWriter {
                addr: self.addr,
                half: write,
            },
            self.versions,
            self.next_correlation_id,
        )
    }

    async fn negotiate(&mut self) -> Result<ApiVersions, ConnectionError> {
        let mut version = supported(ApiKey::ApiVersions).map_or(0, |s| s.max);
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str(env!("CARGO_PKG_NAME"));
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        for _ in 0..3 {
            let correlation_id = self.write_request(&req, version).await?;
            let frame = self.read_frame().await?;
            let fallback = match decode_response::<ApiVersionsRequest>(frame.clone(), version) {
                Ok((id, resp)) if resp.error_code != UNSUPPORTED_VERSION => {
                    self.check_correlation(correlation_id, id)?;
                    return negotiate(&resp).map_err(|e| self.protocol(e));
                }
                Ok((_, resp)) => api_versions_fallback(&resp),
                Err(_) => None,
            };
            // KIP-511: a broker that cannot parse our version answers
            // UNSUPPORTED_VERSION, ideally in v0 and listing its own
            // ApiVersions range. Not every broker manages that (librdkafka's
            // mock lists nothing), so without a usable range fall back to
            // v0, which every broker accepts.
            let fallback = fallback.or_else(|| {
                decode_response::<ApiVersionsRequest>(frame, 0)
                    .ok()
                    .and_then(|(_, r)| api_versions_fallback(&r))
            });
            version = match fallback {
                Some(v) if v < version => v,
                _ if version > 0 => 0,
                _ => break,
            };
        }
        Err(self.protocol(ProtocolError::ApiVersionsError(UNSUPPORTED_VERSION)))
    }

    /// SASL authentication (KIP-152): SaslHandshake v1 names the
    /// mechanism, then its messages travel in SaslAuthenticate requests.
    /// OAUTHBEARER's `token` was fetched before the connection was made.
    async fn authenticate(
        &mut self,
        sasl: &SaslCredentials,
        token: Option<String>,
    ) -> Result<(), ConnectionError> {
        let addr = self.addr.clone();
        let failed = |reason: String| ConnectionError::Authentication {
            addr: addr.clone(),
            reason,
        };
        if self.versions.sasl_handshake.is_none() || self.versions.sasl_authenticate.is_none() {
            return Err(failed(
                "the broker offers no SaslHandshake v1 / SaslAuthenticate (is this a SASL listener?)"
                    .into(),
            ));
        }
        let name = sasl.mechanism.name();
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name));
        let resp = self.request(&handshake).await?;
        if resp.error_code != 0 {
            let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(format!(
                "the listener does not enable {name} ({:?}); it offers {offered:?}",
                ResponseError::try_from_code(resp.error_code)
            )));
        }
        match sasl.mechanism {
            Mechanism::Plain => {
                let message = plain_message(&sasl.username, sasl.password.expose());
                self.sasl_step(message).await?;
            }
            Mechanism::OAuthBearer => {
                let token =
                    token.ok_or_else(|| failed("OAUTHBEARER without a token provider".into()))?;
                let answer = self.sasl_step(oauthbearer_message(&token)).await?;
                // A refusal may come as an error message in the answer
                // (RFC 7628 3.2.2), which the client acknowledges.
                if !answer.is_empty() {
                    let _ = self.sasl_step(vec![0x01]).await;
                    return Err(failed(format!(
                        "OAUTHBEARER token refused: {}",
                        String::from_utf8_lossy(&answer)
                    )));
                }
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let mut nonce = [0u8; 24];
                getrandom::fill(&mut nonce)
                    .map_err(|e| failed(format!("no random bytes for a nonce: {e}")))?;
                let nonce = base64::engine::general_purpose::STANDARD.encode(nonce);
                let mut scram = ScramClient::new(
                    sasl.mechanism,
                    &sasl.username,
                    sasl.password.expose(),
                    &nonce,
                )
                .expect("a SCRAM mechanism");
                let server_first = self.sasl_step(scram.client_first()).await?;
                let client_final = scram
                    .client_final(&server_first)
                    .map_err(|e| failed(e.to_string()))?;
                let server_final = self.sasl_step(client_final).await?;
                scram
                    .verify_server_final(&server_final)
                    .map_err(|e| failed(e.to_string()))?;
            }
        }
        tracing::debug!(addr = %self.addr, mechanism = name, user = %sasl.username, "authenticated");
        Ok(())
    }

    /// One SaslAuthenticate round trip: our message out, the broker's in.
    async fn sasl_step(&mut self, message: Vec<u8>) -> Result<bytes::Bytes, ConnectionError> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from(message));
        let resp = self.request(&req).await?;
        if resp.error_code != 0 {
            let error = ResponseError::try_from_code(resp.error_code)
                .map_or_else(|| resp.error_code.to_string(), |e| format!("{e:?}"));
            let detail = resp
                .error_message
                .as_ref()
                .map(|m| format!(": {}", m.as_str()))
                .unwrap_or_default();
            return Err(ConnectionError::Authentication {
                addr: self.addr.clone(),
                reason: format!("{error}{detail}"),
            });
        }
        if resp.session_lifetime_ms > 0 {
            self.session_lifetime = Some(Duration::from_millis(resp.session_lifetime_ms as u64));
        }
        Ok(resp.auth_bytes)
    }

    async fn round_trip<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ConnectionError> {
        let correlation_id = self.write_request(req, version).await?;
        let frame = self.read_frame().await?;
        let (id, resp) = decode_response::<R>(frame, version).map_err(|e| self.protocol(e))?;
        self.check_correlation(correlation_id, id)?;
        Ok(resp)
    }

    async fn write_request<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<i32, ConnectionError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        self.write_buf.clear();
        encode_request(
            &mut self.write_buf,
            correlation_id,
            self.client_id.as_ref(),
            version,
            req,
        )
        .map_err(|e| self.protocol(e))?;
        let io = |source| ConnectionError::Io {
            addr: self.addr.clone(),
            source,
        };
        self.stream.write_all(&self.write_buf).await.map_err(io)?;
        // TLS may hold the last record back until flushed.
        self.stream.flush().await.map_err(io)?;
        Ok(correlation_id)
    }

    async fn read_frame(&mut self) -> Result<bytes::Bytes, ConnectionError> {
        read_frame(
            &mut self.stream,
            &mut self.read_buf,
            &self.decoder,
            &self.addr,
        )
        .await
    }

    fn check_correlation(&self, expected: i32, got: i32) -> Result<(), ConnectionError> {
        if expected == got {
            Ok(())
        } else {
            Err(self.protocol(ProtocolError::CorrelationMismatch { expected, got }))
        }
    }

    fn protocol(&self, source: ProtocolError) -> ConnectionError {
        ConnectionError::Protocol {
            addr: self.addr.clone(),
            source,
        }
    }
}

type ReadSide = Box<dyn AsyncRead + Send + Unpin>;
type WriteSide = Box<dyn AsyncWrite + Send + Unpin>;

/// The read half of a pipelined connection.
pub struct FrameReader {
    addr: String,
    half: ReadSide,
    buf: BytesMut,
    decoder: FrameDecoder,
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FrameReader {
    /// The next whole response frame body.
    pub async fn next_frame(&mut self) -> Result<bytes::Bytes, ConnectionError> {
        read_frame(&mut self.half, &mut self.buf, &self.decoder, &self.addr).await
    }
}

/// Reads until `buf` holds a whole frame and returns its body. The buffer
/// grows by what arrives, never by what a length prefix claims.
async fn read_frame<R: tokio::io::AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
    addr: &str,
) -> Result<bytes::Bytes, ConnectionError> {
    loop {
        let decoded = decoder
            .decode(buf)
            .map_err(|source| ConnectionError::Protocol {
                addr: addr.to_string(),
                source,
            })?;
        if let Some(frame) = decoded {
            return Ok(frame);
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        let n = io
            .read_buf(buf)
            .await
            .map_err(|source| ConnectionError::Io {
                addr: addr.to_string(),
                source,
            })?;
        if n == 0 {
            return Err(ConnectionError::Closed {
                addr: addr.to_string(),
            });
        }
    }
}

/// The write half of a pipelined connection.
pub struct FrameWriter {
    addr: String,
    half: WriteSide,
}

impl std::fmt::Debug for FrameWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameWriter")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FrameWriter {
    /// Writes `parts` back to back, with vectored writes: a Produce
    /// request's header bytes and its batches' own bytes go out without
    /// being copied together first.
    pub async fn write_parts(&mut self, parts: &[bytes::Bytes]) -> Result<(), ConnectionError> {
        use std::io::IoSlice;
        let io = |source| ConnectionError::Io {
            addr: self.addr.clone(),
            source,
        };
        // Position: part `i`, `off` bytes into it.
        let (mut i, mut off) = (0, 0);
        while i < parts.len() {
            let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[i][off..])
                .chain(parts[i + 1..].iter().map(|p| &p[..]))
                .filter(|s| !s.is_empty())
                .take(64)
                .map(IoSlice::new)
                .collect();
            if slices.is_empty() {
                break;
            }
            let mut n = self.half.write_vectored(&slices).await.map_err(io)?;
            if n == 0 {
                return Err(io(std::io::ErrorKind::WriteZero.into()));
            }
            while n > 0 || (i < parts.len() && parts[i].len() == off) {
                let left = parts[i].len() - off;
                if n >= left {
                    n -= left;
                    i += 1;
                    off = 0;
                } else {
                    off += n;
                    n = 0;
                }
            }
        }
        // TLS may hold the last record back until flushed (a no-op on TCP).
        self.half.flush().await.map_err(io)?;
        Ok(())
    }
}

const UNSUPPORTED_VERSION: i16 = 35;

fn placeholder_versions() -> ApiVersions {
    ApiVersions {
        api_versions: 0,
        metadata: 0,
        produce: 0,
        init_producer_id: None,
        create_topics: None,
        sasl_handshake: None,
        sasl_authenticate: None,
        find_coordinator: None,
        add_partitions_to_txn: None,
        add_offsets_to_txn: None,
        end_txn: None,
        txn_offset_commit: None,
        delete_topics: None,
        create_partitions: None,
        describe_configs: None,
        incremental_alter_configs: None,
        describe_quorum: None,
        create_acls: None,
        describe_acls: None,
        delete_acls: None,
        list_groups: None,
        describe_groups: None,
        offset_fetch: None,
        offset_commit: None,
        offset_delete: None,
        delete_groups: None,
        delete_records: None,
        get_telemetry_subscriptions: None,
        push_telemetry: None,
        transaction_feature: (-1, 0),
    }
}
