//! [`SchemaRegistry`]: a client of the Confluent Schema Registry REST API
//! (also served by Apicurio Registry under `/apis/ccompat/v7`, Karapace,
//! Redpanda): the requests a serializer needs, cached.
//!
//! - `POST /subjects/{subject}/versions`: register a schema (with
//!   `auto.register.schemas=true`, the default), answering its id.
//! - `GET /subjects/{subject}/versions/latest`: the subject's latest
//!   schema and id (with `use.latest.version=true` and auto-registration
//!   off).
//! - `POST /subjects/{subject}`: the id of a schema already registered
//!   under the subject (neither of the two).
//! - `GET /schemas/ids/{id}`: a schema by its id.
//!
//! Each answer is cached for the client's life (a schema's id never
//! changes; the latest version is taken once, as Confluent's serializers
//! do by default), so a subject's first record asks and every later one
//! reads the cache; concurrent first records share the one request. A
//! failure is not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use hyper::Method;
use tokio::sync::OnceCell;

use crate::config::ConfigError;

use super::http::Endpoint;
use super::serializer::{RegistryError, Side};

/// A schema's format, as the registry names it (`schemaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    /// Apache Avro (the registry's default: `schemaType` is left out).
    Avro,
    /// Protocol Buffers (`.proto` text).
    Protobuf,
    /// JSON Schema.
    Json,
}

impl SchemaType {
    /// The `schemaType` value.
    pub fn as_str(&self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}

/// How a record's subject is named (`key.subject.name.strategy`,
/// `value.subject.name.strategy`; Confluent's class names or these short
/// ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubjectNameStrategy {
    /// `{topic}-key` or `{topic}-value` (`TopicNameStrategy`, the
    /// default).
    #[default]
    TopicName,
    /// The record type's fully qualified name: the Avro record's
    /// `namespace.name`, the Protobuf message's `package.Message`
    /// (`RecordNameStrategy`).
    RecordName,
    /// `{topic}-{record name}` (`TopicRecordNameStrategy`).
    TopicRecordName,
}

impl SubjectNameStrategy {
    fn parse(s: &str) -> Option<SubjectNameStrategy> {
        let short = s.trim().rsplit('.').next().unwrap_or_default();
        match short {
            "TopicNameStrategy" => Some(SubjectNameStrategy::TopicName),
            "RecordNameStrategy" => Some(SubjectNameStrategy::RecordName),
            "TopicRecordNameStrategy" => Some(SubjectNameStrategy::TopicRecordName),
            _ => None,
        }
    }

    /// The subject for `side` of a record for `topic` whose type is named
    /// `record_name`; `None` when the strategy needs a name and there is
    /// none (an Avro schema that is not a record).
    pub fn subject(&self, topic: &str, side: Side, record_name: Option<&str>) -> Option<String> {
        match self {
            SubjectNameStrategy::TopicName => Some(format!("{topic}-{side}")),
            SubjectNameStrategy::RecordName => record_name.map(str::to_string),
            SubjectNameStrategy::TopicRecordName => record_name.map(|r| format!("{topic}-{r}")),
        }
    }
}

/// A schema id, with the version and text when the registry gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisteredSchema {
    /// The id written after the magic byte.
    pub id: u32,
    /// The subject's version, when known.
    pub version: Option<i32>,
    /// The schema's text, when the answer had it (the latest version's,
    /// a look-up's, a fetch by id's; a registration answers the id only).
    pub schema: Option<String>,
}

/// The settings of a [`SchemaRegistry`], by Confluent's names.
#[derive(Debug, Clone, Default)]
pub struct RegistryBuilder {
    settings: Vec<(String, String)>,
    timeout: Option<Duration>,
}

/// The names [`RegistryBuilder::set`] takes.
const NAMES: &[&str] = &[
    "schema.registry.url",
    "basic.auth.credentials.source",
    "basic.auth.user.info",
    "schema.registry.basic.auth.credentials.source",
    "schema.registry.basic.auth.user.info",
    "auto.register.schemas",
    "use.latest.version",
    "key.subject.name.strategy",
    "value.subject.name.strategy",
    "schema.registry.ssl.ca.location",
];

