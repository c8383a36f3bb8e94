//! Typed records (issue 31, item 8): Avro and Protobuf values in the
//! schema registry wire format, produced by Courier to a real broker
//! (Tansu) and read back by an independent reader, Confluent's own Python
//! client (`confluent-kafka` from PyPI: its consumer, `AvroDeserializer`
//! and `ProtobufDeserializer`, which ask the registry for the schema by
//! id); and the registry client's settings, cache and errors.
//!
//! The registry is a STAND-IN (tests/support/registry.rs): a few
//! endpoints of Confluent's documented REST API in the test process. No
//! real registry could be started here; that file says what was tried.
//!
//! The reader is installed by `bash scripts/install-tools.sh py-serdes`
//! (a venv in `.tools/py-serdes`; `COURIER_PY_SERDES` names another
//! Python with the packages). A missing reader fails the test, saying
//! how to install it: it never skips.

mod support;

use std::path::PathBuf;
use std::process::Command;

use courier_kafka::typed::{
    wire, AvroSerializer, JsonSerializer, ProtobufSerializer, Raw, SchemaRegistry, SerializeError,
    Serializer, Side, TypedError, TypedProducer,
};
use courier_kafka::{Producer, ReportMode};
use futures::StreamExt;
use support::registry::StandInRegistry;
use support::Tansu;

const AVRO: &str = r#"{"type": "record", "name": "Order", "namespace": "courier.test",
  "fields": [{"name": "id", "type": "long"}, {"name": "sku", "type": "string"},
             {"name": "qty", "type": "int"}, {"name": "note", "type": ["null", "string"], "default": null}]}"#;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct AvroOrder {
    id: i64,
    sku: String,
    qty: i32,
    note: Option<String>,
}

/// `Order` is the second top-level message: its indexes are `[1]`, not
/// the one-byte `[0]` shortcut. read_back.py builds the same declarations.
const PROTO: &str = r#"
syntax = "proto3";
package courier.test;
message Envelope { string note = 1; }
message Order {
  int64 id = 1;
  string sku = 2;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 3;
}
"#;

#[derive(Clone, PartialEq, prost::Message)]
struct Order {
    #[prost(int64, tag = "1")]
    id: i64,
    #[prost(string, tag = "2")]
    sku: String,
    #[prost(message, repeated, tag = "3")]
    lines: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(int32, tag = "2")]
    qty: i32,
}

/// The Python with confluent-kafka, fastavro and protobuf.
fn python() -> PathBuf {
    let path = std::env::var_os("COURIER_PY_SERDES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/py-serdes/bin/python")
        });
    assert!(
        path.exists(),
        "{} is missing: install the reader with `bash scripts/install-tools.sh py-serdes` \
         (or set COURIER_PY_SERDES to a Python with confluent-kafka, fastavro and protobuf)",
        path.display()
    );
    path
}

