package integration

// Tests of the Semaphore against real Redis: invalid counts refused
// before any round trip, a waiter on a semaphore that was never initialised,
// a foreign key at the name. The helpers at the top are shared by the tests
// of the three synchronizers (semaphore, expirable semaphore, latch): their
// keys and channels are spelled here from the protocol facts, not taken from
// the code under test.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
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

// syncPrefixed is Redisson's prefix form of a derived name (protocol §0.2).
func syncPrefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// syncSemChannel is the channel of both semaphore kinds: redisson_sc:{N}.
func syncSemChannel(name string) string { return syncPrefixed("redisson_sc", name) }

// syncTimeoutKey is the permit zset of an expirable semaphore: {N}:timeout.
func syncTimeoutKey(name string) string {
	if strings.Contains(name, "{") {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}

// syncLatchChannel is a latch's channel; the braces are always added.
func syncLatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// syncNoLease is the score of a permit without lease (protocol §1.9).
const syncNoLease = 922337203685477

// syncRawID returns the 16 bytes of a permit id as users see it (32 hex).
func syncRawID(t testing.TB, id string) string {
	t.Helper()
	require.Len(t, id, 32, "permit id %q", id)
	require.Equal(t, strings.ToLower(id), id, "permit ids are lower-case hex")
	b, err := hex.DecodeString(id)
	require.NoError(t, err)
	return string(b)
}

// syncGet returns the integer at key read with a plain GET, and whether the key exists.
func syncGet(t testing.TB, rdb redis.Cmdable, key string) (int64, bool) {
	t.Helper()
	s, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(t, err)
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "%s holds %q", key, s)
	return n, true
}

// syncZCard returns the number of members of the zset at key, expired or not.
func syncZCard(t testing.TB, rdb redis.Cmdable, key string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), key).Result()
	require.NoError(t, err)
	return n
}

// syncScore returns the score of a permit (by its user id) in the zset, and
// whether it is there.
func syncScore(t testing.TB, rdb redis.Cmdable, name, id string) (int64, bool) {
	t.Helper()
	s, err := rdb.ZScore(context.Background(), syncTimeoutKey(name), syncRawID(t, id)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(t, err)
	return int64(s), true
}

// syncDeadClient returns an rlock.Client whose go-redis client points at a
// closed port and counts what it would send: any call that reaches the network
// fails with a dial error and is counted.
func syncDeadClient(t *testing.T, opts ...rlock.ClientOption) (*rlock.Client, *waitCounter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	h := &waitCounter{}
	rdb.AddHook(h)
	return newClient(t, rdb, opts...), h
}

// syncRequireInvalid checks that err is ErrInvalidArgument (and nothing that
// suggests a round trip was tried).
func syncRequireInvalid(t testing.TB, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, what)
	var op *net.OpError
	require.False(t, errors.As(err, &op), "%s: a network error: %v", what, err)
}

// syncForeignKeys are values of other types put at an object's name: the
// object's calls must fail with ErrWrongType and leave them as they are.
var syncForeignKeys = []struct {
	name string
	put  func(ctx context.Context, rdb redis.Cmdable, key string) error
}{
	{"hash", func(ctx context.Context, rdb redis.Cmdable, key string) error {
		return rdb.HSet(ctx, key, "permits", "5", "x", "y").Err()
	}},
	{"list", func(ctx context.Context, rdb redis.Cmdable, key string) error {
		return rdb.RPush(ctx, key, "5", "6").Err()
	}},
	{"non-integer string", func(ctx context.Context, rdb redis.Cmdable, key string) error {
		return rdb.Set(ctx, key, "five", 0).Err()
	}},
	{"float string", func(ctx context.Context, rdb redis.Cmdable, key string) error {
		return rdb.Set(ctx, key, "5.5", 0).Err()
	}},
}

