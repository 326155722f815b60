package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Tests of the ExpirableSemaphore (Redisson's
// RPermitExpirableSemaphore) against real Redis: invalid arguments, the
// watchdog-leased permit of a dead holder, expired fixed-lease permits
// reclaimed by exactly the calls Redisson reclaims in, all-or-nothing release,
// a foreign key at the name. The dead holder's worker is in sync_test.go.

// expShortLease is the fixed lease of the permits these tests let expire.
const expShortLease = 100 * time.Millisecond

// expSemaphore makes the expirable semaphore name of permits permits in
// client c; admin deletes its keys at the end of the test.
func expSemaphore(t *testing.T, admin *redis.Client, c *rlock.Client, name string, permits int64) *rlock.ExpirableSemaphore {
	t.Helper()
	t.Cleanup(func() { _ = admin.Del(context.Background(), name, syncTimeoutKey(name)).Err() })
	s := c.NewExpirableSemaphore(name)
	answer(s.TrySetPermits(context.Background(), permits)).is(t, true)
	return s
}

// expNew returns an admin client, an expirable semaphore of permits permits
// on the shared server and its name.
func expNew(t *testing.T, permits int64, opts ...rlock.ClientOption) (*redis.Client, *rlock.ExpirableSemaphore, string) {
	t.Helper()
	admin, c, name := setup(t, opts...)
	return admin, expSemaphore(t, admin, c, name, permits), name
}

// expRandomID returns a permit id that no semaphore holds.
func expRandomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// expExpired takes n permits with a lease of expShortLease and waits until
// they have expired by this host's clock (the clock the scripts compare with):
// they are still in the zset, not reclaimed.
func expExpired(t *testing.T, ctx context.Context, admin *redis.Client, s *rlock.ExpirableSemaphore, n int64) []string {
	t.Helper()
	p, err := s.TryAcquire(ctx, n, rlock.WithLeaseTime(expShortLease))
	require.NoError(t, err)
	ids := p.IDs()
	require.Len(t, ids, int(n))
	for _, id := range ids {
		score, ok := syncScore(t, admin, s.Name(), id)
		require.True(t, ok, "permit %s in the zset", id)
		require.Less(t, score, int64(syncNoLease), "a fixed lease has a real expiry")
		require.Eventually(t, func() bool { return time.Now().UnixMilli() > score }, 5*time.Second, time.Millisecond)
	}
	return ids
}

// expLive takes n permits without a lease (watchdog-renewed): not expiring
// during the test.
func expLive(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, n int64) *rlock.Permits {
	t.Helper()
	p, err := s.TryAcquire(ctx, n)
	require.NoError(t, err)
	require.Len(t, p.IDs(), int(n))
	t.Cleanup(func() { _ = p.Release(context.Background()) })
	return p
}

// expState is the raw state of an expirable semaphore: GET N and the zset.
type expState struct {
	available int64
	exists    bool
	permits   []redis.Z
}

func expRead(t *testing.T, admin *redis.Client, name string) expState {
	t.Helper()
	v, ok := syncGet(t, admin, name)
	zs, err := admin.ZRangeWithScores(context.Background(), syncTimeoutKey(name), 0, -1).Result()
	require.NoError(t, err)
	return expState{v, ok, zs}
}

// expEnds waits (at most within) for the handle p to end, and checks its
// error; since is when what ended it happened.
func expEnds(t testing.TB, p *rlock.Permits, since time.Time, within time.Duration, want error, what string) {
	t.Helper()
	select {
	case <-p.Done():
		t.Logf("%s: the handle ended %v later: %v", what, time.Since(since).Round(time.Millisecond), p.Err())
		require.ErrorIs(t, p.Err(), want, what)
	case <-time.After(within):
		t.Fatalf("%s: the handle did not end within %v (Err %v)", what, within, p.Err())
	}
}

// expWithExpired is the setting of TestExpirableReclaim's cases: a semaphore
// of 4 with 2 permits held by live (taken first: TryAcquire reclaims) and 1
// permit whose fixed lease has run out, expired, still in the zset.
type expWithExpired struct {
	ctx     context.Context
	admin   *redis.Client
	s       *rlock.ExpirableSemaphore
	name    string
	live    *rlock.Permits
	expired string
}

func expNewWithExpired(t *testing.T) expWithExpired {
	t.Helper()
	e := expWithExpired{ctx: testCtx(t, 20*time.Second)}
	e.admin, e.s, e.name = expNew(t, 4)
	e.live = expLive(t, e.ctx, e.s, 2)
	e.expired = expExpired(t, e.ctx, e.admin, e.s, 1)[0]
	st := expRead(t, e.admin, e.name)
	require.EqualValues(t, 1, st.available)
	require.Len(t, st.permits, 3)
	return e
}

// TestExpirableInvalidArguments: zero and negative counts, an empty id list,
// ids that are not 32 hex digits and negative durations are
// ErrInvalidArgument before any round trip.
func TestExpirableInvalidArguments(t *testing.T) {
	syncOffline(t, func(ctx context.Context, c *rlock.Client, name string) {
		s := c.NewExpirableSemaphore(name)
		for _, n := range []int64{0, -1, -7} {
			syncRequireInvalid(t, errOf(s.Acquire(ctx, n)), "Acquire")
			syncRequireInvalid(t, errOf(s.TryAcquire(ctx, n)), "TryAcquire")
			syncRequireInvalid(t, errOf(s.TryAcquire(ctx, n, rlock.WithWaitTime(time.Second), rlock.WithLeaseTime(time.Second))),
				"TryAcquire with wait and lease")
		}
		syncRequireInvalid(t, errOf(s.TrySetPermits(ctx, -1)), "TrySetPermits(-1)")
		syncRequireInvalid(t, s.SetPermits(ctx, -1), "SetPermits(-1)")
		syncRequireInvalid(t, s.Release(ctx), "Release without ids")
		for _, bad := range []string{"", "abc", strings.Repeat("z", 32), expRandomID() + "00", expRandomID()[:30]} {
			syncRequireInvalid(t, s.Release(ctx, bad), "Release("+bad+")")
			syncRequireInvalid(t, s.Release(ctx, expRandomID(), bad), "Release(ok, "+bad+")")
			syncRequireInvalid(t, errOf(s.LeaseTime(ctx, bad)), "LeaseTime("+bad+")")
			syncRequireInvalid(t, errOf(s.UpdateLease(ctx, bad, time.Second)), "UpdateLease("+bad+")")
		}
		syncRequireInvalid(t, errOf(s.TryAcquire(ctx, 1, rlock.WithLeaseTime(-2*time.Second))), "TryAcquire with a negative lease")
		syncRequireInvalid(t, errOf(s.Acquire(ctx, 1, rlock.WithLeaseTime(-2*time.Second))), "Acquire with a negative lease")
		syncRequireInvalid(t, errOf(s.UpdateLease(ctx, expRandomID(), -2*time.Second)), "UpdateLease with a negative lease other than NoExpiry")
		syncRequireInvalid(t, errOf(s.TryAcquire(ctx, 1, rlock.WithWaitTime(-time.Second))), "TryAcquire with a negative wait")
		syncRequireInvalid(t, errOf(c.NewExpirableSemaphore("").TotalPermits(ctx)), "empty name")
	})
}

// TestExpirableDeadHolderPermitReturns: a permit taken without a lease by a
// process whose client has a 1 s watchdog timeout is renewed while the process
// lives (a waiter in the test does not get it past the first expiry), and comes
// back within the timeout once the process is killed with SIGKILL: the waiter
// acquires it, and the dead holder's id is gone from the zset.
func TestExpirableDeadHolderPermitReturns(t *testing.T) {
	if redistest.WorkerRole() == syncPermitHolderRole {
		syncPermitHolderWorker(t)
		return
	}
	const watchdog = time.Second
	admin, s, name := expNew(t, 1)
	ctx := testCtx(t, 60*time.Second)
	w := redistest.StartWorker(t, t.Name(), syncPermitHolderRole,
		"WAIT_ADDR="+redistest.Shared(t).Addr, "SYNC_NAME="+name, "SYNC_WATCHDOG="+watchdog.String())
	id := strings.TrimPrefix(w.Expect(t, "HELD ", 60*time.Second), "HELD ")
	first, ok := syncScore(t, admin, name, id)
	require.True(t, ok, "the holder's permit is in the zset")
	require.Less(t, first, int64(syncNoLease), "a watchdog permit has a real expiry")
	require.InDelta(t, time.Now().Add(watchdog).UnixMilli(), first, float64(watchdog.Milliseconds()),
		"its expiry is about now + the watchdog timeout")

	got := goAsync(func() (*rlock.Permits, error) { return s.Acquire(ctx, 1) })
	awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)

	// While the holder lives its watchdog moves the expiry forward: wait past
	// the first expiry; the waiter must still be waiting.
	require.Eventually(t, func() bool { return time.Now().UnixMilli() > first+200 }, 5*time.Second, 5*time.Millisecond)
	requirePending(t, got, "Acquire while the holder's watchdog renews its permit")
	renewed, ok := syncScore(t, admin, name, id)
	require.True(t, ok, "the live holder's permit was not reclaimed")
	require.Greater(t, renewed, first, "the watchdog renewed the permit")

	killed := time.Now()
	require.NoError(t, w.Signal(syscall.SIGKILL))
	<-w.Done()
	g := awaitAsync(t, got, watchdog+10*time.Second, "Acquire after the holder was killed")
	require.NoError(t, g.err)
	took := g.at.Sub(killed)
	t.Logf("watchdog timeout %v: the dead holder's permit came back and the waiter acquired it %v after SIGKILL",
		watchdog, took.Round(time.Millisecond))
	require.Less(t, took, watchdog+2*time.Second, "back within the watchdog timeout (plus margin)")
	_, ok = syncScore(t, admin, name, id)
	require.False(t, ok, "the dead holder's id was reclaimed")
	require.EqualValues(t, 1, syncZCard(t, admin, syncTimeoutKey(name)), "only the waiter's permit")
	require.NoError(t, g.v.Release(ctx))
	st := expRead(t, admin, name)
	require.EqualValues(t, 1, st.available)
	require.Empty(t, st.permits)
}

