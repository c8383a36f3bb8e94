//! Property names other Kafka clients know and Courier's producer does
//! not set: the Java client's (producer, consumer and admin), librdkafka's,
//! and the schema registry serializers' that providers put in the same
//! `client.properties`. [`ProducerConfig::set`](super::ProducerConfig::set)
//! accepts them, and the producer logs one warning naming them all, as the
//! Java client logs "supplied but isn't a known config"; a few whose
//! silent loss would change what the producer does are refused with the
//! reason ([`refusal`]). A name no client knows is still an error.

/// Every configuration name of the Java client 4.1.1
/// (`ProducerConfig`, `ConsumerConfig` and `AdminClientConfig`'s
/// `configNames()`).
pub(super) const JAVA_CLIENT: &[&str] = &[
    "acks",
    "allow.auto.create.topics",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "batch.size",
    "bootstrap.controllers",
    "bootstrap.servers",
    "buffer.memory",
    "check.crcs",
    "client.dns.lookup",
    "client.id",
    "client.rack",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "connections.max.idle.ms",
    "default.api.timeout.ms",
    "delivery.timeout.ms",
    "enable.auto.commit",
    "enable.idempotence",
    "enable.metrics.push",
    "exclude.internal.topics",
    "fetch.max.bytes",
    "fetch.max.wait.ms",
    "fetch.min.bytes",
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "heartbeat.interval.ms",
    "interceptor.classes",
    "internal.leave.group.on.close",
    "internal.throw.on.fetch.stable.offset.unsupported",
    "isolation.level",
    "key.deserializer",
    "key.serializer",
    "linger.ms",
    "max.block.ms",
    "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "max.poll.records",
    "max.request.size",
    "metadata.max.age.ms",
    "metadata.max.idle.ms",
    "metadata.recovery.rebootstrap.trigger.ms",
    "metadata.recovery.strategy",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.recording.level",
    "metrics.sample.window.ms",
    "partition.assignment.strategy",
    "partitioner.class",
    "receive.buffer.bytes",
    "reconnect.backoff.max.ms",
    "reconnect.backoff.ms",
    "request.timeout.ms",
    "retries",
    "retry.backoff.max.ms",
    "retry.backoff.ms",
    "sasl.client.callback.handler.class",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.mechanism",
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.template.file",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.header.urlencode",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.jwt.validator.class",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url",
    "security.protocol",
    "security.providers",
    "send.buffer.bytes",
    "session.timeout.ms",
    "share.acknowledgement.mode",
    "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms",
    "ssl.cipher.suites",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "transaction.timeout.ms",
    "transaction.two.phase.commit.enable",
    "transactional.id",
    "value.deserializer",
    "value.serializer",
];

/// Every configuration name of librdkafka 2.12.1 (CONFIGURATION.md,
/// global and topic, producer and consumer), but its callbacks and
/// pointers (names with `_`), which no config file can set.
pub(super) const LIBRDKAFKA: &[&str] = &[
    "acks",
    "allow.auto.create.topics",
    "api.version.fallback.ms",
    "api.version.request",
    "api.version.request.timeout.ms",
    "auto.commit.enable",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "batch.num.messages",
    "batch.size",
    "bootstrap.servers",
    "broker.address.family",
    "broker.address.ttl",
    "broker.version.fallback",
    "builtin.features",
    "check.crcs",
    "client.dns.lookup",
    "client.id",
    "client.rack",
    "compression.codec",
    "compression.level",
    "compression.type",
    "connections.max.idle.ms",
    "consume.callback.max.messages",
    "coordinator.query.interval.ms",
    "debug",
    "delivery.report.only.error",
    "delivery.timeout.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.gapless.guarantee",
    "enable.idempotence",
    "enable.metrics.push",
    "enable.partition.eof",
    "enable.random.seed",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "enable.ssl.certificate.verification",
    "fetch.error.backoff.ms",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "fetch.min.bytes",
    "fetch.queue.backoff.ms",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.protocol.type",
    "group.remote.assignor",
    "heartbeat.interval.ms",
    "https.ca.location",
    "https.ca.pem",
    "interceptors",
    "internal.termination.signal",
    "isolation.level",
    "linger.ms",
    "log.connection.close",
    "log.queue",
    "log.thread.name",
    "max.in.flight",
    "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "message.copy.max.bytes",
    "message.max.bytes",
    "message.send.max.retries",
    "message.timeout.ms",
    "metadata.broker.list",
    "metadata.max.age.ms",
    "metadata.recovery.rebootstrap.trigger.ms",
    "metadata.recovery.strategy",
    "offset.store.method",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "opaque",
    "partition.assignment.strategy",
    "partitioner",
    "plugin.library.paths",
    "produce.offset.report",
    "queue.buffering.backpressure.threshold",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "queuing.strategy",
    "receive.message.max.bytes",
    "reconnect.backoff.jitter.ms",
    "reconnect.backoff.max.ms",
    "reconnect.backoff.ms",
    "request.required.acks",
    "request.timeout.ms",
    "retries",
    "retry.backoff.max.ms",
    "retry.backoff.ms",
    "sasl.kerberos.keytab",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal",
    "sasl.kerberos.service.name",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.metadata.authentication.type",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.password",
    "sasl.username",
    "security.protocol",
    "session.timeout.ms",
    "socket.blocking.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.keepalive.enable",
    "socket.max.fails",
    "socket.nagle.disable",
    "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes",
    "socket.timeout.ms",
    "ssl.ca.certificate.stores",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.cipher.suites",
    "ssl.crl.location",
    "ssl.curves.list",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.id",
    "ssl.engine.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.providers",
    "ssl.sigalgs.list",
    "statistics.interval.ms",
    "sticky.partitioning.linger.ms",
    "topic.blacklist",
    "topic.metadata.propagation.max.ms",
    "topic.metadata.refresh.fast.cnt",
    "topic.metadata.refresh.fast.interval.ms",
    "topic.metadata.refresh.interval.ms",
    "topic.metadata.refresh.sparse",
    "transaction.timeout.ms",
    "transactional.id",
];

