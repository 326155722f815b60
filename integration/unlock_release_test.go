package integration

// Unlock cannot be cancelled into a leak (issue 17, item 1): a release is sent
// even when ctx has ended or ends while it runs; one Redis does not confirm ends
// the lease and stops the renewals, so that the lock expires by itself; Close
// gives back what is still held. Each case is checked from both sides: a waiter
// in the same client and one in another client are served after it.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// releaseSetup is a holder client A behind a proxy, a second client B direct to
// the same server, and a lock held by an owner of A with a waiter of A and a
// waiter of B queued on it.
type releaseSetup struct {
	proxy          *redistest.Proxy
	direct         *redis.Client
	a, b           *rlock.Client
	name           string
	hctx           context.Context // the holder's owner
	lease          *rlock.Lease
	sameW, otherW  <-chan lockResult
	watchdog       time.Duration
	releaseTimeout time.Duration
}

// newReleaseSetup starts the waiter of B, and the waiter of A unless sameLater
// (the test starts it with startSameWaiter).
func newReleaseSetup(t *testing.T, watchdog, releaseTimeout time.Duration, sameLater bool) *releaseSetup {
	t.Helper()
	srv := redistest.Shared(t)
	s := &releaseSetup{direct: srv.Client(t), proxy: redistest.NewProxy(t, srv.Addr), name: redistest.Name(t),
		watchdog: watchdog, releaseTimeout: releaseTimeout}
	rdbA := srv.Client(t, func(o *redis.Options) {
		o.Addr = s.proxy.Addr
		o.ReadTimeout = 10 * time.Second
		o.ContextTimeoutEnabled = true // go-redis bounds a call by its ctx's deadline: the release timeout
	})
	opts := []rlock.ClientOption{rlock.WithWatchdogTimeout(watchdog), rlock.WithReleaseTimeout(releaseTimeout)}
	s.a = newClient(t, rdbA, opts...)
	s.b = newClient(t, s.direct, opts...)
	ctx := testCtx(t, time.Minute)
	s.hctx = rlock.WithOwner(ctx)
	var err error
	s.lease, err = s.a.NewMutex(s.name).Lock(s.hctx)
	require.NoError(t, err)
	s.otherW = lockAsync(ctx, s.b.NewMutex(s.name))
	if !sameLater {
		s.startSameWaiter(t)
	}
	s.awaitWaiters(t, 2-btoi(sameLater))
	return s
}

// startSameWaiter starts the waiter of A.
func (s *releaseSetup) startSameWaiter(t *testing.T) {
	s.sameW = lockAsync(testCtx(t, time.Minute), s.a.NewMutex(s.name))
}

// awaitWaiters waits until n clients are subscribed to the lock's channel.
func (s *releaseSetup) awaitWaiters(t *testing.T, n int) {
	t.Helper()
	awaitSubscribers(t, s.direct, lua.ChannelName(s.name), int64(n))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// requireBothServed checks that the two waiters each get the lock within
// within, one after the other, and that the lock ends free.
func (s *releaseSetup) requireBothServed(t *testing.T, within time.Duration) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	for range 2 {
		var r lockResult
		select {
		case r = <-s.sameW:
			s.sameW = nil
		case r = <-s.otherW:
			s.otherW = nil
		case <-time.After(within):
			t.Fatalf("a waiter was not served within %v of the release; holders: %v", within, holders(t, s.direct, s.name))
		}
		require.NoError(t, r.err)
		require.NoError(t, r.l.Err())
		require.Equal(t, map[string]string{r.l.Holder(): "1"}, holders(t, s.direct, s.name))
		require.NoError(t, r.l.Unlock(ctx))
	}
	require.Zero(t, s.direct.Exists(ctx, s.name).Val())
}

