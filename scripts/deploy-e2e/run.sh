#!/usr/bin/env bash
# bp deploy end to end: the official CLI (@botpress/cli 0.8.59, with the
# SDK 0.10.10 its templates use) against a fresh local platform, as a user
# would run it (deploy.test.mjs says what is checked). Deployed code runs
# in the platform's Node.js workers (docs/runtime.md, "Deployed code").
#   1. npm ci when node_modules is missing or stale;
#   2. builds and starts the local platform on a free port, fresh data;
#   3. runs node --test deploy.test.mjs;
# The server is stopped and the temporary directory removed on exit.
# Needs Go and Node.js 20+ with npm. KEEP_WORK=1 keeps the work directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=deploy-e2e
# shellcheck source=../lib/e2e.sh
source "$ROOT/scripts/lib/e2e.sh"
e2e_require_tools
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID

# The projects live under $HERE/.work so that their imports of
# @botpress/sdk resolve to this package's node_modules (no npm install per
# project, no network during the test).
mkdir -p "$HERE/.work"
WORK="$(mktemp -d "$HERE/.work/run.XXXXXX")"
SERVER_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  e2e_stop "$SERVER_PID"
  if [[ "${KEEP_WORK:-}" == 1 || $rc != 0 ]]; then
    log "kept $WORK (server log: $WORK/server.log)"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

e2e_npm_ci "$HERE"

# PLATFORM_PKG=./functions/aws-local: against the AWS build run whole on
# this machine (make deploy-e2e-aws): deployed code in Lambda functions.
PLATFORM_PKG="${PLATFORM_PKG:-./functions/local}"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
export AWS_LOCAL_ROOT="$ROOT"
log "building $PLATFORM_PKG"
(cd "$ROOT" && go build -o "$WORK/local" "$PLATFORM_PKG")
PORT="$(e2e_free_port)"
export API_URL="http://127.0.0.1:$PORT" DATA_DIR="$WORK/data" WORK_DIR="$WORK"
"$WORK/local" --addr "127.0.0.1:$PORT" --data-dir "$DATA_DIR" >>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
node "$ROOT/scripts/conformance/lib/wait-ready.mjs" "$API_URL" "$DATA_DIR" "$SERVER_PID" "$READY_TIMEOUT" || die "the platform did not start"

log "bp deploy end to end against $API_URL"
node --test --test-reporter=spec "$HERE/deploy.test.mjs"
