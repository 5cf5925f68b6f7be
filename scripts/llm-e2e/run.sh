#!/usr/bin/env bash
# LLM end to end: the real @botpress/cognitive 0.5.4 and @botpress/zai
# 2.6.21, and a deployed @botpress/sdk 7.2.4 bot (sdk-bot.cjs, bundled with
# esbuild by the test), against a fresh local platform whose LLM provider is a fake
# OpenAI-compatible endpoint on loopback (fake-upstream.mjs); llm.test.mjs
# says what is checked (docs/llm.md).
#   1. npm ci when node_modules is missing or stale;
#   2. starts the fake provider, then the local platform pointed at it
#      (--llm-url), on free ports, fresh data;
#   3. runs node --test llm.test.mjs.
# Both processes are stopped and the work directory removed on exit.
# Needs Go and Node.js 20+ with npm. KEEP_WORK=1 keeps the work directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=llm-e2e
# shellcheck source=../lib/e2e.sh
source "$ROOT/scripts/lib/e2e.sh"
e2e_require_tools
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID PLATFORM_LLM_URL PLATFORM_LLM_API_KEY PLATFORM_LLM_MODELS PLATFORM_LLM_CONFIG

mkdir -p "$HERE/.work"
WORK="$(mktemp -d "$HERE/.work/run.XXXXXX")"
SERVER_PID="" UPSTREAM_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  e2e_stop "$SERVER_PID" "$UPSTREAM_PID"
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

log "building ./functions/local"
(cd "$ROOT" && go build -o "$WORK/local" ./functions/local)

# The fake provider prints its base URL once it listens.
node "$HERE/fake-upstream.mjs" >"$WORK/upstream.url" 2>"$WORK/upstream.log" &
UPSTREAM_PID=$!
for _ in $(seq 100); do
  [[ -s "$WORK/upstream.url" ]] && break
  kill -0 "$UPSTREAM_PID" 2>/dev/null || die "the fake provider did not start: $(cat "$WORK/upstream.log")"
  sleep 0.1
done
export LLM_URL="$(head -1 "$WORK/upstream.url")"
[[ -n "$LLM_URL" ]] || die "the fake provider did not say its address"

PORT="$(e2e_free_port)"
export API_URL="http://127.0.0.1:$PORT" DATA_DIR="$WORK/data"
# LLM tokens per bot and month (docs/llm.md): the quota test reaches it
# with long prompts, the other tests stay far below it.
export LLM_QUOTA=5000
BP_QUOTA_LLM_TOKENS_PER_MONTH="$LLM_QUOTA" \
  "$WORK/local" --addr "127.0.0.1:$PORT" --data-dir "$DATA_DIR" --llm-url "$LLM_URL" --llm-timeout 10s >>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
node "$ROOT/scripts/conformance/lib/wait-ready.mjs" "$API_URL" "$DATA_DIR" "$SERVER_PID" 60 || die "the local platform did not start"

log "@botpress/cognitive and @botpress/zai against $API_URL (provider $LLM_URL)"
node --import "$HERE/esm-resolve.mjs" --test --test-reporter=spec "$HERE/llm.test.mjs"
