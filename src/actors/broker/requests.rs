//! Metadata and InitProducerId through this broker's connection, for the
//! partitioner actor and the supervisor. They share the socket with
//! Produce traffic and are answered by correlation id (`Call`).

use actix::prelude::*;
use bytes::BytesMut;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    InitProducerIdRequest, MetadataRequest, MetadataResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};

use crate::actors::broker::call::Call;
use crate::actors::broker::{BrokerConnection, Connected};
use crate::actors::msgs::{Ask, FetchMetadata, InitProducer};
use crate::idempotence::{init_error, FetchError};
use crate::kafka_error::{classify, BrokerError};
use crate::protocol::message::encode_request;
use crate::report::ErrorKind;

impl BrokerConnection {
    /// Sends a non-Produce request whose answer goes to the `Call` made by
    /// `make` from the version.
    pub(super) fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        tx: &mpsc::UnboundedSender<Vec<bytes::Bytes>>,
        version: i16,
        req: &R,
        make: impl FnOnce(i16) -> Call,
        ctx: &mut Context<Self>,
    ) -> Result<(), String> {
        let correlation_id = self.next_correlation_id();
        let mut buf = BytesMut::new();
        encode_request(
            &mut buf,
            correlation_id,
            Some(self.engine.client_id()),
            version,
            req,
        )
        .map_err(|e| e.to_string())?;
        self.calls.insert(
            correlation_id,
            (crate::clock::Instant::now(), make(version)),
        );
        let _ = tx.send(vec![buf.freeze()]);
        self.active();
        self.watch(ctx);
        Ok(())
    }
}

/// Handles `msg` again once the connection attempt under way has ended
/// (connected, or failed: then it fails with the cause). A weak address:
/// a waiting request must not keep a retired actor alive.
fn again_after<M, T, E>(
    ended: oneshot::Receiver<()>,
    me: actix::WeakAddr<BrokerConnection>,
    msg: M,
    error: fn(String) -> E,
) -> ResponseFuture<Result<T, E>>
where
    M: Message<Result = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
    BrokerConnection: Handler<M>,
{
    Box::pin(async move {
        let retired = || error(super::RETIRED.into());
        if ended.await.is_err() {
            return Err(retired());
        }
        let Some(me) = me.upgrade() else {
            return Err(retired());
        };
        me.send(msg).await.unwrap_or_else(|_| Err(retired()))
    })
}

impl Handler<FetchMetadata> for BrokerConnection {
    type Result = ResponseFuture<Result<MetadataResponse, String>>;
    fn handle(&mut self, msg: FetchMetadata, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, versions) = match self.connected(ctx) {
            Connected::Ready(tx, v) => (tx, v),
            Connected::Wait(ended) => {
                return again_after(ended, ctx.address().downgrade(), msg, |e| e);
            }
            Connected::Failed(e) => return Box::pin(async move { Err(e) }),
        };
        let mut req = MetadataRequest::default().with_topics(Some(
            msg.topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default().with_name(Some(TopicName(
                        StrBytes::from_utf8(t.to_bytes()).expect("UTF-8"),
                    )))
                })
                .collect(),
        ));
        if versions.metadata >= 4 {
            req.allow_auto_topic_creation = self.engine.config().allow_auto_create_topics;
        }
        let (wtx, wrx) = oneshot::channel();
        if let Err(e) = self.call(
            &tx,
            versions.metadata,
            &req,
            |v| Call::Metadata(v, wtx),
            ctx,
        ) {
            return Box::pin(async move { Err(e) });
        }
        let timeout = self.engine.config().request_timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, wrx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err("connection closed".into()),
                Err(_) => Err("metadata request timed out".into()),
            }
        })
    }
}

