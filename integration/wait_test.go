package integration

// Tests of issue 3, "Blocking waits on pub/sub", against real Redis: mutual
// exclusion in one process and across processes, waking after a lost pub/sub
// connection or a dead holder, no subscription or hold left behind by cancelled
// waits, wait times, FIFO order within a client, and round trips per acquisition.
// The worker side of the multi-process tests is in wait_worker_test.go.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// waitMono returns CLOCK_MONOTONIC in nanoseconds: one clock for every process
// of the host, unlike time.Now's process-relative monotonic reading.
func waitMono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// waitInterval is one critical section: [start, end] in CLOCK_MONOTONIC ns.
type waitInterval struct {
	start, end int64
	who        string
}

// waitOverlaps returns the critical sections that began before an earlier one
// ended, as descriptions (empty when mutual exclusion held).
func waitOverlaps(ivs []waitInterval) []string {
	sorted := slices.Clone(ivs)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start < sorted[j].start })
	var bad []string
	var last waitInterval
	for i, iv := range sorted {
		if i > 0 && iv.start < last.end {
			bad = append(bad, fmt.Sprintf("%s [%d, %d] overlaps %s [%d, %d] by %v",
				iv.who, iv.start, iv.end, last.who, last.start, last.end, time.Duration(last.end-iv.start)))
		}
		if i == 0 || iv.end > last.end {
			last = iv
		}
	}
	return bad
}

// waitIncr increments the integer at key with a GET and a SET: a read-modify-write
// that loses updates when two critical sections overlap.
func waitIncr(ctx context.Context, rdb *redis.Client, key string) error {
	n, err := rdb.Get(ctx, key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return rdb.Set(ctx, key, n+1, 0).Err()
}

// waitChannels returns the channels with at least one subscriber that match
// pattern, but the watchdogs' tracking channel (__redis__:invalidate).
func waitChannels(t testing.TB, rdb *redis.Client, pattern string) []string {
	t.Helper()
	chs, err := rdb.PubSubChannels(context.Background(), pattern).Result()
	require.NoError(t, err)
	return slices.DeleteFunc(chs, func(ch string) bool { return ch == "__redis__:invalidate" })
}

// killSubscribers kills the server's pub/sub connections but the watchdogs'
// tracking ones (watchdog.NewsRole), as CLIENT KILL TYPE pubsub would, and
// returns how many it killed.
func killSubscribers(t testing.TB, rdb *redis.Client) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, id := range subscriberIDs(t, rdb) {
		if err := rdb.ClientKillByFilter(ctx, "ID", id).Err(); err == nil {
			n++
		}
	}
	return n
}

// subscriberIDs returns the ids of the server's pub/sub connections but the
// watchdogs' tracking ones.
func subscriberIDs(t testing.TB, rdb *redis.Client) []string {
	t.Helper()
	list, err := rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	require.NoError(t, err)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line + " x")
		if id, ok := strings.CutPrefix(f[0], "id="); ok && !slices.ContainsFunc(f, isNewsConn) {
			ids = append(ids, id)
		}
	}
	return ids
}

// waitCounter is a go-redis hook counting what a client sends through the
// command paths (one call per round trip; a pipeline is one call). go-redis also
// runs each new connection's handshake (HELLO, CLIENT SETINFO, CLIENT
// MAINT_NOTIFICATIONS) through these hooks, the subscriber connection's included:
// those are counted apart, in init. SUBSCRIBE and the messages received do not go
// through the hooks at all (checked in TestWaitRoundTripsPerAcquisition).
type waitCounter struct {
	calls    atomic.Int64 // Process + ProcessPipeline calls, handshakes excluded
	cmds     atomic.Int64 // commands in them
	init     atomic.Int64 // handshake calls
	acquires atomic.Int64 // of the calls: acquire scripts (EVALSHA/EVAL with 1 key, 3 args)
	releases atomic.Int64 // of the calls: release scripts (3 keys)
}

// tally counts a script call by its shape: acquire.lua takes 1 key and 3
// arguments (renew.lua with one key takes 2), release.lua 3 keys.
func (h *waitCounter) tally(cmd redis.Cmder) {
	if name := cmd.Name(); name != "evalsha" && name != "eval" {
		return
	}
	args := cmd.Args()
	if len(args) < 3 {
		return
	}
	switch fmt.Sprint(args[2]) {
	case "1":
		if len(args) == 7 { // evalsha sha 1 key lease field expected
			h.acquires.Add(1)
		}
	case "3":
		h.releases.Add(1)
	}
}

// waitHandshake reports whether cmd is part of go-redis' connection handshake.
func waitHandshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client":
		return true
	}
	return false
}

