package holdfastotel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

// call runs one public call through o: Start, then End with res, as the
// client does. It returns the context Start returned.
func call(ctx context.Context, o *Observer, c observe.Call, res observe.Result) context.Context {
	ctx = o.Start(ctx, c)
	o.End(ctx, c, res)
	return ctx
}

func TestVersionAndScope(t *testing.T) {
	assert.Equal(t, "github.com/holdfast-go/holdfast/holdfastotel", ScopeName)
	assert.Regexp(t, `^\d+\.\d+\.\d+$`, Version())

	e := newEnv(t)
	call(context.Background(), e.obs, observe.Call{Kind: observe.KindMutex, Op: observe.OpIsLocked, Start: time.Now()},
		observe.Result{Outcome: observe.OutcomeOK})
	spans := e.spans.Ended()
	require.Len(t, spans, 1)
	assert.Equal(t, ScopeName, spans[0].InstrumentationScope().Name)
	assert.Equal(t, Version(), spans[0].InstrumentationScope().Version)
	e.checkAttributes(t) // checks the metrics' scope too
}

func TestNewObserverGlobalProviders(t *testing.T) {
	obs, err := NewObserver() // the global providers: no-op ones here
	require.NoError(t, err)
	ctx := call(context.Background(), obs, observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: time.Now()},
		observe.Result{Outcome: observe.OutcomeOK})
	assert.False(t, trace.SpanFromContext(ctx).IsRecording())
	obs.HoldStart(observe.Hold{Kind: observe.KindMutex, Start: time.Now()})
	obs.HoldEnd(observe.Hold{Kind: observe.KindMutex, Start: time.Now()}, observe.HoldReleased, nil)

	// nil options and nil providers mean the defaults too.
	obs, err = NewObserver(nil, WithTracerProvider(nil), WithMeterProvider(nil), WithNames(nil))
	require.NoError(t, err)
	call(context.Background(), obs, observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: time.Now()},
		observe.Result{Outcome: observe.OutcomeOK})
}

