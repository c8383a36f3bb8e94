//! Client metrics pushed to the broker (KIP-714, `enable.metrics.push`) on
//! Apache Kafka 4.1: one broker whose metric reporter is a
//! `ClientTelemetryReceiver` compiled here from
//! `tests/telemetry/TelemetryReceiver.java` (it decodes each push with
//! the OTLP classes kafka-clients ships and writes its data points to a
//! file), and a client metrics subscription made with Kafka's
//! `kafka-client-metrics` tool. A producer at its defaults pushes its
//! counters under the Java producer's names, with the values its reports
//! add up to; one with `enable.metrics.push=false` pushes nothing.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use courier_kafka::{Producer, Record};
use support::kafka::{libs_dir, set_broker_plugin, KafkaCluster};

/// Compiles the receiver; returns its classes directory.
fn compile_receiver(dir: &std::path::Path) -> PathBuf {
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let source = support::repo_root().join("tests/telemetry/TelemetryReceiver.java");
    let out = std::process::Command::new("javac")
        .arg("-cp")
        .arg(format!("{}/*", libs_dir().display()))
        .arg("-d")
        .arg(&classes)
        .arg(&source)
        .output()
        .expect("javac (the JDK) runs");
    assert!(
        out.status.success(),
        "javac failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    classes
}

/// The receiver's lines so far.
fn pushed(file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The value of `metric` for the producer `client_id`, from the data
/// points carrying `attribute` (or any, for ""): a gauge's or a
/// cumulative sum's newest, or a delta sum's deltas added up (the
/// subscription says which temporality; Kafka's default is delta).
fn last_value(lines: &[String], client_id: &str, metric: &str, attribute: &str) -> Option<f64> {
    let points: Vec<(String, f64)> = lines
        .iter()
        .filter(|l| l.contains(&format!(" client_id={client_id}")))
        .filter(|l| attribute.is_empty() || l.contains(attribute))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(2) == Some(&metric)).then(|| (f[3].to_string(), f[4].parse().unwrap()))
        })
        .collect();
    match points.last()? {
        (kind, _) if kind == "delta" => Some(points.iter().map(|(_, v)| v).sum()),
        (_, v) => Some(*v),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_cluster_receives_the_producers_metrics() {
    let dir = std::env::temp_dir().join(format!("courier-telemetry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("pushed.txt");
    let classes = compile_receiver(&dir);
    set_broker_plugin(
        classes,
        format!(
            "metric.reporters=courier.test.TelemetryReceiver\ncourier.telemetry.out={}\n",
            out.display()
        ),
    );
    let kafka = KafkaCluster::start(1);
    let _logs = kafka.logs_on_panic();
    // Every client's producer metrics, every 500 ms.
    kafka.run(
        "org.apache.kafka.tools.ClientMetricsCommand",
        &[
            "--bootstrap-server",
            &kafka.bootstrap(),
            "--alter",
            "--name",
            "courier-test",
            "--metrics",
            "org.apache.kafka.producer.",
            "--interval",
            "500",
        ],
    );
    let topic = "telemetry";
    kafka.create_topic(topic, 3, 1, &[]).await;

    let build = |client_id: &str, push: bool| {
        Producer::builder()
            .bootstrap(&kafka.bootstrap())
            .set("client.id", client_id)
            .set("enable.metrics.push", if push { "true" } else { "false" })
            .build()
            .unwrap()
    };
    let pushes = build("courier-pushes", true);
    let quiet = build("courier-quiet", false);
    for i in 0..300 {
        pushes
            .send(Record::to(topic).value(format!("p-{i}")))
            .await
            .unwrap();
    }
    for i in 0..50 {
        quiet
            .send(Record::to(topic).value(format!("q-{i}")))
            .await
            .unwrap();
    }

    // The pushes after the last report say 300 delivered.
    let deadline = Instant::now() + Duration::from_secs(60);
    let lines = loop {
        let lines = pushed(&out);
        let sent = last_value(
            &lines,
            "courier-pushes",
            "org.apache.kafka.producer.record.send.total",
            "",
        );
        if sent == Some(300.0) {
            break lines;
        }
        assert!(
            Instant::now() < deadline,
            "no push saying 300 records sent within 60 s (last: {sent:?}); received:\n{}",
            lines.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    pushes.close().await;
    quiet.close().await;

    assert!(
        !lines.iter().any(|l| l.starts_with("undecodable")),
        "every push decodes as OTLP MetricsData:\n{}",
        lines.join("\n")
    );
    let ours: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(" client_id=courier-pushes"))
        .collect();
    for l in &ours {
        let name = l.split(' ').nth(2).unwrap();
        assert!(
            name.starts_with("org.apache.kafka.producer."),
            "only what the subscription asks for: {l}"
        );
    }
    let value = |metric: &str, attribute: &str| {
        last_value(&lines, "courier-pushes", metric, attribute)
            .unwrap_or_else(|| panic!("{metric} {attribute} pushed:\n{}", lines.join("\n")))
    };
    assert_eq!(
        value("org.apache.kafka.producer.record.error.total", ""),
        0.0
    );
    assert_eq!(
        value("org.apache.kafka.producer.buffer.total.bytes", ""),
        33_554_432.0,
        "buffer.memory's default"
    );
    assert!(value("org.apache.kafka.producer.request.total", "") >= 1.0);
    assert!(value("org.apache.kafka.producer.node.request.total", "node_id=0") >= 1.0);
    assert!(
        value("org.apache.kafka.producer.request.latency.max", "") > 0.0,
        "a round trip takes time"
    );
    assert!(
        !lines.iter().any(|l| l.contains(" client_id=courier-quiet")),
        "enable.metrics.push=false pushes nothing"
    );
}