func (h *waitCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *waitCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if waitHandshake(cmd) {
			h.init.Add(1)
			return err
		}
		h.calls.Add(1)
		h.cmds.Add(1)
		h.tally(cmd)
		return err
	}
}

func (h *waitCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !waitHandshake(c) }) {
			h.init.Add(1)
			return err
		}
		h.calls.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return err
	}
}

// waitCounted returns a client of srv whose round trips are counted.
func waitCounted(t testing.TB, srv *redistest.Server) (*redis.Client, *waitCounter) {
	rdb := srv.Client(t)
	h := &waitCounter{}
	rdb.AddHook(h)
	return rdb, h
}

// waitResult is what a Lock or TryLock call in a goroutine returned, and when.
type waitResult struct {
	lease *rlock.Lease
	err   error
	at    time.Time
}

// waitSubscribedAndAttempted waits until the waiter whose client sends its
// commands through counter has subscribed to channel (NUMSUB reaches 1) and has
// made at least attempts round trips: after the attempt that follows the
// confirmation, the waiter sleeps, bounded by the holder's PTTL.
func waitSubscribedAndAttempted(t testing.TB, admin *redis.Client, channel string, counter *waitCounter, attempts int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return numSub(t, admin, channel) == 1 && counter.calls.Load() >= attempts
	}, 10*time.Second, time.Millisecond, "waiter never subscribed and attempted")
}

// waitMonitor records the commands a server executes, in order, through a raw
// MONITOR connection (go-redis' Monitor spins a goroutine on Peek).
type waitMonitor struct {
	conn net.Conn
	mu   sync.Mutex
	log  []string
	done chan struct{}
}

// waitStartMonitor starts MONITOR on addr and returns once the server confirmed it.
func waitStartMonitor(t testing.TB, addr string) *waitMonitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	_, err = io.WriteString(conn, "MONITOR\r\n")
	require.NoError(t, err)
	rd := bufio.NewReader(conn)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	ok, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", ok)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	m := &waitMonitor{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.log = append(m.log, strings.TrimSpace(line))
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.stop() })
	return m
}

// stop closes the connection and returns the commands seen.
func (m *waitMonitor) stop() []string {
	_ = m.conn.Close()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log
}

// lines returns the commands seen so far.
func (m *waitMonitor) lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// waitFirst returns the index of the first line containing all of subs, -1 if none.
func waitFirst(lines []string, subs ...string) int {
	return slices.IndexFunc(lines, func(l string) bool {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				return false
			}
		}
		return true
	})
}

// 1. N goroutines of one process, one Client: exact count and no overlap.
func TestWaitMutualExclusionOneProcess(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	counter := name + ":counter"
	const goroutines, iters = 16, 50

	begin := time.Now()
	ivs, errs := waitMutexRun(ctx, rdb, c, name, counter, "local", goroutines, iters)
	elapsed := time.Since(begin)
	for _, err := range errs {
		t.Error(err)
	}
	require.False(t, t.Failed())

	got, err := rdb.Get(ctx, counter).Int()
	require.NoError(t, err)
	bad := waitOverlaps(ivs)
	t.Logf("%d goroutines x %d cycles in %v (%v per acquisition): counter %d, %d intervals, %d overlaps",
		goroutines, iters, elapsed.Round(time.Millisecond), (elapsed / (goroutines * iters)).Round(time.Microsecond),
		got, len(ivs), len(bad))
	require.Equal(t, goroutines*iters, got, "lost updates: critical sections overlapped")
	require.Len(t, ivs, goroutines*iters)
	require.Empty(t, bad)
	require.Zero(t, rdb.Exists(ctx, name).Val(), "lock left behind")
}

