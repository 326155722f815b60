package integration

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Watchdog tests against real Redis: renewal keeps watchdog holds alive,
// stops with the last unlock, and the loss of a hold (deleted key, restart, frozen
// process, fixed lease) closes Done promptly. Every client here uses a 1 s watchdog
// timeout, so renewals come every 333 ms.

// wdTimeout is the watchdog timeout of these tests; renewals come every wdTimeout/3.
const wdTimeout = time.Second

// wdInterval is the renewal interval that wdTimeout implies.
const wdInterval = wdTimeout / 3

// wdOpts returns the client options of these tests plus extra.
func wdOpts(extra ...rlock.ClientOption) []rlock.ClientOption {
	return append([]rlock.ClientOption{rlock.WithWatchdogTimeout(wdTimeout)}, extra...)
}

// wdField returns the field of c's owner in the lock hash name; it fails the test
// unless exactly one field of c is there.
func wdField(t testing.TB, rdb *redis.Client, c *rlock.Client, name string) string {
	t.Helper()
	var found []string
	for f := range holders(t, rdb, name) {
		if strings.HasPrefix(f, c.ID()+":") {
			found = append(found, f)
		}
	}
	require.Len(t, found, 1, "fields of client %s in %s", c.ID(), name)
	return found[0]
}

// wdRequireOpen fails the test if l has ended.
func wdRequireOpen(t testing.TB, l *rlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lease of %s ended: %v", l.Name(), l.Err())
	default:
	}
	require.NoError(t, l.Err())
}

// wdAwaitDone waits until l's Done is closed, at most until since+bound, and returns
// the time from since to the moment Done was seen closed.
func wdAwaitDone(t testing.TB, l *rlock.Lease, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	timer := time.NewTimer(time.Until(since.Add(bound)))
	defer timer.Stop()
	select {
	case <-l.Done():
		return time.Since(since)
	case <-timer.C:
		t.Fatalf("Done of %s not closed within %v (Err %v)", l.Name(), bound, l.Err())
		return 0
	}
}

// wdHoldFor waits d on purpose (the lease outliving d is what is tested) and fails
// the test if any of leases ends meanwhile.
func wdHoldFor(t testing.TB, d time.Duration, leases ...*rlock.Lease) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	done := make(chan int, len(leases))
	stop := make(chan struct{})
	defer close(stop)
	for i, l := range leases {
		go func() {
			select {
			case <-l.Done():
				done <- i
			case <-stop:
			}
		}()
	}
	select {
	case i := <-done:
		t.Fatalf("lease %d of %s ended while held: %v", i, leases[i].Name(), leases[i].Err())
	case <-timer.C:
	}
}

// wdPTTL returns the PTTL of key (negative: no key or no expiry).
func wdPTTL(t testing.TB, rdb *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

// wdExists reports whether key exists.
func wdExists(t testing.TB, rdb *redis.Client, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	require.NoError(t, err)
	return n == 1
}

// 1. A watchdog hold survives three times its timeout.
func TestWatchdogHoldOutlivesThreeTimeouts(t *testing.T) {
	rdb, c, name := setup(t, wdOpts()...)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	field := wdField(t, rdb, c, name)

	// Hold for 3.5 timeouts: without renewal the key would expire after one.
	wdHoldFor(t, 3*wdTimeout+wdTimeout/2, l)

	ok, err := rdb.HExists(ctx, name, field).Result()
	require.NoError(t, err)
	require.True(t, ok, "owner field still there")
	ttl := wdPTTL(t, rdb, name)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, wdTimeout)
	wdRequireOpen(t, l)

	require.NoError(t, l.Unlock(ctx))
	require.ErrorIs(t, l.Err(), rlock.ErrUnlocked)
	require.False(t, wdExists(t, rdb, name))
}

