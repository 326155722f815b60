package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// contendedCase is one contention setting.
type contendedCase struct {
	Procs      int           `json:"procs"`
	Goroutines int           `json:"goroutines"` // per process
	CS         time.Duration `json:"cs"`         // critical section
}

func (c contendedCase) String() string {
	return fmt.Sprintf("%d×%d, %d ms", c.Procs, c.Goroutines, c.CS.Milliseconds())
}

func (c contendedCase) flagName() string {
	return fmt.Sprintf("%dx%d-%dms", c.Procs, c.Goroutines, c.CS.Milliseconds())
}

// Total is the number of goroutines over all processes.
func (c contendedCase) Total() int { return c.Procs * c.Goroutines }

// contendedCases returns the contended cases: 1×2, 1×8, 1×32 and 4×4 with
// 1 ms and 0 ms critical sections, and 4×8 (32 goroutines over 4 processes,
// for the fair lock's spread) with 1 ms.
func contendedCases() []contendedCase {
	var out []contendedCase
	for _, cs := range []time.Duration{time.Millisecond, 0} {
		for _, pg := range [][2]int{{1, 2}, {1, 8}, {1, 32}, {4, 4}} {
			out = append(out, contendedCase{Procs: pg[0], Goroutines: pg[1], CS: cs})
		}
		if cs > 0 {
			out = append(out, contendedCase{Procs: 4, Goroutines: 8, CS: cs})
		}
	}
	return out
}

// runStats is what one library did in one contended case.
type runStats struct {
	Lib  string        `json:"lib"`
	Case contendedCase `json:"case"`
	Err  string        `json:"err,omitempty"`

	Acq       int     `json:"acq"`
	AcqPerSec float64 `json:"acqPerSec"`
	// Handoff: Unlock return → Lock return of another goroutine that was
	// already waiting; HandoffX: the same, to a goroutine of another process.
	Handoff  stats.Dist `json:"-"`
	HandoffX stats.Dist `json:"-"`
	// ReleaseToWaiter: Unlock return while others waited → Lock return of
	// one of those waiters (however many re-acquisitions by others between).
	ReleaseToWaiter stats.Dist `json:"-"`
	// Wait: Lock call → return for the Lock calls begun in the window that
	// could not acquire at once (see analyze).
	Wait      stats.Dist `json:"-"`
	PerG      []int      `json:"perGoroutine"`
	Starved   int        `json:"starved"`
	RTPerAcq  float64    `json:"roundTripsPerAcq"`
	CmdPerAcq float64    `json:"serverCommandsPerAcq"`
	ScrPerAcq float64    `json:"scriptsPerAcq"`
	Calls     int        `json:"lockCalls"` // begun in the window
	Failed    int        `json:"failedLockCalls"`
	// ContestedReleases: acquisitions whose previous holder released while
	// another goroutine was waiting; Barged: those that went back to the
	// releasing goroutine all the same.
	ContestedReleases int            `json:"contestedReleases"`
	Barged            int            `json:"barged"`
	Pending           int            `json:"pendingAtEnd"`
	Overlaps          int            `json:"overlaps"`
	Errors            map[string]int `json:"errors,omitempty"`
	WindowSecs        float64        `json:"windowSeconds"`
}

// runContended runs one library in one case in worker processes and
// returns the statistics of the measured window.
func runContended(ctx context.Context, srv *redisserver.Server, lib libs.Library, c contendedCase, o options) (*runStats, error) {
	out, err := runWorkers(ctx, srv, lib, c, harness.ModeShared, o)
	if err != nil {
		return nil, err
	}
	return analyze(lib.Name, c, out), nil
}

// runWorkers runs c.Procs worker processes of c.Goroutines goroutines each,
// looping on locks of lib as mode says, and collects their results.
func runWorkers(ctx context.Context, srv *redisserver.Server, lib libs.Library, c contendedCase, mode string, o options) (*harness.Outcome, error) {
	return harness.Execute(ctx, harness.Run{Procs: c.Procs, Config: harness.Config{
		Lib: lib.Name, Addr: srv.Addr, Key: harness.Key("bench", lib.Name), Goroutines: c.Goroutines, Hold: c.CS,
		Warmup: o.Warmup, Duration: o.Duration, Timeout: o.Timeout, Mode: mode,
	}})
}

// sameCall reports whether a and b are the same call.
func sameCall(a, b harness.ProcCall) bool {
	return a.Proc == b.Proc && a.G() == b.G() && a.T0() == b.T0()
}

