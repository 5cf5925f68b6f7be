#!/usr/bin/env bash
# End-to-end test of the console's inbox (humans in the loop,
# docs/hitl.md) in headless Chromium, then Firefox: inbox-e2e.mjs, against
# a fresh local platform with the conformance suite's SDK bot that makes
# the hitl plugin's calls (scripts/conformance/fixtures/hitl-bot.js) and
# an end user on the Chat API: a waiting session appears live, assign,
# reply with text and an image, close; no console error. Then
# inbox-nostream-e2e.mjs: a platform without hitl (PLATFORM_BUILTINS=chat),
# where the console polls quietly instead of opening a stream.
#
# Fails (never skips) when Chromium or Firefox is missing (as e2e.sh).
# Screenshots go to SHOTS (default .build/inbox-e2e).
#
# AWS_LOCAL=1 runs inbox-e2e.mjs against the AWS build (./functions/aws-local)
# instead: make inbox-e2e-aws.
#
# Usage: scripts/console/inbox-e2e.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=inbox-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
unset BP_TOKEN BP_API_URL BP_WORKSPACE_ID BP_BOT_ID BP_INTEGRATION_ID
browsers_install_deps
browsers_build
if [[ "${AWS_LOCAL:-}" == 1 ]]; then
  # The AWS build (make inbox-e2e-aws): live updates through the
  # streaming function (chatrelay, the fan-out), on the lambda tier.
  echo "==> building ./functions/aws-local" >&2
  (cd "$ROOT" && go build -o "$WORK/aws-local" ./functions/aws-local)
  export PLATFORM_BIN="$WORK/aws-local" AWS_LOCAL_ROOT="$ROOT" AWS_LOCAL
  browsers_run "$HERE/inbox-e2e.mjs" "${SHOTS:-$ROOT/.build/inbox-e2e-aws}"
  exit 0
fi
browsers_run "$HERE/inbox-e2e.mjs" "${SHOTS:-$ROOT/.build/inbox-e2e}"
# A platform without the hitl integration: no stream, a quiet poll.
browsers_run "$HERE/inbox-nostream-e2e.mjs" "${SHOTS:-$ROOT/.build/inbox-e2e}/nostream"