// TestExpirableReclaim: expired fixed-lease permits are returned to the pool by
// the next call that Redisson reclaims in — AvailablePermits, AcquiredPermits,
// Permits, TryAcquire (at most as many as it asks for), UpdateLease, LeaseTime
// and a release of several ids — and not by a release of one id, SetPermits,
// TrySetPermits or AddPermits (the zset is read directly; afterwards a
// reclaiming call proves the permit was reclaimable all along).
func TestExpirableReclaim(t *testing.T) {
	reclaiming := []struct {
		name string
		// op runs the call with one expired permit and the live permits live
		// (2 ids) in a semaphore of 4, and checks its answer.
		op func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits)
	}{
		{"AvailablePermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) {
			answer(s.AvailablePermits(ctx)).is(t, 2)
		}},
		{"AcquiredPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) {
			answer(s.AcquiredPermits(ctx)).is(t, 2)
		}},
		{"TotalPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) {
			answer(s.TotalPermits(ctx)).is(t, 4)
		}},
		{"UpdateLease", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			answer(s.UpdateLease(ctx, live.IDs()[0], time.Hour)).is(t, true)
		}},
		{"LeaseTime", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			require.Positive(t, answer(s.LeaseTime(ctx, live.IDs()[0])).value(t))
		}},
		{"ReleaseSeveral", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			require.NoError(t, s.Release(ctx, live.IDs()...))
		}},
	}
	for _, tc := range reclaiming {
		t.Run("Reclaims/"+tc.name, func(t *testing.T) {
			e := expNewWithExpired(t)
			tc.op(t, e.ctx, e.s, e.live)
			_, ok := syncScore(t, e.admin, e.name, e.expired)
			require.False(t, ok, "%s reclaimed the expired permit", tc.name)
			after := expRead(t, e.admin, e.name)
			released := int64(0)
			if tc.name == "ReleaseSeveral" {
				released = 2
			}
			require.EqualValues(t, 2+released, after.available, "the expired permit went back to the pool")
			require.Len(t, after.permits, 2-int(released), "the live permits stay")
		})
	}

	t.Run("Reclaims/TryAcquireAtMostAsMany", func(t *testing.T) {
		admin, s, name := expNew(t, 3)
		ctx := testCtx(t, 20*time.Second)
		expLive(t, ctx, s, 1)
		expired := expExpired(t, ctx, admin, s, 2)
		require.EqualValues(t, 0, expRead(t, admin, name).available, "no permit is available but by reclaim")

		p := answer(s.TryAcquire(ctx, 1)).value(t, "TryAcquire reclaims an expired permit")
		st := expRead(t, admin, name)
		require.EqualValues(t, 0, st.available)
		require.Len(t, st.permits, 3, "one expired permit reclaimed (not both): it asked for one")
		left := 0
		for _, id := range expired {
			if _, ok := syncScore(t, admin, name, id); ok {
				left++
			}
		}
		require.Equal(t, 1, left, "exactly one of the two expired permits is left")
		_, ok := syncScore(t, admin, name, p.IDs()[0])
		require.True(t, ok)
		require.NoError(t, p.Release(ctx))
	})

	notReclaiming := []struct {
		name string
		// op runs the call (one expired permit, live holds 2 ids, 4 permits:
		// N = 1) and returns the available count it should leave and how many
		// members the zset should keep.
		op func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) (int64, int)
	}{
		{"ReleaseOne", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) (int64, int) {
			require.NoError(t, s.Release(ctx, live.IDs()[0]))
			return 2, 2
		}},
		{"SetPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) (int64, int) {
			require.NoError(t, s.SetPermits(ctx, 6))
			return 3, 3 // the total counts the expired permit: 6 - 3 members
		}},
		{"TrySetPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) (int64, int) {
			answer(s.TrySetPermits(ctx, 9)).is(t, false, "the semaphore exists")
			return 1, 3
		}},
		{"AddPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) (int64, int) {
			require.NoError(t, s.AddPermits(ctx, 2))
			return 3, 3
		}},
	}
	for _, tc := range notReclaiming {
		t.Run("Keeps/"+tc.name, func(t *testing.T) {
			e := expNewWithExpired(t)
			available, members := tc.op(t, e.ctx, e.s, e.live)
			st := expRead(t, e.admin, e.name)
			require.Equal(t, available, st.available, "available after %s", tc.name)
			require.Len(t, st.permits, members, "members after %s", tc.name)
			_, ok := syncScore(t, e.admin, e.name, e.expired)
			require.True(t, ok, "%s did not reclaim the expired permit", tc.name)

			answer(e.s.AvailablePermits(e.ctx)).is(t, available+1, "the next reclaiming call returns it")
			_, ok = syncScore(t, e.admin, e.name, e.expired)
			require.False(t, ok)
		})
	}
}