func TestUnlockWithEndedContextReleases(t *testing.T) {
	t.Run("CancelledBeforeUnlock", func(t *testing.T) {
		s := newReleaseSetup(t, 30*time.Second, 5*time.Second, false)
		ctx, cancel := context.WithCancel(s.hctx)
		cancel() // the request went away before its deferred Unlock ran
		require.NoError(t, s.lease.Unlock(ctx))
		require.ErrorIs(t, s.lease.Err(), rlock.ErrUnlocked)
		s.requireBothServed(t, 2*time.Second)
	})

	t.Run("DeadlinePassedBeforeUnlock", func(t *testing.T) {
		s := newReleaseSetup(t, 30*time.Second, 5*time.Second, false)
		ctx, cancel := context.WithTimeout(s.hctx, time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		require.NoError(t, s.lease.Unlock(ctx))
		s.requireBothServed(t, 2*time.Second)
	})

	t.Run("EndsWhileTheReleaseRuns", func(t *testing.T) {
		s := newReleaseSetup(t, 30*time.Second, 5*time.Second, false)
		ctx, cancel := context.WithTimeout(s.hctx, 100*time.Millisecond)
		defer cancel()
		s.proxy.SetReplyDelay(400 * time.Millisecond) // the reply outlives ctx, not the release timeout
		err := s.lease.Unlock(ctx)
		s.proxy.SetReplyDelay(0)
		require.NoError(t, err)
		require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		s.requireBothServed(t, 2*time.Second)
	})
}

// Redis unreachable at Unlock (every reply black-holed): Unlock returns within
// the release timeout with ErrUnlockUnconfirmed, the lease ends, and nothing
// renews the hold any more: the key expires within one watchdog timeout, after
// which both waiters are served.
func TestUnlockRedisUnreachableStopsRenewing(t *testing.T) {
	const watchdog, releaseTimeout = time.Second, 500 * time.Millisecond
	s := newReleaseSetup(t, watchdog, releaseTimeout, true)
	ctx := testCtx(t, time.Minute)
	s.proxy.SetDropRequests(true)
	start := time.Now()
	err := s.lease.Unlock(s.hctx)
	took := time.Since(start)
	t.Logf("Unlock with Redis unreachable returned after %v: %v", took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, rlock.ErrUnlockUnconfirmed)
	var u *rlock.UnlockUnconfirmedError
	require.True(t, errors.As(err, &u))
	require.Equal(t, watchdog+watchdog/3, u.ExpiresWithin, "the watchdog timeout and one renewal interval")
	require.Less(t, took, releaseTimeout+time.Second)
	require.ErrorIs(t, s.lease.Err(), rlock.ErrUnlockUnconfirmed)
	select {
	case <-s.lease.Done():
	default:
		t.Fatal("Done still open after an unconfirmed Unlock")
	}

	// Redis is reachable again, and a waiter of the same client arrives: the
	// orphan hold must expire by itself within the time the error states (one
	// renewal round already in flight may still land, not a second), and then
	// both waiters are served.
	returned := start.Add(took)
	s.proxy.SetDropRequests(false)
	s.proxy.CloseConns()
	s.startSameWaiter(t)
	gone := returned.Add(u.ExpiresWithin + 300*time.Millisecond)
	last, rises := time.Duration(1<<62), 0
	field := s.lease.Holder()
	for s.direct.HExists(ctx, s.name, field).Val() { // then a waiter of B may take the lock
		pttl := s.direct.PTTL(ctx, s.name).Val()
		if pttl > last+5*time.Millisecond {
			rises++
		}
		require.LessOrEqual(t, rises, 1, "the lock was renewed after an unconfirmed Unlock")
		last = pttl
		require.True(t, time.Now().Before(gone), "the hold outlived the watchdog timeout")
		<-time.After(10 * time.Millisecond) // polling Redis' view, not synchronising goroutines
	}
	t.Logf("hold gone %v after Unlock returned (renewals landed after it: %d)", time.Since(returned).Round(time.Millisecond), rises)
	s.requireBothServed(t, 3*watchdog)

	// A second Unlock resends the release now that Redis answers: the lock was
	// freed meanwhile, so it is not held.
	err = s.lease.Unlock(s.hctx)
	require.True(t, err == nil || errors.Is(err, rlock.ErrNotHeld), "%v", err)
}

// A second Unlock, once Redis answers again, frees the lock at once instead of
// waiting for its expiry.
func TestUnlockRetriedAfterUnconfirmedFreesAtOnce(t *testing.T) {
	s := newReleaseSetup(t, 30*time.Second, 300*time.Millisecond, true)
	s.proxy.SetDropRequests(true)
	err := s.lease.Unlock(s.hctx)
	require.ErrorIs(t, err, rlock.ErrUnlockUnconfirmed)
	s.proxy.SetDropRequests(false)
	s.proxy.CloseConns()
	s.startSameWaiter(t)
	s.awaitWaiters(t, 2)
	start := time.Now()
	require.NoError(t, s.lease.Unlock(s.hctx), "the resent release is confirmed")
	require.ErrorIs(t, s.lease.Err(), rlock.ErrUnlocked)
	s.requireBothServed(t, 2*time.Second)
	require.Less(t, time.Since(start), 10*time.Second, "served long before the 30 s lease")
}

// Close gives back the holds still open: waiters in another client get them at
// once, and the leases' Unlock says what Close did.
func TestCloseReleasesHolds(t *testing.T) {
	srv := redistest.Shared(t)
	direct := srv.Client(t)
	a, err := rlock.New(srv.Client(t))
	require.NoError(t, err)
	b := newClient(t, direct)
	ctx := testCtx(t, time.Minute)
	name := redistest.Name(t)
	kinds := map[string]func(c *rlock.Client) rlock.Locker{
		"mutex":  func(c *rlock.Client) rlock.Locker { return c.NewMutex(name + ":m") },
		"fair":   func(c *rlock.Client) rlock.Locker { return c.NewFairMutex(name + ":f") },
		"write":  func(c *rlock.Client) rlock.Locker { return c.NewRWMutex(name + ":rw").WriteLock() },
		"fenced": func(c *rlock.Client) rlock.Locker { return c.NewFencedMutex(name + ":fe") },
	}
	leases := map[string]*rlock.Lease{}
	waiters := map[string]<-chan lockResult{}
	octx := rlock.WithOwner(ctx)
	for k, mk := range kinds {
		l, err := mk(a).Lock(octx)
		require.NoError(t, err)
		_, err = mk(a).Lock(octx) // reentered: Close gives back every level
		require.NoError(t, err)
		leases[k] = l
		waiters[k] = lockAsync(ctx, mk(b))
	}
	require.Eventually(t, func() bool {
		return len(direct.PubSubChannels(ctx, "*"+name+"*").Val()) >= len(kinds)
	}, 5*time.Second, 5*time.Millisecond, "the waiters subscribed")

	closed := time.Now()
	require.NoError(t, a.Close())
	for k, w := range waiters {
		select {
		case r := <-w:
			require.NoError(t, r.err, k)
			t.Logf("%s: the other client's waiter got the lock %v after Close", k, time.Since(closed).Round(time.Millisecond))
			require.NoError(t, r.l.Unlock(ctx))
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: the waiter of the other client was not served after Close", k)
		}
		err := leases[k].Unlock(ctx)
		require.ErrorIs(t, err, rlock.ErrClosed, k)
		require.NotErrorIs(t, err, rlock.ErrNotHeld, k)
		require.Contains(t, err.Error(), "released by Close", k)
		require.ErrorIs(t, leases[k].Err(), rlock.ErrClosed, k)
	}
}

// Close with Redis unreachable returns within the release timeout; the leases
// say the hold could not be released, and nothing renews it: it expires.
func TestCloseRedisUnreachable(t *testing.T) {
	const watchdog = time.Second
	srv := redistest.Shared(t)
	direct := srv.Client(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := srv.Client(t, func(o *redis.Options) { o.Addr = proxy.Addr; o.ContextTimeoutEnabled = true })
	a, err := rlock.New(rdb, rlock.WithWatchdogTimeout(watchdog), rlock.WithReleaseTimeout(300*time.Millisecond))
	require.NoError(t, err)
	ctx := testCtx(t, time.Minute)
	name := redistest.Name(t)
	l, err := a.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	proxy.SetDropRequests(true)
	start := time.Now()
	require.NoError(t, a.Close())
	require.Less(t, time.Since(start), 2*time.Second)
	err = l.Unlock(ctx)
	t.Logf("Unlock after Close with Redis unreachable: %v", err)
	require.ErrorIs(t, err, rlock.ErrClosed)
	require.NotErrorIs(t, err, rlock.ErrNotHeld)
	require.Contains(t, err.Error(), "could not release")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, watchdog+2*time.Second, 10*time.Millisecond,
		"the hold was still renewed after Close")
}