// TestInstruments checks every instrument's name, kind, unit, description
// and attributes, and the histograms' bucket boundaries.
func TestInstruments(t *testing.T) {
	e := newEnv(t)
	o := e.obs
	ctx := context.Background()
	start := time.Now().Add(-3 * time.Millisecond)
	call(ctx, o, observe.Call{Kind: observe.KindFairMutex, Op: observe.OpTryLock, Name: "a", Start: start},
		observe.Result{Outcome: observe.OutcomeOK, Waited: true})
	call(ctx, o, observe.Call{Kind: observe.KindSemaphore, Op: observe.OpAcquire, Name: "s", Start: start},
		observe.Result{Outcome: observe.OutcomeTimeout, Waited: true, Err: context.DeadlineExceeded})
	call(ctx, o, observe.Call{Kind: observe.KindMutex, Op: observe.OpTryLock, Name: "a", Start: start},
		observe.Result{Outcome: observe.OutcomeNotAcquired})
	// Waited on a call that does not acquire is not an attribute.
	call(ctx, o, observe.Call{Kind: observe.KindCountDownLatch, Op: observe.OpAwait, Name: "l", Start: start},
		observe.Result{Outcome: observe.OutcomeOK, Waited: true})
	h := observe.Hold{Kind: observe.KindMutex, Name: "a", Start: start}
	o.HoldStart(h)
	o.HoldStart(observe.Hold{Kind: observe.KindExpirableSemaphore, Name: "e", Start: start})
	lost := h
	lost.Loss = observe.LossInvalidated
	o.HoldEnd(lost, observe.HoldLost, errors.New("gone"))
	unreplicated := observe.Hold{Kind: observe.KindExpirableSemaphore, Name: "e", Start: start, Loss: observe.LossUnreplicated}
	o.HoldEnd(unreplicated, observe.HoldLost, errors.New("not acknowledged"))
	w := observe.Wait{Kind: observe.KindMutex, Op: observe.OpLock, Name: "a"}
	o.WaitStart(w)
	o.Woken(w, observe.CauseMessage)
	o.Woken(w, observe.CauseMessage)
	o.Woken(w, observe.CauseHandOff)
	o.WaitStart(observe.Wait{Kind: observe.KindSemaphore, Op: observe.OpAcquire, Name: "s"})
	o.WaitEnd(w)
	o.Renewed(observe.RenewOK, 3)
	o.Renewed(observe.RenewFailed, 2)
	o.Renewed(observe.RenewLost, 0) // adds nothing
	o.Renewed(observe.RenewUnreplicated, 4)
	o.Subscriptions(+1)
	o.Subscriptions(+1)
	o.Subscriptions(-1)
	o.Subscriptions(0)
	o.Reconnected()
	o.Tracking("127.0.0.1:6379", observe.TrackingOn)
	o.Tracking("127.0.0.1:6380", observe.TrackingOn)
	o.Tracking("127.0.0.1:6381", observe.TrackingRefused)
	o.LeaderChanged(observe.LeaderChange{Name: "el", Elected: true, Token: 7, NewTerm: true})
	o.LeaderChanged(observe.LeaderChange{Name: "el", Elected: true, Token: 7})
	o.LeaderChanged(observe.LeaderChange{Name: "el", Token: 7})

	rm := e.collect(t)
	type want struct {
		unit      string
		histogram bool
		monotonic bool
	}
	wants := map[string]want{
		"holdfast.acquire.duration":     {"s", true, false},
		"holdfast.operation.duration":   {"s", true, false},
		"holdfast.hold.duration":        {"s", true, false},
		"holdfast.hold.active":          {"{hold}", false, false},
		"holdfast.wait.active":          {"{waiter}", false, false},
		"holdfast.wait.wakeups":         {"{wakeup}", false, true},
		"holdfast.watchdog.renewals":    {"{renewal}", false, true},
		"holdfast.pubsub.subscriptions": {"{subscription}", false, false},
		"holdfast.pubsub.reconnects":    {"{reconnect}", false, true},
		"holdfast.hold.losses":          {"{hold}", false, true},
		"holdfast.tracking.modes":       {"{node}", false, true},
		"holdfast.election.changes":     {"{change}", false, true},
	}
	for name, w := range wants {
		m, ok := findMetric(rm, name)
		if !assert.True(t, ok, "%s missing", name) {
			continue
		}
		assert.Equal(t, w.unit, m.Unit, name)
		assert.NotEmpty(t, m.Description, name)
		if w.histogram {
			h, ok := m.Data.(metricdata.Histogram[float64])
			require.True(t, ok, "%s: %T", name, m.Data)
			for _, p := range h.DataPoints {
				assert.Equal(t, durationBuckets, p.Bounds, name)
				lo, ok := p.Min.Value()
				assert.True(t, ok, name)
				assert.GreaterOrEqual(t, lo, 0.003-1e-9, name) // measured from Start
			}
			continue
		}
		s, ok := m.Data.(metricdata.Sum[int64])
		require.True(t, ok, "%s: %T", name, m.Data)
		assert.Equal(t, w.monotonic, s.IsMonotonic, name)
	}
	assert.Len(t, rm.ScopeMetrics[0].Metrics, len(wants))

	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, attrs{
		observe.AttrKind: "fair_mutex", observe.AttrOperation: "try_lock", observe.AttrOutcome: "ok", observe.AttrWaited: "true"}))
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, attrs{
		observe.AttrKind: "semaphore", observe.AttrOperation: "acquire", observe.AttrOutcome: "timeout", observe.AttrWaited: "true"}))
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, attrs{
		observe.AttrKind: "mutex", observe.AttrOperation: "try_lock", observe.AttrOutcome: "not_acquired", observe.AttrWaited: "false"}))
	m, _ := findMetric(rm, nameOperationDuration)
	ps := m.Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, ps, 1)
	assert.Equal(t, 3, ps[0].Attributes.Len(), "no holdfast.waited on an Await")
	assert.EqualValues(t, 1, count(rm, nameOperationDuration, attrs{
		observe.AttrKind: "count_down_latch", observe.AttrOperation: "await", observe.AttrOutcome: "ok"}))

	assert.EqualValues(t, 1, count(rm, nameHoldDuration, attrs{observe.AttrKind: "mutex", observe.AttrOutcome: "lost"}))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, attrs{observe.AttrKind: "mutex"}))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, attrs{observe.AttrKind: "expirable_semaphore"}), "lost: unreplicated")
	assert.EqualValues(t, 0, sum(rm, nameWaitActive, attrs{observe.AttrKind: "mutex"}))
	assert.EqualValues(t, 1, sum(rm, nameWaitActive, attrs{observe.AttrKind: "semaphore"}))
	assert.EqualValues(t, 2, sum(rm, nameWaitWakeups, attrs{observe.AttrKind: "mutex", observe.AttrCause: "message"}))
	assert.EqualValues(t, 1, sum(rm, nameWaitWakeups, attrs{observe.AttrKind: "mutex", observe.AttrCause: "hand_off"}))
	assert.EqualValues(t, 3, sum(rm, nameRenewals, attrs{observe.AttrOutcome: "ok"}))
	assert.EqualValues(t, 2, sum(rm, nameRenewals, attrs{observe.AttrOutcome: "failed"}))
	assert.EqualValues(t, 0, sum(rm, nameRenewals, attrs{observe.AttrOutcome: "lost"}))
	assert.EqualValues(t, 1, sum(rm, nameSubscriptions, nil))
	assert.EqualValues(t, 1, sum(rm, nameReconnects, nil))
	assert.EqualValues(t, 1, sum(rm, nameLosses, attrs{observe.AttrKind: "mutex", observe.AttrLoss: "invalidated"}))
	assert.EqualValues(t, 1, sum(rm, nameLosses, attrs{observe.AttrKind: "expirable_semaphore", observe.AttrLoss: "unreplicated"}))
	assert.EqualValues(t, 4, sum(rm, nameRenewals, attrs{observe.AttrOutcome: "unreplicated"}))
	assert.EqualValues(t, 2, sum(rm, nameTracking, attrs{observe.AttrTracking: "on"}))
	assert.EqualValues(t, 1, sum(rm, nameTracking, attrs{observe.AttrTracking: "refused"}))
	assert.EqualValues(t, 1, sum(rm, nameLeaderChanges, attrs{observe.AttrElected: "true", observe.AttrNewTerm: "true"}))
	assert.EqualValues(t, 1, sum(rm, nameLeaderChanges, attrs{observe.AttrElected: "true", observe.AttrNewTerm: "false"}))
	assert.EqualValues(t, 1, sum(rm, nameLeaderChanges, attrs{observe.AttrElected: "false", observe.AttrNewTerm: "false"}))
	for _, name := range []string{nameSubscriptions, nameReconnects} {
		m, _ := findMetric(rm, name)
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			assert.Zero(t, p.Attributes.Len(), name)
		}
	}
	e.checkAttributes(t)
}

