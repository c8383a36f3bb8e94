//! Connecting by name, as the Java client does (`client.dns.lookup`,
//! `socket.connection.setup.timeout.ms` … `.max.ms`): names are looked up
//! on every connect attempt, every address of an answer is tried, a
//! bootstrap name may be replaced by its canonical names, and the setup
//! time-out doubles per failed attempt up to its maximum.
//!
//! `localhost` resolves to 127.0.0.1 alone on some machines (this
//! project's CI container has no `::1 localhost` line), so the IPv6 cases
//! use a resolver given to the builder that answers as a dual-stack
//! `/etc/hosts` does; the IPv4 case uses the system's own. The IPv6
//! loopback itself must exist: a machine without it fails the test, it
//! does not skip it.

mod support;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use courier_kafka::resolve::{Resolve, SystemResolver};
use courier_kafka::{ErrorKind, Producer, Record, ReportMode};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use support::Tansu;

/// A resolver with a fixed, changeable table, that counts what it was
/// asked.
#[derive(Clone, Default)]
struct Names {
    forward: Arc<Mutex<HashMap<String, Vec<SocketAddr>>>>,
    reverse: Arc<Mutex<HashMap<IpAddr, String>>>,
    asked: Arc<Mutex<Vec<String>>>,
    asked_reverse: Arc<Mutex<Vec<IpAddr>>>,
}

impl Names {
    fn set(&self, name: &str, addrs: &[&str]) {
        let addrs = addrs.iter().map(|a| a.parse().unwrap()).collect();
        self.forward.lock().unwrap().insert(name.into(), addrs);
    }

    fn set_reverse(&self, ip: &str, name: &str) {
        self.reverse
            .lock()
            .unwrap()
            .insert(ip.parse().unwrap(), name.into());
    }

    fn lookups(&self, name: &str) -> usize {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
    }
}

impl Resolve for Names {
    fn lookup(&self, host: &str, _port: u16) -> BoxFuture<'static, io::Result<Vec<SocketAddr>>> {
        self.asked.lock().unwrap().push(host.to_string());
        let found = self.forward.lock().unwrap().get(host).cloned();
        let host = host.to_string();
        async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no {host}")))
        }
        .boxed()
    }

    fn canonical_name(&self, ip: IpAddr) -> BoxFuture<'static, io::Result<String>> {
        self.asked_reverse.lock().unwrap().push(ip);
        let found = self.reverse.lock().unwrap().get(&ip).cloned();
        async move { found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no name")) }
            .boxed()
    }
}

fn port_of(bootstrap: &str) -> u16 {
    bootstrap.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Nothing accepts connections at `addr` (checked, so that a test's
/// "dead" address is dead).
fn assert_dead(addr: &str) {
    assert!(
        std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(1))
            .is_err(),
        "{addr} was meant to be dead, but something listens there"
    );
}

/// Produces `n` records to `topic` through a subscriber and returns how
/// many reports came back delivered and failed, waiting `limit` and then
/// a little more, so that a second report for a record would be seen.
async fn produce_and_count(
    producer: &Producer,
    topic: &str,
    n: usize,
    limit: Duration,
) -> (usize, usize) {
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    for i in 0..n {
        sub.produce(Record::to(topic).value(format!("{i}")))
            .await
            .unwrap();
    }
    let (mut delivered, mut failed) = (0, 0);
    let deadline = tokio::time::Instant::now() + limit;
    while delivered + failed < n {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(r)) if r.is_delivered() => delivered += 1,
            Ok(Some(_)) => failed += 1,
            Ok(None) | Err(_) => break,
        }
    }
    if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        panic!("a report more than the records produced: {r:?}");
    }
    (delivered, failed)
}

/// A builder with short backoffs and bounds, so that failures show fast.
fn builder(bootstrap: &str) -> courier_kafka::ProducerBuilder {
    Producer::builder()
        .bootstrap(bootstrap)
        .set("reconnect.backoff.ms", "20")
        .set("reconnect.backoff.max.ms", "100")
        .set("linger.ms", "0")
        .set("max.block.ms", "20000")
}

/// `localhost` through the system's resolver, the broker listening on
/// 127.0.0.1 only and advertising itself as `localhost` too, so that the
/// bootstrap and the leader's connection both go by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_reaches_an_ipv4_only_broker_through_the_system_resolver() {
    let here = SystemResolver.lookup("localhost", 1).await.unwrap();
    println!("localhost resolves here to {here:?}");
    assert!(
        here.iter().any(|a| a.is_ipv4()),
        "no IPv4 address for localhost: {here:?}"
    );
    let broker = Tansu::start_advertising("localhost:{port}");
    let port = port_of(&broker.bootstrap());
    support::create_topic(&broker.bootstrap(), "v4", 1).await;
    let producer = builder(&format!("localhost:{port}")).build().unwrap();
    let counts = produce_and_count(&producer, "v4", 5, Duration::from_secs(30)).await;
    assert_eq!(counts, (5, 0), "{}", broker.log());
    producer.close().await;
}

