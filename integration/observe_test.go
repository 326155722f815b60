package integration

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// recorder is an observer that keeps every event, implementing every optional
// interface of package observe. Its Start marks the ctx it returns, so that End
// and the Redis hook (ctxHook) can tell whether they got that ctx.
type recorder struct {
	mu       sync.Mutex
	calls    []callEvent
	open     int // calls started and not ended
	holds    map[observe.Kind]int
	ended    []holdEvent
	waiting  map[observe.Kind]int
	woken    map[observe.Cause]int
	waitEnds int
	renewals map[observe.RenewOutcome]int
	subs     int
	reconns  int
}

type callEvent struct {
	call   observe.Call
	res    observe.Result
	ownCtx bool // End got the ctx Start returned
}

type holdEvent struct {
	hold    observe.Hold
	outcome observe.HoldOutcome
	err     error
}

// callMark is the ctx key of the recorder's mark.
type callMark struct{}

func newRecorder() *recorder {
	return &recorder{holds: map[observe.Kind]int{}, waiting: map[observe.Kind]int{}, woken: map[observe.Cause]int{},
		renewals: map[observe.RenewOutcome]int{}}
}

func (r *recorder) Start(ctx context.Context, call observe.Call) context.Context {
	r.mu.Lock()
	r.open++
	r.mu.Unlock()
	return context.WithValue(ctx, callMark{}, call)
}

func (r *recorder) End(ctx context.Context, call observe.Call, res observe.Result) {
	mark, _ := ctx.Value(callMark{}).(observe.Call)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	r.calls = append(r.calls, callEvent{call: call, res: res, ownCtx: mark == call})
}

func (r *recorder) HoldStart(h observe.Hold) { r.locked(func() { r.holds[h.Kind]++ }) }
func (r *recorder) HoldEnd(h observe.Hold, o observe.HoldOutcome, err error) {
	r.locked(func() { r.holds[h.Kind]--; r.ended = append(r.ended, holdEvent{h, o, err}) })
}
func (r *recorder) WaitStart(w observe.Wait)              { r.locked(func() { r.waiting[w.Kind]++ }) }
func (r *recorder) Woken(w observe.Wait, c observe.Cause) { r.locked(func() { r.woken[c]++ }) }
func (r *recorder) WaitEnd(w observe.Wait)                { r.locked(func() { r.waiting[w.Kind]--; r.waitEnds++ }) }
func (r *recorder) Renewed(o observe.RenewOutcome, holds int) {
	r.locked(func() { r.renewals[o] += holds })
}
func (r *recorder) Subscriptions(delta int) { r.locked(func() { r.subs += delta }) }
func (r *recorder) Reconnected()            { r.locked(func() { r.reconns++ }) }

func (r *recorder) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// read runs f with the recorder locked.
func (r *recorder) read(f func(r *recorder) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// last returns the last ended call of op on kind.
func (r *recorder) last(t *testing.T, k observe.Kind, op observe.Op) callEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.calls) - 1; i >= 0; i-- {
		if c := r.calls[i]; c.call.Kind == k && c.call.Op == op {
			return c
		}
	}
	t.Fatalf("no %v.%v call recorded", k.TypeName(), op.Method())
	return callEvent{}
}

// holdEnds returns the outcomes of the ended holds of name.
func (r *recorder) holdEnds(name string) []observe.HoldOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []observe.HoldOutcome
	for _, e := range r.ended {
		if e.hold.Name == name {
			out = append(out, e.outcome)
		}
	}
	return out
}

// ctxHook checks that every command of rdb runs with a ctx the recorder
// marked: the ctx of an observed call.
type ctxHook struct {
	mu       sync.Mutex
	unmarked []string
}

func (h *ctxHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *ctxHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !clientsOwn(cmd) {
			h.check(ctx, cmd.Name())
		}
		return next(ctx, cmd)
	}
}
func (h *ctxHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return next(ctx, cmds) }
}

