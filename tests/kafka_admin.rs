//! Admin for secured clusters, on Apache Kafka with StandardAuthorizer (a
//! one-broker secured cluster, started once for this binary): ACLs made
//! through Courier take effect and deleted ones stop (the user dave,
//! whom no harness ACL names, is refused a write, allowed, then refused
//! again), and Kafka's own AclCommand lists what Courier made; a real
//! consumer group made by an independent reader (the rdkafka consumer) is
//! listed, described, its offsets read, altered and deleted, checked
//! through rdkafka's committed offsets; DeleteRecords moves the low
//! watermark that rdkafka's `fetch_watermarks` reads. The CLI's `acl`,
//! `group` and `records` commands are run against the same cluster.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use courier_kafka::admin::{
    self, AclBinding, AclFilter, AclOperation, AclPermission, AdminOptions, PatternType,
    ResourceType,
};
use courier_kafka::{BrokerError, ErrorKind, Producer, Record};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use support::kafka::{KafkaCluster, ADMIN_USER, LIMITED_USER, SASL_USER};

fn unique(name: &str) -> String {
    format!("{name}-{:08x}", fastrand::u32(..))
}

/// Settings for the SASL_SSL listener (SCRAM-SHA-256) as `user`.
fn sasl_ssl(kafka: &KafkaCluster, (user, password): (&str, &str)) -> Vec<(String, String)> {
    [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.username", user),
        ("sasl.password", password),
        ("ssl.ca.location", kafka.secured().ca_pem.to_str().unwrap()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn sasl_ssl_bootstrap(kafka: &KafkaCluster) -> String {
    format!("localhost:{}", kafka.secured().sasl_ssl)
}

/// One record to `topic` as `user` over SASL_SSL (no idempotence, so that
/// the only ACL that matters is the topic's): what the broker said.
async fn write_as(kafka: &KafkaCluster, user: (&str, &str), topic: &str) -> Result<(), ErrorKind> {
    let mut b = Producer::builder()
        .bootstrap(&sasl_ssl_bootstrap(kafka))
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "20000");
    for (k, v) in sasl_ssl(kafka, user) {
        b = b.set(&k, &v);
    }
    let producer = b.build().unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(60),
        producer.send(Record::to(topic).value("x")),
    )
    .await
    .expect("no hang");
    producer.close().await;
    sent.map(|_| ()).map_err(|e| e.kind)
}

/// Polls `write_as` until `want` holds (an ACL change reaches the
/// broker's authorizer a moment after the call returns); panics with the
/// last answer after a minute.
async fn wait_for_write(
    kafka: &KafkaCluster,
    topic: &str,
    want: fn(&Result<(), ErrorKind>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = write_as(kafka, ADMIN_USER, topic).await;
        if want(&got) {
            return;
        }
        assert!(Instant::now() < deadline, "still {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ACL lines Kafka's own AclCommand lists for `principal`: each
/// resource line followed by its ACLs, joined as `RESOURCE ACL`.
fn kafka_lists(kafka: &KafkaCluster, principal: &str) -> Vec<String> {
    let out = kafka.run(
        "org.apache.kafka.tools.AclCommand",
        &[
            "--bootstrap-server",
            &kafka.bootstrap(),
            "--list",
            "--principal",
            principal,
        ],
    );
    let mut resource = String::new();
    let mut lines = Vec::new();
    for l in out.lines() {
        if let Some(r) = l.split('`').nth(1) {
            resource = r.to_string();
        } else if l.trim_start().starts_with("(principal=") {
            lines.push(format!("{resource} {}", l.trim()));
        }
    }
    lines.sort();
    lines
}

/// Courier's ACLs as AclCommand prints them.
fn as_kafka_prints(acls: &[AclBinding]) -> Vec<String> {
    let mut lines: Vec<String> = acls
        .iter()
        .map(|a| {
            format!(
                "ResourcePattern(resourceType={}, name={}, patternType={}) (principal={}, host={}, operation={}, permissionType={})",
                a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission
            )
        })
        .collect();
    lines.sort();
    lines
}

/// dave may not write a topic; the ACLs Courier creates let him (a
/// literal WRITE on it and a prefixed DESCRIBE); describe lists exactly
/// those, as AclCommand does; deleting them refuses him again. bob, who
/// may not alter the cluster, may not create ACLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_created_through_courier_take_effect_and_deleted_ones_stop() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("adm-acl");
    kafka.create_topic(&topic, 1, 1, &[]).await;
    let dave = format!("User:{}", ADMIN_USER.0);
    // The harness's PLAINTEXT listener: ANONYMOUS is a super user.
    let boot = kafka.bootstrap();

    assert_eq!(
        write_as(kafka, ADMIN_USER, &topic).await,
        Err(ErrorKind::Broker(BrokerError::TopicAuthorizationFailed))
    );
    assert_eq!(
        admin::describe_acls(&boot, &AclFilter::any().with_principal(&dave))
            .await
            .unwrap(),
        vec![]
    );

    let acls = vec![
        AclBinding::new(
            ResourceType::Topic,
            &topic,
            PatternType::Literal,
            &dave,
            AclOperation::Write,
            AclPermission::Allow,
        ),
        AclBinding::new(
            ResourceType::Topic,
            "adm-acl-",
            PatternType::Prefixed,
            &dave,
            AclOperation::Describe,
            AclPermission::Allow,
        ),
    ];
    admin::create_acls(&boot, &acls).await.unwrap();
    wait_for_write(kafka, &topic, Result::is_ok).await;

    let mut want = acls.clone();
    want.sort();
    let listed = admin::describe_acls(&boot, &AclFilter::any().with_principal(&dave))
        .await
        .unwrap();
    assert_eq!(listed, want);
    assert_eq!(kafka_lists(kafka, &dave), as_kafka_prints(&want));
    // A narrower filter: the WRITE only; MATCH on the topic's name finds
    // both (the literal one and the prefix that covers it).
    let writes = admin::describe_acls(
        &boot,
        &AclFilter::any()
            .with_principal(&dave)
            .with_operation(AclOperation::Write),
    )
    .await
    .unwrap();
    assert_eq!(writes, vec![acls[0].clone()]);
    let matching = admin::describe_acls(
        &boot,
        &AclFilter::any()
            .with_resource(ResourceType::Topic, &topic)
            .with_pattern_type(PatternType::Match)
            .with_principal(&dave),
    )
    .await
    .unwrap();
    assert_eq!(matching, want);

    // bob may not alter the cluster: CreateAcls over SASL_SSL is refused.
    let bob = AdminOptions::from_properties(sasl_ssl(kafka, LIMITED_USER)).unwrap();
    let e = admin::create_acls_with(&bob, &sasl_ssl_bootstrap(kafka), &acls)
        .await
        .expect_err("bob may not create ACLs");
    assert_eq!(
        e.broker_error(),
        Some(BrokerError::ClusterAuthorizationFailed),
        "{e}"
    );

    let deleted = admin::delete_acls(&boot, &[AclFilter::any().with_principal(&dave)])
        .await
        .unwrap();
    assert_eq!(deleted, want);
    assert_eq!(
        admin::describe_acls(&boot, &AclFilter::any().with_principal(&dave))
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(kafka_lists(kafka, &dave), Vec::<String>::new());
    wait_for_write(kafka, &topic, |r| {
        *r == Err(ErrorKind::Broker(BrokerError::TopicAuthorizationFailed))
    })
    .await;
}

/// `n` records to each of `partitions` partitions of `topic`, over the
/// PLAINTEXT listener.
async fn fill(kafka: &KafkaCluster, topic: &str, partitions: i32, n: usize) {
    let producer = Producer::builder()
        .bootstrap(&kafka.bootstrap())
        .build()
        .unwrap();
    for p in 0..partitions {
        for i in 0..n {
            producer
                .send(Record::to(topic).partition(p).value(format!("r{i}")))
                .await
                .unwrap();
        }
    }
    producer.close().await;
}

/// The rdkafka consumer in `group`, over the PLAINTEXT listener.
fn rdkafka_consumer(kafka: &KafkaCluster, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("log_level", "3")
        .create()
        .expect("create rdkafka consumer")
}

/// `group`'s committed offsets for `topic`'s partitions as rdkafka reads
/// them (`None`: none committed).
fn rdkafka_committed(
    kafka: &KafkaCluster,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Vec<Option<i64>> {
    let c = rdkafka_consumer(kafka, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = c
        .committed_offsets(tpl, Duration::from_secs(30))
        .expect("committed offsets");
    (0..partitions)
        .map(|p| match got.find_partition(topic, p).unwrap().offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        })
        .collect()
}

/// Polls `describe_group` until the group is in `state`.
async fn wait_for_state(boot: &str, group: &str, state: &str) -> admin::GroupDescription {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let d = admin::describe_group(boot, group).await.unwrap();
        if d.state == state {
            return d;
        }
        assert!(Instant::now() < deadline, "still {d:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A group the rdkafka consumer made and committed in: listed (with state
/// and type, also as alice over SASL_SSL), described with its member and
/// assignment, its offsets read; altered only once it is empty, and read
/// back by rdkafka; one partition's offset deleted; the group deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_is_listed_described_and_its_offsets_changed() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("adm-group");
    let group = unique("adm-g");
    kafka.create_topic(&topic, 2, 1, &[]).await;
    fill(kafka, &topic, 2, 10).await;
    let boot = kafka.bootstrap();

    let consumer = rdkafka_consumer(kafka, &group);
    consumer.subscribe(&[&topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut read = 0;
    while read < 20 {
        assert!(Instant::now() < deadline, "read {read} of 20");
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => read += 1,
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    consumer
        .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
        .unwrap();

    let listed = admin::list_groups(&boot).await.unwrap();
    let g = listed
        .iter()
        .find(|g| g.group_id == group)
        .unwrap_or_else(|| panic!("{group} not in {listed:?}"));
    assert_eq!(g.protocol_type, "consumer");
    assert_eq!(g.state.as_deref(), Some("Stable"));
    assert_eq!(g.group_type.as_deref(), Some("classic"));
    let alice = AdminOptions::from_properties(sasl_ssl(kafka, SASL_USER)).unwrap();
    let as_alice = admin::list_groups_with(&alice, &sasl_ssl_bootstrap(kafka))
        .await
        .unwrap();
    assert!(as_alice.iter().any(|g| g.group_id == group), "{as_alice:?}");

    let d = admin::describe_group(&boot, &group).await.unwrap();
    assert_eq!(
        (d.state.as_str(), d.protocol_type.as_str()),
        ("Stable", "consumer")
    );
    assert_eq!(d.members.len(), 1, "{d:?}");
    assert_eq!(d.members[0].assignment, vec![(topic.clone(), vec![0, 1])]);
    assert_eq!(d.coordinator, 0);

    let offsets = admin::list_group_offsets(&boot, &group).await.unwrap();
    let got: Vec<(String, i32, i64)> = offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition, o.offset))
        .collect();
    assert_eq!(got, vec![(topic.clone(), 0, 10), (topic.clone(), 1, 10)]);
    // Also as alice, over SASL_SSL, through the coordinator it names there.
    let got_alice = admin::list_group_offsets_with(&alice, &sasl_ssl_bootstrap(kafka), &group)
        .await
        .unwrap();
    assert_eq!(got_alice, offsets);

    // Not while it has a member.
    let e = admin::alter_group_offsets(&boot, &group, &[(&topic, 0, 3)])
        .await
        .expect_err("the group is not empty");
    assert_eq!(e.broker_error(), Some(BrokerError::UnknownMemberId), "{e}");

    drop(consumer);
    let d = wait_for_state(&boot, &group, "Empty").await;
    assert!(d.members.is_empty(), "{d:?}");

    admin::alter_group_offsets(&boot, &group, &[(&topic, 0, 3), (&topic, 1, 7)])
        .await
        .unwrap();
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![Some(3), Some(7)]
    );

    admin::delete_group_offsets(&boot, &group, &[(&topic, 1)])
        .await
        .unwrap();
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![Some(3), None]
    );
    let left = admin::list_group_offsets(&boot, &group).await.unwrap();
    assert_eq!(
        left.iter()
            .map(|o| (o.partition, o.offset))
            .collect::<Vec<_>>(),
        vec![(0, 3)]
    );

    admin::delete_group(&boot, &group).await.unwrap();
    assert!(!admin::list_groups(&boot)
        .await
        .unwrap()
        .iter()
        .any(|g| g.group_id == group));
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![None, None]
    );
    let e = admin::delete_group(&boot, &group)
        .await
        .expect_err("gone already");
    assert_eq!(e.broker_error(), Some(BrokerError::GroupIdNotFound), "{e}");
}

/// The low watermark (log start offset) as rdkafka reads it.
fn low_watermarks(kafka: &KafkaCluster, topic: &str, partitions: i32) -> Vec<i64> {
    let c = rdkafka_consumer(kafka, "adm-watermarks");
    (0..partitions)
        .map(|p| {
            c.fetch_watermarks(topic, p, Duration::from_secs(30))
                .unwrap()
                .0
        })
        .collect()
}

/// DeleteRecords truncates each partition before the offset given (-1:
/// everything), and rdkafka sees the new low watermarks; an offset past
/// the end and a partition that does not exist are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_low_watermark() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let topic = unique("adm-records");
    kafka.create_topic(&topic, 2, 1, &[]).await;
    fill(kafka, &topic, 2, 10).await;
    let boot = kafka.bootstrap();
    assert_eq!(low_watermarks(kafka, &topic, 2), vec![0, 0]);

    let low = admin::delete_records(&boot, &topic, &[(0, 4), (1, -1)])
        .await
        .unwrap();
    assert_eq!(low, vec![(0, 4), (1, 10)]);
    assert_eq!(low_watermarks(kafka, &topic, 2), vec![4, 10]);

    let e = admin::delete_records(&boot, &topic, &[(0, 11)])
        .await
        .expect_err("past the end");
    assert_eq!(e.broker_error(), Some(BrokerError::OffsetOutOfRange), "{e}");
    assert!(e.to_string().contains(&format!("{topic}-0")), "{e}");
    let e = admin::delete_records(&boot, &topic, &[(5, 1)])
        .await
        .expect_err("no partition 5");
    assert!(e.is_unknown_topic(), "{e}");
    assert_eq!(low_watermarks(kafka, &topic, 2), vec![4, 10]);
}

/// `courier` with `args`, then the PLAINTEXT listener's `-b`.
fn courier(kafka: &KafkaCluster, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(args)
        .args(["-b", &kafka.bootstrap()])
        .output()
        .expect("run courier");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The CLI's `acl`, `group` and `records` commands, each checked by what it
/// changed: ACLs through the library and AclCommand, offsets through
/// rdkafka's committed offsets, the low watermark through rdkafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_manages_acls_groups_and_records() {
    let kafka = KafkaCluster::shared_secured();
    let _logs = kafka.logs_on_panic();
    let boot = kafka.bootstrap();
    let topic = unique("adm-cli");
    kafka.create_topic(&topic, 2, 1, &[]).await;
    fill(kafka, &topic, 2, 10).await;

    // ACLs, for a principal of this test's own (no one logs in as it).
    let who = format!("User:{}", unique("cli"));
    let ok = |(code, out, err): (i32, String, String)| {
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let out = ok(courier(
        kafka,
        &[
            "acl",
            "create",
            "--allow-principal",
            &who,
            "--operation",
            "Write",
            "--operation",
            "describe",
            "--topic",
            &topic,
        ],
    ));
    assert_eq!(
        out.lines().filter(|l| l.starts_with("created ")).count(),
        2,
        "{out}"
    );
    let mine = AclFilter::any().with_principal(&who);
    let made = admin::describe_acls(&boot, &mine).await.unwrap();
    let ops: Vec<AclOperation> = made.iter().map(|a| a.operation).collect();
    assert_eq!(ops, vec![AclOperation::Write, AclOperation::Describe]);
    assert!(made
        .iter()
        .all(|a| a.resource_name == topic && a.permission == AclPermission::Allow));
    assert_eq!(kafka_lists(kafka, &who), as_kafka_prints(&made));
    let out = ok(courier(
        kafka,
        &["acl", "list", "--principal", &who, "--json"],
    ));
    assert_eq!(out.matches("\"principal\"").count(), 2, "{out}");
    assert!(out.contains("\"operation\": \"WRITE\""), "{out}");
    let out = ok(courier(kafka, &["acl", "list", "--topic", &topic]));
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("principal={who}, host=*, operation=DESCRIBE"))),
        "{out}"
    );
    let out = ok(courier(kafka, &["acl", "delete", "--topic", &topic]));
    assert_eq!(
        out.lines().filter(|l| l.starts_with("deleted ")).count(),
        2,
        "{out}"
    );
    assert_eq!(admin::describe_acls(&boot, &mine).await.unwrap(), vec![]);
    let (code, _, err) = courier(kafka, &["acl", "create", "--topic", &topic]);
    assert_eq!(code, 2, "{err}");

    // A group that rdkafka committed in without joining (an Empty group).
    let group = unique("adm-cli-g");
    {
        let c = rdkafka_consumer(kafka, &group);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(5))
            .unwrap();
        tpl.add_partition_offset(&topic, 1, Offset::Offset(6))
            .unwrap();
        c.commit(&tpl, rdkafka::consumer::CommitMode::Sync).unwrap();
    }
    let out = ok(courier(kafka, &["group", "list"]));
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("{group}\tEmpty\tclassic"))),
        "{out}"
    );
    let out = ok(courier(
        kafka,
        &["group", "describe", "--group", &group, "--json"],
    ));
    assert!(out.contains("\"state\": \"Empty\""), "{out}");
    let out = ok(courier(kafka, &["group", "offsets", "--group", &group]));
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec![format!("{topic}\t0\t5"), format!("{topic}\t1\t6")]
    );
    ok(courier(
        kafka,
        &[
            "group",
            "reset-offsets",
            "--group",
            &group,
            "--topic",
            &topic,
            "--to-offset",
            "2",
        ],
    ));
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![Some(2), Some(2)]
    );
    ok(courier(
        kafka,
        &[
            "group",
            "delete-offsets",
            "--group",
            &group,
            "--topic",
            &format!("{topic}:0"),
        ],
    ));
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![None, Some(2)]
    );
    ok(courier(kafka, &["group", "delete", "--group", &group]));
    assert_eq!(
        rdkafka_committed(kafka, &group, &topic, 2),
        vec![None, None]
    );
    let (code, _, err) = courier(kafka, &["group", "delete", "--group", &group]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("GROUP_ID_NOT_FOUND"), "{err}");

    // Records.
    let out = ok(courier(
        kafka,
        &[
            "records", "delete", &topic, "--before", "0:3", "--before", "1:-1",
        ],
    ));
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec![format!("{topic}\t0\t3"), format!("{topic}\t1\t10")]
    );
    assert_eq!(low_watermarks(kafka, &topic, 2), vec![3, 10]);
    let (code, _, err) = courier(kafka, &["records", "delete", &topic, "--before", "zero"]);
    assert_eq!(code, 2, "{err}");
}
