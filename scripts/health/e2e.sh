#!/usr/bin/env bash
# The console's health page in headless Chromium, then Firefox, against a
# fresh local platform with a workload (scripts/console/health-e2e.mjs;
# the browser driver is the console's puppeteer-core). Fails (never skips)
# when a browser is missing. Screenshots in SHOTS (default .build/health-e2e).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=health-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
bash "$ROOT/scripts/console/npm-ci.sh"
# The vendored chart library is the pinned package's.
bash "$HERE/vendor.sh" --check
browsers_build
browsers_run "$ROOT/scripts/console/health-e2e.mjs" "${SHOTS:-$ROOT/.build/health-e2e}"
