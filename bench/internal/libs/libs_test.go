package libs

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry(func(s string) string { return s })
	for _, s := range []string{"redsync", "holdfast-fair", "bsm", "holdfast"} {
		r.Add(s)
	}
	if got := r.All(); !slices.Equal(got, []string{"holdfast-fair", "holdfast", "redsync", "bsm"}) {
		t.Errorf("All = %v", got)
	}
	if s, ok := r.ByName("bsm"); !ok || s != "bsm" {
		t.Errorf("ByName(bsm) = %q, %v", s, ok)
	}
	if _, ok := r.ByName("x"); ok {
		t.Error("ByName(x) found")
	}
}
