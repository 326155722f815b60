package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Unlock cannot be cancelled into a leak: a release is sent
// even when ctx has ended or ends while it runs; one Redis does not confirm ends
// the lease and stops the renewals, so that the lock expires by itself; Close
// gives back what is still held. Each case is checked from both sides: a waiter
// in the same client and one in another client are served after it.

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
	sameW, otherW  <-chan leaseResult
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
	s.otherW = lockAsync(rlock.WithOwner(ctx), s.b.NewMutex(s.name))
	if !sameLater {
		s.startSameWaiter(t)
	}
	s.awaitWaiters(t, 2-btoi(sameLater))
	return s
}

// startSameWaiter starts the waiter of A.
func (s *releaseSetup) startSameWaiter(t *testing.T) {
	s.sameW = lockAsync(rlock.WithOwner(testCtx(t, time.Minute)), s.a.NewMutex(s.name))
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

// requireSoleHolder checks that the waiter whose result is r got a lease that
// is valid and the lock's only hold, and unlocks it.
func requireSoleHolder(t *testing.T, rdb redis.Cmdable, name string, r leaseResult) {
	t.Helper()
	require.NoError(t, r.err)
	require.NoError(t, r.v.Err())
	require.Equal(t, map[string]string{r.v.Holder(): "1"}, holders(t, rdb, name))
	require.NoError(t, r.v.Unlock(context.Background()))
}

// requireBothServed checks that the two waiters each get the lock within
// within, one after the other, and that the lock ends free.
func (s *releaseSetup) requireBothServed(t *testing.T, within time.Duration) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	for range 2 {
		var r leaseResult
		select {
		case r = <-s.sameW:
			s.sameW = nil
		case r = <-s.otherW:
			s.otherW = nil
		case <-time.After(within):
			t.Fatalf("a waiter was not served within %v of the release; holders: %v", within, holders(t, s.direct, s.name))
		}
		requireSoleHolder(t, s.direct, s.name, r)
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
	waiters := map[string]<-chan leaseResult{}
	octx := rlock.WithOwner(ctx)
	for k, mk := range kinds {
		l, err := mk(a).Lock(octx)
		require.NoError(t, err)
		_, err = mk(a).Lock(octx) // reentered: Close gives back every level
		require.NoError(t, err)
		leases[k] = l
		waiters[k] = lockAsync(rlock.WithOwner(ctx), mk(b))
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
			require.NoError(t, r.v.Unlock(ctx))
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

// handle is what the tests of a release in flight need of any holder's
// handle: a Lease, a MultiLease, a Permits, a Leadership.
type handle interface {
	Err() error
	Done() <-chan struct{}
}

// releaseKind is one kind of hold: take it in one client (first), take it
// in another (next, which waits for the first), and give a handle back.
type releaseKind struct {
	name    string
	set     func(ctx context.Context, c *rlock.Client, name string) error
	first   func(ctx context.Context, c *rlock.Client, name string) (handle, error)
	next    func(ctx context.Context, c *rlock.Client, name string) (handle, error)
	release func(ctx context.Context, h handle) error
	spins   bool // the next holder polls (SpinMutex): no subscription shows it waits
}

// lockerKind is a releaseKind of a lock whose first and next holders take it
// the same way (or first by one side, next by the other).
func lockerKind(name string, first, next func(c *rlock.Client, name string) rlock.Locker) releaseKind {
	take := func(f func(c *rlock.Client, name string) rlock.Locker) func(context.Context, *rlock.Client, string) (handle, error) {
		return func(ctx context.Context, c *rlock.Client, name string) (handle, error) { return f(c, name).Lock(ctx) }
	}
	return releaseKind{name: name, first: take(first), next: take(next),
		release: func(ctx context.Context, h handle) error { return h.(*rlock.Lease).Unlock(ctx) }}
}

// spinning marks k's next holder as one that polls.
func spinning(k releaseKind) releaseKind {
	k.spins = true
	return k
}

func releaseKinds() []releaseKind {
	mutex := func(c *rlock.Client, n string) rlock.Locker { return c.NewMutex(n) }
	read := func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).ReadLock() }
	write := func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).WriteLock() }
	permits := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return c.NewExpirableSemaphore(n).Acquire(ctx, 1)
	}
	leader := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return c.NewElection(n).Campaign(ctx, "v")
	}
	multi := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return rlock.NewMultiLock(c.NewMutex(n), c.NewMutex(n+":2")).Lock(ctx)
	}
	return []releaseKind{
		lockerKind("Mutex", mutex, mutex),
		lockerKind("FairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) }),
		lockerKind("NonReentrantMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) }),
		lockerKind("FencedMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) }),
		spinning(lockerKind("SpinMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) })),
		lockerKind("RWMutex/write", write, write),
		lockerKind("RWMutex/read", read, write),
		{name: "ExpirableSemaphore", first: permits, next: permits,
			set: func(ctx context.Context, c *rlock.Client, n string) error {
				_, err := c.NewExpirableSemaphore(n).TrySetPermits(ctx, 1)
				return err
			},
			release: func(ctx context.Context, h handle) error { return h.(*rlock.Permits).Release(ctx) }},
		{name: "Election", first: leader, next: leader,
			release: func(ctx context.Context, h handle) error { return h.(*rlock.Leadership).Resign(ctx) }},
		{name: "MultiLock", first: multi, next: func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
			return c.NewMutex(n).Lock(ctx)
		}, release: func(ctx context.Context, h handle) error { return h.(*rlock.MultiLease).Unlock(ctx) }},
	}
}

// TestHandleEndsWhenItsReleaseIsSent: a holder's handle stops saying valid
// before its release leaves, not when the release's reply comes back. The
// holder's client talks to Redis through a proxy that holds every reply back
// 400 ms from the moment it gives back; a client of another process (here
// another Client, on a direct connection) waits for the object and takes it
// as soon as the release runs. While the holder's release is still in
// flight, after the next holder's grant was observed, the old handle must
// say ended (Err not nil, Done closed): else two handles said valid at one
// moment. For every kind with a handle.
func TestHandleEndsWhenItsReleaseIsSent(t *testing.T) {
	srv := redistest.Shared(t)
	for _, k := range releaseKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			proxy := redistest.NewProxy(t, srv.Addr)
			a := newClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: 5 * time.Second}))
			b := newClient(t, srv.Client(t))
			name := redistest.Name(t)
			if k.set != nil {
				require.NoError(t, k.set(ctx, b, name))
			}
			old, err := k.first(ctx, a, name)
			require.NoError(t, err)

			granted := make(chan handle, 1)
			go func() {
				h, err := k.next(ctx, b, name)
				if err == nil {
					granted <- h
				}
			}()
			if !k.spins {
				requireWaiting(t, srv, name)
			}

			proxy.DelayNextReplies(1000, 400*time.Millisecond)
			released := make(chan error, 1)
			go func() { released <- k.release(ctx, old) }()
			var next handle
			select {
			case next = <-granted:
			case <-time.After(10 * time.Second):
				t.Fatal("the next holder was not granted within 10 s")
			}
			select {
			case err := <-released:
				t.Fatalf("the release's reply came before the next grant was checked (%v): the proxy did not hold it", err)
			default:
			}
			require.NoError(t, next.Err(), "the next holder's handle")
			require.Error(t, old.Err(), "the old handle said valid while the next holder held: two valid handles")
			select {
			case <-old.Done():
			default:
				t.Fatal("the old handle's Done was open while the next holder held")
			}
			proxy.DelayNextReplies(0, 0)
			require.NoError(t, <-released)
			require.Error(t, old.Err())
		})
	}
}

