//! An actix actor produces with `Produce { record, reply_to }` and receives
//! its delivery reports as messages.
//!
//! Run against a broker with a topic `events` (for example the one
//! `bash scripts/demo.sh` starts): `cargo run --example actor_subscriber -- HOST:PORT`.

use actix::prelude::*;
use courier::{DeliveryReport, Produce, Producer, Record};

struct Auditor {
    producer: Producer,
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

impl Handler<DeliveryReport> for Auditor {
    type Result = ();

    fn handle(&mut self, report: DeliveryReport, _: &mut Context<Self>) {
        match report {
            DeliveryReport::Delivered(_) => self.delivered += 1,
            DeliveryReport::Failed(e) => {
                self.failed += 1;
                eprintln!("failed: {e}");
            }
        }
        if self.delivered + self.failed == self.expected {
            println!(
                "auditor: {} delivered, {} failed",
                self.delivered, self.failed
            );
            System::current().stop();
        }
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
        Auditor {
            producer,
            expected: 1000,
            delivered: 0,
            failed: 0,
        }
        .start();
        Ok::<_, courier::ConfigError>(())
    })?;
    system.run()?;
    Ok(())
}
