package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Faults and Cluster for the synchronizers, against real Redis: a
// waiter whose pub/sub connection is killed just before the release, calls
// whose reply is lost and that go-redis resends, and each object on a Redis
// Cluster with sharded pub/sub across two clients.

// syncWaitCase is one synchronizer's wait: how to set it up so that a call
// waits, start that call, and end the wait from another client.
type syncWaitCase struct {
	name    string
	channel func(name string) string
	// prepare makes the object so that wait blocks, with the other client o.
	prepare func(t *testing.T, ctx context.Context, o *rlock.Client, name string) (end func() error)
	// wait is the blocking call, made in the waiter's client w; it gives back
	// what it acquired.
	wait func(ctx context.Context, w *rlock.Client, name string) error
	// after checks, with plain commands, that the counts are exact once the
	// wait returned.
	after func(t *testing.T, rdb redis.Cmdable, name string)
}

// start prepares the object name with o and starts the wait in w; it returns
// once the wait is parked, with the call that ends it.
func (tc syncWaitCase) start(t *testing.T, ctx context.Context, o, w *rlock.Client, name string) (end func() error, got <-chan asyncResult[struct{}]) {
	t.Helper()
	end = tc.prepare(t, ctx, o, name)
	got = goParked(t, name, func() error { return tc.wait(ctx, w, name) })[0]
	return end, got
}

