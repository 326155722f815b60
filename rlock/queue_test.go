package rlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

const tick = time.Millisecond // polling step of require.Eventually

// testCtx returns a context that ends the test's calls after 5 s at the latest.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// handing returns the owner of the hand-off in flight on name, or nil.
func handing(c *Client, name string) *owner {
	c.locks.mu.Lock()
	defer c.locks.mu.Unlock()
	if e := c.locks.entries[name]; e != nil && e.handing != nil {
		return e.handing.o
	}
	return nil
}

// newMutexTest returns a fake lock, a client of it, the client's mutex name
// and a ctx for the test's calls.
func newMutexTest(t *testing.T, name string) (*fakeLock, *Client, *Mutex, context.Context) {
	t.Helper()
	f, c := newFakePair(t)
	return f, c, c.NewMutex(name), testCtx(t)
}

// unlockGated runs hl.Unlock(hctx) in a goroutine and holds its release in
// the fake at the returned gate, once it entered; Unlock's error arrives on
// the channel.
func unlockGated(t *testing.T, f *fakeLock, c *Client, hctx context.Context, hl *Lease) (*gate, <-chan error) {
	t.Helper()
	hField := ownerFrom(hctx).field(c.id).String()
	g := newGate(t)
	f.setHooks(fakeHooks{beforeRelease: func(_ context.Context, a lua.ReleaseArgs) error {
		if a.Field.String() == hField {
			g.pass()
		}
		return nil
	}})
	unlocked := make(chan error, 1)
	go func() { unlocked <- hl.Unlock(hctx) }()
	g.waitEntered(t)
	return g, unlocked
}

// requireNoErrorWithin fails unless ch delivers nil within 2 s; slow says so.
func requireNoErrorWithin(t *testing.T, ch <-chan error, slow string) {
	t.Helper()
	select {
	case err := <-ch:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal(slow)
	}
}

// requireSettled waits until the fake lock is free and c's table is empty.
func requireSettled(t *testing.T, f *fakeLock, c *Client) {
	t.Helper()
	require.Eventually(t, func() bool { return f.isFree() && tableLen(c) == 0 }, time.Second, tick,
		"the lock must end free and the table empty")
}

// The holder's release hands the lock to the longest-waiting goroutine, in
// arrival order, each time in the release's own round trip: no waiter attempts.
func TestQueueFIFOHandOff(t *testing.T) {
	const name = "fifo"
	f, c, m, ctx := newMutexTest(t, name)
	hctx := WithOwner(ctx)
	h, err := m.Lock(hctx)
	require.NoError(t, err)

	const n = 8
	var mu sync.Mutex
	var order []int
	fields := make([]string, n)
	done := make(chan error, n)
	for i := range n {
		wctx := WithOwner(ctx)
		fields[i] = ownerFrom(wctx).field(c.id).String()
		go func() {
			l, err := m.Lock(wctx)
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			done <- l.Unlock(wctx)
		}()
		require.Eventually(t, func() bool { return queueLen(c, name) == i+1 }, 2*time.Second, tick,
			"waiter %d must be queued", i)
	}
	require.NoError(t, h.Unlock(hctx))
	for range n {
		requireNoErrorWithin(t, done, "the waiters did not all acquire and unlock within 2s")
	}

	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, order, "acquisition order = arrival order")
	require.Equal(t, n, f.outcome(lua.HandedOff), "every acquisition after the holder's was a hand-off")
	require.Equal(t, 1, f.outcome(lua.Released), "only the last unlock releases")
	require.Equal(t, 1, f.acquireCalls(), "only the first holder attempts; waiters are handed the lock")
	log := f.releaseLog()
	require.Len(t, log, n+1)
	for i, r := range log[:n] {
		require.Equal(t, fields[i], r.args.Successor.String(), "release %d names waiter %d", i, i)
		require.Equal(t, i >= maxHandOffs, r.args.Streak > 0, "release %d: after maxHandOffs, only if fewer clients listen", i)
		require.Equal(t, lua.HandedOff, r.reply.Outcome, "release %d: alone on the channel, so handed off", i)
	}
	require.Empty(t, log[n].args.Successor.String())
	requireSettled(t, f, c)
	require.Zero(t, f.openSubs())
}