// requireWaiting waits until a subscriber listens for the release of name
// (a waiter of another client has queued), or fails the test after 10 s.
func requireWaiting(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	rdb := srv.Client(t)
	require.Eventually(t, func() bool {
		chans, err := rdb.PubSubChannels(context.Background(), "*"+name+"*").Result()
		return err == nil && len(chans) > 0
	}, 10*time.Second, 5*time.Millisecond, "no waiter subscribed for %s", name)
}

// No lease is valid past its deadline: a holder process
// frozen past its lease sees the loss at its first check after it resumes, and a
// hand-off whose reply comes after the successor's lease may have run out never
// yields a lease that reports valid.

const (
	pauseRole   = "pause-holder"
	pauseLease  = 300 * time.Millisecond // the holder's watchdog timeout
	pauseFreeze = 700 * time.Millisecond // how long the holder is stopped: past its lease
)

// pauseRounds is how many freezes TestLeasePausedHolderSeesLossAtFirstCheck
// makes: 25, or $HOLDFAST_PAUSE_ROUNDS (the closing note's 100).
func pauseRounds(t *testing.T) int {
	n := 25
	if v := os.Getenv("HOLDFAST_PAUSE_ROUNDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "HOLDFAST_PAUSE_ROUNDS")
	}
	return n
}

