package integration

// Fencing tokens that never go backwards when Redis loses its data (issue 20,
// item 1): a restart without persistence, FLUSHALL, and a failover to a
// replica that missed the last INCRs. Before, the counter started again at 1
// (or at the replica's stale value), and a resource that keeps the highest
// token it saw refused every later holder.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// fencedTokens takes n tokens of the fenced lock name through c and returns
// the highest; each must exceed above.
func fencedTokens(t *testing.T, ctx context.Context, c *rlock.Client, name string, n int, above int64) int64 {
	t.Helper()
	m := c.NewFencedMutex(name)
	for range n {
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		require.Greater(t, l.Token(), above, "a token at or below one handed out before")
		above = l.Token()
		require.NoError(t, l.Unlock(ctx))
	}
	return above
}

func TestFencedTokensSurviveDataLoss(t *testing.T) {
	t.Run("restart without persistence", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		srv := redistest.Start(t)
		c := newClient(t, srv.Client(t))
		name := redistest.Name(t)
		last := fencedTokens(t, ctx, c, name, 3, 0)
		srv.Restart(t)
		fencedTokens(t, ctx, c, name, 3, last)
	})
	t.Run("FLUSHALL", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		srv := redistest.Start(t)
		rdb := srv.Client(t)
		c := newClient(t, rdb)
		name := redistest.Name(t)
		last := fencedTokens(t, ctx, c, name, 3, 0)
		require.NoError(t, rdb.FlushAll(ctx).Err())
		fencedTokens(t, ctx, c, name, 3, last)
	})
	t.Run("failover to a replica that missed INCRs", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
		host, port, _ := strings.Cut(primary.Addr, ":")
		replica := redistest.Start(t, "--replicaof", host, port)
		rc := replica.Client(t)
		require.Eventually(t, func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 10*time.Second, 10*time.Millisecond, "replica in sync")
		pc := newClient(t, primary.Client(t))
		name := redistest.Name(t)
		synced := fencedTokens(t, ctx, pc, name, 2, 0)
		require.Eventually(t, func() bool {
			v, err := rc.Get(ctx, "redisson_lock_token:{"+name+"}").Int64()
			return err == nil && v == synced
		}, 10*time.Second, 5*time.Millisecond, "the replica has the counter")

		// The replica is promoted before it hears of the primary's next tokens.
		require.NoError(t, rc.SlaveOf(ctx, "NO", "ONE").Err())
		last := fencedTokens(t, ctx, pc, name, 3, synced)
		v, err := rc.Get(ctx, "redisson_lock_token:{"+name+"}").Int64()
		require.NoError(t, err)
		require.Equal(t, synced, v, "the promoted replica missed the last INCRs")

		rcClient := newClient(t, replica.Client(t, func(o *redis.Options) { o.MaxRetries = -1 }))
		fencedTokens(t, ctx, rcClient, name, 3, last)
	})
}

// TestFencedTokensFollowJavaCounter: Java's RFencedLock INCRs the same counter;
// a token holdfast takes after a Java one is still above it, and Java's INCR
// keeps working on the raised counter.
func TestFencedTokensFollowJavaCounter(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	rdb, c, name := setup(t)
	counter := "redisson_lock_token:{" + name + "}"
	require.NoError(t, rdb.Set(ctx, counter, 41, 0).Err()) // as Java leaves it after 41 acquisitions
	t.Cleanup(func() { rdb.Del(context.Background(), counter) })
	last := fencedTokens(t, ctx, c, name, 1, 41)
	java, err := rdb.Incr(ctx, counter).Result()
	require.NoError(t, err)
	require.Equal(t, last+1, java)
	fencedTokens(t, ctx, c, name, 1, java)
}