// syncForeign puts the foreign value f at key with a one-hour TTL and returns
// a check that it is still there, byte for byte (DUMP), with its TTL.
func syncForeign(t *testing.T, rdb *redis.Client, key string, put func(context.Context, redis.Cmdable, string) error) func(what string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, put(ctx, rdb, key))
	require.NoError(t, rdb.Expire(ctx, key, time.Hour).Err())
	dump, err := rdb.Dump(ctx, key).Result()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Del(context.Background(), key).Err() })
	return func(what string) {
		t.Helper()
		got, err := rdb.Dump(ctx, key).Result()
		require.NoError(t, err, "%s: the foreign key is gone", what)
		require.Equal(t, dump, got, "%s: the foreign key changed", what)
		require.Greater(t, rdb.TTL(ctx, key).Val(), 59*time.Minute, "%s: its TTL changed", what)
	}
}

// answerOf is a call's reply, value and error, kept for a check on one line:
// answer(l.Count(ctx)).is(t, 2).
type answerOf[T any] struct {
	v   T
	err error
}

// answer keeps the reply of a call that returns a value and an error.
func answer[T any](v T, err error) answerOf[T] { return answerOf[T]{v, err} }

// is requires the reply to be want, without error.
func (a answerOf[T]) is(t testing.TB, want T, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, a.err, msgAndArgs...)
	require.Equal(t, want, a.v, msgAndArgs...)
}

// value requires the reply to have no error and returns its value.
func (a answerOf[T]) value(t testing.TB, msgAndArgs ...any) T {
	t.Helper()
	require.NoError(t, a.err, msgAndArgs...)
	return a.v
}

// errOf is the error of a call that returns a value and an error.
func errOf[T any](_ T, err error) error { return err }

// syncKind is one of the two semaphore kinds, for the tests that run on both.
type syncKind struct {
	name string // in key names and workers' output: "sem", "pes"
	kind string // the type's name, in subtests and messages
	// set is TrySetPermits(n), without TTL.
	set func(ctx context.Context, c *rlock.Client, name string, n int64) (bool, error)
	// acquire takes n permits with Acquire and returns how to give them back.
	acquire func(ctx context.Context, c *rlock.Client, name string, n int64) (func(context.Context) error, error)
	// try is acquire by TryAcquire with a wait time.
	try func(ctx context.Context, c *rlock.Client, name string, n int64, wait time.Duration) (func(context.Context) error, error)
}

// cycle takes n permits with Acquire and gives them back.
func (k syncKind) cycle(ctx context.Context, c *rlock.Client, name string, n int64) error {
	release, err := k.acquire(ctx, c, name, n)
	if err != nil {
		return err
	}
	return release(ctx)
}

// syncSemBack returns how to give back the n permits of s that a call
// ending with err took.
func syncSemBack(s *rlock.Semaphore, n int64, err error) (func(context.Context) error, error) {
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.Release(ctx, n) }, nil
}

// syncPermitsBack returns how to give back the permits p, asked for n, that
// an ExpirableSemaphore's call ending with err took, after checking their ids.
func syncPermitsBack(p *rlock.Permits, err error, n int64) (func(context.Context) error, error) {
	if err != nil {
		return nil, err
	}
	if len(p.IDs()) != int(n) {
		return nil, fmt.Errorf("acquired %d ids for %d permits: %v", len(p.IDs()), n, p.IDs())
	}
	return p.Release, nil
}

