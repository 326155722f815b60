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
//	go run -tags noholdfast ./cmd/semaphore-bench -quick   # the peer only
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

	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
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
	if cfg := os.Getenv(workerEnv); cfg != "" {
		if err := runWorker(cfg); err != nil {
			log.Fatalf("worker: %v", err)
		}
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
	flag.StringVar(&o.libNames, "libs", "", "comma-separated semaphores to run (default all): "+strings.Join(libNames(sems.All()), ","))
	flag.StringVar(&o.redisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
	flag.BoolVar(&o.contended, "contended", true, "run the contended scenario")
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
	pickN := func(n *int, full, quick int) {
		if *n == 0 {
			*n = full
			if o.quick {
				*n = quick
			}
		}
	}
	pick(&o.duration, 3*time.Second, time.Second)
	pick(&o.warmup, 500*time.Millisecond, 300*time.Millisecond)
	pickN(&o.rounds, 3, 1)
	pickN(&o.uncRounds, 10, 3)
	pickN(&o.cycles, 400, 200)
	if o.redisBin == "" {
		o.redisBin = "/usr/bin/redis-server"
		if p, err := exec.LookPath("redis-server"); err == nil {
			o.redisBin = p
		}
	}
}

func libNames(ls []sems.Library) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name
	}
	return out
}

func selectLibs(names string) ([]sems.Library, error) {
	if names == "" {
		return sems.All(), nil
	}
	var out []sems.Library
	for n := range strings.SplitSeq(names, ",") {
		l, ok := sems.ByName(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("unknown semaphore %q (have %s)", n, strings.Join(libNames(sems.All()), ", "))
		}
		out = append(out, l)
	}
	return out, nil
}

// rotate returns ls rotated left by k.
func rotate(ls []sems.Library, k int) []sems.Library {
	if len(ls) == 0 {
		return nil
	}
	k %= len(ls)
	return append(append([]sems.Library{}, ls[k:]...), ls[:k]...)
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
	log.Printf("redis-server %s on %s; semaphores: %s", srv.Version(), srv.Addr, strings.Join(libNames(selected), ", "))
	res := &results{Started: started.UTC(), Opts: o, Libs: selected, Env: environment(srv.Version(), o.redisBin),
		Contended: map[string]*runStats{}, Monitored: map[string]*runStats{}}

	log.Printf("uncontended: %d rounds × %d cycles per row", o.uncRounds, o.cycles)
	if res.Uncontended, err = runUncontended(ctx, srv, selected, o.uncRounds, o.cycles); err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}

	if o.contended {
		total := o.rounds
		if o.monitor {
			total++
		}
		for round := range total {
			monitor := round == o.rounds
			for _, lib := range rotate(selected, round) {
				t0 := time.Now()
				raw, err := runContended(ctx, srv, lib, round, monitor, o)
				dst := res.Contended
				if monitor {
					dst = res.Monitored
				}
				if err != nil {
					log.Printf("%s round %d: %v", lib.Name, round, err)
					if dst[lib.Name] == nil {
						dst[lib.Name] = &runStats{Lib: lib.Name}
					}
					dst[lib.Name].Err = err.Error()
					continue
				}
				rs := analyze(raw, o)
				tag := ""
				if monitor {
					tag = " (MONITOR)"
				}
				log.Printf("%-26s round %d%s: %5.0f acq/s  Acquire wait p50 %-9s p99 %-9s  idle p50 %-9s p99 %-9s  server idle p99 %-9s  RT/acq %.2f  (%.1fs)",
					lib.Name, round, tag, float64(rs.Acq)/(float64(rs.Window)/1e9), fmtDur(rs.Wait.P(0.5)), fmtDur(rs.Wait.P(0.99)),
					fmtDur(rs.Idle.P(0.5)), fmtDur(rs.Idle.P(0.99)), fmtDur(rs.SrvIdle.P(0.99)),
					float64(rs.RT)/float64(max(rs.Acq, 1)), time.Since(t0).Seconds())
				if prev := dst[lib.Name]; prev != nil && prev.Err != "" {
					rs.Err = prev.Err
					dst[lib.Name] = rs
				} else {
					dst[lib.Name] = merge(prev, rs)
				}
			}
		}
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
		b, err := json.MarshalIndent(res.summary(), "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	fmt.Print(renderTables(res))
	log.Printf("wrote %s (%.0f s)", path, time.Since(started).Seconds())
	return nil
}
