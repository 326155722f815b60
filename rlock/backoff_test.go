package rlock

import (
	"testing"
	"time"
)

func TestExponentialBackoffBounds(t *testing.T) {
	b := DefaultBackoff
	if d := b.Delay(0); d != time.Millisecond {
		t.Fatalf("first pause %v, want 1ms", d)
	}
	for n := 1; n < 40; n++ {
		low := min(time.Millisecond<<n, b.Max)
		for range 50 {
			d := b.Delay(n)
			if d < low || d > b.Max || d >= low+time.Duration(n)*time.Millisecond && d != b.Max {
				t.Fatalf("pause %d = %v, want in [%v, min(%v + %dms, %v)]", n, d, low, low, n, b.Max)
			}
		}
	}
	if d := ConstantBackoff(64 * time.Millisecond).Delay(7); d != 64*time.Millisecond {
		t.Fatalf("constant pause %v", d)
	}
	for _, bad := range []Backoff{nil, ConstantBackoff(0), ExponentialBackoff{}, ExponentialBackoff{Initial: 2, Max: 1, Multiplier: 2}} {
		if checkBackoff(bad) == nil {
			t.Errorf("checkBackoff(%#v) accepted", bad)
		}
	}
}
