//! `metadata.recovery.strategy=rebootstrap` (KIP-899, KIP-1102): the
//! broker the producer knows is replaced by another one on a new port
//! while the bootstrap address (a relay in front, as a DNS name or a load
//! balancer would be) keeps answering, now for the new broker. With the
//! default, the producer goes back to `bootstrap.servers`, learns the new
//! broker and delivers every record; with `none` it keeps asking the dead
//! broker and its records time out, each with one report.
//!
//! Tansu brokers (one replaced by another; Tansu runs no multi-broker
//! cluster here). Three Apache Kafka brokers moved to new ports at once:
//! `kafka_faults::a_cluster_moved_to_new_ports_is_found_again_through_bootstrap_servers`.

mod support;

use std::collections::BTreeSet;

use std::time::Duration;

use courier_kafka::{DeliveryReport, ErrorKind, Producer, Record};
use support::{SwitchRelay, Tansu};

/// Produces `n` records tagged `tag` and returns their reports, each
/// record's awaited on its own.
async fn send_all(p: &Producer, topic: &str, tag: &str, n: usize) -> Vec<DeliveryReport> {
    let sends = (0..n).map(|i| {
        let r = Record::to(topic).value(format!("{tag}-{i}"));
        async move {
            match p.send(r).await {
                Ok(d) => DeliveryReport::Delivered(d),
                Err(e) => DeliveryReport::Failed(e),
            }
        }
    });
    futures::future::join_all(sends).await
}

/// One broker replaced by another behind the same bootstrap address: a
/// producer at its defaults (rebootstrap) delivers every record produced
/// after the switch to the new broker; one with
/// `metadata.recovery.strategy=none` reports each of its records failed
/// (`Timeout`), once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_cluster_is_found_again_through_bootstrap_servers() {
    let topic = "rebootstrap";
    let old = Tansu::start();
    courier_kafka::admin::create_topic(&old.bootstrap(), topic, 3, 1)
        .await
        .unwrap();
    let relay = SwitchRelay::start(old.bootstrap()).await;
    let producer = |strategy: &str| {
        Producer::builder()
            .bootstrap(&relay.bootstrap())
            .set("metadata.recovery.strategy", strategy)
            .set("linger.ms", "5")
            .set("delivery.timeout.ms", "10000")
            .set("request.timeout.ms", "3000")
            .build()
            .unwrap()
    };
    let rebootstraps = producer("rebootstrap");
    let stays = producer("none");
    for (p, tag) in [(&rebootstraps, "a"), (&stays, "b")] {
        for r in send_all(p, topic, &format!("{tag}-before"), 50).await {
            assert!(r.is_delivered(), "{r:?}");
        }
    }

    // The broker goes; another takes its place on a new port (started
    // first, so that it cannot get the old one's), behind the same
    // bootstrap address.
    let new = Tansu::start();
    drop(old);
    courier_kafka::admin::create_topic(&new.bootstrap(), topic, 3, 1)
        .await
        .unwrap();
    relay.switch_to(new.bootstrap());

    let (found, lost) = tokio::join!(
        send_all(&rebootstraps, topic, "a-after", 200),
        send_all(&stays, topic, "b-after", 50),
    );
    assert_eq!(found.len(), 200, "one report per record");
    let failed: Vec<_> = found.iter().filter(|r| !r.is_delivered()).collect();
    assert!(
        failed.is_empty(),
        "rebootstrap: every record delivered to the new broker; failed: {:?}",
        failed.first()
    );
    assert_eq!(lost.len(), 50, "one report per record");
    for r in &lost {
        match r {
            DeliveryReport::Failed(e) => assert_eq!(e.kind, ErrorKind::Timeout, "{e}"),
            DeliveryReport::Delivered(d) => {
                panic!("without rebootstrap nothing reaches the new broker: {d:?}")
            }
        }
    }
    rebootstraps.close().await;
    stays.close().await;

    // The new broker holds each of them once, and none of the others.
    let read = support::read_until_quiet(&new.bootstrap(), &[], topic, 3, Duration::from_secs(2));
    let values: Vec<String> = read
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let distinct: BTreeSet<&String> = values.iter().collect();
    assert_eq!(distinct.len(), values.len(), "no record twice");
    let want: BTreeSet<String> = (0..200).map(|i| format!("a-after-{i}")).collect();
    let got: BTreeSet<String> = values.iter().cloned().collect();
    assert_eq!(
        got, want,
        "the rebootstrapped producer's records, and only those"
    );
}