/// Every record of `topic` as Confluent's Python deserializers read it.
fn read_back(
    bootstrap: &str,
    registry: &str,
    topic: &str,
    format: &str,
    count: usize,
) -> Vec<serde_json::Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/typed_records/read_back.py");
    let out = Command::new(python())
        .arg(script)
        .args([bootstrap, registry, topic, format, &count.to_string()])
        .output()
        .expect("run read_back.py");
    assert!(
        out.status.success(),
        "read_back.py {format} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_and_protobuf_records_are_read_back_by_confluents_deserializers() {
    let tansu = Tansu::start();
    let bootstrap = tansu.bootstrap();
    support::create_topic(&bootstrap, "typed-avro", 1).await;
    support::create_topic(&bootstrap, "typed-proto", 1).await;
    let registry = StandInRegistry::start().await;
    let client = SchemaRegistry::new(&registry.url()).unwrap();
    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .set("linger.ms", "5")
        .build()
        .unwrap();

    // Avro, through three report paths: send, a subscription, and fire
    // and forget (then flush).
    let avro = AvroSerializer::new(client.clone(), AVRO).unwrap();
    let orders: TypedProducer<str, AvroOrder, _, _> =
        TypedProducer::new(producer.clone(), Raw, avro);
    let order = |i: i64| AvroOrder {
        id: i,
        sku: format!("sku-{i}"),
        qty: i as i32 * 2,
        note: (i % 2 == 0).then(|| format!("note {i}")),
    };
    let (sub, mut reports) = producer.subscribe(ReportMode::All);
    for i in 0..30i64 {
        let key = format!("customer-{i}");
        match i % 3 {
            0 => {
                orders
                    .send("typed-avro", Some(&key), Some(&order(i)))
                    .await
                    .unwrap();
            }
            1 => {
                let record = orders
                    .record("typed-avro", Some(&key), Some(&order(i)))
                    .await
                    .unwrap();
                sub.produce(record).await.unwrap();
            }
            _ => orders
                .produce("typed-avro", Some(&key), Some(&order(i)))
                .await
                .unwrap(),
        }
    }
    for _ in 0..10 {
        assert!(reports.next().await.unwrap().into_result().is_ok());
    }

    // Protobuf.
    let proto =
        ProtobufSerializer::<Order>::new(client.clone(), PROTO, "courier.test.Order").unwrap();
    assert_eq!(proto.message_indexes(), [1]);
    let protos: TypedProducer<str, Order, _, _> =
        TypedProducer::new(producer.clone(), Raw, proto.clone());
    let porder = |i: i64| Order {
        id: i,
        sku: format!("sku-{i}"),
        lines: (0..(i % 3))
            .map(|l| Line {
                sku: format!("line-{l}"),
                qty: l as i32 + 1,
            })
            .collect(),
    };
    for i in 0..20i64 {
        protos
            .send("typed-proto", Some(&format!("k{i}")), Some(&porder(i)))
            .await
            .unwrap();
    }
    producer.flush().await;

    // The bytes as Confluent's serializer frames them: magic, id, the
    // indexes [1] (count 1, index 1, zigzag), then the message.
    let bytes = proto
        .serialize("typed-proto", Side::Value, &porder(4))
        .await
        .unwrap();
    let (id, rest) = wire::read_header(&bytes).unwrap();
    assert_eq!(id, 2, "the second schema the stand-in registered");
    assert_eq!(&rest[..2], [0x02, 0x02]);
    assert_eq!(
        <Order as prost::Message>::decode(&rest[2..]).unwrap(),
        porder(4)
    );

    // One registration per subject, however many records.
    assert_eq!(
        registry.requests(),
        [
            "POST /subjects/typed-avro-value/versions",
            "POST /subjects/typed-proto-value/versions"
        ]
    );

    let url = registry.url();
    let (b, u) = (bootstrap.clone(), url.clone());
    let avro_read =
        tokio::task::spawn_blocking(move || read_back(&b, &u, "typed-avro", "avro", 30))
            .await
            .unwrap();
    let mut got: Vec<(String, serde_json::Value)> = avro_read
        .iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), r["value"].clone()))
        .collect();
    got.sort_by_key(|(_, v)| v["id"].as_i64());
    assert_eq!(got.len(), 30);
    for (i, (key, value)) in got.iter().enumerate() {
        let want = order(i as i64);
        assert_eq!(key, &format!("customer-{i}"));
        assert_eq!(value, &serde_json::to_value(&want).unwrap(), "record {i}");
    }

    let (b, u) = (bootstrap.clone(), url.clone());
    let proto_read =
        tokio::task::spawn_blocking(move || read_back(&b, &u, "typed-proto", "protobuf", 20))
            .await
            .unwrap();
    assert_eq!(proto_read.len(), 20);
    for (i, r) in proto_read.iter().enumerate() {
        let want = porder(i as i64);
        let v = &r["value"];
        assert_eq!(r["key"], format!("k{i}"));
        // MessageToDict writes int64 as a string and leaves out defaults.
        assert_eq!(v["id"].as_str().unwrap_or("0"), want.id.to_string(), "{r}");
        assert_eq!(v["sku"], want.sku);
        let lines = v["lines"].as_array().map_or(0, Vec::len);
        assert_eq!(lines, want.lines.len(), "{r}");
    }
    // The Avro reader asked the registry for the writer's schema by id.
    assert!(
        registry
            .requests()
            .iter()
            .any(|r| r == "GET /schemas/ids/1"),
        "{:?}",
        registry.requests()
    );
    producer.close().await;
}

