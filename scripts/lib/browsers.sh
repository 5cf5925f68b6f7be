#!/usr/bin/env bash
# Shared steps of the browser end-to-end scripts (scripts/console/e2e.sh,
# scripts/webchat/e2e.sh): find the system's Chromium and Firefox, install
# the browser driver and the SDK bot's dependencies, build the local
# platform, and run an e2e.mjs once per browser against a fresh platform.
# Sourced, not run; the caller sets `set -euo pipefail`, ROOT and E2E_NAME
# (the name in messages, e.g. console-e2e).

# browsers_require_tools checks go, node and npm are on PATH.
browsers_require_tools() {
  local tool
  for tool in go node npm; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$E2E_NAME: $tool is required" >&2; exit 1; }
  done
}

# browsers_find exports CHROME, BROWSERS and FIREFOX. It fails (never skips)
# when Chromium, or Firefox while BROWSERS names it, is missing.
browsers_find() {
  local c
  if [[ -z "${CHROME:-}" ]]; then
    for c in chromium chromium-browser google-chrome; do
      if command -v "$c" >/dev/null 2>&1; then CHROME="$(command -v "$c")"; break; fi
    done
  fi
  [[ -n "${CHROME:-}" && -x "$CHROME" ]] || { echo "$E2E_NAME: FAILED: no Chromium (install it: apt-get install chromium, or set CHROME)" >&2; exit 1; }
  export CHROME
  # The same run in Firefox (WebDriver BiDi), unless BROWSERS says otherwise.
  BROWSERS="${BROWSERS:-chromium firefox}"
  if [[ " $BROWSERS " == *" firefox "* && -z "${FIREFOX:-}" ]]; then
    for c in firefox-esr firefox; do
      if command -v "$c" >/dev/null 2>&1; then FIREFOX="$(command -v "$c")"; break; fi
    done
    [[ -n "${FIREFOX:-}" ]] || { echo "$E2E_NAME: FAILED: no Firefox (install it: apt-get install firefox-esr, set FIREFOX, or BROWSERS=chromium)" >&2; exit 1; }
  fi
  export FIREFOX BROWSERS
}

# browsers_install_deps installs the browser driver (the console's
# puppeteer-core) and the SDK bot's dependencies (the conformance suite's),
# each only when its lock file changed.
browsers_install_deps() {
  bash "$ROOT/scripts/console/npm-ci.sh"
  local conf="$ROOT/scripts/conformance" conf_hash
  conf_hash="$(cd "$conf" && node -e '
    const c = require("node:crypto").createHash("sha256")
    for (const f of ["package.json", "package-lock.json"]) c.update(require("node:fs").readFileSync(f))
    console.log(c.digest("hex"))')"
  if [[ ! -f "$conf/node_modules/.conformance-installed" || "$(cat "$conf/node_modules/.conformance-installed")" != "$conf_hash" ]]; then
    echo "==> scripts/conformance: npm ci (the SDK bot's dependencies)" >&2
    (cd "$conf" && npm ci --no-audit --no-fund --loglevel=error) >&2
    printf '%s\n' "$conf_hash" >"$conf/node_modules/.conformance-installed"
  fi
}

# browsers_build makes WORK (removed on exit) and builds ./functions/local
# into it as PLATFORM_BIN.
browsers_build() {
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/$E2E_NAME.XXXXXX")"
  trap 'browsers_cleanup $?' EXIT
  echo "==> building ./functions/local" >&2
  (cd "$ROOT" && go build -o "$WORK/local" ./functions/local)
  export PLATFORM_BIN="$WORK/local" WORK
}

# browsers_cleanup removes WORK; after a failure it first keeps the run's
# logs (the platform's, the bot's, per browser) in .build/<name>-logs, so
# that a failure seen once in CI can be read afterwards.
browsers_cleanup() {
  if [[ "$1" != 0 && -d "$WORK" ]]; then
    local keep="$ROOT/.build/$E2E_NAME-logs"
    rm -rf "$keep" && mkdir -p "$keep"
    (cd "$WORK" && find . -name '*.log' -exec cp --parents {} "$keep" \;) || true
    echo "==> $E2E_NAME failed: its logs are in $keep" >&2
  fi
  rm -rf "$WORK"
}

# browsers_run MJS SHOTS runs MJS once per browser in BROWSERS, each with a
# fresh platform (its own data directory under WORK); Chromium's screenshots
# go to SHOTS, Firefox's to SHOTS/firefox.
browsers_run() {
  local mjs="$1" shots_root="$2" browser shots
  for browser in $BROWSERS; do
    case "$browser" in
      chromium) shots="$shots_root" ;;
      firefox) shots="$shots_root/firefox" ;;
      *) echo "$E2E_NAME: unknown browser $browser (chromium, firefox)" >&2; exit 1 ;;
    esac
    mkdir -p "$shots" "$WORK/$browser"
    echo "==> $E2E_NAME in $browser" >&2
    BROWSER="$browser" SHOTS="$shots" WORK="$WORK/$browser" node "$mjs"
  done
}
