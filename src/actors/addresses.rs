//! The addresses of the actor tree that live longer than any one actor:
//! one connection actor per broker, the state each broker's connection
//! keeps outside its actor, and the partitioner actor's topic waits.
//!
//! This is what the engine reaches the actors through (it implements
//! `engine::ActorTree`), what producer handles use to list connections,
//! and what the supervisor updates as brokers come and go.

use std::sync::{Arc, OnceLock};

use actix::{Addr, Recipient};
use dashmap::DashMap;
use futures::future::BoxFuture;

use crate::actors::broker::state::BrokerState;
use crate::actors::broker::BrokerConnection;
use crate::actors::msgs::{EnsureTopic, Wake};
use crate::engine::ActorTree;
use crate::record::Topic;
use crate::report::ErrorKind;

/// Addresses shared by the engine, the producer handles and the actors.
#[derive(Debug, Default)]
pub(crate) struct Addresses {
    /// One connection actor per broker id; negative ids are bootstrap
    /// addresses (metadata only, until real ids are known).
    pub connections: DashMap<i32, Addr<BrokerConnection>>,
    /// Per-broker state that outlives connection actors (their in-flight
    /// requests), by broker id.
    pub broker_states: DashMap<i32, Arc<BrokerState>>,
    /// The partitioner actor, for `EnsureTopic` waits; set once it starts.
    pub topic_waits: OnceLock<Recipient<EnsureTopic>>,
}

impl ActorTree for Addresses {
    fn wake(&self, broker: i32) {
        if let Some(b) = self.connections.get(&broker) {
            b.do_send(Wake);
        }
    }

    fn wake_all(&self) {
        for b in self.connections.iter() {
            b.value().do_send(Wake);
        }
    }

    fn request_topic(&self, topic: Topic) -> bool {
        match self.topic_waits.get() {
            Some(p) => {
                p.do_send(EnsureTopic { topic });
                true
            }
            None => false,
        }
    }

    fn ensure_topic(
        &self,
        topic: Topic,
    ) -> BoxFuture<'static, Option<Result<(), (ErrorKind, String)>>> {
        let request = self
            .topic_waits
            .get()
            .map(|p| p.send(EnsureTopic { topic }));
        Box::pin(async move {
            match request {
                Some(r) => r.await.ok(),
                None => None,
            }
        })
    }
}