impl<R> Handler<Ask<R>> for BrokerConnection
where
    R: kafka_protocol::protocol::Request + 'static,
    R::Response: Send + 'static,
{
    type Result = ResponseFuture<Result<(i16, R::Response), String>>;
    fn handle(&mut self, msg: Ask<R>, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, versions) = match self.connected(ctx) {
            Connected::Ready(tx, v) => (tx, v),
            Connected::Wait(ended) => {
                return again_after(ended, ctx.address().downgrade(), msg, |e| e);
            }
            Connected::Failed(e) => return Box::pin(async move { Err(e) }),
        };
        let Some(version) = versions.get(msg.api).map(|v| v.min(msg.max)) else {
            // The telemetry actor reads "does not offer" as "never ask
            // this broker again" (actors/telemetry.rs).
            let e = format!(
                "broker {} at {} does not offer {:?} in a version Courier speaks",
                self.node_id, self.addr, msg.api
            );
            return Box::pin(async move { Err(e) });
        };
        let req = (msg.build)(version);
        let (wtx, wrx) = oneshot::channel();
        let answer: crate::actors::broker::call::Answer = Box::new(move |frame| {
            let r = frame.and_then(|f| {
                crate::protocol::message::decode_response::<R>(f, version)
                    .map(|(_, r)| (version, r))
                    .map_err(|e| e.to_string())
            });
            let failed = r.as_ref().err().cloned();
            let _ = wtx.send(r);
            failed.map_or(Ok(()), Err)
        });
        if let Err(e) = self.call(&tx, version, &req, |_| Call::Any(answer), ctx) {
            return Box::pin(async move { Err(e) });
        }
        let timeout = self.engine.config().request_timeout;
        let api = msg.api;
        Box::pin(async move {
            match tokio::time::timeout(timeout, wrx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err("connection closed".into()),
                Err(_) => Err(format!("{api:?} request timed out")),
            }
        })
    }
}

impl Handler<InitProducer> for BrokerConnection {
    type Result = ResponseFuture<Result<(i64, i16), FetchError>>;
    fn handle(&mut self, msg: InitProducer, ctx: &mut Context<Self>) -> Self::Result {
        let node = self.node_id;
        let (tx, versions) = match self.connected(ctx) {
            Connected::Ready(tx, v) => (tx, v),
            Connected::Wait(ended) => {
                return again_after(ended, ctx.address().downgrade(), msg, FetchError::Transient);
            }
            Connected::Failed(e) => return Box::pin(async move { Err(FetchError::Transient(e)) }),
        };
        let Some(version) = versions.init_producer_id else {
            let message = format!(
                "broker {node} at {} does not support InitProducerId, so the idempotent producer cannot start; set enable.idempotence=false",
                self.addr
            );
            return Box::pin(async move {
                Err(FetchError::Refused(
                    ErrorKind::Broker(BrokerError::UnsupportedVersion),
                    message,
                ))
            });
        };
        // As the Java client for a non-transactional idempotent producer;
        // v3+ can bump the epoch of the id we have (KIP-360).
        let mut req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX);
        if version >= 3 {
            let (id, epoch) = msg.bump_from.unwrap_or((-1, -1));
            req = req
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch);
        }
        let (wtx, wrx) = oneshot::channel();
        if let Err(e) = self.call(&tx, version, &req, |v| Call::InitProducerId(v, wtx), ctx) {
            return Box::pin(async move { Err(FetchError::Transient(e)) });
        }
        let timeout = self.engine.config().request_timeout;
        Box::pin(async move {
            let resp = match tokio::time::timeout(timeout, wrx).await {
                Ok(Ok(r)) => r.map_err(FetchError::Transient)?,
                Ok(Err(_)) => return Err(FetchError::Transient("connection closed".into())),
                Err(_) => return Err(FetchError::Transient("InitProducerId timed out".into())),
            };
            match classify(resp.error_code) {
                None => Ok((resp.producer_id.0, resp.producer_epoch)),
                Some(c) => Err(init_error(node, c.error)),
            }
        })
    }
}