// 2. Three worker processes x 4 goroutines plus the parent's 4: exact count and
// no overlapping critical sections on the host's monotonic clock.
func TestWaitMutualExclusionAcrossProcesses(t *testing.T) {
	if redistest.WorkerRole() == waitMutexRole {
		waitMutexWorker(t)
		return
	}
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	counter, startKey := name+":counter", name+":start"
	ctx := testCtx(t, 90*time.Second)
	const workers = 3

	ws := redistest.RunWorkers(t, t.Name(), waitMutexRole, workers,
		"WAIT_ADDR="+srv.Addr, "WAIT_NAME="+name, "WAIT_COUNTER="+counter, "WAIT_START="+startKey,
		"WAIT_GOROUTINES="+strconv.Itoa(waitGoroutines), "WAIT_ITERS="+strconv.Itoa(waitIters))
	for _, w := range ws {
		w.Expect(t, "READY", 60*time.Second)
	}
	// Release the workers and start the parent's goroutines at the same moment.
	for range workers {
		require.NoError(t, rdb.RPush(ctx, startKey, "go").Err())
	}
	begin := time.Now()
	ivs, errs := waitMutexRun(ctx, rdb, c, name, counter, "parent", waitGoroutines, waitIters)
	for _, err := range errs {
		t.Error(err)
	}

	for _, w := range ws {
		timeout := time.After(60 * time.Second)
		n := 0
	read:
		for {
			select {
			case line, ok := <-w.Lines():
				if !ok {
					break read
				}
				iv, ok, err := waitParseInterval(line, fmt.Sprintf("w%d", w.Index))
				require.NoError(t, err)
				if ok {
					ivs = append(ivs, iv)
					n++
				}
			case <-timeout:
				t.Fatalf("worker %d did not finish; output:\n%s", w.Index, w.Output())
			}
		}
		require.NoError(t, w.Wait(), "worker %d failed; output:\n%s", w.Index, w.Output())
		require.Equal(t, waitGoroutines*waitIters, n, "intervals reported by worker %d", w.Index)
	}
	elapsed := time.Since(begin)

	total := (workers + 1) * waitGoroutines * waitIters
	got, err := rdb.Get(ctx, counter).Int()
	require.NoError(t, err)
	bad := waitOverlaps(ivs)
	t.Logf("%d processes x %d goroutines x %d cycles in %v: counter %d of %d, %d intervals, %d violations (overlaps)",
		workers+1, waitGoroutines, waitIters, elapsed.Round(time.Millisecond), got, total, len(ivs), len(bad))
	for i, b := range bad {
		if i == 10 {
			break
		}
		t.Log(b)
	}
	require.Equal(t, total, got, "lost updates: critical sections overlapped")
	require.Len(t, ivs, total)
	require.Empty(t, bad)
	require.Zero(t, rdb.Exists(ctx, name).Val(), "lock left behind")
}

// 3. A waiter whose pub/sub connection is killed right before the unlock still
// acquires: go-redis re-subscribes and the hub wakes the waiters, or, at worst,
// the holder's PTTL bounds the sleep.
func TestWaitPubSubKilledBeforeUnlock(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	holder := newClient(t, srv.Client(t))
	rdbW, counter := waitCounted(t, srv)
	waiter := newClient(t, rdbW)
	ctx := testCtx(t, 60*time.Second)
	const lease = 3 * time.Second

	for round := range 3 {
		name := redistest.Name(t)
		channel := lua.ChannelName(name)
		acquired := time.Now()
		lh, err := holder.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(lease))
		require.NoError(t, err)

		counter.calls.Store(0)
		res := make(chan waitResult, 1)
		go func() {
			l, err := waiter.NewMutex(name).Lock(ctx)
			res <- waitResult{l, err, time.Now()}
		}()
		// The initial attempt, then the attempt after the confirmation: the waiter
		// now sleeps until a wake-up or the holder's PTTL.
		waitSubscribedAndAttempted(t, admin, channel, counter, 2)

		mon := waitStartMonitor(t, srv.Addr)
		killed := killSubscribers(t, admin)
		require.EqualValues(t, 1, killed, "one subscriber connection (the waiter's)")
		unlocked := time.Now()
		require.NoError(t, lh.Unlock(ctx))

		select {
		case r := <-res:
			require.NoError(t, r.err)
			took := r.at.Sub(unlocked)
			left := lease - unlocked.Sub(acquired)
			// In the server's order of execution, did the release (the only
			// command naming the unlock latch) run before the re-subscription?
			// Then its message was published to nobody.
			// MONITOR's feed may lag behind the replies: wait for both lines.
			var release, resub int
			require.Eventually(t, func() bool {
				cmds := mon.lines()
				release = waitFirst(cmds, `"redisson_unlock_latch:{`+name+`}`)
				resub = waitFirst(cmds, `"subscribe"`, `"`+channel+`"`)
				return release >= 0 && resub >= 0
			}, 5*time.Second, time.Millisecond, "MONITOR saw the release at %d and the re-subscription at %d:\n%s",
				release, resub, strings.Join(mon.lines(), "\n"))
			mon.stop()
			how := "message delivered after the re-subscription"
			if release < resub {
				how = "message lost (published before the re-subscription)"
			}
			t.Logf("round %d: waiter acquired %v after the unlock; %s; holder's lease had %v left",
				round, took.Round(time.Microsecond), how, left.Round(time.Millisecond))
			require.Less(t, took, lease+2*time.Second)
			require.NoError(t, r.lease.Unlock(ctx))
		case <-time.After(lease + 5*time.Second):
			t.Fatalf("round %d: waiter not woken within %v of the unlock", round, lease+5*time.Second)
		}
	}
}