var syncWaitCases = []syncWaitCase{
	{
		name: "Semaphore", channel: syncSemChannel,
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			answer(o.NewSemaphore(name).TrySetPermits(ctx, 0, 0)).is(t, true)
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
		name: "ExpirableSemaphore", channel: syncSemChannel,
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			s := o.NewExpirableSemaphore(name)
			answer(s.TrySetPermits(ctx, 1)).is(t, true)
			p := answer(s.TryAcquire(ctx, 1)).value(t) // watchdog-leased: does not expire during the test
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
		name: "CountDownLatch", channel: syncLatchChannel,
		prepare: func(t *testing.T, ctx context.Context, o *rlock.Client, name string) func() error {
			answer(o.NewCountDownLatch(name).TrySetCount(ctx, 1)).is(t, true)
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
	waiter := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	for _, tc := range syncWaitCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			for round := range 3 {
				name := redistest.Name(t)
				channel := tc.channel(name)
				end, got := tc.start(t, ctx, other, waiter, name)
				awaitSubscribersAtLeast(t, admin, channel, 1)

				mon := waitStartMonitor(t, srv.Addr)
				killed := killSubscribers(t, admin)
				require.EqualValues(t, 1, killed, "one subscriber connection (the waiter's)")
				released := time.Now()
				require.NoError(t, end())
				g := awaitAsync(t, got, 10*time.Second, tc.name+" after its pub/sub connection was killed")
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

// syncRetried is an object's setting in TestSyncRetriedCallsCountOnce: a
// client behind a proxy that can swallow replies, a direct connection to the
// server, and the object's name (its keys deleted at the end of the test).
type syncRetried struct {
	proxy  *redistest.Proxy
	c      *rlock.Client
	direct *redis.Client
	ctx    context.Context
	name   string
}

// newSyncRetried returns the setting of an object whose scripts warm runs
// once first, on another name, so that a swallowed reply is a script's own
// and not NOSCRIPT's.
func newSyncRetried(t *testing.T, warm func(t *testing.T, ctx context.Context, c *rlock.Client, name string)) syncRetried {
	proxy, rdb, direct := proxiedClient(t, 3)
	r := syncRetried{proxy: proxy, c: newClient(t, rdb), direct: direct, ctx: testCtx(t, 30*time.Second), name: redistest.Name(t)}
	t.Cleanup(func() { _ = direct.Del(context.Background(), r.name, syncTimeoutKey(r.name)).Err() })
	warm(t, r.ctx, r.c, redistest.Name(t))
	return r
}

// syncLostStep is a call made with its reply swallowed, and the state it
// must leave, read directly: the integer at the name (or no key at all:
// gone), and the permits in the zset of an expirable semaphore (none for the
// other kinds).
type syncLostStep struct {
	what  string
	call  func() error
	count int64
	gone  bool
	held  int64
	msg   string
}

// run makes each step's call with the next reply swallowed, so that go-redis
// resends it, checks that the reply was swallowed and that the state is the
// step's.
func (r syncRetried) run(t *testing.T, steps []syncLostStep) {
	t.Helper()
	for _, st := range steps {
		dropped := r.proxy.Dropped()
		r.proxy.DropReplies(1)
		require.NoError(t, st.call(), st.what)
		require.Zero(t, r.proxy.PendingDrops(), "%s: the reply was swallowed", st.what)
		require.Equal(t, dropped+1, r.proxy.Dropped(), st.what)
		v, exists := syncGet(t, r.direct, r.name)
		if st.gone {
			require.False(t, exists, "%s: no key left: %s", st.what, st.msg)
		} else {
			require.Equal(t, st.count, v, "%s: the count: %s", st.what, st.msg)
		}
		require.Equal(t, st.held, syncZCard(t, r.direct, syncTimeoutKey(r.name)), "%s: the permits held", st.what)
	}
}

// syncResent makes a call that answers whether it did something a step's
// call: the resent call must answer true, as the first did.
func syncResent(t *testing.T, f func() (bool, error), what string) func() error {
	return func() error {
		ok, err := f()
		require.True(t, ok, "the resent %s answers as the first", what)
		return err
	}
}

// TestSyncRetriedCallsCountOnce: every call that changes a count, sent
// through a proxy that swallows its reply so that go-redis resends it, is
// applied once: the counts read directly afterwards are exact and the resent
// call answers as the first did (a resent release is not ErrNoSuchPermit, a
// resent TrySet still true).
func TestSyncRetriedCallsCountOnce(t *testing.T) {
	t.Run("Semaphore", func(t *testing.T) {
		r := newSyncRetried(t, syncWarmSemaphore)
		ctx := r.ctx
		s := r.c.NewSemaphore(r.name)
		r.run(t, []syncLostStep{
			{what: "TrySetPermits", call: syncResent(t, func() (bool, error) { return s.TrySetPermits(ctx, 5, 0) }, "TrySetPermits"), count: 5},
			{what: "TryAcquire(2)", call: func() error { return s.TryAcquire(ctx, 2) }, count: 3, msg: "acquired once"},
			{what: "Release(2)", call: func() error { return s.Release(ctx, 2) }, count: 5, msg: "released once"},
			{what: "ReleaseIfExists(1)", call: syncResent(t, func() (bool, error) { return s.ReleaseIfExists(ctx, 1) }, "ReleaseIfExists"), count: 6},
			{what: "AddPermits(-4)", call: func() error { return s.AddPermits(ctx, -4) }, count: 2},
			{what: "DrainPermits", call: func() error {
				n, err := s.DrainPermits(ctx)
				require.EqualValues(t, 2, n, "the resent DrainPermits answers as the first")
				return err
			}, count: 0},
		})
	})

	t.Run("ExpirableSemaphore", func(t *testing.T) {
		r := newSyncRetried(t, syncWarmExpirable)
		ctx := r.ctx
		s := r.c.NewExpirableSemaphore(r.name)
		var p *rlock.Permits
		r.run(t, []syncLostStep{
			{what: "TrySetPermits", call: syncResent(t, func() (bool, error) { return s.TrySetPermits(ctx, 5) }, "TrySetPermits"), count: 5},
			{what: "TryAcquire(2)", call: func() (err error) { p, err = s.TryAcquire(ctx, 2); return err }, count: 3, held: 2, msg: "acquired once"},
			{what: "Release(one id)", call: func() error { return s.Release(ctx, p.IDs()[0]) }, count: 4, held: 1, msg: "released once"},
		})
		require.NoError(t, s.Release(ctx, p.IDs()[1]))
		q := answer(s.TryAcquire(ctx, 2)).value(t)
		r.run(t, []syncLostStep{{what: "Release(two ids)", call: func() error { return s.Release(ctx, q.IDs()...) }, count: 5, msg: "released once"}})
		w := answer(s.TryAcquire(ctx, 3)).value(t)
		r.run(t, []syncLostStep{
			{what: "Permits.Release", call: func() error { return w.Release(ctx) }, count: 5, msg: "released once"},
			{what: "AddPermits(2)", call: func() error { return s.AddPermits(ctx, 2) }, count: 7},
			{what: "SetPermits(4)", call: func() error { return s.SetPermits(ctx, 4) }, count: 4},
		})
		require.ErrorIs(t, w.Err(), rlock.ErrReleased)
	})

	t.Run("CountDownLatch", func(t *testing.T) {
		r := newSyncRetried(t, syncWarmLatch)
		ctx := r.ctx
		l := r.c.NewCountDownLatch(r.name)
		r.run(t, []syncLostStep{
			{what: "TrySetCount(3)", call: syncResent(t, func() (bool, error) { return l.TrySetCount(ctx, 3) }, "TrySetCount"), count: 3},
			{what: "CountDown", call: func() error { return l.CountDown(ctx) }, count: 2, msg: "counted down once"},
			{what: "CountDown", call: func() error { return l.CountDown(ctx) }, count: 1, msg: "counted down once"},
			{what: "CountDown to zero", call: func() error { return l.CountDown(ctx) }, gone: true, msg: "the latch is open"},
			{what: "TrySetCount(2) again", call: syncResent(t, func() (bool, error) { return l.TrySetCount(ctx, 2) }, "TrySetCount"), count: 2},
			{what: "Delete", call: syncResent(t, func() (bool, error) { return l.Delete(ctx) }, "Delete"), gone: true},
		})
	})
}

// syncWarmSemaphore runs each Semaphore script once, on name.
func syncWarmSemaphore(t *testing.T, ctx context.Context, c *rlock.Client, name string) {
	t.Helper()
	s := c.NewSemaphore(name)
	require.NoError(t, errOf(s.TrySetPermits(ctx, 1, 0)))
	require.NoError(t, s.TryAcquire(ctx, 1))
	require.NoError(t, s.Release(ctx, 1))
	require.NoError(t, errOf(s.ReleaseIfExists(ctx, 1)))
	require.NoError(t, s.AddPermits(ctx, 1))
	require.NoError(t, errOf(s.DrainPermits(ctx)))
	require.NoError(t, errOf(s.Delete(ctx)))
}

// syncWarmExpirable runs each ExpirableSemaphore script once, on name.
func syncWarmExpirable(t *testing.T, ctx context.Context, c *rlock.Client, name string) {
	t.Helper()
	s := c.NewExpirableSemaphore(name)
	require.NoError(t, errOf(s.TrySetPermits(ctx, 3)))
	p := answer(s.TryAcquire(ctx, 1)).value(t)
	require.NoError(t, s.Release(ctx, p.IDs()[0]))
	p = answer(s.TryAcquire(ctx, 2)).value(t)
	require.NoError(t, s.Release(ctx, p.IDs()...))
	require.NoError(t, s.AddPermits(ctx, 1))
	require.NoError(t, s.SetPermits(ctx, 3))
	require.NoError(t, errOf(s.Delete(ctx)))
}

// syncWarmLatch runs each CountDownLatch script once, on name.
func syncWarmLatch(t *testing.T, ctx context.Context, c *rlock.Client, name string) {
	t.Helper()
	l := c.NewCountDownLatch(name)
	require.NoError(t, errOf(l.TrySetCount(ctx, 1)))
	require.NoError(t, l.CountDown(ctx))
	require.NoError(t, errOf(l.TrySetCount(ctx, 1)))
	require.NoError(t, errOf(l.Delete(ctx)))
}

// TestSyncCluster runs each synchronizer on a Redis Cluster of 3 primaries
// across two clients, in every shard: a waiter in one client (re-check
// interval a minute) listens on sharded pub/sub only (classic pub/sub only on
// Redis 6.2) and is woken by the release (or last CountDown) of the other.
// Latch names with a hash tag are refused: the latch channel always adds
// braces, so its slot would differ.
func TestSyncCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ps := clusterPubSubOf(t, cl)
	ca := newClient(t, cl.Client(t))
	cb := newClient(t, cl.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	rdb := cl.Client(t)
	ctx := testCtx(t, 60*time.Second)
	for _, tc := range syncWaitCases {
		t.Run(tc.name, func(t *testing.T) {
			byShard := clusterNames(t, cl, rdb, redistest.Name(t))
			var worst time.Duration
			for shard, names := range byShard {
				for _, name := range names {
					if tc.name == "CountDownLatch" && name != names[0] {
						require.ErrorIs(t, errOf(ca.NewCountDownLatch(name).TrySetCount(ctx, 1)), rlock.ErrInvalidArgument,
							"latch name with a hash tag %q", name)
						continue
					}
					end, got := tc.start(t, ctx, ca, cb, name)
					ch := tc.channel(name)
					require.Eventually(t, func() bool {
						n, other := ps.listeners(ctx, ch)
						return n == 1 && other == 0
					}, 10*time.Second, 5*time.Millisecond, "%s: the waiter listens on %s by %s", name, ch, ps)
					released := time.Now()
					require.NoError(t, end(), "%s on %s", name, shard)
					g := awaitAsync(t, got, 10*time.Second, tc.name+" "+name)
					require.NoError(t, g.err, "%s on %s", name, shard)
					worst = max(worst, g.at.Sub(released))
					tc.after(t, rdb, name)
				}
			}
			t.Logf("%s: in every shard, the waiter returned at most %v after the other client's release", tc.name, worst.Round(time.Microsecond))
			require.Less(t, worst, 3*time.Second, "woken by the message (%s), not the one-minute re-check", ps)
		})
	}
}

// The bound of an expirable semaphore's wait when nothing is published: a
// permit with a fixed lease that its holder never releases. The waiter's
// attempt reads the earliest lease expiry and sleeps until then, not until
// its recheck interval (set to a minute here), in the holder's client and in
// another one (docs/design.md, "Waiting, and the bound of every wait").

func TestSyncWaitBoundedByFixedLease(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(map[bool]string{true: "same client", false: "other client"}[same], func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			admin, holder, name := setup(t, rlock.WithRecheckInterval(time.Minute))
			waiter := holder
			if !same {
				waiter = newClient(t, admin, rlock.WithRecheckInterval(time.Minute))
			}
			s := expSemaphore(t, admin, holder, name, 1)

			const lease = 700 * time.Millisecond
			held := answer(s.Acquire(ctx, 1, rlock.WithLeaseTime(lease))).value(t)
			taken := time.Now()

			got := goAsync(func() (*rlock.Permits, error) { return waiter.NewExpirableSemaphore(name).Acquire(ctx, 1) })
			g := awaitAsync(t, got, 5*time.Second, "waiter on a never-released fixed-lease permit")
			require.NoError(t, g.err)
			waited := g.at.Sub(taken)
			t.Logf("permit with a %v lease never released: the waiter acquired %v after it was taken", lease, waited.Round(time.Millisecond))
			require.GreaterOrEqual(t, waited, lease-50*time.Millisecond, "acquired before the lease could have run out")
			require.ErrorIs(t, held.Err(), rlock.ErrPermitLost)
			require.NoError(t, g.v.Release(ctx))
		})
	}
}

// Multi-process tests of the semaphores: counts exact after many
// processes acquire and release, and never more than N holders at once across
// processes. Workers are the test binary re-executed by redistest (see
// locks_wait_test.go for the pattern); they connect to $WAIT_ADDR and report
// on stdout. The holder of TestExpirableDeadHolderPermitReturns is here too.
//
// Scale with HOLDFAST_SYNC_PROCS (default 16), HOLDFAST_SYNC_ROUNDS (default
// 100 cycles per process and kind) and HOLDFAST_SYNC_ITERS (default 25 critical
// sections per goroutine and kind in the N-holders test).

const (
	syncCountsRole       = "sync-counts"        // TestSyncCountsAcrossProcesses
	syncHoldersRole      = "sync-holders"       // TestSyncAtMostNHolders
	syncPermitHolderRole = "sync-permit-holder" // TestExpirableDeadHolderPermitReturns

	syncPermits    = 4 // permits of TestSyncCountsAcrossProcesses' semaphores
	syncN          = 3 // permits of TestSyncAtMostNHolders' semaphores
	syncHolderProc = 3 // processes of TestSyncAtMostNHolders
	syncGoroutines = 8 // goroutines per process of TestSyncAtMostNHolders
)

// syncEnvInt returns the integer in the environment variable key, or def
// when it is unset.
func syncEnvInt(t testing.TB, key string, def int) int {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, key)
	require.Positive(t, n, key)
	return n
}

// syncProcs is the parent's side of a multi-process test: a client of the
// shared server, an rlock.Client on it, the semaphores' base name and the
// workers, started.
type syncProcs struct {
	rdb  *redis.Client
	c    *rlock.Client
	ctx  context.Context
	base string
	ws   []*redistest.Worker
}

// syncRunProcs creates a semaphore of each kind, base+":"+kind.name, with
// permits permits (their keys deleted at the end of the test), starts n
// workers of role with env, waits until each says READY and releases them
// all at once (a BLPOP each on base+":start", which env names as SYNC_START).
func syncRunProcs(t *testing.T, role string, n int, permits int64, env ...string) syncProcs {
	t.Helper()
	srv := redistest.Shared(t)
	p := syncProcs{rdb: srv.Client(t), ctx: testCtx(t, 3*time.Minute), base: redistest.Name(t)}
	p.c = newClient(t, p.rdb)
	for _, k := range syncKinds {
		answer(k.set(p.ctx, p.c, p.base+":"+k.name, permits)).is(t, true, k.kind)
	}
	t.Cleanup(func() {
		_ = p.rdb.Del(context.Background(), p.base+":sem", p.base+":pes", syncTimeoutKey(p.base+":pes"),
			p.base+":sem:inside", p.base+":pes:inside", p.base+":start").Err()
	})
	env = append(env, "WAIT_ADDR="+srv.Addr, "SYNC_BASE="+p.base, "SYNC_START="+p.base+":start")
	p.ws = redistest.RunWorkers(t, t.Name(), role, n, env...)
	for _, w := range p.ws {
		w.Expect(t, "READY", 60*time.Second)
	}
	for range n {
		require.NoError(t, p.rdb.RPush(p.ctx, p.base+":start", "go").Err())
	}
	return p
}

// requireIntact checks that both semaphores are back to permits available
// and no permit is held, read with plain commands.
func (p syncProcs) requireIntact(t *testing.T, permits int64) {
	t.Helper()
	for _, k := range syncKinds {
		v, _ := syncGet(t, p.rdb, p.base+":"+k.name)
		require.Equal(t, permits, v, "%s: available permits after every release", k.kind)
	}
	require.Zero(t, syncZCard(t, p.rdb, syncTimeoutKey(p.base+":pes")), "ExpirableSemaphore: no permit left acquired")
}

// syncWorkerClient is a worker's client of $WAIT_ADDR, an rlock.Client with
// opts on it and a context of d, all ended with the worker's test.
func syncWorkerClient(t *testing.T, d time.Duration, opts ...rlock.ClientOption) (*redis.Client, *rlock.Client, context.Context) {
	rdb := waitWorkerClient(t)
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return rdb, c, ctx
}

// syncWorkerStart is a worker's start: its clients (syncWorkerClient), READY
// said and the start signal received.
func syncWorkerStart(t *testing.T) (*redis.Client, *rlock.Client, context.Context) {
	rdb, c, ctx := syncWorkerClient(t, 2*time.Minute)
	fmt.Println("READY")
	require.NoError(t, rdb.BLPop(ctx, time.Minute, os.Getenv("SYNC_START")).Err())
	return rdb, c, ctx
}

// syncReadWorker hands each line of w to each until w's output ends (within
// d), then requires w to have exited 0.
func syncReadWorker(t *testing.T, w *redistest.Worker, d time.Duration, each func(line string)) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case line, ok := <-w.Lines():
			if !ok {
				require.NoError(t, w.Wait(), "worker %d; output:\n%s", w.Index, w.Output())
				return
			}
			each(line)
		case <-timeout:
			t.Fatalf("worker %d did not finish; output:\n%s", w.Index, w.Output())
		}
	}
}

