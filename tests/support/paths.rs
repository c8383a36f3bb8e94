//! Every report path at once: `send().await`, a subscription, an actor
//! (the `Produce` message and `produce_to`), and fire and forget, into one
//! topic, checked against what an independent reader finds in the log.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use courier_kafka::{DeliveryReport, Produce, Producer, Record, ReportMode};
use futures::StreamExt;

use super::ReadRecord;

/// Forwards every report it receives to a channel.
struct Collector(std::sync::mpsc::Sender<DeliveryReport>);

impl actix::Actor for Collector {
    type Context = actix::Context<Self>;
}

impl actix::Handler<DeliveryReport> for Collector {
    type Result = ();
    fn handle(&mut self, r: DeliveryReport, _: &mut actix::Context<Self>) {
        let _ = self.0.send(r);
    }
}

/// An actor that forwards every report to a channel, on an actix system
/// of its own (a thread): its recipient, that system (stop it, then join
/// the thread) and the channel's receiving end.
pub fn collector() -> (
    actix::Recipient<DeliveryReport>,
    actix::System,
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Receiver<DeliveryReport>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let system = std::thread::spawn(move || {
        let sys = actix::System::new();
        sys.block_on(async move {
            use actix::Actor;
            let addr = Collector(tx).start();
            addr_tx
                .send((addr.recipient::<DeliveryReport>(), actix::System::current()))
                .unwrap();
        });
        sys.run().ok();
    });
    let (recipient, sys) = addr_rx.recv().unwrap();
    (recipient, sys, system, rx)
}

fn text(b: Option<&bytes::Bytes>) -> String {
    String::from_utf8(b.expect("a value").to_vec()).expect("UTF-8")
}

/// Produces `n` records through each of the four report paths (keys
/// `path-(i % 7)`, values `path-i`), closes `producer`, then reads the log
/// with `read_log` and checks: every record is in it exactly once and
/// nothing else is; each path got exactly one report per record of its
/// own and none of another's; each report names the partition and offset
/// where its record is.
pub async fn every_report_path(
    producer: Producer,
    topic: &str,
    n: usize,
    read_log: impl FnOnce() -> Vec<ReadRecord>,
) {
    // Each record's tag names it (a success report carries the tag, not
    // the record): the path's place in PATHS, then its number.
    const PATHS: [&str; 4] = ["send", "sub", "actor", "fire"];
    let rec = |path: &str, i: usize| {
        let code = PATHS.iter().position(|p| *p == path).expect("a path") as u64;
        Record::to(topic)
            .key(format!("{path}-{}", i % 7))
            .value(format!("{path}-{i}"))
            .opaque(code << 32 | i as u64)
    };
    let name = |tag: u64| format!("{}-{}", PATHS[(tag >> 32) as usize], tag & 0xffff_ffff);

    let (recipient, sys, system, rx) = collector();

    let sends = futures::future::join_all((0..n).map(|i| producer.send(rec("send", i)))).await;
    let subscribed = {
        let (sub, mut stream) = producer.subscribe(ReportMode::All);
        let produce = async move {
            for i in 0..n {
                sub.produce(rec("sub", i)).await.expect("accepted");
            }
        };
        let collect = async {
            let mut got = Vec::new();
            while let Some(r) = stream.next().await {
                got.push(r);
            }
            got
        };
        tokio::join!(produce, collect).1
    };
    for i in 0..n {
        if i % 2 == 0 {
            producer.actor().do_send(Produce {
                record: rec("actor", i),
                reply_to: recipient.clone(),
            });
        } else {
            producer
                .produce_to(rec("actor", i), recipient.clone())
                .await
                .unwrap();
        }
    }
    for i in 0..n {
        producer.produce(rec("fire", i)).await.unwrap();
    }
    producer.flush().await;
    let acted: Vec<DeliveryReport> = (0..n)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("an actor report")
        })
        .collect();
    producer.close().await;
    sys.stop();
    system.join().unwrap();
    assert!(
        rx.try_recv().is_err(),
        "the actor got more reports than records"
    );

    let log = read_log();
    assert_eq!(log.len(), 4 * n, "every record once, nothing else");
    let at: HashMap<(i32, i64), String> = log
        .iter()
        .map(|r| {
            let value = String::from_utf8(r.value.clone().expect("a value")).expect("UTF-8");
            ((r.partition, r.offset), value)
        })
        .collect();
    let values: HashSet<&String> = at.values().collect();
    assert_eq!(values.len(), 4 * n, "no duplicate");
    for path in ["send", "sub", "actor", "fire"] {
        for i in 0..n {
            assert!(
                values.contains(&format!("{path}-{i}")),
                "{path}-{i} missing"
            );
        }
    }
    let sends: Vec<DeliveryReport> = sends
        .into_iter()
        .map(|r| DeliveryReport::Delivered(r.expect("delivered")))
        .collect();
    for (path, reports) in [("send", &sends), ("sub", &subscribed), ("actor", &acted)] {
        assert_eq!(reports.len(), n, "{path}: one report per record");
        let mut seen = HashSet::new();
        for r in reports {
            let DeliveryReport::Delivered(d) = r else {
                panic!("{path}: {r:?}")
            };
            let value = name(d.opaque);
            assert!(value.starts_with(&format!("{path}-")), "{path} got {value}");
            assert!(
                seen.insert(value.clone()),
                "{path}: two reports for {value}"
            );
            assert_eq!(
                at.get(&(d.partition, d.offset.expect("an offset"))),
                Some(&value),
                "{path}: the report names where the record is"
            );
        }
    }
}
