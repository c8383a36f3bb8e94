//! An application that depends on `courier` from outside its workspace:
//! `courier-external-app HOST:PORT` produces one record and exits, 0 when it
//! was delivered, 1 with one `external-app:` line on stderr when it was not.
//!
//! `tests/external_app.rs` runs it against a fake broker. It exists to show
//! which `kafka-protocol` an application really gets: Courier's fixed fork,
//! or (as with a `[patch]`) the crates.io release.

use std::process::ExitCode;

use courier_kafka::{Producer, Record};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(bootstrap) = std::env::args().nth(1) else {
        eprintln!("external-app: usage: courier-external-app HOST:PORT");
        return ExitCode::from(2);
    };
    // Short limits: against a broker that never answers sensibly, the record
    // fails within a few seconds instead of the Java defaults' minutes.
    let producer = match Producer::builder()
        .bootstrap(&bootstrap)
        .set("max.block.ms", "3000")
        .set("delivery.timeout.ms", "3000")
        .set("request.timeout.ms", "2000")
        .set("socket.connection.setup.timeout.ms", "2000")
        .build()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("external-app: bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let result = producer
        .send(Record::to("external-app").key("k").value("v"))
        .await;
    producer.close().await;
    match result {
        Ok(delivered) => {
            println!(
                "external-app: delivered to partition {} at offset {:?}",
                delivered.partition, delivered.offset
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("external-app: not delivered: {e}");
            ExitCode::FAILURE
        }
    }
}
