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
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

type options struct {
	cli.Flags
	permits         int
	procs           int
	goroutines      int
	hold            time.Duration
	contendedRounds int
	monitor         bool
	contended       bool
}

func main() {
	var o options
	o.Setup("semaphore-bench", "semaphore.md", "1 s windows, 1 round, fewer uncontended cycles", "summarised results", runWorker)
	o.Contended("run", cli.Deadline{Flag: "acquire-timeout", Call: "Acquire", Default: 10 * time.Second},
		"semaphores to run (default all)", cli.Semaphores(sems.All()).AllNames())
	o.Uncontended("unc-rounds", "row per round", 400, 200)
	flag.IntVar(&o.permits, "permits", 4, "permits of the contended semaphore")
	flag.IntVar(&o.procs, "procs", 4, "worker processes of the contended runs")
	flag.IntVar(&o.goroutines, "goroutines", 8, "goroutines per worker process")
	flag.DurationVar(&o.hold, "hold", time.Millisecond, "how long each acquisition holds its permit (time.Sleep)")
	o.IntVar(&o.contendedRounds, "rounds", 3, 1, "contended rounds per library, merged")
	flag.BoolVar(&o.monitor, "monitor", true, "one more contended round per library under MONITOR (server-side idle check)")
	flag.BoolVar(&o.contended, "contended", true, "run the contended scenario")
	o.Run(func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	selected, srv, err := cli.Start(&o.Flags, cli.Semaphores(sems.All()))
	if err != nil {
		return err
	}
	defer srv.Stop()
	res := &results{Started: srv.Started, Opts: o, Libs: selected, Env: srv.Env.Without("OS"), Link: srv.Link,
		Contended: map[string]*runStats{}, Monitored: map[string]*runStats{}}

	log.Printf("uncontended: %d rounds × %d cycles per row", o.Rounds, o.Cycles)
	if res.Uncontended, err = runUncontended(ctx, srv.Server, selected, o.Rounds, o.Cycles); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}

	if o.contended {
		runRounds(ctx, srv.Server, selected, res, o)
	}
	res.Elapsed = srv.Elapsed()

	out := o.Output()
	path, err := out.Write("semaphore.md", renderMarkdown(res))
	if err != nil {
		return err
	}
	if err := out.WriteJSON(res.summary()); err != nil {
		return err
	}
	fmt.Print(renderTables(res))
	out.Wrote(path, 0, srv.Elapsed())
	return nil
}

// runRounds runs the contended rounds, each library in turn in an order
// rotating from round to round, and merges each library's rounds into
// res.Contended; the MONITOR round, if any, goes to res.Monitored.
func runRounds(ctx context.Context, srv *redisserver.Server, selected []sems.Library, res *results, o options) {
	total := o.contendedRounds
	if o.monitor {
		total++
	}
	for round := range total {
		monitor := round == o.contendedRounds
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
