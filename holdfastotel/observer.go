package holdfastotel

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the Observer's tracer and meter:
// the import path of this package.
const ScopeName = "github.com/holdfast-go/holdfast/holdfastotel"

// version is the instrumentation version: the scope version of the
// Observer's tracer and meter.
const version = "0.21.0"

// Version returns the instrumentation version, the version of the tracer's
// and meter's scope: "0.21.0".
func Version() string { return version }

// The instrument names.
const (
	nameAcquireDuration   = "holdfast.acquire.duration"
	nameOperationDuration = "holdfast.operation.duration"
	nameHoldDuration      = "holdfast.hold.duration"
	nameHoldActive        = "holdfast.hold.active"
	nameWaitActive        = "holdfast.wait.active"
	nameWaitWakeups       = "holdfast.wait.wakeups"
	nameRenewals          = "holdfast.watchdog.renewals"
	nameSubscriptions     = "holdfast.pubsub.subscriptions"
	nameReconnects        = "holdfast.pubsub.reconnects"
	nameLosses            = "holdfast.hold.losses"
	nameTracking          = "holdfast.tracking.modes"
	nameLeaderChanges     = "holdfast.election.changes"
)

// durationBuckets are the advisory bucket boundaries of the duration
// histograms, in seconds: 100 µs to 1 minute.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Observer reports a holdfast client's calls, holds, waits, renewals and
// pub/sub connections to OpenTelemetry: a span per public call and the
// instruments listed in the package documentation. Install it with
// rlock.WithObserver; one Observer may serve several clients, whose
// measurements then add up. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	t      *tables

	normalize func(observe.Kind, string) string // nil: no names
	names     nameCache

	acquire       metric.Float64Histogram
	operation     metric.Float64Histogram
	hold          metric.Float64Histogram
	holdActive    metric.Int64UpDownCounter
	waitActive    metric.Int64UpDownCounter
	wakeups       metric.Int64Counter
	renewals      metric.Int64Counter
	subscriptions metric.Int64UpDownCounter
	reconnects    metric.Int64Counter
	losses        metric.Int64Counter
	tracking      metric.Int64Counter
	changes       metric.Int64Counter
	changeOpts    [2][2][]metric.AddOption // by elected, then by new term
}

var (
	_ observe.Observer       = (*Observer)(nil)
	_ observe.HoldObserver   = (*Observer)(nil)
	_ observe.WaitObserver   = (*Observer)(nil)
	_ observe.RenewObserver  = (*Observer)(nil)
	_ observe.PubSubObserver = (*Observer)(nil)

	_ observe.TrackingObserver = (*Observer)(nil)
	_ observe.ElectionObserver = (*Observer)(nil)
)

// NewObserver returns an Observer whose tracer and meter come from the
// providers of opts (default: the global ones), with the scope ScopeName and
// the version Version(). It computes the attribute sets of every combination
// of kind, operation and outcome up front, so that recording allocates
// nothing of its own. It fails only when an instrument cannot be created.
func NewObserver(opts ...Option) (*Observer, error) {
	var c config
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	o := &Observer{
		tracer:    c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version())),
		t:         newTables(),
		normalize: c.normalize,
	}
	m := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))

	var errs []error
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		u, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return u
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		n, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return n
	}
	o.acquire = histogram(nameAcquireDuration,
		"Duration of holdfast acquisitions (Lock, TryLock, Acquire, TryAcquire), waits included.")
	o.operation = histogram(nameOperationDuration,
		"Duration of holdfast's public calls other than acquisitions.")
	o.hold = histogram(nameHoldDuration,
		"How long holdfast holds lasted, from the acquisition that began them to their end.")
	o.holdActive = upDown(nameHoldActive, "{hold}",
		"Number of holdfast holds open: locks held by an owner, expirable semaphore permits.")
	o.waitActive = upDown(nameWaitActive, "{waiter}",
		"Number of holdfast calls blocked waiting for a lock, for permits or for a latch.")
	o.wakeups = counter(nameWaitWakeups, "{wakeup}",
		"Number of times a waiting holdfast call looked at Redis again, by what woke it.")
	o.renewals = counter(nameRenewals, "{renewal}",
		"Number of hold renewals by holdfast's watchdog, by outcome.")
	o.subscriptions = upDown(nameSubscriptions, "{subscription}",
		"Number of pub/sub channels holdfast clients are subscribed to.")
	o.reconnects = counter(nameReconnects, "{reconnect}",
		"Number of times a holdfast subscriber connection was re-established (messages may have been lost).")
	o.losses = counter(nameLosses, "{hold}",
		"Number of holdfast holds lost, by how the client learnt of the loss.")
	o.tracking = counter(nameTracking, "{node}",
		"Number of times a holdfast client found a Redis node in a tracking mode (on, refused, off).")
	o.changes = counter(nameLeaderChanges, "{change}",
		"Number of changes of an election's leader delivered to holdfast followers (Election.Observe), by whether a leader leads after it and whether it began a new term.")
	for e := range 2 {
		for n := range 2 {
			o.changeOpts[e][n] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				attribute.Bool(observe.AttrElected, e == 1), attribute.Bool(observe.AttrNewTerm, n == 1)))}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// name returns the normalized name of an object, "" for none.
