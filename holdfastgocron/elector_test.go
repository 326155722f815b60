package holdfastgocron

import (
	"context"
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

// leaderOf returns the index of the one Elector that leads, or -1.
func leaderOf(els ...*Elector) int {
	at := -1
	for i, el := range els {
		if el.IsLeader(context.Background()) == nil {
			if at >= 0 {
				return -2 // two leaders: never expected
			}
			at = i
		}
	}
	return at
}

// TestElectorSkewedSchedulersRunEachTickOnce: two schedulers with clocks
// 80 ms apart, each with an Elector of its own on one election, run each tick
// exactly once: the leader's.
func TestElectorSkewedSchedulersRunEachTickOnce(t *testing.T) {
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	clocks := []clockwork.Clock{clockwork.NewRealClock(), skewedClock{clockwork.NewRealClock(), -skew}}
	var els []*Elector
	for i := range clocks {
		el := NewElector(newClient(t, srv.Client(t)).NewElection(name), []string{"a", "b"}[i])
		t.Cleanup(func() { require.NoError(t, el.Close(context.Background())) })
		els = append(els, el)
	}
	waitFor(t, 5*time.Second, "a leader", func() bool { return leaderOf(els...) >= 0 })
	rec, common := runSkewed(t, 4, clocks,
		func(i int, rec *ticks) []gocron.SchedulerOption {
			return []gocron.SchedulerOption{gocron.WithDistributedElector(recordingElector{els[i], i, clocks[i], rec})}
		},
		func(int, *ticks) []gocron.JobOption { return nil })
	for _, tick := range common {
		require.Lenf(t, rec.runs[tick], 1, "tick %s ran on schedulers %v",
			time.Unix(tick, 0).Format(time.TimeOnly), rec.runs[tick])
	}
}

// runs records which scheduler ran a job, and when.
type runs struct {
	mu  sync.Mutex
	who []int
	at  []time.Time
}

func (r *runs) add(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.who = append(r.who, i)
	r.at = append(r.at, time.Now())
}

// count returns how many runs scheduler i made, and its first and last.
func (r *runs) count(i int) (n int, first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, w := range r.who {
		if w == i {
			if n == 0 {
				first = r.at[k]
			}
			last = r.at[k]
			n++
		}
	}
	return n, first, last
}

// electedPair starts two "processes" on one election, each an rlock.Client
// (2 s watchdog timeout) on a go-redis client of its own, the first through
// a proxy, with a scheduler running a job every 100 ms under its Elector. It
// returns once the first leads and has run the job.
func electedPair(t *testing.T) (proxy *redistest.Proxy, els []*Elector, rec *runs) {
	srv := redistest.Shared(t)
	proxy = redistest.NewProxy(t, srv.Addr)
	name := redistest.Name(t)
	rdbA := redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdbA.Close() })
	rdbs := []*redis.Client{rdbA, srv.Client(t)}
	rec = &runs{}
	for i, rdb := range rdbs {
		el := NewElector(newClient(t, rdb).NewElection(name), []string{"a", "b"}[i], WithRetryInterval(100*time.Millisecond))
		t.Cleanup(func() { _ = el.Close(context.Background()) })
		els = append(els, el)
		if i == 0 {
			waitFor(t, 5*time.Second, "a leads", func() bool { return leaderOf(els...) == 0 })
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
		require.NoError(t, err)
		_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() { rec.add(i) }), gocron.WithName("report"))
		require.NoError(t, err)
		s.Start()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	waitFor(t, 5*time.Second, "a runs the job", func() bool { n, _, _ := rec.count(0); return n >= 2 })
	n, _, _ := rec.count(1)
	require.Zero(t, n, "the follower ran the job")
	return proxy, els, rec
}

// TestElectorFailoverWithinWatchdogTimeout: the leader's connection is cut
// (its proxy drops everything both ways: no resign, no renewal, no error); its
// Leadership ends by the lease deadline, so it stops running the job, and the
// other instance runs it within the watchdog timeout (2 s), never at the same
// time.
func TestElectorFailoverWithinWatchdogTimeout(t *testing.T) {
	proxy, els, rec := electedPair(t)
	proxy.SetDropRequests(true) // nothing reaches Redis: no renewal, no resign
	proxy.SetDropAll(true)      // nothing comes back
	cut := time.Now()
	waitFor(t, 5*time.Second, "b runs the job", func() bool { n, _, _ := rec.count(1); return n > 0 })
	_, firstB, _ := rec.count(1)
	_, _, lastA := rec.count(0)
	took := firstB.Sub(cut)
	t.Logf("b ran the job %v after a's connection was cut (watchdog timeout 2 s)", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Second+400*time.Millisecond, "later than the watchdog timeout (plus one job interval and a margin)")
	require.True(t, lastA.Before(firstB), "a ran the job after b had started: a at %v, b at %v", lastA, firstB)
	require.ErrorIs(t, els[0].IsLeader(context.Background()), rlock.ErrNotLeader, "a, cut off, still says it leads")
	require.NoError(t, els[1].IsLeader(context.Background()))
	proxy.Close() // the dead process's connections reset: its cleanups end quickly
}

// TestElectorCloseHandsOver: a leader that closes its Elector resigns, and
// the other instance leads, and runs the job, at once (well within the
// watchdog timeout).
func TestElectorCloseHandsOver(t *testing.T) {
	_, els, rec := electedPair(t)
	closed := time.Now()
	require.NoError(t, els[0].Close(context.Background()))
	require.ErrorIs(t, els[0].IsLeader(context.Background()), rlock.ErrNotLeader)
	waitFor(t, 5*time.Second, "b runs the job", func() bool { n, _, _ := rec.count(1); return n > 0 })
	_, firstB, _ := rec.count(1)
	t.Logf("b ran the job %v after a closed its Elector", firstB.Sub(closed).Round(time.Millisecond))
	require.Less(t, firstB.Sub(closed), time.Second, "no faster than a lease running out")
	require.NotNil(t, els[1].Leadership())
	require.Nil(t, els[0].Leadership())
}
