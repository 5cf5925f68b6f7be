#!/usr/bin/env bash
# npm ci of scripts/console when node_modules is missing or was installed
# from another package.json / package-lock.json (as scripts/conformance).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hash="$(cd "$HERE" && cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
stamp="$HERE/node_modules/.console-installed"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$hash" ]]; then
  echo "==> scripts/console: npm ci" >&2
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) >&2
  printf '%s\n' "$hash" >"$stamp"
fi
