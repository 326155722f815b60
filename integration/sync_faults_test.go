package integration

// Faults and Cluster for issue 19's synchronizers, against real Redis: a
// waiter whose pub/sub connection is killed just before the release, calls
// whose reply is lost and that go-redis resends, and each object on a Redis
// Cluster with sharded pub/sub across two clients.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// syncWaitCase is one synchronizer's wait: how to set it up so that a call
// waits, start that call, and end the wait from another client.
type syncWaitCase struct {
	name    string
	channel func(name string) string
	method  string // the waiting method, as it appears in a stack
	// prepare makes the object so that wait blocks, with the other client o.
	prepare func(t *testing.T, ctx context.Context, o *rlock.Client, name string) (end func() error)
	// wait is the blocking call, made in the waiter's client w; it gives back
	// what it acquired.
	wait func(ctx context.Context, w *rlock.Client, name string) error
	// after checks, with plain commands, that the counts are exact once the
	// wait returned.
	after func(t *testing.T, rdb redis.Cmdable, name string)
}

var syncWaitCases = []syncWaitCase{
	{
		name: "Semaphore", channel: syncSemChannel, method: "(*Semaphore).Acquire",
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			ok, err := o.NewSemaphore(name).TrySetPermits(ctx, 0, 0)
			require.NoError(t, err)
			require.True(t, ok)
			return func() error { return o.NewSemaphore(name).Release(ctx, 1) }
		},
		wait: func(ctx context.Context, w *rlock.Client, name string) error {
			s := w.NewSemaphore(name)
			if err := s.Acquire(ctx, 1); err != nil {
				return err
			}
			return s.Release(ctx, 1)
		},
		after: func(t *testing.T, rdb redis.Cmdable, name string) {
			v, _ := syncGet(t, rdb, name)
			require.EqualValues(t, 1, v, "%s: the released permit is back", name)
		},
	},
	{
		name: "ExpirableSemaphore", channel: syncSemChannel, method: "(*ExpirableSemaphore).Acquire",
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			s := o.NewExpirableSemaphore(name)
			ok, err := s.TrySetPermits(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			p, err := s.TryAcquire(ctx, 1) // watchdog-leased: does not expire during the test
			require.NoError(t, err)
			return func() error { return p.Release(ctx) }
		},
		wait: func(ctx context.Context, w *rlock.Client, name string) error {
			p, err := w.NewExpirableSemaphore(name).Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		},
		after: func(t *testing.T, rdb redis.Cmdable, name string) {
			v, _ := syncGet(t, rdb, name)
			require.EqualValues(t, 1, v, "%s: the released permit is back", name)
			require.Zero(t, syncZCard(t, rdb, syncTimeoutKey(name)), "%s: no permit held", name)
		},
	},
	{
		name: "CountDownLatch", channel: syncLatchChannel, method: "(*CountDownLatch).Await",
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			ok, err := o.NewCountDownLatch(name).TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			return func() error { return o.NewCountDownLatch(name).CountDown(ctx) }
		},
		wait: func(ctx context.Context, w *rlock.Client, name string) error {
			return w.NewCountDownLatch(name).Await(ctx)
		},
		after: func(t *testing.T, rdb redis.Cmdable, name string) {
			require.Zero(t, rdb.Exists(context.Background(), name).Val(), "%s: the latch is open", name)
		},
	},
}