// TestSpans checks the spans: name, kind, start time, attributes, parent,
// and that only OutcomeError is an error.
func TestSpans(t *testing.T) {
	e := newEnv(t)
	o := e.obs
	parentCtx, parent := e.tp.Tracer("test").Start(context.Background(), "parent")
	start := time.Now().Add(-time.Millisecond)
	boom := errors.New("boom")

	cases := []struct {
		call observe.Call
		res  observe.Result
		name string
	}{
		{observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: start},
			observe.Result{Outcome: observe.OutcomeOK, Waited: true}, "holdfast.Mutex.Lock"},
		{observe.Call{Kind: observe.KindFairMutex, Op: observe.OpTryLock, Start: start},
			observe.Result{Outcome: observe.OutcomeNotAcquired, Err: errors.New("rlock: not acquired")}, "holdfast.FairMutex.TryLock"},
		{observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: start},
			observe.Result{Outcome: observe.OutcomeCanceled, Waited: true, Err: context.Canceled}, "holdfast.Mutex.Lock"},
		{observe.Call{Kind: observe.KindSemaphore, Op: observe.OpTryAcquire, Start: start},
			observe.Result{Outcome: observe.OutcomeTimeout, Waited: true, Err: context.DeadlineExceeded}, "holdfast.Semaphore.TryAcquire"},
		{observe.Call{Kind: observe.KindMutex, Op: observe.OpLeaseUnlock, Start: start},
			observe.Result{Outcome: observe.OutcomeError, Err: boom}, "holdfast.Lease.Unlock"},
		{observe.Call{Kind: observe.KindRedLock, Op: observe.OpLeaseUnlock, Start: start},
			observe.Result{Outcome: observe.OutcomeOK}, "holdfast.MultiLease.Unlock"},
		{observe.Call{Kind: observe.KindExpirableSemaphore, Op: observe.OpPermitsRelease, Start: start},
			observe.Result{Outcome: observe.OutcomeError}, "holdfast.Permits.Release"},
	}
	for _, c := range cases {
		ctx := o.Start(parentCtx, c.call)
		span := trace.SpanFromContext(ctx)
		require.True(t, span.IsRecording(), c.name)
		assert.Equal(t, parent.SpanContext().TraceID(), span.SpanContext().TraceID())
		o.End(ctx, c.call, c.res)
		assert.False(t, span.IsRecording(), "%s: End ends the span", c.name)
	}
	parent.End()

	spans := e.holdfastSpans()
	require.Len(t, spans, len(cases))
	for i, c := range cases {
		s := spans[i]
		assert.Equal(t, c.name, s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), c.name)
		assert.True(t, s.StartTime().Equal(start), "%s starts at call.Start", c.name)
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), c.name)
		assert.Equal(t, c.call.Kind.String(), spanAttr(s, observe.AttrKind), c.name)
		assert.Equal(t, c.call.Op.String(), spanAttr(s, observe.AttrOperation), c.name)
		assert.Equal(t, c.res.Outcome.String(), spanAttr(s, observe.AttrOutcome), c.name)
		if c.call.Op.Acquires() {
			assert.Equal(t, map[bool]string{true: "true", false: "false"}[c.res.Waited], spanAttr(s, observe.AttrWaited), c.name)
			assert.Len(t, s.Attributes(), 4, c.name)
		} else {
			assert.Empty(t, spanAttr(s, observe.AttrWaited), c.name)
			assert.Len(t, s.Attributes(), 3, c.name)
		}
		if c.res.Outcome != observe.OutcomeError {
			assert.Equal(t, codes.Unset, s.Status().Code, "%s: a %s is not an error", c.name, c.res.Outcome)
			assert.Empty(t, s.Events(), c.name)
			continue
		}
		assert.Equal(t, codes.Error, s.Status().Code, c.name)
		if c.res.Err != nil {
			assert.Equal(t, c.res.Err.Error(), s.Status().Description, c.name)
			require.Len(t, s.Events(), 1, c.name)
			assert.Equal(t, "exception", s.Events()[0].Name, c.name)
		} else {
			assert.Equal(t, "error", s.Status().Description, c.name)
			assert.Empty(t, s.Events(), c.name)
		}
	}
	e.checkAttributes(t)
}

