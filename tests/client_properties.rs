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

mod support;

/// Whether `set` knows `name` (sets it, ignores it, or refuses its value
/// with a reason): anything but `UnknownProperty`.
fn known(name: &str) -> bool {
    !matches!(
        ProducerConfig::default().set(name, "x"),
        Err(ConfigError::UnknownProperty(_))
    )
}

/// Every setting name the Java client itself lists (`ProducerConfig`,
/// `ConsumerConfig` and `AdminClientConfig`'s `configNames()`, asked of
/// the kafka-clients jar the suite installs) is known: a provider's file
/// never fails on a Java name as an unknown one.
#[test]
fn every_java_client_setting_is_known() {
    let dir = std::env::temp_dir().join(format!("courier-java-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Names.java"),
        "import org.apache.kafka.clients.producer.ProducerConfig;\n\
         import org.apache.kafka.clients.consumer.ConsumerConfig;\n\
         import org.apache.kafka.clients.admin.AdminClientConfig;\n\
         public class Names { public static void main(String[] a) {\n\
           for (String n : ProducerConfig.configNames()) System.out.println(n);\n\
           for (String n : ConsumerConfig.configNames()) System.out.println(n);\n\
           for (String n : AdminClientConfig.configNames()) System.out.println(n);\n\
         } }\n",
    )
    .unwrap();
    let cp = format!("{}/*", support::kafka::libs_dir().display());
    let javac = std::process::Command::new("javac")
        .args(["-cp", &cp, "-d"])
        .arg(&dir)
        .arg(dir.join("Names.java"))
        .output()
        .expect("javac (the JDK) runs");
    assert!(
        javac.status.success(),
        "{}",
        String::from_utf8_lossy(&javac.stderr)
    );
    let out = std::process::Command::new("java")
        .args(["-cp", &format!("{cp}:{}", dir.display()), "Names"])
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(names.len() > 100, "{} names", names.len());
    let unknown: Vec<&String> = names.iter().filter(|n| !known(n)).collect();
    assert!(
        unknown.is_empty(),
        "Java settings Courier calls unknown: {unknown:?}"
    );
    assert!(!known("sesion.timeout.ms"), "and the check can fail");
}

/// Every setting name librdkafka documents (CONFIGURATION.md of the
/// librdkafka that rust-rdkafka builds, in cargo's registry), but its
/// callbacks and pointers (names with `_`), is known.
#[test]
fn every_librdkafka_setting_is_known() {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let mut docs = Vec::new();
    for index in std::fs::read_dir(home.join("registry/src")).expect("cargo's registry") {
        for krate in std::fs::read_dir(index.unwrap().path()).unwrap() {
            let path = krate.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rdkafka-sys-")
            {
                docs.push(path.join("librdkafka/CONFIGURATION.md"));
            }
        }
    }
    docs.sort();
    let doc = docs
        .pop()
        .expect("rdkafka-sys's sources (a dev-dependency) in cargo's registry");
    let text = std::fs::read_to_string(&doc).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once('|')?;
            let name = name.trim();
            let scope = rest.split('|').next()?.trim();
            (["*", "P", "C"].contains(&scope)
                && !name.is_empty()
                && !name.contains('_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.'))
            .then_some(name)
        })
        .collect();
    assert!(
        names.len() > 150,
        "{} names in {}",
        names.len(),
        doc.display()
    );
    let unknown: Vec<&&str> = names.iter().filter(|n| !known(n)).collect();
    assert!(
        unknown.is_empty(),
        "librdkafka settings Courier calls unknown: {unknown:?}"
    );
}
