#!/usr/bin/env bash
# The console's export and import (shared/console/static/transfer.js) in
# headless Chromium, then Firefox: a bot exported from one local platform
# and imported into another, both started by the test
# (scripts/console/transfer-e2e.mjs; the browser driver is the console's
# puppeteer-core). Fails (never skips) when a browser is missing.
# Screenshots in SHOTS (default .build/transfer-console-e2e).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=transfer-console-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
bash "$ROOT/scripts/console/npm-ci.sh"
browsers_build
browsers_run "$ROOT/scripts/console/transfer-e2e.mjs" "${SHOTS:-$ROOT/.build/transfer-console-e2e}"