// TestOutOfRange checks that enum values outside their range (and zero)
// neither panic nor add values: they are "unknown".
func TestOutOfRange(t *testing.T) {
	e := newEnv(t)
	o := e.obs
	for _, v := range []uint8{0, 60, 99, 255} {
		c := observe.Call{Kind: observe.Kind(v), Op: observe.Op(v), Start: time.Now()}
		call(context.Background(), o, c, observe.Result{Outcome: observe.Outcome(v), Waited: true})
		h := observe.Hold{Kind: observe.Kind(v), Start: time.Now()}
		o.HoldStart(h)
		o.HoldEnd(h, observe.HoldOutcome(v), nil)
		w := observe.Wait{Kind: observe.Kind(v), Op: observe.Op(v)}
		o.WaitStart(w)
		o.Woken(w, observe.Cause(v))
		o.WaitEnd(w)
		o.Renewed(observe.RenewOutcome(v), 1)
	}
	// A call out of range on an acquiring op, and an acquisition with an
	// unknown outcome.
	call(context.Background(), o, observe.Call{Kind: 200, Op: observe.OpLock, Start: time.Now()},
		observe.Result{Outcome: 200, Waited: true})

	rm := e.collect(t)
	assert.EqualValues(t, 4, count(rm, nameOperationDuration, attrs{
		observe.AttrKind: unknown, observe.AttrOperation: unknown, observe.AttrOutcome: unknown}))
	assert.EqualValues(t, 1, count(rm, nameAcquireDuration, attrs{
		observe.AttrKind: unknown, observe.AttrOperation: "lock", observe.AttrOutcome: unknown, observe.AttrWaited: "true"}))
	assert.EqualValues(t, 4, count(rm, nameHoldDuration, attrs{observe.AttrKind: unknown, observe.AttrOutcome: unknown}))
	assert.EqualValues(t, 4, sum(rm, nameWaitWakeups, attrs{observe.AttrKind: unknown, observe.AttrCause: unknown}))
	assert.EqualValues(t, 4, sum(rm, nameRenewals, attrs{observe.AttrOutcome: unknown}))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, nil))
	spans := e.holdfastSpans()
	require.Len(t, spans, 5)
	assert.Equal(t, "holdfast.Unknown.Unknown", spans[0].Name())
	assert.Equal(t, unknown, spanAttr(spans[0], observe.AttrOutcome))
}

// TestNoStartTime checks that a call or a hold without a start time records
// no duration (rather than one since year 1) but still ends its span and
// its hold.
func TestNoStartTime(t *testing.T) {
	e := newEnv(t)
	o := e.obs
	call(context.Background(), o, observe.Call{Kind: observe.KindMutex, Op: observe.OpLock}, observe.Result{Outcome: observe.OutcomeOK})
	o.HoldStart(observe.Hold{Kind: observe.KindMutex})
	o.HoldEnd(observe.Hold{Kind: observe.KindMutex}, observe.HoldReleased, nil)
	rm := e.collect(t)
	assert.EqualValues(t, 0, count(rm, nameAcquireDuration, nil))
	assert.EqualValues(t, 0, count(rm, nameHoldDuration, nil))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, nil))
	assert.Len(t, e.holdfastSpans(), 1)
}