// 4. Many cycles over a few names leave no channel subscribed once the hub's
// linger time has passed.
func TestWaitNoChannelsLeftAfterManyCycles(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := testCtx(t, 60*time.Second)
	base := redistest.Name(t)
	const goroutines, cycles, names = 32, 5000, 5
	mutexes := make([]*rlock.Mutex, names)
	for i := range mutexes {
		mutexes[i] = c.NewMutex(base + ":" + strconv.Itoa(i))
	}

	var done atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			for done.Add(1) <= cycles {
				m := mutexes[rand.IntN(names)]
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("goroutine %d: Lock %s: %v", g, m.Name(), err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("goroutine %d: Unlock %s: %v", g, m.Name(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	ran := time.Since(begin)
	require.False(t, t.Failed())

	after := waitChannels(t, admin, "*")
	end := time.Now()
	require.Eventually(t, func() bool { return len(waitChannels(t, admin, "*")) == 0 }, 5*time.Second, 10*time.Millisecond,
		"channels still subscribed: %v", waitChannels(t, admin, "*"))
	t.Logf("%d cycles by %d goroutines over %d names in %v; %d channels subscribed right after, none %v later",
		cycles, goroutines, names, ran.Round(time.Millisecond), len(after), time.Since(end).Round(time.Millisecond))
	for _, m := range mutexes {
		require.Zero(t, admin.Exists(ctx, m.Name()).Val(), "lock %s left behind", m.Name())
	}
}

// waitGiveUp runs one waiter that gives up: i%4 picks how (ctx cancelled, ctx
// deadline, or TryLock with a wait time), at a random moment within maxWait.
// Some waiters carry an owner in ctx, some do not; the first four give up
// within a few milliseconds.
func waitGiveUp(ctx context.Context, m *rlock.Mutex, i int, maxWait time.Duration) (lease *rlock.Lease, err, ctxErr error, how string) {
	if i%2 == 1 {
		ctx = rlock.WithOwner(ctx)
	}
	d := rand.N(maxWait)
	if i < 4 {
		// Give up within the first round trips: while the first attempts or the
		// subscription are in flight.
		d = rand.N(3 * time.Millisecond)
	}
	switch i % 4 {
	case 0:
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := time.AfterFunc(d, cancel)
		defer stop.Stop()
		lease, err = m.Lock(wctx)
		return lease, err, wctx.Err(), fmt.Sprintf("Lock, cancel after %v", d)
	case 1:
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		lease, err = m.Lock(wctx)
		return lease, err, wctx.Err(), fmt.Sprintf("Lock, deadline %v", d)
	default:
		d = max(d, time.Millisecond) // zero would mean a single attempt
		lease, err = m.TryLock(ctx, rlock.WithWaitTime(d))
		return lease, err, nil, fmt.Sprintf("TryLock, wait %v", d)
	}
}

// waitCheckGaveUp checks the error of a waiter that gave up: it matches
// ErrNotAcquired, and ctx.Err() when ctx ended the wait. A ctx that ends while an
// attempt is in flight yields today a bare ctx error (without ErrNotAcquired):
// TestWaitCancelDuringAttempt pins that case deterministically, so here it is only
// counted in inFlight, to keep this randomized test from flaking on it.
func waitCheckGaveUp(t *testing.T, who string, err, ctxErr error, inFlight *atomic.Int64) {
	switch {
	case errors.Is(err, rlock.ErrNotAcquired):
		if ctxErr != nil && !errors.Is(err, ctxErr) {
			t.Errorf("%s: error %q does not match ctx.Err() %v", who, err, ctxErr)
		}
	case ctxErr != nil && errors.Is(err, ctxErr):
		inFlight.Add(1)
	default:
		t.Errorf("%s: error %q does not match ErrNotAcquired", who, err)
	}
}

// waitLeftNothing checks that name is free, that no channel stays subscribed,
// that a fresh TryLock succeeds at once, and that the waiters' client sends
// nothing more (no renewal of a forgotten hold).
func waitLeftNothing(t *testing.T, admin *redis.Client, c *rlock.Client, counter *waitCounter, name string, renew time.Duration) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	require.Zero(t, admin.Exists(ctx, name).Val(), "a hold was left behind: %v", holders(t, admin, name))
	begin := time.Now()
	require.Eventually(t, func() bool { return len(waitChannels(t, admin, "*")) == 0 }, 5*time.Second, 10*time.Millisecond,
		"channels still subscribed: %v", waitChannels(t, admin, "*"))
	t.Logf("no channel subscribed %v after the last waiter returned", time.Since(begin).Round(time.Millisecond))
	require.Zero(t, admin.Exists(ctx, name).Val(), "a hold appeared: %v", holders(t, admin, name))

	// No renewal: over three renewal intervals the client sends nothing, and
	// the server runs no script (the renewals of a client with tracking go
	// through its tracker's connections, which the hook does not see).
	before, scripts := counter.calls.Load(), wdCommandStats(t, admin)["evalsha"]
	<-time.After(3 * renew)
	require.Equal(t, before, counter.calls.Load(), "the client still sends commands (a renewal of a forgotten hold?)")
	require.Equal(t, scripts, wdCommandStats(t, admin)["evalsha"], "the server still runs scripts (a renewal of a forgotten hold?)")

	start := time.Now()
	l, err := c.NewMutex(name).TryLock(ctx)
	require.NoError(t, err, "fresh TryLock")
	t.Logf("fresh TryLock acquired in %v", time.Since(start).Round(time.Microsecond))
	require.NoError(t, l.Unlock(ctx))
}

// 5. Waiters that give up (ctx cancelled, ctx deadline, TryLock wait time) leave
// no hold, no subscription and no renewal behind.
func TestWaitCancelledLeavesNothing(t *testing.T) {
	const waiters = 20
	const watchdog = 600 * time.Millisecond
	const renew = watchdog / 3

	t.Run("HolderOfAnotherClient", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(t)
		holder := newClient(t, srv.Client(t))
		rdbW, counter := waitCounted(t, srv)
		var lost atomic.Int64
		c := newClient(t, rdbW, rlock.WithWatchdogTimeout(watchdog), rlock.WithOnLost(func(string, error) { lost.Add(1) }))
		ctx := testCtx(t, 30*time.Second)
		name := redistest.Name(t)
		var inFlight atomic.Int64

		lh, err := holder.NewMutex(name).TryLock(ctx)
		require.NoError(t, err)
		m := c.NewMutex(name)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				l, err, ctxErr, how := waitGiveUp(ctx, m, i, 300*time.Millisecond)
				if err == nil {
					t.Errorf("waiter %d (%s) acquired a held lock", i, how)
					_ = l.Unlock(ctx)
					return
				}
				waitCheckGaveUp(t, fmt.Sprintf("waiter %d (%s)", i, how), err, ctxErr, &inFlight)
			})
		}
		wg.Wait()
		require.Equal(t, 1, len(holders(t, admin, name)), "only the holder")
		require.NoError(t, lh.Unlock(ctx))
		waitLeftNothing(t, admin, c, counter, name, renew)
		require.Zero(t, lost.Load(), "holds reported lost")
		t.Logf("%d of %d waiters got a bare ctx error (cancelled during an attempt)", inFlight.Load(), waiters)
	})

	// The holder is an owner of the waiters' own client and unlocks at a random
	// moment, so that hand-offs race the cancellations: a waiter may then get the
	// lock (and unlocks it at once), but nothing may be left behind.
	t.Run("HandOffsRaceCancellations", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(t)
		rdbW, counter := waitCounted(t, srv)
		var lost atomic.Int64
		c := newClient(t, rdbW, rlock.WithWatchdogTimeout(watchdog), rlock.WithOnLost(func(string, error) { lost.Add(1) }))
		ctx := testCtx(t, 30*time.Second)
		var acquiredTotal, failedTotal int
		var inFlight atomic.Int64
		for round := range 5 {
			name := redistest.Name(t)
			m := c.NewMutex(name)
			lh, err := m.TryLock(ctx)
			require.NoError(t, err)
			var acquired, failed atomic.Int64
			var wg sync.WaitGroup
			for i := range waiters {
				wg.Go(func() {
					l, err, ctxErr, how := waitGiveUp(ctx, m, i, 200*time.Millisecond)
					if err == nil {
						acquired.Add(1)
						if err := l.Unlock(ctx); err != nil {
							t.Errorf("round %d waiter %d (%s): Unlock: %v", round, i, how, err)
						}
						return
					}
					failed.Add(1)
					waitCheckGaveUp(t, fmt.Sprintf("round %d waiter %d (%s)", round, i, how), err, ctxErr, &inFlight)
				})
			}
			unlockAt := rand.N(150 * time.Millisecond)
			<-time.After(unlockAt) // a random moment among the cancellations, not a synchronisation
			require.NoError(t, lh.Unlock(ctx))
			wg.Wait()
			t.Logf("round %d: holder unlocked after %v; %d waiters acquired, %d gave up", round, unlockAt.Round(time.Millisecond), acquired.Load(), failed.Load())
			acquiredTotal += int(acquired.Load())
			failedTotal += int(failed.Load())
			require.Zero(t, admin.Exists(ctx, name).Val(), "round %d: a hold was left behind: %v", round, holders(t, admin, name))
		}
		t.Logf("over 5 rounds: %d waiters acquired, %d gave up, %d of them with a bare ctx error (cancelled during an attempt)",
			acquiredTotal, failedTotal, inFlight.Load())
		waitLeftNothing(t, admin, c, counter, redistest.Name(t), renew)
		require.Zero(t, lost.Load(), "holds reported lost")
	})
}

