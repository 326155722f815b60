// Command semaphore-bench benchmarks holdfast's Semaphore and
// ExpirableSemaphore against holdfast's Mutex, a PING round trip and the
// Redis semaphore Go projects write by hand (a polling one, see
// internal/sems/polling.go), on a private redis-server, and writes
// semaphore.md.
//
// It measures, in one run:
//
//   - uncontended: one goroutine's Acquire(1)+Release of a free permit per
//     semaphore, holdfast's Mutex Lock+Unlock and PING, interleaved op by op,
//     with client round trips, server commands and allocations per op;
//   - contended: P permits (4), processes × goroutines (4 × 8) looping
//     Acquire(1), a fixed hold (1 ms), Release, in worker processes (the
//     binary re-executes itself), each library in turn and in rotating order
//     over the rounds: waiter wait, idle permits while someone waits,
//     starvation; then one more round per library under a MONITOR feed,
//     which gives the server's own free-permit time line to check the idle
//     figures against.
//
// Usage (from bench/):
//
//	go run ./cmd/semaphore-bench -out out        # about 1.5 minutes
//	go run ./cmd/semaphore-bench -quick -out /tmp/sb
//	go run -tags noholdfast ./cmd/semaphore-bench -quick   # the peers only
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

type options struct {
	out            string
	jsonOut        string
	quick          bool
	permits        int
	procs          int
	goroutines     int
	hold           time.Duration
	duration       time.Duration
	warmup         time.Duration
	rounds         int
	monitor        bool
	uncRounds      int
	cycles         int
	acquireTimeout time.Duration
	libNames       string
	redisBin       string
	contended      bool
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("semaphore-bench: ")
	if harness.ServeWorker(workerEnv, runWorker) {
		return
	}
	var o options
	flag.StringVar(&o.out, "out", "out", "directory for semaphore.md")
	flag.StringVar(&o.jsonOut, "json", "", "also write the summarised results as JSON to this file")
	flag.BoolVar(&o.quick, "quick", false, "short run: 1 s windows, 1 round, fewer uncontended cycles")
	flag.IntVar(&o.permits, "permits", 4, "permits of the contended semaphore")
	flag.IntVar(&o.procs, "procs", 4, "worker processes of the contended runs")
	flag.IntVar(&o.goroutines, "goroutines", 8, "goroutines per worker process")
	flag.DurationVar(&o.hold, "hold", time.Millisecond, "how long each acquisition holds its permit (time.Sleep)")
	flag.DurationVar(&o.duration, "duration", 0, "measured window of each contended run (default 3s, -quick 1s)")
	flag.DurationVar(&o.warmup, "warmup", 0, "unmeasured start of each contended run (default 500ms, -quick 300ms)")
	flag.IntVar(&o.rounds, "rounds", 0, "contended rounds per library, merged (default 3, -quick 1)")
	flag.BoolVar(&o.monitor, "monitor", true, "one more contended round per library under MONITOR (server-side idle check)")
	flag.IntVar(&o.uncRounds, "unc-rounds", 0, "uncontended rounds (default 10, -quick 3)")
	flag.IntVar(&o.cycles, "cycles", 0, "uncontended cycles per row per round (default 400, -quick 200)")
	flag.DurationVar(&o.acquireTimeout, "acquire-timeout", 10*time.Second, "deadline of each Acquire call")
	flag.StringVar(&o.libNames, "libs", "", "comma-separated semaphores to run (default all): "+strings.Join(catalog().Names(sems.All()), ","))
	flag.StringVar(&o.redisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
	flag.BoolVar(&o.contended, "contended", true, "run the contended scenario")
	flag.Parse()
	setDefaults(&o)
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func setDefaults(o *options) {
	cli.Default(&o.duration, 3*time.Second, time.Second, o.quick)
	cli.Default(&o.warmup, 500*time.Millisecond, 300*time.Millisecond, o.quick)
	cli.Default(&o.rounds, 3, 1, o.quick)
	cli.Default(&o.uncRounds, 10, 3, o.quick)
	cli.Default(&o.cycles, 400, 200, o.quick)
	o.redisBin = cli.RedisServer(o.redisBin)
}

// catalog is the semaphores this command can run.
func catalog() cli.Catalog[sems.Library] {
	return cli.Catalog[sems.Library]{All: sems.All(), Name: func(l sems.Library) string { return l.Name }, One: "semaphore", Many: "semaphores"}
}

// libRow is a semaphore's row in the report's table of semaphores.
func libRow(l sems.Library) (name, version, settings string) { return l.Name, l.Version(), l.Settings }

func run(o options) error {
	started := time.Now()
	ctx := context.Background()
	selected, srv, err := cli.Start(ctx, o.redisBin, o.libNames, catalog())
	if err != nil {
		return err
	}
	defer srv.Stop()
	res := &results{Started: started.UTC(), Opts: o, Libs: selected, Env: report.Machine(srv.Version(), o.redisBin).Without("OS"),
		Contended: map[string]*runStats{}, Monitored: map[string]*runStats{}}

	log.Printf("uncontended: %d rounds × %d cycles per row", o.uncRounds, o.cycles)
	if res.Uncontended, err = runUncontended(ctx, srv, selected, o.uncRounds, o.cycles); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}

	if o.contended {
		runRounds(ctx, srv, selected, res, o)
	}
	res.Elapsed = time.Since(started)

	md := renderMarkdown(res)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.out, "semaphore.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	if o.jsonOut != "" {
		if err := cli.WriteJSON(o.jsonOut, res.summary()); err != nil {
			return err
		}
	}
	fmt.Print(renderTables(res))
	log.Printf("wrote %s (%.0f s)", path, time.Since(started).Seconds())
	return nil
}

