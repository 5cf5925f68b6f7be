#!/usr/bin/env bash
# The assistant end to end in headless Chromium (make assistant-e2e,
# docs/assistant.md): e2e.mjs against a fresh local platform whose LLM is a
# fake OpenAI-compatible provider on loopback. First checks that the
# committed bundle shared/assistant/bot.cjs is what the build makes
# (build.mjs --check: a stale bundle fails). Fails (never skips) without
# Chromium; CHROME= chooses the binary. Screenshots in .build/assistant-e2e.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=assistant-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
# shellcheck source=../lib/e2e.sh
source "$ROOT/scripts/lib/e2e.sh"
browsers_require_tools
# The hosted webchat in Chromium (the console's flow, in both browsers, is
# the console's test).
BROWSERS="${BROWSERS:-chromium}"
browsers_find
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID PLATFORM_API_URL PLATFORM_TOKEN PLATFORM_LLM_URL PLATFORM_LLM_API_KEY PLATFORM_LLM_MODELS PLATFORM_LLM_CONFIG
bash "$ROOT/scripts/console/npm-ci.sh"
e2e_npm_ci "$HERE"
node "$HERE/build.mjs" --check
browsers_build
browsers_run "$HERE/e2e.mjs" "${SHOTS:-$ROOT/.build/assistant-e2e}"
