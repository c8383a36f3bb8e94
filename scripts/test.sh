#!/usr/bin/env bash
# The whole test suite: installs what it needs, then checks formatting, lints
# and every test, and fuzzes each fuzz target briefly. Each broker test
# starts its own broker (Tansu, or Apache Kafka in KRaft mode) on free
# loopback ports.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-tools.sh
export COURIER_TANSU="$PWD/.tools/bin/tansu"
# Apache Kafka's jars, for the tests on the reference broker
# (tests/support/kafka.rs starts its own clusters with `java -cp libs/*`).
export COURIER_KAFKA_LIBS="$PWD/.tools/kafka/libs"

# Disk: a fresh clone's test builds take about 13 GB with cargo's defaults
# (full debug info, incremental caches). On CI (CI set), where nothing is
# rebuilt, incremental caches are dropped and debug info is line tables
# only (backtraces still name files and lines); a run once ran the disk out
# ("No space left on device") with 4 GB free. Locally the defaults stay, so
# this script and a plain `cargo test` share their builds.
if [[ -n "${CI:-}" ]]; then
  export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi
# The tests run on the library as applications get it (default features;
# the dev-dependency on itself adds only `unstable-internals`, which makes
# internals visible and changes no behaviour). The tests of the
# behaviour-changing `fault-injection` hooks and of the optional features
# are the targets Cargo.toml gives `required-features`: a second build,
# with these features, runs them (and the library's unit tests again).
hooks="fault-injection,metrics,opentelemetry,avro,protobuf"
# Each stage's heading says how long the run has taken so far.
stage() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }
mapfile -t hook_names < <(python3 - <<'PY'
import tomllib
with open("Cargo.toml", "rb") as f:
    manifest = tomllib.load(f)
for t in manifest.get("test", []):
    if t.get("required-features"):
        print(t["name"])
PY
)
hook_targets=()
for name in "${hook_names[@]}"; do hook_targets+=(--test "$name"); done
stage "disk free where the builds go: $(df -h --output=avail . | tail -1 | tr -d ' ')"
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy --all-targets -- -D warnings, and the library without features"
cargo clippy --all-targets --locked -- -D warnings
# The hooks' build (below, "the hooks and the optional features"): the
# library with them, and the targets that need them.
cargo clippy --features "$hooks" --lib "${hook_targets[@]}" --example prometheus --locked -- -D warnings
# The targets above build the library with `unstable-internals` (the
# dev-dependency on itself turns it on); lint it as applications get it.
cargo clippy --lib --bins --locked -- -D warnings
# Without the default features (`cli`, `oidc`): what an application with
# `default-features = false` builds.
cargo clippy --lib --no-default-features --locked -- -D warnings
# The instruction-count benchmark and the side-by-side benches are packages
# of their own (benches/instructions, benches/side-by-side).
cargo clippy -p courier-instructions -p courier-side-by-side --all-targets --locked -- -D warnings
stage "cargo doc (warnings denied: broken links, missing docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked
stage "publishing: cargo publish --dry-run, cargo deny, MSRV (docs/guide/contributing.md, \"Publishing\")"
# Courier and the vendored courier-kafka-protocol package together, as
# `cargo publish --workspace` would upload them, with the verify build: each
# package is built from its packaged sources alone, Courier against the
# protocol package in cargo's temporary registry, so a package that builds
# only inside this workspace fails here. The benchmark packages are never
# published.
cargo publish --dry-run --workspace --exclude courier-instructions --exclude courier-side-by-side --locked --allow-dirty
# Licences, bans (duplicate versions warn) and sources, as deny.toml says.
# Not advisories: the RustSec database is on GitHub, out of reach here.
"$PWD/.tools/bin/cargo-deny" --locked check licenses bans sources
# The rust-version Cargo.toml declares is true: the library builds with
# that Rust (install-tools.sh installs it) as an application on it gets the
# dependencies, each at its newest version that supports it (cargo's
# MSRV-aware fallback resolver, in a copy under target/msrv: Cargo.lock
# pins some that need a newer Rust).
msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)"
rm -rf target/msrv/src target/msrv/benches target/msrv/vendor target/msrv/tests target/msrv/examples target/msrv/docs
mkdir -p target/msrv/docs
# tests/ and examples/ too: Cargo.toml names some of their targets; and
# the guide's pages, which src/guide.rs includes as its docs.
cp -r Cargo.toml Cargo.lock README.md src benches vendor tests examples target/msrv/
cp -r docs/guide target/msrv/docs/
(cd target/msrv && export CARGO_TARGET_DIR="$PWD/target" &&
  CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo update --quiet &&
  cargo "+$msrv" check --lib --locked --quiet)
