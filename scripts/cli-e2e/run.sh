#!/usr/bin/env bash
# `bp dev` of the official CLI (@botpress/cli 0.8.59) through the local
# platform's own tunnel, end to end (dev.mjs says what it checks):
#   1. installs the npm dependencies (npm ci) when missing or stale;
#   2. builds the local platform (go build ./functions/local);
#   3. runs dev.mjs, which starts the platform on a free loopback port with a
#      fresh data directory, then bp login, bp init, bp dev, a message round
#      trip, and stops everything it started.
# Exits non-zero on any failure. Works from any directory.
#
# Needs Go and Node.js 20+ with npm. KEEP_WORK=1 keeps the temporary
# directory (platform and bp dev logs, the project).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=cli-e2e
# shellcheck source=../lib/e2e.sh
source "$ROOT/scripts/lib/e2e.sh"

e2e_require_tools
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "Node.js 20 or later is required (found $(node --version))"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cli-e2e.XXXXXX")"
cleanup() {
  local rc=$?
  if [[ "${KEEP_WORK:-}" == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT

e2e_npm_ci "$HERE"

log "building ./functions/local"
(cd "$ROOT" && go build -o "$WORK/local" ./functions/local)

node "$HERE/dev.mjs" "$WORK/local" "$WORK"