// clientsOwn reports whether cmd is the client's own, not a call's: its
// record's writes (package identity), and a connection's handshake.
func clientsOwn(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) > 1 {
		if k, ok := args[1].(string); ok && strings.HasPrefix(k, identity.Prefix) {
			return true
		}
	}
	return cmd.Name() == "hello"
}

func (h *ctxHook) check(ctx context.Context, name string) {
	if _, ok := ctx.Value(callMark{}).(observe.Call); !ok {
		h.mu.Lock()
		h.unmarked = append(h.unmarked, name)
		h.mu.Unlock()
	}
}

// TestObserverSeesEveryCall calls methods of every kind of object and checks
// that each is one Start and one End, with the kind and method, that End gets
// Start's ctx, and that every Redis command of the calls runs with it.
func TestObserverSeesEveryCall(t *testing.T) {
	rec := newRecorder()
	rdb := redistest.Shared(t).Client(t)
	hook := &ctxHook{}
	rdb.AddHook(hook)
	c := newClient(t, rdb, rlock.WithObserver(rec))
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	steps := []struct {
		kind observe.Kind
		op   observe.Op
		run  func() error
	}{
		{observe.KindMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewMutex(name+":m")) }},
		{observe.KindFairMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewFairMutex(name+":f")) }},
		{observe.KindFencedMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewFencedMutex(name+":x")) }},
		{observe.KindSpinMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewSpinMutex(name+":s")) }},
		{observe.KindReadMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewRWMutex(name+":rw").ReadLock()) }},
		{observe.KindWriteMutex, observe.OpLock, func() error { return lockUnlock(ctx, c.NewRWMutex(name+":rw").WriteLock()) }},
		{observe.KindMutex, observe.OpIsLocked, func() error { _, err := c.NewMutex(name + ":m").IsLocked(ctx); return err }},
		{observe.KindMutex, observe.OpRemainTTL, func() error { _, err := c.NewMutex(name + ":m").RemainTTL(ctx); return err }},
		{observe.KindMultiLock, observe.OpLeaseUnlock, func() error {
			l, err := rlock.NewMultiLock(c.NewMutex(name+":a"), c.NewMutex(name+":b")).Lock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}},
		{observe.KindSemaphore, observe.OpRelease, func() error {
			s := c.NewSemaphore(name + ":sem")
			if _, err := s.TrySetPermits(ctx, 1, 0); err != nil {
				return err
			}
			if err := s.Acquire(ctx, 1); err != nil {
				return err
			}
			return s.Release(ctx, 1)
		}},
		{observe.KindExpirableSemaphore, observe.OpPermitsRelease, func() error {
			s := c.NewExpirableSemaphore(name + ":xs")
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				return err
			}
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}},
		{observe.KindCountDownLatch, observe.OpAwait, func() error {
			l := c.NewCountDownLatch(name + ":latch")
			if _, err := l.TrySetCount(ctx, 1); err != nil {
				return err
			}
			if err := l.CountDown(ctx); err != nil {
				return err
			}
			return l.Await(ctx)
		}},
	}
	for _, s := range steps {
		require.NoError(t, s.run(), "%v.%v", s.kind.TypeName(), s.op.Method())
		got := rec.last(t, s.kind, s.op)
		require.Equal(t, observe.OutcomeOK, got.res.Outcome, "%v.%v", s.kind.TypeName(), s.op.Method())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Zero(t, rec.open, "every Start has its End")
	for _, e := range rec.calls {
		require.True(t, e.ownCtx, "End of %v got Start's ctx", observe.SpanName(e.call.Kind, e.call.Op))
		require.NotZero(t, e.call.Kind)
		require.False(t, e.call.Start.IsZero())
		require.False(t, e.res.Waited, "%v: nothing waited", observe.SpanName(e.call.Kind, e.call.Op))
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Empty(t, hook.unmarked, "commands run outside an observed call's ctx")
	for _, k := range []observe.Kind{observe.KindMutex, observe.KindFairMutex, observe.KindReadMutex, observe.KindExpirableSemaphore} {
		require.Zero(t, rec.holds[k], "holds of %v all ended", k)
	}
}

func lockUnlock(ctx context.Context, l rlock.Locker) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	return lease.Unlock(ctx)
}