// TestSyncCountsAcrossProcesses: 16 processes each acquire and release 100
// times, alternately 1 and 2 permits, a Semaphore of 4 permits, then an
// ExpirableSemaphore of 4: afterwards both count exactly 4 available and
// nothing acquired.
func TestSyncCountsAcrossProcesses(t *testing.T) {
	if redistest.WorkerRole() == syncCountsRole {
		syncCountsWorker(t)
		return
	}
	procs := syncEnvInt(t, "HOLDFAST_SYNC_PROCS", 16)
	rounds := syncEnvInt(t, "HOLDFAST_SYNC_ROUNDS", 100)
	p := syncRunProcs(t, syncCountsRole, procs, syncPermits, "SYNC_ROUNDS="+strconv.Itoa(rounds))
	begin := time.Now()
	for _, w := range p.ws {
		line := w.Expect(t, "DONE ", 2*time.Minute)
		require.Equal(t, "DONE "+strconv.Itoa(rounds), line, "worker %d", w.Index)
		require.NoError(t, w.Wait(), "worker %d; output:\n%s", w.Index, w.Output())
	}
	t.Logf("%d processes x %d acquire/release cycles x 2 kinds in %v", procs, rounds, time.Since(begin).Round(time.Millisecond))
	p.requireIntact(t, syncPermits)
	pes := p.c.NewExpirableSemaphore(p.base + ":pes")
	answer(pes.TotalPermits(p.ctx)).is(t, syncPermits)
	answer(pes.AcquiredPermits(p.ctx)).is(t, 0)
}