// 2. Reentrant holds are renewed until the last unlock, and not after it.
func TestWatchdogReentrantRenewedUntilLastUnlock(t *testing.T) {
	rdb, c, name := setup(t, wdOpts()...)
	ctx := testCtx(t, 30*time.Second)
	octx := rlock.WithOwner(ctx)
	m := c.NewMutex(name)
	var leases [3]*rlock.Lease
	for i := range leases {
		l, err := m.Lock(octx)
		require.NoError(t, err)
		leases[i] = l
	}
	field := wdField(t, rdb, c, name)
	require.NoError(t, leases[1].Unlock(octx))
	require.ErrorIs(t, leases[1].Err(), rlock.ErrUnlocked)

	// Hold 2.5 timeouts with two leases open: renewal must go on.
	wdHoldFor(t, 2*wdTimeout+wdTimeout/2, leases[0], leases[2])
	n, err := m.HoldCount(octx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Greater(t, wdPTTL(t, rdb, name), time.Duration(0))

	require.NoError(t, leases[2].Unlock(octx))
	wdHoldFor(t, wdInterval+wdInterval/2, leases[0]) // a renewal round after the partial unlock
	require.True(t, wdExists(t, rdb, name))
	require.NoError(t, leases[0].Unlock(octx))
	for _, l := range leases {
		require.ErrorIs(t, l.Err(), rlock.ErrUnlocked)
	}
	require.False(t, wdExists(t, rdb, name))

	// Plant the owner's field again, as a stale write would, with a 1 s expiry: a
	// renewal registration that outlived the unlock would keep it alive. Wait three
	// timeouts on purpose: the key must have expired by then.
	require.NoError(t, rdb.HSet(ctx, name, field, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, name, wdTimeout).Err())
	timer := time.NewTimer(3 * wdTimeout)
	<-timer.C
	require.False(t, wdExists(t, rdb, name), "the released lock was renewed after the last unlock")
}

// 3. A holder whose client stops without unlocking (a crash) frees the lock within
// one timeout, and a waiter of another client takes it.
func TestWatchdogClosedHolderFreesLockWithinTimeout(t *testing.T) {
	rdb, c1, name := setup(t, wdOpts()...)
	ctx := testCtx(t, 30*time.Second)
	c2 := newClient(t, rdb, wdOpts()...)

	l, err := c1.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	wdHoldFor(t, wdInterval+rand.N(wdInterval), l) // at least one renewal; a random phase

	got := make(chan time.Time, 1)
	waitErr := make(chan error, 1)
	var l2 *rlock.Lease
	go func() {
		var err error
		l2, err = c2.NewMutex(name).Lock(ctx)
		got <- time.Now()
		waitErr <- err
	}()

	require.NoError(t, c1.Close())
	closed := time.Now()
	select {
	case <-l.Done():
	default:
		t.Fatal("Close returned with the lease still open")
	}
	require.ErrorIs(t, l.Err(), rlock.ErrClosed)

	select {
	case at := <-got:
		require.NoError(t, <-waitErr)
		latency := at.Sub(closed)
		t.Logf("waiter of another client took the lock %v after the holder's Close", latency)
		require.Less(t, latency, wdTimeout+time.Second)
	case <-time.After(wdTimeout + 5*time.Second):
		t.Fatal("the waiter did not get the lock")
	}
	require.NotEmpty(t, wdField(t, rdb, c2, name))
	require.NoError(t, l2.Unlock(ctx))
}

// 4. A lock key deleted or expired from outside closes Done within one renewal
// interval (plus slack), with tracking off: the renewals are the backstop when
// the server refuses tracking or news was lost (watchdog_tracking_test.go has the loss
// told at once). Each case runs three trials, the removal coming at a random
// phase of the client's renewal rounds.
func TestWatchdogKeyRemovedFromOutsideClosesDone(t *testing.T) {
	const bound, trials = time.Second, 3 // the interval is 333 ms
	cases := []struct {
		name      string
		dedicated bool // needs a server of its own
		remove    func(ctx context.Context, rdb *redis.Client, key string) error
	}{
		{"DEL", false, func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.Del(ctx, key).Err()
		}},
		{"PEXPIRE_1", false, pexpireUntilGone},
		{"FLUSHALL", true, func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.FlushAll(ctx).Err()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			if tc.dedicated {
				srv = redistest.Start(t)
			}
			rdb := srv.Client(t)
			c := newClient(t, rdb, wdOpts(rlock.WithTracking(false))...)
			ctx := testCtx(t, 30*time.Second)
			var worst time.Duration
			for i := range trials {
				name := redistest.Name(t)
				l, err := c.NewMutex(name).Lock(ctx)
				require.NoError(t, err)
				// Hold between one and two intervals: renewal is under way and the
				// removal falls at a random point of the round cycle.
				wdHoldFor(t, wdInterval+rand.N(wdInterval), l)

				require.NoError(t, tc.remove(ctx, rdb, name))
				removed := time.Now()
				latency := wdAwaitDone(t, l, removed, bound)
				worst = max(worst, latency)
				t.Logf("%s trial %d: Done closed %v after the key was removed (renewal interval %v)",
					tc.name, i+1, latency, wdInterval)
				require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
				require.ErrorIs(t, l.Err(), watchdog.ErrGone)
				err = l.Unlock(ctx)
				require.ErrorIs(t, err, rlock.ErrNotHeld)
				require.ErrorIs(t, err, rlock.ErrLockLost)
				require.False(t, wdExists(t, rdb, name))
			}
			t.Logf("%s: worst detection latency %v over %d trials", tc.name, worst, trials)
		})
	}
}

// pexpireUntilGone makes key expire within a millisecond. A renewal that runs
// in that millisecond puts the lease back (the owner's field is still there):
// then it expires the key again, until Redis reports it gone.
func pexpireUntilGone(ctx context.Context, rdb *redis.Client, key string) error {
	for {
		if err := rdb.PExpire(ctx, key, time.Millisecond).Err(); err != nil {
			return err
		}
		for {
			d, err := rdb.PTTL(ctx, key).Result()
			switch {
			case err != nil:
				return err
			case d == -2: // expired: PTTL answers -2 for a key that no longer exists
				return nil
			case d > time.Millisecond: // a renewal came in between
			default:
				continue
			}
			break
		}
	}
}

// 5. A Redis server restarted empty ends the hold.
func TestWatchdogRedisRestartedEmptyClosesDone(t *testing.T) {
	srv := redistest.StartControllable(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb, wdOpts()...)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	wdHoldFor(t, wdInterval+rand.N(wdInterval), l) // at least one renewal; a random phase

	start := time.Now()
	srv.Restart(t)
	restarted := time.Since(start)
	latency := wdAwaitDone(t, l, start, wdTimeout+2*time.Second)
	reason := "renewal found the field gone"
	if errors.Is(l.Err(), watchdog.ErrNotRenewed) {
		reason = "no renewal confirmed before the local deadline"
	}
	t.Logf("restart took %v; Done closed %v after the restart began (%s): %v", restarted, latency, reason, l.Err())
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	require.False(t, wdExists(t, rdb, name))

	// The client works again on the new server.
	l2, err := c.NewMutex(name).TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(ctx))
}

// wdSigstopRole is the worker role of TestWatchdogFrozenHolderLearnsLossBeforeRenewing.
const wdSigstopRole = "wd-sigstop-holder"

// wdRenewCounter is a go-redis hook for the frozen holder: the watchdog sends its
// renewals, and nothing else, as pipelines. It counts renewal pipelines sent more
// than a timeout after the previous one (or after the acquisition): such a renewal
// would go out after the hold's local deadline, which must never happen.
type wdRenewCounter struct {
	mu       sync.Mutex
	last     time.Time // send time of the previous renewal, or of the acquisition
	late     int       // renewals sent more than wdTimeout after the previous one
	sent     int
	renewedC chan struct{} // a renewal pipeline completed without error
}

