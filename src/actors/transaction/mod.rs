//! `TransactionActor`: a transactional producer's conversation with its
//! transaction coordinator (and, for offsets, its group's coordinator).
//!
//! It finds the coordinator (FindCoordinator), gets the producer id for the
//! `transactional.id` (InitProducerId, which fences older producers with
//! the same id and aborts what they left open), adds partitions to the
//! open transaction before their first batch is sent (AddPartitionsToTxn,
//! asked for by connection actors as `AddPartitionsWanted`), adds a
//! group's offsets (AddOffsetsToTxn, TxnOffsetCommit) and ends the
//! transaction (EndTxn). Every request goes through the connection actor
//! of the broker concerned (`Ask`); one exchange at a time
//! (`Transactions::ops`).
//!
//! The state lives in `Engine::txn` (`transaction.rs`), outside this
//! actor: the supervisor restarts it when it dies and nothing is lost.
//! Coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) find the
//! coordinator again; COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
//! and other retriable errors are retried with backoff, up to
//! `max.block.ms`; fencing errors are fatal (`Engine::fail_transactional`);
//! the rest make the transaction abortable.

mod link;

use std::sync::Arc;

use actix::prelude::*;

use crate::actors::addresses::Addresses;
use crate::actors::msgs::{
    AddPartitionsWanted, EndTransaction, InitTransactional, SendOffsets, StopActor,
};
use crate::actors::scripted::Script;
use crate::engine::Engine;
use crate::idempotence::FetchError;
use crate::transaction::TransactionError;
use link::Link;

/// The transaction actor; see the module documentation.
pub(crate) struct TransactionActor {
    link: Link,
    /// An AddPartitionsToTxn loop is running.
    adding: bool,
    /// Rouses the supervisor when this actor is gone.
    _alarm: crate::actors::msgs::Alarm,
}

impl TransactionActor {
    /// `scripted`: the testing double's script, which answers in place of
    /// the brokers.
    pub(crate) fn new(
        engine: Arc<Engine>,
        addresses: Arc<Addresses>,
        scripted: Option<Arc<Script>>,
        alarm: crate::actors::msgs::Alarm,
    ) -> Self {
        TransactionActor {
            link: Link {
                engine,
                addresses,
                scripted,
            },
            adding: false,
            _alarm: alarm,
        }
    }

    fn start_adding(&mut self, ctx: &mut Context<Self>) {
        if self.adding {
            return;
        }
        self.adding = true;
        let link = self.link.clone();
        ctx.spawn(
            async move { link.add_partitions().await }
                .into_actor(self)
                .map(|(), act, ctx| {
                    act.adding = false;
                    // Partitions wanted after the loop's last look.
                    let (g, wanted) = act.link.txn().wanted();
                    if !wanted.is_empty() && act.link.txn().sendable() == Some(g) {
                        act.start_adding(ctx);
                    }
                }),
        );
    }
}

impl Actor for TransactionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // A restarted actor picks up what its predecessor left.
        self.start_adding(ctx);
    }
}

/// Makes the transaction actor panic inside a handler, with whatever
/// exchanges it runs (tests of its supervision only).
#[cfg(feature = "fault-injection")]
impl Handler<crate::actors::msgs::InjectTransactionPanic> for TransactionActor {
    type Result = ();
    fn handle(&mut self, _: crate::actors::msgs::InjectTransactionPanic, _: &mut Context<Self>) {
        panic!("injected panic in the transaction actor");
    }
}

/// The producer stopped: so does this actor, with its AddPartitionsToTxn
/// loop (what it would add is never sent now).
impl Handler<StopActor> for TransactionActor {
    type Result = ();
    fn handle(&mut self, _: StopActor, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<AddPartitionsWanted> for TransactionActor {
    type Result = ();
    fn handle(&mut self, _: AddPartitionsWanted, ctx: &mut Context<Self>) {
        self.start_adding(ctx);
    }
}

impl Handler<InitTransactional> for TransactionActor {
    type Result = ResponseFuture<Result<(i64, i16), FetchError>>;
    fn handle(&mut self, msg: InitTransactional, _: &mut Context<Self>) -> Self::Result {
        let link = self.link.clone();
        Box::pin(async move { link.init(msg.bump_from).await })
    }
}

impl Handler<EndTransaction> for TransactionActor {
    type Result = ResponseFuture<Result<(), TransactionError>>;
    fn handle(&mut self, msg: EndTransaction, _: &mut Context<Self>) -> Self::Result {
        let link = self.link.clone();
        Box::pin(async move { link.end(msg.commit, msg.generation, msg.plan).await })
    }
}

impl Handler<SendOffsets> for TransactionActor {
    type Result = ResponseFuture<Result<(), TransactionError>>;
    fn handle(&mut self, msg: SendOffsets, _: &mut Context<Self>) -> Self::Result {
        let link = self.link.clone();
        Box::pin(async move { link.send_offsets(msg.offsets, msg.group).await })
    }
}
