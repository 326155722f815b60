package holdfastotel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestMain runs the tests and then, when they passed, checks that no
// goroutine leaked (redistest.Main: goleak.Find), after stopping the shared
// Redis server.
func TestMain(m *testing.M) { redistest.Main(m) }

// env is an Observer on SDK providers whose data the test reads: a manual
// metric reader and a span recorder.
type env struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	obs    *Observer
}

func newEnv(t testing.TB, opts ...Option) *env {
	t.Helper()
	e := &env{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	e.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() {
		_ = e.mp.Shutdown(context.Background())
		_ = e.tp.Shutdown(context.Background())
	})
	obs, err := NewObserver(append([]Option{WithMeterProvider(e.mp), WithTracerProvider(e.tp)}, opts...)...)
	require.NoError(t, err)
	e.obs = obs
	return e
}

// collect returns every metric of the reader now.
func (e *env) collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	return rm
}

// findMetric returns the metric called name, if any was recorded.
func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// attrs is a filter on data points: key -> value (bool values as "true",
// "false").
type attrs map[string]string

func (a attrs) match(set attribute.Set) bool {
	for k, want := range a {
		v, ok := set.Value(attribute.Key(k))
		if !ok || v.Emit() != want {
			return false
		}
	}
	return true
}

func (a attrs) String() string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k+"="+a[k])
	}
	slices.Sort(keys)
	return "{" + strings.Join(keys, ", ") + "}"
}

// count returns the number of measurements of histogram name whose
// attributes match a.
func count(rm metricdata.ResourceMetrics, name string, a attrs) uint64 {
	return total[uint64](rm, name, a.match)
}

// sum returns the sum of the points of counter (or up-down counter) name
// whose attributes match a.
func sum(rm metricdata.ResourceMetrics, name string, a attrs) int64 {
	return total[int64](rm, name, a.match)
}

// total adds up the points of metric name whose attributes keep accepts: the
// counts of a float64 histogram (N uint64), the values of an int64 sum (N
// int64). It panics when the metric is not of the kind N says.
func total[N uint64 | int64](rm metricdata.ResourceMetrics, name string, keep func(attribute.Set) bool) N {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	var n N
	_, histogram := any(n).(uint64)
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		if histogram {
			for _, p := range d.DataPoints {
				if keep(p.Attributes) {
					n += N(p.Count)
				}
			}
			return n
		}
	case metricdata.Sum[int64]:
		if !histogram {
			for _, p := range d.DataPoints {
				if keep(p.Attributes) {
					n += N(p.Value)
				}
			}
			return n
		}
	}
	panic(fmt.Sprintf("%s is a %T, not a %s", name, m.Data, map[bool]string{true: "float64 histogram", false: "int64 sum"}[histogram]))
}

// lockUnlockAsync locks m for a new owner of ctx and unlocks it at once, in a
// goroutine; the channel gets the first error, or nil.
func lockUnlockAsync(ctx context.Context, m *rlock.Mutex) <-chan error {
	got := make(chan error, 1)
	go func() {
		b := rlock.WithOwner(ctx)
		l, err := m.Lock(b)
		if err == nil {
			err = l.Unlock(b)
		}
		got <- err
	}()
	return got
}

// eventually polls cond every 5 ms until it holds, and fails the test when it
// does not within d; what describes the condition (it is called on failure).
func eventually(t testing.TB, d time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what())
			return
		}
		<-tick.C
	}
}

// waitMetric waits until f(collect()) holds, for up to 10 s.
func (e *env) waitMetric(t testing.TB, what string, f func(rm metricdata.ResourceMetrics) bool) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	eventually(t, 10*time.Second, func() bool {
		rm = e.collect(t)
		return f(rm)
	}, func() string { return what + "\nmetrics:\n" + dump(rm) })
	return rm
}

