//! An actix actor produces with `Produce { record, reply_to }`, receives
//! its delivery reports as messages, and hands the failed ones to a retry
//! actor from its (non-async) report handler (`RetryHandle::retry_failed`),
//! whose final outcomes come back to it as messages too.
//!
//! Run against a broker with a topic `events` (for example the one
//! `bash scripts/demo.sh` starts): `cargo run --example actor_subscriber -- HOST:PORT`.

use actix::prelude::*;
use courier::retry::{RetryActor, RetryHandle, RetryOutcome, RetryPolicy};
use courier::{DeliveryReport, Produce, Producer, Record};

struct Auditor {
    producer: Producer,
    retry: RetryHandle,
    expected: usize,
    delivered: usize,
    failed: usize,
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
        if self.delivered + self.failed == self.expected {
            println!(
                "auditor: {} delivered, {} failed",
                self.delivered, self.failed
            );
            System::current().stop();
        }
    }
}

/// A record's first report: delivered, or handed to the retry actor.
impl Handler<DeliveryReport> for Auditor {
    type Result = ();

    fn handle(&mut self, report: DeliveryReport, _: &mut Context<Self>) {
        match report {
            DeliveryReport::Delivered(_) => self.delivered += 1,
            DeliveryReport::Failed(e) => {
                eprintln!("first attempt failed, retrying: {e}");
                if let Err(e) = self.retry.retry_failed(e) {
                    // The retry actor is stopping: the failure is final.
                    eprintln!("failed: {e}");
                    self.failed += 1;
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
            self.delivered += 1;
        } else {
            eprintln!("failed after retries: {outcome:?}");
            self.failed += 1;
        }
        self.done();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter("courier=info")
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let system = System::new();
    system.block_on(async {
        let _ = courier::admin::create_topic(&bootstrap, "events", 3, 1).await;
        // Inside an actix system the producer's actors run here too,
        // supervised alongside the application's.
        let producer = Producer::builder().bootstrap(&bootstrap).start()?;
        // The retry actor reports to the auditor, so it is made in the
        // auditor's `create`, where the auditor's address is known.
        Auditor::create(|ctx| Auditor {
            retry: RetryActor::start_with_recipient(
                producer.clone(),
                RetryPolicy::builder().build(),
                ctx.address().recipient(),
            ),
            producer,
            expected: 1000,
            delivered: 0,
            failed: 0,
        });
        Ok::<_, courier::ConfigError>(())
    })?;
    system.run()?;
    Ok(())
}
