package integration

// Failover of an election under process faults: a leader process SIGKILLed,
// or SIGSTOPped past its lease, is replaced by a candidate of another process
// within the leader's watchdog timeout; the stopped leader's handle says it
// lost at its first check after it resumes; a follower hears of each new
// leader by message. The test logs the failover times (kill -> new leader)
// and the follower notification latencies, p50 and p99.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

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
		waitCandidate(t, ctx, rdb, lua.ChannelName(name))

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

// waitCandidate waits until someone listens on channel: the candidate waits.
func waitCandidate(t *testing.T, ctx context.Context, rdb *redis.Client, channel string) {
	t.Helper()
	awaitSubscribersAtLeast(t, rdb, channel, 1)
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
