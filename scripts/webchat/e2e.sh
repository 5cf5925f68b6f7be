#!/usr/bin/env bash
# End-to-end test of the hosted webchat page (the official @botpress/webchat
# component) in a real headless Chromium, then Firefox, driven as the
# console's (scripts/console/e2e.sh: puppeteer-core, the system's
# browsers), against a fresh local platform with a real plain-JS SDK bot
# (scripts/conformance/fixtures/bot.js): e2e.mjs.
#
# Fails (never skips) when Chromium or Firefox is missing. CHROME= and
# FIREFOX= choose other binaries; BROWSERS=chromium runs one browser.
# Screenshots go to SHOTS (default .build/webchat-e2e).
#
# Usage: scripts/webchat/e2e.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
for tool in go node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "webchat-e2e: $tool is required" >&2; exit 1; }
done
if [[ -z "${CHROME:-}" ]]; then
  for c in chromium chromium-browser google-chrome; do
    if command -v "$c" >/dev/null 2>&1; then CHROME="$(command -v "$c")"; break; fi
  done
fi
[[ -n "${CHROME:-}" && -x "$CHROME" ]] || { echo "webchat-e2e: FAILED: no Chromium (install it: apt-get install chromium, or set CHROME)" >&2; exit 1; }
export CHROME
BROWSERS="${BROWSERS:-chromium firefox}"
if [[ " $BROWSERS " == *" firefox "* && -z "${FIREFOX:-}" ]]; then
  for c in firefox-esr firefox; do
    if command -v "$c" >/dev/null 2>&1; then FIREFOX="$(command -v "$c")"; break; fi
  done
  [[ -n "${FIREFOX:-}" ]] || { echo "webchat-e2e: FAILED: no Firefox (install it: apt-get install firefox-esr, set FIREFOX, or BROWSERS=chromium)" >&2; exit 1; }
fi
export FIREFOX

unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
# The browser driver is the console's; the SDK bot's dependencies are the
# conformance suite's.
bash "$ROOT/scripts/console/npm-ci.sh"
CONF="$ROOT/scripts/conformance"
conf_hash="$(cd "$CONF" && node -e '
  const c = require("node:crypto").createHash("sha256")
  for (const f of ["package.json", "package-lock.json"]) c.update(require("node:fs").readFileSync(f))
  console.log(c.digest("hex"))')"
if [[ ! -f "$CONF/node_modules/.conformance-installed" || "$(cat "$CONF/node_modules/.conformance-installed")" != "$conf_hash" ]]; then
  echo "==> scripts/conformance: npm ci (the SDK bot's dependencies)" >&2
  (cd "$CONF" && npm ci --no-audit --no-fund --loglevel=error) >&2
  printf '%s\n' "$conf_hash" >"$CONF/node_modules/.conformance-installed"
fi
# The vendored component is the pinned package's.
bash "$HERE/vendor.sh" --check

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webchat-e2e.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "==> building ./functions/local" >&2
(cd "$ROOT" && go build -o "$WORK/local" ./functions/local)
export PLATFORM_BIN="$WORK/local"
SHOTS="${SHOTS:-$ROOT/.build/webchat-e2e}"
for browser in $BROWSERS; do
  case "$browser" in
    chromium) shots="$SHOTS" ;;
    firefox) shots="$SHOTS/firefox" ;;
    *) echo "webchat-e2e: unknown browser $browser (chromium, firefox)" >&2; exit 1 ;;
  esac
  mkdir -p "$shots" "$WORK/$browser"
  echo "==> webchat-e2e in $browser" >&2
  BROWSER="$browser" SHOTS="$shots" WORK="$WORK/$browser" node "$HERE/e2e.mjs"
done
