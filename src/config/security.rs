//! The TLS and SASL settings (`security.protocol`, `ssl.*`, `sasl.*`) and
//! their checks.

use std::path::PathBuf;

use super::jaas;
use super::oauthbearer::OidcConfig;
use super::secret::Secret;
use crate::protocol::sasl::Mechanism;

/// `security.protocol`: how connections are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// `PLAINTEXT` (the default): TCP.
    #[default]
    Plaintext,
    /// `SSL`: TLS.
    Ssl,
    /// `SASL_PLAINTEXT`: SASL authentication over TCP.
    SaslPlaintext,
    /// `SASL_SSL`: SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections use TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// TLS and SASL settings, by their librdkafka / Java names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecurityConfig {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// `ssl.ca.location`: a PEM file of CA certificates to trust.
    pub ca_location: Option<PathBuf>,
    /// `ssl.ca.pem`: CA certificates in PEM, inline. With neither, the
    /// platform's trusted roots.
    pub ca_pem: Option<String>,
    /// `ssl.certificate.location`: the client's certificate chain (PEM),
    /// for mutual TLS.
    pub certificate_location: Option<PathBuf>,
    /// `ssl.certificate.pem`: the same, inline.
    pub certificate_pem: Option<String>,
    /// `ssl.key.location`: the client's private key (PEM).
    pub key_location: Option<PathBuf>,
    /// `ssl.key.pem`: the same, inline.
    pub key_pem: Option<Secret>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default)
    /// checks the broker's certificate is for its host name; `none` does
    /// not (a warning is logged).
    pub verify_hostname: bool,
    /// `sasl.mechanism` (or librdkafka's `sasl.mechanisms`).
    pub sasl_mechanism: Option<Mechanism>,
    /// `sasl.username`.
    pub sasl_username: Option<String>,
    /// `sasl.password`.
    pub sasl_password: Option<Secret>,
    /// `enable.sasl.oauthbearer.unsecure.jwt` (librdkafka's): with
    /// OAUTHBEARER and no token provider, make unsecured JWTs
    /// (`alg: none`), which only a test or development broker accepts.
    pub oauthbearer_unsecure_jwt: bool,
    /// `sasl.oauthbearer.config` (librdkafka's): for unsecured JWTs,
    /// `principal=NAME` and optionally `lifeSeconds=N` (default 3600).
    pub oauthbearer_config: Option<String>,
    /// OAUTHBEARER tokens from an OIDC token endpoint.
    pub oidc: OidcConfig,
    /// The Java client's `ssl.truststore.*` and `ssl.keystore.*`: only
    /// their PEM type can be read; the files are `ca_location`,
    /// `certificate_location` and `key_location`.
    pub(crate) java_stores: JavaStores,
    /// The login module `sasl.jaas.config` named, for the check that it
    /// serves `sasl.mechanism`.
    pub(crate) jaas_module: Option<String>,
}

/// What the Java store settings said, checked when the config is
/// validated (the type may come after the location).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct JavaStores {
    pub(super) truststore: bool,
    pub(super) truststore_type: Option<String>,
    pub(super) keystore: bool,
    pub(super) keystore_type: Option<String>,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            protocol: SecurityProtocol::Plaintext,
            ca_location: None,
            ca_pem: None,
            certificate_location: None,
            certificate_pem: None,
            key_location: None,
            key_pem: None,
            verify_hostname: true,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            oauthbearer_unsecure_jwt: false,
            oauthbearer_config: None,
            oidc: OidcConfig::default(),
            java_stores: JavaStores::default(),
            jaas_module: None,
        }
    }
}

impl SecurityConfig {
    /// SASL's mechanism and credentials, and each TLS file given once,
    /// a certificate with its key.
    pub(super) fn problem(&self) -> Result<(), String> {
        let s = self;
        s.java_stores.check()?;
        s.check_jaas_module()?;
        if s.protocol.sasl() {
            if s.sasl_mechanism.is_none() {
                return Err(
                    "security.protocol SASL_* needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)".into(),
                );
            }
            if s.sasl_mechanism != Some(Mechanism::OAuthBearer)
                && (s.sasl_username.is_none() || s.sasl_password.is_none())
            {
                return Err(
                    "security.protocol SASL_* needs sasl.username and sasl.password".into(),
                );
            }
        }
        if s.key_location.is_some() && s.key_pem.is_some()
            || s.certificate_location.is_some() && s.certificate_pem.is_some()
            || s.ca_location.is_some() && s.ca_pem.is_some()
        {
            return Err(
                "set each of ssl.ca, ssl.certificate and ssl.key once: as .location or as .pem"
                    .into(),
            );
        }
        let has_cert = s.certificate_location.is_some() || s.certificate_pem.is_some();
        let has_key = s.key_location.is_some() || s.key_pem.is_some();
        if has_cert != has_key {
            return Err(
                "a client certificate needs its key, and a key its certificate (ssl.certificate.* and ssl.key.*)".into(),
            );
        }
        Ok(())
    }
}

impl SecurityConfig {
    /// The login module of `sasl.jaas.config` serves `sasl.mechanism`.
    fn check_jaas_module(&self) -> Result<(), String> {
        let (Some(module), Some(mechanism)) = (&self.jaas_module, self.sasl_mechanism) else {
            return Ok(());
        };
        let serves = match module.as_str() {
            jaas::PLAIN => mechanism == Mechanism::Plain,
            jaas::SCRAM => matches!(mechanism, Mechanism::ScramSha256 | Mechanism::ScramSha512),
            _ => mechanism == Mechanism::OAuthBearer,
        };
        if serves {
            return Ok(());
        }
        Err(format!(
            "sasl.jaas.config's {module} does not serve sasl.mechanism={}",
            mechanism.name()
        ))
    }
}

impl JavaStores {
    /// A Java truststore or keystore file is read only as PEM; Java's
    /// default type, JKS, and PKCS12 are refused with how to convert.
    fn check(&self) -> Result<(), String> {
        let pem = |t: &Option<String>| t.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("PEM"));
        if self.truststore && !pem(&self.truststore_type) {
            return Err(format!(
                "ssl.truststore.location is a {} truststore, which Courier cannot read: export its \
                 certificates to PEM (keytool -exportcert -rfc -keystore FILE -alias ALIAS) and set \
                 ssl.ca.location, or set ssl.truststore.type=PEM if the file is PEM already",
                self.truststore_type.as_deref().unwrap_or("JKS (Java's default type)")
            ));
        }
        if self.keystore && !pem(&self.keystore_type) {
            return Err(format!(
                "ssl.keystore.location is a {} keystore, which Courier cannot read: convert it to PEM \
                 (openssl pkcs12 -in FILE -nodes) and set ssl.certificate.location and \
                 ssl.key.location, or set ssl.keystore.type=PEM if the file is PEM already",
                self.keystore_type.as_deref().unwrap_or("JKS (Java's default type)")
            ));
        }
        Ok(())
    }
}
