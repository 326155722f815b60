package holdfastgocron

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests and then, when they passed, checks that no
// goroutine leaked (redistest.Main), after stopping the shared Redis server.
func TestMain(m *testing.M) { redistest.Main(m) }

// newClient returns an rlock.Client on rdb with a 2 s watchdog timeout,
// closed at the end of the test. Each call on its own go-redis client stands
// for a process of its own.
func newClient(t *testing.T, rdb *redis.Client) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(2*time.Second), rlock.WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// skewedClock is the real clock offset by off: a scheduler on a clock that is
// behind (off < 0) fires each cron tick -off later than one on the real clock.
type skewedClock struct {
	clockwork.Clock
	off time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.Clock.Now().Add(c.off) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// waitFor polls cond every 10 ms until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// ticks records, per scheduler, the ticks it attempted (ran or skipped) and
// the ticks it ran. A tick is the second of the cron schedule, read on the
// scheduler's own clock.
type ticks struct {
	mu        sync.Mutex
	attempted []map[int64]bool
	runs      map[int64][]int // tick -> the schedulers that ran it
}

func newTicks(n int) *ticks {
	r := &ticks{runs: make(map[int64][]int)}
	for range n {
		r.attempted = append(r.attempted, make(map[int64]bool))
	}
	return r
}

func tickOf(c clockwork.Clock) int64 { return c.Now().Round(time.Second).Unix() }

func (r *ticks) attempt(i int, tick int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempted[i][tick] = true
}

func (r *ticks) run(i int, tick int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempted[i][tick] = true
	r.runs[tick] = append(r.runs[tick], i)
}

// common returns the ticks every scheduler attempted, in order.
func (r *ticks) common() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for tick := range r.attempted[0] {
		all := true
		for _, a := range r.attempted[1:] {
			all = all && a[tick]
		}
		if all {
			out = append(out, tick)
		}
	}
	slices.Sort(out)
	return out
}

// runSkewed starts one scheduler per instance, each running a fast job on
// the cron schedule "every second" (named "report", the same on every
// instance) with its own clock, and returns once every instance attempted
// n ticks in common (leaving out the first, which a scheduler may have missed
// as it started), with what they ran. opts and jobOpts give instance i's
// options, through which it records the ticks it skipped.
func runSkewed(t *testing.T, n int, clocks []clockwork.Clock, opts func(i int, rec *ticks) []gocron.SchedulerOption, jobOpts func(i int, rec *ticks) []gocron.JobOption) (*ticks, []int64) {
	t.Helper()
	rec := newTicks(len(clocks))
	var scheds []gocron.Scheduler
	for i, clk := range clocks {
		s, err := gocron.NewScheduler(append([]gocron.SchedulerOption{gocron.WithClock(clk)}, opts(i, rec)...)...)
		require.NoError(t, err)
		_, err = s.NewJob(gocron.CronJob("* * * * * *", true),
			gocron.NewTask(func() { rec.run(i, tickOf(clk)) }),
			append([]gocron.JobOption{gocron.WithName("report")}, jobOpts(i, rec)...)...)
		require.NoError(t, err)
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	var common []int64
	waitFor(t, time.Duration(n+4)*time.Second, "every scheduler attempted the ticks", func() bool {
		common = rec.common()
		return len(common) >= n+1 // the first may have been missed by one as it started
	})
	for _, s := range scheds {
		require.NoError(t, s.Shutdown())
	}
	return rec, common[1:]
}

// recordingElector records the ticks its scheduler skipped as a follower.
type recordingElector struct {
	gocron.Elector
	i     int
	clock clockwork.Clock
	rec   *ticks
}

func (e recordingElector) IsLeader(ctx context.Context) error {
	err := e.Elector.IsLeader(ctx)
	if err != nil {
		e.rec.attempt(e.i, tickOf(e.clock))
	}
	return err
}