/// A relay on `[::1]:port` to `upstream`, bound before the broker starts
/// so that the broker can advertise its port.
struct V6Relay {
    port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl V6Relay {
    async fn bind() -> (V6Relay, tokio::net::TcpListener) {
        let listener = tokio::net::TcpListener::bind("[::1]:0")
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "this machine has no usable IPv6 loopback (::1): {e}; the IPv6 case cannot run"
                )
            });
        let port = listener.local_addr().unwrap().port();
        (
            V6Relay {
                port,
                accepted: Arc::default(),
            },
            listener,
        )
    }

    fn relay_to(&self, listener: tokio::net::TcpListener, upstream: String) {
        let accepted = self.accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
    }
}

/// `localhost` answered as a dual-stack hosts file does (`::1` first),
/// the broker reachable on `::1` only: the producer gets there, and
/// `broker.address.family=v4`, which leaves only the dead IPv4 address,
/// does not (its one record fails, once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_reaches_an_ipv6_only_broker() {
    let (relay, listener) = V6Relay::bind().await;
    let port = relay.port;
    let broker = Tansu::start_advertising(&format!("localhost:{port}"));
    relay.relay_to(listener, broker.bootstrap());
    support::create_topic(&broker.bootstrap(), "v6", 1).await;
    assert_dead(&format!("127.0.0.1:{port}"));
    let names = Names::default();
    names.set(
        "localhost",
        &[&format!("[::1]:{port}"), &format!("127.0.0.1:{port}")],
    );

    let producer = builder(&format!("localhost:{port}"))
        .resolver(names.clone())
        .build()
        .unwrap();
    let counts = produce_and_count(&producer, "v6", 5, Duration::from_secs(30)).await;
    assert_eq!(counts, (5, 0), "{}", broker.log());
    producer.close().await;
    assert!(relay.accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2);

    let v4_only = builder(&format!("localhost:{port}"))
        .resolver(names.clone())
        .set("broker.address.family", "v4")
        .set("max.block.ms", "1500")
        .build()
        .unwrap();
    let e = v4_only
        .send(Record::to("v6").value("x"))
        .await
        .expect_err("only the dead IPv4 address is left");
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    v4_only.close().await;
}

/// A name with a dead address first and the broker's second, both ways
/// round and both families: every record is delivered once, so the
/// second address was tried when the first failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_a_dead_and_a_live_address_connects_to_the_live_one() {
    let broker = Tansu::start_advertising("kafka.test:{port}");
    let port = port_of(&broker.bootstrap());
    support::create_topic(&broker.bootstrap(), "both", 1).await;
    let live = format!("127.0.0.1:{port}");
    // Nothing listens on ::1 or 127.0.0.2 at the broker's port.
    for dead in [format!("[::1]:{port}"), format!("127.0.0.2:{port}")] {
        assert_dead(&dead);
        for order in [
            [dead.as_str(), live.as_str()],
            [live.as_str(), dead.as_str()],
        ] {
            let names = Names::default();
            names.set("kafka.test", &order);
            let producer = builder(&format!("kafka.test:{port}"))
                .resolver(names.clone())
                .build()
                .unwrap();
            let counts = produce_and_count(&producer, "both", 3, Duration::from_secs(30)).await;
            assert_eq!(counts, (3, 0), "addresses {order:?}");
            producer.close().await;
        }
    }
}

/// A broker's name moves from a dead address to the live one while the
/// producer keeps failing to connect: the next attempt looks the name up
/// again and finds the broker. An address kept from the first lookup
/// would never deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_looked_up_again_on_every_connect_attempt() {
    let broker = Tansu::start_advertising("moving.test:{port}");
    let port = port_of(&broker.bootstrap());
    support::create_topic(&broker.bootstrap(), "moving", 1).await;
    let dead = format!("127.0.0.2:{port}");
    assert_dead(&dead);
    let names = Names::default();
    names.set("moving.test", &[&dead]);
    let producer = builder(&format!("moving.test:{port}"))
        .resolver(names.clone())
        .build()
        .unwrap();
    let (sub, mut stream) = producer.subscribe(ReportMode::All);
    // The produce call waits for the topic's metadata (max.block.ms, 20 s).
    let producing = tokio::spawn(async move { sub.produce(Record::to("moving").value("x")).await });
    support::until("three failed lookups of moving.test", || {
        names.lookups("moving.test") >= 3
    })
    .await;
    if let Some(r) = stream.next().now_or_never() {
        panic!("nothing is reported while the name points nowhere: {r:?}");
    }
    names.set("moving.test", &[&format!("127.0.0.1:{port}")]);
    let r = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("delivered once the name moved")
        .unwrap();
    assert!(r.is_delivered(), "{r:?}");
    producing.await.unwrap().unwrap();
    if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        panic!("a second report for one record: {r:?}");
    }
    producer.close().await;
}