// TestObserverOutcomes: a lock found taken, a wait that ran out, a cancelled
// wait and a failure each have their outcome; only the wait says it waited.
func TestObserverOutcomes(t *testing.T) {
	rec := newRecorder()
	rdb, c, name := setup(t, rlock.WithObserver(rec))
	ctx := testCtx(t, 30*time.Second)
	m := c.NewMutex(name)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	require.False(t, rec.last(t, observe.KindMutex, observe.OpLock).res.Waited)

	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	got := rec.last(t, observe.KindMutex, observe.OpTryLock)
	require.Equal(t, observe.OutcomeNotAcquired, got.res.Outcome)
	require.False(t, got.res.Waited)

	_, err = m.TryLock(ctx, rlock.WithWaitTime(50*time.Millisecond))
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	got = rec.last(t, observe.KindMutex, observe.OpTryLock)
	require.Equal(t, observe.OutcomeTimeout, got.res.Outcome)
	require.True(t, got.res.Waited)

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := m.Lock(cctx); done <- err }()
	require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindMutex] == 1 }) },
		10*time.Second, 5*time.Millisecond, "the Lock blocks")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	got = rec.last(t, observe.KindMutex, observe.OpLock)
	require.Equal(t, observe.OutcomeCanceled, got.res.Outcome)
	require.True(t, got.res.Waited)
	require.Zero(t, rec.waiting[observe.KindMutex], "the wait ended")
	require.NoError(t, l.Unlock(ctx))

	require.NoError(t, rdb.Set(ctx, name+":str", "x", 0).Err())
	_, err = c.NewMutex(name + ":str").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	got = rec.last(t, observe.KindMutex, observe.OpLock)
	require.Equal(t, observe.OutcomeError, got.res.Outcome)
	require.ErrorIs(t, got.res.Err, rlock.ErrWrongType)
}

// TestObserverHoldOutcomes ends holds every way and checks each end's outcome.
func TestObserverHoldOutcomes(t *testing.T) {
	rec := newRecorder()
	rdb := redistest.Shared(t).Client(t)
	c, err := rlock.New(rdb, rlock.WithObserver(rec), rlock.WithWatchdogTimeout(300*time.Millisecond), rlock.WithRenewInterval(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	endsWith := func(lockName string, want observe.HoldOutcome) {
		t.Helper()
		require.Eventually(t, func() bool {
			got := rec.holdEnds(lockName)
			return len(got) == 1 && got[0] == want
		}, 10*time.Second, 5*time.Millisecond, "hold of %s ends %v, got %v", lockName, want, rec.holdEnds(lockName))
	}

	owner := rlock.WithOwner(ctx)
	l, err := c.NewMutex(name + ":unlock").Lock(owner)
	require.NoError(t, err)
	again, err := c.NewMutex(name + ":unlock").Lock(owner)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	require.Empty(t, rec.holdEnds(name+":unlock"), "a reentry keeps the hold")
	require.NoError(t, again.Unlock(ctx))
	endsWith(name+":unlock", observe.HoldReleased)

	_, err = c.NewMutex(name+":expire").Lock(ctx, rlock.WithLeaseTime(100*time.Millisecond))
	require.NoError(t, err)
	endsWith(name+":expire", observe.HoldExpired)

	lost, err := c.NewMutex(name + ":del").Lock(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.renewals[observe.RenewOK] > 0 }) },
		10*time.Second, 5*time.Millisecond, "the watchdog renews the hold")
	require.NoError(t, rdb.Del(ctx, name+":del").Err())
	<-lost.Done()
	endsWith(name+":del", observe.HoldLost)

	_, err = c.NewMutex(name + ":force").Lock(ctx)
	require.NoError(t, err)
	_, err = c.NewMutex(name + ":force").ForceUnlock(ctx)
	require.NoError(t, err)
	endsWith(name+":force", observe.HoldForceReleased)

	s := c.NewExpirableSemaphore(name + ":permits")
	_, err = s.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx))
	endsWith(name+":permits", observe.HoldReleased)

	_, err = c.NewMutex(name + ":close").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	endsWith(name+":close", observe.HoldClosed)
	require.True(t, rec.read(func(r *recorder) bool {
		for k, n := range r.holds {
			if n != 0 {
				t.Logf("%v holds open: %d", k, n)
				return false
			}
		}
		return true
	}), "no hold left open")
	require.True(t, rec.read(func(r *recorder) bool {
		for _, e := range r.ended {
			if e.hold.Name == name+":del" {
				return e.hold.Loss == observe.LossInvalidated
			}
		}
		return false
	}), "the deleted lock's loss was told by tracking")
}

