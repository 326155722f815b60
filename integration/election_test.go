package integration

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Leader election: Campaign, Leader, Observe, Proclaim and Resign,
// each promise checked from the leader's side and the followers', in one
// client and across clients, on a single server, a Cluster and Sentinel.

// electBound is how soon a message-driven change must be seen: generous for
// a loaded 2-core machine, far below any lease or recheck used here.
const electBound = 2 * time.Second

// campaignAsync starts a Campaign and returns where its result arrives.
func campaignAsync(ctx context.Context, e *rlock.Election, value string) <-chan campaignResult {
	got := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		got <- campaignResult{l, err, time.Now()}
	}()
	return got
}

type campaignResult struct {
	l   *rlock.Leadership
	err error
	at  time.Time
}

// awaitInfo waits, at most d, for the observer to deliver an info that
// satisfies ok, and returns it with when it arrived; it fails the test when
// the channel closes or d passes.
func awaitInfo(t *testing.T, obs <-chan rlock.LeaderInfo, d time.Duration, ok func(rlock.LeaderInfo) bool) (rlock.LeaderInfo, time.Time) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case info, open := <-obs:
			require.True(t, open, "Observe's channel closed")
			if ok(info) {
				return info, time.Now()
			}
		case <-timeout:
			t.Fatalf("no matching leader observed within %v", d)
		}
	}
}

// electionRoundTrip runs an election's life through three clients of mk: a
// leader, a candidate that waits for it, and a follower that observes with a
// recheck of a minute (so that every change it sees within electBound came by
// message). It returns the follower's notification latencies.
func electionRoundTrip(t *testing.T, mk func() redis.UniversalClient, name string) []time.Duration {
	ctx := testCtx(t, 60*time.Second)
	c1, c2 := newClient(t, mk()), newClient(t, mk())
	c3 := newClient(t, mk(), rlock.WithRecheckInterval(time.Minute))
	e1, e2, e3 := c1.NewElection(name), c2.NewElection(name), c3.NewElection(name)
	var lat []time.Duration

	_, err := e3.Leader(ctx)
	require.ErrorIs(t, err, rlock.ErrNoLeader)
	obs := e3.Observe(ctx)
	first, _ := awaitInfo(t, obs, electBound, func(rlock.LeaderInfo) bool { return true })
	require.False(t, first.Elected(), "Observe begins with the current state: no leader")

	start := time.Now()
	l1, err := e1.Campaign(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, l1.Err())
	require.Positive(t, l1.Token())
	info, at := awaitInfo(t, obs, electBound, rlock.LeaderInfo.Elected)
	lat = append(lat, at.Sub(start))
	require.Equal(t, rlock.LeaderInfo{Holder: l1.Holder(), Token: l1.Token(), Value: "a", Since: info.Since}, info)
	require.WithinDuration(t, time.Now(), info.Since, 10*time.Second, "Since is the server's clock at the campaign")

	got := campaignAsync(ctx, e2, "b") // waits for l1
	start = time.Now()
	require.NoError(t, l1.Proclaim(ctx, "a2"))
	require.Equal(t, "a2", l1.Value())
	info, at = awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Value == "a2" })
	lat = append(lat, at.Sub(start))
	require.Equal(t, l1.Token(), info.Token, "Proclaim keeps the term")
	lead, err := e2.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "a2", lead.Value)
	require.Positive(t, lead.TTL)
	select {
	case r := <-got:
		t.Fatalf("a second leader while the first leads: %+v", r)
	default:
	}

	resigned := time.Now()
	require.NoError(t, l1.Resign(ctx))
	require.ErrorIs(t, l1.Err(), rlock.ErrUnlocked)
	requireClosed(t, l1.Done())
	require.ErrorIs(t, l1.Proclaim(ctx, "x"), rlock.ErrNotLeader)
	require.ErrorIs(t, l1.Resign(ctx), rlock.ErrNotLeader)
	var r campaignResult
	select {
	case r = <-got:
	case <-time.After(electBound):
		t.Fatal("Resign did not wake the next candidate")
	}
	require.NoError(t, r.err)
	t.Logf("resign -> next leader: %v", r.at.Sub(resigned))
	require.Greater(t, r.l.Token(), l1.Token(), "terms strictly increase")
	info, at = awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == r.l.Token() })
	lat = append(lat, at.Sub(r.at))
	require.Equal(t, "b", info.Value)

	start = time.Now()
	require.NoError(t, r.l.Resign(ctx))
	info, at = awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return !i.Elected() })
	lat = append(lat, at.Sub(start))
	require.Equal(t, r.l.Token(), info.Token, "no leader carries the latest term")
	exists, err := mk().Exists(ctx, lua.LeaderRecordName(name)).Result()
	require.NoError(t, err)
	require.Zero(t, exists, "Resign clears the leader record")
	return lat
}

func requireClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(electBound):
		t.Fatal("Done not closed")
	}
}

// TestElectionRoundTrip: Campaign, Proclaim, Resign and the next candidate,
// seen by a follower, on one server.
func TestElectionRoundTrip(t *testing.T) {
	srv := redistest.Shared(t)
	lat := electionRoundTrip(t, func() redis.UniversalClient { return srv.Client(t) }, redistest.Name(t))
	t.Logf("follower notification latencies: %v", lat)
}

// TestElectionCluster: the same on a Cluster of 3 primaries, for names in
// every shard (sharded pub/sub on Redis 7+).
func TestElectionCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	for i := range 3 {
		name := fmt.Sprintf("%s:%d", redistest.Name(t), i)
		electionRoundTrip(t, func() redis.UniversalClient { return cl.Client(t) }, name)
	}
}

// TestElectionSentinel: the same through Sentinel.
func TestElectionSentinel(t *testing.T) {
	f := redistest.StartFailover(t, 1, 3)
	electionRoundTrip(t, func() redis.UniversalClient { return f.Client(t) }, redistest.Name(t))
}

// TestElectionSameClient: two candidates of one client exclude each other;
// the resignation of one wakes the other at once, and a follower of the same
// client sees both terms.
func TestElectionSameClient(t *testing.T) {
	_, c, name := setup(t, rlock.WithRecheckInterval(time.Minute))
	ctx := testCtx(t, 30*time.Second)
	e := c.NewElection(name)
	obs := e.Observe(ctx)
	l1, err := e.Campaign(ctx, "one")
	require.NoError(t, err)
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == l1.Token() })
	got := campaignAsync(ctx, e, "two")
	lead, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", lead.Value)
	require.NoError(t, l1.Resign(ctx))
	var r campaignResult
	select {
	case r = <-got:
	case <-time.After(electBound):
		t.Fatal("Resign did not wake the candidate of the same client")
	}
	require.NoError(t, r.err)
	require.Greater(t, r.l.Token(), l1.Token())
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == r.l.Token() && i.Value == "two" })
	require.NoError(t, r.l.Resign(ctx))
}

// TestElectionLossAtOnce: the leader's lock deleted from outside ends the
// leadership at once (client tracking), Proclaim then fails, the next
// candidate leads, and followers see it.
func TestElectionLossAtOnce(t *testing.T) {
	rdb, c, name := setup(t)
	c2 := newClient(t, redistest.Shared(t).Client(t), rlock.WithRecheckInterval(time.Minute))
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewElection(name).Campaign(ctx, "v")
	require.NoError(t, err)
	obs := c2.NewElection(name).Observe(ctx)
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == l.Token() })

	require.NoError(t, rdb.Del(ctx, name).Err())
	deleted := time.Now()
	requireClosed(t, l.Done())
	t.Logf("loss known %v after the DEL", time.Since(deleted))
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	err = l.Proclaim(ctx, "w")
	require.ErrorIs(t, err, rlock.ErrNotLeader)
	require.ErrorIs(t, err, rlock.ErrLockLost)

	_, err = c2.NewElection(name).Leader(ctx)
	require.ErrorIs(t, err, rlock.ErrNoLeader, "a record whose holder lost the lock is never reported")
	l2, err := c2.NewElection(name).Campaign(ctx, "next")
	require.NoError(t, err)
	require.Greater(t, l2.Token(), l.Token())
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == l2.Token() && i.Value == "next" })
}

// TestElectionDeadLeaderReplaced: a leader that stops renewing (its process
// is gone: here its client's connection is cut by a proxy) is replaced
// within its watchdog timeout, and its own handle says so.
func TestElectionDeadLeaderReplaced(t *testing.T) {
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	const timeout = time.Second
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c1 := newClient(t, rdb, rlock.WithWatchdogTimeout(timeout))
	c2 := newClient(t, srv.Client(t))
	l1, err := c1.NewElection(name).Campaign(ctx, "old")
	require.NoError(t, err)
	got := campaignAsync(ctx, c2.NewElection(name), "new")

	proxy.SetDropRequests(true) // the leader can no longer reach Redis
	cut := time.Now()
	var r campaignResult
	select {
	case r = <-got:
	case <-time.After(timeout + electBound):
		t.Fatal("the dead leader was not replaced within its watchdog timeout")
	}
	require.NoError(t, r.err)
	t.Logf("dead leader replaced %v after it stopped renewing (watchdog timeout %v)", r.at.Sub(cut), timeout)
	require.Greater(t, r.l.Token(), l1.Token())
	requireClosed(t, l1.Done()) // at its lease's deadline, unconfirmed
	require.ErrorIs(t, l1.Err(), rlock.ErrLockLost)
	require.NoError(t, r.l.Resign(ctx))
}

