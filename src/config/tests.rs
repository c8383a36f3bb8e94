//! Unit tests of `config.rs`.

use super::*;

#[test]
fn librdkafka_names_and_spellings_mean_the_same() {
    let mut c = ProducerConfig::default();
    for (k, v) in [
        ("message.timeout.ms", "90000"),
        ("queue.buffering.max.ms", "7"),
        ("queue.buffering.max.kbytes", "2048"),
        ("request.required.acks", "ALL"),
        ("compression.codec", "lz4"),
        ("message.max.bytes", "2000000"),
        ("message.send.max.retries", "3"),
        ("enable.idempotence", "1"),
        ("allow.auto.create.topics", "no"),
    ] {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    assert_eq!(c.delivery_timeout, Duration::from_secs(90));
    assert_eq!(c.linger, Duration::from_millis(7));
    assert_eq!(c.buffer_memory, 2048 * 1024);
    assert_eq!(c.acks, Acks::All);
    assert_eq!(c.compression, Compression::Lz4);
    assert_eq!(c.max_request_size, 2_000_000);
    assert_eq!(c.retries, 3);
    assert_eq!(c.enable_idempotence, Some(true));
    assert!(!c.allow_auto_create_topics);
}

/// As the Java client: `retries=0` turns the default idempotence off,
/// and contradicts an explicit `enable.idempotence=true` or a
/// `transactional.id`.
#[test]
fn retries_zero_rules_out_idempotence() {
    let mut c = ProducerConfig::default();
    c.set("bootstrap.servers", "localhost:9092").unwrap();
    assert!(c.idempotent());
    c.set("retries", "0").unwrap();
    assert!(!c.idempotent(), "off by default with retries=0");
    c.validate().unwrap();
    c.set("enable.idempotence", "true").unwrap();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("retries > 0"));
    let mut t = ProducerConfig::default();
    t.set("bootstrap.servers", "localhost:9092").unwrap();
    t.set("transactional.id", "x").unwrap();
    t.set("retries", "0").unwrap();
    assert!(t
        .validate()
        .unwrap_err()
        .to_string()
        .contains("retries > 0"));
}

/// KIP-390's per-codec levels, by their Java names: each codec's range
/// (gzip and lz4 also take -1, the default); a level out of range is
/// refused naming the property and the range.
#[test]
fn compression_levels_take_each_codecs_range() {
    let mut c = ProducerConfig::default();
    for (name, ok, bad) in [
        ("compression.gzip.level", [1, 9], [0, 10]),
        ("compression.lz4.level", [1, 17], [0, 18]),
        ("compression.zstd.level", [-131072, 22], [-131073, 23]),
    ] {
        for v in ok {
            c.set(name, &v.to_string())
                .unwrap_or_else(|e| panic!("{name}={v}: {e}"));
        }
        for v in bad {
            let e = c.set(name, &v.to_string()).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            let range = format!("between {} and {}", ok[0], ok[1]);
            assert!(e.contains(&range), "{e}");
        }
    }
    assert_eq!(
        (c.gzip_level, c.lz4_level, c.zstd_level),
        (Some(9), Some(17), Some(22))
    );
    c.set("compression.gzip.level", "-1").unwrap();
    assert_eq!(c.gzip_level, None, "-1 is the default");
    c.set("compression.zstd.level", "-1").unwrap();
    assert_eq!(c.zstd_level, Some(-1), "a fast zstd level, not the default");
    assert!(c.set("compression.zstd.level", "high").is_err());
}

/// The codec the producer compresses with: compression.type at its own
/// level, else librdkafka's compression.level, else the default; a
/// compression.level out of the chosen codec's range is refused at
/// build, naming it and the range.
#[test]
fn compression_level_applies_to_the_chosen_codec() {
    let base = || {
        let mut c = ProducerConfig::default();
        c.set("bootstrap.servers", "localhost:9092").unwrap();
        c
    };
    let mut c = base();
    assert_eq!(c.codec(), Codec::from(Compression::None));
    c.set("compression.type", "zstd").unwrap();
    c.set("compression.gzip.level", "2").unwrap();
    assert_eq!(
        c.codec(),
        Compression::Zstd.into(),
        "gzip's level is not zstd's"
    );
    c.set("compression.zstd.level", "7").unwrap();
    assert_eq!(c.codec(), Compression::Zstd.at_level(7));

    let mut c = base();
    c.set("compression.level", "9").unwrap();
    c.set("compression.codec", "gzip").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Gzip.at_level(9));
    c.set("compression.level", "-1").unwrap();
    assert_eq!(c.codec(), Compression::Gzip.into());

    let mut c = base();
    c.set("compression.type", "gzip").unwrap();
    c.set("compression.level", "12").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("compression.level") && e.contains("between 1 and 9"),
        "{e}"
    );
    c.set("compression.type", "lz4").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Lz4.at_level(12));
    c.set("compression.lz4.level", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("contradicts compression.lz4.level"), "{e}");
    c.set("compression.lz4.level", "12").unwrap();
    c.validate().unwrap();

    let mut c = base();
    c.set("compression.type", "snappy").unwrap();
    c.set("compression.level", "0").unwrap();
    c.validate().unwrap();
    assert_eq!(c.codec(), Compression::Snappy.into());
    c.set("compression.level", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("snappy has no levels"), "{e}");
    let e = c.set("compression.level", "x").unwrap_err().to_string();
    assert!(e.contains("compression.level"), "{e}");
}

#[test]
fn record_bound_and_idle_connections() {
    let mut c = ProducerConfig::default();
    assert_eq!(c.queue_buffering_max_messages, 1_000_000);
    assert_eq!(c.connections_max_idle, Some(Duration::from_secs(540)));
    c.set("queue.buffering.max.messages", "100000").unwrap();
    assert_eq!(c.queue_buffering_max_messages, 100_000);
    let e = c
        .set("queue.buffering.max.messages", "0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("queue.buffering.max.messages"), "{e}");
    c.set("connections.max.idle.ms", "300").unwrap();
    assert_eq!(c.connections_max_idle, Some(Duration::from_millis(300)));
    c.set("connections.max.idle.ms", "0").unwrap();
    assert_eq!(c.connections_max_idle, None, "0: never, as librdkafka");
    assert!(c.set("connections.max.idle.ms", "-1").is_err());
}

/// `metadata.max.idle.ms`: Java's default (5 minutes) and lower bound
/// (5 s).
#[test]
fn metadata_idle_bound() {
    let mut c = ProducerConfig::default();
    assert_eq!(c.metadata_max_idle, Duration::from_secs(300));
    c.set("metadata.max.idle.ms", "5000").unwrap();
    assert_eq!(c.metadata_max_idle, Duration::from_secs(5));
    let e = c
        .set("metadata.max.idle.ms", "4999")
        .unwrap_err()
        .to_string();
    assert!(e.contains("metadata.max.idle.ms"), "{e}");
}

#[test]
fn an_unknown_name_suggests_the_closest_known_one() {
    let mut c = ProducerConfig::default();
    let e = c.set("lingr.ms", "5").unwrap_err().to_string();
    assert!(e.contains("did you mean \"linger.ms\""), "{e}");
    let e = c
        .set("queue.buffering.max.msec", "5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean \"queue.buffering.max.ms\""), "{e}");
    let e = c.set("completely.different", "5").unwrap_err().to_string();
    assert!(!e.contains("did you mean"), "{e}");
}
