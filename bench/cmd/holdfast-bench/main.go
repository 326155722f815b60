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
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
)

// workerEnv carries a worker's JSON configuration; its presence makes the
// binary run as a worker.
const workerEnv = "HOLDFAST_BENCH_WORKER"

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
	if cfg := os.Getenv(workerEnv); cfg != "" {
		if err := runWorker(cfg); err != nil {
			log.Fatalf("worker: %v", err)
		}
		return
	}

	var o options
	flag.StringVar(&o.out, "out", "out", "directory for performance.md and img/*.png (make bench-docs passes ../docs)")
	flag.BoolVar(&o.quick, "quick", false, "short run: 1 s windows, fewer uncontended cycles")
	flag.DurationVar(&o.duration, "duration", 0, "measured window of each contended run (default 3s, -quick 1s)")
	flag.DurationVar(&o.warmup, "warmup", 0, "unmeasured start of each contended run (default 500ms, -quick 300ms)")
	flag.DurationVar(&o.lockTimeout, "lock-timeout", 5*time.Second, "deadline of each Lock call")
	flag.StringVar(&o.redisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
	flag.StringVar(&o.libNames, "libs", "", "comma-separated libraries to run (default all): "+strings.Join(libNames(libs.All()), ","))
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
	pick := func(d *time.Duration, full, quick time.Duration) {
		if *d == 0 {
			*d = full
			if o.quick {
				*d = quick
			}
		}
	}
	pick(&o.duration, 3*time.Second, time.Second)
	pick(&o.warmup, 500*time.Millisecond, 300*time.Millisecond)
	if o.rounds == 0 {
		o.rounds = 10
		if o.quick {
			o.rounds = 3
		}
	}
	if o.cycles == 0 {
		o.cycles = 400
		if o.quick {
			o.cycles = 200
		}
	}
	if o.redisBin == "" {
		o.redisBin = "/usr/bin/redis-server"
		if p, err := exec.LookPath("redis-server"); err == nil {
			o.redisBin = p
		}
	}
}

func libNames(ls []libs.Library) []string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names
}

// hasLib reports whether ls holds the library called name.
func hasLib(ls []libs.Library, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

func selectLibs(names string) ([]libs.Library, error) {
	if names == "" {
		return libs.All(), nil
	}
	var out []libs.Library
	for n := range strings.SplitSeq(names, ",") {
		l, ok := libs.ByName(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("unknown library %q (have %s)", n, strings.Join(libNames(libs.All()), ", "))
		}
		out = append(out, l)
	}
	return out, nil
}

func run(o options) error {
	started := time.Now()
	selected, err := selectLibs(o.libNames)
	if err != nil {
		return err
	}
	ctx := context.Background()
	srv, err := redisserver.Start(ctx, o.redisBin)
	if err != nil {
		return err
	}
	defer srv.Stop()
	log.Printf("redis-server %s on %s; libraries: %s", srv.Version(), srv.Addr, strings.Join(libNames(selected), ", "))

	res := &results{
		Started:     started.UTC(),
		Env:         environment(srv.Version(), o.redisBin),
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
	if !o.contended {
		cases = nil
	}
	for ci, c := range cases {
		order := rotate(selected, ci)
		for _, lib := range order {
			t0 := time.Now()
			rs, err := runContended(ctx, srv, lib, c, o)
			if err != nil {
				log.Printf("%s %s: %v", c, lib.Name, err)
				rs = &runStats{Lib: lib.Name, Case: c, Err: err.Error()}
			} else {
				log.Printf("%-10s %-22s %6.0f acq/s  wait p50 %-9s p99 %-9s starved %d  RT/acq %.2f  cmds/acq %.2f  (%.1fs)",
					c, lib.Name, rs.AcqPerSec, fmtDur(rs.Wait.P(0.5)), fmtDur(rs.Wait.P(0.99)), rs.Starved,
					rs.RTPerAcq, rs.CmdPerAcq, time.Since(t0).Seconds())
			}
			res.Contended = append(res.Contended, rs)
		}
	}
	res.Elapsed = time.Since(started)

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
		b, err := json.MarshalIndent(res.summary(), "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	log.Printf("wrote %s and %d plots in %s (%.0f s)", filepath.Join(o.out, "performance.md"), len(plots),
		filepath.Join(o.out, "img"), time.Since(started).Seconds())
	return nil
}

// selectCases filters contendedCases by names like "4x4-1ms".
func selectCases(names string) ([]contendedCase, error) {
	all := contendedCases()
	if names == "" {
		return all, nil
	}
	var out []contendedCase
	for n := range strings.SplitSeq(names, ",") {
		found := false
		for _, c := range all {
			if c.flagName() == strings.TrimSpace(n) {
				out, found = append(out, c), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q (cases look like 1x2-0ms, 4x4-1ms)", n)
		}
	}
	return out, nil
}

// rotate returns ls rotated left by k, so each case starts with another library.
func rotate(ls []libs.Library, k int) []libs.Library {
	if len(ls) == 0 {
		return nil
	}
	k %= len(ls)
	return append(append([]libs.Library{}, ls[k:]...), ls[:k]...)
}