// 5b. A waiter whose ctx ends while its attempt is in flight (the reply is held
// back by a proxy) gives up like any other cancelled waiter: its error matches
// ErrNotAcquired and ctx.Err(), and the acquisition its attempt may have made is
// undone. The holder's fixed lease runs out just before the attempt, so the
// attempt does acquire on the server: only the undo frees the lock again.
func TestWaitCancelDuringAttempt(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	holder := newClient(t, srv.Client(t))
	proxy := redistest.NewProxy(t, srv.Addr)
	rdbW := redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdbW.Close() })
	counter := &waitCounter{}
	rdbW.AddHook(counter)
	c := newClient(t, rdbW)
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	const lease = time.Second

	_, err := holder.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(lease))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan waitResult, 1)
	go func() {
		l, err := c.NewMutex(name).Lock(wctx)
		res <- waitResult{l, err, time.Now()}
	}()
	waitSubscribedAndAttempted(t, admin, lua.ChannelName(name), counter, 2)

	// The waiter sleeps until the holder's PTTL has passed, then attempts: that
	// attempt's reply is swallowed, and ctx is cancelled while it is awaited.
	proxy.DropReplies(1)
	require.Eventually(t, func() bool { return proxy.PendingDrops() == 0 }, 5*time.Second, time.Millisecond,
		"the waiter's attempt after the lease never reached the server")
	during := holders(t, admin, name)
	cancelled := time.Now()
	cancel()
	var r waitResult
	select {
	case r = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("Lock did not return after its ctx was cancelled")
	}
	require.Error(t, r.err)
	t.Logf("lock hash while the attempt's reply was held back: %v", during)
	t.Logf("Lock cancelled during an in-flight attempt returned %v after the cancel: %v", r.at.Sub(cancelled).Round(time.Millisecond), r.err)
	require.ErrorIs(t, r.err, context.Canceled)
	require.Eventually(t, func() bool { return admin.Exists(ctx, name).Val() == 0 }, 5*time.Second, time.Millisecond,
		"the acquisition made by the cancelled attempt was not undone: %v", holders(t, admin, name))
	require.ErrorIs(t, r.err, rlock.ErrNotAcquired, "a wait ended by ctx must match ErrNotAcquired too (Mutex.Lock's doc)")
}

