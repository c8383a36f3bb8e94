//! Transactions on the handle: `begin_transaction`, `commit_transaction`,
//! `abort_transaction`, `send_offsets_to_transaction` (a producer with
//! `transactional.id`; the state machine is in `transaction.rs`, the
//! coordinator exchanges in `actors/transaction.rs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::actors::msgs::{EndTransaction, SendOffsets};
use crate::producer::handle::Producer;
use crate::record::Topic;
use crate::report::ErrorKind;
use crate::transaction::{AbortPlan, GroupMetadata, TransactionError, Transactions};

impl Producer {
    fn transactions(&self) -> Result<&Transactions, TransactionError> {
        self.engine.txn().ok_or(TransactionError::NotTransactional)
    }

    /// Waits until the producer has its id from the transaction
    /// coordinator (Java's `initTransactions`), up to `max.block.ms`. The
    /// id is asked for as soon as the producer starts; getting it fences
    /// every older producer with the same `transactional.id` and completes
    /// (aborts) what it left open, so after this the group offsets
    /// committed by earlier instances are final: what an exactly-once
    /// pipeline reads before it starts consuming. Optional otherwise:
    /// records wait for the id anyway.
    pub async fn init_transactions(&self) -> Result<(), TransactionError> {
        self.transactions()?;
        let idem = self.engine.idem().expect("transactional is idempotent");
        let deadline = crate::clock::Instant::now() + self.engine.config().max_block;
        loop {
            if idem.ready().is_some() {
                return Ok(());
            }
            if let Some((kind, message)) = idem.refused() {
                return Err(TransactionError::Fatal { kind, message });
            }
            if self.engine.has_stopped() {
                return Err(TransactionError::State("the producer is closed".into()));
            }
            if crate::clock::Instant::now() > deadline {
                return Err(TransactionError::TimedOut(
                    "no producer id from the transaction coordinator within max.block.ms".into(),
                ));
            }
            let _ = self
                .engine
                .timeout(Duration::from_millis(5), futures::future::pending::<()>())
                .await;
        }
    }

