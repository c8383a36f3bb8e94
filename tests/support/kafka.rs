//! Apache Kafka as the reference broker: a KRaft cluster of 1 or 3 JVMs,
//! started from the jars `scripts/install-tools.sh` copies into
//! `.tools/kafka/libs`, and readers of what Courier wrote that share no code
//! with it: Kafka's own console consumer and producer, and its log-segment
//! dumper (which prints each stored batch's codec, CRC check and sequences).
//!
//! # Shape, and why
//!
//! - Each broker runs in combined mode (`process.roles=broker,controller`)
//!   with a static `controller.quorum.voters`, on two free loopback ports,
//!   in its own directory under `<tmp>/courier-kafka/<pid>-<n>/broker-<i>/`
//!   (config, data, and the log file `kafka.log`, appended to across
//!   restarts; `$COURIER_KAFKA_DIR` replaces `<tmp>/courier-kafka`). The
//!   storage is formatted with `kafka.tools.StorageTool` and
//!   a fresh cluster id made here (16 random bytes, base64url, as Kafka's
//!   `Uuid.randomUuid` makes them; this saves one JVM start).
//! - Every JVM is forked by one thread that lives as long as the test binary
//!   (the spawner), with `PR_SET_PDEATHSIG = SIGKILL`. The kernel sends that
//!   signal when the *thread* that forked the child exits, and cargo's test
//!   threads exit after each test; the spawner exits only with the process.
//!   So a cluster in a `static` (never dropped) still dies with the test
//!   binary, also when that binary is killed with SIGKILL.
//! - Each JVM is its own process group: `kill`, `stop` and `cont` signal
//!   the group.
//! - Readiness is asked, never slept for: start-up polls Metadata (through
//!   Courier's own `Connection`) until every broker is registered and
//!   unfenced, and `create_topic` polls every broker until each knows a
//!   leader for every partition. Time-outs print the brokers' logs.
//! - Logs: a log4j2 config written here sends each broker's log to its own
//!   file. When a test panics, the tail of every broker's log goes to
//!   stderr: from `Drop` for a cluster the test owns, from the guard of
//!   [`KafkaCluster::logs_on_panic`] for a shared one. A passing cluster's
//!   directory is removed on drop; directories of test binaries that are no
//!   longer running are removed by the next start.
//! - JVMs are kept small for a 2-core machine: a 512 MiB heap, the serial
//!   collector, the C1 compiler only (faster start-up), and 2 network and
//!   2 I/O threads per broker.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use courier_kafka::connection::{Connection, ConnectionOptions};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

/// The JVM options of a broker.
const BROKER_JVM: &[&str] = &[
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
];

/// The JVM options of a short-lived tool (console consumer, storage tool...).
const TOOL_JVM: &[&str] = &[
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
];

/// How long a cluster (or a restarted broker) may take to become ready.
const START_LIMIT: Duration = Duration::from_secs(120);

/// Lines of each broker's log printed when a test fails.
const LOG_TAIL_LINES: usize = 80;

/// The directory holding Apache Kafka's jars: `COURIER_KAFKA_LIBS`, or
/// `.tools/kafka/libs` as `scripts/install-tools.sh` installs it.
pub fn libs_dir() -> PathBuf {
    let dir = std::env::var_os("COURIER_KAFKA_LIBS")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::repo_root().join(".tools/kafka/libs"));
    let has_kafka = std::fs::read_dir(&dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("kafka_2.13-") && name.ends_with(".jar")
        })
    });
    assert!(
        has_kafka,
        "Apache Kafka's jars are not in {}; run `bash scripts/install-tools.sh` \
         (scripts/test.sh does)",
        dir.display()
    );
    dir
}

/// `java ... -cp <libs>/* <main>`, with `jvm` options and the log4j2 config.
/// A broker plugin for every cluster this test binary starts once it is
/// set ([`set_broker_plugin`]): a directory of compiled classes for the
/// class path, and lines for each broker's server.properties.
static BROKER_PLUGIN: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Puts `classes` on the class path of every JVM this binary starts from
/// now on, and `config` into each broker's server.properties (say a
/// `metric.reporters` class compiled by the test). Once per binary.
#[allow(dead_code)]
pub fn set_broker_plugin(classes: PathBuf, config: String) {
    BROKER_PLUGIN
        .set((classes, config))
        .expect("one broker plugin per test binary");
}

fn java(jvm: &[&str], log_config: &Path, main: &str) -> Command {
    let mut cmd = Command::new("java");
    let mut class_path = format!("{}/*", libs_dir().display());
    if let Some((classes, _)) = BROKER_PLUGIN.get() {
        class_path.push_str(&format!(":{}", classes.display()));
    }
    cmd.args(jvm)
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            log_config.display()
        ))
        .arg("-cp")
        .arg(class_path)
        .arg(main)
        .stdin(Stdio::null());
    cmd
}

