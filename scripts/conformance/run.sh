#!/usr/bin/env bash
# Conformance suite of the local platform, end to end:
#   1. installs the suite's npm dependencies (npm ci) when missing or stale;
#   2. builds the local platform (go build ./functions/local);
#   3. starts it on a free port with a fresh data directory, waits until it
#      answers;
#   4. runs the tests (node --test tests/*.test.mjs) with the official
#      @botpress/client, every response validated against the reference;
#   5. checks persistence: data survives a graceful restart (SIGINT) and a
#      kill -9 right after a write was acknowledged;
#   6. prints "conformance: N passed, M failed" and the persistence result.
# The server is always stopped and the temporary directory removed on exit.
# Exits non-zero on any failure. Works from any directory.
#
# Usage: run.sh [TEST_FILE...]   (default: every tests/*.test.mjs)
#
# Needs Go and Node.js 20+ with npm. Environment:
#   KEEP_WORK=1       keep the temporary directory (data, server log)
#   READY_TIMEOUT=60  seconds to wait for the server to answer
#   SKIP_PERSISTENCE=1  leave out step 5 (make conformance-aws-container:
#                     persistence does not depend on the stream tier)
#   PLATFORM_PKG=./functions/local  the platform to build and run: also
#                     ./functions/aws-local, the AWS build run whole on this
#                     machine (make conformance-aws, docs/deploy.md)
#   AWS_LOCAL_STREAM_TIER=lambda  with aws-local: the stack's stream tier,
#                     lambda or container (make conformance-aws-container);
#                     the run fails unless the ChatStreamUrl the tests use is
#                     that tier's (the stream function's URL, or the load
#                     balancer's stand-in)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
READY_TIMEOUT="${READY_TIMEOUT:-60}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'conformance: %s\n' "$*" >&2; exit 1; }

export PLATFORM_PKG="${PLATFORM_PKG:-./functions/local}"
[[ -f "$ROOT/go.mod" && -d "$ROOT/$PLATFORM_PKG" ]] || die "cannot find the repository root from $HERE"
for tool in go node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "Node.js 20 or later is required (found $(node --version))"

# The official client reads these when a prop is missing; keep them out.
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID

WORK="$(mktemp -d "${TMPDIR:-/tmp}/conformance.XXXXXX")"
DATA="$WORK/data"
BIN="$WORK/local"
SERVER_LOG="$WORK/server.log"
TAP="$WORK/tests.tap"
STATE="$WORK/persistence.json"
SERVER_PID=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${KEEP_WORK:-}" == 1 ]]; then
    log "kept $WORK (server log: $SERVER_LOG)"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# show_server_log prints the end of the server log, without the AWS SDK's
# per-response warnings that would crowd out the errors.
show_server_log() {
  if [[ -s "$SERVER_LOG" ]]; then
    printf -- '--- last lines of the server log (%s; AWS SDK warnings left out) ---\n' "$SERVER_LOG" >&2
    { grep -v '^SDK [0-9/]* [0-9:]* WARN ' "$SERVER_LOG" || true; } | tail -n 40 >&2
    printf -- '---\n' >&2
  fi
}

# 1. npm dependencies: npm ci when node_modules is missing or was installed
#    from another package.json / package-lock.json.
lock_hash="$(cd "$HERE" && node -e '
  const c = require("node:crypto").createHash("sha256")
  for (const f of ["package.json", "package-lock.json"]) c.update(require("node:fs").readFileSync(f))
  console.log(c.digest("hex"))')"
stamp="$HERE/node_modules/.conformance-installed"
if [[ ! -d "$HERE/node_modules" || ! -f "$stamp" || "$(cat "$stamp")" != "$lock_hash" ]]; then
  log "installing npm dependencies (npm ci)"
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) >&2
  printf '%s\n' "$lock_hash" >"$stamp"
fi

# 2. Build the platform.
log "building $PLATFORM_PKG"
(cd "$ROOT" && go build -o "$BIN" "$PLATFORM_PKG")
# aws-local builds the Lambda functions from the repository; the AWS build
# sends no invitation mail: the operator's scripts/issue-token gives invited
# accounts their tokens (lib/env.mjs).
export AWS_LOCAL_ROOT="$ROOT"
if [[ "$PLATFORM_PKG" == *aws-local* ]]; then
  (cd "$ROOT" && go build -o "$WORK/issue-token" ./scripts/issue-token)
  export ISSUE_TOKEN_BIN="$WORK/issue-token"
fi

# 3. Start it on a free port.
PORT="$(node -e '
  const s = require("node:net").createServer()
  s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
export API_URL="http://127.0.0.1:$PORT"
export DATA_DIR="$DATA"

# The suite watches recurring events fire within seconds: let the local
# scheduler fire every second (the platform refuses that otherwise).
start_server() {
  PLATFORM_LOCAL_SUBMINUTE_SCHEDULES=1 "$BIN" --addr "127.0.0.1:$PORT" --data-dir "$DATA" >>"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  if ! node "$HERE/lib/wait-ready.mjs" "$API_URL" "$DATA" "$SERVER_PID" "$READY_TIMEOUT"; then
    show_server_log
    return 1
  fi
}

# stop_server_gracefully sends SIGINT and waits for a clean exit (status 0).
stop_server_gracefully() {
  local pid="$SERVER_PID" rc=0 i
  kill -INT "$pid"
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    printf 'the server did not exit within 30s of SIGINT\n' >&2
    return 1
  fi
  wait "$pid" || rc=$?
  SERVER_PID=""
  if ((rc != 0)); then
    printf 'the server exited with status %d after SIGINT\n' "$rc" >&2
    show_server_log
    return 1
  fi
}