func (h *wdRenewCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *wdRenewCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *wdRenewCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		now := time.Now()
		h.mu.Lock()
		h.sent++
		if now.Sub(h.last) > wdTimeout {
			h.late++
		}
		h.last = now
		h.mu.Unlock()
		err := next(ctx, cmds)
		if err == nil {
			select {
			case h.renewedC <- struct{}{}:
			default:
			}
		}
		return err
	}
}

// wdFrozenHolder is the worker's side: take the lock, print "held" once a renewal was
// confirmed, then print "lost late=<n> sent=<n> err=<err>" as soon as Done closes.
func wdFrozenHolder(t *testing.T) {
	addr, name := os.Getenv("WD_ADDR"), os.Getenv("WD_NAME")
	hook := &wdRenewCounter{renewedC: make(chan struct{}, 1)}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rdb.AddHook(hook)
	// Tracking off: the hook must see the renewals, which with tracking go
	// through the tracker's connection.
	c, err := rlock.New(rdb, wdOpts(rlock.WithTracking(false))...)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hook.mu.Lock()
	hook.last = time.Now()
	hook.mu.Unlock()
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	select {
	case <-hook.renewedC:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal confirmed")
	}
	fmt.Println("held")
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("the lease never ended")
	}
	hook.mu.Lock()
	late, sent := hook.late, hook.sent
	hook.mu.Unlock()
	fmt.Printf("lost late=%d sent=%d err=%v\n", late, sent, l.Err())
}