// A waiter whose ctx ends while a release is handing it the lock returns at once;
// the releaser, finding it gone, gives the lock back, which hands it on to the
// next waiter.
func TestHandOffRacingCancellation(t *testing.T) {
	const name = "race"
	f, c, m, ctx := newMutexTest(t, name)
	hctx := WithOwner(ctx)
	hl, err := m.Lock(hctx)
	require.NoError(t, err)

	w1ctx, cancel1 := context.WithCancel(WithOwner(ctx))
	defer cancel1()
	w1 := lockAsync(w1ctx, m)
	require.Eventually(t, func() bool { return headSleeping(c, name, time.Second) }, 2*time.Second, tick)
	w2ctx := WithOwner(ctx)
	w2 := lockAsync(w2ctx, m)
	require.Eventually(t, func() bool { return queueLen(c, name) == 2 }, 2*time.Second, tick)

	hField := ownerFrom(hctx).field(c.id).String()
	w1Field, w2Field := ownerFrom(w1ctx).field(c.id).String(), ownerFrom(w2ctx).field(c.id).String()
	g, unlocked := unlockGated(t, f, c, hctx, hl)
	require.Same(t, ownerFrom(w1ctx), handing(c, name), "the release hands the lock to the head")

	cancel1()
	r1 := result(t, w1, time.Second)
	require.Nil(t, r1.l)
	require.ErrorIs(t, r1.err, ErrNotAcquired)
	require.ErrorIs(t, r1.err, context.Canceled)
	select {
	case <-unlocked:
		t.Fatal("the release finished while blocked")
	default:
	}

	g.release()
	requireNoErrorWithin(t, unlocked, "Unlock did not return within 2s")
	r2 := result(t, w2, 2*time.Second)
	require.NoError(t, r2.err)

	log := f.releaseLog()
	require.Len(t, log, 2)
	require.Equal(t, hField, log[0].args.Field.String())
	require.Equal(t, w1Field, log[0].args.Successor.String())
	require.Equal(t, lua.HandedOff, log[0].reply.Outcome, "the release handed the lock to the departed W1")
	require.Equal(t, w1Field, log[1].args.Field.String(), "the releaser gave W1's hold back")
	require.Equal(t, w2Field, log[1].args.Successor.String())
	require.Equal(t, lua.HandedOff, log[1].reply.Outcome, "which handed the lock on to W2")
	holder, count := f.state()
	require.Equal(t, w2Field, holder)
	require.EqualValues(t, 1, count)

	require.NoError(t, r2.l.Unlock(w2ctx))
	requireSettled(t, f, c)
}

// A waiter's ctx ends at the instant a release hands it the lock: Lock returns
// either a lease or an error, never both, and no hold is left behind.
func TestGrantVersusCancellation(t *testing.T) {
	rdb, _ := noServer(t)
	const name = "grant"
	var granted, cancelled int
	for i := range 200 {
		f := newFakeLock()
		c := newFakeClientOn(t, rdb, f)
		m := c.NewMutex(name)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		hctx := WithOwner(ctx)
		hl, err := m.Lock(hctx)
		require.NoError(t, err)
		wctx, cancelW := context.WithCancel(WithOwner(ctx))
		w := lockAsync(wctx, m)
		require.Eventually(t, func() bool { return headSleeping(c, name, time.Second) }, 2*time.Second, tick)

		hField := ownerFrom(hctx).field(c.id).String()
		switch i % 4 {
		case 0: // the release has named W as successor, its script has not run
			f.setHooks(fakeHooks{beforeRelease: func(_ context.Context, a lua.ReleaseArgs) error {
				if a.Field.String() == hField {
					cancelW()
				}
				return nil
			}})
		case 1: // the script handed W the lock, its reply is on the way
			f.setHooks(fakeHooks{afterRelease: func(a lua.ReleaseArgs, _ lua.ReleaseReply) error {
				if a.Field.String() == hField {
					cancelW()
				}
				return nil
			}})
		case 2: // anywhere
			go cancelW()
		case 3: // W has left when the script runs
			f.setHooks(fakeHooks{beforeRelease: func(_ context.Context, a lua.ReleaseArgs) error {
				if a.Field.String() == hField {
					cancelW()
					require.Eventually(t, func() bool { return queueLen(c, name) == 0 }, 2*time.Second, tick)
				}
				return nil
			}})
		}
		require.NoError(t, hl.Unlock(hctx))
		r := result(t, w, 2*time.Second)
		if i%4 == 3 {
			require.Error(t, r.err, "W had left before the hand-off")
		}
		if r.err == nil {
			granted++
			require.NotNil(t, r.l)
			require.NoError(t, r.l.Unlock(ctx))
		} else {
			cancelled++
			require.Nil(t, r.l, "a lease and an error")
			require.ErrorIs(t, r.err, ErrNotAcquired)
			require.ErrorIs(t, r.err, context.Canceled)
		}
		requireSettled(t, f, c)
		require.Zero(t, f.openSubs())
		cancelW()
		cancel()
		require.NoError(t, c.Close())
	}
	t.Logf("granted %d, cancelled %d", granted, cancelled)
}