var syncKinds = []syncKind{
	{
		name: "sem", kind: "Semaphore",
		set: func(ctx context.Context, c *rlock.Client, name string, n int64) (bool, error) {
			return c.NewSemaphore(name).TrySetPermits(ctx, n, 0)
		},
		acquire: func(ctx context.Context, c *rlock.Client, name string, n int64) (func(context.Context) error, error) {
			s := c.NewSemaphore(name)
			return syncSemBack(s, n, s.Acquire(ctx, n))
		},
		try: func(ctx context.Context, c *rlock.Client, name string, n int64, wait time.Duration) (func(context.Context) error, error) {
			s := c.NewSemaphore(name)
			return syncSemBack(s, n, s.TryAcquire(ctx, n, rlock.WithWaitTime(wait)))
		},
	},
	{
		name: "pes", kind: "ExpirableSemaphore",
		set: func(ctx context.Context, c *rlock.Client, name string, n int64) (bool, error) {
			return c.NewExpirableSemaphore(name).TrySetPermits(ctx, n)
		},
		acquire: func(ctx context.Context, c *rlock.Client, name string, n int64) (func(context.Context) error, error) {
			p, err := c.NewExpirableSemaphore(name).Acquire(ctx, n)
			return syncPermitsBack(p, err, n)
		},
		try: func(ctx context.Context, c *rlock.Client, name string, n int64, wait time.Duration) (func(context.Context) error, error) {
			p, err := c.NewExpirableSemaphore(name).TryAcquire(ctx, n, rlock.WithWaitTime(wait))
			return syncPermitsBack(p, err, n)
		},
	},
}

// syncOffline runs refuse on a fresh name, with a client whose server is gone
// (syncDeadClient), and then checks that none of its calls tried a round trip.
func syncOffline(t *testing.T, refuse func(ctx context.Context, c *rlock.Client, name string)) {
	t.Helper()
	c, calls := syncDeadClient(t)
	refuse(testCtx(t, 10*time.Second), c, redistest.Name(t))
	require.Zero(t, calls.calls.Load()+calls.init.Load(), "no round trip was attempted")
}

// syncEachKind runs f as a subtest for each semaphore kind, with a fresh
// name, a client whose waiters re-check only once a minute (so that only a
// message wakes them in time) and another client.
func syncEachKind(t *testing.T, f func(t *testing.T, ctx context.Context, k syncKind, waiter, other *rlock.Client, name string)) {
	srv := redistest.Shared(t)
	waiter := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	other := newClient(t, srv.Client(t))
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) { f(t, testCtx(t, 30*time.Second), k, waiter, other, redistest.Name(t)) })
	}
}

// syncCall is one call of a synchronizer, reduced to its error.
type syncCall struct {
	what string
	f    func() error
}

// syncRequireWrongType puts each of syncForeignKeys at a fresh name (a subtest
// each) and requires every call that calls returns for that name to fail at
// once with ErrWrongType, leaving the foreign key as it was and writing no
// permit zset.
func syncRequireWrongType(t *testing.T, calls func(ctx context.Context, c *rlock.Client, name string) []syncCall) {
	for _, fk := range syncForeignKeys {
		t.Run(strings.ReplaceAll(fk.name, " ", "_"), func(t *testing.T) {
			rdb, c, name := setup(t)
			ctx := testCtx(t, 20*time.Second)
			check := syncForeign(t, rdb, name, fk.put)
			for _, call := range calls(ctx, c, name) {
				start := time.Now()
				err := call.f()
				require.ErrorIs(t, err, rlock.ErrWrongType, call.what)
				require.Less(t, time.Since(start), 3*time.Second, "%s failed at once", call.what)
				check(call.what)
				require.Zero(t, syncZCard(t, rdb, syncTimeoutKey(name)), "%s wrote no permit", call.what)
			}
		})
	}
}

// TestSemaphoreInvalidCounts: negative and zero counts are ErrInvalidArgument
// for every call that acquires or releases, and so are a negative initial
// count, TTL or wait time, all before any round trip: the client points at a
// closed port and its hook sees nothing.
func TestSemaphoreInvalidCounts(t *testing.T) {
	syncOffline(t, func(ctx context.Context, c *rlock.Client, name string) {
		s := c.NewSemaphore(name)
		for _, n := range []int64{0, -1, -7} {
			syncRequireInvalid(t, s.Acquire(ctx, n), "Acquire("+strconv.FormatInt(n, 10)+")")
			syncRequireInvalid(t, s.TryAcquire(ctx, n), "TryAcquire")
			syncRequireInvalid(t, s.TryAcquire(ctx, n, rlock.WithWaitTime(time.Second)), "TryAcquire with wait")
			syncRequireInvalid(t, s.Release(ctx, n), "Release")
			syncRequireInvalid(t, errOf(s.ReleaseIfExists(ctx, n)), "ReleaseIfExists")
		}
		syncRequireInvalid(t, errOf(s.TrySetPermits(ctx, -1, 0)), "TrySetPermits(-1)")
		syncRequireInvalid(t, errOf(s.TrySetPermits(ctx, 3, -time.Second)), "TrySetPermits with a negative TTL")
		syncRequireInvalid(t, s.TryAcquire(ctx, 1, rlock.WithWaitTime(-time.Second)), "TryAcquire with a negative wait")
		syncRequireInvalid(t, errOf(c.NewSemaphore("").AvailablePermits(ctx)), "empty name")
	})
}