// 6. A holder process frozen (SIGSTOP) for three timeouts loses the lock to a waiter,
// and on SIGCONT learns the loss from its local deadline before any renewal is sent.
func TestWatchdogFrozenHolderLearnsLossBeforeRenewing(t *testing.T) {
	if redistest.WorkerRole() == wdSigstopRole {
		wdFrozenHolder(t)
		return
	}
	rdb, c, name := setup(t, wdOpts()...)
	srv := redistest.Shared(t)
	ctx := testCtx(t, 60*time.Second)

	w := redistest.StartWorker(t, t.Name(), wdSigstopRole, "WD_ADDR="+srv.Addr, "WD_NAME="+name)
	w.Expect(t, "held", 30*time.Second)
	require.Len(t, holders(t, rdb, name), 1)

	require.NoError(t, w.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	t.Cleanup(func() { _ = w.Signal(syscall.SIGCONT) })

	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	took := time.Since(stopped)
	t.Logf("waiter took the lock %v after the holder was frozen", took)
	require.Less(t, took, wdTimeout+2*time.Second)
	field := wdField(t, rdb, c, name)

	// Keep the holder frozen for three timeouts in all: the freeze is the subject.
	wdHoldFor(t, time.Until(stopped.Add(3*wdTimeout)), l)
	require.NoError(t, w.Signal(syscall.SIGCONT))
	resumed := time.Now()
	line := w.Expect(t, "lost", 10*time.Second)
	learned := time.Since(resumed)
	t.Logf("holder resumed after %v frozen, printed %q %v after SIGCONT", resumed.Sub(stopped), line, learned)
	require.Less(t, learned, time.Second)
	require.Contains(t, line, "late=0 ", "the holder sent a renewal after its local deadline")
	require.Contains(t, line, rlock.ErrLockLost.Error())
	require.Contains(t, line, watchdog.ErrNotRenewed.Error(), "the loss should come from the local deadline")

	// The parent's waiter still holds the lock: the old holder did not take it back.
	require.NoError(t, w.Wait(), w.Output())
	h := holders(t, rdb, name)
	require.Len(t, h, 1)
	require.Contains(t, h, field)
	wdRequireOpen(t, l)
	require.NoError(t, l.Unlock(ctx))
}

// 7. Acquisitions cancelled at random points, and a 10 s storm of them, leave no
// renewed lock and no subscribed channel behind.
func TestWatchdogCancelledAcquisitionsLeaveNothingRenewed(t *testing.T) {
	srv := redistest.Start(t) // PUBSUB CHANNELS must see only this test's clients
	ctx := testCtx(t, 2*time.Minute)
	clients := make([]*rlock.Client, 3)
	rdbs := make([]*redis.Client, len(clients))
	for i := range clients {
		rdbs[i] = srv.Client(t)
		clients[i] = newClient(t, rdbs[i], wdOpts()...)
	}
	rdb := rdbs[0]
	prefix := redistest.Name(t)
	var names []string

	var (
		errMu      sync.Mutex
		unexpected []error
	)
	report := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(unexpected) < 20 {
			unexpected = append(unexpected, err)
		}
	}
	// attempt makes one Lock call with ctx and unlocks at once if it got the lock.
	// It reports whether it acquired.
	attempt := func(c *rlock.Client, actx context.Context, name string) bool {
		l, err := c.NewMutex(name).Lock(actx)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				report(fmt.Errorf("lock %s: %w", name, err))
			}
			return false
		}
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := l.Unlock(uctx); err != nil {
			report(fmt.Errorf("unlock %s: %w", name, err))
		}
		return true
	}

	// Phase 1: 400 acquisitions cancelled at random small delays, against a lock
	// that a churner holds briefly and releases over and over.
	name := prefix + ":churn"
	names = append(names, name)
	stopChurn := make(chan struct{})
	churnDone := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stopChurn:
				churnDone <- n
				return
			default:
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			l, err := clients[0].NewMutex(name).Lock(lctx)
			cancel()
			if err != nil {
				report(fmt.Errorf("churner lock: %w", err))
				continue
			}
			n++
			hold := time.NewTimer(time.Duration(rand.IntN(2000)) * time.Microsecond)
			<-hold.C // held briefly on purpose: the churner's critical section
			if err := l.Unlock(ctx); err != nil {
				report(fmt.Errorf("churner unlock: %w", err))
			}
		}
	}()
	const cancelled, workers = 400, 16
	var acquired1 atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			c := clients[g%len(clients)]
			for range cancelled / workers {
				delay := time.Duration(rand.IntN(3000)) * time.Microsecond
				var actx context.Context
				var cancel context.CancelFunc
				if rand.IntN(2) == 0 {
					actx, cancel = context.WithTimeout(ctx, delay)
				} else {
					actx, cancel = context.WithCancel(ctx)
					time.AfterFunc(delay, cancel)
				}
				if attempt(c, actx, name) {
					acquired1.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stopChurn)
	churned := <-churnDone
	t.Logf("phase 1: %d cancellable acquisitions, %d acquired before their cancellation; churner took the lock %d times",
		cancelled, acquired1.Load(), churned)

	// Phase 2: a 10 s cancel storm on a few names.
	const stormNames, stormWorkers, storm = 4, 16, 10 * time.Second
	for i := range stormNames {
		names = append(names, prefix+":storm"+strconv.Itoa(i))
	}
	var calls, acquired2 atomic.Int64
	stormEnd := time.Now().Add(storm)
	for g := range stormWorkers {
		wg.Go(func() {
			c := clients[g%len(clients)]
			for time.Now().Before(stormEnd) {
				n := names[1+rand.IntN(stormNames)]
				actx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(5000))*time.Microsecond)
				calls.Add(1)
				if attempt(c, actx, n) {
					acquired2.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("phase 2: %d Lock calls in %v, %d acquired, the rest cancelled", calls.Load(), storm, acquired2.Load())
	errMu.Lock()
	require.Empty(t, unexpected)
	errMu.Unlock()

	// Wait three timeouts on purpose: a hold or renewal left behind would keep its key.
	timer := time.NewTimer(3 * wdTimeout)
	<-timer.C
	for _, n := range names {
		require.False(t, wdExists(t, rdb, n), "lock %s still exists three timeouts after the storm", n)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if strings.HasPrefix(k, identity.Prefix) {
			continue // the clients' records (package identity): each expires by itself
		}
		// Unlock latches expire by themselves (after go-redis' retry window).
		require.True(t, strings.HasPrefix(k, "redisson_unlock_latch:"), "unexpected key %q", k)
		require.Greater(t, wdPTTL(t, rdb, k), time.Duration(0), "latch %q without expiry", k)
	}
	// The hub unsubscribes a channel 1 s after its last waiter left; the
	// watchdog's tracking subscription (__redis__:invalidate) stays.
	var left map[string]int64
	require.Eventually(t, func() bool {
		ch, err := rdb.PubSubChannels(ctx, "[^_]*").Result()
		if err != nil || len(ch) == 0 {
			return err == nil
		}
		left, _ = rdb.PubSubNumSub(ctx, ch...).Result()
		return false
	}, 5*time.Second, 50*time.Millisecond, "channels still subscribed (channel: subscribers): %v", left)

	// The clients still work on every name.
	for _, c := range clients {
		for _, n := range names {
			l, err := c.NewMutex(n).TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		}
	}
}

// 7b. A release that hands the lock to a waiter of the same client while that
// waiter's SUBSCRIBE is still in flight must not leave the subscription behind once
// the waiter has unlocked. Deterministic: a gated Dialer holds up the dial of the
// client's subscriber connection until the hand-off is done.
func TestWatchdogHandOffDuringSubscribeLeavesNoSubscription(t *testing.T) {
	srv := redistest.Start(t) // PUBSUB CHANNELS must see only this test's client
	var gate atomic.Pointer[chan struct{}]
	dialing := make(chan struct{}, 1)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if g := gate.Load(); g != nil {
				select {
				case dialing <- struct{}{}:
				default:
				}
				select {
				case <-*g:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	// The default watchdog timeout (30 s): no renewal round needs a connection here.
	c := newClient(t, rdb)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	m := c.NewMutex(name)

	holder, err := m.Lock(ctx) // dials the one pool connection this test needs
	require.NoError(t, err)
	open := make(chan struct{})
	gate.Store(&open)
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(open) }) }
	t.Cleanup(openGate)

	got := lockAsync(ctx, m) // queues behind the holder, then subscribes: a new dial
	select {
	case <-dialing:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not start subscribing")
	}
	// The waiter is the head of the queue and its subscription is being set up:
	// the release hands the lock to it.
	require.NoError(t, holder.Unlock(ctx))
	openGate()
	r := awaitAsync(t, got, 10*time.Second, "the waiter, handed the lock")
	require.NoError(t, r.err)
	require.NoError(t, r.v.Unlock(ctx))
	require.False(t, wdExists(t, rdb, name))

	// Nobody holds or waits for the lock any more: after the hub's linger (1 s) the
	// channel must be unsubscribed.
	channel := lua.ChannelName(name)
	check := srv.Client(t)
	require.Eventually(t, func() bool {
		n, err := check.PubSubNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 0
	}, 5*time.Second, 50*time.Millisecond,
		"%s still subscribed after the lock was handed off during SUBSCRIBE and released", channel)
}

// 8. Closing a client with holds and a waiter leaves no goroutine behind.
func TestWatchdogCloseLeaksNoGoroutine(t *testing.T) {
	srv := redistest.Shared(t)
	ignore := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	c, err := rlock.New(rdb, wdOpts()...)
	require.NoError(t, err)
	ctx := testCtx(t, 30*time.Second)
	prefix := redistest.Name(t)

	var leases []*rlock.Lease
	octx := rlock.WithOwner(ctx)
	for i := range 5 {
		l, err := c.NewMutex(prefix + ":" + strconv.Itoa(i)).Lock(octx)
		require.NoError(t, err)
		leases = append(leases, l)
	}
	l, err := c.NewMutex(prefix + ":0").Lock(octx) // reentrant
	require.NoError(t, err)
	leases = append(leases, l)

	waitErr := make(chan error, 1)
	go func() {
		_, err := c.NewMutex(prefix + ":0").Lock(ctx) // another owner: waits
		waitErr <- err
	}()
	check := srv.Client(t)
	channel := lua.ChannelName(prefix + ":0")
	require.Eventually(t, func() bool {
		n, err := check.PubSubNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 1
	}, 5*time.Second, 10*time.Millisecond, "the waiter did not subscribe")
	wdHoldFor(t, wdInterval+wdInterval/2, leases...) // a renewal round

	require.NoError(t, c.Close())
	select {
	case err := <-waitErr:
		require.ErrorIs(t, err, rlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return after Close")
	}
	for _, l := range leases {
		require.ErrorIs(t, l.Err(), rlock.ErrClosed)
	}
	require.NoError(t, rdb.Close())
	goleak.VerifyNone(t, ignore)
}

// wdLogBuffer is a bytes.Buffer safe for concurrent writes, for a slog handler.
type wdLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *wdLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *wdLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// 9. WithOnLost is called once per lost hold, and WithLogger logs the loss.
func TestWatchdogOnLostAndLogger(t *testing.T) {
	var logs wdLogBuffer
	type lost struct {
		name string
		err  error
	}
	var mu sync.Mutex
	var calls []lost
	onLost := func(name string, err error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, lost{name, err})
	}
	rdb, c, a := setup(t, wdOpts(
		rlock.WithOnLost(onLost),
		rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
	)...)
	b := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)

	// Two reentrant leases on a (one hold), one on b.
	octx := rlock.WithOwner(ctx)
	la1, err := c.NewMutex(a).Lock(octx)
	require.NoError(t, err)
	la2, err := c.NewMutex(a).Lock(octx)
	require.NoError(t, err)
	lb, err := c.NewMutex(b).Lock(octx)
	require.NoError(t, err)

	require.NoError(t, rdb.Del(ctx, a, b).Err())
	since := time.Now()
	for _, l := range []*rlock.Lease{la1, la2, lb} {
		wdAwaitDone(t, l, since, time.Second)
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2
	}, 2*time.Second, 10*time.Millisecond)
	// Two more renewal intervals: no further call may come.
	timer := time.NewTimer(2 * wdInterval)
	<-timer.C
	mu.Lock()
	got := append([]lost(nil), calls...)
	mu.Unlock()
	require.Len(t, got, 2, "one call per lost hold")
	seen := map[string]bool{}
	for _, call := range got {
		require.ErrorIs(t, call.err, rlock.ErrLockLost)
		require.False(t, seen[call.name], "two calls for %s", call.name)
		seen[call.name] = true
	}
	require.True(t, seen[a] && seen[b], "calls for %v", seen)

	out := logs.String()
	t.Logf("log:\n%s", out)
	require.Equal(t, 2, strings.Count(out, "msg="+observe.EventHoldEnd), "one log record per lost hold")
	require.Equal(t, 2, strings.Count(out, observe.AttrOutcome+"="+observe.HoldLost.String()), "with the observer's outcome")
	require.Equal(t, 2, strings.Count(out, observe.AttrKind+"="+observe.KindMutex.String()), "and kind")
	require.Contains(t, out, a)
	require.Contains(t, out, b)
	require.Contains(t, out, "level=WARN")
}

