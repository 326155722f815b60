package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// point is one run of a contended curve: Procs worker processes of
// Goroutines goroutines, on one lock (Names 0) or each Lock call on one of
// Names names at random.
type point struct {
	Procs      int `json:"procs"`
	Goroutines int `json:"goroutines"`
	Names      int `json:"names,omitempty"`
}

// pointStats is what one library did at one point.
type pointStats struct {
	Lib   string `json:"lib"`
	Point point  `json:"point"`
	Err   string `json:"err,omitempty"`

	Acq       int     `json:"acq"`
	AcqPerSec float64 `json:"acqPerSec"`
	// RTPerAcq: the library clients' round trips ÷ acquisitions;
	// CmdPerAcq: the commands the server ran (inside scripts too, INFO left
	// out) ÷ acquisitions.
	RTPerAcq  float64 `json:"roundTripsPerAcq"`
	CmdPerAcq float64 `json:"serverCommandsPerAcq"`
	// Wait: Lock call → return, of the calls that returned in the window
	// or were still waiting at its end (censored there).
	Wait stats.Dist `json:"-"`
	// Failed and Pending count those calls that failed, and that were still
	// waiting at the window's end.
	Failed  int `json:"failedLockCalls"`
	Pending int `json:"pendingAtEnd"`
	Calls   int `json:"lockCalls"`
}

// procCurve is the points of the processes curve: 1 … 32 processes of 4
// goroutines on one lock.
func procCurve() []point {
	var out []point
	for _, p := range []int{1, 2, 4, 8, 16, 32} {
		out = append(out, point{Procs: p, Goroutines: 4})
	}
	return out
}

// namesCurve is the points of the names curve: 64 goroutines in one process
// on 1 … 10,000 names.
func namesCurve() []point {
	var out []point
	for _, n := range []int{1, 10, 100, 1000, 10000} {
		out = append(out, point{Procs: 1, Goroutines: 64, Names: n})
	}
	return out
}

var runSeq int

// runCurve runs every point with every library, each point starting with
// another library, and returns the statistics (a failed run's carries its
// error).
func runCurve(ctx context.Context, srv *redisserver.Server, selected []libs.Library, pts []point, o options) []*pointStats {
	return harness.Matrix(pts, selected, func(pt point, lib libs.Library) *pointStats {
		t0 := time.Now()
		ps, err := runPoint(ctx, srv, lib, pt, o)
		if err != nil {
			log.Printf("%s %s: %v", pt, lib.Name, err)
			return &pointStats{Lib: lib.Name, Point: pt, Err: err.Error()}
		}
		log.Printf("%-16s %-22s %6.0f acq/s  RT/acq %5.2f  cmds/acq %5.2f  wait p99 %-9s failed %d  (%.1fs)",
			pt, lib.Name, ps.AcqPerSec, ps.RTPerAcq, ps.CmdPerAcq, report.Duration(ps.Wait.P(0.99)), ps.Failed,
			time.Since(t0).Seconds())
		return ps
	})
}

func (p point) String() string {
	if p.Names == 0 {
		return fmt.Sprintf("%d×%d, one lock", p.Procs, p.Goroutines)
	}
	return fmt.Sprintf("%d×%d, %d names", p.Procs, p.Goroutines, p.Names)
}

// runPoint runs one library at one point in worker processes.
func runPoint(ctx context.Context, srv *redisserver.Server, lib libs.Library, pt point, o options) (*pointStats, error) {
	mode := harness.ModeShared
	if pt.Names > 0 {
		mode = harness.NamesMode(pt.Names)
	}
	out, err := harness.Execute(ctx, harness.Run{Procs: pt.Procs, Config: harness.Config{
		Lib: lib.Name, Addr: srv.Addr, Key: harness.Key("scale", lib.Name), Goroutines: pt.Goroutines,
		Hold: o.hold, Warmup: o.Warmup, Duration: o.Duration, Timeout: o.Timeout, Mode: mode,
	}})
	if err != nil {
		return nil, err
	}
	return analyze(lib.Name, pt, out), nil
}

// analyze turns one run into statistics.
func analyze(lib string, pt point, out *harness.Outcome) *pointStats {
	ps := &pointStats{Lib: lib, Point: pt}
	ps.Acq, _ = out.Acquisitions()
	ps.AcqPerSec = float64(ps.Acq) / out.Seconds()
	ps.Wait, ps.Calls, ps.Failed, ps.Pending = out.Waits()
	ps.RTPerAcq, ps.CmdPerAcq, _ = harness.PerAcq(ps.Acq, out.RoundTrips(), out.Commands, out.Scripts)
	return ps
}
