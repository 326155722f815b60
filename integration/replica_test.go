package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestReplicaAcksPreventDoubleGrant plays the recipe of a lock lost to
// asynchronous replication: the primary grants a lock that its replica never
// receives (the replica replicates through a proxy that black-holes the stream),
// the primary dies, the replica is promoted, and another client takes the lock
// there. Without replica
// acknowledgements the first holder still believes it holds the lock: a double
// grant, in every round. With WithReplicaAcks(1, 200 ms) the first acquisition is
// refused with ErrNotReplicated (and undone), so there is none.
func TestReplicaAcksPreventDoubleGrant(t *testing.T) {
	const rounds = 3
	for _, acks := range []bool{false, true} {
		doubles, refused := 0, 0
		for range rounds {
			double, refusal := replicaRound(t, acks)
			if double {
				doubles++
			}
			if refusal {
				refused++
			}
		}
		t.Logf("replica acks %v: %d double grants and %d refused acquisitions in %d rounds", acks, doubles, refused, rounds)
		if acks {
			require.Zero(t, doubles, "double grants with replica acks")
			require.Equal(t, rounds, refused)
		} else {
			require.Equal(t, rounds, doubles, "the recipe reproduces the double grant")
		}
	}
}

// replicated is a primary whose one replica replicates through a proxy (link),
// which can black-hole the replication stream, and a client of the primary.
type replicated struct {
	primary, replica *redistest.Server
	link             *redistest.Proxy
	rdb              *redis.Client
}

// startReplicated starts a primary and a replica, and waits until the
// replica is in sync and acknowledges the primary's writes: the primary
// streams to the replica, and counts its acknowledgements, once it has the
// replica's first REPLCONF ACK after the full sync (one a second).
func startReplicated(t *testing.T) replicated {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	link := redistest.NewProxy(t, primary.Addr)
	host, port, _ := strings.Cut(link.Addr, ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	rc, rdb := replica.Client(t), primary.Client(t)
	require.Eventually(t, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond, "replica in sync")
	require.Eventually(t, func() bool {
		wait := redis.NewIntCmd(ctx, "wait", 1, 100)
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "holdfast-test-probe")
			return p.Process(ctx, wait)
		})
		return err == nil && wait.Val() == 1
	}, 10*time.Second, time.Millisecond, "the replica acknowledges the primary's writes")
	return replicated{primary: primary, replica: replica, link: link, rdb: rdb}
}

// replicaRound runs the recipe once and reports whether two owners held the
// lock at once, and whether the first acquisition was refused.
func replicaRound(t *testing.T, acks bool) (double, refused bool) {
	ctx := testCtx(t, 60*time.Second)
	r := startReplicated(t)
	primary, link, rc := r.primary, r.link, r.replica.Client(t)

	var opts []rlock.ClientOption
	if acks {
		opts = append(opts, rlock.WithReplicaAcks(1, 200*time.Millisecond))
	}
	a := newClient(t, primary.Client(t, func(o *redis.Options) { o.MaxRetries = -1 }), opts...)
	name := redistest.Name(t)

	link.SetDropAll(true) // the replication stream stops reaching the replica
	la, err := a.NewMutex(name).TryLock(ctx)
	if acks {
		var nr *rlock.NotReplicatedError
		require.ErrorIs(t, err, rlock.ErrNotReplicated)
		require.True(t, errors.As(err, &nr))
		require.Equal(t, 0, nr.Acked)
		require.Equal(t, 1, nr.Wanted)
		t.Logf("refused: %v", err)
		refused = true
	} else {
		require.NoError(t, err)
	}
	primary.Kill()
	require.NoError(t, rc.ReplicaOf(ctx, "NO", "ONE").Err())

	b := newClient(t, rc)
	lb, err := b.NewMutex(name).TryLock(ctx)
	require.NoError(t, err, "the promoted replica never had the lock")
	double = la != nil && la.Err() == nil
	require.NoError(t, lb.Unlock(ctx))
	return double, refused
}

// TestReplicaAcksHealthy: with a replica in sync, acquisitions and releases that
// ask for its acknowledgement succeed, each in one round trip (the script and
// WAIT are pipelined); a per-call WithLockReplicaAcks asking for more replicas than exist
// is refused after its timeout and leaves nothing held.
func TestReplicaAcksHealthy(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	require.Eventually(t, func() bool {
		info, err := replica.Client(t).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond, "replica in sync")
	rdb := primary.Client(t)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	c := newClient(t, rdb, rlock.WithReplicaAcks(1, time.Second))
	name := redistest.Name(t)
	m := c.NewMutex(name)
	l, err := m.Lock(ctx) // loads the scripts (NOSCRIPT, then EVAL)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	rt.n.Store(0)
	for range 10 {
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	}
	require.EqualValues(t, 20, rt.n.Load(), "one round trip per acquisition and per release")
	_, err = m.TryLock(ctx, rlock.WithLockReplicaAcks(2, 100*time.Millisecond))
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.Empty(t, holders(t, rdb, name), "the refused acquisition was undone")
}
