package holdfastasynq

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

type enqueue struct {
	who string
	at  time.Time
	id  string
}

type lead struct {
	who string
	at  time.Time
}

// Two runners on two clients, each with a Scheduler of a periodic task every
// second: only the leader's enqueues, once per tick; when the leader's Redis
// connection is closed (a process cut off), the other takes over within the
// nextLead returns the next lead on ch, failing the test with what when ctx
// ends first.
func nextLead(t testing.TB, ctx context.Context, ch <-chan lead, what string) lead {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-ctx.Done():
		t.Fatal(what)
		return lead{}
	}
}

// watchdog timeout, and the enqueues go on, never two in one tick.
func TestSchedulerOneLeaderEnqueuesOnce(t *testing.T) {
	srv := redistest.Shared(t)
	q := queueName(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 40*time.Second)

	var mu sync.Mutex
	var enqueued []enqueue
	enqCh := make(chan string, 100)
	leadCh := make(chan lead, 10)
	procs := map[string]*proc{"a": newProc(t, srv), "b": newProc(t, srv)}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for who, p := range procs {
		newScheduler := func(*rlock.Leadership) (*asynq.Scheduler, error) {
			leadCh <- lead{who, time.Now()}
			s := asynq.NewSchedulerFromRedisClient(p.rdb, &asynq.SchedulerOpts{
				Logger:   quiet{},
				LogLevel: asynq.FatalLevel,
				PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					enqueued = append(enqueued, enqueue{who, time.Now(), info.ID})
					mu.Unlock()
					enqCh <- who
				},
			})
			_, err := s.Register("@every 1s", asynq.NewTask("tick", nil), asynq.Queue(q))
			return s, err
		}
		wg.Go(func() {
			err := RunScheduler(runCtx, p.c.NewElection(name), newScheduler,
				WithValue(who), WithCampaignRetry(200*time.Millisecond), WithRunLogger(quietSlog))
			require.NoError(t, err)
		})
	}
	defer func() { stop(); wg.Wait() }()

	waitFor := func(what string, ch <-chan string, who string, n int) {
		t.Helper()
		for n > 0 {
			select {
			case w := <-ch:
				if w == who {
					n--
				}
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
		}
	}

	first := nextLead(t, ctx, leadCh, "no leader")
	waitFor("the leader's enqueues", enqCh, first.who, 4)

	// Cut the leader off: its renewals and enqueues fail from now on.
	killed := time.Now()
	procs[first.who].cut()
	second := nextLead(t, ctx, leadCh, "no takeover")
	require.NotEqual(t, first.who, second.who)
	takeover := second.at.Sub(killed)
	t.Logf("takeover %v after the leader was cut off (watchdog timeout %v)", takeover, testWatchdog)
	require.Less(t, takeover, testWatchdog+1500*time.Millisecond)
	waitFor("the new leader's enqueues", enqCh, second.who, 3)
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(enqueued, func(x, y enqueue) int { return x.at.Compare(y.at) })
	for i := 1; i < len(enqueued); i++ {
		gap := enqueued[i].at.Sub(enqueued[i-1].at)
		require.Greater(t, gap, 500*time.Millisecond, "two enqueues in one tick: %v then %v", enqueued[i-1], enqueued[i])
	}
	for _, e := range enqueued {
		if e.who == first.who {
			require.True(t, e.at.Before(second.at), "the old leader enqueued after the new one led")
		}
	}

	// What the queue holds: exactly the enqueues reported, no duplicates.
	insp := asynq.NewInspectorFromRedisClient(procs[second.who].rdb)
	tasks, err := insp.ListPendingTasks(q, asynq.PageSize(1000))
	require.NoError(t, err)
	ids := make([]string, 0, len(tasks))
	for _, ti := range tasks {
		ids = append(ids, ti.ID)
	}
	want := make([]string, 0, len(enqueued))
	for _, e := range enqueued {
		want = append(want, e.id)
	}
	require.ElementsMatch(t, want, ids)
	t.Logf("%d enqueues in %v: %d by %s, then %d by %s", len(enqueued),
		enqueued[len(enqueued)-1].at.Sub(enqueued[0].at).Round(time.Millisecond),
		count(enqueued, first.who), first.who, count(enqueued, second.who), second.who)
	_, _ = insp.DeleteAllPendingTasks(q)
	_ = insp.DeleteQueue(q, true)
}

func count(es []enqueue, who string) int {
	n := 0
	for _, e := range es {
		if e.who == who {
			n++
		}
	}
	return n
}

// A runner whose ctx ends shuts its Scheduler down and resigns: the other
// runner leads at once, far sooner than the watchdog timeout.
func TestSchedulerHandoverOnCancel(t *testing.T) {
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 20*time.Second)
	a, b := newProc(t, srv), newProc(t, srv)
	leadCh := make(chan lead, 4)
	shutdown := make(chan time.Time, 4)
	mk := func(who string, p *proc) func(*rlock.Leadership) (*asynq.Scheduler, error) {
		return func(l *rlock.Leadership) (*asynq.Scheduler, error) {
			leadCh <- lead{who, time.Now()}
			s := asynq.NewSchedulerFromRedisClient(p.rdb, &asynq.SchedulerOpts{Logger: quiet{}, LogLevel: asynq.FatalLevel})
			go func() { <-l.Done(); shutdown <- time.Now() }()
			return s, nil
		}
	}
	actx, stopA := context.WithCancel(ctx)
	bctx, stopB := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		require.NoError(t, RunScheduler(actx, a.c.NewElection(name), mk("a", a), WithValue("a"), WithRunLogger(quietSlog)))
	})
	first := nextLead(t, ctx, leadCh, "a did not lead")
	require.Equal(t, "a", first.who)
	wg.Go(func() {
		require.NoError(t, RunScheduler(bctx, b.c.NewElection(name), mk("b", b), WithValue("b"), WithRunLogger(quietSlog)))
	})
	defer func() { stopA(); stopB(); wg.Wait() }()

	info, err := b.c.NewElection(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", info.Value)

	stopped := time.Now()
	stopA()
	second := nextLead(t, ctx, leadCh, "b did not take over")
	require.Equal(t, "b", second.who)
	t.Logf("handover %v after a's ctx ended", second.at.Sub(stopped))
	require.Less(t, second.at.Sub(stopped), testWatchdog/2)
	// a's term ended (after its Scheduler's Shutdown) before b's began.
	require.False(t, (<-shutdown).After(second.at))
}
