//! An actix-web service: each HTTP request produces one record and awaits
//! its own delivery report from one shared producer (the seed's web server).
//!
//! Run against a broker with a topic `events` (for example the one
//! `bash scripts/demo.sh` starts):
//!
//! ```text
//! PORT=8080 cargo run --example actix_web -- HOST:PORT
//! curl -X POST --data 'hello' http://127.0.0.1:8080/events/user-1
//! ```

use actix_web::{post, web, App, HttpResponse, HttpServer};
use courier_kafka::{Producer, Record};

#[post("/events/{key}")]
async fn publish(
    producer: web::Data<Producer>,
    key: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let record = Record::to("events").key(key.into_inner()).value(body);
    match producer.send(record).await {
        Ok(d) => {
            HttpResponse::Ok().body(format!("partition {} offset {:?}\n", d.partition, d.offset))
        }
        Err(e) => HttpResponse::ServiceUnavailable().body(format!("{e}\n")),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("courier=info")
        .init();
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let _ = courier_kafka::admin::create_topic(&bootstrap, "events", 3, 1).await;
    // One producer, on its own actor thread, shared by every worker.
    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .build()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let data = web::Data::new(producer);
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    println!("listening on http://127.0.0.1:{port}");
    HttpServer::new(move || App::new().app_data(data.clone()).service(publish))
        .bind(("127.0.0.1", port))?
        .run()
        .await
}