// TestSemaphoreInvalidCountsChangeNothing: the same refusals on a live server leave
// the count as it was, and a positive count still works there.
func TestSemaphoreInvalidCountsChangeNothing(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 10*time.Second)
	s := c.NewSemaphore(name)
	answer(s.TrySetPermits(ctx, 2, 0)).is(t, true)
	syncRequireInvalid(t, s.TryAcquire(ctx, 0), "TryAcquire(0)")
	syncRequireInvalid(t, s.Release(ctx, 0), "Release(0)")
	syncRequireInvalid(t, s.Release(ctx, -2), "Release(-2)")
	v, _ := syncGet(t, rdb, name)
	require.EqualValues(t, 2, v, "nothing changed")
	require.NoError(t, s.TryAcquire(ctx, 2))
	v, _ = syncGet(t, rdb, name)
	require.EqualValues(t, 0, v)
	require.ErrorIs(t, s.TryAcquire(ctx, 1), rlock.ErrNotAcquired)
	require.NoError(t, s.Release(ctx, 2))
	v, _ = syncGet(t, rdb, name)
	require.EqualValues(t, 2, v)
}

// TestSemaphoreNeverInitialised: a waiting Acquire on a semaphore whose key
// does not exist (Redisson waits for ever, #4401) progresses
//   - once another client calls TrySetPermits (its message wakes it: the
//     waiter's re-check interval is far longer than the bound), and
//   - when the permits are set by a raw SET that publishes nothing, within the
//     waiter's re-check interval (the lost-message bound), for both kinds.
func TestSemaphoreNeverInitialised(t *testing.T) {
	t.Run("TrySetPermitsWakes", func(t *testing.T) {
		srv := redistest.Shared(t)
		admin := srv.Client(t)
		waiter := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
		setter := newClient(t, srv.Client(t))
		ctx := testCtx(t, 30*time.Second)
		for _, k := range syncKinds {
			name := redistest.Name(t)
			var release func(context.Context) error
			got := goParked(t, name, func() (err error) { release, err = k.acquire(ctx, waiter, name, 2); return err })[0]
			awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)
			requirePending(t, got, k.kind+".Acquire on a semaphore without key")
			set := time.Now()
			answer(k.set(ctx, setter, name, 3)).is(t, true)
			g := awaitAsync(t, got, 5*time.Second, k.kind+".Acquire after TrySetPermits")
			require.NoError(t, g.err)
			t.Logf("%s: waiter acquired %v after TrySetPermits in another client", k.kind, g.at.Sub(set).Round(time.Millisecond))
			v, _ := syncGet(t, admin, name)
			require.EqualValues(t, 1, v)
			require.NoError(t, release(ctx))
		}
	})

	t.Run("RawSetWithinRecheck", func(t *testing.T) {
		const recheck = 500 * time.Millisecond
		srv := redistest.Shared(t)
		admin := srv.Client(t)
		waiter := newClient(t, srv.Client(t), rlock.WithRecheckInterval(recheck), watchWaits())
		ctx := testCtx(t, 30*time.Second)
		for _, k := range syncKinds {
			name := redistest.Name(t)
			got := goParked(t, name, func() error { return k.cycle(ctx, waiter, name, 1) })[0]
			awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)
			requirePending(t, got, k.kind+".Acquire without key")
			set := time.Now()
			require.NoError(t, admin.Set(ctx, name, 1, 0).Err()) // no PUBLISH: the message is "lost"
			g := awaitAsync(t, got, recheck+5*time.Second, k.kind+".Acquire after a raw SET")
			require.NoError(t, g.err)
			took := g.at.Sub(set)
			t.Logf("%s: lost message (raw SET, no publish): waiter acquired %v after the SET (re-check interval %v)",
				k.kind, took.Round(time.Millisecond), recheck)
			require.Less(t, took, recheck+2*time.Second, "bounded by the re-check interval")
		}
	})
}