impl RegistryBuilder {
    /// Sets one setting: `schema.registry.url` (one URL, or several
    /// separated by commas, tried in turn), `basic.auth.credentials.source`
    /// (`USER_INFO`, or `URL` for `https://user:pass@host`) with
    /// `basic.auth.user.info` (`user:password`; the `schema.registry.`
    /// prefixed names too), `auto.register.schemas` (default `true`),
    /// `use.latest.version` (default `false`; auto-registration, when on,
    /// comes first, as in Confluent's serializers),
    /// `key.subject.name.strategy` and `value.subject.name.strategy`, and
    /// `schema.registry.ssl.ca.location` (a PEM file of trusted roots for
    /// https). Any other name is an error at [`build`](Self::build).
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// How long one request may take (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The client, or the setting that is wrong.
    pub fn build(self) -> Result<SchemaRegistry, ConfigError> {
        let invalid = |property: &str, value: &str, reason: &str| ConfigError::InvalidValue {
            property: property.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let mut get: HashMap<&str, &str> = HashMap::new();
        for (name, value) in &self.settings {
            if !NAMES.contains(&name.as_str()) {
                return Err(invalid(
                    name,
                    value,
                    &format!(
                        "not a schema registry setting (one of {})",
                        NAMES.join(", ")
                    ),
                ));
            }
            get.insert(name.as_str(), value.as_str());
        }
        let bool_of = |name: &str, default: bool| -> Result<bool, ConfigError> {
            match get.get(name).map(|v| v.trim().to_ascii_lowercase()) {
                None => Ok(default),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(invalid(name, &v, "expected true or false")),
            }
        };
        let strategy = |name: &str| -> Result<SubjectNameStrategy, ConfigError> {
            match get.get(name) {
                None => Ok(SubjectNameStrategy::default()),
                Some(v) => SubjectNameStrategy::parse(v).ok_or_else(|| {
                    invalid(name, v, "expected TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy (or Confluent's class name)")
                }),
            }
        };
        let urls = get.get("schema.registry.url").ok_or_else(|| {
            ConfigError::Inconsistent("the schema registry needs schema.registry.url".into())
        })?;
        let ca = get.get("schema.registry.ssl.ca.location").copied();
        let source = get
            .get("basic.auth.credentials.source")
            .or_else(|| get.get("schema.registry.basic.auth.credentials.source"))
            .map(|s| s.trim().to_ascii_uppercase());
        let user_info = get
            .get("basic.auth.user.info")
            .or_else(|| get.get("schema.registry.basic.auth.user.info"))
            .copied();
        let mut endpoints = Vec::new();
        let mut url_user_info = None;
        for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            // Credentials in the URL (`URL` source) are taken out of it.
            let (url, info) = match url.split_once("://") {
                Some((scheme, rest)) => match rest.split_once('@') {
                    Some((info, host)) if !info.contains('/') => {
                        (format!("{scheme}://{host}"), Some(info.to_string()))
                    }
                    _ => (url.to_string(), None),
                },
                None => (url.to_string(), None),
            };
            url_user_info = url_user_info.or(info);
            endpoints.push(
                Endpoint::parse(&url, ca).map_err(|e| invalid("schema.registry.url", &url, &e))?,
            );
        }
        if endpoints.is_empty() {
            return Err(invalid("schema.registry.url", urls, "no URL"));
        }
        let info = match source.as_deref() {
            None => user_info.map(str::to_string).or(url_user_info),
            Some("USER_INFO") => Some(user_info.map(str::to_string).ok_or_else(|| {
                ConfigError::Inconsistent(
                    "basic.auth.credentials.source=USER_INFO needs basic.auth.user.info (user:password)".into(),
                )
            })?),
            Some("URL") => url_user_info,
            Some(other) => {
                return Err(invalid(
                    "basic.auth.credentials.source",
                    other,
                    "expected USER_INFO or URL (SASL_INHERIT is not supported)",
                ))
            }
        };
        let authorization = match info {
            None => None,
            Some(i) if i.contains(':') => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(i)
            )),
            Some(_) => {
                return Err(invalid(
                    "basic.auth.user.info",
                    "(hidden)",
                    "expected user:password",
                ))
            }
        };
        Ok(SchemaRegistry(Arc::new(Inner {
            endpoints,
            authorization,
            auto_register: bool_of("auto.register.schemas", true)?,
            use_latest: bool_of("use.latest.version", false)?,
            key_strategy: strategy("key.subject.name.strategy")?,
            value_strategy: strategy("value.subject.name.strategy")?,
            timeout: self.timeout.unwrap_or(Duration::from_secs(30)),
            cache: Mutex::new(HashMap::new()),
        })))
    }
}

