//! `BrokerConnection`: the outbox for one broker.
//!
//! It owns the only socket to its broker. It drains the partitions this
//! broker leads into pipelined Produce requests (up to
//! `max.in.flight.requests.per.connection`), matches responses to requests
//! by correlation id, and turns each partition's answer into a batch
//! outcome: reports, a retry, or a failure. It also carries Metadata and
//! InitProducerId requests for the other actors.
//!
//! Socket I/O runs in two small tasks (reader and writer) spawned on the
//! actor's arbiter; they talk to the actor with messages tagged by a
//! connection generation, so frames from a dead connection are ignored.
//!
//! One actor, one file per seam (each an `impl BrokerConnection` block):
//! - `connect.rs`: connect, reconnect with backoff, a lost socket, request
//!   timeouts;
//! - `idle.rs`: closing a connection idle for `connections.max.idle.ms`;
//! - `drain.rs`: taking batches from the queues this broker leads,
//!   sequence stamping, writing Produce requests;
//! - `response.rs`: matching responses, settling batches (reports),
//!   retries and sequence errors;
//! - `requests.rs` and `call.rs`: Metadata and InitProducerId calls;
//! - `state.rs`: `BrokerState`, the in-flight requests that outlive the
//!   actor.
//!
//! This file holds the actor itself: its fields, lifecycle and handlers.

mod call;
mod connect;
mod drain;
mod idle;
mod requests;
mod response;
pub(crate) mod state;

use std::collections::HashMap;
use std::sync::Arc;

use crate::clock::Instant;

use actix::prelude::*;
use tokio::sync::{mpsc, oneshot};

use crate::actors::broker::call::Call;
use crate::actors::broker::state::BrokerState;
use crate::actors::msgs::*;
use crate::delivery::settlement::Outcome;
use crate::engine::Engine;
use crate::protocol::versions::ApiVersions;
use crate::report::ErrorKind;
use crate::sync::lock;

/// Where a connection actor sends what concerns other actors.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// The partitioner actor: metadata looks stale (a leader error, a lost
    /// connection).
    pub refresh_metadata: Recipient<RefreshMetadata>,
    /// The partitioner actor: Produce answers named partitions' new
    /// leaders (KIP-951).
    pub leader_hints: Recipient<LeaderHints>,
    /// The supervisor: the idempotent producer needs an id or an epoch
    /// bump before anything can be sent.
    pub ensure_producer_id: Recipient<EnsureProducerId>,
    /// The supervisor: a connection failed TLS or authentication.
    pub security_failed: Recipient<SecurityFailed>,
    /// The supervisor (for the transaction actor): partitions wait to
    /// join the open transaction.
    pub add_partitions: Recipient<AddPartitionsWanted>,
}

#[derive(Debug)]
enum ConnState {
    Idle,
    Connecting,
    Connected {
        tx: mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        reader: actix::SpawnHandle,
        versions: ApiVersions,
    },
    Backoff,
}

/// The connection actor for one broker (or, with a negative id, for one
/// bootstrap address, used only for metadata until real ids are known).
pub struct BrokerConnection {
    node_id: i32,
    addr: String,
    engine: Arc<Engine>,
    state: ConnState,
    generation: u64,
    next_correlation_id: i32,
    shared: Arc<BrokerState>,
    upstream: Upstream,
    /// Requests other than Produce, answered through a oneshot.
    calls: HashMap<i32, (Instant, Call)>,
    reconnect_attempts: u32,
    /// Addresses that failed to set up a connection since the last one
    /// made (Java's `failedConnectAttempts`): doubles the next attempt's
    /// `socket.connection.setup.timeout.ms`, up to `.max.ms`.
    setup_failures: u32,
    /// Why the last connection attempt failed, until one succeeds (named
    /// in the errors of requests that find no connection).
    last_connect_error: Option<String>,
    /// Requests (Metadata, InitProducerId, `Ask`) that arrived while the
    /// connection was being made: told when the attempt ends, either way,
    /// and then handled again. So the first metadata request of a new
    /// producer goes out as soon as the socket is up, not a retry later.
    connect_waiters: Vec<oneshot::Sender<()>>,
    /// Retired (`Retire`): its in-flight batches are back in their queues
    /// and the shared `BrokerState` may already serve its successor, so
    /// it touches nothing more.
    retired: bool,
    /// The SASL session is about to end (KIP-368): no new requests; once
    /// nothing is in flight the connection is replaced by a freshly
    /// authenticated one.
    reauth_due: bool,
    /// Panic on the next Produce response (fault-injection builds only).
    #[cfg(feature = "fault-injection")]
    panic_in_response: bool,
    wake_at: Option<(Instant, SpawnHandle)>,
    /// The queues its drains look at (`drain.rs`, `walk_list`).
    list: state::DrainList,
    /// No Produce request before this instant: a broker quota's throttle
    /// time (KIP-219).
    throttled_until: Option<Instant>,
    /// When a request was last written or a response read
    /// (`connections.max.idle.ms`, `idle.rs`).
    last_activity: Instant,
    /// The connection was closed for being idle: `drain` makes a new one
    /// only when there is a batch to send.
    idle_closed: bool,
    /// The watch timer (`idle.rs`, `watch`): every 100 ms while a
    /// request waits for its answer (`short`), else once at the idle
    /// limit, else none.
    watch: Option<Watch>,
    /// Rouses the supervisor when this actor is gone.
    _alarm: crate::actors::msgs::Alarm,
}