// ---------------------------------------------------------------------------
// Spawning children that die with the test binary.

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` in its own process group, from the spawner thread, with
/// SIGKILL as its parent-death signal: it dies when this process does.
fn spawn_tied_to_process(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("kafka-spawner".into())
            .spawn(move || {
                // Never returns while the process lives: the channel's
                // sender sits in a static. PDEATHSIG is tied to this thread.
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the kafka-spawner thread");
        Mutex::new(tx)
    });
    let parent = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe calls (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: nobody would kill us.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("parent already exited"));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send((cmd, tx))
        .expect("kafka-spawner thread alive");
    rx.recv().expect("kafka-spawner answered")
}

/// Signals the process group led by `pid`.
fn signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals that process group.
    unsafe {
        libc::kill(-(pid as libc::pid_t), signal);
    }
}

/// The state letter of process `pid` in `/proc/<pid>/stat` (`R`, `S`,
/// `T` for stopped, `Z` for a zombie...), or `None` once it is gone.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (in parentheses) may hold spaces; the state follows it.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Polls until process `pid`'s state satisfies `want` (a signal takes
/// effect asynchronously).
fn wait_for_state(pid: u32, want: impl Fn(char) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !process_state(pid).is_some_and(&want) {
        assert!(Instant::now() < deadline, "process {pid} never {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------
// The cluster.

/// One broker (and controller) of a [`KafkaCluster`].
struct Broker {
    id: i32,
    /// Its PLAINTEXT port (`relisten` moves it).
    port: AtomicU16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Broker {
    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port.load(Ordering::Relaxed))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("kafka.log")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn spawn(&self, log_config: &Path) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open broker log");
        let mut jvm: Vec<String> = BROKER_JVM.iter().map(|s| s.to_string()).collect();
        jvm.extend(oidc_jvm_options(
            self.dir.parent().expect("the cluster dir"),
        ));
        let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
        let mut cmd = java(&jvm, log_config, "kafka.Kafka");
        cmd.arg(self.config_path())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log);
        let child = spawn_tied_to_process(cmd).expect("spawn java (is Java 17+ on PATH?)");
        *self.child.lock().unwrap() = Some(child);
    }

    /// SIGKILLs the broker if it runs, and reaps it.
    fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `Some(status)` when the process has exited by itself.
    fn exited(&self) -> Option<String> {
        let mut guard = self.child.lock().unwrap();
        match guard.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(status))) => Some(status.to_string()),
            _ => None,
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }
}

/// An Apache Kafka cluster in KRaft mode on loopback ports: brokers that
/// are their own controllers (combined mode), or brokers beside one
/// dedicated controller. Every JVM is killed on drop, and with the test
/// binary.
pub struct KafkaCluster {
    dir: PathBuf,
    brokers: Vec<Broker>,
    /// The dedicated controller, if the brokers are not their own.
    controller: Option<Broker>,
    /// The secured listeners of a `start_secured` cluster.
    secured: Option<SecuredListeners>,
}

/// A secured cluster's extra listeners (on its one broker, beside the
/// PLAINTEXT one the harness itself uses): SASL_SSL with PLAIN,
/// SCRAM-SHA-256 and SCRAM-SHA-512 for [`SASL_USER`], and SSL; both
/// advertised as `localhost`, with a certificate for `localhost` signed by
/// a CA made for the cluster (`ca.pem` in its directory).
#[derive(Debug, Clone)]
pub struct SecuredListeners {
    /// Each broker's SASL_SSL, SSL, mutual-TLS and OIDC ports, by broker
    /// id (the fields below are broker 0's).
    pub brokers: Vec<[u16; 4]>,
    /// The SASL_SSL listener's port.
    pub sasl_ssl: u16,
    /// The SSL listener's port.
    pub ssl: u16,
    /// An SSL listener that requires a client certificate (mutual TLS).
    pub mtls: u16,
    /// A SASL_PLAINTEXT listener with OAUTHBEARER validated by Kafka's
    /// own `OAuthBearerValidatorCallbackHandler`: ES256 JWTs signed with
    /// [`oidc_key`](Self::oidc_key) (its public half in the cluster's
    /// `jwks.json`), audience [`OIDC_AUDIENCE`], issuer [`OIDC_ISSUER`];
    /// sessions end with their token (`connections.max.reauth.ms`).
    pub oidc: u16,
    /// The stand-in identity provider's signing key (PKCS#8, DER), which
    /// `support::idp` signs tokens with.
    pub oidc_key: PathBuf,
    /// The CA certificate (PEM) that signed the broker's certificate.
    pub ca_pem: PathBuf,
    /// A client certificate signed by the same CA, and its key (PEM).
    pub client_cert: PathBuf,
    /// The client certificate's private key (PEM, PKCS#8).
    pub client_key: PathBuf,
}

/// The `aud` claim the OIDC listener expects.
pub const OIDC_AUDIENCE: &str = "courier-test";

/// The `iss` claim the OIDC listener expects.
pub const OIDC_ISSUER: &str = "courier-test-idp";

/// An ECDSA P-256 key for the OIDC listener (made by ring): `oidc.pk8`,
/// and `jwks.json` with its public half, which the broker reads at start
/// (`sasl.oauthbearer.jwks.endpoint.url=file:…`, allowed by the JVM's
/// `org.apache.kafka.sasl.oauthbearer.allowed.urls`). A file, not a URL
/// served by the test, so that the broker needs nothing running before it
/// starts; the token endpoint is served by the test (`support::idp`).
fn write_oidc_key(dir: &Path) -> PathBuf {
    use base64::Engine;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("generate the OIDC key");
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("read the OIDC key");
    // The public key is the uncompressed point: 0x04, x, y.
    let point = key.public_key().as_ref();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwks = format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"{}","x":"{}","y":"{}"}}]}}"#,
        super::idp::KEY_ID,
        b64(&point[1..33]),
        b64(&point[33..65])
    );
    std::fs::write(dir.join("jwks.json"), jwks).expect("write jwks.json");
    let path = dir.join("oidc.pk8");
    std::fs::write(&path, pkcs8.as_ref()).expect("write oidc.pk8");
    path
}

/// The JVM options that let the broker read the cluster's `jwks.json`
/// (Kafka 4.0 and up allow no OAUTHBEARER URL or file unless listed).
fn oidc_jvm_options(cluster_dir: &Path) -> Vec<String> {
    let jwks = cluster_dir.join("jwks.json");
    if !jwks.exists() {
        return Vec::new();
    }
    vec![
        format!(
            "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{}",
            jwks.display()
        ),
        format!(
            "-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={}",
            jwks.display()
        ),
    ]
}

/// The user every mechanism of a secured cluster knows, and its password.
/// Allowed everything on every topic and group.
pub const SASL_USER: (&str, &str) = ("alice", "alice-secret");

/// A user allowed to write only topics named `acl-ok-…` (and to describe
/// `acl-no-…` ones, not write them).
pub const LIMITED_USER: (&str, &str) = ("bob", "bob-secret");

/// A user who may only describe `acl-no-…` topics: it may write nothing,
/// so the cluster refuses it a producer id.
pub const UNTRUSTED_USER: (&str, &str) = ("carol", "carol-secret");

/// A user no ACL of the harness names: tests/kafka_admin.rs grants it
/// rights through Courier's admin calls and takes them away again, which
/// no other test sees.
pub const ADMIN_USER: (&str, &str) = ("dave", "dave-secret");

/// Writes a CA and a certificate for `localhost` (and 127.0.0.1 is NOT in
/// it, so connecting by IP fails the host-name check) signed by it:
/// `ca.pem`, and `broker.pem` with the broker's key and chain, as Kafka's
/// PEM key store reads it.
fn write_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "courier test CA");
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("broker params");
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().expect("broker key");
    let cert = leaf
        .signed_by(&key, &ca_cert, &ca_key)
        .expect("broker certificate");
    let ca_pem = dir.join("ca.pem");
    std::fs::write(&ca_pem, ca_cert.pem()).expect("write ca.pem");
    std::fs::write(
        dir.join("broker.pem"),
        format!("{}{}{}", key.serialize_pem(), cert.pem(), ca_cert.pem()),
    )
    .expect("write broker.pem");
    let mut client = CertificateParams::new(Vec::<String>::new()).expect("client params");
    client
        .distinguished_name
        .push(DnType::CommonName, "courier-client");
    let client_key = KeyPair::generate().expect("client key");
    let client_cert = client
        .signed_by(&client_key, &ca_cert, &ca_key)
        .expect("client certificate");
    let (cert_path, key_path) = (dir.join("client.pem"), dir.join("client.key"));
    std::fs::write(&cert_path, client_cert.pem()).expect("write client.pem");
    std::fs::write(&key_path, client_key.serialize_pem()).expect("write client.key");
    (ca_pem, cert_path, key_path)
}

/// The node id of a dedicated controller.
const CONTROLLER_ID: i32 = 100;

impl KafkaCluster {
    /// Starts `n` brokers (1 or 3) and waits until all are registered.
    pub fn start(n: usize) -> KafkaCluster {
        Self::start_as(n, false, None)
    }

    /// Starts one broker that tells clients to reach it at
    /// `127.0.0.1:advertised` (where a test's proxy listens and relays to
    /// the broker's real port).
    pub fn start_advertising(advertised: u16) -> KafkaCluster {
        Self::start_as(1, false, Some(advertised))
    }

    /// Starts `n` brokers (1 or 3) beside a dedicated KRaft controller, so
    /// that brokers can die (even all but one) while the cluster still
    /// elects leaders and shrinks ISRs: what fault tests need.
    pub fn start_with_controller(n: usize) -> KafkaCluster {
        Self::start_as(n, true, None)
    }

    /// One broker with SASL_SSL and SSL listeners besides its PLAINTEXT
    /// one (see [`SecuredListeners`]).
    pub fn start_secured() -> KafkaCluster {
        Self::start_as_secured(1, false, None, true)
    }

    /// [`start_secured`](Self::start_secured), once per test binary, with
    /// the ACLs of [`SASL_USER`], [`LIMITED_USER`] and [`UNTRUSTED_USER`].
    pub fn shared_secured() -> &'static KafkaCluster {
        static SECURED: OnceLock<KafkaCluster> = OnceLock::new();
        SECURED.get_or_init(|| {
            let c = KafkaCluster::start_secured();
            c.grant_test_acls();
            c
        })
    }

    /// The secured cluster's ACLs (StandardAuthorizer; the PLAINTEXT
    /// listener's ANONYMOUS is a super user, so the harness itself is not
    /// limited): alice may do anything to any topic and group, bob may write and
    /// describe `acl-ok-…` topics and only describe `acl-no-…` ones, carol
    /// may only describe `acl-no-…` topics.
    fn grant_test_acls(&self) {
        let bootstrap = self.bootstrap();
        let acl = |args: &[&str]| {
            let mut all = vec!["--bootstrap-server", bootstrap.as_str(), "--add"];
            all.extend_from_slice(args);
            self.run("org.apache.kafka.tools.AclCommand", &all);
        };
        let alice = format!("User:{}", SASL_USER.0);
        let bob = format!("User:{}", LIMITED_USER.0);
        // And every group: the rdkafka reader has a group id, so it asks
        // for the group's coordinator even though it commits nothing.
        acl(&[
            "--allow-principal",
            &alice,
            "--operation",
            "All",
            "--topic",
            "*",
            "--group",
            "*",
        ]);
        acl(&[
            "--allow-principal",
            &bob,
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--resource-pattern-type",
            "prefixed",
            "--topic",
            "acl-ok-",
        ]);
        let carol = format!("User:{}", UNTRUSTED_USER.0);
        acl(&[
            "--allow-principal",
            &bob,
            "--allow-principal",
            &carol,
            "--operation",
            "Describe",
            "--resource-pattern-type",
            "prefixed",
            "--topic",
            "acl-no-",
        ]);
    }

    /// 3 brokers beside a dedicated controller (as
    /// [`shared_with_controller`](Self::shared_with_controller)), each also
    /// with the secured listeners of [`start_secured`](Self::start_secured)
    /// and the same users and ACLs, once per test binary: the fault matrix
    /// over SASL_SSL and SSL.
    pub fn shared_secured_with_controller() -> &'static KafkaCluster {
        static SECURED3: OnceLock<KafkaCluster> = OnceLock::new();
        SECURED3.get_or_init(|| {
            let c = KafkaCluster::start_as_secured(3, true, None, true);
            c.grant_test_acls();
            c
        })
    }

    /// The secured listeners (of a `start_secured` cluster).
    pub fn secured(&self) -> &SecuredListeners {
        self.secured.as_ref().expect("a start_secured cluster")
    }

    fn start_as(n: usize, dedicated_controller: bool, advertised: Option<u16>) -> KafkaCluster {
        Self::start_as_secured(n, dedicated_controller, advertised, false)
    }

    fn start_as_secured(
        n: usize,
        dedicated_controller: bool,
        advertised: Option<u16>,
        secured: bool,
    ) -> KafkaCluster {
        Self::start_formatted(n, dedicated_controller, advertised, secured, &[])
    }

    /// [`start_with_controller`](Self::start_with_controller)`(n)` with
    /// the storage formatted with these feature levels
    /// (`kafka-storage format --feature name=level`), say
    /// `transaction.version=1` for a cluster that runs the first
    /// transaction protocol (Kafka 4.x formats with 2).
    pub fn start_with_controller_features(n: usize, features: &[&str]) -> KafkaCluster {
        Self::start_formatted(n, true, None, false, features)
    }

    fn start_formatted(
        n: usize,
        dedicated_controller: bool,
        advertised: Option<u16>,
        secured: bool,
        features: &[&str],
    ) -> KafkaCluster {
        assert!(n == 1 || n == 3, "KafkaCluster::start({n}): 1 or 3 brokers");
        libs_dir(); // fails early, naming the install script
        for attempt in 1..=3 {
            let started = Instant::now();
            let cluster = Self::create(n, dedicated_controller, advertised, secured, features);
            let all = cluster.broker_ids();
            match cluster.wait_until(|c| c.registered_brokers() == all) {
                Ok(()) => {
                    eprintln!(
                        "kafka: {n}-broker cluster ready in {:.1?} at {} (dir {})",
                        started.elapsed(),
                        cluster.bootstrap(),
                        cluster.dir.display()
                    );
                    return cluster;
                }
                // Another process took a port between probing and binding.
                Err(why) if attempt < 3 && cluster.any_log_contains("Address already in use") => {
                    eprintln!("kafka: start attempt {attempt} failed ({why}); new ports");
                }
                Err(why) => {
                    cluster.dump_logs();
                    panic!("kafka: {n}-broker cluster did not start: {why}");
                }
            }
        }
        unreachable!()
    }

    /// A cluster of `n` brokers (1 or 3) started once per test binary and
    /// never stopped (its JVMs die with the binary). Tests sharing it use
    /// topic names of their own.
    pub fn shared(n: usize) -> &'static KafkaCluster {
        static ONE: OnceLock<KafkaCluster> = OnceLock::new();
        static THREE: OnceLock<KafkaCluster> = OnceLock::new();
        let cell = match n {
            1 => &ONE,
            3 => &THREE,
            _ => panic!("KafkaCluster::shared({n}): 1 or 3 brokers"),
        };
        cell.get_or_init(|| KafkaCluster::start(n))
    }

    /// [`start_with_controller`](Self::start_with_controller)`(3)`, once per
    /// test binary.
    pub fn shared_with_controller(n: usize) -> &'static KafkaCluster {
        static THREE: OnceLock<KafkaCluster> = OnceLock::new();
        assert_eq!(n, 3, "KafkaCluster::shared_with_controller({n}): 3 brokers");
        THREE.get_or_init(|| KafkaCluster::start_with_controller(n))
    }

    /// Lays out the directories, formats the storage and spawns the JVMs.
    fn create(
        n: usize,
        dedicated_controller: bool,
        advertised: Option<u16>,
        secured: bool,
        features: &[&str],
    ) -> KafkaCluster {
        let dir = new_cluster_dir();
        let secured = secured.then(|| {
            let ports = free_ports(4 * n);
            let (ca_pem, client_cert, client_key) = write_certificates(&dir);
            SecuredListeners {
                brokers: ports.chunks(4).map(|p| [p[0], p[1], p[2], p[3]]).collect(),
                sasl_ssl: ports[0],
                ssl: ports[1],
                mtls: ports[2],
                oidc: ports[3],
                oidc_key: write_oidc_key(&dir),
                ca_pem,
                client_cert,
                client_key,
            }
        });
        let ports = free_ports(2 * n);
        let (ports, controller_ports) = ports.split_at(n);
        let voters: Vec<String> = if dedicated_controller {
            vec![format!("{CONTROLLER_ID}@127.0.0.1:{}", controller_ports[0])]
        } else {
            controller_ports
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{i}@127.0.0.1:{p}"))
                .collect()
        };
        let roles = if dedicated_controller {
            Roles::Broker
        } else {
            Roles::Combined
        };
        std::fs::write(dir.join("log4j2.xml"), BROKER_LOG4J2).expect("write log4j2.xml");
        std::fs::write(dir.join("tools-log4j2.xml"), TOOLS_LOG4J2).expect("write log4j2.xml");
        let brokers: Vec<Broker> = (0..n)
            .map(|i| {
                let broker = Broker {
                    id: i as i32,
                    port: AtomicU16::new(ports[i]),
                    dir: dir.join(format!("broker-{i}")),
                    child: Mutex::new(None),
                };
                std::fs::create_dir_all(&broker.dir).expect("create broker dir");
                let mut config = broker_config(
                    roles,
                    n,
                    i as i32,
                    ports[i],
                    controller_ports[i],
                    &voters.join(","),
                    &broker.data_dir(),
                );
                if let Some(a) = advertised {
                    config = config.replace(
                        &format!("advertised.listeners=PLAINTEXT://127.0.0.1:{}", ports[i]),
                        &format!("advertised.listeners=PLAINTEXT://127.0.0.1:{a}"),
                    );
                }
                if let Some(s) = &secured {
                    config = secured_config(&config, s, i, &dir);
                }
                if let Some((_, plugin)) = BROKER_PLUGIN.get() {
                    config.push_str(plugin);
                }
                std::fs::write(broker.config_path(), config).expect("write server.properties");
                broker
            })
            .collect();
        let controller = dedicated_controller.then(|| {
            let c = Broker {
                id: CONTROLLER_ID,
                port: AtomicU16::new(controller_ports[0]),
                dir: dir.join("controller"),
                child: Mutex::new(None),
            };
            std::fs::create_dir_all(&c.dir).expect("create controller dir");
            let mut config = broker_config(
                Roles::Controller,
                n,
                CONTROLLER_ID,
                0,
                controller_ports[0],
                &voters.join(","),
                &c.data_dir(),
            );
            // ACLs are kept (and created) by the controller: it runs the
            // brokers' authorizer; the brokers reach it as ANONYMOUS.
            if secured.is_some() {
                config.push_str(
                    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
                     super.users=User:ANONYMOUS\n",
                );
            }
            std::fs::write(c.config_path(), config).expect("write server.properties");
            c
        });
        let cluster = KafkaCluster {
            dir,
            brokers,
            controller,
            secured,
        };
        cluster.format_storage(features);
        for b in cluster.nodes() {
            b.spawn(&cluster.dir.join("log4j2.xml"));
        }
        cluster
    }

    /// Every JVM: the brokers, and the dedicated controller if any.
    fn nodes(&self) -> impl Iterator<Item = &Broker> {
        self.brokers.iter().chain(self.controller.as_ref())
    }

    /// `kafka-storage format` for every broker, in parallel, with one new
    /// cluster id and these feature levels (`--feature`) beside the
    /// release's defaults.
    fn format_storage(&self, features: &[&str]) {
        let cluster_id = new_cluster_id();
        let tools = self.dir.join("tools-log4j2.xml");
        let children: Vec<Child> = self
            .nodes()
            .map(|b| {
                let mut cmd = java(TOOL_JVM, &tools, "kafka.tools.StorageTool");
                cmd.args(["format", "--cluster-id", &cluster_id, "--config"])
                    .arg(b.config_path());
                for f in features {
                    cmd.arg("--feature").arg(f);
                }
                if self.secured.is_some() {
                    for (user, password) in [SASL_USER, LIMITED_USER, UNTRUSTED_USER, ADMIN_USER] {
                        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                            cmd.arg("--add-scram")
                                .arg(format!("{mechanism}=[name={user},password={password}]"));
                        }
                    }
                }
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                spawn_tied_to_process(cmd).expect("spawn kafka.tools.StorageTool")
            })
            .collect();
        for (b, child) in self.nodes().zip(children) {
            let out = child.wait_with_output().expect("wait for StorageTool");
            assert!(
                out.status.success(),
                "kafka.tools.StorageTool format for broker {} failed ({}):\n{}{}",
                b.id,
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Polls `ready` every 100 ms until it holds; fails early when a broker
    /// that should run has exited.
    fn wait_until(&self, ready: impl Fn(&KafkaCluster) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            for b in self.nodes() {
                if let Some(status) = b.exited() {
                    return Err(format!("broker {} exited: {status}", b.id));
                }
            }
            if ready(self) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not ready within {START_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The broker ids the first answering live broker lists in Metadata:
    /// registered and unfenced ones.
    fn registered_brokers(&self) -> Vec<i32> {
        for b in self.brokers.iter().filter(|b| b.pid().is_some()) {
            if let Some(meta) = metadata_blocking(&b.address(), None) {
                let mut ids: Vec<i32> = meta.brokers.iter().map(|b| b.node_id.0).collect();
                ids.sort_unstable();
                return ids;
            }
        }
        Vec::new()
    }

    fn any_log_contains(&self, needle: &str) -> bool {
        self.nodes()
            .any(|b| std::fs::read_to_string(b.log_path()).is_ok_and(|log| log.contains(needle)))
    }

    /// Every broker's `host:port`, comma-separated.
    pub fn bootstrap(&self) -> String {
        self.brokers
            .iter()
            .map(Broker::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Broker `id`'s `host:port`.
    pub fn address(&self, id: i32) -> String {
        self.broker(id).address()
    }

    /// The broker ids, `0..n`.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.brokers.iter().map(|b| b.id).collect()
    }

    /// Broker `id`'s process id, while it runs.
    pub fn pid(&self, id: i32) -> Option<u32> {
        self.broker(id).pid()
    }

    fn broker(&self, id: i32) -> &Broker {
        self.brokers
            .iter()
            .find(|b| b.id == id)
            .unwrap_or_else(|| panic!("no broker {id}"))
    }

    /// Kills broker `id` with SIGKILL (no clean shutdown).
    pub fn kill(&self, id: i32) {
        self.broker(id).kill();
    }

    /// Freezes broker `id` with SIGSTOP, and waits until the kernel shows
    /// it stopped: its connections stay open and silent.
    pub fn stop(&self, id: i32) {
        let pid = self.broker(id).pid().expect("broker runs");
        signal_group(pid, libc::SIGSTOP);
        wait_for_state(pid, |s| s == 'T', "stopped");
    }

    /// Resumes broker `id` after [`stop`](Self::stop), and waits until it
    /// runs again.
    pub fn cont(&self, id: i32) {
        let pid = self.broker(id).pid().expect("broker runs");
        signal_group(pid, libc::SIGCONT);
        wait_for_state(pid, |s| s != 'T', "running");
    }

    /// Kills broker `id` if it runs, starts it again on the same ports and
    /// data, and waits until the cluster lists it again. That takes the
    /// JVM's start-up and at least the rest of `broker.session.timeout.ms`
    /// (4 s): until the controller has fenced the killed incarnation it
    /// refuses the new one with DUPLICATE_BROKER_REGISTRATION.
    pub fn restart(&self, id: i32) {
        let b = self.broker(id);
        b.kill();
        b.spawn(&self.dir.join("log4j2.xml"));
        let address = b.address();
        let started = Instant::now();
        let back = self.wait_until(|_| {
            metadata_blocking(&address, None)
                .is_some_and(|m| m.brokers.iter().any(|x| x.node_id.0 == id))
        });
        if let Err(why) = back {
            self.dump_logs();
            panic!("kafka: broker {id} did not come back: {why}");
        }
        eprintln!("kafka: broker {id} back in {:.1?}", started.elapsed());
    }

    /// Starts broker `id` (killed first if it runs) listening on, and
    /// advertising, `127.0.0.1:port` for PLAINTEXT instead of its port
    /// (its other listeners stay), and waits until the cluster lists it
    /// there: the same broker id and data at a new address, its old one
    /// refusing connections. The cluster's addresses follow.
    pub fn relisten(&self, id: i32, port: u16) {
        let b = self.broker(id);
        let old = format!("PLAINTEXT://127.0.0.1:{}", b.port.load(Ordering::Relaxed));
        let new = format!("PLAINTEXT://127.0.0.1:{port}");
        let path = b.config_path();
        let text = std::fs::read_to_string(&path).expect("read server.properties");
        let moved: String = text
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k @ ("listeners" | "advertised.listeners"), v)) => {
                    let v: Vec<&str> = v
                        .split(',')
                        .map(|e| if e == old { new.as_str() } else { e })
                        .collect();
                    format!("{k}={}\n", v.join(","))
                }
                _ => format!("{l}\n"),
            })
            .collect();
        assert_ne!(text, moved, "broker {id} has no listener {old}");
        std::fs::write(&path, moved).expect("write server.properties");
        b.port.store(port, Ordering::Relaxed);
        self.restart(id);
    }

    /// Restarts broker `id` advertising `127.0.0.1:port`: the same broker
    /// id at another address.
    pub fn readvertise(&self, id: i32, port: u16) {
        let path = self.broker(id).config_path();
        let text = std::fs::read_to_string(&path).expect("read server.properties");
        let moved: String = text
            .lines()
            .map(|l| {
                if l.starts_with("advertised.listeners=") {
                    format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, moved).expect("write server.properties");
        self.restart(id);
    }

    /// Stops broker `id` cleanly (SIGTERM: a controlled shutdown, which
    /// moves its leaderships away first) and waits until it has exited.
    pub fn shutdown(&self, id: i32) {
        let b = self.broker(id);
        let Some(mut child) = b.child.lock().unwrap().take() else {
            return;
        };
        signal_group(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                eprintln!("kafka: broker {id} ignored SIGTERM for 60 s; killing it");
                signal_group(child.id(), libc::SIGKILL);
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every broker is registered and unfenced.
    pub fn wait_for_brokers(&self) {
        let all = self.broker_ids();
        if let Err(why) = self.wait_until(|c| c.registered_brokers() == all) {
            self.dump_logs();
            panic!("kafka: not every broker is back: {why}");
        }
    }

    /// Waits until every partition of every topic has all its replicas in
    /// sync (a restarted broker has caught up).
    pub fn wait_for_full_isr(&self) {
        let ready = |c: &KafkaCluster| {
            c.live_metadata(None).is_some_and(|m| {
                m.topics.iter().all(|t| {
                    t.partitions.iter().all(|p| {
                        let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                        let mut replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
                        isr.sort_unstable();
                        replicas.sort_unstable();
                        p.leader_id.0 >= 0 && isr == replicas
                    })
                })
            })
        };
        if let Err(why) = self.wait_until(ready) {
            self.dump_logs();
            panic!("kafka: replicas never all in sync: {why}");
        }
    }

    /// Metadata from the first live broker that answers.
    fn live_metadata(&self, topic: Option<&str>) -> Option<MetadataResponse> {
        self.brokers
            .iter()
            .filter(|b| b.pid().is_some_and(|pid| process_state(pid) != Some('T')))
            .find_map(|b| metadata_blocking(&b.address(), topic))
    }

    /// Each partition's leader (-1 for none), by partition.
    pub fn leaders(&self, topic: &str) -> Vec<i32> {
        let m = self
            .live_metadata(Some(topic))
            .unwrap_or_else(|| panic!("no broker answers Metadata for {topic}"));
        let t = m.topics.first().expect("the topic");
        let mut leaders: Vec<(i32, i32)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        leaders.sort_unstable();
        leaders.into_iter().map(|(_, l)| l).collect()
    }

    /// How many partitions `topic` has now.
    pub fn partition_count(&self, topic: &str) -> i32 {
        self.leaders(topic).len() as i32
    }

    /// Runs Kafka tool `main` (a class in `kafka-tools` or the broker jar)
    /// with `args` against this cluster and returns what it printed;
    /// panics with its output if it fails.
    pub fn run(&self, main: &str, args: &[&str]) -> String {
        let mut cmd = self.tool(main);
        cmd.args(args);
        let out = run_tool(cmd);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{main} {args:?} failed ({}):\n{text}",
            out.status
        );
        text
    }

    /// Grows `topic` to `partitions` partitions (`TopicCommand --alter`)
    /// and waits until every new partition has a leader.
    pub fn add_partitions(&self, topic: &str, partitions: i32) {
        let n = partitions.to_string();
        self.run(
            "org.apache.kafka.tools.TopicCommand",
            &[
                "--bootstrap-server",
                &self.bootstrap(),
                "--alter",
                "--topic",
                topic,
                "--partitions",
                &n,
            ],
        );
        let grown = |c: &KafkaCluster| {
            let l = c.leaders(topic);
            l.len() == partitions as usize && l.iter().all(|l| *l >= 0)
        };
        if let Err(why) = self.wait_until(grown) {
            panic!("{topic} never had {partitions} partitions with leaders: {why}");
        }
    }

    /// Deletes `topic` (`TopicCommand --delete`).
    pub fn delete_topic(&self, topic: &str) {
        self.run(
            "org.apache.kafka.tools.TopicCommand",
            &[
                "--bootstrap-server",
                &self.bootstrap(),
                "--delete",
                "--topic",
                topic,
            ],
        );
    }

    /// Reassigns every partition of `topic` to the same replicas in a
    /// rotated order (`ReassignPartitionsCommand`), so that each one's
    /// preferred leader changes, and waits until the reassignment is done.
    pub fn rotate_replicas(&self, topic: &str) {
        let m = self.live_metadata(Some(topic)).expect("metadata");
        let t = m.topics.first().expect("the topic");
        let parts: Vec<String> = t
            .partitions
            .iter()
            .map(|p| {
                let mut r: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
                r.rotate_left(1);
                format!(
                    r#"{{"topic":"{topic}","partition":{},"replicas":[{}]}}"#,
                    p.partition_index,
                    r.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        let file = self.dir.join(format!("reassign-{topic}.json"));
        std::fs::write(
            &file,
            format!(r#"{{"version":1,"partitions":[{}]}}"#, parts.join(",")),
        )
        .expect("write reassignment");
        let file = file.display().to_string();
        let b = self.bootstrap();
        self.run(
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            &[
                "--bootstrap-server",
                &b,
                "--reassignment-json-file",
                &file,
                "--execute",
            ],
        );
        let done = |c: &KafkaCluster| {
            let out = c.run(
                "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                &[
                    "--bootstrap-server",
                    &b,
                    "--reassignment-json-file",
                    &file,
                    "--verify",
                ],
            );
            !out.contains("still in progress")
        };
        if let Err(why) = self.wait_until(done) {
            panic!("reassignment of {topic} never finished: {why}");
        }
    }

    /// Elects the preferred (first-listed) replica of every partition of
    /// `topic` as its leader (`LeaderElectionCommand --election-type
    /// PREFERRED`).
    pub fn elect_preferred_leaders(&self, topic: &str) {
        let n = self.partition_count(topic);
        let parts: Vec<String> = (0..n)
            .map(|p| format!(r#"{{"topic":"{topic}","partition":{p}}}"#))
            .collect();
        let file = self.dir.join(format!("elect-{topic}.json"));
        std::fs::write(&file, format!(r#"{{"partitions":[{}]}}"#, parts.join(",")))
            .expect("write election file");
        let file = file.display().to_string();
        self.run(
            "org.apache.kafka.tools.LeaderElectionCommand",
            &[
                "--bootstrap-server",
                &self.bootstrap(),
                "--election-type",
                "PREFERRED",
                "--path-to-json-file",
                &file,
            ],
        );
    }

    /// Sets a produce quota (`producer_byte_rate`, bytes a second per
    /// broker) for clients with `client_id` (`kafka.admin.ConfigCommand`).
    pub fn set_producer_quota(&self, client_id: &str, bytes_per_second: u64) {
        let config = format!("producer_byte_rate={bytes_per_second}");
        self.run(
            "kafka.admin.ConfigCommand",
            &[
                "--bootstrap-server",
                &self.bootstrap(),
                "--alter",
                "--add-config",
                &config,
                "--entity-type",
                "clients",
                "--entity-name",
                client_id,
            ],
        );
    }

    /// Prints the tail of every broker's log to stderr.
    pub fn dump_logs(&self) {
        for b in self.nodes() {
            let log = std::fs::read_to_string(b.log_path()).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "===== kafka broker {} ({}), last {} of {} lines of {} =====",
                b.id,
                b.address(),
                tail.len(),
                lines.len(),
                b.log_path().display()
            );
            for line in tail {
                eprintln!("{line}");
            }
        }
    }

    /// A guard that prints the brokers' logs if the test panics while it
    /// lives: for tests on a [`shared`](Self::shared) cluster, which is
    /// never dropped.
    pub fn logs_on_panic(&self) -> LogsOnPanic<'_> {
        LogsOnPanic(self)
    }

    /// Creates `topic` (CreateTopics through Courier's `Connection`, not
    /// `courier_kafka::admin`, which the tests check against Kafka's tools) and waits until every running
    /// broker knows a leader for each partition.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i16,
        configs: &[(&str, &str)],
    ) {
        let t = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            );
        let req = CreateTopicsRequest::default()
            .with_topics(vec![t])
            .with_timeout_ms(30_000);
        // Any running broker forwards CreateTopics to the active controller.
        let mut conn = None;
        for b in self.brokers.iter().filter(|b| b.pid().is_some()) {
            if let Ok(c) = Connection::connect(&b.address(), &ConnectionOptions::default()).await {
                conn = Some(c);
                break;
            }
        }
        let mut conn = conn.unwrap_or_else(|| panic!("no broker answers to create {topic}"));
        let resp = conn
            .request(&req)
            .await
            .unwrap_or_else(|e| panic!("CreateTopics {topic}: {e}"));
        let result = resp.topics.first().expect("a CreateTopics result");
        assert_eq!(
            result.error_code, 0,
            "CreateTopics {topic}: error {} ({:?})",
            result.error_code, result.error_message
        );

        let deadline = Instant::now() + Duration::from_secs(60);
        for b in self.brokers.iter().filter(|b| b.pid().is_some()) {
            loop {
                let ready = metadata(&b.address(), Some(topic)).await.is_some_and(|m| {
                    m.topics.iter().any(|t| {
                        t.error_code == 0
                            && t.partitions.len() == partitions as usize
                            && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
                    })
                });
                if ready {
                    break;
                }
                if Instant::now() > deadline {
                    self.dump_logs();
                    panic!("broker {} never saw leaders for all of {topic}", b.id);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The broker that leads `topic`'s `partition`, as the first answering
    /// running broker sees it.
    pub async fn leader(&self, topic: &str, partition: i32) -> i32 {
        for b in self.brokers.iter().filter(|b| b.pid().is_some()) {
            let Some(meta) = metadata(&b.address(), Some(topic)).await else {
                continue;
            };
            let leader = meta
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == partition)
                .map(|p| p.leader_id.0);
            if let Some(id) = leader.filter(|id| *id >= 0) {
                return id;
            }
        }
        panic!("no broker knows a leader for {topic}/{partition}")
    }

    /// Runs the Java console consumer (`org.apache.kafka.tools.consumer.
    /// ConsoleConsumer`, its own consumer group, from the beginning) until it
    /// has read `expected` records of `topic`, or found none for `idle`;
    /// panics if it read fewer. The records come sorted by partition and
    /// offset.
    pub fn console_consume(&self, topic: &str, expected: usize, idle: Duration) -> Vec<JavaRecord> {
        let mut cmd = self.tool("org.apache.kafka.tools.consumer.ConsoleConsumer");
        cmd.args(["--bootstrap-server", &self.bootstrap(), "--topic", topic])
            .args(["--from-beginning", "--max-messages", &expected.to_string()])
            .args(["--timeout-ms", &idle.as_millis().to_string()]);
        for p in [
            "print.timestamp=true",
            "print.partition=true",
            "print.offset=true",
            "print.headers=true",
            "print.key=true",
            "key.separator=\t",
            "headers.separator=,",
            "null.literal=<null>",
        ] {
            cmd.args(["--property", p]);
        }
        let out = run_tool(cmd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut records: Vec<JavaRecord> = stdout
            .lines()
            .map(|l| JavaRecord::parse(l).unwrap_or_else(|| panic!("console consumer line {l:?}")))
            .collect();
        if records.len() < expected {
            self.dump_logs();
            panic!(
                "the Java console consumer read {} of {expected} records of {topic}; its stderr:\n{}",
                records.len(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        records.sort_by_key(|r| (r.partition, r.offset));
        records
    }

    /// Produces `key\tvalue` lines to `topic` with the Java console producer
    /// (`org.apache.kafka.tools.ConsoleProducer`, Java's default
    /// partitioner): the oracle for where Java puts a keyed record.
    pub fn console_produce(&self, topic: &str, records: &[(String, String)]) {
        let mut cmd = self.tool("org.apache.kafka.tools.ConsoleProducer");
        cmd.args(["--bootstrap-server", &self.bootstrap(), "--topic", topic])
            .args([
                "--property",
                "parse.key=true",
                "--property",
                "key.separator=\t",
            ])
            .args(["--producer-property", "acks=all"])
            .stdin(Stdio::piped());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = spawn_tied_to_process(cmd).expect("spawn ConsoleProducer");
        let mut stdin = child.stdin.take().expect("piped stdin");
        for (k, v) in records {
            assert!(!k.contains(['\t', '\n']) && !v.contains('\n'));
            writeln!(stdin, "{k}\t{v}").expect("write to ConsoleProducer");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("wait for ConsoleProducer");
        assert!(
            out.status.success(),
            "ConsoleProducer failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The batches of every partition of `topic` as each broker that holds
    /// a replica stored them, keyed by (partition, broker id), read from
    /// the segment files by `kafka.tools.DumpLogSegments` (one JVM for all).
    pub fn dump_log(&self, topic: &str) -> BTreeMap<(i32, i32), Vec<DumpedBatch>> {
        // Segment file -> (partition, broker); files sort by base offset.
        let mut owner = BTreeMap::new();
        for b in &self.brokers {
            let Ok(dirs) = std::fs::read_dir(b.data_dir()) else {
                continue;
            };
            for dir in dirs.flatten() {
                let name = dir.file_name().to_string_lossy().into_owned();
                let Some(partition) = name
                    .strip_prefix(topic)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                for f in std::fs::read_dir(dir.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if f.path().extension().is_some_and(|e| e == "log") {
                        owner.insert(f.path(), (partition, b.id));
                    }
                }
            }
        }
        let mut out: BTreeMap<(i32, i32), Vec<DumpedBatch>> = BTreeMap::new();
        if owner.is_empty() {
            return out;
        }
        let files: Vec<String> = owner.keys().map(|p| p.display().to_string()).collect();
        let mut cmd = self.tool("kafka.tools.DumpLogSegments");
        cmd.args(["--files", &files.join(",")]);
        let dump = run_tool(cmd);
        assert!(
            dump.status.success(),
            "DumpLogSegments failed ({}):\n{}",
            dump.status,
            String::from_utf8_lossy(&dump.stderr)
        );
        let mut current = None;
        for line in String::from_utf8_lossy(&dump.stdout).lines() {
            if let Some(file) = line.strip_prefix("Dumping ") {
                current = Some(owner[Path::new(file.trim())]);
                out.entry(owner[Path::new(file.trim())]).or_default();
            } else if line.starts_with("baseOffset:") {
                let key = current.expect("a batch line after a Dumping line");
                out.entry(key).or_default().push(DumpedBatch::parse(line));
            }
        }
        out
    }

    /// Every record of `topic` (partitions `0..partitions`), read by the
    /// rdkafka consumer: as many as the high watermarks say it holds
    /// (Kafka's are exact once every record is replicated, as `acks=all`
    /// waits for; after acks 0 or 1 call [`KafkaCluster::wait_for_records`]
    /// first), duplicates included, by partition and offset.
    pub fn read_log(&self, topic: &str, partitions: i32) -> Vec<super::ReadRecord> {
        let total: i64 = self.end_offsets(topic, partitions).iter().sum();
        super::read_back(
            &self.bootstrap(),
            topic,
            partitions,
            total as usize,
            Duration::from_secs(120),
        )
    }

    /// Waits (up to 30 s) until `topic`'s high watermarks add up to at
    /// least `records`; returns the last sum. For `acks` 0 and 1: the high
    /// watermark moves only once the followers have fetched the records,
    /// which the producer did not wait for.
    pub fn wait_for_records(&self, topic: &str, partitions: i32, records: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let held: i64 = self.end_offsets(topic, partitions).iter().sum();
            if held as usize >= records || Instant::now() > deadline {
                return held as usize;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Each partition's log end offset (high watermark) as the rdkafka
    /// client reads it: how many records `topic` holds, duplicates
    /// included.
    pub fn end_offsets(&self, topic: &str, partitions: i32) -> Vec<i64> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let client: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("log_level", "3")
            .create()
            .expect("create rdkafka client");
        // A leader that just moved answers OFFSET_NOT_AVAILABLE until its
        // high watermark catches up, and a topic just created may not have
        // reached the metadata this client reads: asked again, for up to
        // 60 s.
        use rdkafka::types::RDKafkaErrorCode as Code;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        (0..partitions)
            .map(|p| loop {
                match client.fetch_watermarks(topic, p, Duration::from_secs(30)) {
                    Ok((_, high)) => break high,
                    Err(e)
                        if matches!(
                            e.rdkafka_error_code(),
                            Some(
                                Code::OffsetNotAvailable
                                    | Code::NotLeaderForPartition
                                    | Code::LeaderNotAvailable
                                    | Code::UnknownTopicOrPartition
                            )
                        ) && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Err(e) => panic!("watermarks of {topic}/{p}: {e}"),
                }
            })
            .collect()
    }

    /// A Kafka command-line tool, logging warnings to stderr.
    fn tool(&self, main: &str) -> Command {
        java(TOOL_JVM, &self.dir.join("tools-log4j2.xml"), main)
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            self.dump_logs();
        }
        for b in self.nodes() {
            b.kill();
        }
        if failed {
            eprintln!("kafka: logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Prints a shared cluster's logs when the test holding it panics.
pub struct LogsOnPanic<'a>(&'a KafkaCluster);

impl Drop for LogsOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.dump_logs();
        }
    }
}

/// Runs a tool to its end, with its output captured.
fn run_tool(mut cmd: Command) -> std::process::Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = spawn_tied_to_process(cmd).expect("spawn a Kafka tool");
    child.wait_with_output().expect("wait for a Kafka tool")
}

// ---------------------------------------------------------------------------
// Metadata, through Courier's own connection.

/// Metadata from the broker at `addr`: all brokers, and `topic` if given.
async fn metadata(addr: &str, topic: Option<&str>) -> Option<MetadataResponse> {
    let mut opts = ConnectionOptions::default();
    opts.connect_timeout = Duration::from_secs(2);
    opts.request_timeout = Duration::from_secs(5);
    let mut conn = Connection::connect(addr, &opts).await.ok()?;
    let topics = topic.map(|t| {
        MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
    });
    let req = MetadataRequest::default()
        .with_topics(Some(topics.into_iter().collect()))
        .with_allow_auto_topic_creation(false);
    conn.request(&req).await.ok()
}

/// [`metadata`] from synchronous code, also inside a tokio runtime: on a
/// thread of its own with a runtime of its own.
fn metadata_blocking(addr: &str, topic: Option<&str>) -> Option<MetadataResponse> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(metadata(addr, topic))
        })
        .join()
        .expect("metadata thread")
    })
}

// ---------------------------------------------------------------------------
// What the Java tools print.

/// A record as the Java console consumer printed it (as strings: the
/// tests write UTF-8 keys and values without tabs or newlines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaRecord {
    pub partition: i32,
    pub offset: i64,
    /// `CreateTime` or `LogAppendTime`.
    pub timestamp_type: String,
    pub timestamp: i64,
    /// `(key, value)`; a null value reads as `None`.
    pub headers: Vec<(String, Option<String>)>,
    pub key: Option<String>,
    pub value: Option<String>,
}

impl JavaRecord {
    /// Parses `CreateTime:1\tPartition:0\tOffset:5\th1:v1,h2:v2\tkey\tvalue`
    /// (`NO_HEADERS` when there are none, `<null>` for null).
    fn parse(line: &str) -> Option<JavaRecord> {
        let mut fields = line.splitn(6, '\t');
        let (timestamp_type, timestamp) = fields.next()?.split_once(':')?;
        let partition = fields.next()?.strip_prefix("Partition:")?.parse().ok()?;
        let offset = fields.next()?.strip_prefix("Offset:")?.parse().ok()?;
        let headers = match fields.next()? {
            "NO_HEADERS" => Vec::new(),
            hs => hs
                .split(',')
                .map(|h| {
                    let (k, v) = h.split_once(':').unwrap_or((h, "<null>"));
                    (k.to_string(), nullable(v))
                })
                .collect(),
        };
        Some(JavaRecord {
            partition,
            offset,
            timestamp_type: timestamp_type.to_string(),
            timestamp: timestamp.parse().ok()?,
            headers,
            key: nullable(fields.next()?),
            value: nullable(fields.next()?),
        })
    }
}

fn nullable(s: &str) -> Option<String> {
    (s != "<null>").then(|| s.to_string())
}

/// One record batch as `kafka.tools.DumpLogSegments` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub count: i64,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// `none`, `gzip`, `snappy`, `lz4` or `zstd`.
    pub codec: String,
    /// Whether Kafka's own CRC-32C check of the stored batch passed.
    pub crc_valid: bool,
    /// Every `name: value` pair of the line, for anything else.
    pub fields: BTreeMap<String, String>,
}

impl DumpedBatch {
    /// Parses `baseOffset: 0 lastOffset: 2 count: 3 ... compresscodec: zstd
    /// crc: 3989935911 isvalid: true`.
    fn parse(line: &str) -> DumpedBatch {
        let mut fields = BTreeMap::new();
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if let Some(name) = w.strip_suffix(':') {
                if let Some(v) = words.next_if(|v| !v.ends_with(':')) {
                    fields.insert(name.to_string(), v.to_string());
                }
            }
        }
        let get = |name: &str| -> &str {
            fields
                .get(name)
                .unwrap_or_else(|| panic!("no {name} in DumpLogSegments line {line:?}"))
        };
        let num = |name: &str| -> i64 {
            get(name)
                .parse()
                .unwrap_or_else(|_| panic!("{name} in {line:?}"))
        };
        DumpedBatch {
            base_offset: num("baseOffset"),
            last_offset: num("lastOffset"),
            count: num("count"),
            base_sequence: num("baseSequence") as i32,
            last_sequence: num("lastSequence") as i32,
            producer_id: num("producerId"),
            producer_epoch: num("producerEpoch") as i16,
            codec: get("compresscodec").to_string(),
            crc_valid: get("isvalid") == "true",
            fields: fields.clone(),
        }
    }
}

