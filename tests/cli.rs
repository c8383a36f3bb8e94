//! The `courier` command line as a black box against a real broker:
//! topic create/list, produce from stdin with one JSON report line per
//! message and the documented exit codes, and perf's JSON summary.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use support::{read_back, Tansu};

fn courier(args: &[&str], stdin: impl AsRef<[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run courier");
    // A child that exits before reading all its input (an error, say)
    // closes the pipe: the caller's assertions on its status and stderr
    // then say why, rather than this write's BrokenPipe.
    let written = child.stdin.take().unwrap().write_all(stdin.as_ref());
    let out = child.wait_with_output().unwrap();
    if let Err(e) = written {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing to courier {args:?}: {e}"
        );
        eprintln!(
            "courier {args:?} exited before reading its input ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Creates `topic` with `partitions` partitions through `courier topic
/// create`, which must succeed.
fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    let out = courier(
        &[
            "topic",
            "create",
            "-b",
            bootstrap,
            topic,
            "--partitions",
            &partitions.to_string(),
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn topic_produce_and_perf() {
    let broker = Tansu::start();
    let b = broker.bootstrap();

    create_topic(&b, "cli", 3);
    let out = courier(&["topic", "list", "-b", &b], "");
    assert!(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l == "cli\t3"));

    let input: String = (0..200).map(|i| format!("key-{i}|value-{i}\n")).collect();
    let out = courier(
        &[
            "produce",
            "-b",
            &b,
            "-t",
            "cli",
            "-k",
            "|",
            "-X",
            "linger.ms=1",
        ],
        &input,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut seqs: Vec<u64> = Vec::new();
    let mut placed = std::collections::HashMap::new();
    for line in stdout.lines() {
        // {"seq": N, "topic": "cli", "partition": P, "offset": O, "error": null}
        let field = |name: &str| -> String {
            let at = line.find(&format!("\"{name}\": ")).unwrap() + name.len() + 4;
            line[at..]
                .split([',', '}'])
                .next()
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(field("error"), "null", "{line}");
        assert_eq!(field("topic"), "\"cli\"");
        let seq: u64 = field("seq").parse().unwrap();
        seqs.push(seq);
        placed.insert(
            (
                field("partition").parse::<i32>().unwrap(),
                field("offset").parse::<i64>().unwrap(),
            ),
            seq,
        );
    }
    seqs.sort();
    assert_eq!(
        seqs,
        (0..200).collect::<Vec<_>>(),
        "one report line per input line"
    );
    for r in read_back(&b, "cli", 3, 200, std::time::Duration::from_secs(30)) {
        let seq = placed[&(r.partition, r.offset)];
        assert_eq!(r.key, Some(format!("key-{seq}").into_bytes()));
        assert_eq!(r.value, Some(format!("value-{seq}").into_bytes()));
    }

    // Exit 1 when a message fails: an explicit partition that does not exist
    // is not expressible on the command line, so use a record over
    // max.request.size.
    let big = format!("{}\nsmall\n", "x".repeat(5000));
    let out = courier(
        &[
            "produce",
            "-b",
            &b,
            "-t",
            "cli",
            "-X",
            "max.request.size=4096",
        ],
        &big,
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("\"seq\": 0") && l.contains("record too large")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("\"seq\": 1") && l.contains("\"error\": null")),
        "{stdout}"
    );

    // Exit 2 on a usage error, naming the bad property.
    let out = courier(&["produce", "-b", &b, "-t", "cli", "-X", "acks=7"], "x\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("acks"));
    assert_eq!(courier(&["frobnicate"], "").status.code(), Some(2));

    let out = courier(
        &[
            "perf",
            "-b",
            &b,
            "-t",
            "cli",
            "--num-records",
            "20000",
            "--record-size",
            "100",
            "--json",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).unwrap();
    assert!(
        json.contains("\"records\": 20000") && json.contains("\"delivered\": 20000"),
        "{json}"
    );
    assert!(json.contains("\"p99\""), "{json}");
}

/// `courier produce -k '|'` of `input` to `topic`: exits 0 and prints one
/// report line per input line (`lines` of them).
fn produce_keyed_lines(bootstrap: &str, topic: &str, input: &[u8], lines: usize) {
    let out = courier(&["produce", "-b", bootstrap, "-t", topic, "-k", "|"], input);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        lines,
        "one report per line"
    );
}

/// Input is bytes, as keys and values are: a line that is not UTF-8 is a
/// record like any other (it used to end the input silently, exit 0, the
/// rest of stdin dropped).
#[test]
fn produce_takes_lines_that_are_not_utf8() {
    let broker = Tansu::start();
    let b = broker.bootstrap();
    create_topic(&b, "bytes", 1);
    let input: &[u8] = b"k1|first\n\xff\xfe|not utf-8 \xc3\x28\nk3|last\n";
    produce_keyed_lines(&b, "bytes", input, 3);
    type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);
    let got: Vec<KeyValue> = read_back(&b, "bytes", 1, 3, std::time::Duration::from_secs(30))
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect();
    let want: Vec<KeyValue> = vec![
        (Some(b"k1".to_vec()), Some(b"first".to_vec())),
        (
            Some(b"\xff\xfe".to_vec()),
            Some(b"not utf-8 \xc3\x28".to_vec()),
        ),
        (Some(b"k3".to_vec()), Some(b"last".to_vec())),
    ];
    assert_eq!(got, want);
}

/// `courier produce` reads every line whole, whether it sits in the input
/// buffer (64 KiB) or runs past its end: lines of 1 byte to 150 KB,
/// keyed and not, an empty one, and a last line with no '\n'. Each value
/// (and key) is in the log as the line had it.
#[test]
fn produce_reads_lines_of_any_length_whole() {
    let broker = Tansu::start();
    let b = broker.bootstrap();
    create_topic(&b, "lines", 1);
    let long: Vec<u8> = (0..150_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut values: Vec<Vec<u8>> = vec![b"x".to_vec(), b"k|short".to_vec(), Vec::new()];
    values.push(long.clone());
    values.push([b"key|".as_slice(), &long[..70_000]].concat());
    values.push(b"after the long ones".to_vec());
    values.push(b"no newline at the end".to_vec());
    let input = values.join(&b'\n');
    assert_eq!(input.last(), Some(&b'd'), "the last line has no newline");
    produce_keyed_lines(&b, "lines", &input, values.len());
    let got: Vec<(Option<Vec<u8>>, Vec<u8>)> = read_back(
        &b,
        "lines",
        1,
        values.len(),
        std::time::Duration::from_secs(30),
    )
    .into_iter()
    .map(|r| (r.key, r.value.unwrap_or_default()))
    .collect();
    let want: Vec<(Option<Vec<u8>>, Vec<u8>)> = values
        .iter()
        .map(|line| match line.iter().position(|&c| c == b'|') {
            Some(at) => (Some(line[..at].to_vec()), line[at + 1..].to_vec()),
            None => (None, line.clone()),
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "line {i}: key {:?}, {} bytes read back",
            g.0,
            g.1.len()
        );
    }
}

/// The clap front end: help on every subcommand (exit 0, examples shown),
/// `--version`, shell completions, usage errors that name the flag (exit
/// 2), "did you mean" for a mistyped property, and librdkafka spellings.
#[test]
fn help_version_completions_and_usage_errors() {
    for sub in [
        &["--help"][..],
        &["produce", "--help"],
        &["perf", "--help"],
        &["topic", "create", "--help"],
        &["topic", "list", "--help"],
        &["topic", "describe", "--help"],
        &["topic", "delete", "--help"],
        &["cluster", "--help"],
        &["completions", "--help"],
    ] {
        let out = courier(sub, "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{sub:?}");
        assert!(text.contains("Usage: courier"), "{sub:?}: {text}");
        assert_eq!(text.matches("Usage:").count(), 1, "usage once: {text}");
    }
    for sub in [
        &["produce", "--help"][..],
        &["topic", "create", "--help"],
        &["topic", "describe", "--help"],
        &["cluster", "--help"],
    ] {
        let help = courier(sub, "");
        assert!(
            String::from_utf8_lossy(&help.stdout).contains("Examples:"),
            "{sub:?}"
        );
    }
    for sub in [
        &["topic", "list", "--help"][..],
        &["topic", "delete", "--help"],
    ] {
        let help = courier(sub, "");
        assert!(
            String::from_utf8_lossy(&help.stdout).contains("Example:"),
            "{sub:?}"
        );
    }
    let create = courier(&["topic", "create", "--help"], "");
    assert!(String::from_utf8_lossy(&create.stdout).contains("--config <NAME=VALUE>"));
    // A --config without '=' is a usage error naming the flag.
    let bad_config = courier(
        &[
            "topic",
            "create",
            "-b",
            "h:1",
            "x",
            "--partitions",
            "1",
            "--config",
            "retention.ms",
        ],
        "",
    );
    assert_eq!(bad_config.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_config.stderr).contains("--config"));
    let no_name = courier(&["topic", "describe", "-b", "h:1"], "");
    assert_eq!(no_name.status.code(), Some(2));
    let version = courier(&["--version"], "");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!(
            "courier {} ({})",
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_NAME")
        )
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = courier(&["completions", shell], "");
        assert!(out.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("courier"),
            "{shell}"
        );
    }
    let missing = courier(&["produce", "-t", "x"], "");
    assert_eq!(missing.status.code(), Some(2));
    // No -b and no bootstrap.servers in -F or -X: a usage error naming
    // all three places.
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("-b BROKERS") && said.contains("bootstrap.servers"),
        "{said}"
    );
    let bad = courier(
        &[
            "perf",
            "-b",
            "h:1",
            "-t",
            "x",
            "--num-records",
            "many",
            "--record-size",
            "1",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--num-records"));
    let typo = courier(&["produce", "-b", "h:1", "-t", "x", "-X", "lingr.ms=5"], "");
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&typo.stderr).contains("did you mean \"linger.ms\""),
        "{}",
        String::from_utf8_lossy(&typo.stderr)
    );
}

/// kcat's produce options: `-p` a partition, `-H` headers, `-F` a
/// properties file (librdkafka names and spellings), with `-X` winning;
/// `-v` logs go to stderr and the JSON on stdout stays clean.
#[test]
fn partition_headers_properties_file_and_logs_on_stderr() {
    let broker = Tansu::start();
    let b = broker.bootstrap();
    create_topic(&b, "kcat", 3);
    let file = std::env::temp_dir().join(format!("courier-cli-{}.properties", std::process::id()));
    std::fs::write(
        &file,
        "# as a rust-rdkafka map would say it\nqueue.buffering.max.ms=1\nrequest.required.acks=ALL\nenable.idempotence=1\nmessage.timeout.ms=not-a-number\n",
    )
    .unwrap();
    let input: String = (0..20).map(|i| format!("v-{i}\n")).collect();
    let out = courier(
        &[
            "produce",
            "-b",
            &b,
            "-t",
            "kcat",
            "-p",
            "2",
            "-H",
            "source=cli",
            "-H",
            "n=1",
            "-F",
            file.to_str().unwrap(),
            "-X",
            "message.timeout.ms=60000",
            "-vv",
        ],
        &input,
    );
    std::fs::remove_file(&file).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().count(),
        20,
        "only report lines on stdout: {stdout}"
    );
    assert!(stdout
        .lines()
        .all(|l| l.starts_with("{\"seq\"") && l.contains("\"partition\": 2")));
    assert!(
        stderr.contains("DEBUG"),
        "-vv logs debug events to stderr: {stderr}"
    );
    let read = read_back(&b, "kcat", 3, 20, std::time::Duration::from_secs(30));
    assert!(read.iter().all(|r| r.partition == 2));
    for r in &read {
        let names: Vec<(&str, Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![("source", Some(&b"cli"[..])), ("n", Some(&b"1"[..]))]
        );
    }
}

/// `courier topic list` through a relay that answers ApiVersions and then
/// nothing (the sockets stay open): the request waits `-X
/// request.timeout.ms` (here 1 s), and the command fails naming the
/// timeout instead of hanging; admin calls used 30 s whatever -X said.
#[test]
fn admin_calls_give_up_after_request_timeout_ms() {
    let broker = Tansu::start();
    let relay = support::SilentRelay::start(broker.bootstrap(), 1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(["topic", "list", "-b", &relay.bootstrap()])
        .args(["-X", "request.timeout.ms=1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run courier");
    // A bound on a hang, not a timing assertion: the command's own limit
    // is 1 s, the default was 30 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("courier topic list still waits for a broker that answers nothing");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not answer"), "{stderr}");
    assert_eq!(relay.accepted(), 1);
}
