#!/usr/bin/env bash
# Runs the tests of the given module directories with scripts/testsum, which prints the output
# of what failed and closes with one line for all of them: "N passed, N failed, N skipped".
# Usage (from the Makefile): scripts/test.sh DIR... -- [go test flags]; $GO is the go command.
# testsum is built into a temporary directory rather than started with `go run`, which would
# add its own "exit status 1" after the closing line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/testsum" ./scripts/testsum
"$tmp/testsum" -go "$GO" "$@"
