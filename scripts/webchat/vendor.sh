#!/usr/bin/env bash
# The hosted webchat page's browser libraries, vendored from pinned npm
# packages (package.json, package-lock.json: npm ci checks each tarball's
# integrity):
#   @botpress/webchat 4.5.2 dist/index.umd.cjs -> webchat.js (the official
#     component; its UMD build bundles every dependency but React),
#     dist/style.css -> webchat.css
#   react 18.3.1 umd/react.production.min.js -> react.js
#   react-dom 18.3.1 umd/react-dom.production.min.js -> react-dom.js
# are copied into shared/webchat/static/vendor (source map comments
# dropped) with their SHA-256 in SHA256SUMS. The Go test of shared/webchat
# checks the files against SHA256SUMS on every `go test`; `vendor.sh
# --check` checks that they are what the pinned packages give (run by
# scripts/webchat/e2e.sh). React 19 ships no UMD build; the component
# accepts React 18 (peer dependency ^18 || ^19).
#
# Usage: vendor.sh [--check]     (needs Node.js 20+ and npm)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="$ROOT/shared/webchat/static/vendor"

hash="$(cd "$HERE" && cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
stamp="$HERE/node_modules/.webchat-installed"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$hash" ]]; then
  echo "==> scripts/webchat: npm ci" >&2
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts) >&2
  printf '%s\n' "$hash" >"$stamp"
fi
NM="$HERE/node_modules"
ver() { node -p "require('$NM/$1/package.json').version"; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
strip() { sed -e '/^\/\/# sourceMappingURL=/d' -e 's|//# sourceMappingURL=[^ ]*$||' "$1"; }
strip "$NM/@botpress/webchat/dist/index.umd.cjs" >"$TMP/webchat.js"
strip "$NM/@botpress/webchat/dist/style.css" >"$TMP/webchat.css"
strip "$NM/react/umd/react.production.min.js" >"$TMP/react.js"
strip "$NM/react-dom/umd/react-dom.production.min.js" >"$TMP/react-dom.js"
files=(react-dom.js react.js webchat.css webchat.js)
{
  echo "# @botpress/webchat $(ver @botpress/webchat), react $(ver react), react-dom $(ver react-dom): scripts/webchat/vendor.sh"
  (cd "$TMP" && sha256sum "${files[@]}")
} >"$TMP/SHA256SUMS"

if [[ "${1:-}" == --check ]]; then
  for f in "${files[@]}" SHA256SUMS; do
    cmp -s "$TMP/$f" "$OUT/$f" || { echo "vendor.sh --check: shared/webchat/static/vendor/$f differs from the pinned packages: run scripts/webchat/vendor.sh" >&2; exit 1; }
  done
  echo "vendor.sh: shared/webchat/static/vendor matches the pinned packages"
  exit 0
fi
mkdir -p "$OUT"
for f in "${files[@]}" SHA256SUMS; do cp "$TMP/$f" "$OUT/"; done
cat "$OUT/SHA256SUMS"