// ---------------------------------------------------------------------------
// Files and names.

/// A new, empty `<tmp>/courier-kafka/<pid>-<n>` (`$COURIER_KAFKA_DIR/<pid>-<n>`
/// when that is set: the benches put the brokers' data in memory with it),
/// after removing the directories of test binaries that no longer run.
fn new_cluster_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let root = std::env::var_os("COURIER_KAFKA_DIR")
        .map_or_else(|| std::env::temp_dir().join("courier-kafka"), PathBuf::from);
    std::fs::create_dir_all(&root).expect("create the courier-kafka temp dir");
    if let Ok(entries) = std::fs::read_dir(&root) {
        for e in entries.flatten() {
            let name = e.file_name();
            let pid = name.to_string_lossy().split('-').next().map(str::to_string);
            let alive = pid.is_some_and(|p| Path::new("/proc").join(p).exists());
            if !alive {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = root.join(format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the cluster dir");
    dir
}

/// `count` distinct loopback ports that were free a moment ago (all bound
/// at once, so none repeats).
fn free_ports(count: usize) -> Vec<u16> {
    // Below the kernel's ephemeral range (32768-60999 by default), not from
    // it: a port released here is bound by a broker later, at its start or
    // at a restart on new ports, and a port of the ephemeral range can be
    // taken in between by any connection's source port or another bind to
    // port 0 (seen: a broker restarted on new ports beside the side-by-side
    // benches exited "Address already in use").
    let mut listeners: Vec<std::net::TcpListener> = Vec::new();
    while listeners.len() < count {
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", fastrand::u16(20_000..32_000))) {
            listeners.push(l);
        }
    }
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

/// A Kafka cluster id: 16 random bytes in unpadded base64url, not starting
/// with '-' (Kafka's `Uuid.randomUuid` rule, so the CLI cannot mistake it
/// for a flag).
fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    loop {
        let bytes: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
        let mut bits: u32 = 0;
        let mut nbits = 0;
        let mut id = String::with_capacity(22);
        for b in bytes {
            bits = (bits << 8) | u32::from(b);
            nbits += 8;
            while nbits >= 6 {
                nbits -= 6;
                id.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
            }
        }
        if nbits > 0 {
            id.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
        }
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// `server.properties` for broker `i` of `n`.
/// What a node of the cluster is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Roles {
    /// A broker that is also one of the controllers.
    Combined,
    /// A broker only (beside a dedicated controller).
    Broker,
    /// The dedicated controller.
    Controller,
}

#[allow(clippy::too_many_arguments)]
fn broker_config(
    roles: Roles,
    n: usize,
    id: i32,
    port: u16,
    controller_port: u16,
    voters: &str,
    data: &Path,
) -> String {
    let min_isr = n.min(2);
    let (process_roles, listeners) = match roles {
        Roles::Combined => (
            "broker,controller",
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 inter.broker.listener.name=PLAINTEXT"
            ),
        ),
        Roles::Broker => (
            "broker",
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 inter.broker.listener.name=PLAINTEXT"
            ),
        ),
        Roles::Controller => (
            "controller",
            format!("listeners=CONTROLLER://127.0.0.1:{controller_port}"),
        ),
    };
    format!(
        "\
# Written by tests/support/kafka.rs.
process.roles={process_roles}
node.id={id}
controller.quorum.voters={voters}
{listeners}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs={data}
# Topics are created by the tests, with the partitions they ask for.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
# Internal topics fit the cluster, with one partition each: quick to create.
offsets.topic.replication.factor={n}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor={n}
transaction.state.log.min.isr={min_isr}
transaction.state.log.num.partitions=1
# Transactions open past their transaction.timeout.ms are aborted within
# a second (default: every 10 s), so timeout tests wait less.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
# Producer ids past producer.id.expiration.ms (KIP-854; 1 day unless a
# test sets it lower, dynamically) are forgotten within a second, not ten
# minutes, so the expiry test waits less.
producer.id.expiration.check.interval.ms=1000
share.coordinator.state.topic.replication.factor={n}
share.coordinator.state.topic.min.isr={min_isr}
group.initial.rebalance.delay.ms=0
# Few threads: the machine has 2 cores and runs up to 4 brokers.
num.network.threads=2
num.io.threads=2
background.threads=2
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
# A killed broker is fenced after 4 s, not 9 s, and an idle follower
# leaves the ISR after 10 s, not 30 s: fault tests wait less.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
replica.lag.time.max.ms=10000
",
        data = data.display()
    )
}

/// `config` with the secured listeners added (see [`SecuredListeners`]).
fn secured_config(config: &str, s: &SecuredListeners, broker: usize, dir: &Path) -> String {
    let plain_users: String = [SASL_USER, LIMITED_USER, UNTRUSTED_USER, ADMIN_USER]
        .iter()
        .map(|(u, p)| format!(" user_{u}=\"{p}\""))
        .collect();
    let [sasl_ssl, ssl, mtls, oidc] = s.brokers[broker];
    let mut out = String::new();
    for line in config.lines() {
        if line.starts_with("listeners=") {
            out.push_str(&format!(
                "{line},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl},MTLS://127.0.0.1:{mtls},OIDC://127.0.0.1:{oidc}\n"
            ));
        } else if line.starts_with("advertised.listeners=") {
            out.push_str(&format!(
                "{line},SASL_SSL://localhost:{sasl_ssl},SSL://localhost:{ssl},MTLS://localhost:{mtls},OIDC://localhost:{oidc}\n"
            ));
        } else if line.starts_with("listener.security.protocol.map=") {
            out.push_str(&format!(
                "{line},SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL,OIDC:SASL_PLAINTEXT\n"
            ));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "\
# The secured listeners (tests/support/kafka.rs, SecuredListeners).
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
# SASL sessions last 4 s (KIP-368): clients must renew them.
listener.name.sasl_ssl.connections.max.reauth.ms=4000
# OAUTHBEARER with Kafka's unsecured validator (alg: none tokens; tests only).
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
# OAUTHBEARER validated as in production (KIP-768): signed JWTs, checked
# against the keys in jwks.json, the audience and the issuer. Sessions end
# when their token expires (KIP-368 needs connections.max.reauth.ms set for
# that; the token's expiry is the sooner).
listener.name.oidc.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oidc.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oidc.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oidc.connections.max.reauth.ms=600000
sasl.oauthbearer.jwks.endpoint.url=file://{jwks}
sasl.oauthbearer.expected.audience={OIDC_AUDIENCE}
sasl.oauthbearer.expected.issuer={OIDC_ISSUER}
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.truststore.type=PEM
ssl.truststore.location={truststore}
listener.name.mtls.ssl.client.auth=required
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:CN=courier-client
",
        keystore = dir.join("broker.pem").display(),
        jwks = dir.join("jwks.json").display(),
        truststore = s.ca_pem.display(),
    ));
    out
}

/// Broker logs: everything at INFO to stdout (which goes to the broker's
/// `kafka.log`), but not the config dump of every start.
const BROKER_LOG4J2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by tests/support/kafka.rs. -->
<Configuration status="warn">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d{HH:mm:ss.SSS}] %-5p %m (%c{1})%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="warn"/>
    <Root level="info"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"#;

/// Tool logs: warnings only, to stderr, so stdout holds only the output.
const TOOLS_LOG4J2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by tests/support/kafka.rs. -->
<Configuration status="warn">
  <Appenders>
    <Console name="err" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d{HH:mm:ss.SSS}] %-5p %m (%c{1})%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="warn"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
"#;
