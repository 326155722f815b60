package holdfastotel

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The tests below run holdfast's client against a real redis-server
// (package redistest) with an Observer on the SDK's providers, and check
// that the instruments move as the client's calls, holds, waits, renewals
// and subscriptions do. Each ends by checking that no attribute outside the
// documented set was recorded (env.checkAttributes).

// newClient returns an rlock.Client on rdb, closed at the end of the test.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx returns a context cancelled at the end of the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// receive waits up to 10 s for the result of a call run in a goroutine.
func receive(t testing.TB, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		require.NoError(t, err, what)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10 s", what)
	}
}

// Some attribute filters.
var (
	mutex     = attrs{observe.AttrKind: "mutex"}
	semaphore = attrs{observe.AttrKind: "semaphore"}
	latch     = attrs{observe.AttrKind: "count_down_latch"}
)

func (a attrs) with(kv ...string) attrs {
	out := attrs{}
	for k, v := range a {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// lockAttrs filters the acquisitions of a Mutex by op, outcome and waited.
// waitReleased waits until e saw a waiting Lock of a mutex acquire, no hold
// or wait left, and released holds of mutexes ended.
func waitReleased(t testing.TB, e *env, what string, released uint64) metricdata.ResourceMetrics {
	return e.waitMetric(t, what, func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameAcquireDuration, lockAttrs("lock", "ok", "true")) == 1 &&
			sum(rm, nameWaitActive, mutex) == 0 &&
			sum(rm, nameHoldActive, mutex) == 0 &&
			count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "released")) == released
	})
}

// observedClient returns a client of the shared server observed by a new
// env, and a context for the test.
func observedClient(t *testing.T) (*env, *rlock.Client, context.Context) {
	e := newEnv(t)
	return e, newClient(t, redistest.Shared(t).Client(t), rlock.WithObserver(e.obs)), testCtx(t, 30*time.Second)
}

// wakeWaiter runs wait (what) in a goroutine, waits until e counts it
// waiting on the object of attributes a, runs wake, and waits for wait to
// return nil.
func wakeWaiter(t testing.TB, e *env, a attrs, what string, wait, wake func() error) {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- wait() }()
	e.waitMetric(t, what+" waits", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameWaitActive, a) == 1
	})
	require.NoError(t, wake())
	receive(t, got, what)
}

func lockAttrs(op, outcome, waited string) attrs {
	return mutex.with(observe.AttrOperation, op, observe.AttrOutcome, outcome, observe.AttrWaited, waited)
}

// numSub returns the number of subscribers the server counts on the release
// channel of the lock name.
func numSub(ctx context.Context, rdb *redis.Client, name string) int64 {
	ch := lua.ChannelName(name)
	n, err := rdb.PubSubNumSub(ctx, ch).Result()
	if err != nil {
		return -1
	}
	return n[ch]
}

// subscribedLook reports whether a Mutex's waiter has looked at Redis after
// its subscription was confirmed (the look that closes the window before
// it): from then on only news (a message, a hand-off) or its timer wakes it.
func subscribedLook(rm metricdata.ResourceMetrics) bool {
	return sum(rm, nameWaitWakeups, mutex.with(observe.AttrCause, "subscribed")) >= 1
}

// checkNotAcquiredSpan checks that the only TryLock span of e ended
// not_acquired, and is not an error.
func checkNotAcquiredSpan(t *testing.T, e *env) {
	t.Helper()
	spans := e.spansNamed("holdfast.Mutex.TryLock")
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "not_acquired", spanAttr(s, observe.AttrOutcome))
	assert.Equal(t, "false", spanAttr(s, observe.AttrWaited))
	assert.Equal(t, codes.Unset, s.Status().Code, "a lock not acquired is not a span error")
	assert.Empty(t, s.Events(), "no error recorded")
}

