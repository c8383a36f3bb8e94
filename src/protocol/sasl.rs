//! SASL mechanisms without I/O: the bytes a client sends in each
//! SaslAuthenticate request (KIP-152) and the checks on the broker's
//! answers. The connection drives the exchange (`connection.rs`).
//!
//! - PLAIN (RFC 4616): one message, `\0user\0password`.
//! - SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka KIP-84):
//!   client-first, server-first, client-final, server-final. The
//!   server-final message is checked, signature included: a broker may
//!   answer a wrong password with error code 0 and `e=invalid-proof` (Tansu
//!   does), and only the signature proves the broker knows the password.
//!
//! The primitives (HMAC, PBKDF2, SHA-2) are RustCrypto's.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The largest SCRAM iteration count accepted from a broker: a bound on
/// the PBKDF2 work a hostile broker can ask for (Kafka allows 4,096 to
/// 16,384).
pub const MAX_SCRAM_ITERATIONS: u32 = 100_000;

/// The smallest SCRAM iteration count accepted from a broker, as the Java
/// client's `ScramMechanism::minIterations` (RFC 7677 asks for at least
/// 4,096): a broker, or a man in the middle of a connection without TLS,
/// asking for fewer would make the proof it receives cheap to attack
/// offline.
pub const MIN_SCRAM_ITERATIONS: u32 = 4096;

/// A SASL mechanism Courier speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mechanism {
    /// `PLAIN`.
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628, KIP-255): a bearer token from a provider.
    OAuthBearer,
}

impl Mechanism {
    /// The name Kafka (and `sasl.mechanism`) uses.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Parses a `sasl.mechanism` value (case as Kafka writes it).
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "SCRAM-SHA-256" => Some(Mechanism::ScramSha256),
            "SCRAM-SHA-512" => Some(Mechanism::ScramSha512),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            _ => None,
        }
    }
}

/// Why a SASL exchange failed on the client's side of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// The broker refused the credentials (a SCRAM `e=` answer).
    #[error("authentication failed: {0}")]
    Refused(String),
    /// The broker's message is not what the mechanism allows.
    #[error("malformed SASL message from the broker: {0}")]
    Malformed(String),
    /// The broker's server-final signature is wrong: it does not know the
    /// password (or the exchange was tampered with).
    #[error("the broker's SCRAM signature does not verify")]
    BadServerSignature,
}

/// The single PLAIN message (RFC 4616), no authorization identity.
pub fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(2 + username.len() + password.len());
    m.push(0);
    m.extend_from_slice(username.as_bytes());
    m.push(0);
    m.extend_from_slice(password.as_bytes());
    m
}

/// The OAUTHBEARER client's first and only message (RFC 7628 section 3.1),
/// no authorization identity, no extensions.
pub fn oauthbearer_message(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// An unsecured JWT (`alg: none`) for `principal`, valid `lifetime_s`
/// seconds from `now_s`: what Kafka's unsecured OAUTHBEARER validator
/// (`OAuthBearerUnsecuredValidatorCallbackHandler`) accepts, for tests and
/// development only (librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`).
pub fn unsecured_jwt(principal: &str, now_s: u64, lifetime_s: u64) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let escaped: String = principal
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c => vec![c],
        })
        .collect();
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(
        r#"{{"sub":"{escaped}","iat":{now_s},"exp":{}}}"#,
        now_s + lifetime_s
    ));
    format!("{header}.{claims}.")
}

