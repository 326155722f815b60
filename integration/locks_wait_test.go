package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
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

// Blocking waits on pub/sub, against real Redis: mutual
// exclusion in one process and across processes, waking after a lost pub/sub
// connection or a dead holder, no subscription or hold left behind by cancelled
// waits, wait times, FIFO order within a client, and round trips per acquisition.
// The worker side of the multi-process tests is in wait_worker_test.go.

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
		res := lockAsync(ctx, waiter.NewMutex(name))
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
			require.NoError(t, r.v.Unlock(ctx))
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
	// Without client tracking: a tracking waiter also follows the key, and
	// the key's expiry (the holder's lease) makes it read the key on its
	// tracked connection, through the proxy, at the moment the attempt is
	// sent: the reply the proxy drops must be the attempt's, not that read's.
	c := newClient(t, rdbW, rlock.WithTracking(false))
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	const lease = time.Second

	_, err := holder.NewMutex(name).TryLock(ctx, rlock.WithLeaseTime(lease))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := lockAsync(wctx, c.NewMutex(name))
	waitSubscribedAndAttempted(t, admin, lua.ChannelName(name), counter, 2)

	// The waiter sleeps until the holder's PTTL has passed, then attempts: that
	// attempt's reply is swallowed, and ctx is cancelled while it is awaited.
	proxy.DropReplies(1)
	require.Eventually(t, func() bool { return proxy.PendingDrops() == 0 }, 5*time.Second, time.Millisecond,
		"the waiter's attempt after the lease never reached the server")
	during := holders(t, admin, name)
	cancelled := time.Now()
	cancel()
	r := awaitAsync(t, res, 10*time.Second, "Lock after its ctx was cancelled")
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
		res := lockAsync(ctx, waiter.NewMutex(name))
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
			require.NoError(t, r.v.Unlock(ctx))
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
		res := lockAsync(ctx, waiter.NewMutex(name))
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
			require.NoError(t, r.v.Unlock(ctx))
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

// Worker side of the multi-process tests of wait_test.go. A worker is the test
// binary re-executed by redistest with WorkerEnv set; it connects to the server
// named in its environment (never to a Shared server of its own) and reports on
// stdout, one line per event.

const (
	waitMutexRole  = "wait-mutex"  // TestWaitMutualExclusionAcrossProcesses
	waitHolderRole = "wait-holder" // TestWaitDeadHolderTakenOver/WatchdogHolderKilled

	waitGoroutines = 4  // goroutines per process in the mutual exclusion test
	waitIters      = 50 // critical sections per goroutine
)