/// `resolve_canonical_bootstrap_servers_only`: the bootstrap name's
/// address (dead) is looked up in reverse, and its canonical name
/// (live) is what the producer connects to. Under `use_all_dns_ips` the
/// same names leave the producer with no broker, and no reverse lookup is
/// made; the brokers metadata names are never looked up in reverse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canonical_bootstrap_names_are_connected_to_under_resolve_canonical() {
    let broker = Tansu::start_advertising("broker.test:{port}");
    let port = port_of(&broker.bootstrap());
    support::create_topic(&broker.bootstrap(), "canonical", 1).await;
    let dead = format!("127.0.0.2:{port}");
    assert_dead(&dead);
    let names = Names::default();
    names.set("alias.test", &[&dead]);
    names.set_reverse("127.0.0.2", "broker.test");
    names.set("broker.test", &[&format!("127.0.0.1:{port}")]);

    let plain = builder(&format!("alias.test:{port}"))
        .resolver(names.clone())
        .set("max.block.ms", "1500")
        .build()
        .unwrap();
    let e = plain
        .send(Record::to("canonical").value("x"))
        .await
        .expect_err("alias.test's only address is dead");
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    plain.close().await;
    assert!(names.asked_reverse.lock().unwrap().is_empty());

    let canonical = builder(&format!("alias.test:{port}"))
        .resolver(names.clone())
        .set(
            "client.dns.lookup",
            "resolve_canonical_bootstrap_servers_only",
        )
        .build()
        .unwrap();
    let counts = produce_and_count(&canonical, "canonical", 3, Duration::from_secs(30)).await;
    assert_eq!(counts, (3, 0), "{}", broker.log());
    canonical.close().await;
    let reversed = names.asked_reverse.lock().unwrap().clone();
    assert!(!reversed.is_empty());
    assert!(
        reversed
            .iter()
            .all(|ip| *ip == "127.0.0.2".parse::<IpAddr>().unwrap()),
        "only the bootstrap name's addresses are looked up in reverse: {reversed:?}"
    );
}

/// A black hole (TCP accepted, nothing ever answered): each attempt ends
/// at its setup time-out, which doubles from 50 ms up to 800 ms. The
/// spacing of the accepts shows the growth and the cap with wide margins
/// (the uncapped sixth wait would be 1.6 s ± 20 %, the capped one
/// 0.8 s ± 20 %), and each attempt looked the name up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_timeout_doubles_per_failed_attempt_up_to_its_maximum() {
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = hole.local_addr().unwrap().port();
    let accepts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let a = accepts.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = hole.accept().await {
            a.lock().unwrap().push(Instant::now());
            held.push(s);
        }
    });
    let names = Names::default();
    names.set("hole.test", &[&format!("127.0.0.1:{port}")]);
    let producer = Producer::builder()
        .bootstrap(&format!("hole.test:{port}"))
        .resolver(names.clone())
        .set("socket.connection.setup.timeout.ms", "50")
        .set("socket.connection.setup.timeout.max.ms", "800")
        .set("reconnect.backoff.ms", "10")
        .set("reconnect.backoff.max.ms", "10")
        .set("max.block.ms", "60000")
        .build()
        .unwrap();
    let (sub, _stream) = producer.subscribe(ReportMode::All);
    let waiting = tokio::spawn(async move { sub.produce(Record::to("hole").value("x")).await });
    support::until("seven connection attempts", || {
        accepts.lock().unwrap().len() >= 7
    })
    .await;
    let times = accepts.lock().unwrap().clone();
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    println!("gaps between attempts: {gaps:?}");
    assert!(
        gaps[5] >= gaps[0] * 4,
        "the setup time-out grows (50 ms to 800 ms): {gaps:?}"
    );
    assert!(
        gaps[5] < Duration::from_millis(1200),
        "and stops at socket.connection.setup.timeout.max.ms: {gaps:?}"
    );
    assert!(
        names.lookups("hole.test") >= times.len(),
        "one lookup per attempt: {} lookups, {} attempts",
        names.lookups("hole.test"),
        times.len()
    );
    waiting.abort();
    let _ = producer.close_timeout(Duration::from_secs(1)).await;
}