// A holder process SIGSTOPped past its lease, while another client takes the
// lock over, sees the loss at its first Lease.Err after SIGCONT: before the
// watchdog's goroutine has run, Err compares the deadline with the clock.
func TestLeasePausedHolderSeesLossAtFirstCheck(t *testing.T) {
	if redistest.WorkerRole() == pauseRole {
		pausedHolder(t)
		return
	}
	srv := redistest.Shared(t)
	c := newClient(t, srv.Client(t)) // the client that takes over: its own lease is not the subject
	name := redistest.Name(t)
	ctx := testCtx(t, 10*time.Minute)
	rounds := pauseRounds(t)
	w := redistest.StartWorker(t, t.Name(), pauseRole, "PAUSE_ADDR="+srv.Addr, "PAUSE_NAME="+name,
		"PAUSE_ROUNDS="+strconv.Itoa(rounds))

	noticed, inconclusive := 0, 0
	for i := range rounds {
		w.Expect(t, fmt.Sprintf("HELD %d", i), 30*time.Second)
		require.NoError(t, w.Signal(syscall.SIGSTOP))
		stopped := time.Now()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := c.NewMutex(name).Lock(lctx) // takes over once the frozen hold expires
		cancel()
		require.NoError(t, err)
		took := time.Since(stopped)
		<-time.After(time.Until(stopped.Add(pauseFreeze))) // the freeze is the subject, not a synchronisation
		require.NoError(t, w.Signal(syscall.SIGCONT))
		require.NoError(t, w.Signal(syscall.SIGUSR1)) // "you were resumed": the worker reports
		line := w.Expect(t, fmt.Sprintf("CHECK %d ", i), 30*time.Second)
		gap, lostBefore, err := parsePauseCheck(line)
		require.NoError(t, err, line)
		t.Logf("round %d: taken over %v after the freeze began; %s", i, took.Round(time.Millisecond), line)
		require.GreaterOrEqual(t, gap, pauseFreeze*3/4, "the worker did not see its freeze")
		switch {
		case lostBefore:
			inconclusive++ // the lease ended before the freeze (a renewal missed on a loaded machine)
		case strings.Contains(line, "err=<nil>"):
			t.Errorf("round %d: the resumed holder's first check found its lease valid, while another client held the lock", i)
		default:
			require.Contains(t, line, rlock.ErrLockLost.Error())
			noticed++
		}
		require.NoError(t, l.Unlock(ctx))
	}
	t.Logf("%d of %d resumed holders saw the loss at their first check (%d rounds inconclusive: lost before the freeze)",
		noticed, rounds-inconclusive, inconclusive)
	require.LessOrEqual(t, inconclusive, rounds/5)
	require.NoError(t, w.Wait(), w.Output())
}

// parsePauseCheck reads "CHECK <i> gap=<ms> lostBefore=<bool> err=<...>".
func parsePauseCheck(line string) (gap time.Duration, lostBefore bool, err error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return 0, false, fmt.Errorf("bad line %q", line)
	}
	ms, err := strconv.Atoi(strings.TrimPrefix(f[2], "gap="))
	if err != nil {
		return 0, false, err
	}
	lostBefore, err = strconv.ParseBool(strings.TrimPrefix(f[3], "lostBefore="))
	return time.Duration(ms) * time.Millisecond, lostBefore, err
}

// pausedHolder is the worker: for each round it takes the lock, says HELD, and
// checks Lease.Err in a tight loop until SIGUSR1 says it was resumed; then it
// reports the longest gap between two checks (its freeze) and what the first
// check after that gap returned.
func pausedHolder(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("PAUSE_ADDR")})
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(pauseLease))
	require.NoError(t, err)
	defer c.Close()
	rounds, err := strconv.Atoi(os.Getenv("PAUSE_ROUNDS"))
	require.NoError(t, err)
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, syscall.SIGUSR1)
	defer signal.Stop(resumed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m := c.NewMutex(os.Getenv("PAUSE_NAME"))
	for i := range rounds {
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		gap, first, lostBefore := checkUntilResumed(l, resumed, func() { fmt.Printf("HELD %d\n", i) })
		fmt.Printf("CHECK %d gap=%d lostBefore=%v err=%v\n", i, gap.Milliseconds(), lostBefore, first)
		_ = l.Unlock(ctx) // lost: ErrNotHeld
	}
}