// dump describes every data point of rm, for failure messages.
func dump(rm metricdata.ResourceMetrics) string {
	var b strings.Builder
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "  %s %s count=%d sum=%.6f\n", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count, p.Sum)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "  %s %s value=%d\n", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			default:
				fmt.Fprintf(&b, "  %s %T\n", m.Name, m.Data)
			}
		}
	}
	return b.String()
}

// holdfastSpans returns the ended spans of the Observer's tracer.
func (e *env) holdfastSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.InstrumentationScope().Name == ScopeName {
			out = append(out, s)
		}
	}
	return out
}

// spansNamed returns the ended holdfast spans called name.
func (e *env) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.holdfastSpans() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttr returns the value of attribute key of s, "" if it has none.
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// allowedValues are the values each documented attribute may take: the
// Strings of observe's enums.
func allowedValues() map[string][]string {
	var kinds, ops, outcomes, causes []string
	for _, k := range observe.Kinds() {
		kinds = append(kinds, k.String())
	}
	for _, op := range observe.Ops() {
		ops = append(ops, op.String())
	}
	for i := 1; observe.Outcome(i).String() != unknown; i++ {
		outcomes = append(outcomes, observe.Outcome(i).String())
	}
	for i := 1; observe.HoldOutcome(i).String() != unknown; i++ {
		outcomes = append(outcomes, observe.HoldOutcome(i).String())
	}
	for i := 1; observe.RenewOutcome(i).String() != unknown; i++ {
		outcomes = append(outcomes, observe.RenewOutcome(i).String())
	}
	for i := 1; observe.Cause(i).String() != unknown; i++ {
		causes = append(causes, observe.Cause(i).String())
	}
	var losses, modes []string
	for i := 1; observe.LossCause(i).String() != unknown; i++ {
		losses = append(losses, observe.LossCause(i).String())
	}
	for i := 1; observe.TrackingMode(i).String() != unknown; i++ {
		modes = append(modes, observe.TrackingMode(i).String())
	}
	return map[string][]string{
		observe.AttrLoss:      losses,
		observe.AttrTracking:  modes,
		observe.AttrKind:      kinds,
		observe.AttrOperation: ops,
		observe.AttrOutcome:   outcomes,
		observe.AttrWaited:    {"true", "false"},
		observe.AttrCause:     causes,
		observe.AttrElected:   {"true", "false"},
		observe.AttrNewTerm:   {"true", "false"},
	}
}

// checkAttributes checks that every attribute of every data point of e, and
// of every span of its Observer, is a documented one with one of its
// documented values; holdfast.name is allowed only when names says which
// values it may take.
func (e *env) checkAttributes(t testing.TB, names ...string) {
	t.Helper()
	allowed := allowedValues()
	if len(names) > 0 {
		allowed[observe.AttrName] = names
	}
	check := func(where string, kvs []attribute.KeyValue) {
		t.Helper()
		for _, kv := range kvs {
			values, ok := allowed[string(kv.Key)]
			if !ok {
				t.Errorf("%s: attribute %s=%s is not documented", where, kv.Key, kv.Value.Emit())
				continue
			}
			if !slices.Contains(values, kv.Value.Emit()) {
				t.Errorf("%s: attribute %s has the value %q, not one of %q", where, kv.Key, kv.Value.Emit(), values)
			}
		}
	}
	rm := e.collect(t)
	points := 0
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, ScopeName, sm.Scope.Name)
		require.Equal(t, Version(), sm.Scope.Version)
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points++
					check(m.Name, p.Attributes.ToSlice())
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points++
					check(m.Name, p.Attributes.ToSlice())
					if m.Name == nameRenewals || m.Name == nameSubscriptions || m.Name == nameReconnects {
						require.False(t, p.Attributes.HasValue(observe.AttrName), "%s has a name", m.Name)
					}
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	spans := e.holdfastSpans()
	for _, s := range spans {
		check("span "+s.Name(), s.Attributes())
	}
	t.Logf("checked the attributes of %d data points and %d spans", points, len(spans))
}
