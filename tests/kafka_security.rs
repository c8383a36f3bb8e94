//! TLS and SASL on Apache Kafka: one broker (started once for this
//! binary) with a SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
//! and an SSL listener, certificates made by the test harness
//! (`KafkaCluster::start_secured`). Each mechanism produces through every
//! report path and every record is read back by an independent client
//! (the rdkafka consumer, built with OpenSSL) over the same listener with
//! the same settings; wrong passwords, an untrusted CA and a host-name
//! mismatch fail with an error that says so. OIDC (`oidc_*`): tokens
//! from a stand-in identity provider (`support::idp`), checked by Kafka's
//! own JWT validator on the broker's OIDC listener, read back by Kafka's
//! consumer.

mod support;

use std::time::{Duration, Instant};

use courier_kafka::{DeliveryReport, Producer, ProducerBuilder, Record, ReportMode};
use futures::StreamExt;
use support::idp::{self, Behaviour, Idp};
use support::kafka::{KafkaCluster, SASL_USER};
use support::paths::every_report_path;
use support::{read_back_with, ReadRecord};

fn unique(name: &str) -> String {
    format!("{name}-{:08x}", fastrand::u32(..))
}

/// A secured listener and the settings that reach it. Courier takes
/// librdkafka's names, so the same settings make the producer and the
/// independent reader (the rdkafka consumer) that reads the log back over
/// the same listener.
struct Listener {
    bootstrap: String,
    settings: Vec<(String, String)>,
}

impl Listener {
    /// The SASL_SSL listener with `mechanism`, as `user`.
    fn sasl_ssl(kafka: &KafkaCluster, mechanism: &str, (user, password): (&str, &str)) -> Self {
        let s = kafka.secured();
        Listener::at(s.sasl_ssl, "SASL_SSL", kafka)
            .with("sasl.mechanism", mechanism)
            .with("sasl.username", user)
            .with("sasl.password", password)
    }

    /// The SSL listener (server authentication only).
    fn ssl(kafka: &KafkaCluster) -> Self {
        Listener::at(kafka.secured().ssl, "SSL", kafka)
    }

    /// The SSL listener that requires a client certificate, with none.
    fn mtls_without_certificate(kafka: &KafkaCluster) -> Self {
        Listener::at(kafka.secured().mtls, "SSL", kafka)
    }

    fn at(port: u16, protocol: &str, kafka: &KafkaCluster) -> Self {
        Listener {
            bootstrap: format!("localhost:{port}"),
            settings: Vec::new(),
        }
        .with("security.protocol", protocol)
        .with("ssl.ca.location", kafka.secured().ca_pem.to_str().unwrap())
    }

    fn with(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.to_string(), value.to_string()));
        self
    }

    fn producer(&self) -> ProducerBuilder {
        let mut b = Producer::builder().bootstrap(&self.bootstrap);
        for (k, v) in &self.settings {
            b = b.set(k, v);
        }
        b
    }

    /// Every record `topic` holds (the count from the high watermarks),
    /// read by the rdkafka consumer over this listener.
    fn read_log(&self, kafka: &KafkaCluster, topic: &str, partitions: i32) -> Vec<ReadRecord> {
        let total: i64 = kafka.end_offsets(topic, partitions).iter().sum();
        let settings: Vec<(&str, &str)> = self
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        read_back_with(
            &self.bootstrap,
            &settings,
            topic,
            partitions,
            total as usize,
            Duration::from_secs(120),
        )
    }
}

/// `n` records through each report path (`support::paths`), read back over
/// the same listener by the rdkafka consumer: each once, each report true.
async fn produce_and_read_back(kafka: &KafkaCluster, listener: &Listener, topic: &str, n: usize) {
    let producer = listener.producer().build().unwrap();
    every_report_path(producer, topic, n, || listener.read_log(kafka, topic, 3)).await;
}

