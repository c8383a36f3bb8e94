//! An actix actor produces with `Produce { record, reply_to }`, receives
//! its delivery reports as messages, and hands the failed ones to a retry
//! actor from its (non-async) report handler (`RetryHandle::retry_failed`),
//! whose final outcomes come back to it as messages too.
//!
//! Run against a broker with a topic `events` (for example the one
//! `bash scripts/demo.sh` starts): `cargo run --example actor_subscriber -- HOST:PORT`.
//! `tests/testing_double.rs` runs the same actors against
//! `courier_kafka::testing::MockBroker`, with each record's first attempt
//! refused.

use std::future::Future;

use actix::prelude::*;
use courier_kafka::retry::{RetryActor, RetryHandle, RetryOutcome, RetryPolicy};
use courier_kafka::{DeliveryReport, Produce, Producer, Record};

/// How the auditor's records ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Delivered, at once or by the retry actor.
    pub delivered: usize,
    /// Failed for good.
    pub failed: usize,
    /// First reports that failed and went to the retry actor.
    pub retried: usize,
}

struct Auditor {
    producer: Producer,
    retry: RetryHandle,
    expected: usize,
    tally: Tally,
    done: std::sync::mpsc::Sender<Tally>,
}

impl Actor for Auditor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.address().recipient();
        for i in 0..self.expected {
            self.producer.actor().do_send(Produce {
                record: Record::to("events").value(format!("audit-{i}")),
                reply_to: me.clone(),
            });
        }
    }
}

impl Auditor {
    fn done(&self) {
        let t = self.tally;
        if t.delivered + t.failed == self.expected {
            let _ = self.done.send(t);
            System::current().stop();
        }
    }
}

/// A record's first report: delivered, or handed to the retry actor.
impl Handler<DeliveryReport> for Auditor {
    type Result = ();

    fn handle(&mut self, report: DeliveryReport, _: &mut Context<Self>) {
        match report {
            DeliveryReport::Delivered(_) => self.tally.delivered += 1,
            DeliveryReport::Failed(e) => {
                eprintln!("first attempt failed, retrying: {e}");
                self.tally.retried += 1;
                if let Err(e) = self.retry.retry_failed(e) {
                    // The retry actor is stopping: the failure is final.
                    eprintln!("failed: {e}");
                    self.tally.failed += 1;
                }
            }
        }
        self.done();
    }
}

/// The final outcome of a record the retry actor took.
impl Handler<RetryOutcome> for Auditor {
    type Result = ();

    fn handle(&mut self, outcome: RetryOutcome, _: &mut Context<Self>) {
        if outcome.is_delivered() {
            self.tally.delivered += 1;
        } else {
            eprintln!("failed after retries: {outcome:?}");
            self.tally.failed += 1;
        }
        self.done();
    }
}

/// Runs an actix system with an auditor that produces `expected` records
/// to `events` through the producer `make` starts in it, and returns once
/// every record has its final outcome.
pub fn audit<F, Fut>(make: F, expected: usize) -> Result<Tally, Box<dyn std::error::Error>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Producer, Box<dyn std::error::Error>>>,
{
    let system = System::new();
    let (done, tally) = std::sync::mpsc::channel();
    system.block_on(async {
        // Inside an actix system the producer's actors run here too,
        // supervised alongside the application's.
        let producer = make().await?;
        // The retry actor reports to the auditor, so it is made in the
        // auditor's `create`, where the auditor's address is known.
        Auditor::create(|ctx| Auditor {
            retry: RetryActor::start_with_recipient(
                producer.clone(),
                RetryPolicy::builder().build(),
                ctx.address().recipient(),
            ),
            producer,
            expected,
            tally: Tally::default(),
            done,
        });
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    system.run()?;
    Ok(tally.recv()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter("courier=info")
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let t = audit(
        || async {
            let _ = courier_kafka::admin::create_topic(&bootstrap, "events", 3, 1).await;
            Ok(Producer::builder().bootstrap(&bootstrap).start()?)
        },
        1000,
    )?;
    println!(
        "auditor: {} delivered, {} failed ({} retried)",
        t.delivered, t.failed, t.retried
    );
    Ok(())
}