#[tokio::test]
async fn the_cache_asks_once_for_many_records_even_concurrent_ones() {
    let registry = StandInRegistry::start().await;
    let client = SchemaRegistry::new(&registry.url()).unwrap();
    let avro = AvroSerializer::new(client, AVRO).unwrap();
    let value = AvroOrder {
        id: 1,
        sku: "a".into(),
        qty: 1,
        note: None,
    };
    let all =
        futures::future::join_all((0..50).map(|_| avro.serialize("orders", Side::Value, &value)))
            .await;
    assert!(all.iter().all(|r| r.is_ok()));
    for _ in 0..50 {
        avro.serialize("orders", Side::Value, &value).await.unwrap();
    }
    assert_eq!(
        registry.requests(),
        ["POST /subjects/orders-value/versions"]
    );
    // Known bytes: id 1, then the datum (long 1 = 02, "a" = 02 61, int 1
    // = 02, the null branch = 00).
    assert_eq!(
        &all[0].as_ref().unwrap()[..],
        [0, 0, 0, 0, 1, 0x02, 0x02, 0x61, 0x02, 0x00]
    );
}

#[tokio::test]
async fn settings_by_confluents_names_strategies_and_basic_auth() {
    let registry = StandInRegistry::start().await;
    // A provider's file configures the registry as it is, the producer's
    // settings passed over.
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/providers/confluent-cloud-java.properties");
    let mut props = courier_kafka::config::read_properties_file(file).unwrap();
    for (k, v) in props.iter_mut() {
        if k == "schema.registry.url" {
            *v = registry.url();
        }
    }
    props.push((
        "value.subject.name.strategy".into(),
        "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy".into(),
    ));
    let client = SchemaRegistry::from_properties(props).unwrap();
    let avro = AvroSerializer::new(client.clone(), AVRO).unwrap();
    let value = AvroOrder {
        id: 1,
        sku: "a".into(),
        qty: 1,
        note: None,
    };
    avro.serialize("orders", Side::Value, &value).await.unwrap();
    // The key side keeps the topic name strategy.
    Raw.serialize("orders", Side::Key, "k").await.unwrap();
    let proto = ProtobufSerializer::<Order>::new(client, PROTO, "courier.test.Order").unwrap();
    proto
        .serialize("orders", Side::Value, &Order::default())
        .await
        .unwrap();
    assert_eq!(
        registry.requests(),
        [
            "POST /subjects/orders-courier.test.Order/versions",
            "POST /subjects/orders-courier.test.Order/versions"
        ],
        "TopicRecordNameStrategy, one subject per record type (Avro's and Protobuf's Order share the name)"
    );
    // SR_API_KEY:SR_API_SECRET
    assert!(registry
        .authorizations()
        .iter()
        .all(|a| a.as_deref() == Some("Basic U1JfQVBJX0tFWTpTUl9BUElfU0VDUkVU")));
}

#[tokio::test]
async fn use_latest_version_and_look_up_read_what_is_registered() {
    let registry = StandInRegistry::start().await;
    let other = r#"{"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}"#;
    registry.preregister("filler-value", other, "AVRO");
    let id = registry.preregister("orders-value", AVRO, "AVRO");
    assert_eq!(id, 2);
    let latest = SchemaRegistry::builder()
        .set("schema.registry.url", registry.url())
        .set("auto.register.schemas", "false")
        .set("use.latest.version", "true")
        .build()
        .unwrap();
    let avro = AvroSerializer::new(latest, AVRO).unwrap();
    let value = AvroOrder {
        id: 1,
        sku: "a".into(),
        qty: 1,
        note: None,
    };
    for _ in 0..5 {
        let bytes = avro.serialize("orders", Side::Value, &value).await.unwrap();
        assert_eq!(wire::read_header(&bytes).unwrap().0, 2);
    }
    let lookup = SchemaRegistry::builder()
        .set("schema.registry.url", registry.url())
        .set("auto.register.schemas", "false")
        .build()
        .unwrap();
    let avro = AvroSerializer::new(lookup, AVRO).unwrap();
    let bytes = avro.serialize("orders", Side::Value, &value).await.unwrap();
    assert_eq!(wire::read_header(&bytes).unwrap().0, 2);
    assert_eq!(
        registry.requests(),
        [
            "GET /subjects/orders-value/versions/latest",
            "POST /subjects/orders-value"
        ]
    );
}