/// 10,000 records per mechanism, through every report path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sasl_mechanism_over_tls_delivers_and_reads_back() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let topic = unique(&format!("sasl-{}", mechanism.to_lowercase()));
        kafka.create_topic(&topic, 3, 1, &[]).await;
        let listener = Listener::sasl_ssl(kafka, mechanism, SASL_USER);
        produce_and_read_back(kafka, &listener, &topic, 2500).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_alone_delivers_and_reads_back() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("tls");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    produce_and_read_back(kafka, &Listener::ssl(kafka), &topic, 2500).await;
}

/// The first send's failure, and how long it took.
async fn first_failure(
    producer: Producer,
    topic: &str,
) -> (courier_kafka::DeliveryError, Duration) {
    let started = Instant::now();
    let e = tokio::time::timeout(
        Duration::from_secs(60),
        producer.send(Record::to(topic).value("x")),
    )
    .await
    .expect("no hang")
    .expect_err("cannot be delivered");
    let took = started.elapsed();
    let _ = producer.close_timeout(Duration::from_secs(1)).await;
    (e, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_with_an_authentication_error() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("wrong-password");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    // With the default max.block.ms (60 s): the failure comes at once,
    // not when the wait for metadata runs out.
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let producer = Listener::sasl_ssl(kafka, mechanism, (SASL_USER.0, "not-the-password"))
            .producer()
            .build()
            .unwrap();
        let (e, took) = first_failure(producer, &topic).await;
        assert_eq!(
            e.kind,
            courier_kafka::ErrorKind::Authentication,
            "{mechanism}: {e}"
        );
        assert!(
            e.message.contains("SASL authentication")
                && e.message
                    .contains(&format!("localhost:{}", kafka.secured().sasl_ssl)),
            "{mechanism}: {e}"
        );
        assert!(took < Duration::from_secs(30), "{mechanism}: took {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_ca_and_a_host_name_mismatch_fail_the_tls_handshake() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("tls-fail");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    let s = kafka.secured();
    // Another CA than the one that signed the broker's certificate.
    let other_ca = {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem()
    };
    let untrusted = Producer::builder()
        .bootstrap(&format!("localhost:{}", s.ssl))
        .set("security.protocol", "SSL")
        .set("ssl.ca.pem", &other_ca)
        .set("max.block.ms", "3000")
        .build()
        .unwrap();
    let (e, _) = first_failure(untrusted, &topic).await;
    assert_eq!(e.kind, courier_kafka::ErrorKind::Tls, "{e}");
    assert!(e.message.contains("UnknownIssuer"), "{e}");
    // By IP: the certificate is for localhost only.
    let by_ip = |verify: &str| {
        Producer::builder()
            .bootstrap(&format!("127.0.0.1:{}", s.ssl))
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", s.ca_pem.to_str().unwrap())
            .set("ssl.endpoint.identification.algorithm", verify)
            .set("max.block.ms", "3000")
            .build()
            .unwrap()
    };
    let (e, _) = first_failure(by_ip("https"), &topic).await;
    assert_eq!(e.kind, courier_kafka::ErrorKind::Tls, "{e}");
    assert!(e.message.contains("not valid for name"), "{e}");
    // `none` skips only the host-name check (the broker then advertises
    // localhost, which matches anyway).
    let producer = by_ip("none");
    let d = tokio::time::timeout(
        Duration::from_secs(60),
        producer.send(Record::to(topic.as_str()).value("ok")),
    )
    .await
    .expect("no hang")
    .expect("delivered without the host-name check");
    assert!(d.offset.is_some());
    producer.close().await;
}

#[test]
fn secrets_never_appear_in_debug_output() {
    let b = Producer::builder()
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "SCRAM-SHA-256")
        .set("sasl.username", "alice")
        .set("sasl.password", "hunter2-secret")
        .set(
            "ssl.key.pem",
            "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n",
        )
        .set("sasl.oauthbearer.client.secret", "oidc-client-secret");
    let shown = format!("{:?}", b.config());
    assert!(!shown.contains("oidc-client-secret"), "{shown}");
    assert!(shown.contains("alice"), "{shown}");
    assert!(!shown.contains("hunter2-secret"), "{shown}");
    assert!(!shown.contains("secret-key-material"), "{shown}");
}

/// `courier ARGS` with `n` lines (`line-0` …) on its standard input: its
/// exit status and output.
fn produce_lines(args: &[impl AsRef<std::ffi::OsStr>], n: usize) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run courier");
    let lines: String = (0..n).map(|i| format!("line-{i}\n")).collect();
    let _ = child.stdin.take().unwrap().write_all(lines.as_bytes());
    child.wait_with_output().unwrap()
}

