// Command holdfast-bench benchmarks holdfast's Mutex side by side with
// redsync, bsm/redislock and rueidislock on a private redis-server, with
// holdfast's SpinMutex and FairMutex beside them, and writes
// docs/performance.md and its plots.
//
// It measures, in one run and interleaving the libraries so that machine
// drift hits all alike: PING (the yardstick), uncontended Lock+Unlock (and
// holdfast's TryLock and reentrant variants), with per-cycle server time,
// client CPU and allocations from a separate batch per row; the throughput
// of 8 goroutines sharing one RWMutex's read side against Mutex cycles of 1
// goroutine and of 8 goroutines on 8 names; and contended runs with 1×2, 1×8,
// 1×32 goroutines in one process and 4 processes × 4 goroutines, with 0 and
// 1 ms critical sections, and 4 processes × 8 goroutines with 1 ms. The
// multi-process cases (and, for uniformity, every contended case and the
// read-lock rows) run in worker processes: the binary re-executes itself.
//
// Usage (from bench/):
//
//	go run ./cmd/holdfast-bench            # full run, < 5 minutes, writes ../docs
//	go run ./cmd/holdfast-bench -quick -out /tmp/hb
//	go run -tags noholdfast ./cmd/holdfast-bench -quick   # competitors only
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/plotting"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
)

type options struct {
	cli.Flags
	contended bool
	cases     string
	readLock  bool
}

func main() {
	var o options
	o.Setup("holdfast-bench", "performance.md and img/*.png (make bench-docs passes ../docs)", "1 s windows, fewer uncontended cycles",
		"summarised results", harness.ServeLocks)
	o.Contended("run", cli.Deadline{Flag: "lock-timeout", Call: "Lock", Default: 5 * time.Second},
		"libraries to run (default all)", cli.Libraries(libs.All()).AllNames())
	o.Uncontended("rounds", "library per round", 400, 200)
	flag.BoolVar(&o.contended, "contended", true, "run the contended cases (false: PING and uncontended only)")
	flag.BoolVar(&o.readLock, "readlock", true, "run the read-lock throughput rows (needs the holdfast library selected)")
	flag.StringVar(&o.cases, "cases", "", "comma-separated contended cases to run, e.g. 4x4-1ms,1x32-0ms (default all)")
	o.Run(func(ctx context.Context) error { return run(ctx, o) })
}

// hasLib reports whether ls holds the library called name.
func hasLib(ls []libs.Library, name string) bool {
	return slices.ContainsFunc(ls, func(l libs.Library) bool { return l.Name == name })
}

func run(ctx context.Context, o options) error {
	selected, srv, err := cli.Start(&o.Flags, cli.Libraries(libs.All()))
	if err != nil {
		return err
	}
	defer srv.Stop()
	res := &results{Started: srv.Started, Env: srv.Env, Link: srv.Link, Libs: selected, Opts: o}

	log.Printf("uncontended: %d rounds × %d cycles per library", o.Rounds, o.Cycles)
	if res.Uncontended, err = runUncontended(ctx, srv.Server, selected, o.Rounds, o.Cycles); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}

	if o.readLock && hasLib(selected, libs.Holdfast) {
		log.Printf("read lock: %d rounds of %d rows, %s windows", readLockRounds, len(throughputCases()), o.Duration/readLockRounds)
		res.ReadLock = runReadLock(ctx, srv.Server, o)
	}

	cases, err := selectCases(o.cases)
	if err != nil {
		return err
	}
	if o.contended {
		cpu0, linkCPU0, t0 := harness.ProcessCPU(), srv.LinkCPU(), time.Now()
		res.Contended = harness.Matrix(cases, selected, func(c contendedCase, lib libs.Library) *runStats {
			return runCase(ctx, srv.Server, lib, c, o)
		})
		// The coordinator's CPU over the contended runs (starting workers,
		// INFO, the analysis) and the link process's, which every byte of
		// the workers crosses.
		log.Printf("contended: coordinator CPU %s, link process CPU %s (link %s) in %.1f s",
			harness.ProcessCPU()-cpu0, srv.LinkCPU()-linkCPU0, srv.Link.Profile, time.Since(t0).Seconds())
	}
	res.Elapsed = srv.Elapsed()
	return writeReport(res, o.Output())
}

// runCase runs lib in case c and returns the statistics (a failed run's
// carries its error).
func runCase(ctx context.Context, srv *redisserver.Server, lib libs.Library, c contendedCase, o options) *runStats {
	t0 := time.Now()
	rs, err := runContended(ctx, srv, lib, c, o)
	if err != nil {
		log.Printf("%s %s: %v", c, lib.Name, err)
		return &runStats{Lib: lib.Name, Case: c, Err: err.Error()}
	}
	log.Printf("%-10s %-22s %6.0f acq/s  wait p50 %-9s p99 %-9s starved %d  RT/acq %.2f  cmds/acq %.2f  (%.1fs)",
		c, lib.Name, rs.AcqPerSec, report.Duration(rs.Wait.P(0.5)), report.Duration(rs.Wait.P(0.99)), rs.Starved,
		rs.RTPerAcq, rs.CmdPerAcq, time.Since(t0).Seconds())
	return rs
}

// writeReport writes performance.md and its plots, and the JSON summary if
// asked.
func writeReport(res *results, out report.Output) error {
	plots, err := report.Plots(out, func(dir string) ([]plotting.Ref, error) { return writePlots(res, dir) })
	if err != nil {
		return err
	}
	path, err := out.Write("performance.md", renderMarkdown(res, plots))
	if err != nil {
		return err
	}
	if err := out.WriteJSON(res.summary()); err != nil {
		return err
	}
	out.Wrote(path, len(plots), res.Elapsed)
	return nil
}

// selectCases filters contendedCases by names like "4x4-1ms".
func selectCases(names string) ([]contendedCase, error) {
	return cli.Catalog[contendedCase]{All: contendedCases(), Name: contendedCase.flagName, One: "case",
		Hint: "cases look like 1x2-0ms, 4x4-1ms"}.Select(names)
}
