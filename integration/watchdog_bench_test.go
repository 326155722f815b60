package integration

// Watchdog scale: one rlock.Client renewing many watchdog holds. Measured per
// renewal round: client round trips (go-redis hook), server-side commands (INFO
// commandstats), client CPU time (getrusage); and heap per hold.

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// wdTrafficHook counts what a go-redis client sends: single commands and pipelines
// (each one round trip), and the successful EVAL/EVALSHA calls and their keys (the
// renewal batches; a call answered NOSCRIPT is sent again and counted then).
type wdTrafficHook struct {
	mu        sync.Mutex
	singles   int64 // commands sent alone
	pipelines int64 // pipelines sent
	piped     int64 // commands inside pipelines
	evals     int64 // successful EVAL/EVALSHA calls, alone or piped
	evalKeys  int64 // keys of those calls
	lastPipe  int64 // keys of the successful calls in the last pipeline
	changed   chan struct{}
}

func newWdTrafficHook() *wdTrafficHook { return &wdTrafficHook{changed: make(chan struct{}, 1)} }

type wdTraffic struct{ singles, pipelines, piped, evals, evalKeys, lastPipe int64 }

func (h *wdTrafficHook) snapshot() wdTraffic {
	h.mu.Lock()
	defer h.mu.Unlock()
	return wdTraffic{h.singles, h.pipelines, h.piped, h.evals, h.evalKeys, h.lastPipe}
}

// countEval adds cmd to the eval counters when it is a successful EVAL or EVALSHA,
// and returns its number of keys. h.mu held.
func (h *wdTrafficHook) countEval(cmd redis.Cmder) int64 {
	args := cmd.Args()
	if len(args) < 3 || cmd.Err() != nil {
		return 0
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "eval", "evalsha":
		n, err := strconv.ParseInt(fmt.Sprint(args[2]), 10, 64)
		if err != nil {
			return 0
		}
		h.evals++
		h.evalKeys += n
		return n
	}
	return 0
}

func (h *wdTrafficHook) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *wdTrafficHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *wdTrafficHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		h.singles++
		h.countEval(cmd)
		h.mu.Unlock()
		h.notify()
		return err
	}
}

func (h *wdTrafficHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		h.pipelines++
		h.piped += int64(len(cmds))
		h.lastPipe = 0
		for _, cmd := range cmds {
			h.lastPipe += h.countEval(cmd)
		}
		h.mu.Unlock()
		h.notify()
		return err
	}
}

// wdScale is one client holding n watchdog locks on a server of its own.
type wdScale struct {
	tb     testing.TB
	n      int
	hook   *wdTrafficHook
	stats  *redis.Client // unhooked, for INFO
	leases []*rlock.Lease

	acquire      time.Duration // time to take the n locks
	bytesPerHold float64

	// measurement window
	t0     wdTraffic
	cmds0  map[string]int64
	cpu0   time.Duration
	start  time.Time
	target int64 // evalKeys to reach for the next round
}

// wdStartScale takes n locks with watchdog leases of timeout on one client and
// measures the heap they cost.
// With track, the rounds go through the tracker's connections, which the
// hook does not see: only the server's figures are then meaningful.
func wdStartScale(tb testing.TB, n int, timeout time.Duration, track bool) *wdScale {
	tb.Helper()
	srv := redistest.Start(tb)
	hook := newWdTrafficHook()
	rdb := srv.Client(tb)
	rdb.AddHook(hook)
	c := newClient(tb, rdb, rlock.WithWatchdogTimeout(timeout), rlock.WithTracking(track))
	s := &wdScale{tb: tb, n: n, hook: hook, stats: srv.Client(tb), leases: make([]*rlock.Lease, 0, n)}
	ctx := testCtx(tb, 10*time.Minute)
	prefix := redistest.Name(tb) + ":"
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	// Warm up: scripts loaded, a connection dialled, the watchdog's maps in use.
	l, err := c.NewMutex(prefix + "warmup").TryLock(ctx)
	require.NoError(tb, err)
	require.NoError(tb, l.Unlock(ctx))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for _, name := range names {
		l, err := c.NewMutex(name).TryLock(ctx)
		require.NoError(tb, err)
		s.leases = append(s.leases, l)
	}
	s.acquire = time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.bytesPerHold = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)

	// Start at the end of a round that renewed every hold in one pipeline: the
	// first round may have met NOSCRIPT, and one in flight when the acquisitions
	// ended may have missed some holds.
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for hook.snapshot().lastPipe != int64(n) {
		select {
		case <-hook.changed:
		case <-limit.C:
			tb.Fatalf("no pipelined round renewing all %d holds within 30s", n)
		}
	}
	s.target = hook.snapshot().evalKeys
	return s
}

// awaitRound waits until the client has sent renewals for n more keys: one full
// round, however it was split into calls.
func (s *wdScale) awaitRound() {
	s.tb.Helper()
	s.target += int64(s.n)
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for s.hook.snapshot().evalKeys < s.target {
		select {
		case <-s.hook.changed:
		case <-timeout.C:
			s.tb.Fatalf("no full renewal round within 30s (%d of %d keys)", s.hook.snapshot().evalKeys, s.target)
		}
	}
}

// begin opens the measurement window.
func (s *wdScale) begin() {
	s.t0 = s.hook.snapshot()
	s.cmds0 = wdCommandStats(s.tb, s.stats)
	s.cpu0 = wdCPUTime(s.tb)
	s.start = time.Now()
}