// 1a. Two goroutines of one client contend on a Mutex: the second waits and
// is handed the lock by the first's Unlock; a TryLock meanwhile is not
// acquired.
func TestContendedMutexOneClient(t *testing.T) {
	e := newEnv(t)
	rdb := redistest.Shared(t).Client(t)
	c := newClient(t, rdb, rlock.WithObserver(e.obs))
	m := c.NewMutex(redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)

	a := rlock.WithOwner(ctx)
	lease, err := m.Lock(a)
	require.NoError(t, err)
	e.waitMetric(t, "the hold is active", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameHoldActive, mutex) == 1
	})

	_, err = m.TryLock(rlock.WithOwner(ctx))
	require.ErrorIs(t, err, rlock.ErrNotAcquired)

	got := lockUnlockAsync(ctx, m)
	// Waiting and subscribed (the server has the subscription): it sleeps
	// (the subscription's confirmation does not make it attempt while an
	// owner of its own client holds the lock), so the release hands the lock
	// over, and the waiter is told so (hand_off), having looked at nothing.
	e.waitMetric(t, "the second goroutine waits, subscribed", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameWaitActive, mutex) == 1 && sum(rm, nameSubscriptions, nil) == 1
	})
	eventually(t, 10*time.Second, func() bool {
		return numSub(ctx, rdb, m.Name()) == 1
	}, func() string { return "the server has the waiter's subscription" })
	require.NoError(t, lease.Unlock(a))
	receive(t, got, "the waiting Lock and its Unlock")

	rm := waitReleased(t, e, "the waiter acquired, everything released", 2)
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, lockAttrs("lock", "ok", "false")), dump(rm))
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, lockAttrs("try_lock", "not_acquired", "false")), dump(rm))
	assert.EqualValues(t, 2, count(rm, nameOperationDuration, mutex.with(observe.AttrOperation, "lease_unlock", observe.AttrOutcome, "ok")), dump(rm))
	assert.GreaterOrEqual(t, sum(rm, nameWaitWakeups, mutex.with(observe.AttrCause, "hand_off")), int64(1),
		"the release handed the lock to the waiter of the same client\n%s", dump(rm))

	checkNotAcquiredSpan(t, e)
	locks := e.spansNamed("holdfast.Mutex.Lock")
	require.Len(t, locks, 2)
	waited := 0
	for _, s := range locks {
		assert.Equal(t, "ok", spanAttr(s, observe.AttrOutcome))
		assert.Equal(t, codes.Unset, s.Status().Code)
		if spanAttr(s, observe.AttrWaited) == "true" {
			waited++
		}
	}
	assert.Equal(t, 1, waited)
	assert.Len(t, e.spansNamed("holdfast.Lease.Unlock"), 2)
	e.checkAttributes(t)
}

// 1b. Two clients (two processes' view) contend on a Mutex: the second
// client's TryLock is not acquired, its Lock waits, subscribed to the lock's
// channel, and the first client's release message wakes it.
func TestContendedMutexTwoClients(t *testing.T) {
	srv := redistest.Shared(t)
	e1, e2 := newEnv(t), newEnv(t)
	c1 := newClient(t, srv.Client(t), rlock.WithObserver(e1.obs))
	c2 := newClient(t, srv.Client(t), rlock.WithObserver(e2.obs))
	name := redistest.Name(t)
	m1, m2 := c1.NewMutex(name), c2.NewMutex(name)
	ctx := testCtx(t, 30*time.Second)

	a := rlock.WithOwner(ctx)
	lease, err := m1.Lock(a)
	require.NoError(t, err)

	_, err = m2.TryLock(rlock.WithOwner(ctx))
	require.ErrorIs(t, err, rlock.ErrNotAcquired)

	got := lockUnlockAsync(ctx, m2)
	// Waiting, subscribed, and past the look that follows the subscription's
	// confirmation: only the release message can wake it now.
	e2.waitMetric(t, "the second client waits, subscribed to the lock's channel", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameWaitActive, mutex) == 1 && sum(rm, nameSubscriptions, nil) == 1 && subscribedLook(rm)
	})
	rm1 := e1.collect(t)
	assert.EqualValues(t, 1, sum(rm1, nameHoldActive, mutex), dump(rm1))
	assert.EqualValues(t, 0, sum(rm1, nameWaitActive, mutex), dump(rm1))

	require.NoError(t, lease.Unlock(a))
	receive(t, got, "the waiting Lock and its Unlock")

	rm2 := waitReleased(t, e2, "the waiter acquired on a message, everything released", 1)
	assert.EqualValues(t, 1, count(rm2, nameAcquireDuration, lockAttrs("try_lock", "not_acquired", "false")), dump(rm2))
	assert.GreaterOrEqual(t, sum(rm2, nameWaitWakeups, mutex.with(observe.AttrCause, "message")), int64(1),
		"the first client's release message woke the waiter\n%s", dump(rm2))
	checkNotAcquiredSpan(t, e2)

	rm1 = e1.waitMetric(t, "the first client's hold ended", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameHoldActive, mutex) == 0 &&
			count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "released")) == 1
	})
	assert.EqualValues(t, 1, count(rm1, nameAcquireDuration, lockAttrs("lock", "ok", "false")), dump(rm1))
	assert.EqualValues(t, 0, count(rm1, nameAcquireDuration, mutex.with(observe.AttrWaited, "true")), dump(rm1))

	// The channel is dropped after its linger (1 s) once nobody waits.
	e2.waitMetric(t, "the subscription is dropped", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameSubscriptions, nil) == 0
	})
	e1.checkAttributes(t)
	e2.checkAttributes(t)
}