// waitWorkerClient returns a go-redis client of the server at $WAIT_ADDR,
// closed at the end of the worker's test.
func waitWorkerClient(t *testing.T) *redis.Client {
	addr := os.Getenv("WAIT_ADDR")
	require.NotEmpty(t, addr, "WAIT_ADDR")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// waitMutexRun runs goroutines x iters critical sections on name, each an
// increment of counter by GET and SET, and returns their intervals.
func waitMutexRun(ctx context.Context, rdb *redis.Client, c *rlock.Client, name, counter, who string, goroutines, iters int) ([]waitInterval, []error) {
	m := c.NewMutex(name)
	var mu sync.Mutex
	var ivs []waitInterval
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range iters {
				l, err := m.Lock(ctx)
				if err != nil {
					fail(fmt.Errorf("%s/g%d: Lock: %w", who, g, err))
					return
				}
				start := waitMono()
				err = waitIncr(ctx, rdb, counter)
				end := waitMono()
				mu.Lock()
				ivs = append(ivs, waitInterval{start, end, fmt.Sprintf("%s/g%d", who, g)})
				mu.Unlock()
				if err != nil {
					fail(fmt.Errorf("%s/g%d: increment: %w", who, g, err))
				}
				if err := l.Unlock(ctx); err != nil {
					fail(fmt.Errorf("%s/g%d: Unlock: %w", who, g, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return ivs, errs
}

// waitParseInterval parses a worker's "IV <start> <end>" line; ok is false for
// other lines.
func waitParseInterval(line, who string) (iv waitInterval, ok bool, err error) {
	rest, found := strings.CutPrefix(line, "IV ")
	if !found {
		return iv, false, nil
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return iv, false, fmt.Errorf("bad interval line %q", line)
	}
	iv.start, err = strconv.ParseInt(f[0], 10, 64)
	if err == nil {
		iv.end, err = strconv.ParseInt(f[1], 10, 64)
	}
	iv.who = who + "/" + f[2]
	return iv, err == nil, err
}

// waitMutexWorker is one process of TestWaitMutualExclusionAcrossProcesses: it
// says READY, waits for the start signal (a BLPOP on $WAIT_START), runs its
// critical sections with its own rlock.Client and prints them as
// "IV <start> <end> <goroutine>" lines.
func waitMutexWorker(t *testing.T) {
	rdb := waitWorkerClient(t)
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	goroutines, err := strconv.Atoi(os.Getenv("WAIT_GOROUTINES"))
	require.NoError(t, err)
	iters, err := strconv.Atoi(os.Getenv("WAIT_ITERS"))
	require.NoError(t, err)

	fmt.Println("READY")
	require.NoError(t, rdb.BLPop(ctx, 60*time.Second, os.Getenv("WAIT_START")).Err())
	ivs, errs := waitMutexRun(ctx, rdb, c, os.Getenv("WAIT_NAME"), os.Getenv("WAIT_COUNTER"), "worker", goroutines, iters)
	for _, iv := range ivs {
		fmt.Printf("IV %d %d %s\n", iv.start, iv.end, strings.TrimPrefix(iv.who, "worker/"))
	}
	for _, err := range errs {
		t.Error(err)
	}
	fmt.Println("DONE", len(ivs))
}

// waitHolderWorker is the holder of TestWaitDeadHolderTakenOver/WatchdogHolderKilled:
// it takes $WAIT_NAME with a watchdog lease of $WAIT_WATCHDOG, says HELD, and
// keeps it (renewed) until it is killed.
func waitHolderWorker(t *testing.T) {
	rdb := waitWorkerClient(t)
	wd, err := time.ParseDuration(os.Getenv("WAIT_WATCHDOG"))
	require.NoError(t, err)
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(wd))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.NewMutex(os.Getenv("WAIT_NAME")).TryLock(ctx)
	require.NoError(t, err)
	fmt.Println("HELD")
	select {
	case <-l.Done():
		t.Errorf("hold ended before the worker was killed: %v", l.Err())
	case <-ctx.Done():
		t.Error("not killed within a minute")
	}
}

// A wait ended by its ctx always says so. For every kind
// that waits, many calls with a ctx of 1 to 4 ms race a goroutine that
// adds and takes back permits, or locks and unlocks, from this client and
// from another: each call ends at whatever point its ctx ends (queued,
// subscribing, in a round trip, handed permits it gives back). Every call
// that fails once its ctx ended must match rlock.ErrNotAcquired and
// ctx.Err() (a latch's Await too, as every wait of the package), and what
// the calls took must all be back at the end.

const (
	ceWorkers = 3               // goroutines racing their tiny deadlines
	ceCalls   = 200             // calls per worker, kind and variant
	ceChurn   = 5 * time.Second // ctx of each call of the churning goroutine
)

// ceCall is one call of a kind under test: nil and the function that gives
// back what it took, or its error.
type ceCall func(ctx context.Context) (giveBack func() error, err error)

// ceTally counts the outcomes of one kind's calls and keeps the first
// wrong ones.
type ceTally struct {
	acquired, ended atomic.Int64
	// deleted: a latch's Await that failed with ErrLatchDeleted before its
	// ctx ended, which a latch set again at once can give (not this test's
	// subject: counted and logged).
	deleted  atomic.Int64
	mu       sync.Mutex
	bad      []string
	badCount int
}

// fail records a wrong outcome.
func (t *ceTally) fail(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.badCount++
	if len(t.bad) < 5 {
		t.bad = append(t.bad, fmt.Sprintf(format, args...))
	}
}

// record checks the outcome of a call with ctx: acquired, or failed once
// ctx ended with an error that says so (acquiring: ErrNotAcquired too).
func (t *ceTally) record(ctx context.Context, err error, acquiring bool) {
	end := ceEnded(ctx)
	switch {
	case err == nil:
		t.acquired.Add(1)
	case end == nil && errors.Is(err, rlock.ErrLatchDeleted):
		t.deleted.Add(1)
	case end == nil:
		t.fail("failed before its ctx ended: %v", err)
	case !errors.Is(err, end):
		t.fail("ctx ended (%v), the error does not match it: %v", end, err)
	case acquiring && !errors.Is(err, rlock.ErrNotAcquired):
		t.fail("ctx ended, the error does not match ErrNotAcquired: %v", err)
	default:
		t.ended.Add(1)
	}
}

// ceEnded returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed: its timer may fire later than a socket given that deadline
// failed a round trip.
func ceEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ceRace runs ceWorkers goroutines making ceCalls calls each, with
// deadlines of 1 to 4 ms, while churn runs in a loop (its i-th turn
// churn(i)) until they are done; then it checks the tally.
func ceRace(t *testing.T, acquiring bool, call ceCall, churn func(i int) error) *ceTally {
	t.Helper()
	tally := &ceTally{}
	done := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				churned <- nil
				return
			default:
			}
			if err := churn(i); err != nil {
				churned <- fmt.Errorf("churn %d: %w", i, err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range ceWorkers {
		wg.Go(func() { ceWorker(tally, w, acquiring, call) })
	}
	wg.Wait()
	close(done)
	require.NoError(t, <-churned)
	t.Logf("%d calls: %d acquired, %d ended by their ctx as they should, %d latch deleted, %d wrong",
		ceWorkers*ceCalls, tally.acquired.Load(), tally.ended.Load(), tally.deleted.Load(), tally.badCount)
	require.Zero(t, tally.badCount, "wrong outcomes, the first: %v", tally.bad)
	return tally
}

// ceWorker makes ceCalls calls, worker w's deadlines cycling from 1 to 4 ms.
func ceWorker(tally *ceTally, w int, acquiring bool, call ceCall) {
	for i := range ceCalls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(i+w)%4)*time.Millisecond)
		giveBack, err := call(ctx)
		tally.record(ctx, err, acquiring)
		cancel()
		if err == nil && giveBack != nil {
			if err := giveBack(); err != nil {
				tally.fail("giving back: %v", err)
			}
		}
	}
}

// ceCtx returns a ctx for the churning goroutine's calls and its cancel.
func ceCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), ceChurn)
}