// TestWithNames checks the opt-in name: on the per-object instruments and
// the spans, normalized, left out when normalize returns "", and never on
// the client-wide instruments.
func TestWithNames(t *testing.T) {
	var seen []observe.Kind
	normalize := func(k observe.Kind, name string) string {
		seen = append(seen, k)
		prefix, _, _ := strings.Cut(name, ":")
		if prefix == "secret" {
			return ""
		}
		return prefix
	}
	e := newEnv(t, WithNames(normalize))
	o := e.obs
	ctx := context.Background()
	for _, name := range []string{"orders:1", "orders:2", "secret:3"} {
		c := observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Name: name, Start: time.Now()}
		call(ctx, o, c, observe.Result{Outcome: observe.OutcomeOK, Waited: true})
		c.Op = observe.OpIsLocked
		call(ctx, o, c, observe.Result{Outcome: observe.OutcomeOK})
		h := observe.Hold{Kind: observe.KindMutex, Name: name, Start: time.Now()}
		o.HoldStart(h)
		o.HoldEnd(h, observe.HoldReleased, nil)
		o.HoldStart(h)
		w := observe.Wait{Kind: observe.KindMutex, Op: observe.OpLock, Name: name}
		o.WaitStart(w)
		o.Woken(w, observe.CauseMessage)
	}
	o.Renewed(observe.RenewOK, 1)
	o.Subscriptions(1)
	o.Reconnected()
	assert.Contains(t, seen, observe.KindMutex)

	rm := e.collect(t)
	orders := attrs{observe.AttrKind: "mutex", observe.AttrName: "orders"}
	assert.EqualValues(t, 2, count(rm, nameAcquireDuration, orders))
	assert.EqualValues(t, 2, count(rm, nameOperationDuration, orders))
	assert.EqualValues(t, 2, count(rm, nameHoldDuration, orders))
	assert.EqualValues(t, 2, sum(rm, nameHoldActive, orders))
	assert.EqualValues(t, 2, sum(rm, nameWaitActive, orders))
	assert.EqualValues(t, 2, sum(rm, nameWaitWakeups, orders))
	// secret:3 has no name: its points are the nameless ones.
	unnamed := func(set attribute.Set) bool { return !set.HasValue(observe.AttrName) }
	for _, name := range []string{nameAcquireDuration, nameOperationDuration, nameHoldDuration} {
		assert.EqualValues(t, 1, total[uint64](rm, name, unnamed), name)
	}
	for _, name := range []string{nameHoldActive, nameWaitActive, nameWaitWakeups} {
		assert.EqualValues(t, 1, total[int64](rm, name, unnamed), name)
	}

	var named, nameless int
	for _, s := range e.holdfastSpans() {
		switch spanAttr(s, observe.AttrName) {
		case "orders":
			named++
		case "":
			nameless++
		default:
			t.Errorf("span %s has the name %q", s.Name(), spanAttr(s, observe.AttrName))
		}
	}
	assert.Equal(t, 4, named)
	assert.Equal(t, 2, nameless)
	e.checkAttributes(t, "orders")
}

// TestConcurrentUse runs events of every kind from several goroutines (for
// the race detector), names on.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t, WithNames(func(_ observe.Kind, name string) string { return name }))
	o := e.obs
	done := make(chan struct{})
	const goroutines, rounds = 4, 200
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range rounds {
				k := observe.Kinds()[(g+i)%len(observe.Kinds())]
				name := []string{"a", "b", "c"}[i%3]
				c := observe.Call{Kind: k, Op: observe.OpLock, Name: name, Start: time.Now()}
				call(context.Background(), o, c, observe.Result{Outcome: observe.OutcomeOK, Waited: i%2 == 0})
				h := observe.Hold{Kind: k, Name: name, Start: time.Now()}
				o.HoldStart(h)
				o.HoldEnd(h, observe.HoldReleased, nil)
				w := observe.Wait{Kind: k, Op: observe.OpLock, Name: name}
				o.WaitStart(w)
				o.Woken(w, observe.CauseRecheck)
				o.WaitEnd(w)
			}
		}()
	}
	for range goroutines {
		<-done
	}
	rm := e.collect(t)
	assert.EqualValues(t, goroutines*rounds, count(rm, nameAcquireDuration, nil))
	assert.EqualValues(t, goroutines*rounds, count(rm, nameHoldDuration, nil))
	assert.EqualValues(t, 0, sum(rm, nameHoldActive, nil))
	assert.EqualValues(t, 0, sum(rm, nameWaitActive, nil))
	assert.Len(t, e.spans.Ended(), goroutines*rounds)
	e.checkAttributes(t, "a", "b", "c")
}