/// The CLI as kcat users expect: `-X` properties for SASL_SSL with SCRAM.
/// A good password delivers every line (exit 0); a wrong one exits 1 with
/// the authentication error in the reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_produces_over_sasl_ssl() {
    use std::process::Command;
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("cli-sasl");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    // `-b localhost:PORT -X security.protocol=SASL_SSL -X sasl.mechanism=
    // SCRAM-SHA-256 -X sasl.username=alice -X sasl.password=… -X
    // ssl.ca.location=…/ca.pem`, as a kcat user writes it.
    let cli_args = |password: &str| {
        let listener = Listener::sasl_ssl(kafka, "SCRAM-SHA-256", (SASL_USER.0, password));
        let mut args = vec!["-b".to_string(), listener.bootstrap.clone()];
        for (k, v) in &listener.settings {
            args.extend(["-X".to_string(), format!("{k}={v}")]);
        }
        args
    };
    let run = |password: &str| {
        let mut args = vec!["produce".to_string(), "-t".into(), topic.clone()];
        args.extend(cli_args(password));
        produce_lines(&args, 10)
    };
    // `courier topic` over the same listener, with the same -X settings.
    let admin = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_courier"))
            .args(args)
            .args(cli_args(SASL_USER.1))
            .output()
            .expect("run courier topic")
    };
    let made = unique("cli-made");
    let out = admin(&["topic", "create", &made, "--partitions", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = admin(&["topic", "list"]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == format!("{made}\t2")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let ok = run(SASL_USER.1);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(kafka.read_log(&topic, 1).len(), 10);
    let bad = run("wrong");
    assert_eq!(bad.status.code(), Some(1));
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(out.contains("authentication failed"), "{out}");
}

/// Mutual TLS: a listener that requires a client certificate delivers with
/// one (`ssl.certificate.location` / `ssl.key.location`) and refuses a
/// client without, which fails with `ErrorKind::Tls` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_and_without_a_client_certificate() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("mtls");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let s = kafka.secured();
    let with_cert = Listener::mtls_without_certificate(kafka)
        .with("ssl.certificate.location", s.client_cert.to_str().unwrap())
        .with("ssl.key.location", s.client_key.to_str().unwrap());
    produce_and_read_back(kafka, &with_cert, &topic, 250).await;
    let without = Listener::mtls_without_certificate(kafka)
        .producer()
        .build()
        .unwrap();
    let (e, took) = first_failure(without, &topic).await;
    assert_eq!(e.kind, courier_kafka::ErrorKind::Tls, "{e}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// Authorization (StandardAuthorizer): bob may write `acl-ok-…` topics and
/// only describe `acl-no-…` ones. In one producer, records to the first are
/// delivered and records to the second fail with TOPIC_AUTHORIZATION_FAILED;
/// a topic bob may not even describe fails the same way at once (not after
/// max.block.ms). carol, who may describe `acl-no-…` topics but write
/// none, is refused a producer id: her records fail at once with
/// CLUSTER_AUTHORIZATION_FAILED, and with `enable.idempotence=false` she
/// gets TOPIC_AUTHORIZATION_FAILED instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_fail_only_what_they_forbid_and_say_so() {
    use courier_kafka::BrokerError;
    use courier_kafka::ErrorKind;
    use support::kafka::{LIMITED_USER, UNTRUSTED_USER};
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let ok = unique("acl-ok-");
    let no = unique("acl-no-");
    let hidden = unique("acl-hidden-");
    for t in [&ok, &no, &hidden] {
        kafka.create_topic(t, 1, 1, &[]).await;
    }
    let as_user = |user| Listener::sasl_ssl(kafka, "SCRAM-SHA-256", user).producer();
    let bob = as_user(LIMITED_USER).build().unwrap();
    let (sub, stream) = bob.subscribe(ReportMode::All);
    for i in 0..50 {
        sub.produce(Record::to(ok.as_str()).value(format!("ok-{i}")))
            .await
            .unwrap();
        sub.produce(Record::to(no.as_str()).value(format!("no-{i}")))
            .await
            .unwrap();
    }
    drop(sub);
    let reports: Vec<DeliveryReport> =
        tokio::time::timeout(Duration::from_secs(60), stream.collect())
            .await
            .unwrap();
    assert_eq!(reports.len(), 100);
    for r in &reports {
        match r {
            DeliveryReport::Delivered(d) if d.topic.as_str() == ok => {}
            DeliveryReport::Failed(e)
                if e.record
                    .value
                    .as_deref()
                    .is_some_and(|v| v.starts_with(b"no-")) =>
            {
                assert_eq!(
                    e.kind,
                    ErrorKind::Broker(BrokerError::TopicAuthorizationFailed),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    let started = Instant::now();
    let e = bob
        .send(Record::to(hidden.as_str()).value("x"))
        .await
        .expect_err("bob may not describe it");
    assert_eq!(
        e.kind,
        ErrorKind::Broker(BrokerError::TopicAuthorizationFailed),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    bob.close().await;

    let carol = as_user(UNTRUSTED_USER).build().unwrap();
    let (e, took) = first_failure(carol, &no).await;
    assert_eq!(
        e.kind,
        ErrorKind::Broker(BrokerError::ClusterAuthorizationFailed),
        "{e}"
    );
    assert!(e.message.contains("enable.idempotence=false"), "{e}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let carol = as_user(UNTRUSTED_USER)
        .set("enable.idempotence", "false")
        .build()
        .unwrap();
    let (e, _) = first_failure(carol, &no).await;
    assert_eq!(
        e.kind,
        ErrorKind::Broker(BrokerError::TopicAuthorizationFailed),
        "{e}"
    );
}

/// OAUTHBEARER (KIP-255) with Kafka's unsecured validator: librdkafka's
/// `enable.sasl.oauthbearer.unsecure.jwt` and `sasl.oauthbearer.config`
/// make the tokens, or the application's own `TokenProvider` does. A token
/// the broker refuses, or a provider that has none, fails the records at
/// once with `ErrorKind::Authentication`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_tokens_from_the_settings_or_a_provider() {
    use courier_kafka::security::{TokenProvider, UnsecuredJwt};
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("oauth");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let oauth = || {
        Listener::at(kafka.secured().sasl_ssl, "SASL_SSL", kafka)
            .with("sasl.mechanism", "OAUTHBEARER")
    };
    let base = || oauth().producer();
    // librdkafka takes the same two settings, so the reader logs in the
    // same way.
    let from_settings = oauth()
        .with("enable.sasl.oauthbearer.unsecure.jwt", "true")
        .with(
            "sasl.oauthbearer.config",
            &format!("principal={}", SASL_USER.0),
        );
    produce_and_read_back(kafka, &from_settings, &topic, 250).await;

    let from_provider = base()
        .token_provider(UnsecuredJwt {
            principal: SASL_USER.0.to_string(),
            lifetime: Duration::from_secs(600),
        })
        .build()
        .unwrap();
    let d = from_provider
        .send(Record::to(topic.as_str()).value("provided"))
        .await
        .expect("delivered with the provider's token");
    assert!(d.offset.is_some());
    from_provider.close().await;

    struct Fixed(Result<String, String>);
    impl TokenProvider for Fixed {
        fn token(&self) -> futures::future::BoxFuture<'_, Result<String, String>> {
            let t = self.0.clone();
            Box::pin(async move { t })
        }
    }
    for (provider, what) in [
        (Fixed(Ok("not-a-jwt".into())), "a token the broker refuses"),
        (
            Fixed(Err("the identity provider is down".into())),
            "no token",
        ),
    ] {
        let p = base().token_provider(provider).build().unwrap();
        let (e, took) = first_failure(p, &topic).await;
        assert_eq!(
            e.kind,
            courier_kafka::ErrorKind::Authentication,
            "{what}: {e}"
        );
        assert!(took < Duration::from_secs(30), "{what}: took {took:?}");
    }
    // Without a provider or the unsecured-JWT setting, build() says what
    // is missing.
    let err = base().build().unwrap_err();
    assert!(err.to_string().contains("token provider"), "{err}");
}

/// KIP-368: the SASL_SSL listener limits sessions to 4 s
/// (`connections.max.reauth.ms`). A 10 s stream renews its connections
/// before they expire, each once its requests are answered: every record
/// is delivered once, and no connection is lost on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_renewed_before_the_broker_ends_them() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("reauth");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let producer = Listener::sasl_ssl(kafka, "SCRAM-SHA-512", SASL_USER)
        .producer()
        .build()
        .unwrap();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    let reader = tokio::spawn(stream.collect::<Vec<DeliveryReport>>());
    let n = 10_000;
    for i in 0..n {
        sub.produce(
            Record::to(topic.as_str())
                .key(format!("k{}", i % 7))
                .value(format!("{i}")),
        )
        .await
        .unwrap();
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(sub);
    let reports = tokio::time::timeout(Duration::from_secs(60), reader)
        .await
        .unwrap()
        .unwrap();
    let stats = producer.stats();
    producer.close().await;
    assert_eq!(reports.len(), n);
    assert!(
        reports.iter().all(|r| r.is_delivered()),
        "every record delivered"
    );
    assert_eq!(kafka.read_log(&topic, 3).len(), n, "each once in the log");
    let renewed: u64 = stats.brokers.values().map(|b| b.reauthentications).sum();
    let lost: u64 = stats.brokers.values().map(|b| b.disconnects).sum();
    assert!(renewed >= 2, "a 10 s stream renews 4 s sessions: {stats:?}");
    assert_eq!(lost, 0, "no connection lost: {stats:?}");
}

/// A TLS handshake cut by the peer (EOF or reset before TLS said anything)
/// is a connection error, retried with backoff as over plaintext; only a
/// verdict of TLS itself (an untrusted certificate, a name mismatch, an
/// alert) fails records at once. Before, every interrupted handshake
/// failed every queued record with `ErrorKind::Tls` at once. Over SSL and
/// SASL_SSL, with the default `delivery.timeout.ms`: the producer starts
/// while its bootstrap address drops every connection for 3 s; every
/// record is delivered once the path is back, and read back once over
/// the same listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_dropped_by_the_peer_is_retried_not_failed() {
    use std::collections::BTreeSet;
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let s = kafka.secured();
    for (name, listener, port) in [
        ("ssl", Listener::ssl(kafka), s.ssl),
        (
            "sasl-ssl",
            Listener::sasl_ssl(kafka, "SCRAM-SHA-256", SASL_USER),
            s.sasl_ssl,
        ),
    ] {
        let topic = unique(&format!("handshake-drop-{name}"));
        kafka.create_topic(&topic, 3, 1, &[]).await;
        let relay =
            support::DroppingRelay::start(format!("127.0.0.1:{port}"), Duration::from_secs(3))
                .await;
        let mut through_relay = Listener {
            bootstrap: format!("localhost:{}", relay.port),
            settings: listener.settings.clone(),
        };
        through_relay = through_relay.with("reconnect.backoff.max.ms", "500");
        let producer = through_relay.producer().build().unwrap();
        let (sub, mut stream) = producer.subscribe(ReportMode::All);
        let n = 200;
        for i in 0..n {
            sub.produce(support::tagged_record(&topic, &format!("{name}-{i}"), true))
                .await
                .unwrap_or_else(|e| panic!("{name}: record {i} refused: {e}"));
        }
        drop(sub);
        let mut delivered = BTreeSet::new();
        for _ in 0..n {
            match tokio::time::timeout(Duration::from_secs(60), stream.next())
                .await
                .expect("every report arrives")
                .expect("a report")
            {
                r @ DeliveryReport::Delivered(_) => {
                    assert!(delivered.insert(support::tagged_value(&r)), "{name}: twice")
                }
                DeliveryReport::Failed(e) => panic!("{name}: {e}"),
            }
        }
        assert!(
            relay.dropped() >= 1,
            "{name}: the relay dropped a handshake"
        );
        producer.close().await;
        let read: Vec<String> = listener
            .read_log(kafka, &topic, 3)
            .into_iter()
            .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
            .collect();
        assert_eq!(read.len(), n, "{name}: no duplicate in the log");
        let read: BTreeSet<String> = read.into_iter().collect();
        assert_eq!(read, delivered, "{name}: the log holds each record once");
    }
}

/// A Java `client.properties`, one per SASL mechanism, as a provider hands
/// it out (`bootstrap.servers` in the file, `sasl.jaas.config` with the
/// login module, the CA as a PEM truststore, Java-only lines beside them),
/// works as given: `courier produce -F FILE -t TOPIC`, no `-b`, no `-X`,
/// delivers every line, and the log holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_client_properties_file_per_mechanism_works_as_given() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let (user, password) = SASL_USER;
    let modules = [
        ("PLAIN", format!("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{password}\";")),
        ("SCRAM-SHA-256", format!("org.apache.kafka.common.security.scram.ScramLoginModule required username='{user}' password='{password}';")),
        ("SCRAM-SHA-512", format!("org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"{user}\" \\\n    password=\"{password}\";")),
        ("OAUTHBEARER", format!("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"{user}\";")),
    ];
    for (mechanism, jaas) in modules {
        let topic = unique(&format!("cli-file-{}", mechanism.to_lowercase()));
        kafka.create_topic(&topic, 1, 1, &[]).await;
        let file = std::env::temp_dir().join(format!("{topic}.properties"));
        std::fs::write(
            &file,
            format!(
                "# {mechanism}, as a provider's client.properties\n\
                 bootstrap.servers=localhost:{port}\n\
                 security.protocol=SASL_SSL\n\
                 sasl.mechanism={mechanism}\n\
                 sasl.jaas.config={jaas}\n\
                 ssl.truststore.type=PEM\n\
                 ssl.truststore.location={ca}\n\
                 client.dns.lookup=use_all_dns_ips\n\
                 session.timeout.ms=45000\n\
                 key.serializer=org.apache.kafka.common.serialization.StringSerializer\n\
                 value.serializer=org.apache.kafka.common.serialization.StringSerializer\n",
                port = kafka.secured().sasl_ssl,
                ca = kafka.secured().ca_pem.display(),
            ),
        )
        .unwrap();
        let out = produce_lines(&["produce", "-t", &topic, "-F", file.to_str().unwrap()], 10);
        let _ = std::fs::remove_file(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{mechanism}: {stderr}");
        assert!(
            stderr.contains("session.timeout.ms, key.serializer, value.serializer"),
            "{mechanism}: one warning names the Java-only lines: {stderr}"
        );
        assert_eq!(kafka.read_log(&topic, 1).len(), 10, "{mechanism}");
    }
}

/// The OIDC listener (`support::kafka`, Kafka's own
/// `OAuthBearerValidatorCallbackHandler`) with tokens from the stand-in
/// identity provider at `idp`, as librdkafka users write it.
fn oidc_producer(kafka: &KafkaCluster, idp: &Idp) -> ProducerBuilder {
    Producer::builder()
        .bootstrap(&format!("localhost:{}", kafka.secured().oidc))
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER")
        .set("sasl.oauthbearer.method", "oidc")
        .set("sasl.oauthbearer.token.endpoint.url", &idp.url())
        .set("sasl.oauthbearer.client.id", idp::CLIENT.0)
        .set("sasl.oauthbearer.client.secret", idp::CLIENT.1)
}

/// OIDC client credentials (KIP-768, librdkafka's
/// `sasl.oauthbearer.method=oidc`) against Kafka's JWT validator: the
/// stand-in identity provider answers 503 to the first three requests
/// (retried with `sasl.login.retry.backoff.ms`), then issues signed
/// tokens for alice; every record through every report path is delivered
/// once, and read back once by Kafka's own consumer. The token was asked
/// for with the scope set, and with the Java names of the settings too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_client_credentials_deliver_and_read_back() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("oidc");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let idp = Idp::start(
        &kafka.secured().oidc_key,
        Behaviour {
            unavailable_first: 3,
            ..Behaviour::issue(SASL_USER.0, Duration::from_secs(600))
        },
    )
    .await;
    let producer = oidc_producer(kafka, &idp)
        .set("sasl.oauthbearer.scope", "kafka.produce")
        .set("sasl.login.retry.backoff.ms", "10")
        .build()
        .unwrap();
    every_report_path(producer, &topic, 250, || kafka.read_log(&topic, 3)).await;
    assert!(idp.issued() >= 1);
    assert!(idp.answered() >= 4, "three 503s, then a token");
    assert!(
        idp.scopes().iter().all(|s| s == "kafka.produce"),
        "{:?}",
        idp.scopes()
    );

    // The Java client's names for the same settings (the method is
    // implied by the token endpoint, as there).
    let producer = Producer::builder()
        .bootstrap(&format!("localhost:{}", kafka.secured().oidc))
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER")
        .set("sasl.oauthbearer.token.endpoint.url", &idp.url())
        .set(
            "sasl.oauthbearer.client.credentials.client.id",
            idp::CLIENT.0,
        )
        .set(
            "sasl.oauthbearer.client.credentials.client.secret",
            idp::CLIENT.1,
        )
        .build()
        .unwrap();
    let d = producer
        .send(Record::to(topic.as_str()).value("java-names"))
        .await
        .expect("delivered with the Java names");
    assert!(d.offset.is_some());
    producer.close().await;

    // A Java 3.x client.properties for OIDC, as providers hand it out:
    // the client id, secret and scope in sasl.jaas.config, Kafka's login
    // handler class, and the token endpoint; `courier produce -F` takes it
    // as given.
    let file = std::env::temp_dir().join(format!("{topic}-oidc.properties"));
    std::fs::write(
        &file,
        format!(
            "bootstrap.servers=localhost:{port}\n\
             security.protocol=SASL_PLAINTEXT\n\
             sasl.mechanism=OAUTHBEARER\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url={url}\n\
             sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\\n  \
             clientId=\"{id}\" clientSecret=\"{secret}\" scope=\"kafka.file\";\n",
            port = kafka.secured().oidc,
            url = idp.url(),
            id = idp::CLIENT.0,
            secret = idp::CLIENT.1,
        ),
    )
    .unwrap();
    let out = produce_lines(&["produce", "-t", &topic, "-F", file.to_str().unwrap()], 1);
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        idp.scopes().iter().any(|s| s == "kafka.file"),
        "the file's scope reached the token endpoint: {:?}",
        idp.scopes()
    );
}

/// Tokens that live 4 s: the broker ends each session when its token
/// expires (KIP-368), Courier replaces the connection before that, and
/// each replacement takes a token fetched anew past 80 % of the last
/// one's lifetime. Records stream until the identity provider has issued
/// five tokens (four refreshes; driven by that count, not by a clock):
/// every record has exactly one report, each is delivered, and the log
/// holds each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_are_refreshed_and_no_record_is_lost() {
    use std::collections::BTreeSet;
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("oidc-refresh");
    kafka.create_topic(&topic, 3, 1, &[]).await;
    let idp = Idp::start(
        &kafka.secured().oidc_key,
        Behaviour::issue(SASL_USER.0, Duration::from_secs(4)),
    )
    .await;
    let producer = oidc_producer(kafka, &idp).build().unwrap();
    let (sub, stream) = producer.subscribe(ReportMode::All);
    let reader = tokio::spawn(stream.collect::<Vec<DeliveryReport>>());
    let started = Instant::now();
    let mut n = 0;
    while idp.issued() < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no hang: {} tokens issued",
            idp.issued()
        );
        for _ in 0..50 {
            sub.produce(support::tagged_record(&topic, &format!("{n}"), true))
                .await
                .unwrap();
            n += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(sub);
    let reports = tokio::time::timeout(Duration::from_secs(120), reader)
        .await
        .expect("every report arrives")
        .unwrap();
    let stats = producer.stats();
    producer.close().await;
    assert_eq!(reports.len(), n, "one report per record");
    let mut delivered = BTreeSet::new();
    for r in &reports {
        match r {
            DeliveryReport::Delivered(_) => {
                assert!(delivered.insert(support::tagged_value(r)), "twice: {r:?}")
            }
            DeliveryReport::Failed(e) => panic!("{e}"),
        }
    }
    assert_eq!(delivered.len(), n);
    assert_eq!(kafka.read_log(&topic, 3).len(), n, "each once in the log");
    let renewed: u64 = stats.brokers.values().map(|b| b.reauthentications).sum();
    assert!(renewed >= 1, "sessions ended with their tokens: {stats:?}");
    eprintln!(
        "oidc refresh: {n} records, {} tokens, {renewed} sessions renewed, {} connections lost",
        idp.issued(),
        stats.brokers.values().map(|b| b.disconnects).sum::<u64>()
    );
}

/// A token endpoint that refuses the client (HTTP 401) fails the record
/// at once with `ErrorKind::Authentication`, naming the endpoint and the
/// status, as a wrong password does; a bad setting is a `ConfigError` at
/// build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_a_refusing_token_endpoint_fails_with_a_clear_error() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("oidc-401");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    let idp = Idp::start(
        &kafka.secured().oidc_key,
        Behaviour {
            refuse: true,
            ..Behaviour::issue(SASL_USER.0, Duration::from_secs(600))
        },
    )
    .await;
    let producer = oidc_producer(kafka, &idp).build().unwrap();
    let (e, took) = first_failure(producer, &topic).await;
    assert_eq!(e.kind, courier_kafka::ErrorKind::Authentication, "{e}");
    assert!(
        e.message.contains(&idp.url())
            && e.message.contains("HTTP 401")
            && e.message.contains("invalid_client"),
        "{e}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");

    let no_secret = Producer::builder()
        .bootstrap(&format!("localhost:{}", kafka.secured().oidc))
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER")
        .set("sasl.oauthbearer.method", "oidc")
        .set("sasl.oauthbearer.token.endpoint.url", &idp.url())
        .set("sasl.oauthbearer.client.id", idp::CLIENT.0)
        .build()
        .unwrap_err();
    assert!(
        no_secret.to_string().contains("client.secret"),
        "{no_secret}"
    );
}