// ceTest is the body of one kind's test: an admin client, two rlock
// Clients on the shared server (the calls' and another, as another process)
// and a unique name.
type ceTest func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string)

// ceEach runs f twice: with go-redis clients that leave ctx deadlines off
// their sockets (the default: a ctx that ends stops a call before it is
// sent), and with ContextTimeoutEnabled (a ctx that ends cuts a round trip
// short, with an i/o timeout).
func ceEach(t *testing.T, f ceTest) {
	for _, v := range []struct {
		name     string
		deadline bool
	}{{"default", false}, {"ContextTimeoutEnabled", true}} {
		t.Run(v.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			admin := srv.Client(t)
			rdb := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = v.deadline })
			cs := [2]*rlock.Client{newClient(t, rdb), newClient(t, srv.Client(t))}
			f(t, admin, cs, redistest.Name(t))
		})
	}
}

// ceLocker is a kind of lock as the race uses it: its Lock.
type ceLocker func(ctx context.Context) (*rlock.Lease, error)

// ceLockOf is m's Lock without options.
func ceLockOf(m *rlock.Mutex) ceLocker {
	return func(ctx context.Context) (*rlock.Lease, error) { return m.Lock(ctx) }
}

// ceWriteLock is the Lock of the write side of the RWMutex name.
func ceWriteLock(c *rlock.Client, name string) ceLocker {
	return ceLockOf(&c.NewRWMutex(name).WriteLock().Mutex)
}

