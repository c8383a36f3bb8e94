//! Connecting, reconnecting with backoff, and losing the socket.
//!
//! A failed connect or a lost socket schedules a reconnect with
//! exponential backoff and jitter and asks for fresh metadata; a lost
//! socket (or a request past `request.timeout.ms`) also puts every
//! in-flight batch back in its queue.

use actix::prelude::*;
use tokio::sync::mpsc;

use crate::actors::broker::{BrokerConnection, ConnState};
use crate::actors::msgs::{ConnectionLost, RefreshMetadata, ResponseFrame, SecurityFailed};
use crate::clock::{backoff, Instant};
use crate::config::DnsLookup;
use crate::connection::{Connection, ConnectionOptions};
use crate::sync::lock;

impl BrokerConnection {
    pub(super) fn ensure_connecting(&mut self, ctx: &mut Context<Self>) {
        if !matches!(self.state, ConnState::Idle) || self.retired {
            return;
        }
        self.state = ConnState::Connecting;
        self.generation += 1;
        let generation = self.generation;
        let cfg = self.engine.config();
        let opts = ConnectionOptions {
            client_id: Some(cfg.client_id.clone()),
            connect_timeout: cfg.connection_setup_timeout,
            connect_timeout_max: cfg.connection_setup_timeout_max,
            request_timeout: cfg.request_timeout,
            security: self.engine.security(),
            keepalive: cfg.socket_keepalive,
            family: cfg.broker_address_family,
            // Bootstrap servers (negative ids) only, as the name says.
            canonical: self.node_id < 0
                && cfg.client_dns_lookup == DnsLookup::ResolveCanonicalBootstrapServersOnly,
            resolver: self.engine.resolver(),
            ..ConnectionOptions::default()
        };
        let addr = self.addr.clone();
        let failed_before = self.setup_failures;
        tracing::debug!(broker = self.node_id, %addr, "connecting");
        // The name is looked up inside the attempt, every attempt: no
        // address outlives it.
        let connecting =
            async move { Connection::connect_attempt(&addr, &opts, failed_before).await };
        ctx.spawn(connecting.into_actor(self).map(move |attempt, act, ctx| {
            if act.generation != generation {
                return;
            }
            act.setup_failures = match &attempt.result {
                Ok(_) => 0,
                Err(_) => act.setup_failures.saturating_add(attempt.failed),
            };
            match attempt.result {
                Ok(conn) => act.on_connected(conn, ctx),
                Err(e) => {
                    if let Some(kind) = e.security_kind() {
                        act.upstream.security_failed.do_send(SecurityFailed {
                            kind,
                            message: e.to_string(),
                        });
                    }
                    act.on_connect_failed(e.to_string(), ctx)
                }
            }
        }));
    }

    pub(super) fn on_connected(&mut self, conn: Connection, ctx: &mut Context<Self>) {
        let generation = self.generation;
        self.reauth_due = false;
        if let Some(life) = conn.session_lifetime() {
            // As the Java client: at 85 to 95 % of the session, so that
            // connections made together do not all renew at once.
            let at = life.mul_f64(0.85 + fastrand::f64() * 0.1);
            ctx.run_later(at, move |act, ctx| act.session_ending(generation, ctx));
        }
        let (mut reader, mut writer, versions, next_id) = conn.into_pipelined();
        self.next_correlation_id = next_id;
        self.reconnect_attempts = 0;
        self.last_connect_error = None;
        self.idle_closed = false;
        self.active();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<bytes::Bytes>>();
        // Weak addresses: the I/O tasks must not keep a retired actor alive
        // (actix's Supervisor restarts an actor while strong addresses exist).
        let me = ctx.address().downgrade();
        let me2 = me.clone();
        // Writer: ends when the actor drops `tx` or the socket fails.
        actix::spawn(async move {
            while let Some(parts) = rx.recv().await {
                if let Err(e) = writer.write_parts(&parts).await {
                    if let Some(a) = me2.upgrade() {
                        a.do_send(ConnectionLost {
                            generation,
                            error: e.to_string(),
                        });
                    }
                    break;
                }
            }
        });
        let read = async move {
            loop {
                let next = reader.next_frame().await;
                // Upgrade only after the await: a strong address held while
                // waiting would keep a retired actor alive.
                let Some(a) = me.upgrade() else { break };
                match next {
                    Ok(frame) => a.do_send(ResponseFrame { generation, frame }),
                    Err(e) => {
                        a.do_send(ConnectionLost {
                            generation,
                            error: e.to_string(),
                        });
                        break;
                    }
                }
            }
        };
        let reader = ctx.spawn(read.into_actor(self));
        tracing::debug!(broker = self.node_id, addr = %self.addr, ?versions, "connected");
        // The cluster's finalized `transaction.version`, which decides the
        // transaction protocol (`Transactions::refresh_version`).
        if let Some(t) = self.engine.txn() {
            t.features_seen(versions.transaction_feature);
        }
        self.state = ConnState::Connected {
            tx,
            reader,
            versions,
        };
        // The idle limit's timer, unless a watch is set already.
        self.watch(ctx);
        self.connect_attempt_ended();
        self.drain(ctx);
    }