// 10. A fixed lease ends at its deadline: Done closes, the key is gone.
func TestWatchdogFixedLeaseEndsAtDeadline(t *testing.T) {
	const lease = 500 * time.Millisecond
	rdb, c, name := setup(t, wdOpts()...)
	ctx := testCtx(t, 30*time.Second)
	start := time.Now()
	l, err := c.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(lease))
	require.NoError(t, err)
	ttl := wdPTTL(t, rdb, name)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, lease)

	ended := wdAwaitDone(t, l, start, lease+time.Second)
	t.Logf("fixed lease of %v: Done closed %v after the acquire was sent", lease, ended)
	require.GreaterOrEqual(t, ended, lease-10*time.Millisecond, "Done closed before the deadline")
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	require.ErrorIs(t, l.Err(), watchdog.ErrLeaseEnded)
	// The local deadline counts from the send time, so Redis may expire the key a
	// few milliseconds later.
	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, name).Result()
		return err == nil && n == 0
	}, time.Second, 5*time.Millisecond, "the key outlived its lease")
}

// 10. A renewal round that times out (Redis frozen: SIGSTOP) is logged as a
// failed renewal, as docs/observability.md says, before the hold is declared
// lost. Before, only the final loss was logged: the warning was kept for errors
// that came before the round's own deadline (a refused connection), and a frozen
// server makes every round end by that deadline (28.5 s without one warning).
func TestWatchdogRenewalTimeoutIsLogged(t *testing.T) {
	srv := redistest.StartControllable(t)
	var logs wdLogBuffer
	c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(1500*time.Millisecond),
		rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(redistest.Name(t)).Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	frozen := time.Now()
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "msg="+observe.EventRenewal+" ") &&
			strings.Contains(logs.String(), observe.AttrOutcome+"="+observe.RenewFailed.String())
	}, 10*time.Second, 10*time.Millisecond, "a failed renewal logged; logs:\n%s", logs.String())
	t.Logf("the renewal's failure was logged %v after the freeze", time.Since(frozen).Round(time.Millisecond))
	<-l.Done()
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
}

