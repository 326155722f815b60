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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
)

type options struct {
	out         string
	quick       bool
	duration    time.Duration
	warmup      time.Duration
	lockTimeout time.Duration
	redisBin    string
	libNames    string
	rounds      int
	cycles      int
	jsonOut     string
	contended   bool
	cases       string
	readLock    bool
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("holdfast-bench: ")
	if harness.ServeWorker(workerEnv, runWorker) {
		return
	}

	var o options
	flag.StringVar(&o.out, "out", "out", "directory for performance.md and img/*.png (make bench-docs passes ../docs)")
	flag.BoolVar(&o.quick, "quick", false, "short run: 1 s windows, fewer uncontended cycles")
	flag.DurationVar(&o.duration, "duration", 0, "measured window of each contended run (default 3s, -quick 1s)")
	flag.DurationVar(&o.warmup, "warmup", 0, "unmeasured start of each contended run (default 500ms, -quick 300ms)")
	flag.DurationVar(&o.lockTimeout, "lock-timeout", 5*time.Second, "deadline of each Lock call")
	flag.StringVar(&o.redisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
	flag.StringVar(&o.libNames, "libs", "", "comma-separated libraries to run (default all): "+strings.Join(catalog().Names(libs.All()), ","))
	flag.IntVar(&o.rounds, "rounds", 0, "uncontended rounds (default 10, -quick 3)")
	flag.IntVar(&o.cycles, "cycles", 0, "uncontended cycles per library per round (default 400, -quick 200)")
	flag.StringVar(&o.jsonOut, "json", "", "also write the summarised results as JSON to this file")
	flag.BoolVar(&o.contended, "contended", true, "run the contended cases (false: PING and uncontended only)")
	flag.BoolVar(&o.readLock, "readlock", true, "run the read-lock throughput rows (needs the holdfast library selected)")
	flag.StringVar(&o.cases, "cases", "", "comma-separated contended cases to run, e.g. 4x4-1ms,1x32-0ms (default all)")
	flag.Parse()
	setDefaults(&o)

	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func setDefaults(o *options) {
	cli.Default(&o.duration, 3*time.Second, time.Second, o.quick)
	cli.Default(&o.warmup, 500*time.Millisecond, 300*time.Millisecond, o.quick)
	cli.Default(&o.rounds, 10, 3, o.quick)
	cli.Default(&o.cycles, 400, 200, o.quick)
	o.redisBin = cli.RedisServer(o.redisBin)
}

// catalog is the libraries this command can run.
func catalog() cli.Catalog[libs.Library] {
	return cli.Catalog[libs.Library]{All: libs.All(), Name: func(l libs.Library) string { return l.Name }, One: "library", Many: "libraries"}
}

// libRow is a library's row in the report's table of libraries.
func libRow(l libs.Library) (name, version, settings string) { return l.Name, l.Version(), l.Settings }

// hasLib reports whether ls holds the library called name.
func hasLib(ls []libs.Library, name string) bool {
	return slices.ContainsFunc(ls, func(l libs.Library) bool { return l.Name == name })
}

func run(o options) error {
	started := time.Now()
	ctx := context.Background()
	selected, srv, err := cli.Start(ctx, o.redisBin, o.libNames, catalog())
	if err != nil {
		return err
	}
	defer srv.Stop()

	res := &results{
		Started:     started.UTC(),
		Env:         report.Machine(srv.Version(), o.redisBin),
		Libs:        selected,
		Duration:    o.duration,
		Warmup:      o.warmup,
		LockTimeout: o.lockTimeout,
		Rounds:      o.rounds,
		Cycles:      o.cycles,
		Quick:       o.quick,
	}

	log.Printf("uncontended: %d rounds × %d cycles per library", o.rounds, o.cycles)
	if res.Uncontended, err = runUncontended(ctx, srv, selected, o.rounds, o.cycles); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}

	if o.readLock && hasLib(selected, libs.Holdfast) {
		log.Printf("read lock: %d rounds of %d rows, %s windows", readLockRounds, len(throughputCases()), o.duration/readLockRounds)
		res.ReadLock = runReadLock(ctx, srv, o)
	}

	cases, err := selectCases(o.cases)
	if err != nil {
		return err
	}
	if o.contended {
		res.Contended = runCases(ctx, srv, selected, cases, o)
	}
	res.Elapsed = time.Since(started)
	return writeReport(res, o, started)
}

// runCases runs every case with every library, each case starting with
// another library, and returns the statistics (a failed run's carries its
// error).
func runCases(ctx context.Context, srv *redisserver.Server, selected []libs.Library, cases []contendedCase, o options) []*runStats {
	var out []*runStats
	for ci, c := range cases {
		for _, lib := range harness.Rotate(selected, ci) {
			t0 := time.Now()
			rs, err := runContended(ctx, srv, lib, c, o)
			if err != nil {
				log.Printf("%s %s: %v", c, lib.Name, err)
				rs = &runStats{Lib: lib.Name, Case: c, Err: err.Error()}
			} else {
				log.Printf("%-10s %-22s %6.0f acq/s  wait p50 %-9s p99 %-9s starved %d  RT/acq %.2f  cmds/acq %.2f  (%.1fs)",
					c, lib.Name, rs.AcqPerSec, report.Duration(rs.Wait.P(0.5)), report.Duration(rs.Wait.P(0.99)), rs.Starved,
					rs.RTPerAcq, rs.CmdPerAcq, time.Since(t0).Seconds())
			}
			out = append(out, rs)
		}
	}
	return out
}

// writeReport writes performance.md and its plots to o.out, and the JSON
// summary if asked.
func writeReport(res *results, o options, started time.Time) error {
	if err := os.MkdirAll(filepath.Join(o.out, "img"), 0o755); err != nil {
		return err
	}
	plots, err := writePlots(res, filepath.Join(o.out, "img"))
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	md := renderMarkdown(res, plots)
	if err := os.WriteFile(filepath.Join(o.out, "performance.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if o.jsonOut != "" {
		if err := cli.WriteJSON(o.jsonOut, res.summary()); err != nil {
			return err
		}
	}
	log.Printf("wrote %s and %d plots in %s (%.0f s)", filepath.Join(o.out, "performance.md"), len(plots),
		filepath.Join(o.out, "img"), time.Since(started).Seconds())
	return nil
}

// selectCases filters contendedCases by names like "4x4-1ms".
func selectCases(names string) ([]contendedCase, error) {
	return cli.Catalog[contendedCase]{All: contendedCases(), Name: contendedCase.flagName, One: "case",
		Hint: "cases look like 1x2-0ms, 4x4-1ms"}.Select(names)
}
