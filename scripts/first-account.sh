#!/usr/bin/env bash
# First account of a deployed stack: creates the account (or reuses it),
# gives it a new personal access token, checks the token against the API
# and prints what @botpress/client needs. It reads the stack's outputs with
# the AWS CLI and writes to the stack's table directly with your AWS
# credentials (scripts/issue-token): a deployed stack has no other way in.
#
#   scripts/first-account.sh you@example.com [stack-name]
#
# Stack name: the argument, else $STACK_NAME, else bot-platform (the
# default of samconfig.toml and of the CDK app). Region: $AWS_REGION, else
# the AWS CLI's configured region. Needs the AWS CLI, Go and curl.
#
# Output (stdout), ready for eval or a .env file:
#   BP_API_URL=https://....execute-api.<region>.amazonaws.com
#   BP_TOKEN=bp_pat_...
set -euo pipefail

email="${1:-}"
stack="${2:-${STACK_NAME:-bot-platform}}"
if [[ -z "$email" || "$email" == -* ]]; then
  echo "usage: $0 <email> [stack-name]" >&2
  exit 2
fi
for tool in aws go curl; do
  command -v "$tool" >/dev/null || { echo "first-account: $tool is required" >&2; exit 1; }
done
region="${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}"
[[ -n "$region" ]] || { echo "first-account: set AWS_REGION" >&2; exit 1; }
export AWS_REGION="$region"

output() {
  aws cloudformation describe-stacks --stack-name "$stack" \
    --query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text
}
api_url="$(output ApiUrl)"
table="$(output TableName)"
if [[ -z "$api_url" || "$api_url" == None || -z "$table" || "$table" == None ]]; then
  echo "first-account: stack $stack in $region has no ApiUrl/TableName outputs (is it deployed?)" >&2
  exit 1
fi

cd "$(dirname "$0")/.."
# Also a one-time setup link for the console (password or single sign-on),
# printed to stderr (docs/signin.md).
token="$(PLATFORM_TABLE="$table" go run ./scripts/issue-token --email "$email" --note "first account (scripts/first-account.sh)" --setup-link "$api_url")"

# The token works: getAccount answers with the account.
body="$(mktemp)"
trap 'rm -f "$body"' EXIT
status="$(curl -sS -o "$body" -w '%{http_code}' -H "Authorization: Bearer $token" "$api_url/v1/admin/account/me")"
if [[ "$status" != 200 ]]; then
  echo "first-account: getAccount answered $status: $(cat "$body")" >&2
  exit 1
fi
echo "first-account: $email can use the API at $api_url" >&2
echo "BP_API_URL=$api_url"
echo "BP_TOKEN=$token"
