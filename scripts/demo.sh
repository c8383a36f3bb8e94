#!/usr/bin/env bash
# Runs the demo against a local Tansu broker that this script installs,
# starts on a free port, and stops again when the demo ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-tools.sh
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="tcp://127.0.0.1:$port"
log="$(mktemp -t courier-demo-tansu.XXXXXX.log)"
.tools/bin/tansu broker --listener-url "$url" --advertised-listener-url "$url" \
  --storage-engine memory://tansu/ >"$log" 2>&1 &
broker=$!
trap 'kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; rm -f "$log"' EXIT

for _ in $(seq 1 200); do
  if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
    break
  fi
  sleep 0.05
done
echo "Tansu broker on 127.0.0.1:$port"
cargo run --release --example quickstart -- "127.0.0.1:$port" "$@"
