//! The waiting part of a produce call (`Engine::enqueue_slow`): a record
//! whose first try must wait for its topic's metadata, for
//! `buffer.memory`, or for room under `queue.buffering.max.messages`
//! waits here, boxed, up to `max.block.ms`, and tries again.

use std::ops::ControlFlow;

use crate::delivery::owed::ReplyTo;
use crate::engine::enqueue::{Enqueued, Resume, Slow, SlowProduce};
use crate::engine::error::ProduceError;
use crate::engine::Engine;
use crate::kafka_error::BrokerError;
use crate::record::Record;
use crate::report::ErrorKind;

/// What a wait of `Engine::enqueue_slow` ends in: the record and its
/// reply to try again (`Continue`), or the call's result (`Break`: the
/// record was reported, or handed back).
type Waited<'a> = ControlFlow<Result<(), ProduceError>, (Record, Option<ReplyTo<'a>>)>;

impl Engine {
    /// The waiting part of [`enqueue`](Engine::enqueue), for a record whose
    /// first try needs metadata or memory. Boxed, so that the futures of
    /// produce calls, which almost never get here, stay small.
    pub(crate) fn enqueue_slow<'a>(&'a self, slow: Slow<'a>) -> SlowProduce<'a> {
        Box::pin(async move {
            let mut resume = Resume::default();
            let mut slow = slow;
            loop {
                let waited = match slow {
                    Slow::Metadata(record, reply) => {
                        self.await_metadata(record, reply, &mut resume).await
                    }
                    Slow::Memory(record, reply, bytes, partition, accepted) => {
                        resume.accepted = Some(accepted);
                        self.await_memory(record, reply, bytes, partition, &mut resume)
                            .await
                    }
                    Slow::Records(record, reply, partition, accepted) => {
                        resume.accepted = Some(accepted);
                        self.await_record_room(record, reply, partition, &mut resume)
                            .await
                    }
                };
                // `Break`: the record was reported or handed back while it
                // waited; `Continue`: it tries again, with what it waited for.
                let (record, reply) = match waited {
                    ControlFlow::Continue(next) => next,
                    ControlFlow::Break(done) => return done,
                };
                match self.enqueue_now(record, reply, true, &mut resume) {
                    Enqueued::Appended(_) | Enqueued::Reported => return Ok(()),
                    Enqueued::Refused(e) => return Err(e),
                    Enqueued::Wait(next) => slow = next,
                }
            }
        })
    }

    /// Waits for `record`'s topic metadata, up to `max.block.ms`; a
    /// failure that cannot mend (authentication, TLS, an unauthorised or
    /// invalid topic) fails it at once.
    async fn await_metadata<'a>(
        &'a self,
        record: Record,
        reply: Option<ReplyTo<'a>>,
        resume: &mut Resume,
    ) -> Waited<'a> {
        match self.actors.ensure_topic(record.topic).await {
            Some(Ok(())) => {
                resume.metadata_awaited += 1;
                ControlFlow::Continue((record, reply))
            }
            Some(Err((kind, why))) => {
                let at_once = matches!(
                    kind,
                    ErrorKind::Authentication
                        | ErrorKind::Tls
                        | ErrorKind::Broker(
                            BrokerError::TopicAuthorizationFailed
                                | BrokerError::InvalidTopicException
                        )
                );
                let topic = record.topic.as_str();
                let msg = if at_once {
                    format!("no metadata for topic {topic:?}: {why}")
                } else {
                    format!(
                        "no metadata for topic {topic:?} within max.block.ms ({} ms): {why}",
                        self.config.max_block.as_millis()
                    )
                };
                self.reject(record, reply, kind, msg, None);
                ControlFlow::Break(Ok(()))
            }
            None => ControlFlow::Break(Err(ProduceError::Closed(Box::new(record)))),
        }
    }

    /// Waits for `bytes` of `buffer.memory`, up to `max.block.ms`.
    async fn await_memory<'a>(
        &'a self,
        record: Record,
        reply: Option<ReplyTo<'a>>,
        bytes: usize,
        partition: i32,
        resume: &mut Resume,
    ) -> Waited<'a> {
        let acquire = self.acc.pool.clone().acquire_many_owned(bytes as u32);
        let wait = self.timeout(self.config.max_block, acquire);
        match self.starved(wait).await {
            Ok(Ok(permit)) => resume.reserved.memory = Some(permit),
            Ok(Err(_)) => return ControlFlow::Break(Err(ProduceError::Closed(Box::new(record)))),
            Err(_) => {
                let msg = format!(
                    "buffer.memory ({} bytes) stayed full for max.block.ms ({} ms)",
                    self.config.buffer_memory,
                    self.config.max_block.as_millis()
                );
                self.reject(record, reply, ErrorKind::Timeout, msg, Some(partition));
                return ControlFlow::Break(Ok(()));
            }
        }
        ControlFlow::Continue((record, reply))
    }

    /// Waits for room for one record under
    /// `queue.buffering.max.messages`, up to `max.block.ms`.
    async fn await_record_room<'a>(
        &'a self,
        record: Record,
        reply: Option<ReplyTo<'a>>,
        partition: i32,
        resume: &mut Resume,
    ) -> Waited<'a> {
        let room = self.acc.records.one();
        let wait = self.timeout(self.config.max_block, room);
        match self.starved(wait).await {
            Ok(Ok(room)) => resume.reserved.record = Some(room),
            Ok(Err(_)) => return ControlFlow::Break(Err(ProduceError::Closed(Box::new(record)))),
            Err(_) => {
                let msg = format!(
                    "queue.buffering.max.messages ({}) stayed full for max.block.ms ({} ms)",
                    self.config.queue_buffering_max_messages,
                    self.config.max_block.as_millis()
                );
                self.reject(record, reply, ErrorKind::Timeout, msg, Some(partition));
                return ControlFlow::Break(Ok(()));
            }
        }
        ControlFlow::Continue((record, reply))
    }
}
