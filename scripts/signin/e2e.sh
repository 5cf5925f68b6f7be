#!/usr/bin/env bash
# End-to-end test of people's sign-in (docs/signin.md) in real headless
# Chromium, then Firefox (puppeteer-core, the console's browser driver)
# against a fresh local platform and a real OpenID provider that no one
# here wrote: the zitadel/oidc example provider (scripts/oidcprovider, its
# own Go module), both on loopback. e2e.mjs: the first account's setup
# link linked to single sign-on, sign-in with "Sign in with <provider>",
# landing in the console, sign-out, a replayed callback refused; then a
# password and TOTP sign-in.
#
# Fails (never skips) when Chromium or Firefox is missing (as
# scripts/console/e2e.sh). BROWSERS=chromium runs one browser. Screenshots
# go to SHOTS (default .build/signin-e2e).
#
# AWS_LOCAL=1 runs it against the AWS build (./functions/aws-local)
# instead (make signin-e2e-aws; screenshots in .build/signin-e2e-aws).
#
# Usage: scripts/signin/e2e.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
E2E_NAME=signin-e2e
# shellcheck source=../lib/browsers.sh
source "$ROOT/scripts/lib/browsers.sh"
browsers_require_tools
browsers_find
bash "$ROOT/scripts/console/npm-ci.sh" # puppeteer-core
browsers_build
echo "==> building scripts/oidcprovider (the zitadel/oidc example provider)" >&2
(cd "$ROOT/scripts/oidcprovider" && go build -o "$WORK/oidcprovider" .)
export OIDC_PROVIDER_BIN="$WORK/oidcprovider"
shots="$ROOT/.build/signin-e2e"
if [[ "${AWS_LOCAL:-}" == 1 ]]; then
  # The AWS build (make signin-e2e-aws): the admin function behind the
  # HTTP API's stand-in, the client secret in SSM's.
  echo "==> building ./functions/aws-local" >&2
  (cd "$ROOT" && go build -o "$WORK/aws-local" ./functions/aws-local)
  export PLATFORM_BIN="$WORK/aws-local" AWS_LOCAL_ROOT="$ROOT" AWS_LOCAL
  shots="$ROOT/.build/signin-e2e-aws"
fi
browsers_run "$HERE/e2e.mjs" "${SHOTS:-$shots}"
