//! TLS and SASL for broker connections, built once from the settings
//! (`security.protocol`, `ssl.*`, `sasl.*`) and shared by every
//! connection: a rustls client configuration (ring as its crypto
//! provider) and the SASL credentials. The exchange itself runs in
//! the connection layer (`src/connection.rs`); the mechanisms' bytes
//! are in `src/protocol/sasl.rs`.
//!
//! Errors in the settings (an unreadable PEM file, a key that does not
//! parse) are reported by `build()` as a `ConfigError` naming the
//! property.
//!
//! OAUTHBEARER tokens come from the application's [`TokenProvider`], from
//! an OIDC token endpoint (`oidc.rs`, the `oidc` feature), or are
//! unsecured JWTs for test brokers ([`UnsecuredJwt`]).

#[cfg(feature = "oidc")]
mod oidc;
mod token_failure;
pub(crate) use token_failure::TokenFailure;

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::config::{ConfigError, Secret, SecurityConfig};
use crate::protocol::sasl::Mechanism;

/// How connections to brokers are secured.
pub(crate) struct Security {
    /// TLS, for `SSL` and `SASL_SSL`.
    pub(crate) tls: Option<Arc<ClientConfig>>,
    /// SASL, for `SASL_PLAINTEXT` and `SASL_SSL`.
    pub(crate) sasl: Option<SaslCredentials>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// A SASL mechanism and its credentials (the password never printed).
#[derive(Clone)]
pub(crate) struct SaslCredentials {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: Secret,
    /// OAUTHBEARER's tokens.
    pub tokens: Option<Tokens>,
}

/// Where OAUTHBEARER tokens come from.
#[derive(Clone)]
pub(crate) enum Tokens {
    /// The application's provider, or unsecured JWTs.
    Provider(Arc<dyn TokenProvider>),
    /// The OIDC token endpoint.
    #[cfg(feature = "oidc")]
    Oidc(Arc<oidc::OidcTokens>),
}

impl Tokens {
    /// A token for a new connection.
    pub(crate) async fn token(&self) -> Result<String, TokenFailure> {
        match self {
            // The application's errors fail the connection's records at
            // once, as before: a provider retries inside if it wants to.
            Tokens::Provider(p) => p.token().await.map_err(|reason| TokenFailure {
                reason,
                retriable: false,
            }),
            #[cfg(feature = "oidc")]
            Tokens::Oidc(o) => o.token().await,
        }
    }
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Supplies OAUTHBEARER tokens (how Confluent Cloud, AWS MSK IAM and OIDC
/// tokens reach the producer). Asked on every new connection, so it
/// should hand out a cached token until that one is close to expiring.
pub trait TokenProvider: Send + Sync + 'static {
    /// A current token (the compact JWS/JWT string), or why none can be
    /// had (the connection then fails with an authentication error).
    fn token(&self) -> futures::future::BoxFuture<'_, Result<String, String>>;
}

/// Kafka's unsecured JWTs (`alg: none`) for one principal: what
/// `enable.sasl.oauthbearer.unsecure.jwt=true` with
/// `sasl.oauthbearer.config=principal=NAME` gives. Only a broker with the
/// unsecured validator (tests, development) accepts them.
#[derive(Debug, Clone)]
pub struct UnsecuredJwt {
    /// The `sub` claim.
    pub principal: String,
    /// Each token's lifetime.
    pub lifetime: std::time::Duration,
}

impl TokenProvider for UnsecuredJwt {
    fn token(&self) -> futures::future::BoxFuture<'_, Result<String, String>> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let jwt = crate::protocol::sasl::unsecured_jwt(
            &self.principal,
            now,
            self.lifetime.as_secs().max(1),
        );
        Box::pin(async move { Ok(jwt) })
    }
}

impl Security {
    /// The security for `config`, or `None` for `PLAINTEXT`. Reads the PEM
    /// files named; call it once, when the producer is built. `tokens`
    /// serves OAUTHBEARER (else `enable.sasl.oauthbearer.unsecure.jwt`).
    pub(crate) fn from_config(
        config: &SecurityConfig,
        tokens: Option<Arc<dyn TokenProvider>>,
    ) -> Result<Option<Arc<Security>>, ConfigError> {
        let p = config.protocol;
        if !p.tls() && !p.sasl() {
            return Ok(None);
        }
        let tls = if p.tls() {
            Some(Arc::new(tls_config(config)?))
        } else {
            None
        };
        let sasl = if p.sasl() {
            match (
                config.sasl_mechanism,
                &config.sasl_username,
                &config.sasl_password,
            ) {
                (Some(Mechanism::OAuthBearer), _, _) => Some(SaslCredentials {
                    mechanism: Mechanism::OAuthBearer,
                    username: String::new(),
                    password: Secret::default(),
                    tokens: Some(match tokens {
                        Some(t) => Tokens::Provider(t),
                        None if config.oidc.enabled() => oidc_tokens(config)?,
                        None => Tokens::Provider(unsecured_tokens(config)?),
                    }),
                }),
                (Some(mechanism), Some(username), Some(password)) => Some(SaslCredentials {
                    mechanism,
                    username: username.clone(),
                    password: password.clone(),
                    tokens: None,
                }),
                _ => {
                    return Err(ConfigError::Inconsistent(
                        "security.protocol SASL_* needs sasl.mechanism, sasl.username and sasl.password".into(),
                    ))
                }
            }
        } else {
            None
        };
        Ok(Some(Arc::new(Security { tls, sasl })))
    }
}