// TestSemaphoreWrongType: with a hash, a list or a string that is not an
// integer at the name, every call fails with ErrWrongType (a waiting Acquire
// at once, not after a wait) and the key stays as it was.
func TestSemaphoreWrongType(t *testing.T) {
	syncRequireWrongType(t, func(ctx context.Context, c *rlock.Client, name string) []syncCall {
		s := c.NewSemaphore(name)
		return []syncCall{
			{"TryAcquire", func() error { return s.TryAcquire(ctx, 1) }},
			{"TryAcquire with wait", func() error { return s.TryAcquire(ctx, 1, rlock.WithWaitTime(5*time.Second)) }},
			{"Acquire", func() error { return s.Acquire(ctx, 1) }},
			{"Release", func() error { return s.Release(ctx, 1) }},
			{"ReleaseIfExists", func() error { return errOf(s.ReleaseIfExists(ctx, 1)) }},
			{"TrySetPermits", func() error { return errOf(s.TrySetPermits(ctx, 1, 0)) }},
			{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
			{"AvailablePermits", func() error { return errOf(s.AvailablePermits(ctx)) }},
			{"DrainPermits", func() error { return errOf(s.DrainPermits(ctx)) }},
		}
	})
}

// TestSemaphoreReleaseWakesAsMany: five waiters of one client wait for one
// permit each; a release of 3 permits in another client lets exactly three of
// them in at once, and a release of 2 the last two. The waiters' re-check
// interval is a minute: a release that woke only one waiter per message would
// leave the others for a minute. Both kinds (ExpirableSemaphore's release of a
// 3-id handle publishes 3, its delta).
func TestSemaphoreReleaseWakesAsMany(t *testing.T) {
	syncEachKind(t, func(t *testing.T, ctx context.Context, k syncKind, waiter, other *rlock.Client, name string) {
		admin := redistest.Shared(t).Client(t)
		// The other client holds all 5 permits, as a hold of 3 and one of 2.
		answer(k.set(ctx, other, name, 5)).is(t, true)
		release := map[int64]func(context.Context) error{
			3: answer(k.acquire(ctx, other, name, 3)).value(t),
			2: answer(k.acquire(ctx, other, name, 2)).value(t),
		}
		var mu sync.Mutex
		var got []func(context.Context) error
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, back := range got {
				_ = back(context.Background())
			}
		})
		wait := func() error {
			back, err := k.acquire(ctx, waiter, name, 1)
			if err == nil {
				mu.Lock()
				got = append(got, back)
				mu.Unlock()
			}
			return err
		}
		base := parked.on(name)
		done := make(chan time.Time, 5)
		for range 5 {
			go func() {
				if err := wait(); err != nil {
					t.Error(err)
				}
				done <- time.Now()
			}()
		}
		awaitParked(t, name, base+5)
		awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)

		for _, n := range []int64{3, 2} {
			released := time.Now()
			require.NoError(t, release[n](ctx))
			var slowest time.Duration
			for i := range n {
				select {
				case at := <-done:
					slowest = max(slowest, at.Sub(released))
				case <-time.After(5 * time.Second):
					t.Fatalf("release of %d: only %d waiter(s) got in within 5 s", n, i)
				}
			}
			t.Logf("release of %d permits: %d waiters in, the last %v after the release", n, n, slowest.Round(time.Microsecond))
			require.Less(t, slowest, 2*time.Second, "woken by the release, not by a re-check")
			v, _ := syncGet(t, admin, name)
			require.Zero(t, v, "every released permit was taken")
			if n == 3 {
				require.Equal(t, base+2, parked.on(name), "two waiters still wait")
				select {
				case <-done:
					t.Fatal("a fourth waiter got in with 3 permits released")
				default:
				}
			}
		}
	})
}

