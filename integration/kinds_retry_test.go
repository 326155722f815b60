package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// lockKinds are the lock kinds with scripts of their own layout, each made
// from a client and a name.
var lockKinds = []struct {
	name string
	make func(c *rlock.Client, name string) rlock.Locker
}{
	{"FairMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewFairMutex(name) }},
	{"ReadMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewRWMutex(name).ReadLock() }},
	{"WriteMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewRWMutex(name).WriteLock() }},
}

// TestKindsRetriedCallsAreIdempotent: for the fair lock and both sides of the
// read/write lock, as for Mutex (TestRetriedCallsAreIdempotent), go-redis
// resending a script whose reply was lost (a proxy swallows one reply) counts
// each acquisition and release once: first acquire, reentrant acquire, partial
// and final release. Nothing is left in Redis at the end but expiring latches.
func TestKindsRetriedCallsAreIdempotent(t *testing.T) {
	for _, k := range lockKinds {
		t.Run(k.name, func(t *testing.T) {
			proxy, rdb, direct := proxiedClient(t, 3)
			name := redistest.Name(t)
			ctx := testCtx(t, 30*time.Second)
			octx := rlock.WithOwner(ctx)
			m := k.make(newClient(t, rdb), name)

			// Warm the script cache, so that the dropped replies are the scripts' own.
			l, err := m.TryLock(octx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(octx))

			count := func() int {
				n, err := m.HoldCount(octx)
				require.NoError(t, err)
				return n
			}
			proxy.DropReplies(1)
			l1, err := m.TryLock(octx)
			require.NoError(t, err, "a retried first acquire still acquires")
			require.Equal(t, 1, count(), "the first acquire ran twice but counts once")

			proxy.DropReplies(1)
			l2, err := m.TryLock(octx)
			require.NoError(t, err)
			require.Equal(t, 2, count(), "the reentrant acquire ran twice but counts once")

			proxy.DropReplies(1)
			require.NoError(t, l2.Unlock(octx))
			require.Equal(t, 1, count(), "the partial release ran twice but counts once")

			proxy.DropReplies(1)
			require.NoError(t, l1.Unlock(octx), "the final release ran twice: the latch answers the retry")
			require.Zero(t, direct.Exists(ctx, name).Val(), "the lock is gone")
			left, err := direct.Keys(ctx, "*"+name+"*").Result()
			require.NoError(t, err)
			for _, key := range left {
				require.Contains(t, key, "redisson_unlock_latch:", "only latches are left")
			}
		})
	}
}

// TestKindsLostReplyWithoutRetryIsUndone: with retries off, an acquisition of
// the fair lock or of either side of the read/write lock whose reply is lost
// returns an error that is not ErrNotAcquired, and leaves no hold behind (nor a
// fair waiter in the queue).
func TestKindsLostReplyWithoutRetryIsUndone(t *testing.T) {
	for _, k := range lockKinds {
		t.Run(k.name, func(t *testing.T) {
			proxy, rdb, direct := proxiedClient(t, -1)
			name := redistest.Name(t)
			ctx := testCtx(t, 30*time.Second)
			m := k.make(newClient(t, rdb), name)
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))

			proxy.DropReplies(1)
			_, err = m.Lock(ctx)
			require.Error(t, err)
			require.False(t, errors.Is(err, rlock.ErrNotAcquired))
			require.Zero(t, direct.Exists(ctx, name).Val(), "the ghost hold was taken back")
			require.Zero(t, direct.LLen(ctx, "redisson_lock_queue:{"+name+"}").Val(), "no waiter left queued")
		})
	}
}
