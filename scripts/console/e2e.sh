#!/usr/bin/env bash
# End-to-end test of the web console in a real headless Chromium, then
# Firefox (puppeteer-core 24, driving the system's browsers) against a fresh local
# platform with a real plain-JS @botpress/sdk bot (the conformance suite's
# fixture, scripts/conformance/fixtures/bot.js): e2e.mjs.
#
# Fails (never skips) when Chromium or Firefox is missing: `.ci/run`
# installs them (apt-get install chromium firefox-esr). CHROME= and
# FIREFOX= choose other binaries; BROWSERS=chromium runs one browser.
# Screenshots go to SHOTS (default .build/console-e2e, printed).
#
# Usage: scripts/console/e2e.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=console-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find

unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
browsers_install_deps
# The vendored libraries are the pinned packages' files.
bash "$HERE/vendor.sh" --check

browsers_build
browsers_run "$HERE/e2e.mjs" "${SHOTS:-$ROOT/.build/console-e2e}"
