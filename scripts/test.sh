#!/usr/bin/env bash
# The whole test suite: installs what it needs, then checks formatting, lints
# and every test. Each broker test starts its own broker on a free port.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-tools.sh
export COURIER_TANSU="$PWD/.tools/bin/tansu"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
# tests/examples.rs runs the example binaries, which `cargo test` alone
# builds only as test harnesses; build them as programs first. Benches are
# only compiled and run once in criterion's --test mode, never timed here.
cargo build --examples --locked
cargo test --all-targets --locked
cargo test --doc --locked