/// A schema registry client: cheap to clone (clones share the cache).
#[derive(Clone)]
pub struct SchemaRegistry(Arc<Inner>);

struct Inner {
    endpoints: Vec<Endpoint>,
    /// `Basic …`, never printed.
    authorization: Option<String>,
    auto_register: bool,
    use_latest: bool,
    key_strategy: SubjectNameStrategy,
    value_strategy: SubjectNameStrategy,
    timeout: Duration,
    cache: Mutex<HashMap<CacheKey, Arc<OnceCell<RegisteredSchema>>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CacheKey {
    Registered(String, SchemaType, String),
    LookedUp(String, SchemaType, String),
    Latest(String),
    Id(u32),
}

impl std::fmt::Debug for SchemaRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistry")
            .field(
                "url",
                &self.0.endpoints.iter().map(|e| &e.url).collect::<Vec<_>>(),
            )
            .field("auto_register", &self.0.auto_register)
            .field("use_latest", &self.0.use_latest)
            .finish_non_exhaustive()
    }
}

impl SchemaRegistry {
    /// Settings by name ([`RegistryBuilder::set`]).
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// A client with default settings at `url`.
    pub fn new(url: &str) -> Result<SchemaRegistry, ConfigError> {
        Self::builder().set("schema.registry.url", url).build()
    }