// TestElectionJavaParticipant: a process holding the election's lock as
// Redisson's RFencedLock (here a FencedMutex, the same keys) is the leader
// for followers, without a value, and a candidate takes over at its release.
func TestElectionJavaParticipant(t *testing.T) {
	_, c, name := setup(t)
	c2 := newClient(t, redistest.Shared(t).Client(t))
	ctx := testCtx(t, 30*time.Second)
	lease, err := c.NewFencedMutex(name).Lock(ctx)
	require.NoError(t, err)
	e := c2.NewElection(name)
	info, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, rlock.LeaderInfo{Holder: lease.Holder(), Token: lease.Token(), TTL: info.TTL}, info)
	got := campaignAsync(ctx, e, "go")
	require.NoError(t, lease.Unlock(ctx))
	var r campaignResult
	select {
	case r = <-got:
	case <-time.After(electBound):
		t.Fatal("the fenced lock's release did not wake the candidate")
	}
	require.NoError(t, r.err)
	require.Greater(t, r.l.Token(), lease.Token())
	require.NoError(t, r.l.Resign(ctx))
}

// TestElectionChurn: candidates of three clients (two in one of them) win,
// proclaim and resign in turn while a follower observes: never two leaders
// whose handles say valid, terms strictly increasing, and the follower's
// views in term order, ending on the truth.
func TestElectionChurn(t *testing.T) {
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	clients := []*rlock.Client{newClient(t, srv.Client(t)), newClient(t, srv.Client(t)), newClient(t, srv.Client(t))}
	follower := newClient(t, srv.Client(t)).NewElection(name)
	obs := follower.Observe(ctx)
	var vmu sync.Mutex
	var views []rlock.LeaderInfo
	viewsDone := make(chan struct{})
	octx, stopObs := context.WithCancel(ctx)
	go func() {
		defer close(viewsDone)
		for {
			select {
			case v := <-obs:
				vmu.Lock()
				views = append(views, v)
				vmu.Unlock()
			case <-octx.Done():
				return
			}
		}
	}()

	const rounds = 15
	var inside atomic.Int32
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for i, c := range append(clients, clients[0]) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := c.NewElection(name)
			for k := range rounds {
				l, err := e.Campaign(ctx, fmt.Sprintf("c%d-%d", i, k))
				if err != nil {
					t.Errorf("campaign: %v", err)
					return
				}
				if inside.Add(1) != 1 {
					t.Errorf("two leaders at once")
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				if err := l.Proclaim(ctx, fmt.Sprintf("c%d-%d'", i, k)); err != nil || l.Err() != nil {
					t.Errorf("proclaim: %v, %v", err, l.Err())
				}
				inside.Add(-1)
				if err := l.Resign(ctx); err != nil {
					t.Errorf("resign: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	require.True(t, slices.IsSorted(tokens), "terms in order of election: %v", tokens)
	require.Len(t, slices.Compact(slices.Clone(tokens)), len(tokens), "every term its own token")
	final, err := follower.Leader(ctx)
	require.ErrorIs(t, err, rlock.ErrNoLeader)
	require.Eventually(t, func() bool {
		vmu.Lock()
		defer vmu.Unlock()
		return len(views) > 0 && views[len(views)-1] == final
	}, electBound, time.Millisecond, "the follower's last view is the truth")
	stopObs()
	<-viewsDone
	for i := 1; i < len(views); i++ {
		require.GreaterOrEqual(t, views[i].Token, views[i-1].Token, "views go back in term: %+v then %+v", views[i-1], views[i])
	}
	t.Logf("%d terms, %d views", len(tokens), len(views))
}

// TestElectionClose: Close ends a leadership (ErrClosed), gives the lock back
// so that another client's candidate leads at once, and Resign afterwards
// says the leadership had ended; Observe's channel closes.
func TestElectionClose(t *testing.T) {
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	c1, c2 := newClient(t, srv.Client(t)), newClient(t, srv.Client(t))
	l, err := c1.NewElection(name).Campaign(ctx, "a")
	require.NoError(t, err)
	obs := c1.NewElection(name).Observe(ctx)
	got := campaignAsync(ctx, c2.NewElection(name), "b")
	require.NoError(t, c1.Close())
	requireClosed(t, l.Done())
	require.ErrorIs(t, l.Err(), rlock.ErrClosed)
	err = l.Resign(ctx)
	require.ErrorIs(t, err, rlock.ErrNotLeader)
	require.ErrorIs(t, err, rlock.ErrClosed)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Greater(t, r.l.Token(), l.Token())
		require.NoError(t, r.l.Resign(ctx))
	case <-time.After(electBound):
		t.Fatal("Close did not hand the leadership over")
	}
	for range obs { // closed by Close
	}
}

// Failover of an election under process faults: a leader process SIGKILLed,
// or SIGSTOPped past its lease, is replaced by a candidate of another process
// within the leader's watchdog timeout; the stopped leader's handle says it
// lost at its first check after it resumes; a follower hears of each new
// leader by message. The test logs the failover times (kill -> new leader)
// and the follower notification latencies, p50 and p99.

const (
	electLeaderRole = "elect-leader"
	electLease      = time.Second // the leader process's watchdog timeout
)

// electRounds is how many kill rounds TestElectionFailover makes: 20, or
// $HOLDFAST_ELECT_ROUNDS.
func electRounds(t *testing.T) int {
	n := 20
	if v := os.Getenv("HOLDFAST_ELECT_ROUNDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "HOLDFAST_ELECT_ROUNDS")
	}
	return n
}

// TestElectionFailover: rounds of a leader process SIGKILLed, then a few
// SIGSTOPped past their lease, each replaced by the parent's candidate.
func TestElectionFailover(t *testing.T) {
	if redistest.WorkerRole() == electLeaderRole {
		electLeaderWorker(t)
		return
	}
	srv := redistest.Shared(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 10*time.Minute)
	c := newClient(t, srv.Client(t))
	e := c.NewElection(name)
	follower := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute)).NewElection(name)
	obs := follower.Observe(ctx)
	rdb := srv.Client(t)

	var failover, notify []time.Duration
	kills := electRounds(t)
	for i := range kills + 5 {
		stop := i >= kills
		w := redistest.StartIndexedWorker(t, t.Name(), electLeaderRole, i, "ELECT_ADDR="+srv.Addr, "ELECT_NAME="+name)
		line := w.Expect(t, "LEAD ", 30*time.Second)
		old, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
		require.NoError(t, err, line)
		awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == old })
		got := campaignAsync(ctx, e, "parent")
		awaitSubscribersAtLeast(t, rdb, lua.ChannelName(name), 1) // the candidate waits

		// The fault lands at a point of the leader's renewal cycle spread
		// over the rounds: the delay is the subject, not a synchronisation.
		<-time.After(time.Duration(i%10) * electLease / 10)
		sig := syscall.SIGKILL
		if stop {
			sig = syscall.SIGSTOP
		}
		require.NoError(t, w.Signal(sig))
		faulted := time.Now()
		var r campaignResult
		select {
		case r = <-got:
		case <-time.After(electLease + 5*time.Second):
			t.Fatalf("round %d: the leader was not replaced", i)
		}
		require.NoError(t, r.err)
		require.Greater(t, r.l.Token(), old, "terms strictly increase")
		failover = append(failover, r.at.Sub(faulted))
		_, at := awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == r.l.Token() })
		notify = append(notify, at.Sub(r.at))
		if stop {
			require.NoError(t, w.Signal(syscall.SIGCONT))
			require.NoError(t, w.Signal(syscall.SIGUSR1))
			check := w.Expect(t, "CHECK ", 30*time.Second)
			require.NotContains(t, check, "err=<nil>", "round %d: the resumed leader's handle says valid while another leads", i)
			require.Contains(t, check, rlock.ErrLockLost.Error())
			require.NoError(t, w.Wait(), w.Output())
		} else {
			_ = w.Wait() // killed
		}
		require.NoError(t, r.l.Resign(ctx))
	}
	t.Logf("failover (fault -> new leader; watchdog timeout %v), %d rounds: %s", electLease, len(failover), percentiles(failover))
	t.Logf("follower notification (new leader's Campaign returned -> Observe delivered): %s", percentiles(notify))
	slices.Sort(failover)
	require.LessOrEqual(t, failover[len(failover)-1], electLease+electBound, "a leader replaced later than its lease")
}