// TestSyncPubSubKilledBeforeRelease: a waiter (Semaphore.Acquire,
// ExpirableSemaphore.Acquire, CountDownLatch.Await) parked in its wait has its
// pub/sub connection killed (CLIENT KILL TYPE pubsub) right before another
// client releases: it still returns, within seconds, although its re-check
// interval is a minute: the re-subscription wakes it to re-check. MONITOR
// tells, per round, whether the release ran before the re-subscription (its
// message went to nobody) or after.
func TestSyncPubSubKilledBeforeRelease(t *testing.T) {
	srv := redistest.Start(t) // CLIENT KILL must not hit other tests
	admin := srv.Client(t)
	const releaser = "sync-releaser"
	other := newClient(t, srv.Client(t, func(o *redis.Options) { o.ClientName = releaser }))
	waiter := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute))
	for _, tc := range syncWaitCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			for round := range 3 {
				name := redistest.Name(t)
				channel := tc.channel(name)
				end := tc.prepare(t, ctx, other, name)
				base := syncParked(tc.method)
				got := syncGoErr(func() error { return tc.wait(ctx, waiter, name) })
				syncAwaitParked(t, tc.method, base+1)
				syncAwaitSubs(t, admin, channel, 1)

				mon := waitStartMonitor(t, srv.Addr)
				killed, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				require.NoError(t, err)
				require.EqualValues(t, 1, killed, "one subscriber connection (the waiter's)")
				released := time.Now()
				require.NoError(t, end())
				g := syncAwait(t, got, 10*time.Second, tc.name+" after its pub/sub connection was killed")
				require.NoError(t, g.err)
				took := g.at.Sub(released)

				// In the server's order: the releaser's script, and the
				// re-subscription. MONITOR may lag behind the replies.
				from := syncClientAddrs(t, admin, releaser)
				var release, resub int
				require.Eventually(t, func() bool {
					cmds := mon.lines()
					release = slices.IndexFunc(cmds, func(l string) bool {
						return slices.ContainsFunc(from, func(a string) bool { return strings.Contains(l, "["+a+"]") })
					})
					resub = waitFirst(cmds, `"subscribe"`, `"`+channel+`"`)
					return release >= 0 && resub >= 0
				}, 5*time.Second, time.Millisecond, "MONITOR saw the release at %d and the re-subscription at %d", release, resub)
				mon.stop()
				how := "message delivered after the re-subscription"
				if release < resub {
					how = "message lost (published before the re-subscription)"
				}
				t.Logf("round %d: %s returned %v after the release; %s", round, tc.name, took.Round(time.Microsecond), how)
				require.Less(t, took, 5*time.Second, "woken by the re-subscription, not the one-minute re-check")
				tc.after(t, admin, name)
			}
		})
	}
}

// syncClientAddrs returns the addresses ("[db addr]" in MONITOR lines, without
// the db) of the connections named name.
func syncClientAddrs(t *testing.T, admin *redis.Client, name string) []string {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	require.NoError(t, err)
	var addrs []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if a, ok := strings.CutPrefix(f, "addr="); ok {
				addrs = append(addrs, "0 "+a)
			}
		}
	}
	require.NotEmpty(t, addrs, "connections named %s", name)
	return addrs
}