// TestWatchdogDeclaresLossWhenRedisDoesNotAnswer freezes the server: renewals
// time out, and the hold is declared lost once its local deadline (last confirmed
// renewal + timeout) has passed, without hearing anything from Redis.
func TestWatchdogDeclaresLossWhenRedisDoesNotAnswer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond; o.MaxRetries = 1 })
	c := newClient(t, rdb, rlock.WithWatchdogTimeout(time.Second))
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(redistest.Name(t)).Lock(ctx)
	require.NoError(t, err)

	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	select {
	case <-l.Done():
		took := time.Since(frozen)
		t.Logf("loss declared %v after the server stopped answering (timeout 1s, interval 333ms)", took.Round(time.Millisecond))
		require.Less(t, took, 3*time.Second)
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.True(t, errors.Is(l.Err(), watchdog.ErrNotRenewed), "%v", l.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not declared lost while Redis did not answer")
	}
	require.NoError(t, srv.Signal(syscall.SIGCONT))
}

// The renewal kinds (lua.RenewalKind) against a real server: a permit of a
// permit-expirable semaphore renewed by a watchdog, and batches that mix a lock
// hold, a read hold and a permit, some of them gone or of another type.

// permitID returns a permit id as Redisson ≥ 3.17 stores it: 16 raw bytes.
func permitID(t testing.TB) string {
	var b [16]byte
	_, err := crand.Read(b[:])
	require.NoError(t, err)
	return string(b[:])
}

// addPermit writes the permit id into the semaphore name's timeouts zset with
// expiry now + lease, as Redisson's tryAcquire does (protocol §2.12), and the
// semaphore's available count.
func addPermit(t testing.TB, rdb *redis.Client, name, id string, lease time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, name, 0, 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, lua.PermitTimeoutsName(name),
		redis.Z{Score: float64(time.Now().Add(lease).UnixMilli()), Member: id}).Err())
}

// permitScore returns the permit's score, 0 when it is not a member.
func permitScore(t testing.TB, rdb *redis.Client, name, id string) int64 {
	t.Helper()
	s, err := rdb.ZScore(context.Background(), lua.PermitTimeoutsName(name), id).Result()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return int64(s)
}

// watchPermit starts a watchdog of the given timeout (a round every third of
// it) and has it renew the permit; losses arrive on the returned channel.
func watchPermit(t testing.TB, rdb *redis.Client, name, id string, timeout time.Duration) (*watchdog.Watchdog, chan error) {
	t.Helper()
	w := watchdog.New(rdb, watchdog.Options{Timeout: timeout})
	t.Cleanup(w.Close)
	lost := make(chan error, 1)
	w.Watch(lua.PermitRenewal(name, id), time.Now().Add(timeout), true, lua.Acks{}, func(err error) { lost <- err })
	return w, lost
}

// TestRenewPermitMovesScore: a watchdog renews a permit by moving its score,
// its expiry in epoch ms on the client's clock, to the round's send time plus
// the timeout, round after round, while the permit is held.
func TestRenewPermitMovesScore(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	name, id := redistest.Name(t), permitID(t)
	const timeout = 900 * time.Millisecond
	addPermit(t, rdb, name, id, timeout)
	_, lost := watchPermit(t, rdb, name, id, timeout)

	last := permitScore(t, rdb, name, id)
	for moves := 0; moves < 4; {
		select {
		case err := <-lost:
			t.Fatalf("permit lost while held: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		s := permitScore(t, rdb, name, id)
		read := time.Now().UnixMilli()
		require.NotZero(t, s, "the renewal removed the permit")
		require.GreaterOrEqual(t, s, last, "a renewal moved the expiry back")
		require.LessOrEqual(t, s, read+timeout.Milliseconds(), "the expiry is past now + timeout")
		if s > last {
			moves++
			last = s
		}
	}
	// Four rounds (a round every 300 ms) outlived the permit's first lease.
	require.Greater(t, last, time.Now().UnixMilli(), "the renewed permit expired")
}

// TestRenewPermitGone: once the permit leaves the zset (released: ZREM; the
// semaphore deleted: DEL) or its score is past (expired, which Redisson
// reclaims), the next round reports ErrGone, well before the local deadline
// would have said ErrNotRenewed, and the permit is not written back.
func TestRenewPermitGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(rdb *redis.Client, name, id string) error
	}{
		{"released", func(rdb *redis.Client, name, id string) error {
			return rdb.ZRem(context.Background(), lua.PermitTimeoutsName(name), id).Err()
		}},
		{"deleted", func(rdb *redis.Client, name, _ string) error {
			return rdb.Del(context.Background(), name, lua.PermitTimeoutsName(name)).Err()
		}},
		{"expired", func(rdb *redis.Client, name, id string) error {
			past := float64(time.Now().Add(-time.Second).UnixMilli())
			return rdb.ZAdd(context.Background(), lua.PermitTimeoutsName(name), redis.Z{Score: past, Member: id}).Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Shared(t).Client(t)
			name, id := redistest.Name(t), permitID(t)
			const timeout = 1500 * time.Millisecond // a round every 500 ms
			addPermit(t, rdb, name, id, timeout)
			_, lost := watchPermit(t, rdb, name, id, timeout)
			first := permitScore(t, rdb, name, id)
			require.Eventually(t, func() bool { return permitScore(t, rdb, name, id) > first },
				2*timeout, 20*time.Millisecond, "no first renewal")

			require.NoError(t, tc.end(rdb, name, id))
			ended := time.Now()
			select {
			case err := <-lost:
				require.ErrorIs(t, err, watchdog.ErrGone)
				require.Less(t, time.Since(ended), timeout, "reported by the deadline, not by a round")
			case <-time.After(3 * timeout):
				t.Fatal("the permit's end was not reported")
			}
			if tc.name == "expired" {
				require.Less(t, permitScore(t, rdb, name, id), time.Now().UnixMilli(), "an expired permit was renewed")
			} else {
				require.Zero(t, permitScore(t, rdb, name, id), "the permit was written back")
			}
		})
	}
}