    /// The SASL session of connection `generation` nears its end: send
    /// nothing new on it, and replace it once its requests are answered
    /// (`renew_when_idle`). If they are not answered in time, the broker
    /// closes it and the usual lost-connection path retries them.
    fn session_ending(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if generation != self.generation || self.retired {
            return;
        }
        tracing::debug!(
            broker = self.node_id,
            "SASL session ending; renewing the connection"
        );
        self.reauth_due = true;
        self.renew_when_idle(ctx);
    }

    /// A connection whose session ends is replaced once nothing is in flight
    /// on it: closed here, and a new one authenticated at once.
    pub(super) fn renew_when_idle(&mut self, ctx: &mut Context<Self>) {
        if !self.reauth_due || self.in_flight_len() > 0 || !self.calls.is_empty() {
            return;
        }
        self.reauth_due = false;
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        self.generation += 1;
        self.engine.stats().record_reauthentication(self.node_id);
        self.ensure_connecting(ctx);
    }

    pub(super) fn on_connect_failed(&mut self, error: String, ctx: &mut Context<Self>) {
        tracing::warn!(broker = self.node_id, addr = %self.addr, %error, "connect failed");
        self.last_connect_error = Some(error.clone());
        for (_, (_, c)) in self.calls.drain() {
            c.fail(error.clone());
        }
        self.connect_attempt_ended();
        // The broker may be gone for good (its partitions led elsewhere by
        // now): ask again on every failed attempt, as the Java client's
        // NetworkClient does, not only when a live socket is lost.
        // Reconnect backoff bounds how often.
        self.upstream.refresh_metadata.do_send(RefreshMetadata);
        self.schedule_reconnect(ctx);
    }

    pub(super) fn schedule_reconnect(&mut self, ctx: &mut Context<Self>) {
        self.state = ConnState::Backoff;
        let cfg = self.engine.config();
        let backoff = backoff(
            cfg.reconnect_backoff,
            cfg.reconnect_backoff_max,
            self.reconnect_attempts,
        );
        self.reconnect_attempts = self.reconnect_attempts.saturating_add(1);
        ctx.run_later(backoff, |act, ctx| {
            if matches!(act.state, ConnState::Backoff) {
                act.state = ConnState::Idle;
                act.ensure_connecting(ctx);
            }
        });
    }

    /// The socket is gone: in-flight batches go back into their queues by
    /// batch id (or fail, past their deadline), waiters get errors, and a
    /// reconnect is scheduled.
    pub(super) fn connection_lost(&mut self, error: String, ctx: &mut Context<Self>) {
        self.reauth_due = false;
        tracing::warn!(broker = self.node_id, addr = %self.addr, %error, in_flight = self.in_flight_len(), "connection lost");
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        self.generation += 1;
        self.engine.stats().record_disconnect(self.node_id);
        self.requeue_in_flight(Some(&error));
        for (_, (_, c)) in self.calls.drain() {
            c.fail(error.clone());
        }
        self.upstream.refresh_metadata.do_send(RefreshMetadata);
        self.schedule_reconnect(ctx);
    }

    /// Fails in-flight requests past their deadline (`request.timeout.ms`
    /// after they were sent, or a Produce request's own, shorter, under
    /// librdkafka's timeout rule) by dropping the connection, as the Java
    /// client does.
    pub(super) fn check_request_timeouts(&mut self, ctx: &mut Context<Self>) {
        let limit = self.engine.config().request_timeout;
        // Every request gets `request.timeout.ms`, not only Produce: a
        // connection that carries only Metadata, InitProducerId or a
        // coordinator's request (`Ask`) and answers none is as dead as one
        // that leaves a Produce unanswered, and an abandoned call would
        // also hold off re-authentication and the idle close.
        let first_produce = lock(&self.shared.in_flight)
            .iter()
            .map(|f| (f.deadline, f.correlation_id))
            .min();
        let first_call = self
            .calls
            .iter()
            .map(|(id, (sent_at, _))| (*sent_at + limit, *id))
            .min();
        let first = match (first_produce, first_call) {
            (Some(p), Some(c)) => Some(p.min(c)),
            (p, c) => p.or(c),
        };
        if let Some((deadline, id)) = first {
            if Instant::now() > deadline {
                let msg = format!("request {id} timed out (its deadline passed)");
                self.connection_lost(msg, ctx);
            }
        }
    }
}
