package integration

// No lease is valid past its deadline (issue 17, item 0): a holder process
// frozen past its lease sees the loss at its first check after it resumes, and a
// hand-off whose reply comes after the successor's lease may have run out never
// yields a lease that reports valid.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const (
	pauseRole   = "pause-holder"
	pauseLease  = 300 * time.Millisecond // the holder's watchdog timeout
	pauseFreeze = 700 * time.Millisecond // how long the holder is stopped: past its lease
)

// pauseRounds is how many freezes TestLeasePausedHolderSeesLossAtFirstCheck
// makes: 25, or $HOLDFAST_PAUSE_ROUNDS (the closing note's 100).
func pauseRounds(t *testing.T) int {
	n := 25
	if v := os.Getenv("HOLDFAST_PAUSE_ROUNDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "HOLDFAST_PAUSE_ROUNDS")
	}
	return n
}

// A holder process SIGSTOPped past its lease, while another client takes the
// lock over, sees the loss at its first Lease.Err after SIGCONT: before the
// watchdog's goroutine has run, Err compares the deadline with the clock.
func TestLeasePausedHolderSeesLossAtFirstCheck(t *testing.T) {
	if redistest.WorkerRole() == pauseRole {
		pausedHolder(t)
		return
	}
	srv := redistest.Shared(t)
	c := newClient(t, srv.Client(t)) // the client that takes over: its own lease is not the subject
	name := redistest.Name(t)
	ctx := testCtx(t, 10*time.Minute)
	rounds := pauseRounds(t)
	w := redistest.StartWorker(t, t.Name(), pauseRole, "PAUSE_ADDR="+srv.Addr, "PAUSE_NAME="+name,
		"PAUSE_ROUNDS="+strconv.Itoa(rounds))

	noticed, inconclusive := 0, 0
	for i := range rounds {
		w.Expect(t, fmt.Sprintf("HELD %d", i), 30*time.Second)
		require.NoError(t, w.Signal(syscall.SIGSTOP))
		stopped := time.Now()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := c.NewMutex(name).Lock(lctx) // takes over once the frozen hold expires
		cancel()
		require.NoError(t, err)
		took := time.Since(stopped)
		<-time.After(time.Until(stopped.Add(pauseFreeze))) // the freeze is the subject, not a synchronisation
		require.NoError(t, w.Signal(syscall.SIGCONT))
		require.NoError(t, w.Signal(syscall.SIGUSR1)) // "you were resumed": the worker reports
		line := w.Expect(t, fmt.Sprintf("CHECK %d ", i), 30*time.Second)
		gap, lostBefore, err := parsePauseCheck(line)
		require.NoError(t, err, line)
		t.Logf("round %d: taken over %v after the freeze began; %s", i, took.Round(time.Millisecond), line)
		require.GreaterOrEqual(t, gap, pauseFreeze*3/4, "the worker did not see its freeze")
		switch {
		case lostBefore:
			inconclusive++ // the lease ended before the freeze (a renewal missed on a loaded machine)
		case strings.Contains(line, "err=<nil>"):
			t.Errorf("round %d: the resumed holder's first check found its lease valid, while another client held the lock", i)
		default:
			require.Contains(t, line, rlock.ErrLockLost.Error())
			noticed++
		}
		require.NoError(t, l.Unlock(ctx))
	}
	t.Logf("%d of %d resumed holders saw the loss at their first check (%d rounds inconclusive: lost before the freeze)",
		noticed, rounds-inconclusive, inconclusive)
	require.LessOrEqual(t, inconclusive, rounds/5)
	require.NoError(t, w.Wait(), w.Output())
}

// parsePauseCheck reads "CHECK <i> gap=<ms> lostBefore=<bool> err=<...>".
func parsePauseCheck(line string) (gap time.Duration, lostBefore bool, err error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return 0, false, fmt.Errorf("bad line %q", line)
	}
	ms, err := strconv.Atoi(strings.TrimPrefix(f[2], "gap="))
	if err != nil {
		return 0, false, err
	}
	lostBefore, err = strconv.ParseBool(strings.TrimPrefix(f[3], "lostBefore="))
	return time.Duration(ms) * time.Millisecond, lostBefore, err
}

// pausedHolder is the worker: for each round it takes the lock, says HELD, and
// checks Lease.Err in a tight loop until SIGUSR1 says it was resumed; then it
// reports the longest gap between two checks (its freeze) and what the first
// check after that gap returned.
func pausedHolder(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("PAUSE_ADDR")})
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(pauseLease))
	require.NoError(t, err)
	defer c.Close()
	rounds, err := strconv.Atoi(os.Getenv("PAUSE_ROUNDS"))
	require.NoError(t, err)
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, syscall.SIGUSR1)
	defer signal.Stop(resumed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m := c.NewMutex(os.Getenv("PAUSE_NAME"))
	for i := range rounds {
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		gap, first, lostBefore := checkUntilResumed(l, resumed, func() { fmt.Printf("HELD %d\n", i) })
		fmt.Printf("CHECK %d gap=%d lostBefore=%v err=%v\n", i, gap.Milliseconds(), lostBefore, first)
		_ = l.Unlock(ctx) // lost: ErrNotHeld
	}
}

