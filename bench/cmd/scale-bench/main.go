// Command scale-bench measures how holdfast's costs grow, side by side with
// redsync, bsm/redislock and rueidislock where they apply, on a private
// redis-server, and writes scale.md, its plots (img/scale-*.png), and the
// section "How cost grows" of performance.md when that file is in the
// output directory.
//
// Four curves, in one run:
//
//   - processes on one lock: 1, 2, 4, 8, 16, 32 worker processes × 4
//     goroutines, 1 ms hold: acquisitions/s, the clients' round trips and
//     the server's commands per acquisition, wait p99;
//   - names: 64 goroutines in one process, each Lock call on one of 1 …
//     10,000 names at random, 1 ms hold: the same figures;
//   - renewals: 1 … 100,000 holds of one client: per renewal round, the
//     client's round trips, the server's commands, script time and CPU time,
//     and the client's CPU time (holdfast's watchdog; rueidislock's
//     per-lock extension, up to -max-peer-holds);
//   - memory: heap, stack and goroutines per hold (10,000 holds) and per
//     waiting Lock call (1,000 waiters, one per held lock).
//
// The contended curves run in worker processes: the binary re-executes
// itself (see package harness).
//
// Usage (from bench/):
//
//	go run ./cmd/scale-bench -out out        # about 7 minutes
//	go run ./cmd/scale-bench -quick -out /tmp/sb -curves procs,names
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/link"
	"github.com/holdfast-go/holdfast/bench/internal/report"
)

type options struct {
	cli.Flags
	hold          time.Duration
	curves        string
	maxHolds      int
	maxPeerHolds  int
	renewInterval time.Duration
	renewRounds   int
	memHolds      int
	memWaiters    int
}

// The curves, as -curves names them.
const (
	curveProcs    = "procs"
	curveNames    = "names"
	curveRenewals = "renewals"
	curveMemory   = "memory"
)

var allCurves = []string{curveProcs, curveNames, curveRenewals, curveMemory}

func main() {
	var o options
	o.Setup("scale-bench", "scale.md, img/scale-*.png and the section of performance.md (make bench-docs passes ../docs)",
		"1 s windows, fewer renewal rounds, up to 10,000 holds", "results", harness.ServeLocks)
	o.Contended("point", cli.Deadline{Flag: "lock-timeout", Call: "Lock", Default: 5 * time.Second},
		"libraries (default: holdfast and the peers)", cli.Libraries(scaleLibs()).AllNames())
	flag.DurationVar(&o.hold, "hold", time.Millisecond, "how long each acquisition of the contended curves holds")
	flag.StringVar(&o.curves, "curves", "", "comma-separated curves to run (default all): "+strings.Join(allCurves, ","))
	o.IntVar(&o.maxHolds, "max-holds", 100000, 10000, "largest hold count of the renewal curve")
	flag.IntVar(&o.maxPeerHolds, "max-peer-holds", 10000, "largest hold count for rueidislock, which runs a goroutine and a timer per hold")
	flag.DurationVar(&o.renewInterval, "renew-interval", time.Second, "holdfast's renew interval in the renewal curve (lease: 3 intervals)")
	o.IntVar(&o.renewRounds, "renew-rounds", 3, 2, "renewal rounds measured per point")
	flag.IntVar(&o.memHolds, "mem-holds", 10000, "holds taken for the memory per hold")
	flag.IntVar(&o.memWaiters, "mem-waiters", 1000, "waiting Lock calls for the memory per waiter")
	o.Run(func(ctx context.Context) error { return run(ctx, o) })
}

// scaleLibs is holdfast's Mutex and FairMutex (whose waiters queue in
// Redis: the other answer to many processes on one lock) and the peers.
func scaleLibs() []libs.Library {
	var out []libs.Library
	for _, l := range libs.All() {
		if l.Name != libs.HoldfastSpin {
			out = append(out, l)
		}
	}
	return out
}

// results is everything one run measured.
type results struct {
	Started  time.Time      `json:"started"`
	Elapsed  time.Duration  `json:"elapsed"`
	Env      report.Facts   `json:"env"`
	Link     link.Info      `json:"link"`
	Libs     []libs.Library `json:"-"`
	Quick    bool           `json:"quick"`
	Opts     options        `json:"-"`
	Procs    []*pointStats  `json:"procs,omitempty"`
	Names    []*pointStats  `json:"names,omitempty"`
	Renewals []*renewStats  `json:"renewals,omitempty"`
	MemHolds []*memStats    `json:"memoryPerHold,omitempty"`
	MemWait  []*memStats    `json:"memoryPerWaiter,omitempty"`
}

func run(ctx context.Context, o options) error {
	curves, err := cli.Catalog[string]{All: allCurves, Name: func(s string) string { return s }, One: "curve", Many: "curves"}.Select(o.curves)
	if err != nil {
		return err
	}
	selected, srv, err := cli.Start(&o.Flags, cli.Libraries(scaleLibs()))
	if err != nil {
		return err
	}
	defer srv.Stop()
	res := &results{Started: srv.Started, Env: srv.Env, Link: srv.Link, Libs: selected, Quick: o.Quick, Opts: o}
	if slices.Contains(curves, curveProcs) {
		log.Printf("processes on one lock: %d points × %d libraries, %s windows", len(procCurve()), len(selected), o.Duration)
		res.Procs = runCurve(ctx, srv.Server, selected, procCurve(), o)
	}
	if slices.Contains(curves, curveNames) {
		log.Printf("names: %d points × %d libraries, %s windows", len(namesCurve()), len(selected), o.Duration)
		res.Names = runCurve(ctx, srv.Server, selected, namesCurve(), o)
	}
	if slices.Contains(curves, curveRenewals) {
		log.Printf("renewals: up to %d holds", o.maxHolds)
		res.Renewals = runRenewals(ctx, srv.Server, selected, o)
	}
	if slices.Contains(curves, curveMemory) {
		log.Printf("memory: %d holds, %d waiters per library", o.memHolds, o.memWaiters)
		res.MemHolds, res.MemWait = runMemory(ctx, srv.Server, selected, o)
	}
	res.Elapsed = srv.Elapsed()
	if err := writeReport(res, o.Output()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return o.Output().WriteJSON(res)
}
