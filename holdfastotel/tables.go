package holdfastotel

import (
	"github.com/holdfast-go/holdfast/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// unknown is the String of every enum value out of its range, and of zero.
const unknown = "unknown"

// tables holds everything an event needs, computed once by NewObserver:
// the attribute sets of every combination of enum values, wrapped in the
// option slices the instruments take, so that recording a measurement
// allocates nothing. Index 0 of every enum is its "unknown" value, which
// values out of range map to.
type tables struct {
	nKinds, nOps, nOutcomes, nHolds, nCauses, nRenews, nLosses, nModes int

	kindKV    []attribute.KeyValue // by kind
	opKV      []attribute.KeyValue // by op
	outcomeKV []attribute.KeyValue // by Outcome
	holdKV    []attribute.KeyValue // by HoldOutcome
	causeKV   []attribute.KeyValue // by Cause
	renewKV   []attribute.KeyValue // by RenewOutcome
	lossKV    []attribute.KeyValue // by LossCause
	modeKV    []attribute.KeyValue // by TrackingMode
	waitedKV  [2]attribute.KeyValue

	call  [][]metric.RecordOption   // callIndex: kind, op, outcome, waited
	hold  [][]metric.RecordOption   // holdIndex: kind, hold outcome
	kind  [][]metric.AddOption      // by kind
	wake  [][]metric.AddOption      // wakeIndex: kind, cause
	renew [][]metric.AddOption      // by RenewOutcome
	loss  [][]metric.AddOption      // lossIndex: kind, loss cause
	mode  [][]metric.AddOption      // by TrackingMode
	start [][]trace.SpanStartOption // spanIndex: kind, op (without the timestamp)
	end   [][][]attribute.KeyValue  // by Outcome, then 0: not an acquisition, 1: acquisition not waited, 2: waited
}

// enumCount returns how many values an enum with a String method has,
// counting its zero ("unknown"): the first value from 1 on whose String is
// "unknown". So a value added to package observe is counted without a change
// here.
func enumCount(str func(uint8) string) int {
	n := 1
	for n < 256 && str(uint8(n)) != unknown {
		n++
	}
	return n
}

func newTables() *tables {
	t := &tables{}
	for _, k := range observe.Kinds() {
		t.nKinds = max(t.nKinds, int(k)+1)
	}
	for _, op := range observe.Ops() {
		t.nOps = max(t.nOps, int(op)+1)
	}
	t.nOutcomes = enumCount(func(v uint8) string { return observe.Outcome(v).String() })
	t.nHolds = enumCount(func(v uint8) string { return observe.HoldOutcome(v).String() })
	t.nCauses = enumCount(func(v uint8) string { return observe.Cause(v).String() })
	t.nRenews = enumCount(func(v uint8) string { return observe.RenewOutcome(v).String() })
	t.nLosses = enumCount(func(v uint8) string { return observe.LossCause(v).String() })
	t.nModes = enumCount(func(v uint8) string { return observe.TrackingMode(v).String() })

	t.kindKV = keyValues(observe.AttrKind, t.nKinds, func(v int) string { return observe.Kind(v).String() })
	t.opKV = keyValues(observe.AttrOperation, t.nOps, func(v int) string { return observe.Op(v).String() })
	t.outcomeKV = keyValues(observe.AttrOutcome, t.nOutcomes, func(v int) string { return observe.Outcome(v).String() })
	t.holdKV = keyValues(observe.AttrOutcome, t.nHolds, func(v int) string { return observe.HoldOutcome(v).String() })
	t.causeKV = keyValues(observe.AttrCause, t.nCauses, func(v int) string { return observe.Cause(v).String() })
	t.renewKV = keyValues(observe.AttrOutcome, t.nRenews, func(v int) string { return observe.RenewOutcome(v).String() })
	t.lossKV = keyValues(observe.AttrLoss, t.nLosses, func(v int) string { return observe.LossCause(v).String() })
	t.modeKV = keyValues(observe.AttrTracking, t.nModes, func(v int) string { return observe.TrackingMode(v).String() })
	t.waitedKV = [2]attribute.KeyValue{attribute.Bool(observe.AttrWaited, false), attribute.Bool(observe.AttrWaited, true)}

	t.call = make([][]metric.RecordOption, t.nKinds*t.nOps*t.nOutcomes*2)
	t.start = make([][]trace.SpanStartOption, t.nKinds*t.nOps)
	for k := range t.nKinds {
		for op := range t.nOps {
			t.start[t.spanIndex(k, op)] = []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(t.kindKV[k], t.opKV[op]),
			}
			acquires := observe.Op(op).Acquires()
			for out := range t.nOutcomes {
				if !acquires {
					// One set for both values of Result.Waited: the
					// attribute is an acquisition's only.
					opts := recordOpts(t.callAttrs(k, op, out, 0, false)...)
					t.call[t.callIndex(k, op, out, 0)] = opts
					t.call[t.callIndex(k, op, out, 1)] = opts
					continue
				}
				for w := range 2 {
					t.call[t.callIndex(k, op, out, w)] = recordOpts(t.callAttrs(k, op, out, w, true)...)
				}
			}
		}
	}

	t.hold = make([][]metric.RecordOption, t.nKinds*t.nHolds)
	t.kind = make([][]metric.AddOption, t.nKinds)
	t.wake = make([][]metric.AddOption, t.nKinds*t.nCauses)
	for k := range t.nKinds {
		t.kind[k] = addOpts(t.kindKV[k])
		for out := range t.nHolds {
			t.hold[t.holdIndex(k, out)] = recordOpts(t.kindKV[k], t.holdKV[out])
		}
		for c := range t.nCauses {
			t.wake[t.wakeIndex(k, c)] = addOpts(t.kindKV[k], t.causeKV[c])
		}
	}
	t.renew = make([][]metric.AddOption, t.nRenews)
	for out := range t.nRenews {
		t.renew[out] = addOpts(t.renewKV[out])
	}
	t.loss = make([][]metric.AddOption, t.nKinds*t.nLosses)
	for k := range t.nKinds {
		for c := range t.nLosses {
			t.loss[t.lossIndex(k, c)] = addOpts(t.kindKV[k], t.lossKV[c])
		}
	}
	t.mode = make([][]metric.AddOption, t.nModes)
	for m := range t.nModes {
		t.mode[m] = addOpts(t.modeKV[m])
	}

	t.end = make([][][]attribute.KeyValue, t.nOutcomes)
	for out := range t.nOutcomes {
		t.end[out] = [][]attribute.KeyValue{
			{t.outcomeKV[out]},
			{t.outcomeKV[out], t.waitedKV[0]},
			{t.outcomeKV[out], t.waitedKV[1]},
		}
	}
	return t
}

