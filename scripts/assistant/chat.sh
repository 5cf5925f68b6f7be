#!/usr/bin/env bash
# The assistant through @botpress/chat (chat.mjs): against the local
# platform, or with AWS_LOCAL=1 against the AWS build (./functions/aws-local:
# make assistant-e2e-aws). `assistant create` is the local binary's either way.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# The same npm install stamp as e2e.sh (one node_modules).
E2E_NAME=assistant-e2e
# shellcheck source=../lib/e2e.sh
source "$ROOT/scripts/lib/e2e.sh"
e2e_require_tools
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID PLATFORM_API_URL PLATFORM_TOKEN PLATFORM_LLM_URL PLATFORM_LLM_API_KEY PLATFORM_LLM_MODELS PLATFORM_LLM_CONFIG
e2e_npm_ci "$HERE"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/assistant-chat.XXXXXX")"
trap '[[ "${KEEP_WORK:-}" == 1 ]] || rm -rf "$WORK"' EXIT
log "building ./functions/local"
(cd "$ROOT" && go build -o "$WORK/local" ./functions/local)
PLATFORM_BIN="$WORK/local"
if [[ "${AWS_LOCAL:-}" == 1 ]]; then
  log "building ./functions/aws-local"
  (cd "$ROOT" && go build -o "$WORK/aws-local" ./functions/aws-local)
  PLATFORM_BIN="$WORK/aws-local"
  export AWS_LOCAL_ROOT="$ROOT" AWS_LOCAL
fi
PLATFORM_BIN="$PLATFORM_BIN" LOCAL_BIN="$WORK/local" WORK="$WORK" node "$HERE/chat.mjs"
