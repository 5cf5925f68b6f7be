#!/usr/bin/env bash
# The console's assistant path (docs/console.md "New assistant",
# docs/assistant.md) in headless Chromium, then Firefox:
# scripts/console/assistant-e2e.mjs against a fresh local platform whose
# models are a fake OpenAI-compatible provider on loopback (started by the
# test, recording what it is sent), then against one without a model. The
# assistant's code is the platform's own (shared/assistant, embedded), so
# no SDK bot is started here. Fails (never skips) when a browser is missing.
# Screenshots in SHOTS (default .build/assistant-console-e2e).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=assistant-console-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
bash "$ROOT/scripts/console/npm-ci.sh"
browsers_build
browsers_run "$HERE/assistant-e2e.mjs" "${SHOTS:-$ROOT/.build/assistant-console-e2e}"