/// The connection actor's pending watch (`BrokerConnection::watch`).
struct Watch {
    handle: SpawnHandle,
    /// The 100 ms request-timeout tick, not the idle-limit one.
    short: bool,
}

impl std::fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("node_id", &self.node_id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Why in-flight batches were put back when a connection actor retired
/// (its broker moved or left the metadata): not a failed attempt. Also
/// the error of a call (Metadata, InitProducerId, `Ask`) it held or was
/// to make: not the broker's failure either, so a metadata request that
/// gets it is asked again at once elsewhere (`PartitionerActor::fetch`).
pub(crate) const RETIRED: &str = "connection retired";
/// Why in-flight batches were put back when a dead connection actor's
/// successor started: not a failed attempt either.
const ACTOR_DIED: &str = "connection actor died";

/// What a request that needs the socket finds (`BrokerConnection::connected`).
enum Connected {
    Ready(mpsc::UnboundedSender<Vec<bytes::Bytes>>, ApiVersions),
    /// A connection attempt is under way: handle the request again when
    /// it ends.
    Wait(oneshot::Receiver<()>),
    Failed(String),
}

impl BrokerConnection {
    pub(crate) fn new(
        node_id: i32,
        addr: String,
        engine: Arc<Engine>,
        shared: Arc<BrokerState>,
        upstream: Upstream,
        alarm: crate::actors::msgs::Alarm,
    ) -> Self {
        BrokerConnection {
            node_id,
            addr,
            engine,
            state: ConnState::Idle,
            generation: 0,
            next_correlation_id: 0,
            shared,
            upstream,
            calls: HashMap::new(),
            reconnect_attempts: 0,
            setup_failures: 0,
            last_connect_error: None,
            connect_waiters: Vec::new(),
            retired: false,
            reauth_due: false,
            #[cfg(feature = "fault-injection")]
            panic_in_response: false,
            wake_at: None,
            list: state::DrainList::default(),
            throttled_until: None,
            last_activity: Instant::now(),
            watch: None,
            _alarm: alarm,
            idle_closed: false,
        }
    }

    /// The writer and versions of a live connection; or, while a first
    /// attempt (or one after a lost connection) is being made, a receiver
    /// told when it ends; or an error naming why the last attempt failed
    /// (after starting another), so that a caller with other brokers to
    /// ask does not wait on an unreachable one.
    fn connected(&mut self, ctx: &mut Context<Self>) -> Connected {
        if self.retired {
            return Connected::Failed(format!("{}: connection retired", self.addr));
        }
        if let ConnState::Connected { tx, versions, .. } = &self.state {
            return Connected::Ready(tx.clone(), *versions);
        }
        self.ensure_connecting(ctx);
        match &self.last_connect_error {
            None if matches!(self.state, ConnState::Connecting) => {
                let (tx, rx) = oneshot::channel();
                self.connect_waiters.push(tx);
                Connected::Wait(rx)
            }
            Some(e) => Connected::Failed(format!("{}: {e}", self.addr)),
            None => Connected::Failed(format!("{}: not connected yet", self.addr)),
        }
    }

    /// Tells the requests waiting for the connection attempt that it ended.
    fn connect_attempt_ended(&mut self) {
        for w in self.connect_waiters.drain(..) {
            let _ = w.send(());
        }
    }

    fn in_flight_len(&self) -> usize {
        lock(&self.shared.in_flight).len()
    }

    fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }
}

