package harness

import (
	"slices"
	"testing"
)

// outcome is a window [100, 200) with two processes of two goroutines.
func outcome() *Outcome {
	return &Outcome{WS: 100, WE: 200, Procs: 2, Goroutines: 2, Results: []Result{
		{Proc: 0, RTStart: 1, RTEnd: 11, Errors: map[string]int{"x": 1}, Calls: []Call{
			{0, Acquired, 90, 105, 110, 120}, // acquired in the window
			{1, Failed, 95, 150, 0, 0},       // failed in the window
			{1, Acquired, 150, 210, 215, 220},
		}},
		{Proc: 1, RTStart: 5, RTEnd: 8, Errors: map[string]int{"x": 2}, Calls: []Call{
			{0, Acquired, 40, 50, 60, 70},  // before the window
			{1, Cancelled, 180, 201, 0, 0}, // waiting at the end
			{1, Cancelled, 205, 206, 0, 0}, // begun after the end
		}},
	}}
}

func TestOutcomeCounts(t *testing.T) {
	o := outcome()
	if n := o.RoundTrips(); n != 13 {
		t.Errorf("RoundTrips = %d, want 13", n)
	}
	errs := map[string]int{}
	o.AddErrors(errs)
	if errs["x"] != 3 {
		t.Errorf("AddErrors: %v, want x: 3", errs)
	}
	total, perG := o.Acquisitions()
	if total != 1 || !slices.Equal(perG, []int{1, 0, 0, 0}) {
		t.Errorf("Acquisitions = %d, %v; want 1, [1 0 0 0]", total, perG)
	}
}

func TestWindowCalls(t *testing.T) {
	waits, calls, failed, pending := outcome().Waits()
	if !slices.Equal(waits, []int64{15, 20, 55}) || calls != 3 || failed != 1 || pending != 1 {
		t.Errorf("Waits: %v, calls %d, failed %d, pending %d; want [15 20 55], 3, 1, 1", waits, calls, failed, pending)
	}
	if s := outcome().Seconds(); s != 100e-9 {
		t.Errorf("Seconds = %g, want 1e-7", s)
	}
}

func TestPerAcq(t *testing.T) {
	if rt, cmds, scr := PerAcq(4, 10, 20, 2); rt != 2.5 || cmds != 5 || scr != 0.5 {
		t.Errorf("PerAcq(4, 10, 20, 2) = %g, %g, %g", rt, cmds, scr)
	}
	if rt, cmds, scr := PerAcq(0, 10, 20, 2); rt != 0 || cmds != 0 || scr != 0 {
		t.Errorf("PerAcq(0, …) = %g, %g, %g, want zeros", rt, cmds, scr)
	}
}

func TestMatrix(t *testing.T) {
	got := Matrix([]int{10, 20}, []int{1, 2, 3}, func(c, l int) int { return c + l })
	if want := []int{11, 12, 13, 22, 23, 21}; !slices.Equal(got, want) {
		t.Errorf("Matrix = %v, want %v", got, want)
	}
}

func TestTimelineBlocked(t *testing.T) {
	tl := NewTimeline(outcome().Calls())
	for _, c := range []struct {
		a, b int64
		want int
	}{
		{100, 100, 2}, // calls 90→105 and 95→150
		{106, 140, 1}, // 95→150
		{150, 150, 0}, // 95→150 returned at 150, 150→210 began then
		{190, 205, 1}, // 150→210
	} {
		if got := tl.Blocked(c.a, c.b); got != c.want {
			t.Errorf("Blocked(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestRotate(t *testing.T) {
	s := []int{1, 2, 3}
	if got := Rotate(s, 4); !slices.Equal(got, []int{2, 3, 1}) {
		t.Errorf("Rotate(%v, 4) = %v", s, got)
	}
	if Rotate[int](nil, 1) != nil {
		t.Error("Rotate(nil) is not nil")
	}
}