// syncCountsWorker is one process of TestSyncCountsAcrossProcesses.
func syncCountsWorker(t *testing.T) {
	_, c, ctx := syncWorkerStart(t)
	base := os.Getenv("SYNC_BASE")
	rounds := syncEnvInt(t, "SYNC_ROUNDS", 0)
	for _, k := range syncKinds {
		for i := range rounds {
			release, err := k.acquire(ctx, c, base+":"+k.name, int64(1+i%2))
			require.NoError(t, err, "%s: round %d: acquire", k.name, i)
			require.NoError(t, release(ctx), "%s: round %d: release", k.name, i)
		}
	}
	fmt.Println("DONE", rounds)
}

// TestSyncAtMostNHolders: 3 processes x 8 goroutines take one permit at a
// time of a semaphore of 3 (each kind in turn). Inside, every holder INCRs and
// DECRs a shared Redis counter (INCR's answer counts the holders inside at that
// moment, never more than the real number) and records its interval on the
// host's CLOCK_MONOTONIC (after Acquire returned, before Release was called).
// Neither may ever show more than 3 holders; the sweep over the intervals of
// all processes also shows that the 3 permits were in use together.
func TestSyncAtMostNHolders(t *testing.T) {
	if redistest.WorkerRole() == syncHoldersRole {
		syncHoldersWorker(t)
		return
	}
	iters := syncEnvInt(t, "HOLDFAST_SYNC_ITERS", 25)
	p := syncRunProcs(t, syncHoldersRole, syncHolderProc, syncN, "SYNC_ITERS="+strconv.Itoa(iters))
	begin := time.Now()
	ivs := map[string][]waitInterval{}
	maxInside := map[string]int64{}
	for _, w := range p.ws {
		syncReadWorker(t, w, 2*time.Minute, func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 5 && f[0] == "IV":
				start, err1 := strconv.ParseInt(f[2], 10, 64)
				end, err2 := strconv.ParseInt(f[3], 10, 64)
				require.NoError(t, err1, line)
				require.NoError(t, err2, line)
				ivs[f[1]] = append(ivs[f[1]], waitInterval{start, end, fmt.Sprintf("w%d/%s", w.Index, f[4])})
			case len(f) == 3 && f[0] == "MAX":
				v, err := strconv.ParseInt(f[2], 10, 64)
				require.NoError(t, err, line)
				maxInside[f[1]] = max(maxInside[f[1]], v)
			}
		})
	}
	elapsed := time.Since(begin)

	for _, k := range syncKinds {
		got := ivs[k.name]
		peak, at, open := syncPeak(got)
		t.Logf("%s: %d processes x %d goroutines x %d critical sections in %v: at most %d inside by the counter, %d by the intervals",
			k.name, syncHolderProc, syncGoroutines, iters, elapsed.Round(time.Millisecond), maxInside[k.name], peak)
		require.Len(t, got, syncHolderProc*syncGoroutines*iters, "%s: intervals reported", k.name)
		require.LessOrEqual(t, maxInside[k.name], int64(syncN), "%s: the shared counter saw more than %d holders", k.name, syncN)
		require.LessOrEqual(t, peak, syncN, "%s: %d intervals open at %d: %v", k.name, peak, at, open)
		require.GreaterOrEqual(t, peak, 2, "%s: the permits were never shared: nothing was tested", k.name)
	}
	p.requireIntact(t, syncN)
}