// 6. A holder that dies without unlocking is taken over within its lease: there
// is no release message, the PTTL bound wakes the waiter.
func TestWaitDeadHolderTakenOver(t *testing.T) {
	t.Run("FixedLeaseConnectionClosed", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(t)
		hrdb := srv.Client(t)
		hc, err := rlock.New(hrdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = hc.Close() })
		rdbW, counter := waitCounted(t, srv)
		waiter := newClient(t, rdbW)
		ctx := testCtx(t, 30*time.Second)
		name := redistest.Name(t)
		const lease = time.Second

		acquired := time.Now()
		_, err = hc.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(lease))
		require.NoError(t, err)
		res := make(chan waitResult, 1)
		go func() {
			l, err := waiter.NewMutex(name).Lock(ctx)
			res <- waitResult{l, err, time.Now()}
		}()
		waitSubscribedAndAttempted(t, admin, lua.ChannelName(name), counter, 2)
		closed := time.Now()
		require.NoError(t, hrdb.Close()) // the holder "dies": no unlock is sent (its Close could not release)

		select {
		case r := <-res:
			require.NoError(t, r.err)
			took := r.at.Sub(acquired)
			t.Logf("fixed lease %v: waiter acquired %v after the holder's acquisition (%v after its client closed)",
				lease, took.Round(time.Millisecond), r.at.Sub(closed).Round(time.Millisecond))
			require.GreaterOrEqual(t, took, lease-50*time.Millisecond, "acquired before the holder's lease ran out")
			require.Less(t, took, lease+2*time.Second)
			require.NoError(t, r.lease.Unlock(ctx))
		case <-time.After(lease + 5*time.Second):
			t.Fatal("waiter not woken by the end of the holder's lease")
		}
	})

	t.Run("WatchdogHolderKilled", func(t *testing.T) {
		if redistest.WorkerRole() == waitHolderRole {
			waitHolderWorker(t)
			return
		}
		srv := redistest.Start(t)
		admin := srv.Client(t)
		rdbW, counter := waitCounted(t, srv)
		waiter := newClient(t, rdbW)
		ctx := testCtx(t, 60*time.Second)
		name := redistest.Name(t)
		const watchdog = time.Second

		w := redistest.StartWorker(t, t.Name(), waitHolderRole, "WAIT_ADDR="+srv.Addr, "WAIT_NAME="+name,
			"WAIT_WATCHDOG="+watchdog.String())
		w.Expect(t, "HELD", 60*time.Second)
		res := make(chan waitResult, 1)
		go func() {
			l, err := waiter.NewMutex(name).Lock(ctx)
			res <- waitResult{l, err, time.Now()}
		}()
		waitSubscribedAndAttempted(t, admin, lua.ChannelName(name), counter, 2)

		// While the holder lives, its watchdog keeps the lock past its 1 s lease.
		select {
		case r := <-res:
			t.Fatalf("waiter acquired (err %v) while the holder's watchdog was alive", r.err)
		case <-time.After(watchdog + watchdog/2):
		}
		pttl := admin.PTTL(ctx, name).Val()
		require.Positive(t, pttl, "the holder's lock is renewed")

		killed := time.Now()
		require.NoError(t, w.Signal(syscall.SIGKILL))
		<-w.Done()
		select {
		case r := <-res:
			require.NoError(t, r.err)
			took := r.at.Sub(killed)
			t.Logf("watchdog timeout %v: waiter acquired %v after SIGKILL of the holder process (PTTL %v shortly before)",
				watchdog, took.Round(time.Millisecond), pttl)
			require.Less(t, took, watchdog+2*time.Second)
			require.NoError(t, r.lease.Unlock(ctx))
		case <-time.After(watchdog + 5*time.Second):
			t.Fatal("waiter not woken after the holder was killed")
		}
	})
}

