#!/usr/bin/env bash
# make test-servers: the integration module's tests on every server of the matrix, one after
# the other: Debian's redis-server 7.0 and the servers scripts/servers.sh builds (Redis
# 6.2.16, 7.4.1, Valkey 7.2.7, 8.0.1), standalone, Cluster and Sentinel alike (the harness
# starts each topology from the server binary in $REDIS_SERVER).
#
# What runs: every test of integration/ and integration/redistest (the library's own tests, root module, do not talk to
# a server), without -race: `make test` already runs them all with -race on 7.0, and the race
# detector's cost would put the matrix over its 20 minutes of CI. $MATRIX_TESTFLAGS replaces
# the go test flags (default below). Two servers are tested at a time ($MATRIX_JOBS): a run
# spends most of its time waiting (leases, timeouts), about 40 s of CPU in 4-5 minutes.
#
# It prints one line per server with its counts and time, then every test skipped on a server
# and why (a test that needs a newer server says so: redistest's "not for this server"), and
# the failures of each server that had some. Logs: $MATRIX_OUT (default .cache/matrix/NAME.log).
# Exit status 1 when any server had a failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
GO="${GO:-go}"
flags="${MATRIX_TESTFLAGS:--count=1 -timeout 20m}"
out="${MATRIX_OUT:-$root/.cache/matrix}"
mkdir -p "$out"

servers="$(bash scripts/servers.sh)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/testsum" ./scripts/testsum

jobs="${MATRIX_JOBS:-2}"

# testOne runs the tests on server $1 (binary $2) and writes its line to $tmp/$1.line.
testOne() {
  local name=$1 bin=$2 start=$SECONDS status=ok
  # shellcheck disable=SC2086 # flags are words
  if ! REDIS_SERVER="$bin" "$tmp/testsum" -go "$GO" integration integration/redistest -- $flags >"$out/$name.log" 2>&1; then
    status=FAIL
  fi
  printf '%-14s %-4s %s in %ds\n' "$name" "$status" "$(tail -n 1 "$out/$name.log")" $((SECONDS - start)) >"$tmp/$name.line"
  cat "$tmp/$name.line"
}

begin=$SECONDS
names=()
while read -r name bin; do
  names+=("$name")
  echo "=== $name: $("$bin" --version | cut -d' ' -f1-3) ($bin)"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n || true
  done
  testOne "$name" "$bin" &
done <<<"$servers"
wait

failed=0
echo
for name in "${names[@]}"; do
  if grep -q ' FAIL ' "$tmp/$name.line"; then
    failed=1
    echo "=== $name: failures"
    sed -n '/^=== Failed/,/^testsum:/p' "$out/$name.log"
  fi
  grep '^SKIP ' "$out/$name.log" | sed "s/^/  $name: /" >>"$tmp/skips" || true
done
echo "=== The server matrix: $((SECONDS - begin)) s, $jobs at a time (logs in $out)"
for name in "${names[@]}"; do cat "$tmp/$name.line"; done
if [ -s "$tmp/skips" ]; then
  echo "Skipped, with the reason each test gave:"
  cat "$tmp/skips"
else
  echo "No test was skipped on any server."
fi
exit "$failed"
