#!/usr/bin/env bash
# The console health page's chart library, vendored from its pinned npm
# package (package.json, package-lock.json: npm ci checks the tarball's
# integrity): uPlot's ES module and stylesheet are copied into
# shared/console/static/vendor/uplot (source map comments dropped), with
# their SHA-256 in SHA256SUMS there and the package's license. The Go test
# of shared/console (health_test.go) checks the files against SHA256SUMS on
# every `go test`; `vendor.sh --check` checks that they are what the pinned
# package gives (run by scripts/health/e2e.sh).
#
# Usage: vendor.sh [--check]     (needs Node.js 20+ and npm)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="$ROOT/shared/console/static/vendor/uplot"

hash="$(cd "$HERE" && cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
stamp="$HERE/node_modules/.health-installed"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$hash" ]]; then
  echo "==> scripts/health: npm ci" >&2
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) >&2
  printf '%s\n' "$hash" >"$stamp"
fi
NM="$HERE/node_modules"
ver="$(node -p "require('$NM/uplot/package.json').version")"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
sed -e '/^\/\/# sourceMappingURL=/d' "$NM/uplot/dist/uPlot.esm.js" >"$TMP/uPlot.esm.js"
sed -e '/sourceMappingURL=/d' "$NM/uplot/dist/uPlot.min.css" >"$TMP/uPlot.min.css"
cp "$NM/uplot/LICENSE" "$TMP/LICENSE"
{
  echo "# uplot $ver: scripts/health/vendor.sh"
  (cd "$TMP" && sha256sum LICENSE uPlot.esm.js uPlot.min.css)
} >"$TMP/SHA256SUMS"

if [[ "${1:-}" == --check ]]; then
  for f in uPlot.esm.js uPlot.min.css LICENSE SHA256SUMS; do
    cmp -s "$TMP/$f" "$OUT/$f" || { echo "vendor.sh --check: shared/console/static/vendor/uplot/$f differs from the pinned package: run scripts/health/vendor.sh" >&2; exit 1; }
  done
  echo "vendor.sh: shared/console/static/vendor/uplot matches uplot $ver"
  exit 0
fi
mkdir -p "$OUT"
cp "$TMP"/uPlot.esm.js "$TMP"/uPlot.min.css "$TMP"/LICENSE "$TMP"/SHA256SUMS "$OUT/"
cat "$OUT/SHA256SUMS"