// A head sleeps until the holder's lease ends when no release is heard: it
// attempts then, not before (no polling).
func TestHeadSleepIsBoundedByTTL(t *testing.T) {
	f := newFakeLock()
	f.holdBy("foreign:1", 1, 300*time.Millisecond)
	c := newFakeClient(t, f)
	const name = "bounded"
	m := c.NewMutex(name)
	ctx := WithOwner(testCtx(t))
	start := time.Now()
	l, err := m.Lock(ctx)
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.Less(t, elapsed, 2*time.Second)
	require.GreaterOrEqual(t, elapsed, 250*time.Millisecond, "acquired before the holder's lease ended")
	// The first attempt, the one after the subscription was confirmed, the one
	// when the lease ended (and one spare).
	require.LessOrEqual(t, f.acquireCalls(), 4, "the head must sleep, not poll")
	require.NoError(t, l.Unlock(ctx))
	requireSettled(t, f, c)
}

// A release published by another process wakes the head: it attempts long before
// the holder's lease ends.
func TestPublishedReleaseWakesHead(t *testing.T) {
	f := newFakeLock()
	f.holdBy("foreign:1", 1, time.Hour)
	c := newFakeClient(t, f)
	const name = "published"
	m := c.NewMutex(name)
	ctx := WithOwner(testCtx(t))
	w := lockAsync(ctx, m)
	require.Eventually(t, func() bool { return headSleeping(c, name, time.Minute) }, 2*time.Second, tick)
	calls := f.acquireCalls()
	f.releaseForeign()
	r := result(t, w, time.Second)
	require.NoError(t, r.err)
	require.Equal(t, calls+1, f.acquireCalls(), "one attempt per release heard")
	require.NoError(t, r.l.Unlock(ctx))
	requireSettled(t, f, c)
}

// A release that happened before the head's subscription was confirmed is not
// heard: the attempt that follows the confirmation finds the lock free.
func TestAttemptAfterConfirmation(t *testing.T) {
	f := newFakeLock()
	f.manualConfirm = true
	f.holdBy("foreign:1", 1, time.Hour)
	c := newFakeClient(t, f)
	const name = "confirm"
	m := c.NewMutex(name)
	ctx := WithOwner(testCtx(t))
	w := lockAsync(ctx, m)
	require.Eventually(t, func() bool { return headSleeping(c, name, time.Minute) && f.openSubs() == 1 },
		2*time.Second, tick)
	require.Equal(t, 1, f.acquireCalls(), "no attempt before the subscription is confirmed")
	f.free() // an expiry: nothing is published
	f.confirmAll()
	r := result(t, w, time.Second)
	require.NoError(t, r.err)
	require.Equal(t, 2, f.acquireCalls())
	require.NoError(t, r.l.Unlock(ctx))
	requireSettled(t, f, c)
}