// ceLockCall is a Lock of l, unlocked at once when taken.
func ceLockCall(l ceLocker) ceCall {
	return func(ctx context.Context) (func() error, error) {
		lease, err := l(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Unlock(context.Background()) }, nil
	}
}

// ceLockChurn locks and unlocks, by turns with ls[0] (the calls' client)
// and ls[1] (the other).
func ceLockChurn(ls [2]ceLocker) func(i int) error {
	return func(i int) error {
		ctx, cancel := ceCtx()
		defer cancel()
		lease, err := ls[i%2](ctx)
		if err != nil {
			return err
		}
		return lease.Unlock(ctx)
	}
}

// ceRequireGone requires the keys to be gone: every hold was given back.
func ceRequireGone(t *testing.T, admin *redis.Client, keys ...string) {
	t.Helper()
	n, err := admin.Exists(context.Background(), keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "keys left of %v", keys)
}

// TestCtxEndedLocks: Lock of every kind of lock (Mutex, FairMutex, both
// sides of an RWMutex, SpinMutex), ended by tiny deadlines while another
// goroutine locks and unlocks.
func TestCtxEndedLocks(t *testing.T) {
	kinds := map[string]func(c *rlock.Client, name string) ceLocker{
		"Mutex":     func(c *rlock.Client, name string) ceLocker { return ceLockOf(c.NewMutex(name)) },
		"FairMutex": func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewFairMutex(name).Mutex) },
		"ReadLock":  func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewRWMutex(name).ReadLock().Mutex) },
		"WriteLock": func(c *rlock.Client, name string) ceLocker { return ceWriteLock(c, name) },
		"SpinMutex": func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewSpinMutex(name).Mutex) },
	}
	for kind, make := range kinds {
		t.Run(kind, func(t *testing.T) {
			ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
				churn := [2]ceLocker{make(cs[0], name), make(cs[1], name)}
				if kind == "ReadLock" { // readers share: the churn takes the write side
					churn = [2]ceLocker{ceWriteLock(cs[0], name), ceWriteLock(cs[1], name)}
				}
				ceRace(t, true, ceLockCall(make(cs[0], name)), ceLockChurn(churn))
				ceRequireGone(t, admin, name, "redisson_lock_queue:{"+name+"}", "redisson_lock_timeout:{"+name+"}")
			})
		})
	}
}

// ceMultiCall is a Lock of a MultiLock or a RedLock, unlocked when taken.
func ceMultiCall(lock func(ctx context.Context) (*rlock.MultiLease, error)) ceCall {
	return func(ctx context.Context) (func() error, error) {
		l, err := lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Unlock(context.Background()) }, nil
	}
}

// TestCtxEndedMultiLocks: MultiLock and RedLock of two parts, ended by tiny
// deadlines while another goroutine locks and unlocks the second part.
func TestCtxEndedMultiLocks(t *testing.T) {
	for _, kind := range []string{"MultiLock", "RedLock"} {
		t.Run(kind, func(t *testing.T) {
			ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
				a, b := cs[0].NewMutex(name+"-a"), cs[0].NewMutex(name+"-b")
				lock := func(ctx context.Context) (*rlock.MultiLease, error) { return rlock.NewMultiLock(a, b).Lock(ctx) }
				if kind == "RedLock" {
					lock = func(ctx context.Context) (*rlock.MultiLease, error) { return rlock.NewRedLock(a, b).Lock(ctx) }
				}
				churn := ceLockChurn([2]ceLocker{ceLockOf(cs[0].NewMutex(name + "-b")), ceLockOf(cs[1].NewMutex(name + "-b"))})
				ceRace(t, true, ceMultiCall(lock), churn)
				ceRequireGone(t, admin, name+"-a", name+"-b")
			})
		})
	}
}