// 2. A lock deleted from outside is lost: the client's tracking tells it at
// once, the hold ends "lost", counted in holdfast.hold.losses as
// "invalidated".
func TestLostLock(t *testing.T) {
	e := newEnv(t)
	rdb := redistest.Shared(t).Client(t)
	c := newClient(t, rdb, rlock.WithObserver(e.obs),
		rlock.WithWatchdogTimeout(300*time.Millisecond), rlock.WithRenewInterval(100*time.Millisecond))
	name := redistest.Name(t)
	ctx := rlock.WithOwner(testCtx(t, 30*time.Second))
	lease, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	e.waitMetric(t, "the hold is active and renewed", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameHoldActive, mutex) == 1 && sum(rm, nameRenewals, attrs{observe.AttrOutcome: "ok"}) >= 1
	})

	require.NoError(t, rdb.Del(ctx, name).Err())
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease of the deleted lock did not end within 10 s")
	}
	require.ErrorIs(t, lease.Err(), rlock.ErrLockLost)

	rm := e.waitMetric(t, "the hold ended lost, told by tracking", func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "lost")) == 1 &&
			sum(rm, nameLosses, mutex.with(observe.AttrLoss, "invalidated")) == 1 &&
			sum(rm, nameTracking, attrs{observe.AttrTracking: "on"}) == 1 &&
			sum(rm, nameHoldActive, mutex) == 0
	})
	assert.EqualValues(t, 0, count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "released")), dump(rm))
	e.checkAttributes(t)
}

// 3. A server frozen (SIGSTOP) while a watchdog lease is held: renewals
// fail, and the hold is lost once its deadline passes. Resumed, the client
// takes the lock again and closes cleanly.
func TestWatchdogFailure(t *testing.T) {
	srv := redistest.StartControllable(t)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.WriteTimeout = 200 * time.Millisecond
		o.MaxRetries = 1
	})
	e := newEnv(t)
	c, err := rlock.New(rdb, rlock.WithObserver(e.obs),
		rlock.WithWatchdogTimeout(time.Second), rlock.WithRenewInterval(100*time.Millisecond),
		rlock.WithReleaseTimeout(time.Second))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close()
		}
	})
	m := c.NewMutex(redistest.Name(t))
	ctx := rlock.WithOwner(testCtx(t, 30*time.Second))
	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	e.waitMetric(t, "the hold is renewed", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameRenewals, attrs{observe.AttrOutcome: "ok"}) >= 1
	})

	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) }) // before the client's Close, if the test fails
	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	e.waitMetric(t, "a renewal failed", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameRenewals, attrs{observe.AttrOutcome: "failed"}) >= 1
	})
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not declared lost within 10 s while Redis did not answer")
	}
	require.ErrorIs(t, lease.Err(), rlock.ErrLockLost)
	e.waitMetric(t, "the hold ended lost", func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "lost")) == 1 &&
			sum(rm, nameHoldActive, mutex) == 0
	})

	require.NoError(t, srv.Signal(syscall.SIGCONT))
	// Resumed: the lock (its key expires within the watchdog timeout) is
	// taken again and released, and Close finds nothing wrong.
	again, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, again.Unlock(ctx))
	closed = true
	require.NoError(t, c.Close())
	rm := e.collect(t)
	assert.EqualValues(t, 1, count(rm, nameHoldDuration, mutex.with(observe.AttrOutcome, "released")), dump(rm))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, mutex), dump(rm))
	e.checkAttributes(t)
}

