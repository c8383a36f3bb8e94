#!/usr/bin/env bash
# Before a release: does the library's API change as its new version says?
# cargo-semver-checks compares the public API with a baseline and names
# each change that would break an application (a removed item, a changed
# signature, a new variant of an exhaustive enum, ...), which the version
# bump must then be a major (before 1.0: minor) one for.
#
#   bash scripts/semver-checks.sh                    against the newest
#                                                    courier-kafka on crates.io
#   bash scripts/semver-checks.sh --baseline-rev REV against a commit
#
# Installs cargo-semver-checks 0.51.0 into .tools on first use. Until the
# first release there is nothing on crates.io to compare with: the script
# says so and stops with status 2; give --baseline-rev to compare with a
# commit instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin="$PWD/.tools/bin/cargo-semver-checks"
[[ -x "$bin" ]] || bash scripts/install-tools.sh cargo-semver-checks

if [[ $# -eq 0 ]] && ! cargo info courier-kafka --registry crates-io >/dev/null 2>&1; then
  echo "semver-checks: courier-kafka is not on crates.io yet, so there is no release to compare with; use --baseline-rev REV" >&2
  exit 2
fi
exec "$bin" semver-checks -p courier-kafka "$@"
