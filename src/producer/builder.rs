//! [`ProducerBuilder`]: settings by their Java/librdkafka names, checked
//! at `build`, and the start of the actor tree.

use std::sync::Arc;
use std::time::Duration;

use crate::actors::addresses::Addresses;
use crate::actors::scripted::{Script, ScriptedTree};
use crate::actors::supervisor::ProducerSupervisor;
use crate::config::{Acks, ConfigError, ProducerConfig};
use crate::engine::Engine;
use crate::interceptor::{Interceptors, ProducerInterceptor};
use crate::partitioner::Partitioner;
use crate::producer::handle::Producer;
use crate::protocol::record_batch::Compression;
use crate::resolve::Resolver;

impl Producer {
    /// A builder with the Java client's defaults.
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder {
            config: ProducerConfig::default(),
            error: None,
            partitioner: None,
            tokens: None,
            interceptors: Vec::new(),
            resolver: None,
            #[cfg(feature = "fault-injection")]
            tick: None,
        }
    }
}

/// Builds a [`Producer`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use courier_kafka::{Producer, Record};
/// let producer = Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .set("linger.ms", "10")
///     .set("compression.type", "lz4")
///     .build()?;
/// let delivered = producer.send(Record::to("orders").key("k").value("v")).await?;
/// println!("at offset {:?}", delivered.offset);
/// producer.close().await;
/// # Ok(()) }
/// ```
pub struct ProducerBuilder {
    config: ProducerConfig,
    error: Option<ConfigError>,
    partitioner: Option<Box<dyn Partitioner>>,
    tokens: Option<Arc<dyn crate::security::TokenProvider>>,
    interceptors: Vec<Arc<dyn ProducerInterceptor>>,
    resolver: Option<Arc<dyn crate::resolve::Resolve>>,
    #[cfg(feature = "fault-injection")]
    tick: Option<Duration>,
}

impl std::fmt::Debug for ProducerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ProducerBuilder {
    /// `bootstrap.servers`.
    pub fn bootstrap(self, servers: &str) -> Self {
        self.set("bootstrap.servers", servers)
    }

    /// Sets any property by its Java/librdkafka name. A bad value is
    /// reported by [`build`](Self::build), naming the property.
    pub fn set(mut self, property: &str, value: &str) -> Self {
        if self.error.is_none() {
            if let Err(e) = self.config.set(property, value) {
                self.error = Some(e);
            }
        }
        self
    }