impl Actor for BrokerConnection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Restarted by actix after `Retire` (a strong address, say a
        // coordinator request's, was still held when it stopped): its
        // `BrokerState` may already serve a successor, so it stays inert,
        // touching nothing, until the last address goes and actix stops
        // it for good. (Stopping again here would make actix restart it
        // again at once, in a loop, while that address is held.)
        if self.retired {
            return;
        }
        // A predecessor that died (panicked) may have left requests in
        // flight on its connection, which is gone with it: retry them.
        if self.in_flight_len() > 0 {
            tracing::warn!(
                broker = self.node_id,
                in_flight = self.in_flight_len(),
                "requeueing a dead connection actor's in-flight batches"
            );
            self.requeue_in_flight(Some(ACTOR_DIED));
        }
        // A predecessor's timer died with it.
        self.publish_timer();
        self.ensure_connecting(ctx);
        self.watch(ctx);
    }

    fn stopping(&mut self, ctx: &mut Context<Self>) -> Running {
        self.let_go(ctx);
        Running::Stop
    }
}

impl Supervised for BrokerConnection {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // Every stop goes through `let_go`, so a restarted actor is a
        // retired one: what is in flight is its successor's now.
        if self.retired {
            return;
        }
        self.requeue_in_flight(Some("connection actor restarted"));
        self.state = ConnState::Idle;
        self.generation += 1;
        self.wake_at = None;
        // actix dropped its timers; `started` sets the watch again.
        self.watch = None;
        // The next drain walks every queue it leads again.
        self.list = state::DrainList::default();
        self.publish_timer();
    }
}

impl Handler<Wake> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.drain(ctx);
    }
}

impl Handler<ResponseFrame> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, msg: ResponseFrame, ctx: &mut Context<Self>) {
        if msg.generation == self.generation {
            self.active();
            self.on_frame(msg.frame, ctx);
        }
    }
}

impl Handler<ConnectionLost> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, msg: ConnectionLost, ctx: &mut Context<Self>) {
        if msg.generation == self.generation {
            self.connection_lost(msg.error, ctx);
        }
    }
}

impl BrokerConnection {
    /// Lets go of the connection and of everything in flight, once: back
    /// to the queues for the next leader (or reported, if expired), so
    /// nothing in flight vanishes.
    fn let_go(&mut self, ctx: &mut Context<Self>) {
        if self.retired {
            return;
        }
        self.retired = true;
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        self.generation += 1;
        self.requeue_in_flight(Some(RETIRED));
        for (_, (_, c)) in self.calls.drain() {
            c.fail(RETIRED.into());
        }
        // Dropped unanswered: their requests fail "connection retired".
        self.connect_waiters.clear();
    }
}

/// Retires the actor: it lets go of its requests before it answers, so
/// that a successor on the same `BrokerState` (a broker whose address
/// changed) can start once the answer is in, never beside it.
impl Handler<Retire> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) {
        self.let_go(ctx);
        ctx.stop();
    }
}

impl Handler<CancelInFlight> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: CancelInFlight, ctx: &mut Context<Self>) {
        while let Some(f) = self.pop_in_flight(false) {
            for b in f.batches {
                self.engine.land_and_settle(
                    b,
                    Outcome::Failed {
                        kind: ErrorKind::Cancelled,
                        message: "producer closed or dropped before the broker answered; the record may or may not have been written".into(),
                    },
                );
            }
        }
        ctx.stop();
    }
}

/// Arms a panic for the next Produce response (tests of the last line of
/// defence only).
#[cfg(feature = "fault-injection")]
impl Handler<InjectResponsePanic> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: InjectResponsePanic, _: &mut Context<Self>) {
        self.panic_in_response = true;
    }
}

/// Makes the actor panic inside a handler (tests of supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for BrokerConnection {
    type Result = ();
    fn handle(&mut self, _: InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in BrokerConnection {}", self.node_id);
    }
}