// A local hold that ends without an unlock (here: lost) wakes the head at once,
// although it sleeps until the hold's lease end and nothing is published.
func TestLostHoldWakesHead(t *testing.T) {
	const name = "lost"
	f, c, m, ctx := newMutexTest(t, name)
	hctx := WithOwner(ctx)
	hl, err := m.Lock(hctx, WithLeaseTime(time.Hour))
	require.NoError(t, err)
	wctx := WithOwner(ctx)
	w := lockAsync(wctx, m)
	require.Eventually(t, func() bool { return headSleeping(c, name, 10*time.Minute) }, 2*time.Second, tick,
		"the head sleeps until the local hold's lease ends")

	h := holdOfCtx(c, hctx, name)
	require.NotNil(t, h)
	f.free()
	c.locks.lose(h, errors.New("gone"))

	r := result(t, w, time.Second)
	require.NoError(t, r.err)
	select {
	case <-hl.Done():
	default:
		t.Fatal("the lost hold's lease is not done")
	}
	require.ErrorIs(t, hl.Err(), ErrLockLost)
	require.ErrorIs(t, hl.Unlock(ctx), ErrNotHeld)
	holder, _ := f.state()
	require.Equal(t, ownerFrom(wctx).field(c.id).String(), holder)
	require.NoError(t, r.l.Unlock(wctx))
	requireSettled(t, f, c)
}

// loseFirstReply returns an afterRelease hook that loses the reply of field's
// first release: the release ran (here: handed the lock over) but its caller
// gets an error.
func loseFirstReply(field string, lost error) func(lua.ReleaseArgs, lua.ReleaseReply) error {
	var once atomic.Bool
	return func(a lua.ReleaseArgs, _ lua.ReleaseReply) error {
		if a.Field.String() == field && once.CompareAndSwap(false, true) {
			return lost
		}
		return nil
	}
}

// unknownSetup makes owner H hold name and a waiter W sleep at the head of the
// queue; W's ctx is returned with its cancel function.
func unknownSetup(t *testing.T, f *fakeLock, c *Client, name string) (hctx context.Context, hl *Lease, wctx context.Context, cancelW context.CancelFunc, w <-chan lockResult) {
	t.Helper()
	ctx := testCtx(t)
	hctx = WithOwner(ctx)
	hl, err := c.NewMutex(name).Lock(hctx)
	require.NoError(t, err)
	wctx, cancelW = context.WithCancel(WithOwner(ctx))
	t.Cleanup(cancelW)
	w = lockAsync(wctx, c.NewMutex(name))
	require.Eventually(t, func() bool { return headSleeping(c, name, time.Second) }, 2*time.Second, tick)
	return hctx, hl, wctx, cancelW, w
}

// loseThen is the hooks that lose the reply of hField's first release
// (loseFirstReply) and run onW before each attempt of wField, which fails
// with its error.
func loseThen(hField, wField string, onW func() error) fakeHooks {
	return fakeHooks{
		afterRelease: loseFirstReply(hField, errLostReply),
		beforeAcquire: func(_ context.Context, a lua.AcquireArgs) error {
			if a.Field.String() == wField {
				return onW()
			}
			return nil
		},
	}
}

var errLostReply = errors.New("connection reset (fake)")

// A release that handed the lock over but whose reply was lost: Unlock fails, the
// waiter's next attempt recognises the hand-off, and a retried Unlock is answered
// by the latch.
func TestReleaseUnknownOutcomeAfterHandOff(t *testing.T) {
	f, c := newFakePair(t)
	const name = "unknown"
	hctx, hl, wctx, _, w := unknownSetup(t, f, c, name)
	hField, wField := ownerFrom(hctx).field(c.id).String(), ownerFrom(wctx).field(c.id).String()
	f.setHooks(fakeHooks{afterRelease: loseFirstReply(hField, errLostReply)})

	err := hl.Unlock(hctx)
	require.ErrorIs(t, err, errLostReply)
	require.NotErrorIs(t, err, ErrNotHeld)
	r := result(t, w, 2*time.Second)
	require.NoError(t, r.err, "W's attempt recognises the hand-off")

	require.ErrorIs(t, hl.Err(), ErrUnlockUnconfirmed, "the failed Unlock ended the lease")
	select {
	case <-hl.Done():
	default:
		t.Fatal("the failed Unlock left Done open")
	}
	require.NoError(t, hl.Unlock(hctx), "the retried Unlock is answered by the latch")
	require.ErrorIs(t, hl.Err(), ErrUnlocked)
	holder, count := f.state()
	require.Equal(t, wField, holder)
	require.EqualValues(t, 1, count)
	require.Equal(t, 2, f.outcome(lua.HandedOff), "the hand-off and its latch")

	require.NoError(t, r.l.Unlock(wctx))
	requireSettled(t, f, c)
}

