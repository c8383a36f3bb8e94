#!/usr/bin/env bash
# The library's public API, one item a line (cargo-public-api, blanket,
# auto-trait and derived impls left out), checked against the committed
# listing docs/public-api.txt: the build applications get (default
# features; the test and internals features add hooks that are no part of
# the API).
#
#   bash scripts/public-api.sh            fails when the API differs from the
#                                         listing, or when a commit changed
#                                         the listing without CHANGELOG.md
#   bash scripts/public-api.sh --record   writes the listing anew
#
# A change to the public API is a change users see: record the listing and
# say what changed in CHANGELOG.md, in the same commit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

listing="docs/public-api.txt"
bin="$PWD/.tools/bin/cargo-public-api"
[[ -x "$bin" ]] || bash scripts/install-tools.sh cargo-public-api

# The pinned nightly (install-tools.sh): its rustdoc writes the JSON
# format cargo-public-api 0.52 reads. Run under it, cargo-public-api uses
# it rather than whichever toolchain is called `nightly`.
now="$(mktemp)"
trap 'rm -f "$now"' EXIT
RUSTUP_TOOLCHAIN=nightly-2026-05-20 "$bin" -sss -p courier-kafka --color never >"$now"

if [[ "${1:-}" == "--record" ]]; then
  cp "$now" "$listing"
  echo "public-api: wrote $listing ($(wc -l <"$listing") lines)"
  exit 0
fi

if ! diff -u "$listing" "$now"; then
  echo "public-api: the public API differs from $listing (above, - listed, + now)." >&2
  echo "public-api: if the change is meant, run 'bash scripts/public-api.sh --record' and say what changed in CHANGELOG.md, in the same commit." >&2
  exit 1
fi
echo "public-api: the public API matches $listing ($(wc -l <"$listing") lines)"

# Every commit that changed the listing says so in CHANGELOG.md too (a
# shallow clone checks the commits it has). Commits already on main that
# broke the rule cannot be rewritten; each one is named here with why it
# is harmless, and no other is let through.
#   8e4abd6: the listing caught up with the interceptors and rebootstrap,
#            whose entries CHANGELOG.md had from the commits before it.
known=(8e4abd62076591d69052d2d20a2e0f0ae44db5b6)
missing=()
while read -r commit; do
  [[ " ${known[*]} " == *" $commit "* ]] && continue
  git show --name-only --format= "$commit" | grep -qx "CHANGELOG.md" || missing+=("$commit")
done < <(git log --format=%H -- "$listing")
if (( ${#missing[@]} > 0 )); then
  for c in "${missing[@]}"; do
    echo "public-api: $(git log -1 --format='%h %s' "$c") changes $listing but not CHANGELOG.md" >&2
  done
  exit 1
fi
