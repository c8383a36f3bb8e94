//! Providers' `client.properties` files load as given: each file in
//! `tests/providers/` (written from the provider's documentation, secrets
//! replaced) is read with `config::read_properties_file` and set property
//! by property, as `courier produce -F` does, and gives the settings it
//! means; the Java-only lines are accepted and named as ignored; a JKS
//! truststore is refused with how to convert it.

use std::path::Path;

use courier_kafka::config::{
    read_properties_file, ConfigError, ProducerConfig, SaslMechanism, SecurityProtocol,
};

fn load(name: &str) -> Result<ProducerConfig, ConfigError> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/providers")
        .join(name);
    let mut c = ProducerConfig::default();
    for (k, v) in read_properties_file(&path)? {
        c.set(&k, &v)?;
    }
    c.validate()?;
    Ok(c)
}

/// The settings every provider file means: its brokers, SASL over TLS,
/// the mechanism and the credentials.
fn check(c: &ProducerConfig, servers: usize, mechanism: SaslMechanism, user: &str, password: &str) {
    assert_eq!(c.bootstrap_servers.len(), servers);
    assert_eq!(c.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(c.security.sasl_mechanism, Some(mechanism));
    assert_eq!(c.security.sasl_username.as_deref(), Some(user));
    assert_eq!(
        c.security.sasl_password.as_ref().map(|p| p.expose()),
        Some(password)
    );
}

#[test]
fn confluent_cloud_java_properties() {
    let c = load("confluent-cloud-java.properties").unwrap();
    check(
        &c,
        1,
        SaslMechanism::Plain,
        "CLUSTER_API_KEY",
        "CLUSTER_API_SECRET",
    );
    assert_eq!(
        c.ignored_properties(),
        [
            "client.dns.lookup",
            "session.timeout.ms",
            "schema.registry.url",
            "basic.auth.credentials.source",
            "basic.auth.user.info",
            "key.serializer",
            "value.serializer"
        ]
    );
}

#[test]
fn confluent_cloud_librdkafka_properties() {
    let c = load("confluent-cloud-librdkafka.properties").unwrap();
    check(
        &c,
        1,
        SaslMechanism::Plain,
        "CLUSTER_API_KEY",
        "CLUSTER_API_SECRET",
    );
    assert_eq!(c.client_id, "ccloud-rust-client");
    assert_eq!(c.ignored_properties(), ["session.timeout.ms"]);
}

#[test]
fn amazon_msk_scram_properties_with_continued_lines() {
    let c = load("amazon-msk-scram.properties").unwrap();
    check(&c, 2, SaslMechanism::ScramSha512, "alice", "alice-secret");
    assert!(c.ignored_properties().is_empty());
}

#[test]
fn a_jks_truststore_is_refused_with_how_to_convert_it() {
    let e = load("amazon-msk-scram-jks.properties")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ssl.truststore.location") && e.contains("keytool -exportcert -rfc"),
        "{e}"
    );
}

#[test]
fn aiven_sasl_properties_with_a_pem_truststore() {
    let c = load("aiven-sasl.properties").unwrap();
    check(
        &c,
        1,
        SaslMechanism::ScramSha256,
        "avnadmin",
        "AIVEN_PASSWORD",
    );
    assert_eq!(
        c.security.ca_location.as_deref(),
        Some(Path::new("/etc/aiven/ca.pem"))
    );
    assert!(!c.security.verify_hostname);
}

#[test]
fn redpanda_cloud_properties() {
    let c = load("redpanda-cloud.properties").unwrap();
    check(
        &c,
        1,
        SaslMechanism::ScramSha256,
        "redpanda-user",
        "REDPANDA_PASSWORD",
    );
    assert_eq!(
        c.ignored_properties(),
        ["key.serializer", "value.serializer"]
    );
}
