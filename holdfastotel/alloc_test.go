package holdfastotel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// noopObserver returns an Observer on OpenTelemetry's no-op providers: what
// it allocates is its own.
func noopObserver(t testing.TB, opts ...Option) *Observer {
	t.Helper()
	o, err := NewObserver(append([]Option{
		WithMeterProvider(metricnoop.NewMeterProvider()),
		WithTracerProvider(tracenoop.NewTracerProvider()),
	}, opts...)...)
	require.NoError(t, err)
	return o
}

// events returns a function per event of o that allocates nothing of the
// Observer's when it is right: End (an acquisition, another call, an error),
// the hold, wait, renewal and pub/sub events.
func events(o *Observer) map[string]func() {
	start := time.Now()
	lock := observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Name: "orders:1", Start: start}
	unlock := observe.Call{Kind: observe.KindMutex, Op: observe.OpLeaseUnlock, Name: "orders:1", Start: start}
	lockCtx := o.Start(context.Background(), lock)
	unlockCtx := o.Start(context.Background(), unlock)
	boom := errors.New("boom")
	h := observe.Hold{Kind: observe.KindMutex, Name: "orders:1", Start: start}
	w := observe.Wait{Kind: observe.KindMutex, Op: observe.OpLock, Name: "orders:1"}
	return map[string]func(){
		"End acquisition": func() {
			o.End(lockCtx, lock, observe.Result{Outcome: observe.OutcomeOK, Waited: true})
		},
		"End other call": func() { o.End(unlockCtx, unlock, observe.Result{Outcome: observe.OutcomeOK}) },
		"End error": func() {
			o.End(unlockCtx, unlock, observe.Result{Outcome: observe.OutcomeError, Err: boom})
		},
		"HoldStart":     func() { o.HoldStart(h) },
		"HoldEnd":       func() { o.HoldEnd(h, observe.HoldReleased, nil) },
		"WaitStart":     func() { o.WaitStart(w) },
		"Woken":         func() { o.Woken(w, observe.CauseMessage) },
		"WaitEnd":       func() { o.WaitEnd(w) },
		"Renewed":       func() { o.Renewed(observe.RenewOK, 7) },
		"Subscriptions": func() { o.Subscriptions(1) },
		"Reconnected":   func() { o.Reconnected() },
	}
}

// TestAllocsNoop checks that, on no-op providers, recording allocates
// nothing: the attribute sets were computed by NewObserver.
func TestAllocsNoop(t *testing.T) {
	o := noopObserver(t)
	for name, f := range events(o) {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per event, want 0", name, n)
		}
	}
	// Start allocates its span's options and the context carrying the span;
	// measured, not required.
	c := observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: time.Now()}
	n := testing.AllocsPerRun(1000, func() { o.Start(context.Background(), c) })
	t.Logf("Start on no-op providers: %v allocations", n)
}

// TestAllocsNoopNames checks that, names on, an event allocates only the
// first time its name is seen.
func TestAllocsNoopNames(t *testing.T) {
	o := noopObserver(t, WithNames(func(_ observe.Kind, name string) string { return name[:6] })) // "orders"
	for name, f := range events(o) {
		f() // the first time: the name's sets
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per event once the name was seen, want 0", name, n)
		}
	}
}

// TestAllocsSDK measures End on the SDK's meter provider, cycling through
// every combination of kind, operation, outcome and waited, after one round
// that creates the SDK's aggregations: with the sets precomputed, the figure
// is small and the same for every combination (a set built per call would
// cost several allocations more, which the test measures as a reference).
func TestAllocsSDK(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	o, err := NewObserver(WithMeterProvider(mp), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)

	type event struct {
		ctx  context.Context
		call observe.Call
		res  observe.Result
	}
	var all []event
	start := time.Now()
	for _, k := range observe.Kinds() {
		for _, op := range observe.Ops() {
			c := observe.Call{Kind: k, Op: op, Start: start}
			ctx := o.Start(context.Background(), c)
			for out := observe.OutcomeOK; out <= observe.OutcomeError; out++ {
				for _, waited := range []bool{false, true} {
					all = append(all, event{ctx, c, observe.Result{Outcome: out, Waited: waited}})
				}
			}
		}
	}
	i := 0
	end := func() {
		e := all[i%len(all)]
		i++
		o.End(e.ctx, e.call, e.res)
	}
	for range all {
		end() // the SDK's aggregation of each set, made once
	}
	few := testing.AllocsPerRun(len(all), end)
	many := testing.AllocsPerRun(4*len(all), end)
	t.Logf("End on the SDK meter provider: %v allocations per call (%d combinations; %v over 4 times as many calls)", few, len(all), many)
	require.Equal(t, few, many, "the allocations of End do not depend on the number of calls")
	require.LessOrEqual(t, few, 1.0, "End allocates no attribute set of its own")

	// The reference: building the set at every call, as an observer that did
	// not precompute would.
	h, err := mp.Meter("reference").Float64Histogram("reference")
	require.NoError(t, err)
	kvs := []attribute.KeyValue{
		attribute.String(observe.AttrKind, "mutex"), attribute.String(observe.AttrOperation, "lock"),
		attribute.String(observe.AttrOutcome, "ok"), attribute.Bool(observe.AttrWaited, true),
	}
	ref := testing.AllocsPerRun(1000, func() {
		h.Record(context.Background(), 1, metric.WithAttributes(kvs...))
	})
	t.Logf("reference, a set built per measurement: %v allocations", ref)
	require.Greater(t, ref, few)
}

// TestAllocsSDKHoldWake measures HoldEnd and Woken on the SDK's meter
// provider.
func TestAllocsSDKHoldWake(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	o, err := NewObserver(WithMeterProvider(mp), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	h := observe.Hold{Kind: observe.KindFairMutex, Start: time.Now()}
	w := observe.Wait{Kind: observe.KindFairMutex, Op: observe.OpLock}
	holdEnd := func() { o.HoldEnd(h, observe.HoldLost, nil) }
	woken := func() { o.Woken(w, observe.CauseLeaseExpiry) }
	holdEnd()
	woken()
	he, wk := testing.AllocsPerRun(1000, holdEnd), testing.AllocsPerRun(1000, woken)
	t.Logf("on the SDK meter provider: HoldEnd %v allocations, Woken %v", he, wk)
	require.LessOrEqual(t, he, 1.0)
	require.LessOrEqual(t, wk, 1.0)
}

func BenchmarkEndNoop(b *testing.B) {
	o := noopObserver(b)
	c := observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: time.Now()}
	ctx := o.Start(context.Background(), c)
	b.ReportAllocs()
	for b.Loop() {
		o.End(ctx, c, observe.Result{Outcome: observe.OutcomeOK, Waited: true})
	}
}

func BenchmarkCallSDK(b *testing.B) {
	e := newEnv(b)
	c := observe.Call{Kind: observe.KindMutex, Op: observe.OpLock, Start: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		ctx := e.obs.Start(context.Background(), c)
		e.obs.End(ctx, c, observe.Result{Outcome: observe.OutcomeOK, Waited: true})
	}
}