/// The OIDC token fetcher the settings describe, or why there is none.
fn oidc_tokens(config: &SecurityConfig) -> Result<Tokens, ConfigError> {
    if config.oauthbearer_unsecure_jwt {
        return Err(ConfigError::Inconsistent(
            "enable.sasl.oauthbearer.unsecure.jwt=true contradicts OIDC (sasl.oauthbearer.method=oidc or sasl.oauthbearer.token.endpoint.url); set one".into(),
        ));
    }
    #[cfg(feature = "oidc")]
    {
        Ok(Tokens::Oidc(Arc::new(oidc::OidcTokens::from_config(
            &config.oidc,
        )?)))
    }
    #[cfg(not(feature = "oidc"))]
    {
        Err(ConfigError::Inconsistent(
            "OIDC (sasl.oauthbearer.method=oidc or sasl.oauthbearer.token.endpoint.url) needs Courier built with its `oidc` feature".into(),
        ))
    }
}

/// The unsecured-JWT provider the settings ask for, or why they do not.
fn unsecured_tokens(config: &SecurityConfig) -> Result<Arc<dyn TokenProvider>, ConfigError> {
    if !config.oauthbearer_unsecure_jwt {
        return Err(ConfigError::Inconsistent(
            "sasl.mechanism=OAUTHBEARER needs a token provider (ProducerBuilder::token_provider), or enable.sasl.oauthbearer.unsecure.jwt=true for a test broker".into(),
        ));
    }
    let text = config.oauthbearer_config.clone().unwrap_or_default();
    let mut principal = None;
    let mut lifetime = 3600u64;
    for field in text.split_whitespace() {
        match field.split_once('=') {
            Some(("principal", v)) => principal = Some(v.to_string()),
            Some(("lifeSeconds", v)) => {
                lifetime = v.parse().map_err(|_| {
                    invalid(
                        "sasl.oauthbearer.config",
                        &text,
                        "lifeSeconds is not a number",
                    )
                })?
            }
            _ => {}
        }
    }
    let principal = principal.ok_or_else(|| {
        invalid(
            "sasl.oauthbearer.config",
            &text,
            "unsecured JWTs need principal=NAME",
        )
    })?;
    Ok(Arc::new(UnsecuredJwt {
        principal,
        lifetime: std::time::Duration::from_secs(lifetime),
    }))
}

fn invalid(property: &str, value: &str, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidValue {
        property: property.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn tls_config(c: &SecurityConfig) -> Result<ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let cas: Vec<CertificateDer<'static>> = if let Some(path) = &c.ca_location {
        let shown = path.display().to_string();
        CertificateDer::pem_file_iter(path)
            .map_err(|e| invalid("ssl.ca.location", &shown, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("ssl.ca.location", &shown, e))?
    } else if let Some(pem) = &c.ca_pem {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("ssl.ca.pem", "(PEM)", e))?
    } else {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            return Err(ConfigError::Inconsistent(format!(
                "no ssl.ca.location or ssl.ca.pem, and no trusted roots found on this system ({} error(s))",
                found.errors.len()
            )));
        }
        found.certs
    };
    if c.ca_location.is_some() || c.ca_pem.is_some() {
        if cas.is_empty() {
            return Err(invalid(
                "ssl.ca.location",
                &c.ca_location
                    .as_ref()
                    .map_or("(PEM)".into(), |p| p.display().to_string()),
                "no certificate in it",
            ));
        }
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| invalid("ssl.ca.location", "(PEM)", e))?;
        }
    } else {
        roots.add_parsable_certificates(cas);
    }
    let roots = Arc::new(roots);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Inconsistent(format!("TLS: {e}")))?
        .with_root_certificates(roots.clone());
    let client_auth = client_certificate(c)?;
    let mut config = match client_auth {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid("ssl.certificate.location", "(certificate and key)", e))?,
        None => builder.with_no_client_auth(),
    };
    if !c.verify_hostname {
        tracing::warn!(
            "ssl.endpoint.identification.algorithm=none: brokers' certificates are checked against the CAs but not against their host names"
        );
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| ConfigError::Inconsistent(format!("TLS: {e}")))?;
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(AnyHostName(inner)));
    }
    Ok(config)
}

type ClientAuth = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_certificate(c: &SecurityConfig) -> Result<Option<ClientAuth>, ConfigError> {
    let chain: Vec<CertificateDer<'static>> = match (&c.certificate_location, &c.certificate_pem) {
        (Some(path), _) => {
            let shown = path.display().to_string();
            CertificateDer::pem_file_iter(path)
                .map_err(|e| invalid("ssl.certificate.location", &shown, e))?
                .collect::<Result<_, _>>()
                .map_err(|e| invalid("ssl.certificate.location", &shown, e))?
        }
        (None, Some(pem)) => CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("ssl.certificate.pem", "(PEM)", e))?,
        (None, None) => return Ok(None),
    };
    let key = match (&c.key_location, &c.key_pem) {
        (Some(path), _) => {
            let shown = path.display().to_string();
            PrivateKeyDer::from_pem_file(path)
                .map_err(|e| invalid("ssl.key.location", &shown, e))?
        }
        (None, Some(pem)) => PrivateKeyDer::from_pem_slice(pem.expose().as_bytes())
            .map_err(|e| invalid("ssl.key.pem", "(redacted)", e))?,
        (None, None) => {
            return Err(ConfigError::Inconsistent(
                "ssl.certificate.* needs ssl.key.*".into(),
            ))
        }
    };
    if chain.is_empty() {
        return Err(ConfigError::Inconsistent(
            "ssl.certificate.* holds no certificate".into(),
        ));
    }
    Ok(Some((chain, key)))
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is verified as
/// usual, a certificate for another host name is accepted.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