// TestCtxEndedCampaign: Election.Campaign ended by tiny deadlines while
// another candidate campaigns and resigns.
func TestCtxEndedCampaign(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		e := cs[0].NewElection(name)
		call := func(ctx context.Context) (func() error, error) {
			l, err := e.Campaign(ctx, "worker")
			if err != nil {
				return nil, err
			}
			return func() error { return l.Resign(context.Background()) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			l, err := cs[i%2].NewElection(name).Campaign(ctx, "churn")
			if err != nil {
				return err
			}
			return l.Resign(ctx)
		}
		ceRace(t, true, call, churn)
		ceRequireGone(t, admin, name)
	})
}

// TestCtxEndedSemaphore: Semaphore.Acquire ended by tiny deadlines while
// another goroutine releases a permit and takes it back, or adds one and
// removes it, from this client (handing permits to its waiters) and from
// another. The count is 0 at the end.
func TestCtxEndedSemaphore(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })
		s := cs[0].NewSemaphore(name)
		answer(s.TrySetPermits(context.Background(), 0, 0)).is(t, true)
		call := func(ctx context.Context) (func() error, error) {
			if err := s.Acquire(ctx, 1); err != nil {
				return nil, err
			}
			return func() error { return s.Release(context.Background(), 1) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cs := cs[i%2].NewSemaphore(name)
			if i%3 == 2 {
				return errors.Join(cs.AddPermits(ctx, 1), cs.AddPermits(ctx, -1))
			}
			if err := cs.Release(ctx, 1); err != nil {
				return err
			}
			return cs.Acquire(ctx, 1)
		}
		ceRace(t, true, call, churn)
		answer(s.AvailablePermits(context.Background())).is(t, int64(0), "permits left")
	})
}

// TestCtxEndedExpirableSemaphore: ExpirableSemaphore.Acquire ended by tiny
// deadlines while another goroutine takes the one permit and releases it,
// and adds a permit and removes it, from this client and from another. One
// permit is available and none is taken at the end.
func TestCtxEndedExpirableSemaphore(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		s := expSemaphore(t, admin, cs[0], name, 1)
		call := func(ctx context.Context) (func() error, error) {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				return nil, err
			}
			return func() error { return p.Release(context.Background()) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cs := cs[i%2].NewExpirableSemaphore(name)
			if i%3 == 2 {
				return errors.Join(cs.AddPermits(ctx, 1), cs.AddPermits(ctx, -1))
			}
			p, err := cs.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}
		ceRace(t, true, call, churn)
		answer(s.AvailablePermits(context.Background())).is(t, int64(1), "permits available")
		answer(s.AcquiredPermits(context.Background())).is(t, int64(0), "permits taken")
	})
}

// TestCtxEndedLatch: CountDownLatch.Await ended by tiny deadlines while
// another goroutine sets the latch and counts it down: an Await that fails
// because its ctx ended matches ErrNotAcquired and ctx.Err().
func TestCtxEndedLatch(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })
		l := cs[0].NewCountDownLatch(name)
		call := func(ctx context.Context) (func() error, error) { return nil, l.Await(ctx) }
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cl := cs[i%2].NewCountDownLatch(name)
			_, err := cl.TrySetCount(ctx, 1)
			return errors.Join(err, cl.CountDown(ctx))
		}
		ceRace(t, true, call, churn)
		ceRequireGone(t, admin, name)
	})
}

// An outside kind is one object kind whose hold an operator ends from
// outside: hold makes the hold (in the holder's client), wait blocks in the
// waiter's client until it gets in, and end ends the hold with nothing
// published (a DEL, a count set by hand).
type outsideKind struct {
	name string
	hold func(ctx context.Context, c *rlock.Client, name string) error
	wait func(ctx context.Context, c *rlock.Client, name string) error
	end  func(ctx context.Context, rdb redis.Cmdable, name string) error
}

func del(ctx context.Context, rdb redis.Cmdable, name string) error { return rdb.Del(ctx, name).Err() }