// checkUntilResumed calls announce (which tells the parent to freeze the
// process) and then l.Err in a loop until resumed, and returns the longest gap
// between two calls (or between the announce and the first call) and the result
// of the first call after it. A call during which the process was stopped
// counts as a gap: the next call is the first after it, which is why the loop
// makes one more call once resumed. lostBefore reports an error seen before any
// long gap.
func checkUntilResumed(l *rlock.Lease, resumed <-chan os.Signal, announce func()) (gap time.Duration, first error, lostBefore bool) {
	prevEnd := time.Now()
	announce()
	var straddled time.Duration // how long the previous call lasted
	for last := false; ; {
		select {
		case <-resumed:
			last = true
		default:
		}
		start := time.Now()
		err := l.Err()
		end := time.Now()
		if straddled > gap {
			gap, first = straddled, err
		}
		if g := start.Sub(prevEnd); g > gap {
			gap, first = g, err
		}
		if err != nil && gap < pauseFreeze/2 && end.Sub(start) < pauseFreeze/2 {
			lostBefore = true // not this call's nor an earlier one's freeze
		}
		if last {
			return gap, first, lostBefore
		}
		straddled, prevEnd = end.Sub(start), end
		runtime.Gosched()
	}
}

// A release that hands the lock to a waiting owner of the same client has its
// reply held back longer than the successor's lease: the handed-off hold expires
// in Redis and another client takes the lock. The successor's Lock must not
// return until it holds the lock for real: never a lease that reports valid
// while the other client holds the lock.
func TestLeaseHandOffReplyDelayedPastLease(t *testing.T) {
	const (
		lease = 500 * time.Millisecond // the successor's watchdog lease
		delay = time.Second
	)
	srv := redistest.Shared(t)
	direct := srv.Client(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdbA := srv.Client(t, func(o *redis.Options) { o.Addr = proxy.Addr; o.ReadTimeout = 10 * time.Second })
	a := newClient(t, rdbA, rlock.WithWatchdogTimeout(lease))
	b := newClient(t, direct)
	ctx := testCtx(t, 2*time.Minute)

	takenOver, valid, dead := 0, 0, 0
	for round := range 5 {
		name := fmt.Sprintf("%s:%d", redistest.Name(t), round)
		octx := rlock.WithOwner(ctx)
		l1, err := a.NewMutex(name).Lock(octx)
		require.NoError(t, err)
		succ := lockAsync(rlock.WithOwner(ctx), a.NewMutex(name)) // owner 2 of A: the head of A's queue
		other := lockAsync(rlock.WithOwner(ctx), b.NewMutex(name))
		ch := "redisson_lock__channel:{" + name + "}"
		awaitSubscribers(t, direct, ch, 2) // both clients wait

		proxy.SetReplyDelay(delay)
		require.NoError(t, l1.Unlock(octx)) // hands the lock to owner 2; its reply comes late
		proxy.SetReplyDelay(0)

		var lb *rlock.Lease
		select {
		case r := <-other:
			require.NoError(t, r.err)
			lb = r.v
			takenOver++
		case r := <-succ:
			// The other client did not take over: the successor's lease must be real.
			requireSoleHolder(t, direct, name, r)
			valid++
			r = <-other
			require.NoError(t, r.err)
			require.NoError(t, r.v.Unlock(ctx))
			continue
		case <-time.After(5 * time.Second):
			t.Fatal("neither waiter got the lock")
		}
		// B holds the lock: A's successor must still be waiting.
		select {
		case r := <-succ:
			dead++
			t.Errorf("round %d: the successor's Lock returned (err %v, lease valid: %v) while the other client held the lock",
				round, r.err, r.v != nil && r.v.Err() == nil)
			require.NoError(t, lb.Unlock(ctx))
			if r.v != nil {
				_ = r.v.Unlock(ctx)
			}
			continue
		case <-time.After(2 * lease):
		}
		require.NoError(t, lb.Err())
		require.NoError(t, lb.Unlock(ctx))
		select {
		case r := <-succ:
			requireSoleHolder(t, direct, name, r)
			valid++
		case <-time.After(5 * time.Second):
			t.Fatal("the successor was not served after the other client's release")
		}
	}
	t.Logf("5 delayed hand-offs: the other client took over in %d; leases returned valid: %d; returned while the other client held the lock: %d",
		takenOver, valid, dead)
	require.Equal(t, 5, valid)
}
