package harness

import "slices"

// Outcomes of an acquire call, as Call.Status reports them.
const (
	Acquired  = 0 // the call returned a hold
	Failed    = 1 // the call returned an error before the run stopped
	Cancelled = 2 // the call was still waiting when the run stopped
)

// Call is one acquire call of a worker goroutine: goroutine, outcome, and
// the CLOCK_MONOTONIC times (ns) of the acquire call, acquire return, release
// call and release return (the last two 0 unless Acquired).
type Call [6]int64

// G returns the goroutine's index in its process.
func (c Call) G() int64 { return c[0] }

// Status returns Acquired, Failed or Cancelled.
func (c Call) Status() int64 { return c[1] }

// T0 returns the time of the acquire call.
func (c Call) T0() int64 { return c[2] }

// T1 returns the time the acquire call returned.
func (c Call) T1() int64 { return c[3] }

// T2 returns the time of the release call.
func (c Call) T2() int64 { return c[4] }

// T3 returns the time the release call returned.
func (c Call) T3() int64 { return c[5] }

// Result is a worker's report, one JSON line on its stdout after "RESULT ".
type Result struct {
	Proc  int    `json:"proc"`
	Calls []Call `json:"calls"`
	// RTStart and RTEnd read the library client's round-trip counter at the
	// measured window's start and end.
	RTStart int64 `json:"rtStart"`
	RTEnd   int64 `json:"rtEnd"`
	// Errors counts failed calls by message.
	Errors map[string]int `json:"errors,omitempty"`
}

// ProcCall is a Call with the worker process that made it.
type ProcCall struct {
	Call
	Proc int
}

// Timeline tells how many acquire calls were waiting at a time.
type Timeline struct {
	starts, ends []int64 // sorted
}

// NewTimeline indexes the acquire calls' call and return times.
func NewTimeline(calls []ProcCall) Timeline {
	var t Timeline
	for _, c := range calls {
		t.starts, t.ends = append(t.starts, c.T0()), append(t.ends, c.T1())
	}
	slices.Sort(t.starts)
	slices.Sort(t.ends)
	return t
}

// Blocked returns how many acquire calls began before a and had not
// returned by b: those waiting across [a, b] (exact unless whole calls fit
// inside it). Blocked(t, t) is the number waiting at t.
func (t Timeline) Blocked(a, b int64) int {
	begun, _ := slices.BinarySearch(t.starts, a)
	returned, _ := slices.BinarySearch(t.ends, b+1)
	return begun - returned
}
