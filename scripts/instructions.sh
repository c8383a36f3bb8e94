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

if [[ "${1:-}" != "--record" ]]; then
  exec cargo bench -p courier-instructions --locked
fi

# Without limits, with a JSON summary per benchmark to read the counts from.
rm -rf target/iai/courier-instructions
COURIER_INSTRUCTIONS_RECORD=1 cargo bench -p courier-instructions --locked -- --save-summary=json
python3 - "$counts" target/iai/courier-instructions <<'PY'
import json, pathlib, sys

counts, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
header = [l for l in counts.read_text().splitlines() if l.startswith("#")]
rows = []
for path in sorted(root.rglob("summary.json")):
    s = json.loads(path.read_text())
    ir = s["profiles"][0]["summaries"]["total"]["summary"]["Callgrind"]["Ir"]["metrics"]["Left"]["Int"]
    # The name instructions.rs asks limit() for.
    rows.append((f"{s['function_name']}/{s['id']}", ir))
width = max(len(n) for n, _ in rows)
body = [f"{n:<{width}}  {ir}" for n, ir in sorted(rows)]
counts.write_text("\n".join(header + body) + "\n")
print("\n".join(body))
PY
