//! The examples, run as a user would, against a Tansu broker started here.
//! Each must finish (or answer) and report every message delivered.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Tansu;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/examples-<hash> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --examples` first (scripts/test.sh does)",
        path.display()
    );
    path
}

fn run(name: &str, args: &[&str]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run example");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn quickstart_stream_and_actor_examples() {
    let broker = Tansu::start();
    let b = broker.bootstrap();
    let out = run("quickstart", &[&b]);
    assert!(
        out.contains("100000 messages, 100000 delivered, 0 failed"),
        "{out}"
    );
    let out = run("stream_subscriber", &[&b]);
    assert_eq!(
        out.matches("1000 reports, 1000 delivered").count(),
        4,
        "{out}"
    );
    let out = run("actor_subscriber", &[&b]);
    assert!(out.contains("auditor: 1000 delivered, 0 failed"), "{out}");
    let out = run("retry_dead_letter", &[&b]);
    assert!(
        out.contains("8 delivered, 2 dead-lettered, 0 failed"),
        "{out}"
    );
    let out = run("wire_demo", &[&b, "10000"]);
    assert!(out.contains("10000 records"), "{out}");
}

#[test]
fn actix_web_example_answers_with_the_records_offset() {
    let broker = Tansu::start();
    let port = support::free_port();
    let mut server = KillOnDrop(
        Command::new(example("actix_web"))
            .arg(broker.bootstrap())
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("listening"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut bodies = Vec::new();
    for i in 0..3 {
        let mut conn = loop {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("server not up: {e}"),
            }
        };
        let body = format!("hello-{i}");
        write!(
            conn,
            "POST /events/user-1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        conn.read_to_string(&mut resp).unwrap();
        bodies.push(resp);
    }
    drop(server);
    for (i, resp) in bodies.iter().enumerate() {
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        // Same key, same partition: offsets 0, 1, 2.
        assert!(resp.contains(&format!("offset Some({i})")), "{resp}");
    }
}

/// Stops the example server also when an assertion fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
