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
# AWS_LOCAL=1 runs it against the AWS build (./functions/aws-local) instead,
# on the stream tier AWS_LOCAL_STREAM_TIER (lambda, container); with
# AWS_LOCAL_STREAM_LB=nlb the container tier behind the NLB's stand-in, the
# page over https with aws-local's test certificate, which the browsers
# trust for the run (Firefox through its profile's trust store: certutil,
# Debian's libnss3-tools).
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
if [[ "${AWS_LOCAL_STREAM_LB:-}" == nlb && " $BROWSERS " == *" firefox "* ]] && ! command -v certutil >/dev/null 2>&1; then
  echo "$E2E_NAME: FAILED: no certutil to trust the test CA in Firefox's profile (install it: apt-get install libnss3-tools)" >&2
  exit 1
fi

unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
browsers_install_deps
# The vendored component is the pinned package's.
bash "$HERE/vendor.sh" --check

browsers_build
shots="$ROOT/.build/webchat-e2e"
if [[ "${AWS_LOCAL:-}" == 1 ]]; then
  # The AWS build (make webchat-e2e-aws, webchat-e2e-aws-container): the
  # page where the stack's streams are, the tier AWS_LOCAL_STREAM_TIER's.
  echo "==> building ./functions/aws-local (stream tier ${AWS_LOCAL_STREAM_TIER:-lambda})" >&2
  (cd "$ROOT" && go build -o "$WORK/aws-local" ./functions/aws-local)
  export PLATFORM_BIN="$WORK/aws-local" AWS_LOCAL_ROOT="$ROOT" AWS_LOCAL
  shots="$ROOT/.build/webchat-e2e-aws-${AWS_LOCAL_STREAM_TIER:-lambda}"
  if [[ "${AWS_LOCAL_STREAM_LB:-}" == nlb ]]; then shots="$shots-nlb"; fi
fi
browsers_run "$HERE/e2e.mjs" "${SHOTS:-$shots}"
