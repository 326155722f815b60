package integration

// Tests of issue 19's ExpirableSemaphore (Redisson's
// RPermitExpirableSemaphore) against real Redis: invalid arguments, the
// watchdog-leased permit of a dead holder, expired fixed-lease permits
// reclaimed by exactly the calls Redisson reclaims in, all-or-nothing release,
// a foreign key at the name. The dead holder's worker is in sync_procs_test.go.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// expShortLease is the fixed lease of the permits these tests let expire.
const expShortLease = 100 * time.Millisecond

// expNew returns an admin client, an expirable semaphore of permits permits
// on the shared server and its name.
func expNew(t *testing.T, permits int64, opts ...rlock.ClientOption) (*redis.Client, *rlock.ExpirableSemaphore, string) {
	t.Helper()
	admin, c, name := setup(t, opts...)
	s := c.NewExpirableSemaphore(name)
	ok, err := s.TrySetPermits(context.Background(), permits)
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { _ = admin.Del(context.Background(), name, syncTimeoutKey(name)).Err() })
	return admin, s, name
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
	p, err := s.TryAcquire(ctx, n, rlock.WithPermitLease(expShortLease))
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

// TestExpirableInvalidArguments: zero and negative counts, an empty id list,
// ids that are not 32 hex digits and negative durations are
// ErrInvalidArgument before any round trip.
func TestExpirableInvalidArguments(t *testing.T) {
	c, calls := syncDeadClient(t)
	ctx := testCtx(t, 10*time.Second)
	s := c.NewExpirableSemaphore(redistest.Name(t))
	for _, n := range []int64{0, -1, -7} {
		_, err := s.Acquire(ctx, n)
		syncRequireInvalid(t, err, "Acquire")
		_, err = s.TryAcquire(ctx, n)
		syncRequireInvalid(t, err, "TryAcquire")
		_, err = s.TryAcquire(ctx, n, rlock.WithWaitTime(time.Second), rlock.WithPermitLease(time.Second))
		syncRequireInvalid(t, err, "TryAcquire with wait and lease")
	}
	_, err := s.TrySetPermits(ctx, -1)
	syncRequireInvalid(t, err, "TrySetPermits(-1)")
	syncRequireInvalid(t, s.SetPermits(ctx, -1), "SetPermits(-1)")
	syncRequireInvalid(t, s.Release(ctx), "Release without ids")
	for _, bad := range []string{"", "abc", strings.Repeat("z", 32), expRandomID() + "00", expRandomID()[:30]} {
		syncRequireInvalid(t, s.Release(ctx, bad), "Release("+bad+")")
		syncRequireInvalid(t, s.Release(ctx, expRandomID(), bad), "Release(ok, "+bad+")")
		_, err = s.LeaseTime(ctx, bad)
		syncRequireInvalid(t, err, "LeaseTime("+bad+")")
		_, err = s.UpdateLease(ctx, bad, time.Second)
		syncRequireInvalid(t, err, "UpdateLease("+bad+")")
	}
	_, err = s.TryAcquire(ctx, 1, rlock.WithPermitLease(-2*time.Second))
	syncRequireInvalid(t, err, "TryAcquire with a negative lease")
	_, err = s.Acquire(ctx, 1, rlock.WithPermitLease(-2*time.Second))
	syncRequireInvalid(t, err, "Acquire with a negative lease")
	_, err = s.UpdateLease(ctx, expRandomID(), -2*time.Second)
	syncRequireInvalid(t, err, "UpdateLease with a negative lease other than NoLease")
	_, err = s.TryAcquire(ctx, 1, rlock.WithWaitTime(-time.Second))
	syncRequireInvalid(t, err, "TryAcquire with a negative wait")
	_, err = c.NewExpirableSemaphore("").Permits(ctx)
	syncRequireInvalid(t, err, "empty name")
	require.Zero(t, calls.calls.Load()+calls.init.Load(), "no round trip was attempted")
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
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	c := newClient(t, srv.Client(t))
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	s := c.NewExpirableSemaphore(name)
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { _ = admin.Del(context.Background(), name, syncTimeoutKey(name)).Err() })

	w := redistest.StartWorker(t, t.Name(), syncPermitHolderRole,
		"WAIT_ADDR="+srv.Addr, "SYNC_NAME="+name, "SYNC_WATCHDOG="+watchdog.String())
	id := strings.TrimPrefix(w.Expect(t, "HELD ", 60*time.Second), "HELD ")
	first, ok := syncScore(t, admin, name, id)
	require.True(t, ok, "the holder's permit is in the zset")
	require.Less(t, first, int64(syncNoLease), "a watchdog permit has a real expiry")
	require.InDelta(t, time.Now().Add(watchdog).UnixMilli(), first, float64(watchdog.Milliseconds()),
		"its expiry is about now + the watchdog timeout")

	got := syncGo(func() (*rlock.Permits, error) { return s.Acquire(ctx, 1) })
	syncAwaitSubs(t, admin, syncSemChannel(name), 1)

	// While the holder lives its watchdog moves the expiry forward: wait past
	// the first expiry; the waiter must still be waiting.
	require.Eventually(t, func() bool { return time.Now().UnixMilli() > first+200 }, 5*time.Second, 5*time.Millisecond)
	syncPending(t, got, "Acquire while the holder's watchdog renews its permit")
	renewed, ok := syncScore(t, admin, name, id)
	require.True(t, ok, "the live holder's permit was not reclaimed")
	require.Greater(t, renewed, first, "the watchdog renewed the permit")

	killed := time.Now()
	require.NoError(t, w.Signal(syscall.SIGKILL))
	<-w.Done()
	g := syncAwait(t, got, watchdog+10*time.Second, "Acquire after the holder was killed")
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
			n, err := s.AvailablePermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
		}},
		{"AcquiredPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) {
			n, err := s.AcquiredPermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
		}},
		{"Permits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) {
			n, err := s.Permits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 4, n)
		}},
		{"UpdateLease", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			ok, err := s.UpdateLease(ctx, live.IDs()[0], time.Hour)
			require.NoError(t, err)
			require.True(t, ok)
		}},
		{"LeaseTime", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			d, err := s.LeaseTime(ctx, live.IDs()[0])
			require.NoError(t, err)
			require.Positive(t, d)
		}},
		{"ReleaseSeveral", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, live *rlock.Permits) {
			require.NoError(t, s.Release(ctx, live.IDs()...))
		}},
	}
	for _, tc := range reclaiming {
		t.Run("Reclaims/"+tc.name, func(t *testing.T) {
			admin, s, name := expNew(t, 4)
			ctx := testCtx(t, 20*time.Second)
			live := expLive(t, ctx, s, 2) // first: TryAcquire reclaims
			expired := expExpired(t, ctx, admin, s, 1)[0]
			before := expRead(t, admin, name)
			require.EqualValues(t, 1, before.available)
			require.Len(t, before.permits, 3)

			tc.op(t, ctx, s, live)
			_, ok := syncScore(t, admin, name, expired)
			require.False(t, ok, "%s reclaimed the expired permit", tc.name)
			after := expRead(t, admin, name)
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

		p, err := s.TryAcquire(ctx, 1)
		require.NoError(t, err, "TryAcquire reclaims an expired permit")
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
			ok, err := s.TrySetPermits(ctx, 9)
			require.NoError(t, err)
			require.False(t, ok, "the semaphore exists")
			return 1, 3
		}},
		{"AddPermits", func(t *testing.T, ctx context.Context, s *rlock.ExpirableSemaphore, _ *rlock.Permits) (int64, int) {
			require.NoError(t, s.AddPermits(ctx, 2))
			return 3, 3
		}},
	}
	for _, tc := range notReclaiming {
		t.Run("Keeps/"+tc.name, func(t *testing.T) {
			admin, s, name := expNew(t, 4)
			ctx := testCtx(t, 20*time.Second)
			live := expLive(t, ctx, s, 2) // first: TryAcquire reclaims
			expired := expExpired(t, ctx, admin, s, 1)[0]

			available, members := tc.op(t, ctx, s, live)
			st := expRead(t, admin, name)
			require.Equal(t, available, st.available, "available after %s", tc.name)
			require.Len(t, st.permits, members, "members after %s", tc.name)
			_, ok := syncScore(t, admin, name, expired)
			require.True(t, ok, "%s did not reclaim the expired permit", tc.name)

			n, err := s.AvailablePermits(ctx)
			require.NoError(t, err)
			require.Equal(t, available+1, n, "the next reclaiming call returns it")
			_, ok = syncScore(t, admin, name, expired)
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
				p, err := s.TryAcquire(ctx, 1)
				require.NoError(t, err)
				staleID = p.IDs()[0]
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
			_, err := sub.Receive(ctx) // the confirmation
			require.NoError(t, err)

			ids := []string{live.IDs()[0], staleID, live.IDs()[1]}
			err = s.Release(ctx, ids...)
			require.ErrorIs(t, err, rlock.ErrNoSuchPermit, "one stale id among %v", ids)
			require.Equal(t, before, expRead(t, admin, name), "nothing changed")
			_, ok := syncScore(t, admin, name, bystander)
			require.True(t, ok, "the expired bystander was not reclaimed")
			require.NoError(t, live.Err(), "the live permits are still held")

			// Nothing was published: the first message is the marker sent now.
			require.NoError(t, admin.Publish(ctx, syncSemChannel(name), "marker").Err())
			msg, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			require.Equal(t, "marker", msg.Payload, "the failed release published something")

			require.NoError(t, s.Release(ctx, live.IDs()...), "the live ids alone release")
			// As Redisson: the reclaim publishes the available count it made
			// (6 less the 2 live permits), then the release its delta, 2.
			msg, err = sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			require.Equal(t, "4", msg.Payload, "the reclaim's message")
			msg, err = sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			require.Equal(t, "2", msg.Payload, "the release's message: the number released")
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
	for _, fk := range syncForeignKeys {
		t.Run(strings.ReplaceAll(fk.name, " ", "_"), func(t *testing.T) {
			rdb, c, name := setup(t)
			ctx := testCtx(t, 20*time.Second)
			check := syncForeign(t, rdb, name, fk.put)
			s := c.NewExpirableSemaphore(name)
			id := expRandomID()
			calls := []struct {
				what string
				f    func() error
			}{
				{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1); return err }},
				{"TryAcquire with wait", func() error { _, err := s.TryAcquire(ctx, 2, rlock.WithWaitTime(5*time.Second)); return err }},
				{"Acquire", func() error { _, err := s.Acquire(ctx, 1, rlock.WithPermitLease(time.Minute)); return err }},
				{"Release one", func() error { return s.Release(ctx, id) }},
				{"Release several", func() error { return s.Release(ctx, id, expRandomID()) }},
				{"UpdateLease", func() error { _, err := s.UpdateLease(ctx, id, time.Minute); return err }},
				{"LeaseTime", func() error { _, err := s.LeaseTime(ctx, id); return err }},
				{"AvailablePermits", func() error { _, err := s.AvailablePermits(ctx); return err }},
				{"AcquiredPermits", func() error { _, err := s.AcquiredPermits(ctx); return err }},
				{"Permits", func() error { _, err := s.Permits(ctx); return err }},
				{"SetPermits", func() error { return s.SetPermits(ctx, 3) }},
				{"TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 3); return err }},
				{"AddPermits", func() error { return s.AddPermits(ctx, 1) }},
			}
			for _, call := range calls {
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
	start := func(t *testing.T, c *rlock.Client, opts ...rlock.TryPermitOption) (*rlock.ExpirableSemaphore, *rlock.Permits, string) {
		t.Helper()
		ctx := testCtx(t, 20*time.Second)
		name := redistest.Name(t)
		t.Cleanup(func() { _ = admin.Del(context.Background(), name, syncTimeoutKey(name)).Err() })
		s := c.NewExpirableSemaphore(name)
		ok, err := s.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		require.True(t, ok)
		p, err := s.TryAcquire(ctx, 1, opts...)
		require.NoError(t, err)
		require.NoError(t, p.Err())
		return s, p, name
	}
	// ends waits (at most within) for p to end and checks its error.
	ends := func(t *testing.T, p *rlock.Permits, since time.Time, within time.Duration, want error, what string) {
		t.Helper()
		select {
		case <-p.Done():
			t.Logf("%s: the handle ended %v later: %v", what, time.Since(since).Round(time.Millisecond), p.Err())
			require.ErrorIs(t, p.Err(), want, what)
		case <-time.After(within):
			t.Fatalf("%s: the handle did not end within %v (Err %v)", what, within, p.Err())
		}
	}

	t.Run("FixedLeaseRunsOut", func(t *testing.T) {
		c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
		const lease = 300 * time.Millisecond
		taken := time.Now()
		_, p, name := start(t, c, rlock.WithPermitLease(lease))
		ends(t, p, taken, lease+2*time.Second, rlock.ErrPermitLost, "fixed lease ran out")
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
			ok, err := s.Delete(context.Background())
			require.NoError(t, err)
			require.True(t, ok)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
			s, p, name := start(t, c)
			ended := time.Now()
			tc.end(t, s, p, name)
			ends(t, p, ended, 2*time.Second, rlock.ErrPermitLost, tc.name)
		})
	}

	t.Run("Released", func(t *testing.T) {
		c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(watchdog))
		_, p, name := start(t, c)
		ctx := testCtx(t, 5*time.Second)
		require.NoError(t, p.Release(ctx))
		ends(t, p, time.Now(), time.Millisecond, rlock.ErrReleased, "Release")
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
		ends(t, p, time.Now(), time.Millisecond, rlock.ErrClosed, "Close")
		st := expRead(t, admin, name)
		require.EqualValues(t, 3, st.available, "Close gave the permit back")
		require.Empty(t, st.permits)
	})
}
