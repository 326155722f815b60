package holdfastotel

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkCycle is the uncontended TryLock+Unlock cycle against a real
// server with no observer, with holdfastotel on OpenTelemetry's no-op
// providers, on the SDK's meter provider (a manual reader) and a no-op
// tracer, and on both SDK providers (every span sampled, ended into a
// processor that drops it); and a PING, the yardstick. Compare the
// sub-benchmarks of one run: go test -run '^$' -bench Cycle -count 8 | benchstat.
func BenchmarkCycle(b *testing.B) {
	srv := redistest.Shared(b)
	sdkMeter := func(b *testing.B) *sdkmetric.MeterProvider {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		return mp
	}
	for _, v := range []struct {
		name string
		obs  func(b *testing.B) []rlock.ClientOption
	}{
		{"none", func(*testing.B) []rlock.ClientOption { return nil }},
		{"otel-noop", func(b *testing.B) []rlock.ClientOption {
			return observed(b, WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"otel-metrics", func(b *testing.B) []rlock.ClientOption {
			return observed(b, WithMeterProvider(sdkMeter(b)), WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"otel-metrics-traces", func(b *testing.B) []rlock.ClientOption {
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return observed(b, WithMeterProvider(sdkMeter(b)), WithTracerProvider(tp))
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			c, err := rlock.New(srv.Client(b), v.obs(b)...)
			require.NoError(b, err)
			b.Cleanup(func() { _ = c.Close() })
			m := c.NewMutex(redistest.Name(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.TryLock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ping", func(b *testing.B) {
		rdb := srv.Client(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// observed returns the client option of an Observer made with opts.
func observed(b *testing.B, opts ...Option) []rlock.ClientOption {
	obs, err := NewObserver(opts...)
	require.NoError(b, err)
	return []rlock.ClientOption{rlock.WithObserver(obs)}
}

// BenchmarkCycleInterleaved runs, in each iteration, one PING, one cycle
// without an observer and one with holdfastotel on both SDK providers, so
// that the machine's drift hits all three alike, and reports their medians
// and the ratios: what observation costs the uncontended cycle, measured in
// one run.
func BenchmarkCycleInterleaved(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	mutex := func(opts ...rlock.ClientOption) *rlock.Mutex {
		c, err := rlock.New(srv.Client(b), opts...)
		require.NoError(b, err)
		b.Cleanup(func() { _ = c.Close() })
		return c.NewMutex(redistest.Name(b))
	}
	plain := mutex()
	otel := mutex(observed(b, WithMeterProvider(mp), WithTracerProvider(tp))...)
	ctx := context.Background()
	cycle := func(m *rlock.Mutex) time.Duration {
		start := time.Now()
		l, err := m.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var pings, nones, otels []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		pings = append(pings, time.Since(start))
		nones = append(nones, cycle(plain))
		otels = append(otels, cycle(otel))
	}
	p, n, o := median(pings), median(nones), median(otels)
	b.ReportMetric(float64(p.Microseconds()), "ping-p50-µs")
	b.ReportMetric(float64(n.Microseconds()), "none-p50-µs")
	b.ReportMetric(float64(o.Microseconds()), "otel-p50-µs")
	b.ReportMetric(float64(n)/float64(p), "none/ping")
	b.ReportMetric(float64(o)/float64(n), "otel/none")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
