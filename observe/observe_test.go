package observe

import (
	"regexp"
	"testing"
)

func TestSpanNames(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		op   Op
		want string
	}{
		{KindMutex, OpLock, "holdfast.Mutex.Lock"},
		{KindFairMutex, OpTryLock, "holdfast.FairMutex.TryLock"},
		{KindReadMutex, OpLeaseUnlock, "holdfast.Lease.Unlock"},
		{KindRedLock, OpLeaseUnlock, "holdfast.MultiLease.Unlock"},
		{KindExpirableSemaphore, OpPermitsRelease, "holdfast.Permits.Release"},
		{KindCountDownLatch, OpAwait, "holdfast.CountDownLatch.Await"},
		{KindElection, OpCampaign, "holdfast.Election.Campaign"},
		{KindElection, OpResign, "holdfast.Leadership.Resign"},
		{Kind(200), Op(200), "holdfast.Unknown.Unknown"},
	} {
		if got := SpanName(c.k, c.op); got != c.want {
			t.Errorf("SpanName(%v, %v) = %q, want %q", c.k, c.op, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = SpanName(KindMutex, OpLock) }); n != 0 {
		t.Errorf("SpanName allocates %v times", n)
	}
}

// TestEnumValues: every value of every enum has its own lower snake-case
// attribute value, and values out of range read "unknown" instead of
// panicking.
func TestEnumValues(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	check := func(what string, values []string) {
		seen := map[string]bool{}
		for _, v := range values {
			if !snake.MatchString(v) || v == "unknown" || seen[v] {
				t.Errorf("%s: bad or repeated value %q", what, v)
			}
			seen[v] = true
		}
	}
	var ks, ops []string
	for _, k := range Kinds() {
		ks = append(ks, k.String())
		if k.TypeName() == "Unknown" {
			t.Errorf("kind %v has no type name", k)
		}
	}
	for _, o := range Ops() {
		ops = append(ops, o.String())
	}
	check("kinds", ks)
	check("ops", ops)
	check("outcomes", outcomes[1:])
	check("hold outcomes", holdOutcomes[1:])
	check("causes", causes[1:])
	check("renewal outcomes", renewOutcomes[1:])
	if len(ks) != 14 || len(ops) != 33 {
		t.Errorf("%d kinds, %d ops", len(ks), len(ops))
	}
	for _, s := range []string{Kind(99).String(), Op(99).String(), Outcome(99).String(), HoldOutcome(99).String(),
		Cause(99).String(), RenewOutcome(99).String(), Outcome(0).String()} {
		if s != "unknown" {
			t.Errorf("out of range: %q", s)
		}
	}
}
