package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redLockSetup starts n independent primaries and, for each of two processes'
// worth of clients (A and B), one rlock.Client per primary.
func redLockSetup(t *testing.T, n int) (servers []*redistest.Server, a, b []*rlock.Client) {
	t.Helper()
	short := func(o *redis.Options) { o.MaxRetries = 1; o.DialTimeout = 200 * time.Millisecond }
	for range n {
		s := redistest.Start(t)
		servers = append(servers, s)
		a = append(a, newClient(t, s.Client(t, short)))
		b = append(b, newClient(t, s.Client(t, short)))
	}
	return servers, a, b
}

func redLockOf(clients []*rlock.Client, name string) *rlock.RedLock {
	var ms []*rlock.Mutex
	for _, c := range clients {
		ms = append(ms, c.NewMutex(name))
	}
	return rlock.NewRedLock(ms...)
}

// TestRedLock: over 5 independent primaries, a RedLock excludes another one, a
// waiting one is woken by the release, it still acquires with 2 primaries
// killed, and with 3 killed it fails cleanly and leaves nothing held.
func TestRedLock(t *testing.T) {
	servers, ca, cb := redLockSetup(t, 5)
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	ra, rb := redLockOf(ca, name), redLockOf(cb, name)

	la, err := ra.Lock(ctx)
	require.NoError(t, err)
	require.Len(t, la.Leases(), 5)
	_, err = rb.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	t.Logf("refused: %v", err)

	got := make(chan time.Time, 1)
	go func() {
		lb, err := rb.Lock(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		at := time.Now()
		if err := lb.Unlock(ctx); err != nil {
			t.Error(err)
		}
		got <- at
	}()
	// Let B fail a round and wait on the release channels.
	admin := servers[0].Client(t)
	channel := "redisson_lock__channel:{" + name + "}"
	awaitSubscribersAtLeast(t, admin, channel, 1)
	released := time.Now()
	require.NoError(t, la.Unlock(ctx))
	at, ok := <-got
	require.True(t, ok)
	t.Logf("waiting RedLock acquired %v after the release", at.Sub(released).Round(time.Millisecond))
	require.Less(t, at.Sub(released), 2*time.Second)

	// Fixed lease: the validity is reported.
	lf, err := ra.TryLock(ctx, rlock.WithLeaseTime(5*time.Second))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(5*time.Second), lf.ValidUntil(), 200*time.Millisecond)
	require.NoError(t, lf.Unlock(ctx))

	// 2 of 5 primaries down: a majority is still there.
	servers[0].Kill()
	servers[1].Kill()
	l3, err := ra.TryLock(ctx)
	require.NoError(t, err)
	require.Len(t, l3.Leases(), 3)
	_, err = rb.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.NoError(t, l3.Unlock(ctx))

	// 3 of 5 down: no majority; what was taken on the 2 alive ones is given back.
	servers[2].Kill()
	start := time.Now()
	_, err = ra.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	t.Logf("with 3 of 5 primaries down, TryLock failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	for _, s := range servers[3:] {
		n, err := s.Client(t).Exists(context.Background(), name).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the partial acquisition on %s was given back", s.Addr)
	}
}