// percentiles renders p50, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		return s[min(int(p*float64(len(s))), len(s)-1)].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v", at(0.50), at(0.99), s[len(s)-1].Round(10*time.Microsecond))
}

// electLeaderWorker campaigns, says LEAD <token>, and waits for SIGUSR1 (sent
// after a SIGSTOP and SIGCONT) to report its handle's Err at its first check.
func electLeaderWorker(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("ELECT_ADDR")})
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(electLease))
	require.NoError(t, err)
	defer c.Close()
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, syscall.SIGUSR1)
	defer signal.Stop(resumed)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := c.NewElection(os.Getenv("ELECT_NAME")).Campaign(ctx, "worker")
	require.NoError(t, err)
	fmt.Printf("LEAD %d\n", l.Token())
	select {
	case <-resumed:
	case <-ctx.Done():
	}
	fmt.Printf("CHECK err=%v\n", l.Err())
}

// An election's calls, terms and changes of leader through the client's
// observer.

// electRecorder is a recorder that also keeps the changes of leader.
type electRecorder struct {
	*recorder
	cmu     sync.Mutex
	changes []observe.LeaderChange
}

func (r *electRecorder) LeaderChanged(c observe.LeaderChange) {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.changes = append(r.changes, c)
}

func (r *electRecorder) seen() []observe.LeaderChange {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return append([]observe.LeaderChange(nil), r.changes...)
}