// wdScaleResult is what a measurement window saw, per renewal round.
type wdScaleResult struct {
	Rounds           float64
	RoundTrips       float64 // client round trips (pipelines + single commands)
	Pipelines        float64
	Evals            float64 // renewal script calls
	ServerEvals      float64 // EVALSHA+EVAL executed by the server
	ServerCmds       float64 // every command the server executed, inside scripts too
	CPU              time.Duration
	Period           time.Duration
	BytesPerHold     float64
	AcquirePerLock   time.Duration
	RoundTripsPer100 float64 // round trips per round per 100 locks
}

// end closes the measurement window.
func (s *wdScale) end() wdScaleResult {
	s.tb.Helper()
	elapsed := time.Since(s.start)
	cpu := wdCPUTime(s.tb) - s.cpu0
	cmds := wdCommandStats(s.tb, s.stats)
	t1 := s.hook.snapshot()
	rounds := float64(t1.evalKeys-s.t0.evalKeys) / float64(s.n)
	require.Greater(s.tb, rounds, 0.0)
	var all int64
	for k, v := range cmds {
		if k != "info" {
			all += v - s.cmds0[k]
		}
	}
	trips := float64(t1.pipelines-s.t0.pipelines+t1.singles-s.t0.singles) / rounds
	return wdScaleResult{
		Rounds:           rounds,
		RoundTrips:       trips,
		Pipelines:        float64(t1.pipelines-s.t0.pipelines) / rounds,
		Evals:            float64(t1.evals-s.t0.evals) / rounds,
		ServerEvals:      float64(cmds["evalsha"]-s.cmds0["evalsha"]+cmds["eval"]-s.cmds0["eval"]) / rounds,
		ServerCmds:       float64(all) / rounds,
		CPU:              time.Duration(float64(cpu) / rounds),
		Period:           time.Duration(float64(elapsed) / rounds),
		BytesPerHold:     s.bytesPerHold,
		AcquirePerLock:   s.acquire / time.Duration(s.n),
		RoundTripsPer100: trips / (float64(s.n) / 100),
	}
}

func (r wdScaleResult) String() string {
	return fmt.Sprintf("%.0f rounds (every %v): %.2f round trips/round (%.2f pipelines, %.3f per 100 locks), "+
		"%.1f renewal calls/round, server: %.1f EVALSHA/round, %.0f commands/round (incl. inside scripts), "+
		"client CPU %.2f ms/round, heap %.0f bytes/hold, acquire %v/lock",
		r.Rounds, r.Period.Round(time.Millisecond), r.RoundTrips, r.Pipelines, r.RoundTripsPer100,
		r.Evals, r.ServerEvals, r.ServerCmds,
		float64(r.CPU)/float64(time.Millisecond), r.BytesPerHold, r.AcquirePerLock)
}

// checkHeld fails unless every lease is still open.
func (s *wdScale) checkHeld() {
	s.tb.Helper()
	for i, l := range s.leases {
		if err := l.Err(); err != nil {
			s.tb.Fatalf("lease %d ended: %v", i, err)
		}
	}
}

// wdCommandStats returns the calls per command from INFO commandstats.
func wdCommandStats(tb testing.TB, rdb *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	out := make(map[string]int64)
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(tb, err)
				out[name] = n
			}
		}
	}
	return out
}

// wdCPUTime returns the user and system CPU time of this process.
func wdCPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWatchdogScale: one client renewing 10,000 watchdog holds (timeout 3 s,
// a round every second). One op is one renewal round.
func BenchmarkWatchdogScale(b *testing.B) {
	const locks = 10_000
	s := wdStartScale(b, locks, 3*time.Second, false) // the hook sees the client's connections only
	s.begin()
	for b.Loop() {
		s.awaitRound()
	}
	r := s.end()
	s.checkHeld()
	b.ReportMetric(r.RoundTrips, "roundtrips/round")
	b.ReportMetric(r.Evals, "evalsha/round")
	b.ReportMetric(r.ServerCmds, "cmds/round")
	b.ReportMetric(float64(r.CPU)/float64(time.Millisecond), "cpu-ms/round")
	b.ReportMetric(r.BytesPerHold, "bytes/hold")
	b.Logf("%d locks: %v", locks, r)
}

// TestWatchdogScaleSmoke: 1,000 watchdog holds on one client are renewed with at
// most one round trip per 100 locks per round, and all stay held. Tracking is
// off: the go-redis hook that counts the round trips sees the client's own
// connections, and with tracking the rounds go through the tracker's
// (TestTrackingRenewalCosts counts those on the server).
func TestWatchdogScaleSmoke(t *testing.T) {
	const locks, rounds = 1000, 3
	s := wdStartScale(t, locks, wdTimeout, false)
	s.begin()
	for range rounds {
		s.awaitRound()
	}
	r := s.end()
	t.Logf("%d locks: %v", locks, r)
	s.checkHeld()
	require.LessOrEqual(t, r.RoundTripsPer100, 1.0, "round trips per round per 100 locks")
	require.InDelta(t, float64(locks)/100, r.Evals, 0.5, "renewal calls per round: batches of 100")
	require.InDelta(t, r.Evals, r.ServerEvals, 0.5, "the server ran every renewal call once")
}