// TestRenewKindsMixedBatch: one renew.lua call extends a lock hold, a read
// hold (its timeout keys and the lock's key) and a permit whose keys share one
// slot, and answers 0 for the holds that are gone, without touching them.
func TestRenewKindsMixedBatch(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	tag := "{" + redistest.Name(t) + "}"
	lockName, rwName, semName := tag+":lock", tag+":rw", tag+":sem"
	field, id := "3edaecd7-8b5a-4c47-bdc6-fff775044369:82", permitID(t)

	require.NoError(t, rdb.HSet(ctx, lockName, field, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, lockName, time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, rwName, "mode", "read", field, 2).Err())
	require.NoError(t, rdb.PExpire(ctx, rwName, time.Second).Err())
	for k := 1; k <= 2; k++ {
		require.NoError(t, rdb.Set(ctx, lua.ReadTimeoutName(rwName, field, k), 1, time.Second).Err())
	}
	addPermit(t, rdb, semName, id, time.Second)

	rw := lua.NewLayoutLock(rwName, lua.LayoutRead)
	holds := []lua.Renewal{
		lua.NewLock(lockName).Renewal(field),
		rw.Renewal(field),
		lua.PermitRenewal(semName, id),
		lua.NewLock(lockName).Renewal("someone:else"), // no such field
		rw.Renewal("someone:else"),
		lua.PermitRenewal(semName, permitID(t)), // no such permit
		lua.PermitRenewal(tag+":nosem", id),     // no such semaphore
	}
	require.Equal(t, lua.RenewReadHold, holds[1].Kind)
	require.Equal(t, tag+":rw", holds[1].Prefix, "the read timeout prefix of a name with a tag is the name")
	for _, h := range holds {
		require.Equal(t, lua.Slot(tag), lua.Slot(h.Key), h.Key)
	}

	now, lease := time.Now(), time.Minute
	ok := renewBatch(t, rdb, holds, now, lease)
	require.Equal(t, []bool{true, true, true, false, false, false, false}, ok)

	long := func(key string) {
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second, key)
	}
	long(lockName)
	long(rwName)
	long(lua.ReadTimeoutName(rwName, field, 1))
	long(lua.ReadTimeoutName(rwName, field, 2))
	require.Equal(t, now.UnixMilli()+lease.Milliseconds(), permitScore(t, rdb, semName, id), "the permit's expiry is now + lease")
	n, err := rdb.Exists(ctx, tag+":nosem:timeout").Result()
	require.NoError(t, err)
	require.Zero(t, n, "a renewal created a semaphore's zset")

	// A read hold keeps the lock's key at the longer of its TTL and the lease
	// (other readers'); a lock hold sets it to the lease.
	require.NoError(t, rdb.PExpire(ctx, rwName, 2*time.Hour).Err())
	require.NoError(t, rdb.PExpire(ctx, lockName, 2*time.Hour).Err())
	require.Equal(t, []bool{true, true}, renewBatch(t, rdb, holds[:2], time.Now(), lease))
	ttl, err := rdb.PTTL(ctx, rwName).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Hour, "a read hold's renewal shortened the other readers' lease")
	ttl, err = rdb.PTTL(ctx, lockName).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, ttl, lease)
}

// TestRenewKindsWrongType: a key of another type than its kind expects fails
// only its own entry, in a batch and under a watchdog: the batch's other holds
// are renewed, and the watchdog reports only that hold lost (ErrGone).
func TestRenewKindsWrongType(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	tag := "{" + redistest.Name(t) + "}"
	str, hash, zset := tag+":str", tag+":hash", tag+":zset"
	require.NoError(t, rdb.Set(ctx, str, "x", 0).Err())
	require.NoError(t, rdb.HSet(ctx, hash, "f", 1).Err())
	require.NoError(t, rdb.ZAdd(ctx, zset, redis.Z{Score: 1, Member: "f"}).Err())
	semName, id := tag+":sem", permitID(t)
	addPermit(t, rdb, semName, id, time.Second)
	lockName := tag + ":lock"
	require.NoError(t, rdb.HSet(ctx, lockName, "f", 1).Err())

	holds := []lua.Renewal{
		{Kind: lua.RenewLockHold, Key: str, Member: "f"},
		{Kind: lua.RenewReadHold, Key: zset, Member: "f", Prefix: tag},
		{Kind: lua.RenewPermit, Key: hash, Member: "f"},
		{Kind: lua.RenewLockHold, Key: hash, Member: "f"},
		lua.PermitRenewal(semName, id),
		{Kind: lua.RenewLockHold, Key: lockName, Member: "f"},
	}
	require.Equal(t, []bool{false, false, false, true, true, true}, renewBatch(t, rdb, holds, time.Now(), time.Minute))
	v, err := rdb.Get(ctx, str).Result()
	require.NoError(t, err)
	require.Equal(t, "x", v, "the string was touched")

	// Under a watchdog: the permit whose key is a hash is lost, the good one
	// (same slot, same batch) keeps being renewed.
	const timeout = 900 * time.Millisecond
	w := watchdog.New(rdb, watchdog.Options{Timeout: timeout})
	t.Cleanup(w.Close)
	badLost, goodLost := make(chan error, 1), make(chan error, 1)
	w.Watch(lua.Renewal{Kind: lua.RenewPermit, Key: hash, Member: "f"}, time.Now().Add(timeout), true, lua.Acks{}, func(err error) { badLost <- err })
	w.Watch(lua.PermitRenewal(semName, id), time.Now().Add(timeout), true, lua.Acks{}, func(err error) { goodLost <- err })
	select {
	case err := <-badLost:
		require.ErrorIs(t, err, watchdog.ErrGone)
	case <-time.After(3 * timeout):
		t.Fatal("the wrong-type hold was not reported")
	}
	first := permitScore(t, rdb, semName, id)
	require.Eventually(t, func() bool { return permitScore(t, rdb, semName, id) > first }, 3*timeout, 20*time.Millisecond,
		"the good permit is no longer renewed")
	select {
	case err := <-goodLost:
		t.Fatalf("the good permit was lost: %v", err)
	default:
	}
}