#[derive(Clone, Copy)]
enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Hash::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            Hash::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// The client side of one SCRAM exchange.
pub struct ScramClient {
    hash: Hash,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// Set by `client_final`: the signature the server-final must carry.
    expected_server_signature: Option<Vec<u8>>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("client_first_bare", &self.client_first_bare)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// A SCRAM exchange for `mechanism` (SCRAM-SHA-256 or -512) with a
    /// client nonce (printable, no comma: make it from 18 or more random
    /// bytes in base64). `None` for PLAIN.
    pub fn new(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> Option<ScramClient> {
        let hash = match mechanism {
            Mechanism::ScramSha256 => Hash::Sha256,
            Mechanism::ScramSha512 => Hash::Sha512,
            Mechanism::Plain | Mechanism::OAuthBearer => return None,
        };
        let name = username.replace('=', "=3D").replace(',', "=2C");
        Some(ScramClient {
            hash,
            password: password.to_string(),
            nonce: nonce.to_string(),
            client_first_bare: format!("n={name},r={nonce}"),
            expected_server_signature: None,
        })
    }

    /// The client-first message (no channel binding, no authzid).
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message, with its proof, for the broker's
    /// server-first message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, SaslError> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| SaslError::Malformed("server-first is not UTF-8".into()))?;
        if let Some(e) = server_first.strip_prefix("e=") {
            return Err(SaslError::Refused(e.to_string()));
        }
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                _ => {}
            }
        }
        let malformed = |what: &str| SaslError::Malformed(format!("server-first {what}"));
        let nonce = nonce.ok_or_else(|| malformed("has no nonce"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(malformed("nonce does not extend ours"));
        }
        let salt = BASE64
            .decode(salt.ok_or_else(|| malformed("has no salt"))?)
            .map_err(|_| malformed("salt is not base64"))?;
        let iterations: u32 = iterations
            .ok_or_else(|| malformed("has no iteration count"))?
            .parse()
            .map_err(|_| malformed("iteration count is not a number"))?;
        if !(MIN_SCRAM_ITERATIONS..=MAX_SCRAM_ITERATIONS).contains(&iterations) {
            return Err(malformed(&format!(
                "iteration count {iterations} is outside {MIN_SCRAM_ITERATIONS}..={MAX_SCRAM_ITERATIONS}"
            )));
        }
        let h = self.hash;
        let salted = h.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the broker's server-final message: `v=` with the signature
    /// only the password's holder can compute, or `e=` with a refusal.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), SaslError> {
        let server_final = std::str::from_utf8(server_final)
            .map_err(|_| SaslError::Malformed("server-final is not UTF-8".into()))?;
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(SaslError::Refused(e.to_string()));
        }
        let v = server_final
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .ok_or_else(|| SaslError::Malformed("server-final has no signature".into()))?;
        let got = BASE64
            .decode(v)
            .map_err(|_| SaslError::Malformed("server signature is not base64".into()))?;
        match &self.expected_server_signature {
            Some(want) if *want == got => Ok(()),
            Some(_) => Err(SaslError::BadServerSignature),
            None => Err(SaslError::Malformed(
                "server-final before server-first".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3: the SCRAM-SHA-256 example exchange.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let mut c = ScramClient::new(
            Mechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        )
        .unwrap();
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = c.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert_eq!(
            c.verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(SaslError::BadServerSignature)
        );
        assert_eq!(
            c.verify_server_final(b"e=invalid-proof"),
            Err(SaslError::Refused("invalid-proof".into()))
        );
    }

    #[test]
    fn hostile_server_first_messages_are_refused() {
        let mut c = ScramClient::new(Mechanism::ScramSha512, "u", "p", "abc").unwrap();
        for bad in [
            &b"r=xyz,s=AAAA,i=4096"[..],   // not our nonce
            b"r=abc,s=AAAA,i=4096",        // nothing added to it
            b"r=abcd,s=AAAA,i=0",          // no iterations
            b"r=abcd,s=AAAA,i=1",          // one: a proof cheap to attack
            b"r=abcd,s=AAAA,i=4095",       // under Java's minimum
            b"r=abcd,s=AAAA,i=4000000000", // a PBKDF2 storm
            b"r=abcd,s=!!,i=4096",         // salt not base64
            b"r=abcd,i=4096",              // no salt
            b"\xff",                       // not UTF-8
        ] {
            assert!(
                matches!(c.client_final(bad), Err(SaslError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            c.client_final(b"e=unknown-user"),
            Err(SaslError::Refused("unknown-user".into()))
        );
    }

    #[test]
    fn oauthbearer_messages_and_unsecured_tokens() {
        assert_eq!(
            oauthbearer_message("t0k"),
            b"n,,\x01auth=Bearer t0k\x01\x01"
        );
        let jwt = unsecured_jwt("alice", 1_700_000_000, 3600);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "", "no signature");
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            r#"{"sub":"alice","iat":1700000000,"exp":1700003600}"#
        );
        assert_eq!(
            Mechanism::parse("OAUTHBEARER"),
            Some(Mechanism::OAuthBearer)
        );
    }

    #[test]
    fn usernames_are_escaped_and_plain_is_nul_separated() {
        let c = ScramClient::new(Mechanism::ScramSha256, "a=b,c", "p", "n").unwrap();
        assert_eq!(c.client_first(), b"n,,n=a=3Db=2Cc,r=n");
        assert_eq!(plain_message("alice", "s3cret"), b"\0alice\0s3cret");
        assert!(ScramClient::new(Mechanism::Plain, "u", "p", "n").is_none());
        assert_eq!(
            Mechanism::parse("SCRAM-SHA-512"),
            Some(Mechanism::ScramSha512)
        );
        assert_eq!(Mechanism::parse("GSSAPI"), None);
    }
}