// TestElectionObserved: Campaign, Proclaim, Leader and Resign are calls of
// kind election with their own span names, a term is a hold of kind election
// that ends released, a campaign that waited says so, a cancelled one is
// "canceled", and the follower's changes of leader reach the observer.
func TestElectionObserved(t *testing.T) {
	rec := &electRecorder{recorder: newRecorder()}
	rdb := redistest.Shared(t).Client(t)
	c := newClient(t, rdb, rlock.WithObserver(rec), rlock.WithRecheckInterval(time.Minute))
	other := newClient(t, redistest.Shared(t).Client(t))
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	e := c.NewElection(name)
	obs := e.Observe(ctx)
	awaitInfo(t, obs, electBound, func(rlock.LeaderInfo) bool { return true })

	l, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	got := rec.last(t, observe.KindElection, observe.OpCampaign)
	require.Equal(t, observe.OutcomeOK, got.res.Outcome)
	require.False(t, got.res.Waited)
	require.True(t, rec.read(func(r *recorder) bool { return r.holds[observe.KindElection] == 1 }), "a term is a hold")
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Token == l.Token() })
	require.NoError(t, l.Proclaim(ctx, "b"))
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpProclaim).res.Outcome)
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return i.Value == "b" })
	_, err = e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpLeader).res.Outcome)
	require.NoError(t, l.Resign(ctx))
	require.Equal(t, observe.OutcomeOK, rec.last(t, observe.KindElection, observe.OpResign).res.Outcome)
	require.Equal(t, []observe.HoldOutcome{observe.HoldReleased}, rec.holdEnds(name))
	awaitInfo(t, obs, electBound, func(i rlock.LeaderInfo) bool { return !i.Elected() })
	// The observer hears of a change once the channel has delivered it: just
	// after the receive above, not before.
	require.Eventually(t, func() bool { return len(rec.seen()) == 3 }, electBound, time.Millisecond)
	require.Equal(t, []observe.LeaderChange{
		{Name: name, Elected: true, Token: l.Token(), NewTerm: true},
		{Name: name, Elected: true, Token: l.Token()},
		{Name: name, Token: l.Token()},
	}, rec.seen())

	// A campaign that waits, and one cancelled while waiting.
	held, err := other.NewElection(name).Campaign(ctx, "other")
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = e.Campaign(cctx, "late")
	cancel()
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	got = rec.last(t, observe.KindElection, observe.OpCampaign)
	require.Equal(t, observe.OutcomeTimeout, got.res.Outcome)
	require.True(t, got.res.Waited)
	waiting := campaignAsync(ctx, e, "next")
	require.Eventually(t, func() bool { return rec.read(func(r *recorder) bool { return r.waiting[observe.KindElection] == 1 }) },
		electBound, time.Millisecond, "the campaign waits")
	require.NoError(t, held.Resign(ctx))
	r := <-waiting
	require.NoError(t, r.err)
	require.True(t, rec.last(t, observe.KindElection, observe.OpCampaign).res.Waited)
	require.NoError(t, r.l.Resign(ctx))
	require.Equal(t, "holdfast.Leadership.Resign", observe.SpanName(observe.KindElection, observe.OpResign))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.calls {
		require.True(t, e.ownCtx, "End of %v got Start's ctx", observe.SpanName(e.call.Kind, e.call.Op))
	}
}
