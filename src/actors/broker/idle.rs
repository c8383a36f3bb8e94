//! `connections.max.idle.ms`: a connection on which nothing was sent or
//! received for that long, with nothing in flight, is closed, and made
//! again when there is something to send.
//!
//! The check runs on the actor's watch timer (`watch`), which also checks
//! request timeouts: every 100 ms while a request waits for its answer,
//! else once, at the idle limit of an open connection, else not at all
//! (an idle producer's connection actors never wake). A connection closes
//! within 100 ms after its limit. Only
//! a connection with no Produce request in flight and no other call
//! waiting for an answer is closed, so the close loses nothing and answers
//! nothing: no report depends on it, and it is not an error (it is counted
//! as `BrokerStats::idle_closes`, not as a disconnect). Closing it bumps
//! the generation, so a late frame from it is ignored like any other from
//! a dead connection. Afterwards `drain` makes a new connection only once a
//! partition this broker leads has a batch (`has_batches`), not on every
//! wake; a Metadata, InitProducerId or `Ask` call makes one at once, as
//! after any lost connection.
//!
//! Activity is stamped (`last_activity`) per request written and per
//! response frame read: per request, never per record.

use std::time::Duration;

use crate::clock::Instant;

use actix::prelude::*;

use crate::actors::broker::{BrokerConnection, ConnState, Watch};
use crate::sync::lock;

/// How often request deadlines are checked while a request waits.
const REQUEST_TICK: Duration = Duration::from_millis(100);

impl BrokerConnection {
    /// Sets the watch timer for what the connection holds now: the
    /// 100 ms request-timeout tick while a request waits for its answer;
    /// else, on an open connection, one timer at its idle limit; else
    /// none. Called where a request is written, when a connection opens,
    /// when the actor starts, and by the timer itself. A busy connection
    /// keeps one timer, not one per request.
    pub(super) fn watch(&mut self, ctx: &mut Context<Self>) {
        if self.retired {
            return;
        }
        let busy = self.in_flight_len() > 0 || !self.calls.is_empty();
        match &self.watch {
            Some(w) if w.short || !busy => return,
            Some(_) => {
                let w = self.watch.take().expect("matched");
                ctx.cancel_future(w.handle);
            }
            None => {}
        }
        let delay = if busy {
            REQUEST_TICK
        } else {
            match (self.engine.config().connections_max_idle, &self.state) {
                (Some(limit), ConnState::Connected { .. }) => limit
                    .saturating_sub(self.last_activity.elapsed())
                    .max(REQUEST_TICK),
                _ => return,
            }
        };
        let handle = ctx.run_later(delay, |act, ctx| {
            act.watch = None;
            act.check_request_timeouts(ctx);
            act.close_if_idle(ctx);
            act.watch(ctx);
        });
        self.watch = Some(Watch {
            handle,
            short: busy,
        });
    }

    /// Closes the connection if it has been idle for
    /// `connections.max.idle.ms` with nothing in flight.
    pub(super) fn close_if_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(limit) = self.engine.config().connections_max_idle else {
            return;
        };
        if self.retired
            || self.reauth_due
            || !matches!(self.state, ConnState::Connected { .. })
            || self.in_flight_len() > 0
            || !self.calls.is_empty()
            || self.last_activity.elapsed() < limit
        {
            return;
        }
        if let ConnState::Connected { reader, .. } =
            std::mem::replace(&mut self.state, ConnState::Idle)
        {
            ctx.cancel_future(reader);
        }
        // Frames from the closed connection are ignored; dropping its
        // writer (in the state just replaced) ends the writer task, which
        // closes the socket.
        self.generation += 1;
        self.idle_closed = true;
        self.engine.stats().record_idle_close(self.node_id);
        tracing::debug!(
            broker = self.node_id,
            addr = %self.addr,
            idle_ms = limit.as_millis() as u64,
            "idle connection closed (connections.max.idle.ms)"
        );
    }

    /// Something was written to or read from the connection.
    #[inline]
    pub(super) fn active(&mut self) {
        self.last_activity = Instant::now();
    }

    /// Whether a partition this broker leads has a batch to send (queued,
    /// or open and lingering): what makes an idle-closed connection
    /// connect again.
    pub(super) fn has_batches(&self) -> bool {
        let snapshot = self.engine.metadata().load();
        self.engine.acc().all_queues().iter().any(|q| {
            snapshot
                .topics
                .get(&q.topic)
                .and_then(|t| t.leader(q.partition))
                == Some(self.node_id)
                && {
                    let s = lock(&q.state);
                    !s.ready.is_empty() || s.open.is_some()
                }
        })
    }
}