# check_stream_tier fails unless outputs.json's ChatStreamUrl, where the
# tests' streams go, is the asked tier's: the stream function's URL
# (lambda) or the load balancer's stand-in (container), as aws-local logged
# them; on the container tier no stream function URL may be served at all.
check_stream_tier() {
  local tier="${AWS_LOCAL_STREAM_TIER:-lambda}" url want fnurl
  url="$(node -p 'JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8")).ChatStreamUrl ?? ""' "$DATA/aws-local/outputs.json")"
  fnurl="$(sed -n 's/.*aws-local: function URL.* function=ChatStreamFunction url=\([^ ]*\).*/\1/p' "$SERVER_LOG" | tail -n 1)"
  case "$tier" in
    lambda) want="$fnurl" ;;
    container)
      want="$(sed -n 's/.*aws-local: the container stream tier.* loadBalancer=\([^ ]*\).*/\1/p' "$SERVER_LOG" | tail -n 1)"
      # The stream function does not exist on this tier (its condition,
      # StreamOnLambda): no URL bypasses the load balancer.
      [[ -z "$fnurl" ]] || { printf 'stream tier container: the stream function URL %s is served too\n' "$fnurl" >&2; return 1; }
      ;;
    *) printf 'AWS_LOCAL_STREAM_TIER=%s: lambda or container\n' "$tier" >&2; return 1 ;;
  esac
  if [[ -z "$want" || "$url" != "$want" ]]; then
    printf 'stream tier %s: ChatStreamUrl is %q, want the %s tier'"'"'s %q\n' "$tier" "$url" "$tier" "$want" >&2
    return 1
  fi
  log "stream tier $tier: ChatStreamUrl $url"
}

log "starting the local platform at $API_URL (data: $DATA)"
start_server || die "the local platform did not start"
if [[ "$PLATFORM_PKG" == *aws-local* ]]; then
  check_stream_tier || { show_server_log; die "the streams would not go through the asked stream tier"; }
fi

# 4. The tests.
test_files=()
if (($# > 0)); then
  for f in "$@"; do
    if [[ -f "$f" ]]; then test_files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
    elif [[ -f "$HERE/$f" ]]; then test_files+=("$HERE/$f")
    else die "no test file $f"; fi
  done
else
  test_files=("$HERE"/tests/*.test.mjs)
fi
log "running ${#test_files[@]} test file(s)"
# The container tier behind aws-local's NLB stand-in: its tasks end TLS
# with a test certificate (make conformance-aws-nlb).
if [[ -f "$DATA/aws-local/stream-ca.pem" ]]; then export NODE_EXTRA_CA_CERTS="$DATA/aws-local/stream-ca.pem"; fi
tests_rc=0
(cd "$HERE" && node --test --test-timeout=120000 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$TAP" \
  "${test_files[@]}") || tests_rc=$?
passed="$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$TAP" | tail -n 1)"
failed="$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$TAP" | tail -n 1)"
cancelled="$(sed -n 's/^# cancelled \([0-9][0-9]*\)$/\1/p' "$TAP" | tail -n 1)"
passed="${passed:-0}" failed="${failed:-0}" cancelled="${cancelled:-0}"
failed=$((failed + cancelled))
if ((tests_rc != 0 && failed == 0)); then
  failed=1 # the runner failed without reporting a failed test (e.g. a file did not load)
fi
if ((failed > 0)); then show_server_log; fi

# 5. Persistence: a graceful restart, then a kill -9 right after a write.
#    It starts from a freshly restarted server (same data), so that what the
#    tests left in memory cannot decide it; that restart replays everything
#    the tests wrote.
persistence() {
  log "persistence: restart after the tests (SIGINT)"
  stop_server_gracefully || return 1
  start_server || return 1

  log "persistence: create a workspace and a bot"
  node "$HERE/persistence.mjs" create "$STATE" || return 1

  log "persistence: graceful restart (SIGINT)"
  stop_server_gracefully || return 1
  start_server || return 1
  node "$HERE/persistence.mjs" verify "$STATE" || return 1

  log "persistence: create a bot, kill -9 the server as soon as it is acknowledged"
  local pid="$SERVER_PID" rc=0 created=0
  # bash reports the killed job on its own stderr ("Killed ..."): that death
  # is the point here, so keep the shell quiet until the job is reaped.
  exec 3>&2 2>/dev/null
  KILL_PID="$pid" node "$HERE/persistence.mjs" create "$STATE" 2>&3 || created=$?
  if ((created != 0)); then
    exec 2>&3 3>&-
    return 1
  fi
  wait "$pid" || rc=$?
  exec 2>&3 3>&-
  SERVER_PID=""
  if ((rc != 128 + 9)); then
    printf 'expected the server to die of SIGKILL (status 137), got status %d\n' "$rc" >&2
    return 1
  fi
  start_server || return 1
  node "$HERE/persistence.mjs" verify "$STATE" || return 1

  log "persistence: final graceful stop"
  stop_server_gracefully || return 1
}
persistence_result=passed
if [[ "${SKIP_PERSISTENCE:-}" == 1 ]]; then
  persistence_result=skipped
else
  persistence || persistence_result=FAILED
fi

# 6. Summary.
echo
echo "conformance: $passed passed, $failed failed"
echo "persistence: $persistence_result (graceful restart; kill -9 after an acknowledged write)"
if ((failed > 0 || tests_rc != 0)) || [[ "$persistence_result" == FAILED ]]; then
  exit 1
fi