// syncPeak returns the largest number of intervals open at one instant, that
// instant and the intervals open then. An interval that ends when another
// starts does not overlap it.
func syncPeak(ivs []waitInterval) (peak int, at int64, open []waitInterval) {
	type event struct {
		t     int64
		delta int
	}
	events := make([]event, 0, 2*len(ivs))
	for _, iv := range ivs {
		events = append(events, event{iv.start, 1}, event{iv.end, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].t != events[j].t {
			return events[i].t < events[j].t
		}
		return events[i].delta < events[j].delta // ends first
	})
	n := 0
	for _, e := range events {
		n += e.delta
		if n > peak {
			peak, at = n, e.t
		}
	}
	for _, iv := range ivs {
		if iv.start <= at && at < iv.end {
			open = append(open, iv)
		}
	}
	slices.SortFunc(open, func(a, b waitInterval) int { return int(a.start - b.start) })
	return peak, at, open
}

// syncHoldersWorker is one process of TestSyncAtMostNHolders: $SYNC_ITERS
// critical sections per goroutine and kind, reported as
// "IV <kind> <start> <end> <goroutine>" lines and one "MAX <kind> <n>" line
// per kind (the largest INCR answer it saw).
func syncHoldersWorker(t *testing.T) {
	rdb, c, ctx := syncWorkerStart(t)
	base := os.Getenv("SYNC_BASE")
	iters := syncEnvInt(t, "SYNC_ITERS", 0)
	for _, k := range syncKinds {
		name := base + ":" + k.name
		inside := name + ":inside"
		var mu sync.Mutex
		var lines []string
		var most int64
		var errs []error
		var wg sync.WaitGroup
		for g := range syncGoroutines {
			wg.Go(func() {
				for i := range iters {
					release, err := k.acquire(ctx, c, name, 1)
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("g%d/%d: acquire: %w", g, i, err))
						mu.Unlock()
						return
					}
					start := waitMono()
					n, err1 := rdb.Incr(ctx, inside).Result()
					err2 := rdb.Decr(ctx, inside).Err()
					end := waitMono()
					err3 := release(ctx)
					mu.Lock()
					lines = append(lines, fmt.Sprintf("IV %s %d %d g%d", k.name, start, end, g))
					most = max(most, n)
					for _, err := range []error{err1, err2, err3} {
						if err != nil {
							errs = append(errs, fmt.Errorf("g%d/%d: %w", g, i, err))
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, l := range lines {
			fmt.Println(l)
		}
		fmt.Println("MAX", k.name, most)
		for _, err := range errs {
			t.Errorf("%s: %v", k.name, err)
		}
	}
	fmt.Println("DONE")
}

// syncPermitHolderWorker is the holder of TestExpirableDeadHolderPermitReturns:
// with a watchdog timeout of $SYNC_WATCHDOG it takes one permit without a
// lease of the expirable semaphore $SYNC_NAME, says "HELD <id>", and keeps it
// (renewed) until it is killed.
func syncPermitHolderWorker(t *testing.T) {
	wd, err := time.ParseDuration(os.Getenv("SYNC_WATCHDOG"))
	require.NoError(t, err)
	_, c, ctx := syncWorkerClient(t, time.Minute, rlock.WithWatchdogTimeout(wd))
	p := answer(c.NewExpirableSemaphore(os.Getenv("SYNC_NAME")).TryAcquire(ctx, 1)).value(t)
	fmt.Println("HELD", p.IDs()[0])
	select {
	case <-p.Done():
		t.Errorf("permit lost before the worker was killed: %v", p.Err())
	case <-ctx.Done():
		t.Error("not killed within a minute")
	}
}
