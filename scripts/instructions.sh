#!/usr/bin/env bash
# Instruction counts of the hot path (benches/instructions): runs the
# iai-callgrind benchmarks, each under callgrind, and fails when one runs
# more than 10 % over its count in benches/instructions/counts.txt (the
# benchmark sets that hard limit itself). scripts/test.sh runs this.
#
#   bash scripts/instructions.sh            check against the recorded counts
#   bash scripts/instructions.sh --record   take new counts into counts.txt
#
# Record after a change that moves a count on purpose (an optimisation, or a
# feature that costs), and say why in the commit message; the counts hold
# for this toolchain and x86_64 (a new rustc may move them a few percent).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-tools.sh iai-callgrind >/dev/null
export IAI_CALLGRIND_RUNNER="$PWD/.tools/bin/iai-callgrind-runner"
counts=benches/instructions/counts.txt

# What the counts were taken with (counts.txt's last header line).
rustc_now="$(rustc --version)"
recorded="$(sed -n 's/^# taken with: //p' "$counts")"

if [[ "${1:-}" != "--record" ]]; then
  if [[ "$recorded" != "$rustc_now" ]]; then
    echo "instructions: the counts were taken with $recorded, this is $rustc_now;" \
         "a failure may be the compiler's (check, then --record)" >&2
  fi
  exec cargo bench -p courier-instructions --profile instructions --locked
fi

# Without limits, with a JSON summary per benchmark to read the counts from.
target="$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
rm -rf "$target/iai/courier-instructions"
COURIER_INSTRUCTIONS_RECORD=1 cargo bench -p courier-instructions --profile instructions --locked -- --save-summary=json
python3 - "$counts" "$target/iai/courier-instructions" "$rustc_now" <<'PY'
import json, pathlib, sys

counts, root, rustc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
header = [l for l in counts.read_text().splitlines()
          if l.startswith("#") and not l.startswith("# taken with: ")]
header.append(f"# taken with: {rustc}")
rows = []
for path in sorted(root.rglob("summary.json")):
    s = json.loads(path.read_text())
    ir = s["profiles"][0]["summaries"]["total"]["summary"]["Callgrind"]["Ir"]["metrics"]["Left"]["Int"]
    # The name instructions.rs asks limit() for.
    rows.append((f"{s['function_name']}/{s['id']}", ir))
if not rows:
    sys.exit(f"no summary.json under {root}")
width = max(len(n) for n, _ in rows)
body = [f"{n:<{width}}  {ir}" for n, ir in sorted(rows)]
counts.write_text("\n".join(header + body) + "\n")
print("\n".join(body))
PY
