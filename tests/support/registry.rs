//! A STAND-IN schema registry, not a real one: a few endpoints of
//! Confluent Schema Registry's documented REST API
//! (<https://docs.confluent.io/platform/current/schema-registry/develop/api.html>)
//! on a tokio `TcpListener`, in memory, for tests/typed_records.rs.
//!
//! A real registry could not be started on this project's machines (tried
//! for issue 31, item 8): Confluent's is not on the registries reached
//! here; Apicurio Registry's `apicurio-registry-app` is on Maven Central
//! only as a Quarkus module jar (no runner), and building it into an app
//! with the Quarkus Maven plugin failed: 3.3.3 and 2.6.13.Final need
//! `apicurio-registry-schema-util-provider` versions Central does not
//! serve; 2.4.2.Final resolved only with `org.everit.json.schema`
//! excluded (Central lacks it), then Quarkus needed
//! `apicurio-common-app-components-config-index-deployment:0.1.18.Final`
//! (not on Central), and with that extension excluded the app failed
//! ArC validation (unsatisfied `DynamicConfigStorageAccessor` and
//! `DynamicConfigPropertyList` beans).
//!
//! Served: `POST /subjects/{s}/versions` (register; the same text
//! again answers the same id), `POST /subjects/{s}` (look up),
//! `GET /subjects/{s}/versions/latest`, `GET /schemas/ids/{id}` (query
//! strings ignored). Subjects starting `refused` answer 409 (incompatible)
//! on registration and `broken` 500, as a real registry's errors look
//! (`{"error_code": …, "message": …}`). Every request is counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Default)]
struct State {
    /// id → (text, schemaType).
    schemas: Vec<(String, String)>,
    /// subject → ids, version 1 first.
    subjects: HashMap<String, Vec<u32>>,
    /// "METHOD path" of each request, in order.
    requests: Vec<String>,
    /// The Authorization header of each request.
    authorizations: Vec<Option<String>>,
}

/// The stand-in registry; it serves until the test's runtime ends.
#[derive(Clone)]
pub struct StandInRegistry {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl StandInRegistry {
    /// Starts it on a free port.
    pub async fn start() -> StandInRegistry {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in registry");
        let port = listener.local_addr().unwrap().port();
        let registry = StandInRegistry {
            port,
            state: Arc::default(),
        };
        let state = registry.state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut socket).await else {
                        return;
                    };
                    let (status, json) = answer(&state, &head, &body);
                    let reason = match status {
                        200 => "OK",
                        404 => "Not Found",
                        409 => "Conflict",
                        _ => "Internal Server Error",
                    };
                    let text = format!(
                        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                        json.len()
                    );
                    let _ = socket.write_all(text.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        registry
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// "METHOD path" of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The Authorization header of every request so far.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().authorizations.clone()
    }

    /// Registers `text` under `subject` directly (as another producer
    /// would have), answering its id.
    pub fn preregister(&self, subject: &str, text: &str, schema_type: &str) -> u32 {
        register(&mut self.state.lock().unwrap(), subject, text, schema_type)
    }
}

fn register(s: &mut State, subject: &str, text: &str, schema_type: &str) -> u32 {
    let id = match s
        .schemas
        .iter()
        .position(|(t, ty)| t == text && ty == schema_type)
    {
        Some(i) => i as u32 + 1,
        None => {
            s.schemas.push((text.to_string(), schema_type.to_string()));
            s.schemas.len() as u32
        }
    };
    let versions = s.subjects.entry(subject.to_string()).or_default();
    if !versions.contains(&id) {
        versions.push(id);
    }
    id
}

fn error(status: u16, code: i64, message: &str) -> (u16, String) {
    (
        status,
        serde_json::json!({"error_code": code, "message": message}).to_string(),
    )
}

fn answer(state: &Mutex<State>, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = state.lock().unwrap();
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    s.requests.push(format!("{method} {path}"));
    let auth = header(head, "authorization").map(str::to_string);
    s.authorizations.push(auth);
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = request["schema"].as_str().unwrap_or_default().to_string();
    let schema_type = request["schemaType"].as_str().unwrap_or("AVRO").to_string();
    match (method, segments.as_slice()) {
        ("POST", ["subjects", subject, "versions"]) => {
            if subject.starts_with("refused") {
                return error(
                    409,
                    409,
                    "Schema being registered is incompatible with an earlier schema for subject",
                );
            }
            if subject.starts_with("broken") {
                return error(500, 50001, "Error in the backend data store");
            }
            let id = register(&mut s, subject, &text, &schema_type);
            (200, serde_json::json!({ "id": id }).to_string())
        }
        ("POST", ["subjects", subject]) => {
            let Some(versions) = s.subjects.get(*subject) else {
                return error(404, 40401, &format!("Subject '{subject}' not found."));
            };
            let found = versions.iter().enumerate().find(|(_, id)| {
                let (t, ty) = &s.schemas[**id as usize - 1];
                *t == text && *ty == schema_type
            });
            match found {
                Some((v, id)) => (
                    200,
                    serde_json::json!({"subject": subject, "id": id, "version": v + 1, "schema": text})
                        .to_string(),
                ),
                None => error(404, 40403, "Schema not found"),
            }
        }
        ("GET", ["subjects", subject, "versions", "latest"]) => {
            let Some(versions) = s.subjects.get(*subject) else {
                return error(404, 40401, &format!("Subject '{subject}' not found."));
            };
            let id = *versions.last().unwrap();
            let (t, ty) = &s.schemas[id as usize - 1];
            (
                200,
                serde_json::json!({"subject": subject, "id": id, "version": versions.len(), "schema": t, "schemaType": ty})
                    .to_string(),
            )
        }
        ("GET", ["schemas", "ids", id]) => {
            match id
                .parse::<usize>()
                .ok()
                .and_then(|i| s.schemas.get(i.wrapping_sub(1)))
            {
                Some((t, ty)) if ty == "AVRO" => {
                    (200, serde_json::json!({"schema": t}).to_string())
                }
                Some((t, ty)) => (
                    200,
                    serde_json::json!({"schema": t, "schemaType": ty}).to_string(),
                ),
                None => error(404, 40403, "Schema not found"),
            }
        }
        _ => error(404, 404, "HTTP 404 Not Found"),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

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