#[tokio::test]
async fn a_registry_that_refuses_gives_a_clear_error_and_the_value_stays() {
    let registry = StandInRegistry::start().await;
    let auto = SchemaRegistry::new(&registry.url()).unwrap();
    let avro = AvroSerializer::new(auto.clone(), AVRO).unwrap();
    let value = AvroOrder {
        id: 1,
        sku: "a".into(),
        qty: 1,
        note: None,
    };

    let check = |e: SerializeError, status: u16, retriable: bool, words: &[&str]| {
        let text = e.to_string();
        for w in words {
            assert!(text.contains(w), "{w:?} not in {text}");
        }
        assert_eq!(e.is_retriable(), retriable, "{text}");
        match e {
            SerializeError::Registry { error, .. } => {
                assert_eq!(error.status, Some(status), "{text}")
            }
            other => panic!("{other:?}"),
        }
    };
    // 409: incompatible.
    let e = avro
        .serialize("refused", Side::Value, &value)
        .await
        .unwrap_err();
    check(
        e,
        409,
        false,
        &["refused-value", "409", "incompatible", "\"refused\""],
    );
    // 500: the registry failed; worth another try, which asks again (a
    // failure is not cached).
    let e = avro
        .serialize("broken", Side::Value, &value)
        .await
        .unwrap_err();
    check(e, 500, true, &["broken-value", "500", "backend"]);
    avro.serialize("broken", Side::Value, &value)
        .await
        .unwrap_err();
    let posts = registry
        .requests()
        .iter()
        .filter(|r| r.contains("broken-value"))
        .count();
    assert_eq!(posts, 2);
    // 404: no such subject for use.latest.version.
    let latest = SchemaRegistry::builder()
        .set("schema.registry.url", registry.url())
        .set("auto.register.schemas", "false")
        .set("use.latest.version", "true")
        .build()
        .unwrap();
    let e = AvroSerializer::new(latest, AVRO)
        .unwrap()
        .serialize("missing", Side::Value, &value)
        .await
        .unwrap_err();
    check(e, 404, false, &["missing-value", "404", "not found"]);

    // No registry at all: retriable, no status.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let nowhere = AvroSerializer::new(SchemaRegistry::new(&url).unwrap(), AVRO).unwrap();
    let e = nowhere
        .serialize("orders", Side::Value, &value)
        .await
        .unwrap_err();
    assert!(
        e.is_retriable() && e.to_string().contains("cannot connect"),
        "{e}"
    );

    // A value the schema does not take: an encoding error, before any
    // request.
    #[derive(serde::Serialize)]
    struct Wrong {
        id: String,
    }
    let before = registry.requests().len();
    let e = AvroSerializer::new(auto, AVRO)
        .unwrap()
        .serialize("orders", Side::Value, &Wrong { id: "x".into() })
        .await
        .unwrap_err();
    assert!(
        matches!(e, SerializeError::Encode { .. }) && !e.is_retriable(),
        "{e}"
    );
    assert!(e.to_string().contains("does not fit the schema"), "{e}");
    assert_eq!(
        registry.requests().len(),
        before + 1,
        "registered, then refused to encode"
    );

    // Through the typed producer: the error, nothing produced, and the
    // value is still the caller's.
    let producer = Producer::builder()
        .bootstrap("127.0.0.1:1")
        .build()
        .unwrap();
    let typed: TypedProducer<str, AvroOrder, _, _> = TypedProducer::new(
        producer.clone(),
        Raw,
        AvroSerializer::new(SchemaRegistry::new(&registry.url()).unwrap(), AVRO).unwrap(),
    );
    let e = typed
        .send("refused", Some("k"), Some(&value))
        .await
        .unwrap_err();
    assert!(matches!(e, TypedError::Serialize(_)), "{e}");
    let as_error: courier_kafka::Error = e.into();
    assert!(as_error.into_record().is_none());
    assert_eq!(value.sku, "a");
    assert_eq!(producer.stats().produced, 0);

    // JSON with no registry at all.
    let json: TypedProducer<str, serde_json::Value, _, _> =
        TypedProducer::new(producer, Raw, JsonSerializer);
    let r = json
        .record("t", None, Some(&serde_json::json!({"a": 1})))
        .await
        .unwrap();
    assert_eq!(r.value.as_deref(), Some(&br#"{"a":1}"#[..]));
    assert!(r.key.is_none());
}