// The same, but W's ctx ends while its attempt is in flight: the attempt's reply
// is lost too. Whatever W's Lock returns, the lock ends free.
func TestReleaseUnknownOutcomeWaiterCancelledDuringAttempt(t *testing.T) {
	f, c := newFakePair(t)
	const name = "unknown-attempt"
	hctx, hl, wctx, cancelW, w := unknownSetup(t, f, c, name)
	hField, wField := ownerFrom(hctx).field(c.id).String(), ownerFrom(wctx).field(c.id).String()
	g := newGate(t)
	f.setHooks(loseThen(hField, wField, func() error { g.pass(); return nil }))

	require.ErrorIs(t, hl.Unlock(hctx), errLostReply)
	g.waitEntered(t) // W attempts, to settle the unknown outcome
	cancelW()
	g.release()
	r := result(t, w, 2*time.Second)
	if r.err == nil {
		require.NoError(t, r.l.Unlock(context.WithoutCancel(wctx)))
	} else {
		require.Nil(t, r.l)
		require.ErrorIs(t, r.err, ErrNotAcquired)
	}
	require.NoError(t, hl.Unlock(hctx))
	requireSettled(t, f, c)
}

// The same, but W's ctx ends right after the failed release, racing W's wake-up.
// Repeated, since which of the two W sees first is up to the scheduler.
func TestReleaseUnknownOutcomeWaiterCancelledAfterRelease(t *testing.T) {
	rdb, _ := noServer(t)
	for i := range 100 {
		f := newFakeLock()
		c := newFakeClientOn(t, rdb, f)
		const name = "unknown-cancel"
		hctx, hl, wctx, cancelW, w := unknownSetup(t, f, c, name)
		f.setHooks(fakeHooks{afterRelease: loseFirstReply(ownerFrom(hctx).field(c.id).String(), errLostReply)})

		require.ErrorIs(t, hl.Unlock(hctx), errLostReply)
		cancelW()
		r := result(t, w, 2*time.Second)
		if r.err == nil {
			require.NoError(t, r.l.Unlock(context.WithoutCancel(wctx)))
		} else {
			require.ErrorIs(t, r.err, ErrNotAcquired)
		}
		require.NoError(t, hl.Unlock(hctx))
		holder, count := f.state()
		require.Empty(t, holder, "iteration %d: orphan hold (W's field: %v) count %d after W's Lock returned %v",
			i, holder == ownerFrom(wctx).field(c.id).String(), count, r.err)
		requireSettled(t, f, c)
		require.NoError(t, c.Close())
	}
}

// Deterministic form of the race above. A failed release may have handed the
// lock to the head W (e.unsure = W). W wakes to settle it, but its attempt waits
// for another call of the same owner on the lock (owner.begin), and W's ctx ends
// meanwhile: attempt returns at its ctx check without any round trip. step must
// then keep e.unsure (the attempt settled nothing), so that leave gives back what
// W may hold; otherwise the lock stays held by W's field, which nobody in the
// client knows about, until its lease runs out.
func TestUnsureClearedByAttemptThatNeverRan(t *testing.T) {
	f, c := newFakePair(t)
	const name = "unsure"
	hctx, hl, wctx, cancelW, w := unknownSetup(t, f, c, name)
	hField, wField := ownerFrom(hctx).field(c.id).String(), ownerFrom(wctx).field(c.id).String()

	// Another goroutine of W's owner tries the lock; its call is held in the
	// fake, and then fails with an error reply, without effect.
	g := newGate(t)
	f.setHooks(loseThen(hField, wField, func() error { g.pass(); return replyError("ERR busy (fake)") }))
	other := make(chan error, 1)
	go func() {
		_, err := c.NewMutex(name).TryLock(wctx)
		other <- err
	}()
	g.waitEntered(t)

	require.ErrorIs(t, hl.Unlock(hctx), errLostReply) // handed to W, outcome unknown
	require.Eventually(t, func() bool {
		c.locks.mu.Lock()
		defer c.locks.mu.Unlock()
		e := c.locks.entries[name]
		return e != nil && e.attempting
	}, 2*time.Second, tick, "W wakes to attempt")
	cancelW()
	g.release()
	require.Error(t, <-other)
	r := result(t, w, 2*time.Second)
	if r.err == nil {
		require.NoError(t, r.l.Unlock(context.WithoutCancel(wctx)))
	}
	require.NoError(t, hl.Unlock(hctx))
	holder, count := f.state()
	require.Empty(t, holder, "orphan hold: W's field holds the lock %d time(s) after W's Lock returned %v", count, r.err)
	requireSettled(t, f, c)
}

