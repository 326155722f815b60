package integration

// Second executions of an acquisition: go-redis resending a script whose
// reply was lost, or the client attempting again after a late reply whose undo
// did not reach Redis. A lock's is answered as acquired, and the handle counts
// its deadline from that execution's send time, so the execution must set the
// lease again: otherwise Redis keeps the first execution's expiry, earlier than
// the handle's deadline. An expirable semaphore's finds its ids: granted again
// only while live, taken afresh once expired, and never counted twice.

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestAcquireReplaySetsTheLeaseAgain: for every lock layout, the first
// execution takes the lock with a 10 s lease; its hold is then made to look
// old (PEXPIRE 1 s on the key and, for a read hold, on its timeout key); the
// same call executed again answers acquired and gives the hold its full lease
// back.
func TestAcquireReplaySetsTheLeaseAgain(t *testing.T) {
	const lease = 10 * time.Second
	for _, tc := range []struct {
		kind   string
		layout lua.Layout
		fenced bool
	}{
		{"Mutex", lua.LayoutLock, false},
		{"FencedMutex", lua.LayoutLock, true},
		{"FairMutex", lua.LayoutFair, false},
		{"ReadMutex", lua.LayoutRead, false},
		{"WriteMutex", lua.LayoutWrite, false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			rdb := redistest.Shared(t).Client(t)
			ctx := testCtx(t, 10*time.Second)
			name := redistest.Name(t)
			a := lua.AcquireArgs{
				Lock:   lua.NewLayoutLock(name, tc.layout),
				Field:  lua.NewText("c0ffee:1"),
				Lease:  lua.NewMillis(lease),
				Fenced: tc.fenced,
			}
			keys := []string{name}
			if tc.layout == lua.LayoutRead {
				keys = append(keys, "{"+name+"}:c0ffee:1:rwlock_timeout:1")
			}
			t.Cleanup(func() {
				rdb.Del(ctx, append(keys, lua.TokenName(name), lua.QueueName(name), lua.TimeoutsName(name))...)
			})

			r, err := lua.Acquire(ctx, rdb, a)
			require.NoError(t, err)
			require.True(t, r.Acquired, "the first execution acquires")
			for _, k := range keys {
				require.Greater(t, rdb.PTTL(ctx, k).Val(), lease-time.Second, "%s has the lease", k)
				require.True(t, rdb.PExpire(ctx, k, time.Second).Val(), "%s made to look old", k)
			}

			r, err = lua.Acquire(ctx, rdb, a)
			require.NoError(t, err)
			require.True(t, r.Acquired, "the second execution answers acquired")
			require.Equal(t, map[string]string{"c0ffee:1": "1"}, withoutMode(holders(t, rdb, name)), "and counts once")
			for _, k := range keys {
				require.Greater(t, rdb.PTTL(ctx, k).Val(), lease-time.Second,
					"%s: the second execution set the lease again", k)
			}
		})
	}
}

// withoutMode drops a read/write lock's "mode" field from a lock's fields.
func withoutMode(fields map[string]string) map[string]string {
	delete(fields, "mode")
	return fields
}

// TestPermitAcquireReplay: a second execution of an expirable semaphore's
// acquisition with the same ids. Live, it answers the expiry the first one set
// and changes nothing. Expired (a late reply whose give-back was lost), it is
// a fresh acquisition: a new expiry, and an id still in the zset that no
// reclaim took is taken again, not counted a second time.
func TestPermitAcquireReplay(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	z := lua.PermitTimeoutsName(name)
	t.Cleanup(func() { rdb.Del(context.Background(), name, z) })
	p := lua.NewPermit(name)
	ours, other := lua.NewPermitID(), lua.NewPermitID()
	now := time.Now().UnixMilli()
	state := func() (int64, map[string]float64) {
		n, _ := rdb.Get(ctx, name).Int64()
		zs, err := rdb.ZRangeWithScores(ctx, z, 0, -1).Result()
		require.NoError(t, err)
		m := map[string]float64{}
		for _, e := range zs {
			m[e.Member.(string)] = e.Score
		}
		return n, m
	}

	// Live: the first execution's expiry, nothing taken twice.
	require.NoError(t, rdb.Set(ctx, name, 2, 0).Err())
	first, err := p.Acquire(ctx, rdb, now, lua.Publish, lua.PermitWaiter{IDs: []string{ours}, Expiry: now + 60_000})
	require.NoError(t, err)
	require.Equal(t, lua.PermitTry{Served: 1, Expiry: now + 60_000}, first)
	again, err := p.Acquire(ctx, rdb, now+1, lua.Publish, lua.PermitWaiter{IDs: []string{ours}, Expiry: now + 90_000})
	require.NoError(t, err)
	require.Equal(t, lua.PermitTry{Served: 1, Expiry: now + 60_000}, again, "a live replay answers the expiry Redis holds")
	n, zs := state()
	require.EqualValues(t, 1, n)
	require.Equal(t, map[string]float64{ours: float64(now + 60_000)}, zs)

	// Expired, and the reclaim of the attempt (at most one permit) takes an
	// older expired permit instead of ours: ours is taken again, counted once.
	require.NoError(t, rdb.ZAdd(ctx, z, redis.Z{Score: float64(now - 2000), Member: other}, redis.Z{Score: float64(now - 1000), Member: ours}).Err())
	require.NoError(t, rdb.Set(ctx, name, 0, 0).Err()) // total 2: both permits out, both expired
	fresh, err := p.Acquire(ctx, rdb, now, lua.Publish, lua.PermitWaiter{IDs: []string{ours}, Expiry: now + 30_000})
	require.NoError(t, err)
	require.Equal(t, lua.PermitTry{Served: 1, Expiry: now + 30_000}, fresh, "an expired replay is a fresh acquisition")
	n, zs = state()
	require.EqualValues(t, 1, n, "the other expired permit went back to the pool; ours was not taken from it twice")
	require.Equal(t, map[string]float64{ours: float64(now + 30_000)}, zs)
}