// 4. A semaphore's second Acquire waits for the permit the first took, and
// the Release wakes it.
func TestSemaphoreWait(t *testing.T) {
	e, c, ctx := observedClient(t)
	s := c.NewSemaphore(redistest.Name(t))
	ok, err := s.TrySetPermits(ctx, 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Acquire(ctx, 1))

	wakeWaiter(t, e, semaphore, "the second Acquire",
		func() error { return s.Acquire(ctx, 1) }, func() error { return s.Release(ctx, 1) })

	acquire := func(outcome, waited string) attrs {
		return semaphore.with(observe.AttrOperation, "acquire", observe.AttrOutcome, outcome, observe.AttrWaited, waited)
	}
	rm := e.waitMetric(t, "the waiter acquired", func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameAcquireDuration, acquire("ok", "true")) == 1 && sum(rm, nameWaitActive, semaphore) == 0
	})
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, acquire("ok", "false")), dump(rm))
	assert.EqualValues(t, 1, count(rm, nameOperationDuration, semaphore.with(observe.AttrOperation, "try_set_permits", observe.AttrOutcome, "ok")), dump(rm))
	assert.EqualValues(t, 1, count(rm, nameOperationDuration, semaphore.with(observe.AttrOperation, "release", observe.AttrOutcome, "ok")), dump(rm))
	assert.GreaterOrEqual(t, sum(rm, nameWaitWakeups, semaphore), int64(1), dump(rm))
	// A Semaphore's permits are not holds.
	assert.EqualValues(t, 0, count(rm, nameHoldDuration, semaphore), dump(rm))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, semaphore), dump(rm))

	spans := e.spansNamed("holdfast.Semaphore.Acquire")
	require.Len(t, spans, 2)
	var waited []string
	for _, sp := range spans {
		waited = append(waited, spanAttr(sp, observe.AttrWaited))
		assert.Equal(t, "ok", spanAttr(sp, observe.AttrOutcome))
	}
	assert.ElementsMatch(t, []string{"false", "true"}, waited)
	_, err = s.Delete(ctx)
	require.NoError(t, err)
	e.checkAttributes(t)
}

// 5. A latch's Await waits until the CountDown that brings it to zero.
func TestLatchAwait(t *testing.T) {
	e, c, ctx := observedClient(t)
	l := c.NewCountDownLatch(redistest.Name(t))
	ok, err := l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	wakeWaiter(t, e, latch, "Await", func() error { return l.Await(ctx) }, func() error { return l.CountDown(ctx) })

	op := func(name string) attrs {
		return latch.with(observe.AttrOperation, name, observe.AttrOutcome, "ok")
	}
	rm := e.waitMetric(t, "Await returned", func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameOperationDuration, op("await")) == 1 && sum(rm, nameWaitActive, latch) == 0
	})
	assert.EqualValues(t, 1, count(rm, nameOperationDuration, op("try_set_count")), dump(rm))
	assert.EqualValues(t, 1, count(rm, nameOperationDuration, op("count_down")), dump(rm))
	assert.EqualValues(t, 0, count(rm, nameAcquireDuration, latch), dump(rm))
	assert.GreaterOrEqual(t, sum(rm, nameWaitWakeups, latch), int64(1), dump(rm))

	spans := e.spansNamed("holdfast.CountDownLatch.Await")
	require.Len(t, spans, 1)
	assert.Equal(t, "ok", spanAttr(spans[0], observe.AttrOutcome))
	assert.Empty(t, spanAttr(spans[0], observe.AttrWaited), "holdfast.waited is an acquisition's only")
	e.checkAttributes(t)
}

// 6. go-redis' command spans (redisotel) are children of the call's span,
// itself a child of the caller's.
func TestSpanNesting(t *testing.T) {
	e := newEnv(t)
	rdb := redistest.Shared(t).Client(t)
	require.NoError(t, redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(e.tp)))
	c := newClient(t, rdb, rlock.WithObserver(e.obs))
	m := c.NewMutex(redistest.Name(t))

	ctx, request := e.tp.Tracer("test").Start(rlock.WithOwner(testCtx(t, 30*time.Second)), "request")
	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(ctx))
	request.End()

	all := e.spans.Ended()
	for _, name := range []string{"holdfast.Mutex.Lock", "holdfast.Lease.Unlock"} {
		spans := e.spansNamed(name)
		require.Len(t, spans, 1, name)
		call := spans[0]
		assert.Equal(t, request.SpanContext().TraceID(), call.SpanContext().TraceID(), name)
		assert.Equal(t, request.SpanContext().SpanID(), call.Parent().SpanID(), "%s is a child of the caller's span", name)

		var children []string
		for _, s := range all {
			if s.InstrumentationScope().Name == ScopeName || !isEval(s) {
				continue
			}
			if s.Parent().SpanID() == call.SpanContext().SpanID() {
				assert.Equal(t, call.SpanContext().TraceID(), s.SpanContext().TraceID())
				children = append(children, s.Name())
				continue
			}
			// A script command sent during the call belongs to it.
			if !s.StartTime().Before(call.StartTime()) && !s.EndTime().After(call.EndTime()) {
				t.Errorf("%s: the command span %q (parent %s) ran during the call but is not its child",
					name, s.Name(), s.Parent().SpanID())
			}
		}
		assert.NotEmpty(t, children, "%s: no EVALSHA span is its child; spans: %s", name, spanNames(all))
		t.Logf("%s: command spans %q", name, children)
	}
	e.checkAttributes(t)
}