/// The schema registry serializers' settings, which Confluent Cloud's and
/// other providers' `client.properties` carry beside the client's. The
/// producer ignores them; `typed::SchemaRegistry::from_properties` (the
/// `schema-registry` feature) reads them from the same properties.
pub(super) const SERIALIZERS: &[&str] = &[
    "schema.registry.url",
    "basic.auth.credentials.source",
    "basic.auth.user.info",
    "schema.registry.basic.auth.user.info",
    "schema.registry.basic.auth.credentials.source",
    "auto.register.schemas",
    "use.latest.version",
    "key.subject.name.strategy",
    "value.subject.name.strategy",
    "specific.avro.reader",
];

/// Whether another client knows `name`.
pub(super) fn known_elsewhere(name: &str) -> bool {
    JAVA_CLIENT.contains(&name) || LIBRDKAFKA.contains(&name) || SERIALIZERS.contains(&name)
}

/// Why `name=value` is refused rather than ignored: a setting another
/// client honours and Courier cannot, whose silent loss would change what
/// the producer does (what it trusts, which code runs, where records go).
/// `None`: ignoring it is harmless.
pub(super) fn refusal(name: &str, value: &str) -> Option<String> {
    let v = value.trim();
    let reason = match name {
        "interceptor.classes" | "interceptors" if !v.is_empty() => {
            "Java classes and C plug-ins cannot load into Courier; implement \
             courier_kafka::ProducerInterceptor and add it with ProducerBuilder::interceptor"
        }
        "plugin.library.paths" if !v.is_empty() => {
            "C plug-ins cannot load into Courier; the producer's reports, interceptors \
             (ProducerBuilder::interceptor) and tracing are the hooks it has"
        }
        "partitioner.class"
            if !v.is_empty()
                && v != "org.apache.kafka.clients.producer.internals.DefaultPartitioner" =>
        {
            "only the Java client's default placement is built in (and librdkafka's, through \
             partitioner=...); implement courier_kafka::partitioner::Partitioner for another"
        }
        "ssl.key.password" | "ssl.keystore.password" if !v.is_empty() => {
            "encrypted keys and keystores are not supported: give the key unencrypted, in PEM \
             (ssl.key.location or ssl.key.pem)"
        }
        "sasl.client.callback.handler.class" | "sasl.login.class" | "ssl.engine.factory.class"
            if !v.is_empty() =>
        {
            "Java classes cannot load into Courier: AWS MSK IAM and Kerberos are not supported; \
             an OAUTHBEARER token comes from a courier_kafka::security::TokenProvider"
        }
        _ => return None,
    };
    Some(reason.to_string())
}

/// What to use instead of an ignored property, where Courier has it in
/// another form.
pub(super) fn hint(name: &str) -> Option<&'static str> {
    Some(match name {
        "debug" => "debug: Courier logs through tracing (RUST_LOG=courier_kafka=debug)",
        "statistics.interval.ms" => "statistics.interval.ms: read Producer::stats() when wanted",
        "delivery.report.only.error" => {
            "delivery.report.only.error: subscribe with ReportMode::ErrorsOnly"
        }
        "key.serializer" | "value.serializer" => {
            "key.serializer, value.serializer: records carry bytes (Record::key, Record::value); \
             courier_kafka::typed serializes typed keys and values"
        }
        "schema.registry.url" => {
            "schema.registry.url and the other schema registry settings: \
             courier_kafka::typed::SchemaRegistry::from_properties reads them from the same \
             properties (the schema-registry feature)"
        }
        _ => return None,
    })
}