    /// Opens a transaction (Java's `beginTransaction`): records produced
    /// from now on, through any report path, belong to it until
    /// [`commit_transaction`](Self::commit_transaction) or
    /// [`abort_transaction`](Self::abort_transaction). One transaction at
    /// a time per producer; subscribers share it. Outside a transaction a
    /// transactional producer takes no record
    /// ([`ProduceError::NoTransaction`](crate::ProduceError::NoTransaction)).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// use courier_kafka::{Producer, Record};
    /// let producer = Producer::builder()
    ///     .bootstrap("localhost:9092")
    ///     .set("transactional.id", "orders-writer-1")
    ///     .build()?;
    /// producer.begin_transaction()?;
    /// producer.send(Record::to("orders").value("a")).await?;
    /// producer.send(Record::to("audit").value("a")).await?;
    /// producer.commit_transaction().await?; // both or neither
    /// # Ok(()) }
    /// ```
    pub fn begin_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.transactions()?;
        if self.engine.is_closed() {
            return Err(TransactionError::State("the producer is closed".into()));
        }
        txn.begin(
            self.engine.stats().failed.load(Ordering::Acquire),
            self.engine.acc().stamped_lost.load(Ordering::Acquire),
        )
    }

    /// Commits the open transaction: closes it to new records, flushes
    /// (every record of it reported), then asks the coordinator to commit
    /// (EndTxn) and returns once the coordinator has written the commit
    /// markers. If any record of the transaction failed, nothing is
    /// committed: the error is [`TransactionError::Abortable`] and the
    /// transaction must be aborted. A [`TransactionError::TimedOut`]
    /// (the coordinator unreachable for `max.block.ms`) can be retried by
    /// calling this again.
    pub async fn commit_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.transactions()?;
        let generation = txn.start_commit()?;
        // No record that saw the gate open is still being appended.
        self.engine.acc().barrier();
        self.engine.flush().await;
        txn.check_commit(
            generation,
            self.engine.stats().failed.load(Ordering::Acquire),
        )?;
        self.ask_transaction_actor(|a| {
            a.end.send(EndTransaction {
                commit: true,
                generation,
                plan: AbortPlan {
                    end_txn: true,
                    bump: false,
                },
            })
        })
        .await
    }

    /// Aborts the open transaction: closes it to new records, fails every
    /// record not yet sent, or waiting to be sent again, with
    /// [`ErrorKind::Aborted`] (one sent before may have been written in
    /// the aborted transaction:
    /// [`DeliveryError::may_have_been_written`](crate::DeliveryError::may_have_been_written)), waits for the
    /// answers to what is in flight (those records are written, and a
    /// read_committed consumer never sees them), then asks the coordinator
    /// to abort (EndTxn). The producer can then begin another transaction.
    pub async fn abort_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.transactions()?;
        let generation = txn.start_abort()?;
        self.engine.acc().barrier();
        self.engine.fail_queued(
            ErrorKind::Aborted,
            "the transaction was aborted before this record's write was acknowledged",
        );
        self.engine.flush().await;
        // As the Java client: EndTxn(abort) under the transaction's epoch
        // first (unless the coordinator lost the producer id's mapping),
        // then, when the broker lost the sequence state or a stamped batch
        // of the transaction failed (a hole in its partition's sequences),
        // an epoch bump, so the next transaction starts with fresh
        // sequences. Bumping first would find the transaction still open
        // on the coordinator, which fences the epoch instead.
        let plan = txn.abort_plan(self.engine.acc().stamped_lost.load(Ordering::Acquire));
        self.ask_transaction_actor(|a| {
            a.end.send(EndTransaction {
                commit: false,
                generation,
                plan,
            })
        })
        .await?;
        if plan.bump {
            self.init_transactions().await?;
        }
        Ok(())
    }

    /// Adds a consumer group's offsets to the open transaction
    /// (AddOffsetsToTxn, then TxnOffsetCommit at the group's coordinator):
    /// they are committed with the transaction's records, or not at all.
    /// `offsets` are the *next* offsets to read, per partition, as a
    /// consumer commits them; `group` carries the member's generation so
    /// that a zombie consumer's offsets are refused (KIP-447).
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &[(&str, i32, i64)],
        group: &GroupMetadata,
    ) -> Result<(), TransactionError> {
        let txn = self.transactions()?;
        if txn.phase() != crate::transaction::Phase::Open {
            return Err(TransactionError::State(
                "send_offsets_to_transaction needs an open transaction".into(),
            ));
        }
        let msg = SendOffsets {
            offsets: offsets
                .iter()
                .map(|(t, p, o)| (Topic::from(*t), *p, *o))
                .collect(),
            group: group.clone(),
        };
        self.ask_transaction_actor(|a| a.send_offsets.send(msg.clone()))
            .await
    }

    /// Sends to the transaction actor, waiting for the supervisor to
    /// restart it if it died (up to `max.block.ms`).
    async fn ask_transaction_actor<F, Fut>(&self, mut send: F) -> Result<(), TransactionError>
    where
        F: FnMut(crate::actors::addresses::TransactionAddrs) -> Fut,
        Fut:
            std::future::Future<Output = Result<Result<(), TransactionError>, actix::MailboxError>>,
    {
        let deadline = crate::clock::Instant::now() + self.engine.config().max_block;
        loop {
            if let Some(a) = self.addresses.transactions() {
                if let Ok(answer) = send(a).await {
                    return answer;
                }
            }
            if self.engine.has_stopped() {
                return Err(TransactionError::State("the producer is closed".into()));
            }
            if crate::clock::Instant::now() > deadline {
                return Err(TransactionError::TimedOut(
                    "the transaction actor did not answer within max.block.ms".into(),
                ));
            }
            let _ = self
                .engine
                .timeout(Duration::from_millis(50), futures::future::pending::<()>())
                .await;
        }
    }
}