// 7. TryLock honours its wait time, and without one makes a single attempt and
// subscribes to nothing.
func TestWaitWaitTimeHonoured(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	holder := newClient(t, srv.Client(t))
	rdbW, counter := waitCounted(t, srv)
	c := newClient(t, rdbW)
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	channel := lua.ChannelName(name)

	lh, err := holder.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(30*time.Second))
	require.NoError(t, err)
	m := c.NewMutex(name)

	// Without a wait time: one attempt, no subscription.
	start := time.Now()
	_, err = m.TryLock(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.Less(t, took, time.Second)
	calls := counter.calls.Load()
	require.LessOrEqual(t, calls, int64(2), "one attempt (EVALSHA, plus EVAL if the script was not loaded)")
	require.Zero(t, numSub(t, admin, channel))
	require.Empty(t, subscriberIDs(t, admin), "no subscriber connection (the trackers' own left out)")
	t.Logf("TryLock without wait time: ErrNotAcquired after %v, %d round trip(s), NUMSUB 0", took.Round(time.Microsecond), calls)

	// With a wait time of 3 s.
	const wait = 3 * time.Second
	start = time.Now()
	_, err = m.TryLock(ctx, rlock.WithWaitTime(wait))
	took = time.Since(start)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.NoError(t, ctx.Err())
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	t.Logf("TryLock(WithWaitTime(%v)): ErrNotAcquired after %v (%v)", wait, took.Round(time.Millisecond), err)
	require.GreaterOrEqual(t, took, wait)
	require.Less(t, took, wait+500*time.Millisecond)

	awaitSubscribers(t, admin, channel, 0)
	require.NoError(t, lh.Unlock(ctx))
}