func (o *Observer) name(k observe.Kind, name string) string {
	if o.normalize == nil {
		return ""
	}
	return o.normalize(k, name)
}

// Start starts the call's span, "holdfast.<Type>.<Method>" (observe.SpanName),
// at call.Start, with the attributes holdfast.kind and holdfast.operation
// (and holdfast.name with WithNames), and returns ctx with the span in it:
// the Redis commands of the call run with it, so that their spans
// (redisotel's) are its children.
func (o *Observer) Start(ctx context.Context, call observe.Call) context.Context {
	base := o.t.start[o.t.spanIndex(o.t.kindOf(call.Kind), o.t.opOf(call.Op))]
	opts := make([]trace.SpanStartOption, len(base), len(base)+2)
	copy(opts, base)
	if !call.Start.IsZero() {
		opts = append(opts, trace.WithTimestamp(call.Start))
	}
	if n := o.name(call.Kind, call.Name); n != "" {
		opts = append(opts, trace.WithAttributes(attribute.String(observe.AttrName, n)))
	}
	ctx, _ = o.tracer.Start(ctx, observe.SpanName(call.Kind, call.Op), opts...)
	return ctx
}

// End records the call's duration, in holdfast.acquire.duration for an
// acquisition (call.Op.Acquires()) and holdfast.operation.duration for any
// other call, and ends the span of ctx (the one Start returned) with the
// attribute holdfast.outcome (and holdfast.waited for an acquisition). Only
// observe.OutcomeError makes the span an error (status Error, and the error
// recorded): a lock not acquired, a wait timed out or cancelled are outcomes
// the caller allowed. A call with no Start time records no duration.
func (o *Observer) End(ctx context.Context, call observe.Call, res observe.Result) {
	t := o.t
	k, op, out := t.kindOf(call.Kind), t.opOf(call.Op), t.outcomeOf(res.Outcome)
	acquires := call.Op.Acquires()
	w := 0
	if res.Waited && acquires {
		w = 1
	}
	if !call.Start.IsZero() {
		d := time.Since(call.Start).Seconds()
		opts := t.call[t.callIndex(k, op, out, w)]
		if n := o.name(call.Kind, call.Name); n != "" {
			opts = o.names.get(t, nameKey{fam: famCall, a: uint8(k), b: uint8(op), c: uint8(out), d: uint8(w), name: n}).rec
		}
		if acquires {
			o.acquire.Record(ctx, d, opts...)
		} else {
			o.operation.Record(ctx, d, opts...)
		}
	}

	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		attrs := 0
		if acquires {
			attrs = 1 + w
		}
		span.SetAttributes(t.end[out][attrs]...)
		if res.Outcome == observe.OutcomeError {
			desc := observe.OutcomeError.String()
			if res.Err != nil {
				desc = res.Err.Error()
				span.RecordError(res.Err)
			}
			span.SetStatus(codes.Error, desc)
		}
	}
	span.End()
}

