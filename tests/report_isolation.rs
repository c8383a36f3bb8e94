//! Every subscriber gets exactly its own reports: the seed's web server with
//! one shared producer. 32 tokio tasks (each with its own subscription),
//! 8 actix actors (each its own `reply_to`) and 4 OS threads (each its own
//! subscription, driven with `block_on`) share one producer. Each checks it
//! got exactly its own N reports, no more and no fewer, and that its
//! reports for one partition arrive in offset order.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;

use actix::prelude::*;
use bytes::Bytes;
use courier_kafka::{DeliveryReport, Produce, Producer, Record, ReportMode};
use futures::StreamExt;
use support::Tansu;

const TOPIC: &str = "isolation";
const N: usize = 300;

/// The owner's half of a record's tag: its name, hashed (FNV-1a).
fn owner_code(owner: &str) -> u64 {
    owner
        .bytes()
        .fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
        .into()
}

fn record(owner: &str, i: usize) -> Record {
    Record::to(TOPIC)
        .opaque(owner_code(owner) << 32 | i as u64)
        .key(format!("{owner}-{}", i % 7))
        .value(format!("{i}"))
        .header("owner", Bytes::from(owner.to_string()))
}

/// Checks one owner's reports: all delivered, all its own, each index once,
/// offsets ascending per partition.
fn check(owner: &str, reports: &[DeliveryReport]) {
    assert_eq!(reports.len(), N, "{owner}: report count");
    let mut seen = HashSet::new();
    let mut last: HashMap<i32, i64> = HashMap::new();
    for r in reports {
        let DeliveryReport::Delivered(d) = r else {
            panic!("{owner}: failure {r:?}")
        };
        // A success report carries the record's tag: owner and number.
        assert_eq!(
            d.opaque >> 32,
            owner_code(owner),
            "{owner} got another's report"
        );
        let i = (d.opaque & 0xffff_ffff) as usize;
        assert!(seen.insert(i), "{owner}: duplicate report {i}");
        let off = d.offset.unwrap();
        let prev = last.insert(d.partition, off);
        assert!(
            prev.is_none_or(|p| p < off),
            "{owner}: offsets out of order on {}",
            d.partition
        );
    }
}

struct Owner {
    name: String,
    producer: Producer,
    got: Vec<DeliveryReport>,
    done: mpsc::Sender<(String, Vec<DeliveryReport>)>,
    /// Its own address, held until it has every report. Without it the
    /// only senders are the producer's report targets, and actix stops an
    /// actor whose last sender is gone at its next poll even when a
    /// message sent just before is not yet taken (`ContextFut::alive`
    /// does not look at the mailbox): the last reports could be dropped.
    me: Option<Addr<Owner>>,
}

impl Actor for Owner {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(ctx.address());
        let me = ctx.address().recipient();
        for i in 0..N {
            self.producer.actor().do_send(Produce {
                record: record(&self.name, i),
                reply_to: me.clone(),
            });
        }
    }
}

impl Handler<DeliveryReport> for Owner {
    type Result = ();
    fn handle(&mut self, r: DeliveryReport, ctx: &mut Context<Self>) {
        self.got.push(r);
        if self.got.len() == N {
            let _ = self
                .done
                .send((self.name.clone(), std::mem::take(&mut self.got)));
            self.me = None;
            ctx.stop();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_actors_and_threads_each_get_exactly_their_own_reports() {
    let broker = Tansu::start();
    support::create_topic(&broker.bootstrap(), TOPIC, 4).await;
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .build()
        .unwrap();

    // 8 actors on their own actix system.
    let (done_tx, done_rx) = mpsc::channel();
    let (sys_tx, sys_rx) = mpsc::channel();
    let p = producer.clone();
    let actors = std::thread::spawn(move || {
        let sys = System::new();
        sys.block_on(async move {
            sys_tx.send(System::current()).unwrap();
            for a in 0..8 {
                Owner {
                    name: format!("actor-{a}"),
                    producer: p.clone(),
                    got: Vec::new(),
                    done: done_tx.clone(),
                    me: None,
                }
                .start();
            }
            drop(p);
        });
        sys.run().ok();
    });

    // 4 OS threads, each with its own subscription.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let p = producer.clone();
            std::thread::spawn(move || {
                let name = format!("thread-{t}");
                let (sub, mut stream) = p.subscribe(ReportMode::All);
                for i in 0..N {
                    futures::executor::block_on(sub.produce(record(&name, i))).unwrap();
                }
                drop(sub);
                let got: Vec<_> =
                    futures::executor::block_on(async { (&mut stream).collect().await });
                check(&name, &got);
            })
        })
        .collect();

    // 32 tokio tasks.
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let p = producer.clone();
            tokio::spawn(async move {
                let name = format!("task-{t}");
                let (sub, stream) = p.subscribe(ReportMode::All);
                let reader = tokio::spawn(stream.collect::<Vec<_>>());
                for i in 0..N {
                    sub.produce(record(&name, i)).await.unwrap();
                }
                drop(sub);
                let got = reader.await.unwrap();
                check(&name, &got);
            })
        })
        .collect();

    for t in tasks {
        t.await.unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    let mut actor_results = HashMap::new();
    for _ in 0..8 {
        let (name, got) = tokio::task::block_in_place(|| {
            done_rx.recv_timeout(std::time::Duration::from_secs(60))
        })
        .expect("every actor gets its reports");
        check(&name, &got);
        actor_results.insert(name, got.len());
    }
    assert_eq!(actor_results.len(), 8);
    // No report went astray: the producer counted exactly what was produced.
    producer.flush().await;
    let stats = producer.stats();
    assert_eq!(stats.produced, (32 + 8 + 4) as u64 * N as u64);
    assert_eq!(stats.delivered, stats.produced);
    assert_eq!(stats.failed, 0);
    producer.close().await;
    sys_rx.recv().unwrap().stop();
    actors.join().unwrap();
}
