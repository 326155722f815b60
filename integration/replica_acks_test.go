package integration

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// renewLog is a lossLog that also counts renewals by outcome.
type renewLog struct {
	*lossLog
	mu      sync.Mutex
	renewed map[observe.RenewOutcome]int
}

func newRenewLog() *renewLog {
	return &renewLog{lossLog: newLossLog(), renewed: map[observe.RenewOutcome]int{}}
}

func (l *renewLog) Renewed(o observe.RenewOutcome, holds int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed[o] += holds
}

func (l *renewLog) count(o observe.RenewOutcome) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed[o]
}

// leased is one hold of a kind with a lease: its handle, and the error its
// Err must match once lost.
type leased struct {
	kind string
	h    handle
	lost error
}

// takeLeased takes, on c, one hold of every kind the watchdog renews: a
// lock, a read hold, permits, a leadership.
func takeLeased(t *testing.T, ctx context.Context, c *rlock.Client, name string) []leased {
	t.Helper()
	l, err := c.NewMutex(name + ":mutex").Lock(ctx)
	require.NoError(t, err)
	r, err := c.NewRWMutex(name + ":rw").ReadLock().Lock(ctx)
	require.NoError(t, err)
	s := c.NewExpirableSemaphore(name + ":sem")
	_, err = s.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	e, err := c.NewElection(name+":elect").Campaign(ctx, "v")
	require.NoError(t, err)
	return []leased{{"Mutex", l, rlock.ErrLockLost}, {"ReadLock", r, rlock.ErrLockLost},
		{"ExpirableSemaphore", p, rlock.ErrPermitLost}, {"Election", e, rlock.ErrLockLost}}
}

// TestRenewalsCountOnlyWhenAcknowledged: with WithReplicaAcks, a renewal
// moves a hold's deadline only when the replicas acknowledged it. While the
// replica receives the stream, holds of every leased kind live across many
// renewal rounds (no false loss); once the stream is black-holed, the
// primary still confirms every renewal, but the holds end at their
// deadline (the last acknowledged renewal's send time plus the lease), with
// ErrLockLost (ErrPermitLost) caused by watchdog.ErrUnreplicated, and the
// observer hears the loss cause "unreplicated". Without acknowledgements
// the same holds live on: the primary's word moves their deadlines.
func TestRenewalsCountOnlyWhenAcknowledged(t *testing.T) {
	const lease = 1500 * time.Millisecond // renewals every 500 ms
	for _, acks := range []bool{true, false} {
		t.Run(map[bool]string{true: "acks", false: "no-acks"}[acks], func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			r := startReplicated(t)
			obs := newRenewLog()
			opts := []rlock.ClientOption{rlock.WithWatchdogTimeout(lease), rlock.WithObserver(obs)}
			if acks {
				opts = append(opts, rlock.WithReplicaAcks(1, 200*time.Millisecond))
			}
			c := newClient(t, r.rdb, opts...)
			name := redistest.Name(t)
			holds := takeLeased(t, ctx, c, name)

			// Healthy: 3 leases' worth of rounds, every renewal acknowledged.
			require.Eventually(t, func() bool { return obs.count(observe.RenewOK) >= 4*9 }, 20*time.Second,
				10*time.Millisecond, "nine renewal rounds of four holds")
			for _, h := range holds {
				require.NoError(t, h.h.Err(), "%s lost while the replica acknowledged", h.kind)
			}
			require.Zero(t, obs.count(observe.RenewUnreplicated))

			r.link.SetDropAll(true) // the replica no longer receives the stream
			cut := time.Now()
			if !acks {
				before := obs.count(observe.RenewOK)
				require.Eventually(t, func() bool { return obs.count(observe.RenewOK) >= before+4*2*3 }, 20*time.Second,
					10*time.Millisecond, "three leases' worth of rounds after the cut")
				for _, h := range holds {
					require.NoError(t, h.h.Err(), "%s: without acknowledgements the primary's word is enough", h.kind)
				}
				return
			}
			for _, h := range holds {
				select {
				case <-h.h.Done():
				case <-time.After(lease + 2*time.Second):
					t.Fatalf("%s still held %v after the cut", h.kind, time.Since(cut))
				}
				told := time.Since(cut)
				err := h.h.Err()
				require.ErrorIs(t, err, h.lost, h.kind)
				require.ErrorIs(t, err, watchdog.ErrUnreplicated, h.kind)
				require.Less(t, told, lease+time.Second, "%s told %v after the cut: later than its deadline", h.kind, told)
				t.Logf("%s: told %v after the cut: %v", h.kind, told.Round(time.Millisecond), err)
			}
			require.Positive(t, obs.count(observe.RenewUnreplicated), "the primary confirmed the renewals after the cut")
			for _, n := range []string{name + ":mutex", name + ":rw", name + ":sem", name + ":elect"} {
				obs.requireCause(t, n, observe.LossUnreplicated)
			}
		})
	}
}

// TestReplicaAcksNoHandOff: with WithReplicaAcks a release does not hand the
// lock to a waiter of its client in its own round trip (only the releaser's
// WAIT would cover that hand-off): the waiter takes the lock with an
// acquisition of its own, which waits for the replicas. With the replication
// stream black-holed as the holder unlocks, the Unlock reports
// ErrNotReplicated, and the waiter, which a hand-off would have given an
// unreplicated lease, is refused (ErrNotReplicated) and leaves the lock free.
func TestReplicaAcksNoHandOff(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	r := startReplicated(t)
	c := newClient(t, r.rdb, rlock.WithReplicaAcks(1, 200*time.Millisecond))
	name := redistest.Name(t)
	m := c.NewMutex(name)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		_, err := m.Lock(ctx)
		got <- err
	}()
	requireWaiting(t, r.primary, name)
	r.link.SetDropAll(true)
	require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotReplicated)
	select {
	case err := <-got:
		require.ErrorIs(t, err, rlock.ErrNotReplicated, "the waiter's own acquisition waited for the replica")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter neither took the lock nor was refused within 10 s")
	}
	require.Empty(t, holders(t, r.rdb, name), "the refused acquisition was undone")
}

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
	rdb, rt := roundTripClient(t, primary)
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

// Second executions of an acquisition: go-redis resending a script whose
// reply was lost, or the client attempting again after a late reply whose undo
// did not reach Redis. A lock's is answered as acquired, and the handle counts
// its deadline from that execution's send time, so the execution must set the
// lease again: otherwise Redis keeps the first execution's expiry, earlier than
// the handle's deadline. An expirable semaphore's finds its ids: granted again
// only while live, taken afresh once expired, and never counted twice.

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