    /// A client from a properties list (a provider's `client.properties`,
    /// `config::read_properties_file`'s answer): the schema registry
    /// settings are taken, the producer's are passed over.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<SchemaRegistry, ConfigError> {
        let mut b = Self::builder();
        for (k, v) in properties {
            if NAMES.contains(&k.as_ref()) {
                b = b.set(k.as_ref(), v.as_ref());
            }
        }
        b.build()
    }

    /// The subject of `side` of a record for `topic` of the type named
    /// `record_name`, by the side's strategy.
    pub fn subject(&self, topic: &str, side: Side, record_name: Option<&str>) -> Option<String> {
        let strategy = match side {
            Side::Key => self.0.key_strategy,
            Side::Value => self.0.value_strategy,
        };
        strategy.subject(topic, side, record_name)
    }

    /// The id to write for `schema` under `subject`, as the settings say:
    /// registered (`auto.register.schemas`), else the subject's latest
    /// (`use.latest.version`: the answer has the latest schema's text,
    /// which the serializer then writes with), else looked up. Cached.
    pub async fn resolve(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<RegisteredSchema, RegistryError> {
        if self.0.auto_register {
            self.register(subject, schema_type, schema).await
        } else if self.0.use_latest {
            self.latest(subject).await
        } else {
            self.lookup(subject, schema_type, schema).await
        }
    }

    /// `POST /subjects/{subject}/versions`: registers `schema` (or finds
    /// it registered) and answers its id. Cached.
    pub async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<RegisteredSchema, RegistryError> {
        let key = CacheKey::Registered(subject.into(), schema_type, schema.into());
        self.cached(key, || async {
            let path = format!("/subjects/{}/versions", encode(subject));
            let json = self
                .call(Method::POST, &path, Some(body(schema_type, schema)))
                .await?;
            let mut answer = self.read_schema(&json, &path)?;
            answer.schema.get_or_insert_with(|| schema.to_string());
            Ok(answer)
        })
        .await
    }

    /// `POST /subjects/{subject}`: the id of `schema` if it is registered
    /// under `subject` (a 404 if not). Cached.
    pub async fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<RegisteredSchema, RegistryError> {
        let key = CacheKey::LookedUp(subject.into(), schema_type, schema.into());
        self.cached(key, || async {
            let path = format!("/subjects/{}", encode(subject));
            let json = self
                .call(Method::POST, &path, Some(body(schema_type, schema)))
                .await?;
            self.read_schema(&json, &path)
        })
        .await
    }

    /// `GET /subjects/{subject}/versions/latest`. Cached: taken once.
    pub async fn latest(&self, subject: &str) -> Result<RegisteredSchema, RegistryError> {
        self.cached(CacheKey::Latest(subject.into()), || async {
            let path = format!("/subjects/{}/versions/latest", encode(subject));
            let json = self.call(Method::GET, &path, None).await?;
            self.read_schema(&json, &path)
        })
        .await
    }

    /// `GET /schemas/ids/{id}`: the schema's text. Cached.
    pub async fn schema_by_id(&self, id: u32) -> Result<RegisteredSchema, RegistryError> {
        self.cached(CacheKey::Id(id), || async {
            let path = format!("/schemas/ids/{id}");
            let json = self.call(Method::GET, &path, None).await?;
            let mut json = json;
            if let Some(o) = json.as_object_mut() {
                o.entry("id").or_insert(id.into());
            }
            self.read_schema(&json, &path)
        })
        .await
    }

    /// The cached answer for `key`, or `fetch`'s (shared by concurrent
    /// callers; not kept when it fails).
    async fn cached<F, Fut>(
        &self,
        key: CacheKey,
        fetch: F,
    ) -> Result<RegisteredSchema, RegistryError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<RegisteredSchema, RegistryError>>,
    {
        let cell = {
            let mut cache = self.0.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.entry(key).or_default().clone()
        };
        cell.get_or_try_init(fetch).await.cloned()
    }

    /// One request, to each URL in turn while the failure is retriable;
    /// the 2xx answer's JSON.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<serde_json::Value, RegistryError> {
        let mut last = None;
        for endpoint in &self.0.endpoints {
            let error = |status, error_code, message: String, retriable| RegistryError {
                url: endpoint.url.clone(),
                status,
                error_code,
                message: format!("{method} {path}: {message}"),
                retriable,
            };
            let answer = endpoint
                .request(
                    method.clone(),
                    path,
                    body.clone(),
                    self.0.authorization.as_deref(),
                    self.0.timeout,
                )
                .await;
            let e = match answer {
                Err(e) => error(None, None, e.reason, e.retriable),
                Ok((status, bytes)) if (200..300).contains(&status) => {
                    return serde_json::from_slice(&bytes).map_err(|e| {
                        error(
                            Some(status),
                            None,
                            format!("the answer is not JSON ({e})"),
                            false,
                        )
                    })
                }
                Ok((status, bytes)) => {
                    let json: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
                    let code = json
                        .as_ref()
                        .and_then(|j| j.get("error_code"))
                        .and_then(|c| c.as_i64());
                    let text = json
                        .as_ref()
                        .and_then(|j| j.get("message"))
                        .and_then(|m| m.as_str())
                        .map(str::to_string)
                        .unwrap_or_else(|| {
                            String::from_utf8_lossy(&bytes).chars().take(200).collect()
                        });
                    let reason = hyper::StatusCode::from_u16(status)
                        .ok()
                        .and_then(|s| s.canonical_reason())
                        .unwrap_or("");
                    let retriable = matches!(status, 408 | 429) || status >= 500;
                    error(
                        Some(status),
                        code,
                        format!("HTTP {status} {reason}: {text}"),
                        retriable,
                    )
                }
            };
            if !e.retriable {
                return Err(e);
            }
            last = Some(e);
        }
        Err(last.expect("at least one URL"))
    }

    fn read_schema(
        &self,
        json: &serde_json::Value,
        path: &str,
    ) -> Result<RegisteredSchema, RegistryError> {
        let id = json
            .get("id")
            .and_then(|i| i.as_u64())
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| RegistryError {
                url: self.0.endpoints[0].url.clone(),
                status: None,
                error_code: None,
                message: format!("{path}: the answer has no schema id: {json}"),
                retriable: false,
            })?;
        Ok(RegisteredSchema {
            id,
            version: json
                .get("version")
                .and_then(|v| v.as_i64())
                .map(|v| v as i32),
            schema: json
                .get("schema")
                .and_then(|s| s.as_str())
                .map(str::to_string),
        })
    }
}