// outsideKinds are the kinds whose waiters must wake when a hold ends from
// outside: locks (plain, fair, the read side waiting for the write side),
// a semaphore, an election's candidate.
var outsideKinds = []outsideKind{
	{"Mutex",
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewMutex(n).Lock(ctx)
			return err
		},
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewMutex(n).Lock(ctx)
			return err
		},
		del},
	{"FairMutex",
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewFairMutex(n).Lock(ctx)
			return err
		},
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewFairMutex(n).Lock(ctx)
			return err
		},
		del},
	{"RWMutex",
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewRWMutex(n).WriteLock().Lock(ctx)
			return err
		},
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewRWMutex(n).ReadLock().Lock(ctx)
			return err
		},
		del},
	{"Semaphore",
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewSemaphore(n).TrySetPermits(ctx, 0, 0)
			return err
		},
		func(ctx context.Context, c *rlock.Client, n string) error { return c.NewSemaphore(n).Acquire(ctx, 1) },
		func(ctx context.Context, rdb redis.Cmdable, n string) error { return rdb.Set(ctx, n, 1, 0).Err() }},
	{"Election",
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewElection(n).Campaign(ctx, "holder")
			return err
		},
		func(ctx context.Context, c *rlock.Client, n string) error {
			_, err := c.NewElection(n).Campaign(ctx, "waiter")
			return err
		},
		del},
}

// TestOutsideEndWakesWaiters: a hold ended from outside, with nothing
// published, lets a waiter of another client in within a round trip or two,
// long before the lease it read (30 s, the watchdog's), for every kind; and
// also when the holder is no holdfast client (a Java process, one that is
// gone: a hash written by hand).
func TestOutsideEndWakesWaiters(t *testing.T) {
	for _, k := range outsideKinds {
		t.Run(k.name, func(t *testing.T) {
			rdb, holder, name := setup(t)
			waiter := newClient(t, rdb)
			ctx := testCtx(t, 20*time.Second)
			require.NoError(t, k.hold(ctx, holder, name))
			took := outsideRound(t, ctx, rdb, waiter, k, name)
			require.Less(t, took, 5*time.Second, "the waiter got in %v after the hold ended from outside", took)
		})
	}
	t.Run("ForeignHolder", func(t *testing.T) {
		rdb, waiter, name := setup(t)
		ctx := testCtx(t, 20*time.Second)
		require.NoError(t, rdb.HSet(ctx, name, "java-uuid:1", 1).Err())
		require.NoError(t, rdb.PExpire(ctx, name, time.Minute).Err())
		took := outsideRound(t, ctx, rdb, waiter, outsideKinds[0], name)
		require.Less(t, took, 5*time.Second)
	})
}

// outsideRound starts k's wait in waiter, waits until it listens, ends the
// hold from outside and returns how long the wait took to return after that.
func outsideRound(t testing.TB, ctx context.Context, rdb *redis.Client, waiter *rlock.Client, k outsideKind, name string) time.Duration {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- k.wait(ctx, waiter, name) }()
	require.Eventually(t, func() bool { return listening(ctx, rdb, name) }, 10*time.Second, time.Millisecond,
		"the waiter subscribes")
	at := time.Now()
	require.NoError(t, k.end(ctx, rdb, name))
	select {
	case err := <-done:
		require.NoError(t, err)
		return time.Since(at)
	case <-ctx.Done():
		t.Fatalf("%s: the waiter did not get in after the hold ended from outside", k.name)
	}
	return 0
}

// listening reports whether a channel of the object name is subscribed.
func listening(ctx context.Context, rdb *redis.Client, name string) bool {
	chans, err := rdb.PubSubChannels(ctx, "*"+name+"*").Result()
	return err == nil && len(chans) > 0
}

