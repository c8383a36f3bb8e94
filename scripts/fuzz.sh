#!/usr/bin/env bash
# Runs one cargo-fuzz target for a while: bash scripts/fuzz.sh TARGET [SECONDS]
# Targets: response_decoders, frame_decoder. Not part of CI (it needs the
# sanitizer flags of a nightly compiler; RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${1:?target: response_decoders or frame_decoder}"
seconds="${2:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cd fuzz
RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048