/// The request body for `schema`: `schemaType` left out for Avro.
fn body(schema_type: SchemaType, schema: &str) -> String {
    let mut body = serde_json::json!({ "schema": schema });
    if schema_type != SchemaType::Avro {
        body["schemaType"] = schema_type.as_str().into();
    }
    body.to_string()
}

/// A subject as one path segment: everything but RFC 3986's unreserved
/// characters percent-encoded.
fn encode(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for b in subject.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_name_strategies() {
        use SubjectNameStrategy::*;
        assert_eq!(
            TopicName.subject("orders", Side::Key, None).as_deref(),
            Some("orders-key")
        );
        assert_eq!(
            TopicName
                .subject("orders", Side::Value, Some("shop.Order"))
                .as_deref(),
            Some("orders-value")
        );
        assert_eq!(
            RecordName
                .subject("orders", Side::Value, Some("shop.Order"))
                .as_deref(),
            Some("shop.Order")
        );
        assert_eq!(RecordName.subject("orders", Side::Value, None), None);
        assert_eq!(
            TopicRecordName
                .subject("orders", Side::Key, Some("shop.Id"))
                .as_deref(),
            Some("orders-shop.Id")
        );
        for (name, want) in [
            (
                "io.confluent.kafka.serializers.subject.TopicNameStrategy",
                TopicName,
            ),
            (
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
                RecordName,
            ),
            ("TopicRecordNameStrategy", TopicRecordName),
        ] {
            assert_eq!(SubjectNameStrategy::parse(name), Some(want), "{name}");
        }
        assert_eq!(SubjectNameStrategy::parse("Topic"), None);
    }

    #[test]
    fn settings_by_confluents_names() {
        let r = SchemaRegistry::from_properties([
            ("bootstrap.servers", "b:9092"),
            (
                "schema.registry.url",
                "https://sr.example.com/apis/ccompat/v7/",
            ),
            ("basic.auth.credentials.source", "USER_INFO"),
            ("basic.auth.user.info", "key:secret"),
            ("auto.register.schemas", "false"),
            ("use.latest.version", "true"),
            (
                "value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            ),
        ])
        .unwrap();
        assert!(!r.0.auto_register && r.0.use_latest);
        assert_eq!(r.0.value_strategy, SubjectNameStrategy::RecordName);
        assert_eq!(r.0.key_strategy, SubjectNameStrategy::TopicName);
        assert_eq!(r.0.authorization.as_deref(), Some("Basic a2V5OnNlY3JldA=="));
        assert_eq!(
            r.0.endpoints[0].url,
            "https://sr.example.com/apis/ccompat/v7"
        );
        assert!(
            !format!("{r:?}").contains("a2V5"),
            "Debug hides the credentials"
        );

        // Credentials in the URL.
        let r = SchemaRegistry::builder()
            .set("schema.registry.url", "http://u:p@localhost:8081")
            .set("basic.auth.credentials.source", "URL")
            .build()
            .unwrap();
        assert_eq!(r.0.authorization.as_deref(), Some("Basic dTpw"));
        assert_eq!(r.0.endpoints[0].url, "http://localhost:8081");

        let e = |b: RegistryBuilder| b.build().unwrap_err().to_string();
        assert!(e(SchemaRegistry::builder()).contains("schema.registry.url"));
        assert!(
            e(SchemaRegistry::builder().set("schema.registry.url", "ftp://x")).contains("http")
        );
        assert!(e(SchemaRegistry::builder()
            .set("schema.registry.url", "http://x")
            .set("auto.register.schemas", "yes"))
        .contains("auto.register.schemas"));
        assert!(e(SchemaRegistry::builder()
            .set("schema.registry.url", "http://x")
            .set("basic.auth.credentials.source", "USER_INFO"))
        .contains("basic.auth.user.info"));
        assert!(e(SchemaRegistry::builder()
            .set("schema.registry.url", "http://x")
            .set("bootstrap.servers", "b:9092"))
        .contains("not a schema registry setting"));
    }

    #[test]
    fn subjects_are_one_path_segment() {
        assert_eq!(encode("orders-value"), "orders-value");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
        assert_eq!(
            body(SchemaType::Avro, "\"string\""),
            r#"{"schema":"\"string\""}"#
        );
        assert!(body(SchemaType::Protobuf, "x").contains(r#""schemaType":"PROTOBUF""#));
    }
}