// TestObserverWakeCauses waits every way and checks what woke each waiter.
func TestObserverWakeCauses(t *testing.T) {
	rdb, other, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	var rec *recorder // the current case's
	// waitFor runs Lock and Unlock of name in c, and runs release once the
	// Lock blocks.
	waitFor := func(ctx context.Context, t *testing.T, c *rlock.Client, name string, release func()) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- lockUnlock(ctx, c.NewMutex(name)) }()
		require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindMutex] == 1 }) },
			10*time.Second, 5*time.Millisecond, "the Lock blocks")
		release()
		require.NoError(t, <-done)
		require.True(t, rec.last(t, observe.KindMutex, observe.OpLock).res.Waited)
	}
	untracked := []rlock.ClientOption{rlock.WithTracking(false)} // else the key's change wakes the waiter first
	for _, tc := range []struct {
		cause observe.Cause
		run   func(t *testing.T, c *rlock.Client)
		opts  []rlock.ClientOption
	}{
		{observe.CauseMessage, func(t *testing.T, c *rlock.Client) { // released by another client
			l, err := other.NewMutex(name + ":msg").Lock(ctx)
			require.NoError(t, err)
			waitFor(ctx, t, c, name+":msg", func() {
				// Released once the waiter listens, else its look at the
				// subscription's confirmation may find the lock free first.
				require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.woken[observe.CauseSubscribed] > 0 }) },
					10*time.Second, 5*time.Millisecond, "the waiter's subscription is confirmed")
				require.NoError(t, l.Unlock(ctx))
			})
		}, nil},
		{observe.CauseHandOff, func(t *testing.T, c *rlock.Client) { // released by this client
			l, err := c.NewMutex(name + ":hand").Lock(ctx)
			require.NoError(t, err)
			waitFor(ctx, t, c, name+":hand", func() { require.NoError(t, l.Unlock(ctx)) })
		}, nil},
		{observe.CauseLeaseExpiry, func(t *testing.T, c *rlock.Client) { // the holder's lease runs out: no message
			_, err := other.NewMutex(name+":exp").Lock(ctx, rlock.WithLeaseTime(300*time.Millisecond))
			require.NoError(t, err)
			waitFor(ctx, t, c, name+":exp", func() {})
		}, untracked},
		{observe.CauseChanged, func(t *testing.T, c *rlock.Client) { // deleted from outside: no message
			_, err := other.NewMutex(name + ":del").Lock(ctx)
			require.NoError(t, err)
			waitFor(ctx, t, c, name+":del", func() {
				require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.woken[observe.CauseSubscribed] > 0 }) },
					10*time.Second, 5*time.Millisecond, "the waiter's subscription is confirmed")
				require.NoError(t, rdb.Del(ctx, name+":del").Err())
			})
		}, nil},
		{observe.CauseRecheck, func(t *testing.T, c *rlock.Client) { // permits written without a publish
			s := c.NewSemaphore(name + ":sem")
			_, err := s.TrySetPermits(ctx, 0, 0)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- s.Acquire(ctx, 1) }()
			require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindSemaphore] == 1 }) },
				10*time.Second, 5*time.Millisecond, "the Acquire blocks")
			require.NoError(t, rdb.Set(ctx, name+":sem", "1", 0).Err())
			require.NoError(t, <-done)
		}, untracked},
		{observe.CauseBackoff, func(t *testing.T, c *rlock.Client) {
			l, err := c.NewSpinMutex(name + ":spin").Lock(ctx)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- lockUnlock(ctx, c.NewSpinMutex(name+":spin")) }()
			require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindSpinMutex] == 1 }) },
				10*time.Second, 5*time.Millisecond, "the spin Lock blocks")
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, <-done)
		}, nil},
	} {
		t.Run(tc.cause.String(), func(t *testing.T) {
			rec = newRecorder()
			c := newClient(t, rdb, append([]rlock.ClientOption{rlock.WithObserver(rec), rlock.WithRecheckInterval(100 * time.Millisecond)}, tc.opts...)...)
			tc.run(t, c)
			require.True(t, rec.read(func(r *recorder) bool { return r.woken[tc.cause] > 0 }), "causes: %v", rec.woken)
		})
	}
}

