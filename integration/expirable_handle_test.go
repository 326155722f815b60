package integration

// A Permits handle follows what its own client does to its permits by id: a
// release by ExpirableSemaphore.Release ends it at once, as released, and an
// UpdateLease moves its deadline, so that the handle never says valid past the
// expiry Redis holds nor ends while Redis still holds the permit for it.

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// TestExpirableReleaseByIDEndsHandle: the permits of a handle released by id
// through the same client end the handle at once with ErrReleased (before,
// the handle said nil until its next renewal, then "permit lost"); released
// through another client, the handle learns it at its next renewal, as lost.
func TestExpirableReleaseByIDEndsHandle(t *testing.T) {
	admin, s, name := expNew(t, 2, rlock.WithWatchdogTimeout(3*time.Second))
	ctx := testCtx(t, 30*time.Second)
	p, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	released := time.Now()
	require.NoError(t, s.Release(ctx, p.IDs()...))
	expEnds(t, p, released, 2*time.Second, rlock.ErrReleased, "released by id in the same client")
	require.NotErrorIs(t, p.Err(), rlock.ErrPermitLost)
	require.Contains(t, p.Err().Error(), "released by id")
	require.ErrorIs(t, p.Release(ctx), rlock.ErrNoSuchPermit, "the handle's own Release finds nothing to give back")

	other := newClient(t, admin).NewExpirableSemaphore(name)
	q, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	released = time.Now()
	require.NoError(t, other.Release(ctx, q.IDs()...))
	expEnds(t, q, released, 5*time.Second, rlock.ErrPermitLost, "released by id in another client")
}

// TestExpirableUpdateLeaseMovesHandle: UpdateLease in the handle's client
// shortens a fixed lease's handle with its permit (before, the handle said
// valid for its first lease, 10 s, while Redis let the permit expire after
// 300 ms) and lengthens it (before, the handle ended after 300 ms while Redis
// held the permit for 10 s); a renewed handle comes forward with a shorter
// lease and is not pushed past the watchdog's by a longer one.
func TestExpirableUpdateLeaseMovesHandle(t *testing.T) {
	admin, s, name := expNew(t, 3)
	ctx := testCtx(t, 30*time.Second)

	long, err := s.TryAcquire(ctx, 1, rlock.WithLeaseTime(10*time.Second))
	require.NoError(t, err)
	updated := time.Now()
	ok, err := s.UpdateLease(ctx, long.IDs()[0], 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	expEnds(t, long, updated, 3*time.Second, rlock.ErrPermitLost, "a 10 s lease cut to 300 ms")

	short, err := s.TryAcquire(ctx, 1, rlock.WithLeaseTime(300*time.Millisecond))
	require.NoError(t, err)
	ok, err = s.UpdateLease(ctx, short.IDs()[0], 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-short.Done():
		t.Fatalf("a 300 ms lease extended to 10 s ended at the first deadline: %v", short.Err())
	case <-time.After(time.Second): // an observation window past the first lease
	}
	score, held := syncScore(t, admin, name, short.IDs()[0])
	require.True(t, held)
	require.Greater(t, score, time.Now().UnixMilli(), "Redis holds the permit: the handle says so too")
	require.NoError(t, short.Err())
	require.NoError(t, short.Release(ctx))

	renewed, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	updated = time.Now()
	ok, err = s.UpdateLease(ctx, renewed.IDs()[0], 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-renewed.Done():
		// The 200 ms lease ran out before a renewal: lost, as in Redis.
		require.True(t, errors.Is(renewed.Err(), rlock.ErrPermitLost), "%v", renewed.Err())
		require.Less(t, time.Since(updated), 3*time.Second)
	case <-time.After(3 * time.Second): // or a renewal gave it the watchdog's lease back
		require.NoError(t, renewed.Err())
		score, held := syncScore(t, admin, name, renewed.IDs()[0])
		require.True(t, held)
		require.Greater(t, score, time.Now().UnixMilli())
		require.NoError(t, renewed.Release(ctx))
	}
}
