#!/usr/bin/env bash
# The console's Backups page in headless Chromium, then Firefox, against a
# fresh local platform (scripts/console/backup-e2e.mjs; the browser driver
# is the console's puppeteer-core). Fails (never skips) when a browser is
# missing. Screenshots in SHOTS (default .build/backup-e2e).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=backup-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
bash "$ROOT/scripts/console/npm-ci.sh"
browsers_build
browsers_run "$ROOT/scripts/console/backup-e2e.mjs" "${SHOTS:-$ROOT/.build/backup-e2e}"
