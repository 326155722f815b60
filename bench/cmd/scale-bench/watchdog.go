package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/redis/go-redis/v9"
)

// renewStats is what one library's renewals of Holds holds cost per round.
type renewStats struct {
	Lib   string `json:"lib"`
	Holds int    `json:"holds"`
	Err   string `json:"err,omitempty"`

	Rounds float64 `json:"rounds"` // renewal rounds in the window
	// Per round: the client's round trips, the server's commands (inside
	// scripts too), the server's time in script calls (INFO commandstats
	// usec of EVAL/EVALSHA, which includes the commands they run), its main
	// thread's CPU time, and this process's CPU time (getrusage).
	RoundTrips float64       `json:"roundTripsPerRound"`
	Commands   float64       `json:"serverCommandsPerRound"`
	ScriptTime time.Duration `json:"scriptTimePerRound"`
	ServerCPU  time.Duration `json:"serverCPUPerRound"`
	ClientCPU  time.Duration `json:"clientCPUPerRound"`
	// Acquire is how long taking the holds took, in total.
	Acquire time.Duration `json:"acquire"`
}

// holdsCurve is the hold counts of the watchdog curve.
func holdsCurve(maxHolds int) []int {
	var out []int
	for _, n := range []int{1, 10, 100, 1000, 10000, 100000} {
		if n <= maxHolds {
			out = append(out, n)
		}
	}
	return out
}

// renewer is one library holding many locks on one client and renewing
// them: Acquire takes the holds, Rounds reads how many renewal rounds have
// completed so far (fractional for a library that renews each hold on its own
// timer), Close gives them back.
type renewer struct {
	acquire    func(ctx context.Context, names []string) error
	rounds     func() float64
	roundTrips func() int64
	close      func() error
	// wait blocks until the rounds counter has reached at least r, or ctx
	// is done.
	wait func(ctx context.Context, r float64) error
}

// runRenewals measures each library's renewal rounds at each hold count.
func runRenewals(ctx context.Context, srv *redisserver.Server, selected []libs.Library, o options) []*renewStats {
	var out []*renewStats
	for _, n := range holdsCurve(o.maxHolds) {
		for _, lib := range selected {
			open, ok := renewers[lib.Name]
			if !ok || (!libs.IsHoldfast(lib.Name) && n > o.maxPeerHolds) {
				continue
			}
			t0 := time.Now()
			rs, err := measureRenewals(ctx, srv, lib.Name, open, n, o)
			if err != nil {
				log.Printf("renewals %d holds %s: %v", n, lib.Name, err)
				rs = &renewStats{Lib: lib.Name, Holds: n, Err: err.Error()}
			} else {
				log.Printf("renewals %6d holds %-12s %.1f rounds: RT/round %7.2f  cmds/round %8.0f  script %-9s server CPU %-9s client CPU %-9s (%.1fs)",
					n, lib.Name, rs.Rounds, rs.RoundTrips, rs.Commands, rs.ScriptTime, rs.ServerCPU, rs.ClientCPU, time.Since(t0).Seconds())
			}
			out = append(out, rs)
		}
	}
	return out
}

// measureRenewals takes n holds with the renewer open returns, waits for a
// first full round, then measures o.renewRounds rounds.
func measureRenewals(ctx context.Context, srv *redisserver.Server, lib string, open func(addr string, o options) (*renewer, error), n int, o options) (*renewStats, error) {
	stats := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer stats.Close()
	defer stats.FlushAll(ctx)
	r, err := open(srv.Addr, o)
	if err != nil {
		return nil, err
	}
	defer r.close()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale:renew:%s:%d:%d", lib, n, i)
	}
	rs := &renewStats{Lib: lib, Holds: n}
	t0 := time.Now()
	if err := r.acquire(ctx, names); err != nil {
		return nil, err
	}
	rs.Acquire = time.Since(t0)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(o.renewRounds)*o.renewInterval*4)
	defer cancel()
	// Start at the end of a round that began after the last acquisition.
	if err := r.wait(wctx, r.rounds()+2); err != nil {
		return nil, fmt.Errorf("no renewal round: %w", err)
	}
	s0, err := redisserver.ReadStats(ctx, stats, "commandstats", "cpu")
	if err != nil {
		return nil, err
	}
	rt0, cpu0, rounds0 := r.roundTrips(), harness.ProcessCPU(), r.rounds()
	if err := r.wait(wctx, rounds0+float64(o.renewRounds)); err != nil {
		return nil, fmt.Errorf("renewal rounds: %w", err)
	}
	rt1, cpu1, rounds1 := r.roundTrips(), harness.ProcessCPU(), r.rounds()
	s1, err := redisserver.ReadStats(ctx, stats, "commandstats", "cpu")
	if err != nil {
		return nil, err
	}
	rs.Rounds = rounds1 - rounds0
	per := func(d time.Duration) time.Duration { return time.Duration(float64(d) / rs.Rounds) }
	rs.RoundTrips = float64(rt1-rt0) / rs.Rounds
	cmds, _ := s1.Commands.Delta(s0.Commands)
	rs.Commands = float64(cmds) / rs.Rounds
	var usec int64
	for name, c := range s1.Commands {
		if redisserver.IsScript(name) {
			usec += c.Usec - s0.Commands[name].Usec
		}
	}
	rs.ScriptTime = per(time.Duration(usec) * time.Microsecond)
	rs.ServerCPU = per(s1.MainThreadCPU - s0.MainThreadCPU)
	rs.ClientCPU = per(cpu1 - cpu0)
	return rs, nil
}

// acquireAll runs lock on every name, with up to 32 at a time.
func acquireAll(ctx context.Context, names []string, lock func(ctx context.Context, name string) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(32, len(names)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(names)); i = next.Add(1) - 1 {
				if err := lock(ctx, names[i]); err != nil {
					mu.Lock()
					first = cmpErr(first, fmt.Errorf("%s: %w", names[i], err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// countedRounds counts completed rounds and lets callers wait for a count.
type countedRounds struct {
	mu      sync.Mutex
	n       float64
	changed chan struct{} // closed and replaced at each count
}

func newCountedRounds() *countedRounds { return &countedRounds{changed: make(chan struct{})} }

func (c *countedRounds) add(d float64) {
	c.mu.Lock()
	c.n += d
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *countedRounds) load() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countedRounds) wait(ctx context.Context, r float64) error {
	for {
		c.mu.Lock()
		n, ch := c.n, c.changed
		c.mu.Unlock()
		if n >= r {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%.1f of %.1f rounds: %w", n, r, ctx.Err())
		}
	}
}
