package integration

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestWatchdogDeclaresLossWhenRedisDoesNotAnswer freezes the server: renewals
// time out, and the hold is declared lost once its local deadline (last confirmed
// renewal + timeout) has passed, without hearing anything from Redis.
func TestWatchdogDeclaresLossWhenRedisDoesNotAnswer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond; o.MaxRetries = 1 })
	c := newClient(t, rdb, rlock.WithWatchdogTimeout(time.Second))
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(redistest.Name(t)).Lock(ctx)
	require.NoError(t, err)

	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	select {
	case <-l.Done():
		took := time.Since(frozen)
		t.Logf("loss declared %v after the server stopped answering (timeout 1s, interval 333ms)", took.Round(time.Millisecond))
		require.Less(t, took, 3*time.Second)
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.True(t, errors.Is(l.Err(), watchdog.ErrNotRenewed), "%v", l.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not declared lost while Redis did not answer")
	}
	require.NoError(t, srv.Signal(syscall.SIGCONT))
}
