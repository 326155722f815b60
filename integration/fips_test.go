package integration

import (
	"crypto/fips140"
	"crypto/sha1"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// newScript is redis.NewScript for the tests' own scripts (the Java peers'
// and the baselines'), which computes their SHA-1 digest in the process:
// crypto/sha1 panics under GODEBUG=fips140=only (make test-fips), and these
// are package variables, so that would stop the test binary before any test
// runs. There the script takes its digest from the server instead (SCRIPT
// LOAD, redis.NewScriptServerSHA); otherwise nothing changes.
func newScript(src string) *redis.Script {
	if fips140.Enforced() {
		return redis.NewScriptServerSHA(src)
	}
	return redis.NewScript(src)
}

// TestFIPS140OnlyEnforced checks that make test-fips (scripts/test-fips.sh)
// runs the tests it selects as it says: in a process where SHA-1 is refused,
// as it is in every program of a user who sets GODEBUG=fips140=only. In
// other runs it checks the opposite: nothing is enforced, so that the test
// binary's own digests (newScript) are computed as before.
func TestFIPS140OnlyEnforced(t *testing.T) {
	if !strings.Contains(os.Getenv("GODEBUG"), "fips140=only") {
		require.False(t, fips140.Enforced(), "GODEBUG=%s", os.Getenv("GODEBUG"))
		require.NotPanics(t, func() { sha1.Sum([]byte("holdfast")) })
		return
	}
	require.True(t, fips140.Enforced(), "GODEBUG=%s", os.Getenv("GODEBUG"))
	require.PanicsWithValue(t, "crypto/sha1: use of SHA-1 is not allowed in FIPS 140-only mode",
		func() { sha1.Sum([]byte("holdfast")) })
}