// TestSyncRetriedCallsCountOnce: every call that changes a count, sent
// through a proxy that swallows its reply so that go-redis resends it, is
// applied once: the counts read directly afterwards are exact and the resent
// call answers as the first did (a resent release is not ErrNoSuchPermit, a
// resent TrySet still true).
func TestSyncRetriedCallsCountOnce(t *testing.T) {
	// lost runs f with the next reply swallowed and checks that it was.
	lost := func(t *testing.T, proxy *redistest.Proxy, what string, f func() error) {
		t.Helper()
		dropped := proxy.Dropped()
		proxy.DropReplies(1)
		require.NoError(t, f(), what)
		require.Zero(t, proxy.PendingDrops(), "%s: the reply was swallowed", what)
		require.Equal(t, dropped+1, proxy.Dropped(), what)
	}

	t.Run("Semaphore", func(t *testing.T) {
		proxy, rdb, direct := proxiedClient(t, 3)
		c := newClient(t, rdb)
		ctx := testCtx(t, 30*time.Second)
		syncWarmSemaphore(t, ctx, c.NewSemaphore(redistest.Name(t)))
		name := redistest.Name(t)
		s := c.NewSemaphore(name)
		count := func() int64 { v, _ := syncGet(t, direct, name); return v }

		lost(t, proxy, "TrySetPermits", func() error {
			ok, err := s.TrySetPermits(ctx, 5, 0)
			require.True(t, ok, "the resent TrySetPermits answers as the first")
			return err
		})
		require.EqualValues(t, 5, count())
		lost(t, proxy, "TryAcquire(2)", func() error { return s.TryAcquire(ctx, 2) })
		require.EqualValues(t, 3, count(), "acquired once")
		lost(t, proxy, "Release(2)", func() error { return s.Release(ctx, 2) })
		require.EqualValues(t, 5, count(), "released once")
		lost(t, proxy, "ReleaseIfExists(1)", func() error {
			ok, err := s.ReleaseIfExists(ctx, 1)
			require.True(t, ok)
			return err
		})
		require.EqualValues(t, 6, count())
		lost(t, proxy, "AddPermits(-4)", func() error { return s.AddPermits(ctx, -4) })
		require.EqualValues(t, 2, count())
		lost(t, proxy, "DrainPermits", func() error {
			n, err := s.DrainPermits(ctx)
			require.EqualValues(t, 2, n, "the resent DrainPermits answers as the first")
			return err
		})
		require.EqualValues(t, 0, count())
	})

	t.Run("ExpirableSemaphore", func(t *testing.T) {
		proxy, rdb, direct := proxiedClient(t, 3)
		c := newClient(t, rdb)
		ctx := testCtx(t, 30*time.Second)
		syncWarmExpirable(t, ctx, c.NewExpirableSemaphore(redistest.Name(t)))
		name := redistest.Name(t)
		s := c.NewExpirableSemaphore(name)
		state := func() (int64, int64) {
			v, _ := syncGet(t, direct, name)
			return v, syncZCard(t, direct, syncTimeoutKey(name))
		}
		t.Cleanup(func() { _ = direct.Del(context.Background(), name, syncTimeoutKey(name)).Err() })

		lost(t, proxy, "TrySetPermits", func() error {
			ok, err := s.TrySetPermits(ctx, 5)
			require.True(t, ok, "the resent TrySetPermits answers as the first")
			return err
		})
		var p *rlock.Permits
		lost(t, proxy, "TryAcquire(2)", func() (err error) { p, err = s.TryAcquire(ctx, 2); return err })
		a, z := state()
		require.EqualValues(t, 3, a, "acquired once")
		require.EqualValues(t, 2, z)
		lost(t, proxy, "Release(one id)", func() error { return s.Release(ctx, p.IDs()[0]) })
		a, z = state()
		require.EqualValues(t, 4, a, "released once")
		require.EqualValues(t, 1, z)

		require.NoError(t, s.Release(ctx, p.IDs()[1]))
		q, err := s.TryAcquire(ctx, 2)
		require.NoError(t, err)
		lost(t, proxy, "Release(two ids)", func() error { return s.Release(ctx, q.IDs()...) })
		a, z = state()
		require.EqualValues(t, 5, a, "released once")
		require.Zero(t, z)
		r, err := s.TryAcquire(ctx, 3)
		require.NoError(t, err)
		lost(t, proxy, "Permits.Release", func() error { return r.Release(ctx) })
		a, z = state()
		require.EqualValues(t, 5, a, "released once")
		require.Zero(t, z)
		require.ErrorIs(t, r.Err(), rlock.ErrReleased)
		lost(t, proxy, "AddPermits(2)", func() error { return s.AddPermits(ctx, 2) })
		a, _ = state()
		require.EqualValues(t, 7, a)
		lost(t, proxy, "SetPermits(4)", func() error { return s.SetPermits(ctx, 4) })
		a, _ = state()
		require.EqualValues(t, 4, a)
	})

	t.Run("CountDownLatch", func(t *testing.T) {
		proxy, rdb, direct := proxiedClient(t, 3)
		c := newClient(t, rdb)
		ctx := testCtx(t, 30*time.Second)
		syncWarmLatch(t, ctx, c.NewCountDownLatch(redistest.Name(t)))
		name := redistest.Name(t)
		l := c.NewCountDownLatch(name)
		count := func() int64 { v, _ := syncGet(t, direct, name); return v }

		lost(t, proxy, "TrySetCount(3)", func() error {
			ok, err := l.TrySetCount(ctx, 3)
			require.True(t, ok, "the resent TrySetCount answers as the first")
			return err
		})
		require.EqualValues(t, 3, count())
		lost(t, proxy, "CountDown", func() error { return l.CountDown(ctx) })
		require.EqualValues(t, 2, count(), "counted down once")
		lost(t, proxy, "CountDown", func() error { return l.CountDown(ctx) })
		require.EqualValues(t, 1, count(), "counted down once")
		lost(t, proxy, "CountDown to zero", func() error { return l.CountDown(ctx) })
		require.Zero(t, direct.Exists(ctx, name).Val(), "the latch is open")
		lost(t, proxy, "TrySetCount(2) again", func() error {
			ok, err := l.TrySetCount(ctx, 2)
			require.True(t, ok)
			return err
		})
		require.EqualValues(t, 2, count())
		lost(t, proxy, "Delete", func() error {
			ok, err := l.Delete(ctx)
			require.True(t, ok, "the resent Delete answers as the first")
			return err
		})
		require.Zero(t, direct.Exists(ctx, name).Val())
	})
}