// TestSemaphoreWaitTime: TryAcquire with WithWaitTime fails with
// ErrNotAcquired once the wait time is over (not before, not much after), or
// with ctx's error too when ctx ends first, and succeeds when a release comes
// during the wait; for both kinds.
func TestSemaphoreWaitTime(t *testing.T) {
	const wait = 400 * time.Millisecond
	syncEachKind(t, func(t *testing.T, ctx context.Context, k syncKind, c, other *rlock.Client, name string) {
		// The other client holds the only permit.
		answer(k.set(ctx, other, name, 1)).is(t, true)
		release := answer(k.acquire(ctx, other, name, 1)).value(t)
		try := func(ctx context.Context) error {
			back, err := k.try(ctx, c, name, 1, wait)
			if err == nil {
				err = back(ctx)
			}
			return err
		}

		start := time.Now()
		err := try(ctx)
		took := time.Since(start)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		require.GreaterOrEqual(t, took, wait, "gave up before its wait time")
		require.Less(t, took, wait+time.Second)

		short, cancel := context.WithTimeout(ctx, wait/4)
		defer cancel()
		err = try(short)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		got := goAsyncErr(func() error { return try(ctx) })
		awaitSubscribersAtLeast(t, redistest.Shared(t).Client(t), syncSemChannel(name), 1)
		released := time.Now()
		require.NoError(t, release(ctx))
		g := awaitAsync(t, got, 5*time.Second, "TryAcquire with a release during its wait")
		require.NoError(t, g.err)
		t.Logf("%s: wait time %v: gave up after %v; with a release during the wait, acquired %v after it",
			k.kind, wait, took.Round(time.Millisecond), g.at.Sub(released).Round(time.Microsecond))
	})
}

// TestSemaphoreNotAcquiredSaysWhy: a semaphore that was never created says so
// (TrySetPermits creates it), one with too few permits says that: both kinds,
// TryAcquire without a wait time (a wait that runs out says so instead). A bad
// argument is named alone.
func TestSemaphoreNotAcquiredSaysWhy(t *testing.T) {
	admin, c, _ := setup(t)
	ctx := testCtx(t, 30*time.Second)
	for _, k := range syncKinds {
		name := redistest.Name(t) + ":" + k.name
		t.Cleanup(func() { admin.Del(context.Background(), name, syncTimeoutKey(name)) })
		_, err := k.try(ctx, c, name, 1, 0)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		require.Contains(t, err.Error(), "does not exist (TrySetPermits creates it)", k.kind)
		answer(k.set(ctx, c, name, 1)).is(t, true)
		_, err = k.try(ctx, c, name, 2, 0)
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		require.Contains(t, err.Error(), "has fewer than 2 permits available", k.kind)
	}
	s := c.NewSemaphore(redistest.Name(t))
	_, err := s.TrySetPermits(ctx, -1, 0)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.Contains(t, err.Error(), "negative permits -1")
	require.NotContains(t, err.Error(), "time to live")
	_, err = s.TrySetPermits(ctx, 1, -time.Second)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.Contains(t, err.Error(), "negative time to live -1s")
	require.NotContains(t, err.Error(), "permits")
	_, err = c.NewExpirableSemaphore(redistest.Name(t)).TryAcquire(ctx, 1, rlock.WithLeaseTime(-time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.Contains(t, err.Error(), "negative lease time -1s")
	require.NotContains(t, err.Error(), "wait time")
}
