#!/usr/bin/env bash
# The console's browser libraries, vendored from pinned npm packages
# (package.json, package-lock.json: npm ci checks each tarball's integrity):
#   preact 10 (preact.module.js), preact/hooks, htm
# are copied into shared/console/static/vendor as ES modules (the hooks'
# bare import "preact" rewritten to the sibling file, source map comments
# dropped), with their SHA-256 in shared/console/static/vendor/SHA256SUMS.
# The Go test of shared/console checks the files against SHA256SUMS on
# every `go test`; `vendor.sh --check` checks that they are what the pinned
# packages give (run by scripts/console/e2e.sh).
#
# Usage: vendor.sh [--check]     (needs Node.js 20+ and npm)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="$ROOT/shared/console/static/vendor"

bash "$HERE/npm-ci.sh"
NM="$HERE/node_modules"
ver() { node -p "require('$NM/$1/package.json').version"; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
strip() { sed -e '/^\/\/# sourceMappingURL=/d' "$1"; }
strip "$NM/preact/dist/preact.module.js" >"$TMP/preact.module.js"
strip "$NM/preact/hooks/dist/hooks.module.js" | sed -e 's/from"preact"/from"\.\/preact.module.js"/g' >"$TMP/hooks.module.js"
strip "$NM/htm/dist/htm.module.js" >"$TMP/htm.module.js"
grep -q 'from"\./preact.module.js"' "$TMP/hooks.module.js" || { echo "vendor.sh: preact/hooks no longer imports \"preact\" the expected way" >&2; exit 1; }
{
  echo "# preact $(ver preact), htm $(ver htm): scripts/console/vendor.sh"
  (cd "$TMP" && sha256sum hooks.module.js htm.module.js preact.module.js)
} >"$TMP/SHA256SUMS"

if [[ "${1:-}" == --check ]]; then
  for f in preact.module.js hooks.module.js htm.module.js SHA256SUMS; do
    cmp -s "$TMP/$f" "$OUT/$f" || { echo "vendor.sh --check: shared/console/static/vendor/$f differs from the pinned packages: run scripts/console/vendor.sh" >&2; exit 1; }
  done
  echo "vendor.sh: shared/console/static/vendor matches preact $(ver preact), htm $(ver htm)"
  exit 0
fi
mkdir -p "$OUT"
cp "$TMP"/preact.module.js "$TMP"/hooks.module.js "$TMP"/htm.module.js "$TMP"/SHA256SUMS "$OUT/"
cat "$OUT/SHA256SUMS"