// TestObserverSubscriptionsAndReconnects: a waiter's channel subscription is
// counted while it is used (and its linger time), a killed subscriber
// connection is one reconnection, and its re-subscription wakes the waiter.
func TestObserverSubscriptionsAndReconnects(t *testing.T) {
	rec := newRecorder()
	rdb, other, name := setup(t)
	var logs lockedBuffer
	c := newClient(t, rdb, rlock.WithObserver(rec), rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := testCtx(t, 60*time.Second)
	l, err := other.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- lockUnlock(ctx, c.NewMutex(name)) }()
	require.Eventually(t, func() bool {
		return rec.read(func(r *recorder) bool { return r.subs == 1 && r.waiting[observe.KindMutex] == 1 })
	}, 10*time.Second, 5*time.Millisecond, "the waiter subscribes")
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{"+name+"}").Result()
		return err == nil && n["redisson_lock__channel:{"+name+"}"] == 1
	}, 10*time.Second, 5*time.Millisecond, "the subscription is confirmed")

	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.Eventually(t, func() bool {
		return rec.read(func(r *recorder) bool { return r.reconns == 1 && r.woken[observe.CauseResubscribe] >= 1 })
	}, 20*time.Second, 5*time.Millisecond, "the reconnection is reported and wakes the waiter")

	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, <-done)
	require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.subs == 0 }) },
		10*time.Second, 10*time.Millisecond, "the channel is dropped after its linger time")
	require.True(t, rec.read(func(r *recorder) bool { return r.waitEnds == 1 && r.waiting[observe.KindMutex] == 0 }))
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN msg="+observe.EventReconnect), "the log has the event: %s", logs.String())
}

// noopObserver implements every interface of package observe and does
// nothing: what the client's reporting costs by itself.
type noopObserver struct{}

func (noopObserver) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (noopObserver) End(context.Context, observe.Call, observe.Result)         {}
func (noopObserver) HoldStart(observe.Hold)                                    {}
func (noopObserver) HoldEnd(observe.Hold, observe.HoldOutcome, error)          {}
func (noopObserver) WaitStart(observe.Wait)                                    {}
func (noopObserver) Woken(observe.Wait, observe.Cause)                         {}
func (noopObserver) WaitEnd(observe.Wait)                                      {}

// TestObserverAllocations pins what an observer costs the uncontended cycle in
// allocations, with one that allocates nothing itself: one per observed call
// (the call's record: TryLock, Unlock) and one per observed hold.
func TestObserverAllocations(t *testing.T) {
	srv := redistest.Shared(t)
	cycle := func(opts ...rlock.ClientOption) float64 {
		m := newClient(t, srv.Client(t), opts...).NewMutex(redistest.Name(t))
		ctx := testCtx(t, 30*time.Second)
		return testing.AllocsPerRun(200, func() {
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		})
	}
	none := cycle()
	noop := cycle(rlock.WithObserver(noopObserver{}))
	t.Logf("allocations per cycle: %.1f without an observer, %.1f with a no-op one", none, noop)
	require.LessOrEqual(t, noop-none, 3.0, "one record per observed call (TryLock, Unlock) and per hold")
}
