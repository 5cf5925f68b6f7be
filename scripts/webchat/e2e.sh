#!/usr/bin/env bash
# End-to-end test of the hosted webchat page (the official @botpress/webchat
# component) in a real headless Chromium, then Firefox, driven as the
# console's (scripts/console/e2e.sh: puppeteer-core, the system's
# browsers), against a fresh local platform with a real plain-JS SDK bot
# (bot.js, on the conformance suite's SDK install): e2e.mjs.
#
# Fails (never skips) when Chromium or Firefox is missing. CHROME= and
# FIREFOX= choose other binaries; BROWSERS=chromium runs one browser.
# Screenshots go to SHOTS (default .build/webchat-e2e).
#
# Usage: scripts/webchat/e2e.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=webchat-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find

unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
browsers_install_deps
# The vendored component is the pinned package's.
bash "$HERE/vendor.sh" --check

browsers_build
browsers_run "$HERE/e2e.mjs" "${SHOTS:-$ROOT/.build/webchat-e2e}"
