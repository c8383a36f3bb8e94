#!/usr/bin/env bash
# Runs cargo-fuzz targets, starting from the seed corpus kept in the repo:
#
#   bash scripts/fuzz.sh TARGET [SECONDS]   one target (default 60 s)
#   bash scripts/fuzz.sh all [SECONDS]      every target in turn; CI runs
#                                           this with 15 (scripts/test.sh)
#
# Targets: frame_decoder, response_decoders, response_stream (fuzz/).
# cargo-fuzz 0.13.2 comes from scripts/install-tools.sh (.tools/bin). The
# stable toolchain builds the targets: RUSTC_BOOTSTRAP=1 lets it accept the
# sanitizer flags cargo-fuzz passes, so no nightly is needed.
#
# No sanitizer (`-s none`): the decoders are safe Rust (the one unsafe
# line, the vendored protocol's from_utf8_unchecked, reads bytes checked
# as UTF-8 when they were taken), so AddressSanitizer would look for what
# the compiler already rules out. It cost 1.5 of the build's 4 CPU-minutes
# and slows every run. Set COURIER_FUZZ_SANITIZER=address to bring it back.
#
# The seeds in fuzz/corpus/TARGET/ are only read (tests/fuzz_corpus.rs
# writes them); the inputs libFuzzer adds go to fuzz/target/corpus/TARGET/,
# emptied first. A crash (a panic, an abort, a single allocation over
# 2 GiB, an input running over 10 s) is saved under fuzz/artifacts/TARGET/
# and makes this script exit non-zero, after the other targets have run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
all_targets=(frame_decoder response_decoders response_stream)
target="${1:?target: all, ${all_targets[*]}}"
seconds="${2:-60}"
if [[ "$target" == all ]]; then
  targets=("${all_targets[@]}")
else
  targets=("$target")
fi

bash scripts/install-tools.sh cargo-fuzz
export PATH="$PWD/.tools/bin:$PATH"
export RUSTC_BOOTSTRAP=1
cd fuzz
# cargo-fuzz has no --locked: check fuzz/Cargo.lock is current first, so
# the build cannot quietly resolve other versions.
cargo metadata --locked --format-version 1 >/dev/null
sanitizer="${COURIER_FUZZ_SANITIZER:-none}"
# Build first, so a build error fails here and is not taken for a crash.
if [[ "$target" == all ]]; then
  cargo fuzz build -s "$sanitizer"
else
  cargo fuzz build -s "$sanitizer" "$target"
fi

failed=()
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${seconds} s"
  scratch="target/corpus/$t"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  # libFuzzer prints a status line every few seconds; the last lines say
  # how far it got (runs, coverage) or what crashed.
  if cargo fuzz run -s "$sanitizer" "$t" "$scratch" "corpus/$t" -- \
       -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -print_final_stats=1 >"target/fuzz-$t.log" 2>&1; then
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "target/fuzz-$t.log" || true
  else
    grep -E -A4 'ERROR: libFuzzer|panicked at' "target/fuzz-$t.log" | head -n 20 || true
    grep -E -A2 '^(Failing input|Reproduce with):' "target/fuzz-$t.log" || true
    echo "fuzz: $t failed; the input is in fuzz/artifacts/$t/ (full log: fuzz/target/fuzz-$t.log)" >&2
    failed+=("$t")
  fi
done
if (( ${#failed[@]} )); then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