// checkUntilResumed calls announce (which tells the parent to freeze the
// process) and then l.Err in a loop until resumed, and returns the longest gap
// between two calls (or between the announce and the first call) and the result
// of the first call after it. A call during which the process was stopped
// counts as a gap: the next call is the first after it, which is why the loop
// makes one more call once resumed. lostBefore reports an error seen before any
// long gap.
func checkUntilResumed(l *rlock.Lease, resumed <-chan os.Signal, announce func()) (gap time.Duration, first error, lostBefore bool) {
	prevEnd := time.Now()
	announce()
	var straddled time.Duration // how long the previous call lasted
	for last := false; ; {
		select {
		case <-resumed:
			last = true
		default:
		}
		start := time.Now()
		err := l.Err()
		end := time.Now()
		if straddled > gap {
			gap, first = straddled, err
		}
		if g := start.Sub(prevEnd); g > gap {
			gap, first = g, err
		}
		if err != nil && gap < pauseFreeze/2 && end.Sub(start) < pauseFreeze/2 {
			lostBefore = true // not this call's nor an earlier one's freeze
		}
		if last {
			return gap, first, lostBefore
		}
		straddled, prevEnd = end.Sub(start), end
		runtime.Gosched()
	}
}

// A release that hands the lock to a waiting owner of the same client has its
// reply held back longer than the successor's lease: the handed-off hold expires
// in Redis and another client takes the lock. The successor's Lock must not
// return until it holds the lock for real: never a lease that reports valid
// while the other client holds the lock.
func TestLeaseHandOffReplyDelayedPastLease(t *testing.T) {
	const (
		lease = 500 * time.Millisecond // the successor's watchdog lease
		delay = time.Second
	)
	srv := redistest.Shared(t)
	direct := srv.Client(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdbA := srv.Client(t, func(o *redis.Options) { o.Addr = proxy.Addr; o.ReadTimeout = 10 * time.Second })
	a := newClient(t, rdbA, rlock.WithWatchdogTimeout(lease))
	b := newClient(t, direct)
	ctx := testCtx(t, 2*time.Minute)

	takenOver, valid, dead := 0, 0, 0
	for round := range 5 {
		name := fmt.Sprintf("%s:%d", redistest.Name(t), round)
		octx := rlock.WithOwner(ctx)
		l1, err := a.NewMutex(name).Lock(octx)
		require.NoError(t, err)
		succ := lockAsync(ctx, a.NewMutex(name)) // owner 2 of A: the head of A's queue
		other := lockAsync(ctx, b.NewMutex(name))
		ch := "redisson_lock__channel:{" + name + "}"
		awaitSubscribers(t, direct, ch, 2) // both clients wait

		proxy.SetReplyDelay(delay)
		require.NoError(t, l1.Unlock(octx)) // hands the lock to owner 2; its reply comes late
		proxy.SetReplyDelay(0)

		var lb *rlock.Lease
		select {
		case r := <-other:
			require.NoError(t, r.err)
			lb = r.l
			takenOver++
		case r := <-succ:
			// The other client did not take over: the successor's lease must be real.
			require.NoError(t, r.err)
			require.NoError(t, r.l.Err())
			require.Equal(t, map[string]string{r.l.Holder(): "1"}, holders(t, direct, name))
			valid++
			require.NoError(t, r.l.Unlock(ctx))
			r = <-other
			require.NoError(t, r.err)
			require.NoError(t, r.l.Unlock(ctx))
			continue
		case <-time.After(5 * time.Second):
			t.Fatal("neither waiter got the lock")
		}
		// B holds the lock: A's successor must still be waiting.
		select {
		case r := <-succ:
			dead++
			t.Errorf("round %d: the successor's Lock returned (err %v, lease valid: %v) while the other client held the lock",
				round, r.err, r.l != nil && r.l.Err() == nil)
			require.NoError(t, lb.Unlock(ctx))
			if r.l != nil {
				_ = r.l.Unlock(ctx)
			}
			continue
		case <-time.After(2 * lease):
		}
		require.NoError(t, lb.Err())
		require.NoError(t, lb.Unlock(ctx))
		select {
		case r := <-succ:
			require.NoError(t, r.err)
			require.NoError(t, r.l.Err())
			require.Equal(t, map[string]string{r.l.Holder(): "1"}, holders(t, direct, name))
			valid++
			require.NoError(t, r.l.Unlock(ctx))
		case <-time.After(5 * time.Second):
			t.Fatal("the successor was not served after the other client's release")
		}
	}
	t.Logf("5 delayed hand-offs: the other client took over in %d; leases returned valid: %d; returned while the other client held the lock: %d",
		takenOver, valid, dead)
	require.Equal(t, 5, valid)
}

type lockResult struct {
	l   *rlock.Lease
	err error
}

// lockAsync runs m.Lock with a fresh owner on a goroutine.
func lockAsync(ctx context.Context, m rlock.Locker) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(rlock.WithOwner(ctx))
		ch <- lockResult{l, err}
	}()
	return ch
}