// runRounds runs the contended rounds, each library in turn in an order
// rotating from round to round, and merges each library's rounds into
// res.Contended; the MONITOR round, if any, goes to res.Monitored.
func runRounds(ctx context.Context, srv *redisserver.Server, selected []sems.Library, res *results, o options) {
	total := o.rounds
	if o.monitor {
		total++
	}
	for round := range total {
		monitor := round == o.rounds
		dst := res.Contended
		if monitor {
			dst = res.Monitored
		}
		for _, lib := range harness.Rotate(selected, round) {
			runRound(ctx, srv, lib, round, monitor, dst, o)
		}
	}
}

// runRound runs lib once, logs its figures and merges them into dst; a
// failed round marks the library failed in dst.
func runRound(ctx context.Context, srv *redisserver.Server, lib sems.Library, round int, monitor bool, dst map[string]*runStats, o options) {
	t0 := time.Now()
	raw, err := runContended(ctx, srv, lib, round, monitor, o)
	if err != nil {
		log.Printf("%s round %d: %v", lib.Name, round, err)
		if dst[lib.Name] == nil {
			dst[lib.Name] = &runStats{Lib: lib.Name}
		}
		dst[lib.Name].Err = err.Error()
		return
	}
	rs := analyze(raw, o)
	tag := ""
	if monitor {
		tag = " (MONITOR)"
	}
	log.Printf("%-26s round %d%s: %5.0f acq/s  Acquire wait p50 %-9s p99 %-9s  idle p50 %-9s p99 %-9s  server idle p99 %-9s  RT/acq %.2f  (%.1fs)",
		lib.Name, round, tag, float64(rs.Acq)/(float64(rs.Window)/1e9), report.Duration(rs.Wait.P(0.5)), report.Duration(rs.Wait.P(0.99)),
		report.Duration(rs.Idle.P(0.5)), report.Duration(rs.Idle.P(0.99)), report.Duration(rs.SrvIdle.P(0.99)),
		float64(rs.RT)/float64(max(rs.Acq, 1)), time.Since(t0).Seconds())
	if prev := dst[lib.Name]; prev != nil && prev.Err != "" {
		rs.Err = prev.Err
		dst[lib.Name] = rs
	} else {
		dst[lib.Name] = merge(prev, rs)
	}
}