func isEval(s sdktrace.ReadOnlySpan) bool {
	return strings.HasPrefix(strings.ToLower(s.Name()), "eval")
}

func spanNames(spans []sdktrace.ReadOnlySpan) string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name()+"("+s.InstrumentationScope().Name+")")
	}
	return strings.Join(names, ", ")
}

// WithNames against a client: the normalized name is on the per-object
// instruments and the spans, and an object whose name normalizes to "" has
// none.
func TestWithNamesRedis(t *testing.T) {
	prefix := redistest.Name(t)
	normalize := func(_ observe.Kind, name string) string {
		family, _, _ := strings.Cut(strings.TrimPrefix(name, prefix+":"), ":")
		if family == "private" {
			return ""
		}
		return family
	}
	e := newEnv(t, WithNames(normalize))
	c := newClient(t, redistest.Shared(t).Client(t), rlock.WithObserver(e.obs))
	ctx := rlock.WithOwner(testCtx(t, 30*time.Second))
	for _, name := range []string{"orders:1", "orders:2", "private:3"} {
		lease, err := c.NewMutex(prefix + ":" + name).Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(ctx))
	}
	orders := mutex.with(observe.AttrName, "orders")
	rm := e.waitMetric(t, "the holds ended", func(rm metricdata.ResourceMetrics) bool {
		return count(rm, nameHoldDuration, mutex) == 3 && sum(rm, nameHoldActive, mutex) == 0
	})
	assert.EqualValues(t, 2, count(rm, nameAcquireDuration, orders), dump(rm))
	assert.EqualValues(t, 2, count(rm, nameOperationDuration, orders), dump(rm))
	assert.EqualValues(t, 2, count(rm, nameHoldDuration, orders), dump(rm))
	var named, nameless int
	for _, s := range e.holdfastSpans() {
		if spanAttr(s, observe.AttrName) == "orders" {
			named++
		} else {
			nameless++
		}
	}
	assert.Equal(t, 4, named)
	assert.Equal(t, 2, nameless)
	e.checkAttributes(t, "orders")
}

// A subscriber connection broken by a server restart is re-established:
// holdfast.pubsub.reconnects counts it, and the waiter, woken by the
// re-subscription, finds the lock gone with the server's data and takes it.
func TestPubSubReconnect(t *testing.T) {
	srv := redistest.StartControllable(t)
	holder := newClient(t, srv.Client(t))
	e := newEnv(t)
	// Without client tracking: a tracking waiter also follows the key, and
	// after the restart its follow may find the key gone and wake it first
	// (cause "changed"), before the resubscription this test counts.
	c := newClient(t, srv.Client(t), rlock.WithObserver(e.obs), rlock.WithTracking(false))
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	_, err := holder.NewMutex(name).Lock(rlock.WithOwner(ctx))
	require.NoError(t, err)

	got := lockUnlockAsync(ctx, c.NewMutex(name))
	e.waitMetric(t, "the waiter is subscribed", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameWaitActive, mutex) == 1 && sum(rm, nameSubscriptions, nil) == 1 && subscribedLook(rm)
	})
	srv.Restart(t)
	receive(t, got, "the waiting Lock after the restart")

	rm := e.waitMetric(t, "the reconnection was counted", func(rm metricdata.ResourceMetrics) bool {
		return sum(rm, nameReconnects, nil) >= 1 &&
			count(rm, nameAcquireDuration, lockAttrs("lock", "ok", "true")) == 1
	})
	assert.GreaterOrEqual(t, sum(rm, nameWaitWakeups, mutex.with(observe.AttrCause, "resubscribe")), int64(1), dump(rm))
	e.checkAttributes(t)
}