stage "cargo test"
# tests/examples.rs runs the example binaries, which `cargo test` alone
# builds only as test harnesses; build them as programs first. Benches are
# only compiled and run once in criterion's --test mode, never timed here.
# tests/kafka_interop.rs and tests/kafka_faults.rs start their own Apache
# Kafka clusters (KRaft) from $COURIER_KAFKA_LIBS; they fail, never skip,
# when the jars or Java are missing.
cargo build --examples --locked
# Every target but the examples, which have no tests of their own (built
# above as programs; --all-targets would build them again as harnesses).
cargo test --lib --bins --tests --benches --locked --no-run
# The side-by-side benches (vs_rdkafka, curves) in their smoke mode, from
# their own package: Courier at its default features. A cargo command of
# their own, never with -p courier: one command unifies features across
# its packages, and the root's dev-dependency would turn its features on.
cargo test -p courier-side-by-side --benches --locked --no-run
# The second build, with the hooks and the optional features: the targets
# that need them, the library's unit tests, and the prometheus example.
cargo build --example prometheus --features "$hooks" --locked
cargo test --features "$hooks" --lib "${hook_targets[@]}" --test examples --locked --no-run
# The slowest Kafka test binaries spend their minutes waiting on brokers
# (kafka_faults kills, pauses and restarts them; about half a core busy),
# so they run beside the others instead of after them: this stage took
# 9 minutes one binary after another. cargo holds its build lock only
# while it builds, and everything is built above.
beside=(kafka_faults kafka_transactions)
# Test binaries run in the hooks' group below instead of the main group.
# Empty: tests/external_app.rs (3 minutes compiling an application from
# cold) ran there once and the extra compiling beside the main group made
# testing_double's overtaking-answers test fail on timing (third.attempts
# 3, not 2); it passed alone and in the two runs before.
second=()
rest=()
for f in tests/*.rs; do
  name="$(basename "$f" .rs)"
  [[ " ${beside[*]} ${hook_names[*]} ${second[*]} " == *" $name "* ]] || rest+=(--test "$name")
done
beside_log="target/tests-beside.log"
(
  status=0
  for name in "${beside[@]}"; do
    cargo test --locked --test "$name" || status=$?
  done
  cargo test --locked -p courier-side-by-side --benches || status=$?
  echo "== this group ended at $((SECONDS / 60))m$((SECONDS % 60))s"
  exit "$status"
) >"$beside_log" 2>&1 &
beside_pid=$!
# The hooks' tests in a second group beside them (the simulation keeps
# both cores busy for about 30 s; the rest mostly wait on their brokers).
hooks_log="target/tests-hooks.log"
(
  status=0
  # The public API against docs/public-api.txt, and CHANGELOG.md said
  # what changed (scripts/public-api.sh; it installs cargo-public-api and
  # its nightly on first use). Here, while the brokers' tests leave cores
  # idle, and in a target directory of its own, so that its nightly
  # build never holds the build lock the others wait on.
  echo "== public API: docs/public-api.txt, and CHANGELOG.md says what changed"
  CARGO_TARGET_DIR="$PWD/target/public-api" bash scripts/public-api.sh || status=$?
  cargo test --features "$hooks" --lib "${hook_targets[@]}" --locked --no-fail-fast || status=$?
  cargo test --features "$hooks" --test examples --locked -- prometheus || status=$?
  for name in "${second[@]}"; do
    cargo test --locked --test "$name" || status=$?
  done
  echo "== this group ended at $((SECONDS / 60))m$((SECONDS % 60))s"
  exit "$status"
) >"$hooks_log" 2>&1 &
hooks_pid=$!
rest_status=0
cargo test --lib --bins --benches "${rest[@]}" --locked --no-fail-fast || rest_status=$?
stage "the main group of tests ended; waiting for the two beside it"
beside_status=0
wait "$beside_pid" || beside_status=$?
hooks_status=0
wait "$hooks_pid" || hooks_status=$?
stage "cargo test (run beside the others): ${beside[*]}, the side-by-side benches"
cat "$beside_log"
stage "cargo test, the hooks and the optional features ($hooks): --lib ${hook_names[*]}, and the prometheus example; the public API; ${second[*]}"
cat "$hooks_log"
if (( rest_status != 0 || beside_status != 0 || hooks_status != 0 )); then
  echo "cargo test failed (others: exit $rest_status; ${beside[*]} and the side-by-side benches: exit $beside_status; the hooks and the public API: exit $hooks_status)" >&2
  exit 1
fi
cargo test --doc --locked
stage "instruction counts (benches/instructions, under callgrind)"
# Fails when a hot-path benchmark runs more than 10 % over its recorded
# count (benches/instructions/counts.txt); about 3 minutes on a fresh clone:
# the runner's build (45 s), the benchmark's optimised build (2 minutes),
# the runs under callgrind (10 s).
bash scripts/instructions.sh
stage "fuzz"
# Each target in fuzz/ from its seed corpus, COURIER_FUZZ_SECS (default 15)
# seconds each, so a decoder change that brings a crash back fails here.
# The first build of the targets takes about 2.5 minutes on 2 cores.
bash scripts/fuzz.sh all "${COURIER_FUZZ_SECS:-15}"
stage "done"
