#!/usr/bin/env bash
# make test-fips: holdfast under GODEBUG=fips140=only, where Go's crypto packages refuse what
# FIPS 140-3 does not approve (crypto/sha1 panics). Runs `holdfast version`, `holdfast demo` (on
# its embedded server) and a selection of the integration tests (locks, semaphores, latches,
# election, the watchdog, the NOSCRIPT fallback, the CLI and its demo on a real server), each
# program started with GODEBUG=fips140=only through -exec, so that the go command itself runs as
# usual; the processes the tests start (the CLI, workers) inherit it. TestFIPS140OnlyEnforced
# checks that SHA-1 is refused in the test binary. About 40 s on 2 cores (95 s from an empty build
# cache).
# Usage (from the Makefile): scripts/test-fips.sh; $GO is the go command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
FIPS="env GODEBUG=fips140=only"

tests=(
  TestFIPS140OnlyEnforced
  # locks: every kind, reentrancy, expiry, force unlock, waits, the watchdog, client tracking
  TestEveryKindIsALocker TestTwoOwnersExcludeEachOther TestReentrancyDepth3AnyUnlockOrder
  TestLeaseExpiryFreesTheLock TestForceUnlock
  TestFairMutexTryLockAndReentrancy TestRWReadersShareWriterWaitsForLast TestRWInspectAndForceUnlock
  TestWaitMutualExclusionOneProcess TestWaitMutualExclusionAcrossProcesses
  TestWatchdogHoldOutlivesThreeTimeouts TestRenewKindsMixedBatch TestCheckKinds
  TestTrackingEndsHoldsAtOnce
  # EVALSHA's NOSCRIPT fallback: EVAL, SCRIPT LOAD
  TestScriptFlushUnderUse TestWatchdogRoundAfterScriptFlush
  # Redisson peers (their scripts)
  TestInteropJavaHolderExcludesGo TestFairMutexInterop TestInteropSemaphoreCountsAgree
  # semaphores, expirable semaphores, latches
  TestSemaphoreReleaseWakesAsMany TestSemaphoreWaitTime TestSyncAtMostNHolders
  TestSyncCountsAcrossProcesses TestExpirableReclaim TestExpirableReleaseByIDEndsHandle
  TestLatchAwaitersReleasedTogether
  # election
  TestElectionRoundTrip TestElectionLossAtOnce TestElectionDeadLeaderReplaced
  TestElectionJavaParticipant
  # the command
  TestCLIDemo TestCLIElect TestCLILockBusy TestCLILockPermitsAtMostN TestCLIStatusMutex
  TestCLIUnlockForce
)
pattern="^($(IFS='|'; echo "${tests[*]}"))\$"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

echo "test-fips: GODEBUG=fips140=only holdfast version"
$GO run -exec "$FIPS" ./cmd/holdfast version

echo "test-fips: GODEBUG=fips140=only holdfast demo (embedded server)"
if ! $GO run -exec "$FIPS" ./cmd/holdfast demo >"$tmp/demo" 2>&1; then
  cat "$tmp/demo"
  echo "test-fips: holdfast demo failed" >&2
  exit 1
fi
sed -n '/^Summary/,$p' "$tmp/demo"

echo "test-fips: GODEBUG=fips140=only integration tests (${#tests[@]})"
if ! (cd integration && $GO test -count=1 -timeout 5m -v -exec "$FIPS" -run "$pattern" .) >"$tmp/tests" 2>&1; then
  cat "$tmp/tests"
  echo "test-fips: integration tests failed" >&2
  exit 1
fi
grep -E '^(--- |ok )' "$tmp/tests"
ran=$(grep -c '^--- PASS' "$tmp/tests" || true)
if [ "$ran" -ne "${#tests[@]}" ]; then
  echo "test-fips: ${#tests[@]} tests selected, $ran passed: a test was renamed or skipped" >&2
  exit 1
fi
echo "test-fips: ok in $((SECONDS - start)) s"
