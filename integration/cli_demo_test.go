package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/stretchr/testify/require"
)

// demoLimit is how long "holdfast demo" may take.
const demoLimit = 30 * time.Second

// runDemoCLI runs "holdfast demo args..." without $REDIS_URL in its
// environment, and fails the test unless it exits 0 within demoLimit. It
// returns its output.
func runDemoCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, holdfastBin(t), append([]string{"demo"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	t.Logf("holdfast demo %q took %v", args, time.Since(start))
	require.NoError(t, err, "stderr: %s\nstdout: %s", errOut.String(), out.String())
	require.Empty(t, errOut.String())
	require.Contains(t, out.String(), "Summary")
	return out.String()
}

// TestCLIDemo runs "holdfast demo" on its embedded server and on a real one,
// where it must leave no key behind.
func TestCLIDemo(t *testing.T) {
	srv := redistest.Shared(t)
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		out := runDemoCLI(t)
		require.Contains(t, out, "embedded Redis (miniredis")
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		out := runDemoCLI(t, "--redis", "redis://"+srv.Addr)
		require.Contains(t, out, "on Redis at redis://"+srv.Addr)
		require.Contains(t, out, "Cleaned up:")
		rdb := srv.Client(t)
		keys, err := rdb.Keys(context.Background(), "*holdfast-demo:*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "keys the demo left on the server")
	})
}