func keyValues(key string, n int, str func(int) string) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, n)
	for i := range kvs {
		kvs[i] = attribute.String(key, str(i))
	}
	return kvs
}

// callAttrs returns the attributes of a call's duration.
func (t *tables) callAttrs(k, op, out, w int, acquires bool) []attribute.KeyValue {
	kvs := []attribute.KeyValue{t.kindKV[k], t.opKV[op], t.outcomeKV[out]}
	if acquires {
		kvs = append(kvs, t.waitedKV[w])
	}
	return kvs
}

func recordOpts(kvs ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

func addOpts(kvs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

func (t *tables) callIndex(k, op, out, w int) int { return ((k*t.nOps+op)*t.nOutcomes+out)*2 + w }
func (t *tables) spanIndex(k, op int) int         { return k*t.nOps + op }
func (t *tables) holdIndex(k, out int) int        { return k*t.nHolds + out }
func (t *tables) wakeIndex(k, c int) int          { return k*t.nCauses + c }
func (t *tables) lossIndex(k, c int) int          { return k*t.nLosses + c }

// The indexes of enum values: values out of range are 0, "unknown".

func (t *tables) kindOf(k observe.Kind) int          { return index(int(k), t.nKinds) }
func (t *tables) opOf(op observe.Op) int             { return index(int(op), t.nOps) }
func (t *tables) outcomeOf(o observe.Outcome) int    { return index(int(o), t.nOutcomes) }
func (t *tables) holdOf(o observe.HoldOutcome) int   { return index(int(o), t.nHolds) }
func (t *tables) causeOf(c observe.Cause) int        { return index(int(c), t.nCauses) }
func (t *tables) renewOf(o observe.RenewOutcome) int { return index(int(o), t.nRenews) }
func (t *tables) lossOf(c observe.LossCause) int     { return index(int(c), t.nLosses) }
func (t *tables) modeOf(m observe.TrackingMode) int  { return index(int(m), t.nModes) }
func index(v, n int) int {
	if v < 0 || v >= n {
		return 0
	}
	return v
}