// kindOpts returns the options of holdfast.hold.active and
// holdfast.wait.active for an object.
func (o *Observer) kindOpts(kind observe.Kind, name string) []metric.AddOption {
	k := o.t.kindOf(kind)
	if n := o.name(kind, name); n != "" {
		return o.names.get(o.t, nameKey{fam: famKind, a: uint8(k), name: n}).add
	}
	return o.t.kind[k]
}

// HoldStart adds the hold to holdfast.hold.active.
func (o *Observer) HoldStart(h observe.Hold) {
	o.holdActive.Add(context.Background(), 1, o.kindOpts(h.Kind, h.Name)...)
}

// HoldEnd takes the hold out of holdfast.hold.active, counts a lost one in
// holdfast.hold.losses with its cause (h.Loss), and records its duration,
// from h.Start, in holdfast.hold.duration with its outcome.
func (o *Observer) HoldEnd(h observe.Hold, outcome observe.HoldOutcome, _ error) {
	t := o.t
	k, out := t.kindOf(h.Kind), t.holdOf(outcome)
	ctx := context.Background()
	o.holdActive.Add(ctx, -1, o.kindOpts(h.Kind, h.Name)...)
	if outcome == observe.HoldLost {
		o.losses.Add(ctx, 1, t.loss[t.lossIndex(k, t.lossOf(h.Loss))]...)
	}
	if h.Start.IsZero() {
		return
	}
	opts := t.hold[t.holdIndex(k, out)]
	if n := o.name(h.Kind, h.Name); n != "" {
		opts = o.names.get(t, nameKey{fam: famHold, a: uint8(k), b: uint8(out), name: n}).rec
	}
	o.hold.Record(ctx, time.Since(h.Start).Seconds(), opts...)
}

// WaitStart adds the call to holdfast.wait.active.
func (o *Observer) WaitStart(w observe.Wait) {
	o.waitActive.Add(context.Background(), 1, o.kindOpts(w.Kind, w.Name)...)
}

// Woken counts a wake-up in holdfast.wait.wakeups, with its cause.
func (o *Observer) Woken(w observe.Wait, cause observe.Cause) {
	t := o.t
	k, c := t.kindOf(w.Kind), t.causeOf(cause)
	opts := t.wake[t.wakeIndex(k, c)]
	if n := o.name(w.Kind, w.Name); n != "" {
		opts = o.names.get(t, nameKey{fam: famWake, a: uint8(k), b: uint8(c), name: n}).add
	}
	o.wakeups.Add(context.Background(), 1, opts...)
}

// WaitEnd takes the call out of holdfast.wait.active.
func (o *Observer) WaitEnd(w observe.Wait) {
	o.waitActive.Add(context.Background(), -1, o.kindOpts(w.Kind, w.Name)...)
}

// Renewed adds holds to holdfast.watchdog.renewals with the round's outcome
// (a count below 1 adds nothing).
func (o *Observer) Renewed(outcome observe.RenewOutcome, holds int) {
	if holds < 1 {
		return
	}
	o.renewals.Add(context.Background(), int64(holds), o.t.renew[o.t.renewOf(outcome)]...)
}

// Subscriptions adds delta to holdfast.pubsub.subscriptions.
func (o *Observer) Subscriptions(delta int) {
	if delta == 0 {
		return
	}
	o.subscriptions.Add(context.Background(), int64(delta))
}

// Reconnected counts a re-established subscriber connection in
// holdfast.pubsub.reconnects.
func (o *Observer) Reconnected() {
	o.reconnects.Add(context.Background(), 1)
}

// Tracking counts, in holdfast.tracking.modes, a node found in mode: "on"
// once per node and client, "refused" once per node that refuses client
// tracking (its holds learn of a loss at their next renewal only), "off" once
// per client whose options turned tracking off.
func (o *Observer) Tracking(_ string, mode observe.TrackingMode) {
	o.tracking.Add(context.Background(), 1, o.t.mode[o.t.modeOf(mode)]...)
}

// LeaderChanged counts a change of leader in holdfast.election.changes, with
// holdfast.elected and holdfast.election.new_term.
func (o *Observer) LeaderChanged(c observe.LeaderChange) {
	e, n := 0, 0
	if c.Elected {
		e = 1
	}
	if c.NewTerm {
		n = 1
	}
	o.changes.Add(context.Background(), 1, o.changeOpts[e][n]...)
}
