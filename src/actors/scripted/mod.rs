//! The scripted broker behind `courier_kafka::testing::MockBroker`: an
//! in-process stand-in for the connection actors and the partitioner
//! actor, so that a producer can run with no broker, no socket and no
//! network, and still take every record through its real path.
//!
//! Everything above the sockets is the real producer's: records are
//! partitioned by the engine's partitioner against metadata this module
//! publishes (one broker, id 0, leading every partition of the scripted
//! topics), appended into the real accumulator, sealed into real batches
//! (linger, `batch.size`, compression), and their reports routed by
//! `delivery::router::route` to `send`, subscriptions and actors. What
//! replaces the connection actors is [`ScriptedBroker`], one actor per
//! producer under its `ProducerSupervisor`: it drains the queues as a
//! connection actor does and answers each batch as a broker would, per
//! record, by the script ([`Verdict`]). Answers go through
//! `Engine::answer` and `Engine::retry_or_fail`, the code a real Produce
//! response goes through, so a retriable error is retried within
//! `retries` and `delivery.timeout.ms` and MESSAGE_TOO_LARGE splits a
//! batch, exactly as with a broker.
//!
//! A batch whose records get different verdicts is split into one batch
//! per record (`Accumulator::split`, as for MESSAGE_TOO_LARGE) and each
//! part answered on its own; so is a held batch, so that a test releases
//! held records one at a time. Held batches are in flight: counted in
//! their queue's `in_flight`, answered when the test releases them, timed
//! out after `request.timeout.ms` (then retried, as a request the broker
//! never answered), cancelled by `close_timeout` or the last handle's drop
//! (`CancelInFlight`), put back by a retiring close (`Retire`).
//!
//! With `enable.idempotence=true` (asked for explicitly: the double's
//! default is without) the double is an idempotent broker too: it hands
//! the producer an id (and a new epoch when the producer bumps it), the
//! drain stamps sequences as a connection actor's does
//! (`Accumulator::stamp`), and a batch the script lets through is first
//! checked as Kafka's `ProducerAppendInfo` checks it: the same batch
//! again (same epoch and sequences, among the partition's last batches) is
//! a duplicate, answered with the offset it was written at and not
//! written again; an older epoch is INVALID_PRODUCER_EPOCH; a new epoch
//! must start at sequence 0 and the same epoch must continue where the
//! last batch ended, else OUT_OF_ORDER_SEQUENCE_NUMBER. So must a
//! producer's first batch in a partition: unless the test made the
//! double forget (`forget_producers`), a first batch not at 0 means
//! sequences were skipped (Kafka, which cannot tell a new producer from
//! one whose state expired, takes any sequence from a producer it knows
//! nothing of). `forget_producers` drops every producer's state, as Kafka
//! does after `producer.id.expiration.ms` without traffic or when
//! retention deletes the segments that held it (KIP-854, KAFKA-7190):
//! the next batch of each is then taken whatever its sequence, and a
//! retry of a batch written before is written again. In flight per
//! partition: one batch until the broker has acknowledged one of the
//! epoch, then up to `max.in.flight.requests.per.connection`.
//!
//! With `transactional.id`, the double is the transaction coordinator
//! too (`txn.rs`), and the drain gates on the transaction as a connection
//! actor's does.
//!
//! The network between them is the test's too (`network.rs`): a dropped
//! connection (`MockBroker::disconnect`, `disconnect_after_writing`,
//! `Verdict::Disconnect`) loses the answers of the producer's requests in
//! flight (`Script::drop_connections`: each put back through
//! `Engine::retry_or_fail`, as `BrokerConnection::requeue_in_flight` puts
//! back a lost socket's), and its `ScriptedBroker` notices at its next
//! look, counts the disconnect and reconnects after the reconnect backoff
//! (`Connection`), sending nothing meanwhile; while the broker is down
//! (`go_down`) every attempt to reconnect fails, coordinator requests
//! fail to connect, and new topics are not learnt. Slow answers
//! (`set_latency`) are requests in flight with the instant their verdict
//! is due (`Held::due`), given by the broker actor's drain then, or timed
//! out at `request.timeout.ms` first.
//!
//! Deliberately absent: without idempotence, `max.in.flight` (each batch
//! is a request of its own, answered or held independently); more than
//! one broker; TLS, SASL and the socket itself.
//!
//! Files, each importing only the ones before it: `txn.rs` (the
//! coordinator, its transaction timeouts and scripted errors),
//! `verdict.rs` (the public `Verdict`, `Answer`, `Arrival`, `Stamp`,
//! `Request`), `network.rs` (what the test did to the connections,
//! each producer's `Connection`, the in-flight `Held`, the metadata it
//! publishes), `script.rs` (the `Script`: rules, log, producer state,
//! answers, dropped connections), `in_flight.rs` (held and slow requests:
//! release, time-outs, cancellation; the broker down and back),
//! `broker.rs` (the `ScriptedBroker` actor and the `ScriptedTree`).

mod broker;
mod in_flight;
mod network;
mod script;
mod txn;
mod verdict;

pub(crate) use broker::ScriptedTree;
pub(crate) use script::Script;
pub use txn::TxnState;
pub(crate) use verdict::BROKER_ID;
pub use verdict::{Answer, Arrival, Request, Stamp, Verdict};
