#!/usr/bin/env bash
# Shared steps of the Node end-to-end scripts (scripts/llm-e2e, deploy-e2e,
# cli-e2e run.sh): log lines, the tools they need, npm ci only when the lock
# file changed, a free loopback port. Sourced, not run; the caller sets
# `set -euo pipefail` and E2E_NAME (the name in error messages).

log() { printf '==> %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$E2E_NAME" "$*" >&2; exit 1; }

# e2e_require_tools checks go, node and npm are on PATH.
e2e_require_tools() {
  local tool
  for tool in go node npm; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
  done
}

# e2e_npm_ci DIR runs npm ci in DIR when node_modules is missing or was
# installed from another package.json / package-lock.json (a stamp file
# named after E2E_NAME keeps the hash of the two).
e2e_npm_ci() {
  local dir="$1" lock_hash stamp
  lock_hash="$(cd "$dir" && node -e '
    const c = require("node:crypto").createHash("sha256")
    for (const f of ["package.json", "package-lock.json"]) c.update(require("node:fs").readFileSync(f))
    console.log(c.digest("hex"))')"
  stamp="$dir/node_modules/.$E2E_NAME-installed"
  if [[ ! -d "$dir/node_modules" || ! -f "$stamp" || "$(cat "$stamp")" != "$lock_hash" ]]; then
    log "installing npm dependencies (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
    printf '%s\n' "$lock_hash" >"$stamp"
  fi
}

# e2e_free_port prints a loopback port nobody listens on (never a fixed one).
e2e_free_port() {
  node -e '
    const s = require("node:net").createServer()
    s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'
}

# e2e_stop PID... interrupts each PID still running (a graceful stop, as
# Ctrl-C) and waits for it; empty PIDs are skipped.
e2e_stop() {
  local pid
  for pid in "$@"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill -INT "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
}
