package main

import (
	"context"
	"log"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// readLockRounds is how many times each read-lock throughput row runs, the
// rows in turn (rotating the order); each run's window is the contended
// window ÷ readLockRounds.
const readLockRounds = 2

// throughputCase is one row of the read-lock throughput table: goroutines of
// one worker process looping Lock, Unlock with no critical section.
type throughputCase struct {
	Name       string `json:"name"`
	Mode       string `json:"mode"` // harness.ModeRead, harness.ModeShared or harness.ModeDistinct
	Goroutines int    `json:"goroutines"`
}

// Names of the read-lock throughput rows.
const (
	tpRead8    = "ReadMutex, 8 goroutines on one RWMutex"
	tpMutex1   = "Mutex, 1 goroutine on one name"
	tpMutex8x8 = "Mutex, 8 goroutines on 8 names"
)

// throughputCases returns the read-lock throughput rows: the read side shared
// by 8 goroutines, and the Mutex cycles it is compared with.
func throughputCases() []throughputCase {
	return []throughputCase{
		{Name: tpRead8, Mode: harness.ModeRead, Goroutines: 8},
		{Name: tpMutex1, Mode: harness.ModeShared, Goroutines: 1},
		{Name: tpMutex8x8, Mode: harness.ModeDistinct, Goroutines: 8},
	}
}

// throughputStats is what one throughput row did over its runs.
type throughputStats struct {
	Case throughputCase `json:"case"`
	Err  string         `json:"err,omitempty"`

	Acq        int     `json:"acq"`
	WindowSecs float64 `json:"windowSeconds"` // summed over the runs
	AcqPerSec  float64 `json:"acqPerSec"`
	// Cycle: Lock call → Unlock return of the acquisitions whose Lock
	// returned in a window.
	Cycle     stats.Dist     `json:"-"`
	PerG      []int          `json:"perGoroutine"` // summed over the runs
	RT        int64          `json:"roundTrips"`
	Cmds      int64          `json:"serverCommands"`
	Scripts   int64          `json:"scripts"`
	Failed    int            `json:"failedLockCalls"`
	Errors    map[string]int `json:"errors,omitempty"`
	RTPerAcq  float64        `json:"roundTripsPerAcq"`
	CmdPerAcq float64        `json:"serverCommandsPerAcq"`
	ScrPerAcq float64        `json:"scriptsPerAcq"`
}

// runReadLock runs the throughput rows with holdfast's library, each
// readLockRounds times, the rows in turn, and sums each row's runs.
func runReadLock(ctx context.Context, srv *redisserver.Server, o options) []*throughputStats {
	lib, ok := libs.ByName(libs.Holdfast)
	if !ok {
		return nil
	}
	ro := o
	ro.Duration = o.Duration / readLockRounds
	cases := throughputCases()
	out := make([]*throughputStats, len(cases))
	cycles := make([][]int64, len(cases))
	for i, tc := range cases {
		out[i] = &throughputStats{Case: tc, PerG: make([]int, tc.Goroutines), Errors: map[string]int{}}
	}
	for round := range readLockRounds {
		for k := range cases {
			i := (k + round) % len(cases)
			ts, tc := out[i], cases[i]
			if ts.Err != "" {
				continue
			}
			t0 := time.Now()
			out, err := runWorkers(ctx, srv, lib, contendedCase{Procs: 1, Goroutines: tc.Goroutines}, tc.Mode, ro)
			if err != nil {
				log.Printf("read lock %s: %v", tc.Name, err)
				ts.Err = err.Error()
				continue
			}
			n := ts.add(out, &cycles[i])
			log.Printf("read lock  %-40s %6.0f acq/s  (%.1fs)", tc.Name, float64(n)/out.Seconds(),
				time.Since(t0).Seconds())
		}
	}
	for i, ts := range out {
		ts.Cycle = stats.NewDist(cycles[i])
		if ts.WindowSecs > 0 {
			ts.AcqPerSec = float64(ts.Acq) / ts.WindowSecs
		}
		ts.RTPerAcq, ts.CmdPerAcq, ts.ScrPerAcq = harness.PerAcq(ts.Acq, ts.RT, ts.Cmds, ts.Scripts)
	}
	return out
}

// add sums one run into ts, appends its cycle times to cycles and returns
// the run's acquisitions.
func (ts *throughputStats) add(out *harness.Outcome, cycles *[]int64) int {
	ts.WindowSecs += out.Seconds()
	ts.Cmds += out.Commands
	ts.Scripts += out.Scripts
	ts.RT += out.RoundTrips()
	out.AddErrors(ts.Errors)
	n, perG := out.Acquisitions()
	for g, k := range perG {
		ts.PerG[g] += k
	}
	for _, call := range out.Calls() {
		if !out.InWindow(call.T1()) {
			continue
		}
		switch call.Status() {
		case harness.Acquired:
			*cycles = append(*cycles, call.T3()-call.T0())
		case harness.Failed:
			ts.Failed++
		}
	}
	ts.Acq += n
	return n
}

// throughput returns the throughput row called name, if it ran.
func (r *results) throughput(name string) *throughputStats {
	for _, ts := range r.ReadLock {
		if ts.Case.Name == name && ts.Err == "" && ts.Acq > 0 {
			return ts
		}
	}
	return nil
}
