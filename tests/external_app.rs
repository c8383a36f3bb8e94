//! The decoder fix reaches applications: `tests/external-app/`, a crate with
//! its own workspace and `Cargo.lock` that depends on `courier` by path, as
//! any application would, is built with `--locked` and run against a fake
//! broker whose ApiVersions answer claims 2^31 array entries.
//!
//! With the fix wired in as a `[patch]` (which applies only inside Courier's
//! own workspace), the application got crates.io's `kafka-protocol` and
//! aborted (`memory allocation of 68719476736 bytes failed`, exit 134).
//! It must instead fail the record with an error and exit 1.
//!
//! The build reuses nothing from Courier's own target directory: it compiles
//! courier and its dependencies once more (cold, 50 s to 2 minutes on two
//! shared cores; under a second after that), into
//! `target/tmp/external-app`. It fails, never skips, when cargo is missing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const API_VERSIONS: i16 = 18;
/// The first ApiVersions version with a compact (flexible) array.
const FIRST_FLEXIBLE: i16 = 3;
/// What the lying answers claim: 2^31 entries.
const CLAIMED: u64 = 1 << 31;

/// How many lying answers the fake broker sent, by array kind.
#[derive(Default)]
struct Lies {
    compact: AtomicUsize,
    int32: AtomicUsize,
}

/// The fake broker's answer to an ApiVersions request at `version`:
/// response header v0 (the correlation id), error code 0, then an
/// `api_keys` array count of 2^31 with no entries behind it.
fn lying_api_versions(correlation_id: i32, version: i16) -> Vec<u8> {
    let mut body = correlation_id.to_be_bytes().to_vec();
    body.extend_from_slice(&0i16.to_be_bytes());
    if version >= FIRST_FLEXIBLE {
        // Compact array: unsigned varint of count + 1.
        let mut n = CLAIMED + 1;
        while n >= 0x80 {
            body.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        body.push(n as u8);
    } else {
        // int32 count: 2^31 does not fit, the nearest is 2^31 - 1.
        body.extend_from_slice(&i32::MAX.to_be_bytes());
    }
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Answers every ApiVersions request on `conn` with a lie; closes the
/// connection on any other request (none is expected: versions are never
/// agreed).
fn serve(mut conn: TcpStream, lies: &Lies) {
    loop {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let len = i32::from_be_bytes(len);
        if !(8..=1 << 20).contains(&len) {
            return;
        }
        let mut req = vec![0u8; len as usize];
        if conn.read_exact(&mut req).is_err() {
            return;
        }
        let api_key = i16::from_be_bytes([req[0], req[1]]);
        let version = i16::from_be_bytes([req[2], req[3]]);
        let correlation_id = i32::from_be_bytes([req[4], req[5], req[6], req[7]]);
        if api_key != API_VERSIONS {
            return;
        }
        if conn
            .write_all(&lying_api_versions(correlation_id, version))
            .is_err()
        {
            return;
        }
        let counter = if version >= FIRST_FLEXIBLE {
            &lies.compact
        } else {
            &lies.int32
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// Starts the fake broker on a free loopback port; it serves every
/// connection until the test process ends.
fn start_lying_broker() -> (String, Arc<Lies>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = listener.local_addr().unwrap().to_string();
    let lies = Arc::new(Lies::default());
    let for_broker = lies.clone();
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let lies = for_broker.clone();
            thread::spawn(move || serve(conn, &lies));
        }
    });
    (addr, lies)
}

/// Builds the external application and returns its binary.
fn build_external_app() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("tests/external-app/Cargo.toml");
    // A target directory of its own, so this build never waits on (or
    // blocks) the cargo that runs this test.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("external-app");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let started = Instant::now();
    let status = Command::new(&cargo)
        .args(["build", "--locked", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .unwrap_or_else(|e| panic!("could not run {cargo:?} to build the external app: {e}"));
    assert!(
        status.success(),
        "building tests/external-app failed ({status}); if Courier's dependencies \
         changed, refresh its Cargo.lock (see tests/external-app/Cargo.toml)"
    );
    eprintln!(
        "built tests/external-app in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    target.join("debug/courier-external-app")
}

/// Runs `bin` with `arg`; kills it and fails the test after `limit`.
fn run_with_timeout(bin: &Path, arg: &str, limit: Duration) -> Output {
    let mut child = Command::new(bin)
        .arg(arg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", bin.display()));
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the external app did not exit within {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_application_survives_a_broker_claiming_two_billion_api_versions() {
    let bin = build_external_app();
    let (addr, lies) = start_lying_broker();

    let out = run_with_timeout(&bin, &addr, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);

    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            None,
            "the external app was killed by a signal (6 is an abort: the \
             decoder reserved the claimed count); stderr:\n{stderr}"
        );
    }
    assert!(
        lies.compact.load(Ordering::SeqCst) >= 1,
        "the fake broker never sent its compact-array lie (int32 lies: {}); stderr:\n{stderr}",
        lies.int32.load(Ordering::SeqCst)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "want exit 1 (record not delivered, with an error); stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("external-app: not delivered:"),
        "no error line on stderr:\n{stderr}"
    );
}