// analyze turns one run into statistics. Every time is CLOCK_MONOTONIC, read
// in the worker processes on one host, so all processes share one time line.
func analyze(lib string, c contendedCase, out *harness.Outcome) *runStats {
	rs := &runStats{Lib: lib, Case: c, Errors: map[string]int{}}
	rs.WindowSecs = out.Seconds()
	out.AddErrors(rs.Errors)
	rs.Acq, rs.PerG = out.Acquisitions()
	calls := out.Calls()
	var acqs []harness.ProcCall
	for _, call := range calls {
		if call.Status() == harness.Acquired {
			acqs = append(acqs, call)
		}
	}
	slices.SortFunc(acqs, func(a, b harness.ProcCall) int { return cmp.Compare(a.T1(), b.T1()) })
	rs.Wait = waiterWaits(rs, out, acqs)
	rs.handoffs(out, acqs, harness.NewTimeline(calls))
	rs.Starved = stats.Starved(rs.PerG)
	rs.AcqPerSec = float64(rs.Acq) / rs.WindowSecs
	rs.RTPerAcq, rs.CmdPerAcq, rs.ScrPerAcq = harness.PerAcq(rs.Acq, out.RoundTrips(), out.Commands, out.Scripts)
	return rs
}

// waiterWaits counts the Lock calls of the window in rs and returns the
// waits of those that could not acquire at once: the lock was held when they
// began, or another acquisition returned between their call and their
// return, or they did not acquire. acqs are the acquisitions by Lock return.
func waiterWaits(rs *runStats, out *harness.Outcome, acqs []harness.ProcCall) stats.Dist {
	calls, failed, pending := out.WindowCalls()
	rs.Calls, rs.Failed, rs.Pending = len(calls), failed, pending
	var waits []int64
	for _, call := range calls {
		i, _ := slices.BinarySearchFunc(acqs, call.T0()+1, func(a harness.ProcCall, t int64) int { return cmp.Compare(a.T1(), t) })
		held := i > 0 && acqs[i-1].T3() > call.T0()
		lost := i < len(acqs) && !sameCall(acqs[i], call.ProcCall) && acqs[i].T1() < call.End
		if held || lost || call.Status() != harness.Acquired {
			waits = append(waits, call.Wait())
		}
	}
	return stats.NewDist(waits)
}

// handoffs fills in the hand-offs, the releases to waiters, the barging and
// the overlaps from the acquisitions acqs (by Lock return).
func (rs *runStats) handoffs(out *harness.Outcome, acqs []harness.ProcCall, tl harness.Timeline) {
	var ho, hox, r2w []int64
	for i := 1; i < len(acqs); i++ {
		prev, next := acqs[i-1], acqs[i]
		if !out.InWindow(next.T1()) {
			continue
		}
		if next.T1() < prev.T2() {
			rs.Overlaps++ // next held the lock before prev began to unlock
		}
		samePG := prev.Proc == next.Proc && prev.G() == next.G()
		if t := prev.T3(); tl.Blocked(t, t) > 0 {
			rs.ContestedReleases++
			if samePG {
				rs.Barged++
			}
			r2w = append(r2w, releaseToWaiter(acqs, i, out.WE))
		}
		if samePG || next.T0() >= prev.T3() {
			continue // re-acquired by the same goroutine, or nobody was waiting
		}
		d := next.T1() - prev.T3()
		ho = append(ho, d)
		if prev.Proc != next.Proc {
			hox = append(hox, d)
		}
	}
	rs.Handoff, rs.HandoffX = stats.NewDist(ho), stats.NewDist(hox)
	rs.ReleaseToWaiter = stats.NewDist(r2w)
}

// releaseToWaiter returns the time from acqs[i-1]'s Unlock return until a
// goroutine that was waiting then acquires, censored at we.
func releaseToWaiter(acqs []harness.ProcCall, i int, we int64) int64 {
	prev, t := acqs[i-1], acqs[i-1].T3()
	for k := i; k < len(acqs); k++ {
		a := acqs[k]
		if a.T0() < t && (a.Proc != prev.Proc || a.G() != prev.G()) {
			return a.T1() - t
		} else if a.T1() >= we {
			break
		}
	}
	return we - t
}

// spread returns the most and fewest acquisitions of one goroutine in the
// window.
func (rs *runStats) spread() (maxG, minG int) {
	return stats.Spread(rs.PerG)
}