// 8. Within one client, waiters get the lock in arrival order and a goroutine
// that releases and locks again does not barge ahead of the queue.
func TestWaitFIFOWithinClient(t *testing.T) {
	t.Run("Ordered", func(t *testing.T) {
		rdb, c, name := setup(t, watchWaits())
		ctx := testCtx(t, 30*time.Second)
		m := c.NewMutex(name)

		la, err := m.Lock(ctx)
		require.NoError(t, err)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for i, who := range []string{"B", "C", "D"} {
			wg.Go(func() {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("%s: Lock: %v", who, err)
					return
				}
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("%s: Unlock: %v", who, err)
				}
			})
			// Start the next one only once this one is queued.
			awaitParked(t, name, i+1)
		}
		awaitSubscribers(t, rdb, lua.ChannelName(name), 1)

		// A releases and asks again at once: it must queue behind B, C and D.
		require.NoError(t, la.Unlock(ctx))
		la, err = m.Lock(ctx)
		require.NoError(t, err)
		mu.Lock()
		order = append(order, "A")
		got := slices.Clone(order)
		mu.Unlock()
		require.NoError(t, la.Unlock(ctx))
		wg.Wait()
		t.Logf("acquisition order: %v", got)
		require.Equal(t, []string{"B", "C", "D", "A"}, got)
	})

	t.Run("Statistical", func(t *testing.T) {
		_, c, name := setup(t)
		ctx := testCtx(t, 60*time.Second)
		m := c.NewMutex(name)
		const goroutines, total = 8, 1600

		var mu sync.Mutex
		var seq []int
		perG := make([]int, goroutines)
		var inLock atomic.Int64 // goroutines inside Lock
		barges, repeats := 0, 0
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for {
					inLock.Add(1)
					l, err := m.Lock(ctx)
					inLock.Add(-1)
					if err != nil {
						t.Errorf("goroutine %d: Lock: %v", g, err)
						return
					}
					mu.Lock()
					stop := len(seq) >= total
					if !stop {
						if n := len(seq); n > 0 && seq[n-1] == g {
							repeats++
							if inLock.Load() > 0 {
								barges++
							}
						}
						seq = append(seq, g)
						perG[g]++
					}
					mu.Unlock()
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("goroutine %d: Unlock: %v", g, err)
						return
					}
					if stop {
						return
					}
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())
		lo, hi := slices.Min(perG), slices.Max(perG)
		t.Logf("%d acquisitions by %d goroutines of one client: per goroutine %v (max/min %.2f); "+
			"%d consecutive re-acquisitions, %d of them while others waited",
			total, goroutines, perG, float64(hi)/float64(max(lo, 1)), repeats, barges)
		require.Positive(t, lo)
		require.LessOrEqual(t, float64(hi)/float64(lo), 2.0)
		require.LessOrEqual(t, barges, total/100, "a releasing goroutine got the lock back while others waited")
	})
}

// 9. Round trips per acquisition at 8 goroutines with a 1 ms critical section.
func TestWaitRoundTripsPerAcquisition(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	rdb, counter := waitCounted(t, srv)
	c := newClient(t, rdb)
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	m := c.NewMutex(name)

	// The subscriber connection does not go through the command hooks.
	ps := rdb.Subscribe(ctx, name+":probe")
	_, err := ps.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, admin.Publish(ctx, name+":probe", "x").Err())
	msg, err := ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, "x", msg.Payload)
	require.NoError(t, ps.Close())
	require.Zero(t, counter.calls.Load(), "SUBSCRIBE and its messages are not counted")
	t.Logf("subscriber connection: SUBSCRIBE and a message went through no hook; its handshake did (%d calls, not counted)", counter.init.Load())

	// Warm up: load the scripts.
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	const goroutines, each = 8, 40
	counter.calls.Store(0)
	counter.cmds.Store(0)
	counter.acquires.Store(0)
	counter.releases.Store(0)
	var wg sync.WaitGroup
	begin := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("goroutine %d: Lock: %v", g, err)
					return
				}
				<-time.After(time.Millisecond) // the critical section
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("goroutine %d: Unlock: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	require.False(t, t.Failed())
	n := goroutines * each
	perAcq := float64(counter.calls.Load()) / float64(n)
	t.Logf("%d acquisitions by %d goroutines (1 ms critical section) in %v: %d round trips (%d commands: %d acquire attempts, %d releases), "+
		"%.2f round trips per acquisition (unlock included)",
		n, goroutines, elapsed.Round(time.Millisecond), counter.calls.Load(), counter.cmds.Load(),
		counter.acquires.Load(), counter.releases.Load(), perAcq)
	require.LessOrEqual(t, perAcq, 3.0)
}

// The overlap check used by the mutual exclusion tests is not vacuous.
func TestWaitOverlapDetector(t *testing.T) {
	require.Empty(t, waitOverlaps([]waitInterval{{20, 30, "c"}, {0, 10, "a"}, {10, 20, "b"}}), "touching intervals do not overlap")
	require.Len(t, waitOverlaps([]waitInterval{{0, 10, "a"}, {20, 30, "b"}, {5, 8, "c"}}), 1)
	require.Len(t, waitOverlaps([]waitInterval{{0, 100, "a"}, {10, 20, "b"}, {30, 40, "c"}}), 2, "both inside a")
}

// isNewsConn reports whether a CLIENT LIST field names a tracker's connection
// that hears invalidations.
func isNewsConn(field string) bool {
	return strings.HasPrefix(field, "name=") && strings.HasSuffix(field, ":"+watchdog.NewsRole)
}