// TestExpirableReleaseAllOrNothing: a release of several ids of which one is
// stale (released before, expired, or never acquired) fails with
// ErrNoSuchPermit and changes nothing: not the count, not the zset (an expired
// bystander is not reclaimed either), no message; the live handle is still
// held, and releasing the live ids alone then works.
func TestExpirableReleaseAllOrNothing(t *testing.T) {
	for _, stale := range []string{"released", "expired", "unknown"} {
		t.Run(stale, func(t *testing.T) {
			admin, s, name := expNew(t, 6)
			ctx := testCtx(t, 20*time.Second)
			// Every acquisition comes before the expiries: TryAcquire reclaims.
			live := expLive(t, ctx, s, 2)
			var staleID, bystander string
			switch stale {
			case "released":
				staleID = answer(s.TryAcquire(ctx, 1)).value(t).IDs()[0]
				require.NoError(t, s.Release(ctx, staleID))
				bystander = expExpired(t, ctx, admin, s, 1)[0]
			case "expired":
				ids := expExpired(t, ctx, admin, s, 2)
				staleID, bystander = ids[0], ids[1]
			case "unknown":
				staleID = expRandomID()
				bystander = expExpired(t, ctx, admin, s, 1)[0]
			}
			before := expRead(t, admin, name)

			sub := admin.Subscribe(ctx, syncSemChannel(name))
			t.Cleanup(func() { _ = sub.Close() })
			require.NoError(t, errOf(sub.Receive(ctx)), "the confirmation")

			ids := []string{live.IDs()[0], staleID, live.IDs()[1]}
			err := s.Release(ctx, ids...)
			require.ErrorIs(t, err, rlock.ErrNoSuchPermit, "one stale id among %v", ids)
			require.Equal(t, before, expRead(t, admin, name), "nothing changed")
			_, ok := syncScore(t, admin, name, bystander)
			require.True(t, ok, "the expired bystander was not reclaimed")
			require.NoError(t, live.Err(), "the live permits are still held")

			// Nothing was published: the first message is the marker sent now.
			require.NoError(t, admin.Publish(ctx, syncSemChannel(name), "marker").Err())
			rwRequireMessage(t, sub, "marker") // else the failed release published something

			require.NoError(t, s.Release(ctx, live.IDs()...), "the live ids alone release")
			// As Redisson: the reclaim publishes the available count it made
			// (6 less the 2 live permits), then the release its delta, the
			// number released: 2.
			rwRequireMessage(t, sub, "4")
			rwRequireMessage(t, sub, "2")
			after := expRead(t, admin, name)
			_, ok = syncScore(t, admin, name, bystander)
			require.False(t, ok, "the successful release reclaimed the bystander")
			require.Empty(t, after.permits, "the stale expired id, if any, was reclaimed too")
			require.EqualValues(t, 6, after.available, "every permit is back")
		})
	}
}

