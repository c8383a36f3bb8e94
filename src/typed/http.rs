//! One HTTP/1.1 request to a schema registry: hyper's client over tokio,
//! tokio-rustls for `https` (the stack the `oidc` feature's token fetch
//! uses), a connection per request (look-ups are cached, so there are
//! few). Never on an actor thread: it runs in the serializing task.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A registry's address and what reaching it needs.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// The URL as given (without a trailing `/`), for messages.
    pub url: String,
    host: String,
    port: u16,
    authority: String,
    /// The path before the API's (`/apis/ccompat/v7` for Apicurio).
    base_path: String,
    tls: Option<Arc<ClientConfig>>,
}

/// Why a request got no answer: whether another try may do better.
#[derive(Debug)]
pub(crate) struct NoAnswer {
    pub reason: String,
    pub retriable: bool,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Endpoint {
    /// The endpoint at `url` (`http://` or `https://`, with or without a
    /// path prefix); `ca_pem` is a PEM file of trusted roots for https,
    /// else the platform's.
    pub fn parse(url: &str, ca_pem: Option<&str>) -> Result<Endpoint, String> {
        let trimmed = url.trim().trim_end_matches('/');
        let uri: Uri = trimmed.parse().map_err(|e| format!("{e}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("expected an http:// or https:// URL".into()),
        };
        let host = uri
            .host()
            .ok_or("no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let authority = match uri.port_u16() {
            Some(p) => format!("{}:{p}", uri.host().unwrap_or_default()),
            None => uri.host().unwrap_or_default().to_string(),
        };
        let tls = if https {
            Some(Arc::new(tls_config(ca_pem)?))
        } else {
            None
        };
        Ok(Endpoint {
            url: trimmed.to_string(),
            host,
            port,
            authority,
            base_path: uri.path().trim_end_matches('/').to_string(),
            tls,
        })
    }

    /// `method` on `path` (below the base path), with `body` as
    /// `application/vnd.schemaregistry.v1+json`; the status and body.
    pub async fn request(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<String>,
        authorization: Option<&str>,
        timeout: Duration,
    ) -> Result<(u16, Bytes), NoAnswer> {
        let work = async {
            let io = self.connect().await?;
            self.exchange(io, method, path, body, authorization)
                .await
                .map_err(|reason| NoAnswer {
                    reason,
                    retriable: true,
                })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| NoAnswer {
                reason: format!("no answer within {} ms", timeout.as_millis()),
                retriable: true,
            })?
    }

    async fn connect(&self) -> Result<Box<dyn Io>, NoAnswer> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| NoAnswer {
                reason: format!("cannot connect: {e}"),
                retriable: true,
            })?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let name = ServerName::try_from(self.host.clone()).map_err(|e| NoAnswer {
            reason: format!("{:?} is not a valid server name: {e}", self.host),
            retriable: false,
        })?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                let verdict = e
                    .get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
                NoAnswer {
                    reason: format!("TLS failed: {e}"),
                    retriable: !verdict,
                }
            })?;
        Ok(Box::new(stream))
    }

    async fn exchange(
        &self,
        io: Box<dyn Io>,
        method: hyper::Method,
        path: &str,
        body: Option<String>,
        authorization: Option<&str>,
    ) -> Result<(u16, Bytes), String> {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| e.to_string())?;
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base_path))
            .header(hyper::header::HOST, self.authority.as_str())
            .header(
                hyper::header::ACCEPT,
                "application/vnd.schemaregistry.v1+json, application/json",
            )
            .header(hyper::header::CONNECTION, "close");
        if body.is_some() {
            req = req.header(
                hyper::header::CONTENT_TYPE,
                "application/vnd.schemaregistry.v1+json",
            );
        }
        if let Some(a) = authorization {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| e.to_string())?;
        let exchange = async move {
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        };
        // The connection's future drives the socket; it may end (the
        // server closing, as asked) before `exchange` has taken the body.
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

/// The TLS client for an https registry: `ca_pem`'s roots, else the
/// platform's.
fn tls_config(ca_pem: Option<&str>) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    match ca_pem {
        Some(path) => {
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| format!("{path}: {e}"))? {
                let cert = cert.map_err(|e| format!("{path}: {e}"))?;
                roots.add(cert).map_err(|e| format!("{path}: {e}"))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
