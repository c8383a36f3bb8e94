//! A stand-in OIDC identity provider for the secured cluster's OIDC
//! listener: a token endpoint (the client credentials grant, RFC 6749
//! section 4.4) on a loopback port, served from the test process with a
//! small HTTP/1.1 server on a tokio `TcpListener`. It checks the client's
//! HTTP Basic credentials (form-URL-decoded, RFC 6749 section 2.3.1) and
//! form, and issues ES256 JWTs signed by ring with the key whose public
//! half the broker reads from `jwks.json` (`support::kafka`), with the
//! audience and issuer the broker expects. It counts what it issues and
//! refuses, and can answer 503 first or 401 always.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::kafka::{OIDC_AUDIENCE, OIDC_ISSUER};

/// The `kid` of the signing key in `jwks.json` and in each token.
pub const KEY_ID: &str = "courier-test-key";

/// The client the stand-in knows. The secret has characters that form
/// URL encoding changes, so the encoding is checked.
pub const CLIENT: (&str, &str) = ("courier-client", "s3cret:with/odd+chars");

/// The token endpoint's path.
pub const PATH: &str = "/oauth2/token";

/// What the stand-in answers.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// The `sub` claim (the broker's principal: `User:<subject>`).
    pub subject: String,
    /// Each token's `expires_in` and `exp - iat`.
    pub lifetime: Duration,
    /// Answer 503 to this many requests first.
    pub unavailable_first: usize,
    /// Answer 401 (`invalid_client`) to every request.
    pub refuse: bool,
}

impl Behaviour {
    /// Tokens for `subject` that live `lifetime`.
    pub fn issue(subject: &str, lifetime: Duration) -> Self {
        Behaviour {
            subject: subject.to_string(),
            lifetime,
            unavailable_first: 0,
            refuse: false,
        }
    }
}

/// A running stand-in identity provider (its task ends with the test's
/// runtime).
pub struct Idp {
    /// Its port on 127.0.0.1.
    pub port: u16,
    issued: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
    scopes: Arc<Mutex<Vec<String>>>,
}

impl Idp {
    /// Starts serving on a free loopback port, signing with the PKCS#8
    /// key at `key`.
    pub async fn start(key: &Path, behaviour: Behaviour) -> Idp {
        let pkcs8 = std::fs::read(key).expect("read the OIDC key");
        let rng = ring::rand::SystemRandom::new();
        let key = Arc::new(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
                .expect("the OIDC key"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the token endpoint");
        let port = listener.local_addr().unwrap().port();
        let idp = Idp {
            port,
            issued: Arc::default(),
            answered: Arc::default(),
            scopes: Arc::default(),
        };
        let (issued, answered, scopes) =
            (idp.issued.clone(), idp.answered.clone(), idp.scopes.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let (key, behaviour) = (key.clone(), behaviour.clone());
                let (issued, answered, scopes) = (issued.clone(), answered.clone(), scopes.clone());
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut socket).await else {
                        return;
                    };
                    let n = answered.fetch_add(1, Ordering::SeqCst);
                    let (status, json) = if n < behaviour.unavailable_first {
                        (503, r#"{"error":"temporarily_unavailable"}"#.to_string())
                    } else if behaviour.refuse {
                        (
                            401,
                            r#"{"error":"invalid_client","error_description":"client authentication failed"}"#
                                .to_string(),
                        )
                    } else {
                        match check(&head, &body) {
                            Err(why) => (
                                400,
                                format!(
                                    r#"{{"error":"invalid_request","error_description":"{why}"}}"#
                                ),
                            ),
                            Ok(scope) => {
                                scopes.lock().unwrap().push(scope.clone());
                                issued.fetch_add(1, Ordering::SeqCst);
                                let token = sign(&key, &behaviour, &scope);
                                (
                                    200,
                                    format!(
                                        r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{}}}"#,
                                        behaviour.lifetime.as_secs()
                                    ),
                                )
                            }
                        }
                    };
                    let reason = match status {
                        200 => "OK",
                        400 => "Bad Request",
                        401 => "Unauthorized",
                        _ => "Service Unavailable",
                    };
                    let answer = format!(
                        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                        json.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        idp
    }

    /// The token endpoint's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{PATH}", self.port)
    }

    /// Tokens issued so far.
    pub fn issued(&self) -> usize {
        self.issued.load(Ordering::SeqCst)
    }

    /// Requests answered so far (tokens, refusals, 503s).
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// The `scope` of each request a token was issued for.
    pub fn scopes(&self) -> Vec<String> {
        self.scopes.lock().unwrap().clone()
    }
}

/// The request's head (lower-cased header names) and body, or `None` if
/// the client went away first.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if socket.read_buf(&mut buf).await.ok()? == 0 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < end + length {
        if socket.read_buf(&mut buf).await.ok()? == 0 {
            return None;
        }
    }
    Some((head, buf[end..end + length].to_vec()))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The request a client credentials grant is: `POST PATH`, a form with
/// `grant_type=client_credentials`, the client's id and secret in HTTP
/// Basic, form-URL-encoded first. The scope asked for, if so.
fn check(head: &str, body: &[u8]) -> Result<String, String> {
    if !head.starts_with(&format!("POST {PATH} HTTP/1.1\r\n")) {
        return Err(format!(
            "not POST {PATH}: {}",
            head.lines().next().unwrap_or("")
        ));
    }
    if header(head, "content-type") != Some("application/x-www-form-urlencoded") {
        return Err("not a form".into());
    }
    let basic = header(head, "authorization")
        .and_then(|v| v.strip_prefix("Basic "))
        .ok_or("no Basic authorization")?;
    let pair = base64::engine::general_purpose::STANDARD
        .decode(basic)
        .map_err(|e| e.to_string())?;
    let pair = String::from_utf8(pair).map_err(|e| e.to_string())?;
    let (id, secret) = pair.split_once(':').ok_or("no colon in the credentials")?;
    let decode = |s: &str| -> String {
        form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    if (decode(id).as_str(), decode(secret).as_str()) != CLIENT {
        return Err(format!("unknown client {id:?}"));
    }
    let form: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if get("grant_type").as_deref() != Some("client_credentials") {
        return Err("grant_type is not client_credentials".into());
    }
    Ok(get("scope").unwrap_or_default())
}

/// An ES256 JWT (RFC 7515, 7519) for `behaviour.subject`, from now.
fn sign(key: &EcdsaKeyPair, behaviour: &Behaviour, scope: &str) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = format!(r#"{{"alg":"ES256","typ":"JWT","kid":"{KEY_ID}"}}"#);
    // Kafka's validator refuses an empty scope claim: none when no scope
    // was asked for.
    let scope = if scope.is_empty() {
        String::new()
    } else {
        format!(r#","scope":"{scope}""#)
    };
    let claims = format!(
        r#"{{"sub":"{}","aud":"{OIDC_AUDIENCE}","iss":"{OIDC_ISSUER}","iat":{now},"exp":{}{scope},"jti":"{:016x}"}}"#,
        behaviour.subject,
        now + behaviour.lifetime.as_secs(),
        fastrand::u64(..)
    );
    let signing_input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
    let signature = key
        .sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes())
        .expect("sign the token");
    format!("{signing_input}.{}", b64(signature.as_ref()))
}
