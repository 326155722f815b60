package holdfastotel

import (
	"github.com/holdfast-go/holdfast/observe"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures an Observer; pass them to NewObserver.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp        trace.TracerProvider // nil: otel.GetTracerProvider()
	mp        metric.MeterProvider // nil: otel.GetMeterProvider()
	normalize func(kind observe.Kind, name string) string
}

// WithTracerProvider sets the TracerProvider the Observer's spans come from.
// Default (and when tp is nil): the global one, otel.GetTracerProvider(), as
// it is when NewObserver is called (the global provider delegates to one set
// later with otel.SetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the MeterProvider the Observer's instruments come
// from. Default (and when mp is nil): the global one, otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithNames opts in to object names: the per-object instruments
// (holdfast.acquire.duration, holdfast.operation.duration,
// holdfast.hold.duration, holdfast.hold.active, holdfast.wait.active,
// holdfast.wait.wakeups) and the spans get the attribute holdfast.name, whose
// value is normalize(kind, name) for an object of that kind and name. When
// normalize returns "", the attribute is left out for that object.
//
// Names are unbounded: normalize is where their cardinality is bounded, by
// mapping the names of a family of objects to one value ("orders:42" to
// "orders"), and every other name to "". The Observer keeps, for every
// normalized name, the attribute sets of the combinations it has recorded, for
// the life of the Observer: the first measurement of each name (and
// combination) allocates them, later ones do not. normalize is called for
// every event, from any goroutine, sometimes with the client's mutex held: it
// must be quick and safe for concurrent use.
//
// Default: no names at all. A nil normalize also means no names.
func WithNames(normalize func(kind observe.Kind, name string) string) Option {
	return optionFunc(func(c *config) { c.normalize = normalize })
}
