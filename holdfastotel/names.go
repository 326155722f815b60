package holdfastotel

import (
	"sync"

	"github.com/holdfast-go/holdfast/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The instrument families whose attribute sets are cached per name.
const (
	famCall uint8 = iota // acquire and operation durations: kind, op, outcome, waited
	famHold              // hold.duration: kind, hold outcome
	famKind              // hold.active and wait.active: kind
	famWake              // wait.wakeups: kind, cause
)

// nameKey identifies one attribute set with a name: the family, the indexes
// of its enum values (unused ones 0) and the normalized name.
type nameKey struct {
	fam        uint8
	a, b, c, d uint8
	name       string
}

// named is the cached options of one nameKey: rec for histograms, add for
// counters (the family decides which one is set).
type named struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

// nameCache holds the attribute sets of the names seen, built on first use.
// It grows with the number of distinct normalized names, for the life of the
// Observer: WithNames' normalize bounds it.
type nameCache struct {
	m sync.Map // nameKey -> *named
}

// get returns the options of key, building them the first time.
func (c *nameCache) get(t *tables, key nameKey) *named {
	if v, ok := c.m.Load(key); ok {
		return v.(*named)
	}
	kvs := t.namedAttrs(key)
	n := &named{}
	set := metric.WithAttributeSet(attribute.NewSet(kvs...))
	switch key.fam {
	case famCall, famHold:
		n.rec = []metric.RecordOption{set}
	default:
		n.add = []metric.AddOption{set}
	}
	v, _ := c.m.LoadOrStore(key, n)
	return v.(*named)
}

// namedAttrs returns the attributes of key: those of the nameless set, and
// the name.
func (t *tables) namedAttrs(key nameKey) []attribute.KeyValue {
	a, b, c, d := int(key.a), int(key.b), int(key.c), int(key.d)
	var kvs []attribute.KeyValue
	switch key.fam {
	case famCall:
		kvs = t.callAttrs(a, b, c, d, observe.Op(b).Acquires())
	case famHold:
		kvs = []attribute.KeyValue{t.kindKV[a], t.holdKV[b]}
	case famKind:
		kvs = []attribute.KeyValue{t.kindKV[a]}
	case famWake:
		kvs = []attribute.KeyValue{t.kindKV[a], t.causeKV[b]}
	}
	return append(kvs, attribute.String(observe.AttrName, key.name))
}