// syncWarmSemaphore runs each Semaphore script once, so that a swallowed
// reply is a script's own and not NOSCRIPT's.
func syncWarmSemaphore(t *testing.T, ctx context.Context, s *rlock.Semaphore) {
	t.Helper()
	_, err := s.TrySetPermits(ctx, 1, 0)
	require.NoError(t, err)
	require.NoError(t, s.TryAcquire(ctx, 1))
	require.NoError(t, s.Release(ctx, 1))
	_, err = s.ReleaseIfExists(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, s.AddPermits(ctx, 1))
	_, err = s.DrainPermits(ctx)
	require.NoError(t, err)
	_, err = s.Delete(ctx)
	require.NoError(t, err)
}

// syncWarmExpirable runs each ExpirableSemaphore script once.
func syncWarmExpirable(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore) {
	t.Helper()
	_, err := s.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	p, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, p.IDs()[0]))
	p, err = s.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, p.IDs()...))
	require.NoError(t, s.AddPermits(ctx, 1))
	require.NoError(t, s.SetPermits(ctx, 3))
	_, err = s.Delete(ctx)
	require.NoError(t, err)
}

// syncWarmLatch runs each CountDownLatch script once.
func syncWarmLatch(t *testing.T, ctx context.Context, l *rlock.CountDownLatch) {
	t.Helper()
	_, err := l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, l.CountDown(ctx))
	_, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	_, err = l.Delete(ctx)
	require.NoError(t, err)
}

// TestSyncCluster runs each synchronizer on a Redis Cluster of 3 primaries
// across two clients, in every shard: a waiter in one client (re-check
// interval a minute) listens on sharded pub/sub only and is woken by the
// release (or last CountDown) of the other. Latch names with a hash tag are
// refused: the latch channel always adds braces, so its slot would differ.
func TestSyncCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ca := newClient(t, cl.Client(t))
	cb := newClient(t, cl.Client(t), rlock.WithRecheckInterval(time.Minute))
	rdb := cl.Client(t)
	ctx := testCtx(t, 60*time.Second)
	for _, tc := range syncWaitCases {
		t.Run(tc.name, func(t *testing.T) {
			byShard := clusterNames(t, cl, rdb, redistest.Name(t))
			var worst time.Duration
			for shard, names := range byShard {
				for _, name := range names {
					if tc.name == "CountDownLatch" && name != names[0] {
						_, err := ca.NewCountDownLatch(name).TrySetCount(ctx, 1)
						require.ErrorIs(t, err, rlock.ErrInvalidArgument, "latch name with a hash tag %q", name)
						continue
					}
					end := tc.prepare(t, ctx, ca, name)
					base := syncParked(tc.method)
					got := syncGoErr(func() error { return tc.wait(ctx, cb, name) })
					syncAwaitParked(t, tc.method, base+1)
					ch := tc.channel(name)
					require.Eventually(t, func() bool {
						classic, sharded := clusterSubscribers(ctx, cl, ch)
						return sharded == 1 && classic == 0
					}, 10*time.Second, 5*time.Millisecond, "%s: the waiter listens on %s by sharded pub/sub", name, ch)
					released := time.Now()
					require.NoError(t, end(), "%s on %s", name, shard)
					g := syncAwait(t, got, 10*time.Second, tc.name+" "+name)
					require.NoError(t, g.err, "%s on %s", name, shard)
					worst = max(worst, g.at.Sub(released))
					tc.after(t, rdb, name)
				}
			}
			t.Logf("%s: in every shard, the waiter returned at most %v after the other client's release", tc.name, worst.Round(time.Microsecond))
			require.Less(t, worst, 3*time.Second, "woken by the sharded message, not the one-minute re-check")
		})
	}
}