// BenchmarkOutsideEnd measures, for each kind, how long after an outside end
// of a hold a waiting call of another client returns: p50 and p99 over 50
// rounds (ms), and, for comparison, p50 over 3 rounds without client
// tracking in the waiter (the wait then lasts until the lease it read: 3 s
// here). make wake-table runs it:
//
//	go test -run '^$' -bench OutsideEnd -benchtime 1x .
func BenchmarkOutsideEnd(b *testing.B) {
	srv := redistest.Shared(b)
	for _, k := range outsideKinds {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				after := outsideRounds(b, srv, k, 50, true)
				before := outsideRounds(b, srv, k, 3, false)
				b.ReportMetric(ms(pct(after, 50)), "p50-ms")
				b.ReportMetric(ms(pct(after, 99)), "p99-ms")
				b.ReportMetric(ms(pct(before, 50)), "untracked-p50-ms")
			}
		})
	}
	b.Logf("server %s", srv.Version(b))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// outsideRounds runs n rounds of k with fresh clients, the holder's lease 3 s.
func outsideRounds(t testing.TB, srv *redistest.Server, k outsideKind, n int, tracking bool) []time.Duration {
	rdb := srv.Client(t)
	var took []time.Duration
	for i := range n {
		name := fmt.Sprintf("%s:%s:%v:%d", redistest.Name(t), k.name, tracking, i)
		holder := newClient(t, rdb, rlock.WithWatchdogTimeout(3*time.Second))
		waiter := newClient(t, rdb, rlock.WithTracking(tracking))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		require.NoError(t, k.hold(ctx, holder, name))
		took = append(took, outsideRound(t, ctx, rdb, waiter, k, name))
		cancel()
		_ = holder.Close()
		_ = waiter.Close()
	}
	return took
}

// pct returns the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

// TestOutsideEndKeepsFairOrder: a fair lock deleted from outside goes to the
// first waiter of its queue, in whichever client it waits; the second waits
// on until the first unlocks.
func TestOutsideEndKeepsFairOrder(t *testing.T) {
	rdb, holder, name := setup(t)
	first, second := newClient(t, rdb), newClient(t, rdb)
	ctx := testCtx(t, 20*time.Second)
	_, err := holder.NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)
	got := make(chan *rlock.Lease, 2)
	queue := func(c *rlock.Client, n int64) {
		go func() {
			l, err := c.NewFairMutex(name).Lock(ctx)
			if err == nil {
				got <- l
			}
		}()
		require.Eventually(t, func() bool { return rdb.LLen(ctx, lua.QueueName(name)).Val() == n },
			10*time.Second, time.Millisecond, "waiter %d queued", n)
	}
	queue(first, 1)
	queue(second, 2)
	require.NoError(t, rdb.Del(ctx, name).Err())
	var l *rlock.Lease
	select {
	case l = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no waiter got the lock deleted from outside")
	}
	for field := range holders(t, rdb, name) {
		require.True(t, strings.HasPrefix(field, first.ID()+":"), "the first waiter holds it, not %s", field)
	}
	require.Len(t, got, 0, "the second waiter still waits")
	require.NoError(t, l.Unlock(ctx))
	select {
	case l = <-got:
		require.NoError(t, l.Unlock(ctx))
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiter did not get the lock after the first unlocked")
	}
}

// TestOutsideFlushAndRestartWakeWaiters: a FLUSHALL, and a restart that lost
// the data, let a waiting Lock of another client in long before the lease
// it read (30 s).
func TestOutsideFlushAndRestartWakeWaiters(t *testing.T) {
	srv := redistest.StartControllable(t)
	rdb := srv.Client(t)
	holder, waiter := newClient(t, rdb), newClient(t, rdb)
	ctx := testCtx(t, 40*time.Second)
	for _, end := range []struct {
		name string
		do   func()
	}{
		{"flushall", func() { require.NoError(t, rdb.FlushAll(ctx).Err()) }},
		{"restart", func() { srv.Restart(t) }},
	} {
		name := redistest.Name(t) + ":" + end.name
		_, err := holder.NewMutex(name).Lock(ctx)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := waiter.NewMutex(name).Lock(ctx); done <- err }()
		require.Eventually(t, func() bool { return listening(ctx, rdb, name) }, 10*time.Second, time.Millisecond)
		end.do()
		select {
		case err := <-done:
			require.NoError(t, err, end.name)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the waiter did not get in", end.name)
		}
	}
}
