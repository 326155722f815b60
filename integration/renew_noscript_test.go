package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWatchdogRoundAfterScriptFlush: a server that lost its script cache answers
// the renewal pipeline NOSCRIPT; the watchdog loads the script and sends the
// pipeline again, so the round costs 3 round trips (pipeline, SCRIPT LOAD,
// pipeline) whatever the number of batches, and no hold is lost.
func TestWatchdogRoundAfterScriptFlush(t *testing.T) {
	s := wdStartScale(t, 350, 600*time.Millisecond, false) // 4 batches, a round every 200 ms; the hook counts the client's round trips
	require.NoError(t, s.stats.ScriptFlush(context.Background()).Err())
	s.begin()
	s.awaitRound()
	r := s.end()
	t.Logf("round after SCRIPT FLUSH: %s", r)
	require.LessOrEqual(t, r.RoundTrips, 3.0)
	s.checkHeld()
}
