#!/usr/bin/env bash
# The container stream tier's bench (scripts/streambench/main.go): raises
# the file-descriptor limit (one descriptor per stream on each side) and
# runs it. Arguments go to the bench: run.sh -listeners 10000 -idle 60s
set -euo pipefail
cd "$(dirname "$0")/../.."
want=${STREAMBENCH_NOFILE:-20000}
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then want=$hard; fi
ulimit -n "$want"
exec go run ./scripts/streambench "$@"