// The same through another path: W's attempt, made to settle a hand-off of
// unknown outcome, fails with an error reply (BUSY, READONLY after a failover...):
// the script did not run, so acquireFailed rightly does not undo anything, and
// step must keep e.unsure so that leave gives back what the failed release may
// have handed W.
func TestUnsureClearedByAttemptErrorReply(t *testing.T) {
	f, c := newFakePair(t)
	const name = "unsure-reply"
	hctx, hl, wctx, _, w := unknownSetup(t, f, c, name)
	hField, wField := ownerFrom(hctx).field(c.id).String(), ownerFrom(wctx).field(c.id).String()
	f.setHooks(loseThen(hField, wField, func() error {
		return replyError("READONLY You can't write against a read only replica. (fake)")
	}))
	require.ErrorIs(t, hl.Unlock(hctx), errLostReply) // handed to W, outcome unknown
	r := result(t, w, 2*time.Second)
	require.Error(t, r.err)
	require.NoError(t, hl.Unlock(hctx))
	holder, count := f.state()
	require.Empty(t, holder, "orphan hold: W's field (%v) holds the lock %d time(s) after W's Lock returned %v",
		holder == wField, count, r.err)
	requireSettled(t, f, c)
}

// lockUnlockAsync runs Lock and, once it returns a lease, Unlock; the first
// error arrives on the returned channel (nil when both succeeded).
func lockUnlockAsync(ctx context.Context, m *Mutex) <-chan error {
	ch := make(chan error, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		ch <- err
	}()
	return ch
}

// After maxHandOffs hand-offs in a row, a release while another client listens
// on the channel is published instead of handed over, so that the other client's
// waiter gets a turn; everyone acquires in the end.
func TestHandOffStreakYieldsToOtherClients(t *testing.T) {
	f := newFakeLock()
	rdb, _ := noServer(t)
	a, b := newFakeClientOn(t, rdb, f), newFakeClientOn(t, rdb, f)
	const name = "streak"
	ctx := testCtx(t)
	hctx := WithOwner(ctx)
	hl, err := a.NewMutex(name).Lock(hctx)
	require.NoError(t, err)
	other := lockUnlockAsync(WithOwner(ctx), b.NewMutex(name))
	require.Eventually(t, func() bool { return headSleeping(b, name, time.Second) }, 2*time.Second, tick)

	const n = 5
	fields := make([]string, n)
	var done []<-chan error
	for i := range n {
		wctx := WithOwner(ctx)
		fields[i] = ownerFrom(wctx).field(a.id).String()
		done = append(done, lockUnlockAsync(wctx, a.NewMutex(name)))
		require.Eventually(t, func() bool { return queueLen(a, name) == i+1 }, 2*time.Second, tick)
	}
	require.NoError(t, hl.Unlock(hctx))
	for _, ch := range append(done, other) {
		requireNoErrorWithin(t, ch, "a waiter did not acquire and unlock within 2s")
	}

	log := f.releaseLog()
	require.GreaterOrEqual(t, len(log), maxHandOffs+1)
	for i, r := range log[:maxHandOffs] {
		require.Equal(t, fields[i], r.args.Successor.String())
		require.Zero(t, r.args.Streak)
		require.Equal(t, lua.HandedOff, r.reply.Outcome, "release %d", i)
	}
	yield := log[maxHandOffs]
	require.Equal(t, fields[maxHandOffs-1], yield.args.Field.String())
	require.Equal(t, fields[maxHandOffs], yield.args.Successor.String())
	require.Equal(t, maxHandOffs, yield.args.Streak)
	require.Equal(t, lua.Released, yield.reply.Outcome, "another client listens: the release is published")
	require.Eventually(t, func() bool { return f.isFree() && tableLen(a) == 0 && tableLen(b) == 0 },
		time.Second, tick)
	require.Zero(t, f.openSubs())
}