    /// `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// `batch.size`.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes;
        self
    }

    /// `acks`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// `compression.type`.
    pub fn compression(mut self, codec: Compression) -> Self {
        self.config.compression = codec;
        self
    }

    /// `delivery.timeout.ms`.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.config.delivery_timeout = timeout;
        self
    }

    /// `buffer.memory`.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.config.buffer_memory = bytes;
        self
    }

    /// A custom partitioner, instead of murmur2 + sticky.
    pub fn partitioner(mut self, p: impl Partitioner) -> Self {
        self.partitioner = Some(Box::new(p));
        self
    }

    /// Adds a [`ProducerInterceptor`] (Java's `interceptor.classes`): its
    /// `on_send` sees each record as a produce call takes it and may
    /// replace it; its `on_report` sees every report, fire-and-forget
    /// records' included. Several run in the order they were added. An
    /// `Arc` of an interceptor is one too, so the application can keep a
    /// handle on it. See [`crate::interceptor`] for where each runs and how
    /// this differs from Java.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use courier_kafka::{DeliveryReport, Producer, ProducerInterceptor};
    ///
    /// #[derive(Default)]
    /// struct Failures(AtomicU64);
    /// impl ProducerInterceptor for Failures {
    ///     fn on_report(&self, report: &DeliveryReport) {
    ///         if !report.is_delivered() {
    ///             self.0.fetch_add(1, Ordering::Relaxed);
    ///         }
    ///     }
    /// }
    ///
    /// let failures = Arc::new(Failures::default());
    /// let builder = Producer::builder()
    ///     .bootstrap("127.0.0.1:9092")
    ///     .interceptor(failures.clone());
    /// # drop(builder);
    /// ```
    pub fn interceptor(mut self, interceptor: impl ProducerInterceptor) -> Self {
        self.interceptors.push(Arc::new(interceptor));
        self
    }

    /// OAUTHBEARER's tokens (`sasl.mechanism=OAUTHBEARER`): asked on every
    /// new connection.
    pub fn token_provider(mut self, p: impl crate::security::TokenProvider) -> Self {
        self.tokens = Some(Arc::new(p));
        self
    }

    /// Who looks up broker host names, on every connect attempt, instead
    /// of the system's resolver ([`SystemResolver`](crate::resolve::SystemResolver)):
    /// an application's own discovery, or a test's fixed answers.
    pub fn resolver(mut self, r: impl crate::resolve::Resolve) -> Self {
        self.resolver = Some(Arc::new(r));
        self
    }

    /// Sets the supervisor's tick, so that a test can check a path needs
    /// no periodic work (say, a very long tick). Only with the
    /// `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn supervisor_tick(mut self, tick: Duration) -> Self {
        self.tick = Some(tick);
        self
    }

    /// The settings so far.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// The engine and the addresses its actors will fill in.
    pub(super) fn engine(self) -> Result<(Arc<Engine>, Arc<Addresses>), ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.config.validate()?;
        self.config.warn_ignored();
        let addresses = Arc::new(Addresses::default());
        let security = crate::security::Security::from_config(&self.config.security, self.tokens)?;
        let resolver = self.resolver.map_or_else(Resolver::default, Resolver);
        let engine = Engine::new(
            self.config,
            self.partitioner,
            addresses.clone(),
            security,
            Interceptors::new(self.interceptors),
            resolver,
        );
        #[cfg(feature = "fault-injection")]
        if let Some(t) = self.tick {
            engine.set_supervisor_tick(t);
        }
        Ok((engine, addresses))
    }

    /// Validates the settings and starts the producer's actors on a
    /// dedicated thread with its own actix system. Use this from plain
    /// tokio code, or any thread.
    pub fn build(self) -> Result<Producer, ConfigError> {
        let (engine, addresses) = self.engine()?;
        Ok(on_own_thread(engine, addresses, ProducerSupervisor::launch))
    }

    /// Validates the settings and starts the producer's actors in the
    /// current actix system (call it from inside one, for example in an
    /// actix-web app), supervised there. Outside a running actix system
    /// (plain tokio code, a thread of its own) it is
    /// [`ConfigError::NoActixSystem`]: use [`build`](Self::build) there.
    pub fn start(self) -> Result<Producer, ConfigError> {
        if !in_actix_system() {
            return Err(ConfigError::NoActixSystem);
        }
        let (engine, addresses) = self.engine()?;
        let supervisor = ProducerSupervisor::launch(engine.clone(), addresses.clone(), false);
        Ok(Producer::from_parts(engine, addresses, supervisor))
    }

    /// A producer whose broker is the testing double's `script`
    /// (`courier_kafka::testing::MockBroker`): the settings are validated as for
    /// a real one and `bootstrap.servers` may be left out. The engine runs
    /// without idempotence unless `enable.idempotence=true` or
    /// `transactional.id` is set explicitly.
    /// `own_thread`: as `build`, else as `start`.
    pub(crate) fn scripted(
        mut self,
        script: Arc<Script>,
        own_thread: bool,
    ) -> Result<Producer, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if !own_thread && !in_actix_system() {
            return Err(ConfigError::NoActixSystem);
        }
        if self.config.bootstrap_servers.is_empty() {
            self.config.bootstrap_servers = vec!["courier-mock-broker:0".into()];
        }
        self.config.validate()?;
        // Idempotence only when asked for (or transactional): the double's
        // producer runs without unless `enable.idempotence=true` is set.
        if self.config.enable_idempotence != Some(true) && self.config.transactional_id.is_none() {
            self.config.enable_idempotence = Some(false);
        }
        let tree = Arc::new(ScriptedTree::new(script));
        let engine = Engine::new(
            self.config,
            self.partitioner,
            tree.clone(),
            None,
            Interceptors::new(self.interceptors),
            Resolver::default(),
        );
        tree.attach(&engine);
        let addresses = Arc::new(Addresses::default());
        let launch = move |engine, addresses, owns_system| {
            ProducerSupervisor::launch_scripted(engine, addresses, owns_system, tree)
        };
        if own_thread {
            return Ok(on_own_thread(engine, addresses, launch));
        }
        let supervisor = launch(engine.clone(), addresses.clone(), false);
        Ok(Producer::from_parts(engine, addresses, supervisor))
    }
}

/// Whether this thread runs an actix system's arbiter, where actors can
/// be started (`actix::spawn` needs its `LocalSet`).
fn in_actix_system() -> bool {
    actix::System::try_current().is_some() && actix::Arbiter::try_current().is_some()
}

/// Starts the producer's actors with `launch` on a dedicated thread with
/// its own actix system.
fn on_own_thread(
    engine: Arc<Engine>,
    addresses: Arc<Addresses>,
    launch: impl FnOnce(Arc<Engine>, Arc<Addresses>, bool) -> actix::Addr<ProducerSupervisor>
        + Send
        + 'static,
) -> Producer {
    let (tx, rx) = std::sync::mpsc::channel();
    let (for_engine, for_addresses) = (engine.clone(), addresses.clone());
    std::thread::Builder::new()
        .name("courier-actors".into())
        .spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                let _ = tx.send(launch(for_engine, for_addresses, true));
            });
            let _ = system.run();
        })
        .expect("spawn the courier actor thread");
    let supervisor = rx.recv().expect("courier actor thread started");
    Producer::from_parts(engine, addresses, supervisor)
}