// TestExpirableWrongType: with a hash, a list or a string that is not an
// integer at the name, every call fails with ErrWrongType (a waiting Acquire
// at once) and the key stays as it was.
func TestExpirableWrongType(t *testing.T) {
	syncRequireWrongType(t, func(ctx context.Context, c *rlock.Client, name string) []syncCall {
		s := c.NewExpirableSemaphore(name)
		id := expRandomID()
		return []syncCall{
			{"TryAcquire", func() error { return errOf(s.TryAcquire(ctx, 1)) }},
			{"TryAcquire with wait", func() error { return errOf(s.TryAcquire(ctx, 2, rlock.WithWaitTime(5*time.Second))) }},
			{"Acquire", func() error { return errOf(s.Acquire(ctx, 1, rlock.WithLeaseTime(time.Minute))) }},
			{"Release one", func() error { return s.Release(ctx, id) }},
			{"Release several", func() error { return s.Release(ctx, id, expRandomID()) }},
			{"UpdateLease", func() error { return errOf(s.UpdateLease(ctx, id, time.Minute)) }},
			{"LeaseTime", func() error { return errOf(s.LeaseTime(ctx, id)) }},
			{"AvailablePermits", func() error { return errOf(s.AvailablePermits(ctx)) }},
			{"AcquiredPermits", func() error { return errOf(s.AcquiredPermits(ctx)) }},
			{"TotalPermits", func() error { return errOf(s.TotalPermits(ctx)) }},
			{"SetPermits", func() error { return s.SetPermits(ctx, 3) }},
			{"TrySetPermits", func() error { return errOf(s.TrySetPermits(ctx, 3)) }},
			{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
		}
	})
}

// TestExpirablePermitsHandleEnds: a Permits handle's Done closes, and Err says
// why, however its permits end: a fixed lease that runs out (ErrPermitLost, at
// the lease's end), a watchdog permit removed from the zset, released by id in
// another client, or its semaphore deleted (ErrPermitLost within about one
// renewal interval, 333 ms here), its own Release (ErrReleased; a second
// Release gives nothing back twice) and Close of its client (ErrClosed, the
// permit given back).
func TestExpirablePermitsHandleEnds(t *testing.T) {
	const watchdog = time.Second
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	other := newClient(t, srv.Client(t))

	// start returns a semaphore of 3 permits, in a client with a 1 s watchdog,
	// and a handle of one of them taken with opts.
	start := func(t *testing.T, c *rlock.Client, opts ...rlock.TryOption) (*rlock.ExpirableSemaphore, *rlock.Permits, string) {
		t.Helper()
		name := redistest.Name(t)
		s := expSemaphore(t, admin, c, name, 3)
		p := answer(s.TryAcquire(testCtx(t, 20*time.Second), 1, opts...)).value(t)
		require.NoError(t, p.Err())
		return s, p, name
	}

	t.Run("FixedLeaseRunsOut", func(t *testing.T) {
		c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
		const lease = 300 * time.Millisecond
		taken := time.Now()
		_, p, name := start(t, c, rlock.WithLeaseTime(lease))
		expEnds(t, p, taken, lease+2*time.Second, rlock.ErrPermitLost, "fixed lease ran out")
		require.GreaterOrEqual(t, time.Since(taken), lease-20*time.Millisecond, "not before the lease's end")
		// The lost handle's Release still gives the expired permit back (as
		// Redisson's tryRelease(id) does), and says it was not held.
		err := p.Release(testCtx(t, 5*time.Second))
		require.ErrorIs(t, err, rlock.ErrNoSuchPermit)
		st := expRead(t, admin, name)
		require.EqualValues(t, 3, st.available)
		require.Empty(t, st.permits)
	})

	for _, tc := range []struct {
		name string
		end  func(t *testing.T, s *rlock.ExpirableSemaphore, p *rlock.Permits, name string)
	}{
		{"RemovedFromZset", func(t *testing.T, _ *rlock.ExpirableSemaphore, p *rlock.Permits, name string) {
			require.EqualValues(t, 1, admin.ZRem(context.Background(), syncTimeoutKey(name), syncRawID(t, p.IDs()[0])).Val())
		}},
		{"ReleasedByIDInAnotherClient", func(t *testing.T, _ *rlock.ExpirableSemaphore, p *rlock.Permits, name string) {
			require.NoError(t, other.NewExpirableSemaphore(name).Release(context.Background(), p.IDs()[0]))
		}},
		{"SemaphoreDeleted", func(t *testing.T, s *rlock.ExpirableSemaphore, _ *rlock.Permits, _ string) {
			answer(s.Delete(context.Background())).is(t, true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
			s, p, name := start(t, c)
			ended := time.Now()
			tc.end(t, s, p, name)
			expEnds(t, p, ended, 2*time.Second, rlock.ErrPermitLost, tc.name)
		})
	}

	t.Run("Released", func(t *testing.T) {
		c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
		_, p, name := start(t, c)
		ctx := testCtx(t, 5*time.Second)
		require.NoError(t, p.Release(ctx))
		expEnds(t, p, time.Now(), time.Millisecond, rlock.ErrReleased, "Release")
		err := p.Release(ctx)
		require.ErrorIs(t, err, rlock.ErrNoSuchPermit, "a second Release")
		st := expRead(t, admin, name)
		require.EqualValues(t, 3, st.available, "given back once")
		require.Empty(t, st.permits)
	})

	t.Run("ClientClosed", func(t *testing.T) {
		c, err := rlock.New(srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
		require.NoError(t, err)
		_, p, name := start(t, c)
		require.NoError(t, c.Close())
		expEnds(t, p, time.Now(), time.Millisecond, rlock.ErrClosed, "Close")
		st := expRead(t, admin, name)
		require.EqualValues(t, 3, st.available, "Close gave the permit back")
		require.Empty(t, st.permits)
	})
}

// TestExpirableReleaseOfOneExpiredID: a list of one id is Redisson's
// tryRelease(id), not the all-or-nothing tryRelease(ids) (docs/porting.md): an
// expired id goes back to the pool, its new count is published, and the call
// fails with ErrNoSuchPermit.
func TestExpirableReleaseOfOneExpiredID(t *testing.T) {
	admin, s, name := expNew(t, 2)
	ctx := testCtx(t, 20*time.Second)
	expired := expExpired(t, ctx, admin, s, 1)[0]
	sub := admin.Subscribe(ctx, syncSemChannel(name))
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, errOf(sub.Receive(ctx)), "the confirmation")

	err := s.Release(ctx, expired)
	require.ErrorIs(t, err, rlock.ErrNoSuchPermit)
	require.Contains(t, err.Error(), "had expired (it went back to the pool)")
	rwRequireMessage(t, sub, "2")
	after := expRead(t, admin, name)
	require.Empty(t, after.permits)
	require.EqualValues(t, 2, after.available, "the expired permit went back")
}

// A Permits handle follows what its own client does to its permits by id: a
// release by ExpirableSemaphore.Release ends it at once, as released, and an
// UpdateLease moves its deadline, so that the handle never says valid past the
// expiry Redis holds nor ends while Redis still holds the permit for it.

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

// An acquisition of an expirable semaphore whose reply arrives after the
// permits' lease, and whose give-back never reaches Redis, must not come back
// as a handle that says valid on a permit Redis counts as expired: another
// client would reclaim it and hold it too (two valid handles on a semaphore of
// one permit).

// failScript makes the next script call on a client whose first key is key
// and which has keys keys fail without reaching Redis, as on a broken
// connection. Arm it, then read how many calls it failed.
type failScript struct {
	key  string
	keys int

	mu     sync.Mutex
	armed  bool
	failed int
}

func (f *failScript) arm() {
	f.mu.Lock()
	f.armed = true
	f.mu.Unlock()
}

func (f *failScript) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// matches reports whether cmd is the script call to fail, and disarms.
func (f *failScript) matches(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 4 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	if n, ok := args[2].(int); !ok || n != f.keys || args[3] != f.key {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return false
	}
	f.armed = false
	f.failed++
	return true
}

func (f *failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.matches(cmd) {
			err := errors.New("test: connection broken before the command was sent")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestExpirableLateReplyNeverGrantsAnExpiredPermit: A's Acquire on a semaphore
// of one permit has its reply held back past the permit's lease; A gives the
// permit back, but the give-back fails before it reaches Redis; A attempts
// again with the same ids. The handle A gets must describe a permit Redis holds
// unexpired, and while it says valid, B must not acquire. Both leases: the
// watchdog's and a fixed one.
func TestExpirableLateReplyNeverGrantsAnExpiredPermit(t *testing.T) {
	const lease = time.Second
	for _, tc := range []struct {
		name   string
		client []rlock.ClientOption
		permit []rlock.AcquireOption
	}{
		{"watchdog lease", []rlock.ClientOption{rlock.WithWatchdogTimeout(lease)}, nil},
		{"fixed lease", nil, []rlock.AcquireOption{rlock.WithLeaseTime(lease)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			direct := srv.Client(t)
			name := redistest.Name(t)
			proxy := redistest.NewProxy(t, srv.Addr)
			rdbA := srv.Client(t, func(o *redis.Options) { o.Addr = proxy.Addr; o.ReadTimeout = 10 * time.Second })
			giveBack := &failScript{key: name, keys: 4} // permit_release: N, {N}:timeout, channel, request
			rdbA.AddHook(giveBack)
			a := newClient(t, rdbA, tc.client...)
			b := newClient(t, direct)
			ctx := testCtx(t, time.Minute)
			sA := expSemaphore(t, direct, a, name, 1)
			sB := b.NewExpirableSemaphore(name)

			proxy.DelayNextReplies(1, lease+300*time.Millisecond) // the acquisition's reply, and no other
			giveBack.arm()
			got := make(chan *rlock.Permits, 1)
			go func() {
				p, err := sA.Acquire(ctx, 1, tc.permit...)
				if err != nil {
					t.Errorf("A's Acquire: %v", err)
				}
				got <- p
			}()
			var p *rlock.Permits
			select {
			case p = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("A's Acquire did not return")
			}
			require.NotNil(t, p)
			t.Cleanup(func() { _ = p.Release(context.Background()) })
			require.Equal(t, 1, giveBack.count(), "the late reply's give-back was sent, and failed")

			// What the handle says must be what Redis holds.
			checked := time.Now()
			score, ok := syncScore(t, direct, name, p.IDs()[0])
			if p.Err() == nil {
				require.True(t, ok, "A's handle says valid: Redis must hold its permit")
				require.Greater(t, score, checked.UnixMilli(),
					"A's handle says valid: its permit must not be expired in Redis (score %d ms after the check)", score-checked.UnixMilli())
			}

			// Never two valid handles: B acquires only once A's handle has ended.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for deadline := time.Now().Add(2 * lease); time.Now().Before(deadline); <-tick.C {
				q, err := sB.TryAcquire(ctx, 1, rlock.WithLeaseTime(lease))
				if errors.Is(err, rlock.ErrNotAcquired) {
					continue
				}
				require.NoError(t, err)
				require.Error(t, p.Err(), "B acquired the only permit while A's handle says valid")
				require.NoError(t, q.Release(ctx))
				break
			}
			t.Logf("A's handle at the end: %v", p.Err())
			total, err := sB.TotalPermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, total, "available plus acquired: no permit lost or made")
		})
	}
}