// Close ends every wait with ErrClosed, at once.
func TestCloseWhileWaiting(t *testing.T) {
	const name = "close"
	f, c, m, ctx := newMutexTest(t, name)
	hl, err := m.Lock(WithOwner(ctx), WithLeaseTime(time.Hour))
	require.NoError(t, err)
	w1 := lockAsync(WithOwner(ctx), m)
	require.Eventually(t, func() bool { return headSleeping(c, name, time.Minute) }, 2*time.Second, tick)
	w2 := lockAsync(WithOwner(ctx), m)
	require.Eventually(t, func() bool { return queueLen(c, name) == 2 }, 2*time.Second, tick)

	require.NoError(t, c.Close())
	for _, w := range []<-chan lockResult{w1, w2} {
		r := result(t, w, time.Second)
		require.Nil(t, r.l)
		require.ErrorIs(t, r.err, ErrClosed)
	}
	require.ErrorIs(t, hl.Err(), ErrClosed)
	require.Equal(t, 0, tableLen(c))
	require.Zero(t, f.openSubs())
}

// Close while a release is handing the lock to a waiter: the hand-off completes
// after Close has ended every hold, and handedOff, unlike acquired, does not look
// at c.ctx. The waiter's hold is recorded in the closed client for good (its
// giveBack, when the waiter left, fails with ErrClosed), and when the waiter has
// not left yet, Lock returns a lease after Close that never ends (Close's doc:
// leases end with ErrClosed).
func TestCloseDuringHandOff(t *testing.T) {
	rdb, _ := noServer(t)
	const name = "close-handoff"
	for i := range 50 {
		f := newFakeLock()
		c := newFakeClientOn(t, rdb, f)
		m := c.NewMutex(name)
		ctx := testCtx(t)
		hctx := WithOwner(ctx)
		hl, err := m.Lock(hctx)
		require.NoError(t, err)
		w := lockAsync(WithOwner(ctx), m)
		require.Eventually(t, func() bool { return headSleeping(c, name, time.Second) }, 2*time.Second, tick)
		g, unlocked := unlockGated(t, f, c, hctx, hl)
		require.NoError(t, c.Close())
		g.release()
		<-unlocked
		r := result(t, w, time.Second)
		if r.l != nil {
			select {
			case <-r.l.Done():
			default:
				t.Fatalf("iteration %d: Lock returned a lease after Close that never ends", i)
			}
		} else {
			require.ErrorIs(t, r.err, ErrClosed)
		}
		require.Equal(t, 0, tableLen(c), "iteration %d: the closed client still records a hold", i)
	}
}

// TryLock with a wait time gives up when it has elapsed, and leaves nothing
// behind.
func TestTryLockWaitTimeElapses(t *testing.T) {
	f := newFakeLock()
	f.holdBy("foreign:1", 1, time.Hour)
	c := newFakeClient(t, f)
	const name = "trylock"
	m := c.NewMutex(name)
	ctx := WithOwner(testCtx(t))
	start := time.Now()
	l, err := m.TryLock(ctx, WithWaitTime(300*time.Millisecond))
	elapsed := time.Since(start)
	require.Nil(t, l)
	require.ErrorIs(t, err, ErrNotAcquired)
	require.ErrorIs(t, err, errWaitElapsed)
	require.GreaterOrEqual(t, elapsed, 300*time.Millisecond)
	require.Less(t, elapsed, 2*time.Second)
	require.LessOrEqual(t, f.acquireCalls(), 3, "the head must sleep, not poll")
	require.Equal(t, 0, tableLen(c), "no waiter left")
	require.Zero(t, f.openSubs())
	holder, _ := f.state()
	require.Equal(t, "foreign:1", holder)
}