// renewBatch sends one renewal batch and returns its per-hold answers.
func renewBatch(t testing.TB, rdb *redis.Client, holds []lua.Renewal, now time.Time, lease time.Duration) []bool {
	t.Helper()
	ctx := context.Background()
	for try := 0; try < 2; try++ {
		pipe := rdb.Pipeline()
		cmd := lua.RenewCmd(ctx, pipe, holds, now, lease, false)
		_, _ = pipe.Exec(ctx)
		ok, err := lua.RenewResult(cmd)
		if lua.IsNoScript(err) && try == 0 {
			require.NoError(t, lua.LoadRenew(ctx, rdb))
			continue
		}
		require.NoError(t, err)
		return ok
	}
	panic("unreachable")
}

// TestCheckKinds: check.lua, the tracker's look at holds, answers per hold
// Gone, NoTimeout or the ms left, for every kind and every way a hold is
// missing, and changes nothing.
func TestCheckKinds(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	name := redistest.Name(t)
	k := func(s string) string { return "{" + name + "}:" + s }
	now := time.Now()
	id, expired, forever := permitID(t), permitID(t), permitID(t)
	require.NoError(t, rdb.HSet(ctx, k("lock"), "u:1", 2).Err())
	require.NoError(t, rdb.PExpire(ctx, k("lock"), 20*time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, k("forever"), "u:1", 1).Err())
	require.NoError(t, rdb.HSet(ctx, k("read"), "mode", "read", "u:1", 1).Err())
	require.NoError(t, rdb.PExpire(ctx, k("read"), 10*time.Second).Err())
	require.NoError(t, rdb.Set(ctx, k("string"), "x", 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, k("sem:timeout"),
		redis.Z{Score: float64(now.Add(15 * time.Second).UnixMilli()), Member: id},
		redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: expired},
		redis.Z{Score: 922337203685477, Member: forever}).Err())
	require.NoError(t, rdb.ZAdd(ctx, k("short:timeout"), redis.Z{Score: float64(now.Add(15 * time.Second).UnixMilli()), Member: id}).Err())
	require.NoError(t, rdb.PExpire(ctx, k("short:timeout"), 5*time.Second).Err())
	before := dumpAll(t, rdb, k("lock"), k("forever"), k("read"), k("string"), k("sem:timeout"), k("short:timeout"))

	lock := func(key, field string) lua.Renewal { return lua.NewLock(key).Renewal(field) }
	read := func(key, field string) lua.Renewal { return lua.NewLayoutLock(key, lua.LayoutRead).Renewal(field) }
	permit := func(key, id string) lua.Renewal { return lua.Renewal{Kind: lua.RenewPermit, Key: key, Member: id} }
	cases := []struct {
		what     string
		hold     lua.Renewal
		min, max int64
	}{
		{"lock held", lock(k("lock"), "u:1"), 19_000, 20_000},
		{"lock without the field", lock(k("lock"), "u:2"), lua.Gone, lua.Gone},
		{"lock without a TTL", lock(k("forever"), "u:1"), lua.NoTimeout, lua.NoTimeout},
		{"lock key missing", lock(k("none"), "u:1"), lua.Gone, lua.Gone},
		{"lock key of another type", lock(k("string"), "u:1"), lua.Gone, lua.Gone},
		{"read hold", read(k("read"), "u:1"), 9_000, 10_000},
		{"read hold missing", read(k("read"), "u:2"), lua.Gone, lua.Gone},
		{"permit held", permit(k("sem:timeout"), id), 14_000, 15_000},
		{"permit expired", permit(k("sem:timeout"), expired), lua.Gone, lua.Gone},
		{"permit without a lease", permit(k("sem:timeout"), forever), lua.NoTimeout, lua.NoTimeout},
		{"permit whose set expires sooner", permit(k("short:timeout"), id), 4_000, 5_000},
		{"permit missing", permit(k("sem:timeout"), permitID(t)), lua.Gone, lua.Gone},
		{"permit set of another type", permit(k("string"), id), lua.Gone, lua.Gone},
	}
	holds := make([]lua.Renewal, len(cases))
	for i, c := range cases {
		holds[i] = c.hold
	}
	require.NoError(t, lua.LoadCheck(ctx, rdb))
	pipe := rdb.Pipeline()
	cmd := lua.CheckCmd(ctx, pipe, holds, now)
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	left, err := lua.CheckResult(cmd)
	require.NoError(t, err)
	for i, c := range cases {
		require.GreaterOrEqual(t, left[i], c.min, c.what)
		require.LessOrEqual(t, left[i], c.max, c.what)
	}
	require.Equal(t, before, dumpAll(t, rdb, k("lock"), k("forever"), k("read"), k("string"), k("sem:timeout"), k("short:timeout")))
}

// dumpAll returns DUMP of each key.
func dumpAll(t *testing.T, rdb *redis.Client, keys ...string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = rdb.Dump(context.Background(), key).Val()
	}
	return out
}

// TestWatchdogRoundAfterScriptFlush: a server that lost its script cache answers
// the renewal pipeline NOSCRIPT; the watchdog loads the script and sends the
// pipeline again, so the round costs 3 round trips (pipeline, SCRIPT LOAD,
// pipeline) whatever the number of batches, and no hold is lost.
func TestWatchdogRoundAfterScriptFlush(t *testing.T) {
	s := wdStartScale(t, 350, 600*time.Millisecond, false) // 4 batches, a round every 200 ms; the hook counts the client's round trips
	require.NoError(t, s.stats.ScriptFlush(context.Background()).Err())
	s.begin()
	s.awaitRound()
	r := s.end()
	t.Logf("round after SCRIPT FLUSH: %s", r)
	require.LessOrEqual(t, r.RoundTrips, 3.0)
	s.checkHeld()
}
