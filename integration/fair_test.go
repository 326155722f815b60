package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Tests of the fair lock (rlock.FairMutex, NonReentrantFairMutex) against real
// Redis: FIFO order across processes and clients, waiters that give up or die,
// every way a hold can end waking the queue's head, and interop with a
// simulated Java RFairLock peer whose scripts are written here from the
// protocol facts (shared/redisson-protocol.md §1.3, §2.6), independently of
// holdfast's lua/fair_*.lua.

// fairWaitMs is rlock.DefaultFairWaitTimeout (Redisson's fairLockWaitTimeout)
// in ms: the wait allowance of a waiter that waits without WithWaitTime.
const fairWaitMs = 300000

// fairQueue returns the fair lock's queue of waiting fields, head first.
func fairQueue(t testing.TB, rdb redis.Cmdable, name string) []string {
	t.Helper()
	q, err := rdb.LRange(context.Background(), lua.QueueName(name), 0, -1).Result()
	require.NoError(t, err)
	return q
}

// fairDeadlines returns the fair lock's waiters' deadlines (epoch ms).
func fairDeadlines(t testing.TB, rdb redis.Cmdable, name string) map[string]int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), lua.TimeoutsName(name), 0, -1).Result()
	require.NoError(t, err)
	m := make(map[string]int64, len(zs))
	for _, z := range zs {
		m[z.Member.(string)] = int64(z.Score)
	}
	return m
}

// fairRequireClean checks that the lock, its queue and its deadlines are gone.
func fairRequireClean(t testing.TB, rdb redis.Cmdable, name string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{name, lua.QueueName(name), lua.TimeoutsName(name)} {
		n, err := rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s left behind", k)
	}
}

// fairAwaitQueue waits until the queue holds n fields and returns it.
func fairAwaitQueue(t testing.TB, rdb redis.Cmdable, name string, n int) []string {
	t.Helper()
	require.Eventually(t, func() bool {
		return rdb.LLen(context.Background(), lua.QueueName(name)).Val() == int64(n)
	}, 10*time.Second, time.Millisecond, "queue of %d waiters", n)
	return fairQueue(t, rdb, name)
}

// fairGo runs f(ctx, opts...) on a goroutine (f is a Lock or a TryLock);
// its result arrives on the channel.
func fairGo[O any](ctx context.Context, f func(context.Context, ...O) (*rlock.Lease, error), opts ...O) <-chan leaseResult {
	return goAsync(func() (*rlock.Lease, error) { return f(ctx, opts...) })
}

// fairHoldEnds waits until a lease ends and checks why.
func fairHoldEnds(t testing.TB, l *rlock.Lease, d time.Duration, want error) {
	t.Helper()
	select {
	case <-l.Done():
		require.ErrorIs(t, l.Err(), want)
	case <-time.After(d):
		t.Fatalf("the holder's lease did not end within %v", d)
	}
}

// fairMs renders a duration for the logs.
func fairMs(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// TestFairMutexFIFOAcrossProcesses proves FIFO order across processes: eight
// waiters, two goroutines (owners) in each of four worker processes, queue in
// an order the test sets (interleaving the processes, 50 ms apart at least)
// while a holder in the test process holds the lock; each then gets the lock
// exactly in arrival order, alone, with its own queued field. Subtests: the
// hold ends by Unlock; by its fixed lease running out (no unlock, no message:
// the head must still get it at once, not after the default 5 min wait); and a
// waiter in the middle gives up (ctx cancelled): it is gone from the queue and
// the deadlines before its Lock returns, those behind it have their deadlines
// 5 min sooner, and the rest still go in order without stalling.
func TestFairMutexFIFOAcrossProcesses(t *testing.T) {
	if redistest.WorkerRole() == fairWaiterRole {
		fairWaiterWorker(t)
		return
	}
	t.Run("Unlock", func(t *testing.T) { fairFIFOAcrossProcesses(t, 0, -1) })
	t.Run("LeaseExpiry", func(t *testing.T) { fairFIFOAcrossProcesses(t, 4*time.Second, -1) })
	t.Run("WaiterGivesUp", func(t *testing.T) { fairFIFOAcrossProcesses(t, 0, 3) })
}

// fairFIFOAcrossProcesses runs one subtest of TestFairMutexFIFOAcrossProcesses:
// the holder takes the lock with a fixed lease when lease > 0 (and never
// unlocks), else with the watchdog and unlocks; waiter giveUp (-1: none) gives
// up once all are queued.
func fairFIFOAcrossProcesses(t *testing.T, lease time.Duration, giveUp int) {
	const workers, waiters = 4, 8
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	ctl := name + ":ctl"
	queue := lua.QueueName(name)
	ctx := testCtx(t, 90*time.Second)
	t.Cleanup(func() { rdb.Del(context.Background(), ctl+":order", ctl+":inside") })

	ws := redistest.RunWorkers(t, t.Name(), fairWaiterRole, workers,
		"FAIR_ADDR="+srv.Addr, "FAIR_NAME="+name, "FAIR_CTL="+ctl,
		"FAIR_WORKERS="+strconv.Itoa(workers), "FAIR_WAITERS="+strconv.Itoa(waiters),
		"FAIR_GIVEUP="+strconv.Itoa(giveUp))
	ids := make([]string, workers)
	for i, w := range ws {
		ids[i] = strings.TrimPrefix(w.Expect(t, "READY ", 60*time.Second), "READY ")
	}

	var opts []rlock.AcquireOption
	if lease > 0 {
		opts = append(opts, rlock.WithLeaseTime(lease))
	}
	taken := time.Now()
	hold, err := c.NewFairMutex(name).Lock(ctx, opts...)
	require.NoError(t, err)

	// Waiter k is started once waiter k-1 shows in the queue, and at least
	// 50 ms after it.
	fields := make([]string, waiters)
	var queuedIn []time.Duration
	var last time.Time
	for k := range waiters {
		if d := 50*time.Millisecond - time.Since(last); d > 0 {
			time.Sleep(d) // arrival spacing, not synchronisation
		}
		sent := time.Now()
		require.NoError(t, rdb.RPush(ctx, fmt.Sprintf("%s:start:%d", ctl, k), "go").Err())
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == int64(k+1) },
			10*time.Second, time.Millisecond, "waiter %d queued", k)
		last = time.Now()
		queuedIn = append(queuedIn, fairMs(last.Sub(sent)))
		fields[k] = rdb.LIndex(ctx, queue, -1).Val()
		require.True(t, strings.HasPrefix(fields[k], ids[k%workers]+":"),
			"waiter %d's field %q is of worker %d's client %s", k, fields[k], k%workers, ids[k%workers])
	}
	t.Logf("each waiter queued within %v of its start signal", queuedIn)
	require.Equal(t, fields, fairQueue(t, rdb, name))
	if lease > 0 {
		pttl := rdb.PTTL(ctx, name).Val()
		require.Greater(t, pttl, time.Duration(0), "all waiters queued while the holder's lease ran")
		t.Logf("all queued %v before the holder's lease runs out", fairMs(pttl))
	}

	// Deadlines as Redisson sets them: the head's is the holder's PTTL plus
	// the 5 min wait, each next one its predecessor's plus 5 min.
	dl := fairDeadlines(t, rdb, name)
	require.Len(t, dl, waiters)
	ahead := dl[fields[0]] - time.Now().UnixMilli()
	require.Greater(t, ahead, int64(fairWaitMs-1000))
	require.Less(t, ahead, int64(fairWaitMs+31000))
	for k := 1; k < waiters; k++ {
		require.Equal(t, int64(fairWaitMs), dl[fields[k]]-dl[fields[k-1]], "deadline of waiter %d", k)
	}

	want := make([]int, 0, waiters)
	for k := range waiters {
		if k != giveUp {
			want = append(want, k)
		}
	}
	if giveUp >= 0 {
		sent := time.Now()
		require.NoError(t, rdb.RPush(ctx, fmt.Sprintf("%s:cancel:%d", ctl, giveUp), "go").Err())
		line := ws[giveUp%workers].Expect(t, fmt.Sprintf("GAVEUP %d ", giveUp), 10*time.Second)
		t.Logf("waiter %d gave up %v after the cancel signal: %s", giveUp, fairMs(time.Since(sent)), line)
		// Lock has returned: the waiter must already have left.
		after := fairDeadlines(t, rdb, name)
		var rest []string
		for _, k := range want {
			rest = append(rest, fields[k])
		}
		require.Equal(t, rest, fairQueue(t, rdb, name), "the waiter that gave up left the queue, the others kept their order")
		require.NotContains(t, after, fields[giveUp], "the waiter that gave up left the deadlines")
		for k := range waiters {
			switch {
			case k < giveUp:
				require.Equal(t, dl[fields[k]], after[fields[k]], "deadline of waiter %d, ahead", k)
			case k > giveUp:
				require.Equal(t, dl[fields[k]]-fairWaitMs, after[fields[k]], "deadline of waiter %d, behind: 5 min sooner", k)
			}
		}
	}

	var released time.Time
	if lease > 0 {
		released = taken.Add(lease) // the key expires no earlier than this
	} else {
		released = time.Now()
		require.NoError(t, hold.Unlock(ctx))
	}

	var order []string
	require.Eventually(t, func() bool {
		order = rdb.LRange(ctx, ctl+":order", 0, -1).Val()
		return len(order) >= len(want)
	}, 45*time.Second, 5*time.Millisecond, "every waiter acquired")
	var got []int
	var lat []time.Duration
	var first time.Time
	prev := released
	for i, e := range order {
		f := strings.Fields(e)
		require.Len(t, f, 3, "order entry %q", e)
		k, err := strconv.Atoi(f[0])
		require.NoError(t, err)
		ns, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		at := time.Unix(0, ns)
		if i == 0 {
			first = at
		}
		got = append(got, k)
		require.Equal(t, fields[k], f[1], "waiter %d held the lock with the field it queued with", k)
		lat = append(lat, fairMs(at.Sub(prev)))
		prev = at
	}
	t.Logf("acquisition order %v; first %v after the hold ended, then gaps %v", got, lat[0], lat[1:])
	require.Equal(t, want, got, "FIFO")
	if lease > 0 {
		require.False(t, first.Before(released), "the head acquired before the holder's lease ran out")
		fairHoldEnds(t, hold, 5*time.Second, rlock.ErrLockLost)
	}
	for i, d := range lat {
		require.Less(t, d, 5*time.Second, "acquisition %d (waiter %d) stalled", i, got[i])
	}

	for _, w := range ws {
		select {
		case <-w.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %d did not finish; output:\n%s", w.Index, w.Output())
		}
		require.NoError(t, w.Wait(), "worker %d failed; output:\n%s", w.Index, w.Output())
	}
	require.Len(t, rdb.LRange(ctx, ctl+":order", 0, -1).Val(), len(want), "one acquisition per waiter")
	fairRequireClean(t, rdb, name)
}

// TestFairMutexManyGoroutines proves that the fair lock serves a crowd: 500
// goroutines over four clients, each its own owner, all Lock at once and hold
// the lock 0 or 1 ms; every one gets it (within a generous deadline), never two
// at a time, and the lock, its queue and its deadlines are gone at the end.
func TestFairMutexManyGoroutines(t *testing.T) {
	const clients, goroutines = 4, 500
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	name := redistest.Name(t)
	cs := make([]*rlock.Client, clients)
	for i := range cs {
		cs[i] = newClient(t, srv.Client(t))
	}
	ctx := testCtx(t, 60*time.Second)

	var inside, overlaps, done, maxQueue atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the queue's longest length, as seen from outside
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := admin.LLen(ctx, lua.QueueName(name)).Result(); err == nil && n > maxQueue.Load() {
				maxQueue.Store(n)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	waited := make([]time.Duration, goroutines)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range goroutines {
		m := cs[g%clients].NewFairMutex(name)
		wg.Go(func() {
			t0 := time.Now()
			l, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("goroutine %d: Lock: %v", g, err)
				return
			}
			waited[g] = time.Since(t0)
			if inside.Add(1) != 1 {
				overlaps.Add(1)
			}
			if g%2 == 1 {
				time.Sleep(time.Millisecond) // the critical section's work
			}
			inside.Add(-1)
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("goroutine %d: Unlock: %v", g, err)
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	t.Logf("%d goroutines on %d clients: all served in %v (%v per acquisition); longest wait %v; longest queue %d",
		goroutines, clients, fairMs(elapsed), fairMs(elapsed/goroutines), fairMs(slices.Max(waited)), maxQueue.Load())
	require.EqualValues(t, goroutines, done.Load())
	require.Zero(t, overlaps.Load(), "two owners inside at once")
	fairRequireClean(t, admin, name)
}

// TestFairMutexTryLockAndReentrancy proves the single-attempt and the timed
// TryLock, reentrancy and the non-reentrant fair lock: a TryLock without wait
// never queues, and fails while others are queued even on a free lock; a
// TryLock whose wait time runs out queued meanwhile (with its wait time as
// allowance) and leaves the queue empty; an owner re-enters without queueing;
// a NonReentrantFairMutex refuses its owner's second acquisition at once with
// ErrNonReentrant, hold count staying 1.
func TestFairMutexTryLockAndReentrancy(t *testing.T) {
	t.Run("TryLockNeverQueues", func(t *testing.T) {
		rdb, c, name := setup(t)
		other := newClient(t, rdb)
		ctx := testCtx(t, 30*time.Second)
		hold, err := c.NewFairMutex(name).Lock(ctx)
		require.NoError(t, err)
		m := other.NewFairMutex(name)
		for range 3 {
			_, err := m.TryLock(rlock.WithOwner(ctx))
			require.ErrorIs(t, err, rlock.ErrNotAcquired)
		}
		require.Empty(t, fairQueue(t, rdb, name), "a TryLock without wait queued")
		require.Empty(t, fairDeadlines(t, rdb, name))
		require.NoError(t, hold.Unlock(ctx))

		// A free lock with a waiter queued (by hand) is not the TryLock's.
		ghost := uuid.NewString() + ":1"
		require.NoError(t, rdb.RPush(ctx, lua.QueueName(name), ghost).Err())
		require.NoError(t, rdb.ZAdd(ctx, lua.TimeoutsName(name), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: ghost}).Err())
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "a queued waiter goes first")
		require.Equal(t, []string{ghost}, fairQueue(t, rdb, name))
		require.NoError(t, rdb.Del(ctx, lua.QueueName(name), lua.TimeoutsName(name)).Err())
		l, err := m.TryLock(ctx)
		require.NoError(t, err, "free and nobody queued")
		require.NoError(t, l.Unlock(ctx))
		fairRequireClean(t, rdb, name)
	})

	t.Run("TryLockWaitTimesOut", func(t *testing.T) {
		rdb, c, name := setup(t)
		other, third := newClient(t, rdb), newClient(t, rdb)
		ctx := testCtx(t, 30*time.Second)
		hold, err := c.NewFairMutex(name).Lock(ctx)
		require.NoError(t, err)
		const wait = 1500 * time.Millisecond
		start := time.Now()
		got := fairGo[rlock.TryOption](ctx, other.NewFairMutex(name).TryLock, rlock.WithWaitTime(wait))
		q := fairAwaitQueue(t, rdb, name, 1)
		require.True(t, strings.HasPrefix(q[0], other.ID()+":"))
		// Its allowance is its wait time: deadline = holder's PTTL + wait.
		ahead := fairDeadlines(t, rdb, name)[q[0]] - time.Now().UnixMilli()
		require.Greater(t, ahead, wait.Milliseconds())
		require.LessOrEqual(t, ahead, (rlock.DefaultWatchdogTimeout + wait).Milliseconds())
		// A Lock waiter behind it, whose deadline is the TryLock's plus 5 min.
		behind := fairGo(ctx, third.NewFairMutex(name).Lock)
		q = fairAwaitQueue(t, rdb, name, 2)
		require.True(t, strings.HasPrefix(q[1], third.ID()+":"))
		dl := fairDeadlines(t, rdb, name)
		require.Equal(t, dl[q[0]]+fairWaitMs, dl[q[1]])

		r := awaitAsync(t, got, 10*time.Second, "TryLock with wait time")
		took := r.at.Sub(start)
		t.Logf("TryLock(WithWaitTime(%v)) gave up after %v", wait, fairMs(took))
		require.ErrorIs(t, r.err, rlock.ErrNotAcquired)
		require.GreaterOrEqual(t, took, wait-50*time.Millisecond)
		require.Less(t, took, wait+5*time.Second)
		require.Equal(t, q[1:], fairQueue(t, rdb, name), "the timed-out waiter left the queue")
		require.Equal(t, map[string]int64{q[1]: dl[q[1]] - wait.Milliseconds()}, fairDeadlines(t, rdb, name),
			"and the deadlines; the one behind it came its wait time (not 5 min) sooner")
		requirePending(t, behind, "the Lock waiter while the lock is held")
		released := time.Now()
		require.NoError(t, hold.Unlock(ctx))
		rb := awaitAsync(t, behind, 10*time.Second, "the Lock waiter")
		require.NoError(t, rb.err)
		require.Less(t, rb.at.Sub(released), 5*time.Second)
		require.NoError(t, rb.v.Unlock(ctx))
		fairRequireClean(t, rdb, name)
	})

	t.Run("Reentrant", func(t *testing.T) {
		rdb, c, name := setup(t)
		ctx := testCtx(t, 30*time.Second)
		owner := rlock.WithOwner(ctx)
		m := c.NewFairMutex(name)
		l1, err := m.Lock(owner)
		require.NoError(t, err)
		l2, err := m.TryLock(owner)
		require.NoError(t, err)
		n, err := m.HoldCount(owner)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		l3, err := m.TryLock(owner, rlock.WithWaitTime(time.Second))
		require.NoError(t, err)
		n, err = m.HoldCount(owner)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		h := holders(t, rdb, name)
		require.Len(t, h, 1)
		for f, v := range h {
			require.True(t, strings.HasPrefix(f, c.ID()+":"))
			require.Equal(t, "3", v)
		}
		require.Empty(t, fairQueue(t, rdb, name), "re-entry never queues")
		_, err = m.TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "another owner is excluded")
		require.NoError(t, l2.Unlock(owner))
		require.NoError(t, l1.Unlock(owner))
		locked, err := m.IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked, "one hold left")
		require.NoError(t, l3.Unlock(owner))
		fairRequireClean(t, rdb, name)
	})

	t.Run("NonReentrant", func(t *testing.T) {
		rdb, c, name := setup(t)
		ctx := testCtx(t, 30*time.Second)
		requireNonReentrant(t, ctx, c.NewNonReentrantFairMutex(name), func() {
			require.Empty(t, fairQueue(t, rdb, name), "a refused re-entry does not queue")
		})
		fairRequireClean(t, rdb, name)
	})
}

// TestFairMutexDeadWaiterSkipped proves that a queued waiter that never comes
// back (its process died) holds the queue up only until its deadline: with an
// entry of a dead client queued by hand ahead of a live Go waiter, deadline
// 2 s ahead, the Go waiter takes the lock once that deadline has passed, not
// before and not 5 minutes later; whether the lock was free all along, or held
// and released meanwhile (the release then wakes the dead head, not the Go
// waiter).
func TestFairMutexDeadWaiterSkipped(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "LockFree", true: "HeldThenUnlocked"}[held], func(t *testing.T) {
			rdb, c, name := setup(t)
			ctx := testCtx(t, 30*time.Second)
			var hold *rlock.Lease
			if held {
				var err error
				hold, err = newClient(t, rdb).NewFairMutex(name).Lock(ctx)
				require.NoError(t, err)
			}
			dead := uuid.NewString() + ":1"
			deadline := time.Now().Add(2 * time.Second).UnixMilli()
			require.NoError(t, rdb.RPush(ctx, lua.QueueName(name), dead).Err())
			require.NoError(t, rdb.ZAdd(ctx, lua.TimeoutsName(name), redis.Z{Score: float64(deadline), Member: dead}).Err())

			got := fairGo(ctx, c.NewFairMutex(name).Lock)
			q := fairAwaitQueue(t, rdb, name, 2)
			require.Equal(t, dead, q[0])
			require.True(t, strings.HasPrefix(q[1], c.ID()+":"))
			require.Equal(t, deadline+fairWaitMs, fairDeadlines(t, rdb, name)[q[1]], "queued behind the dead entry")
			awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[1]), 1)
			if held {
				require.NoError(t, hold.Unlock(ctx))
				requirePending(t, got, "the Go waiter behind a dead head")
			}
			r := awaitAsync(t, got, 15*time.Second, "the Go waiter behind a dead entry")
			require.NoError(t, r.err)
			late := r.at.Sub(time.UnixMilli(deadline))
			t.Logf("the live waiter took the lock %v after the dead entry's deadline", fairMs(late))
			require.GreaterOrEqual(t, r.at.UnixMilli(), deadline, "the dead entry was skipped before its deadline")
			require.Less(t, late, 5*time.Second)
			require.Empty(t, fairQueue(t, rdb, name), "the dead entry was dropped")
			require.Empty(t, fairDeadlines(t, rdb, name))
			require.NoError(t, r.v.Unlock(ctx))
			fairRequireClean(t, rdb, name)
		})
	}
}

// TestFairMutexWakeUps proves that every way a hold can end wakes the queued
// waiter promptly (within 5 s; the logs show the real latency), with holder and
// waiter in the same client and in different clients: the holder's Unlock
// (message on the waiter's channel), its fixed lease running out (no message:
// the waiter's bound is the PTTL its attempt read, and in the same client the
// holder's end), ForceUnlock by a third client (message), and a DEL of the key
// from outside (no message: in the same client the holder's watchdog notices
// the loss and wakes the waiter; in another the PTTL bound, 1 s here, does).
func TestFairMutexWakeUps(t *testing.T) {
	const lease = 3 * time.Second
	ends := []string{"Unlock", "LeaseExpiry", "ForceUnlock", "Del"}
	for _, same := range []bool{true, false} {
		for _, end := range ends {
			side := map[bool]string{true: "SameClient", false: "OtherClient"}[same]
			t.Run(side+"/"+end, func(t *testing.T) {
				srv := redistest.Shared(t)
				rdb := srv.Client(t)
				name := redistest.Name(t)
				ctx := testCtx(t, 30*time.Second)
				hc := newClient(t, rdb, rlock.WithWatchdogTimeout(time.Second))
				wc := hc
				if !same {
					wc = newClient(t, srv.Client(t))
				}
				owner := rlock.WithOwner(ctx)
				var opts []rlock.AcquireOption
				if end == "LeaseExpiry" {
					opts = append(opts, rlock.WithLeaseTime(lease))
				}
				taken := time.Now()
				hold, err := hc.NewFairMutex(name).Lock(owner, opts...)
				require.NoError(t, err)

				got := fairGo(ctx, wc.NewFairMutex(name).Lock)
				q := fairAwaitQueue(t, rdb, name, 1)
				require.True(t, strings.HasPrefix(q[0], wc.ID()+":"))
				awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[0]), 1)
				requirePending(t, got, "the waiter")

				var ended time.Time
				want := rlock.ErrLockLost
				switch end {
				case "Unlock":
					want = rlock.ErrUnlocked
					ended = time.Now()
					require.NoError(t, hold.Unlock(owner))
				case "LeaseExpiry":
					ended = taken.Add(lease)
				case "ForceUnlock":
					ended = time.Now()
					ok, err := newClient(t, rdb).NewFairMutex(name).ForceUnlock(ctx)
					require.NoError(t, err)
					require.True(t, ok)
				case "Del":
					ended = time.Now()
					require.EqualValues(t, 1, rdb.Del(ctx, name).Val())
				}
				r := awaitAsync(t, got, 15*time.Second, "the waiter")
				require.NoError(t, r.err)
				t.Logf("%s, %s: the waiter took the lock %v after the hold ended", side, end, fairMs(r.at.Sub(ended)))
				require.Less(t, r.at.Sub(ended), 5*time.Second)
				if end == "LeaseExpiry" {
					require.False(t, r.at.Before(ended), "acquired before the holder's lease ran out")
				}
				fairHoldEnds(t, hold, 5*time.Second, want)
				require.Empty(t, fairQueue(t, rdb, name))
				require.NoError(t, r.v.Unlock(ctx))
				fairRequireClean(t, rdb, name)
			})
		}
	}
}

// TestFairMutexHeadGivesUpAsReleased proves that a queue's head giving up
// just as the lock is released to it does not leave the waiter behind it
// asleep: in 30 rounds the holder's Unlock (which wakes only the head) races
// the cancellation of the head's Lock; whichever wins, the second waiter, of
// a third client, gets the lock within 5 s (its own bound would be 30 s: the
// holder's watchdog lease).
func TestFairMutexHeadGivesUpAsReleased(t *testing.T) {
	const rounds = 30
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	pc, hc, wc := newClient(t, srv.Client(t)), newClient(t, srv.Client(t)), newClient(t, srv.Client(t))
	ctx := testCtx(t, 60*time.Second)
	var lat []time.Duration
	headGot := 0
	for round := range rounds {
		name := redistest.Name(t)
		p, err := pc.NewFairMutex(name).Lock(ctx)
		require.NoError(t, err)
		hctx, cancel := context.WithCancel(ctx)
		head := fairGo(hctx, hc.NewFairMutex(name).Lock)
		fairAwaitQueue(t, rdb, name, 1)
		next := fairGo(ctx, wc.NewFairMutex(name).Lock)
		q := fairAwaitQueue(t, rdb, name, 2)
		awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[0]), 1)
		awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[1]), 1)
		released := time.Now()
		unlocked := make(chan error, 1)
		if round%2 == 0 {
			go cancel()
			unlocked <- p.Unlock(ctx)
		} else {
			go func() { unlocked <- p.Unlock(ctx) }()
			cancel()
		}
		require.NoError(t, <-unlocked)
		h := awaitAsync(t, head, 10*time.Second, "the head")
		if h.err == nil {
			headGot++
			require.NoError(t, h.v.Unlock(ctx))
		} else {
			require.ErrorIs(t, h.err, rlock.ErrNotAcquired)
		}
		r := awaitAsync(t, next, 10*time.Second, "the waiter behind the head")
		require.NoError(t, r.err)
		lat = append(lat, fairMs(r.at.Sub(released)))
		require.Less(t, r.at.Sub(released), 5*time.Second, "round %d", round)
		require.NoError(t, r.v.Unlock(ctx))
		fairRequireClean(t, rdb, name)
	}
	t.Logf("the head still took the lock in %d of %d rounds; the next waiter got it after %v", headGot, rounds, lat)
}

// TestFairMutexClosedClientLeavesQueue proves that closing a client ends its
// fair waits with ErrClosed and takes its waiters out of the Redis queue and
// deadlines, so that they hold nobody up.
func TestFairMutexClosedClientLeavesQueue(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	hold, err := newClient(t, rdb).NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)
	wc, err := rlock.New(srv.Client(t))
	require.NoError(t, err)
	w1 := fairGo(ctx, wc.NewFairMutex(name).Lock)
	fairAwaitQueue(t, rdb, name, 1)
	w2 := fairGo[rlock.TryOption](ctx, wc.NewFairMutex(name).TryLock, rlock.WithWaitTime(time.Minute))
	q := fairAwaitQueue(t, rdb, name, 2)
	awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[1]), 1)
	require.NoError(t, wc.Close())
	for i, ch := range []<-chan leaseResult{w1, w2} {
		r := awaitAsync(t, ch, 5*time.Second, "a waiter of the closed client")
		require.ErrorIs(t, r.err, rlock.ErrClosed, "waiter %d", i)
	}
	require.Empty(t, fairQueue(t, rdb, name))
	require.Empty(t, fairDeadlines(t, rdb, name))
	require.NoError(t, hold.Unlock(ctx))
	fairRequireClean(t, rdb, name)
}

// TestFairMutexOutwaitedWaiterRequeues proves WithFairWaitTimeout on live
// waiters: with a 200 ms allowance and a holder that keeps the lock (renewed)
// well past it, the waiters are skipped as dead and queue again with fresh
// deadlines (their order may change: Redisson's rule too); once the holder
// unlocks both still get the lock at once.
func TestFairMutexOutwaitedWaiterRequeues(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	pc := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(time.Second))
	wc := newClient(t, srv.Client(t), rlock.WithFairWaitTimeout(200*time.Millisecond))
	hold, err := pc.NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)
	a := fairGo(ctx, wc.NewFairMutex(name).Lock)
	fairAwaitQueue(t, rdb, name, 1)
	b := fairGo(ctx, wc.NewFairMutex(name).Lock)
	q := fairAwaitQueue(t, rdb, name, 2)
	dl := fairDeadlines(t, rdb, name)
	require.Equal(t, int64(200), dl[q[1]]-dl[q[0]])
	// Both outlive their deadlines while the lock stays held: skipped, they
	// queue again, with later deadlines.
	require.Eventually(t, func() bool {
		now := fairDeadlines(t, rdb, name)
		return len(now) == 2 && now[q[0]] > dl[q[0]] && now[q[1]] > dl[q[1]]
	}, 10*time.Second, 5*time.Millisecond, "the outwaited waiters queued again")
	t.Logf("queue %v, deadlines %v then %v", q, dl, fairDeadlines(t, rdb, name))
	requirePending(t, a, "waiter a while the lock is held")
	requirePending(t, b, "waiter b while the lock is held")
	released := time.Now()
	require.NoError(t, hold.Unlock(ctx))
	// Their order may have changed as they queued again: take them as they come.
	for range 2 {
		var r leaseResult
		select {
		case r = <-a:
		case r = <-b:
		case <-time.After(10 * time.Second):
			t.Fatalf("a requeued waiter was not served within 10 s; queue %v", fairQueue(t, rdb, name))
		}
		fairRequireServed(t, r, released, "a requeued waiter")
	}
	fairRequireClean(t, rdb, name)
}

// TestFairMutexLaterHoldEndsSilently checks that a queued waiter W is served
// soon after the lock is free again when the hold that ends was taken after
// W's last attempt and ends without a release message. Holder P (watchdog
// lease, PTTL 30 s) holds, waiter H queues, W queues behind H and sleeps until
// the bound its attempt read (P's PTTL, 30 s); P unlocks, which wakes only H;
// H takes the lock and its hold ends silently: its 1 s lease runs out, or its
// key is deleted (H's watchdog notices). Java case: W queues while the lock is
// free behind a Java waiter J that was just woken (bound: J's deadline, about
// 5.5 min); J takes the lock with tryLock(wait, 1 s lease) and never unlocks.
// W must get the lock within 5 s of the lock being free.
//
// This failed before fair_acquire.lua woke the new head when a waiter takes the
// lock (W slept 30 s on P's PTTL) and capped, at 1 s, the sleep of the waiter
// right behind a head that has not taken the free lock yet (W slept 5.5 min on
// J's deadline).
func TestFairMutexLaterHoldEndsSilently(t *testing.T) {
	const lease = time.Second
	for _, tc := range []struct {
		name       string
		sameAsHead bool
		del        bool
	}{
		{"LeaseExpiry/SameClient", true, false},
		{"LeaseExpiry/OtherClient", false, false},
		{"Del/SameClient", true, true},
		{"Del/OtherClient", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			rdb := srv.Client(t)
			name := redistest.Name(t)
			ctx := testCtx(t, 60*time.Second)
			pc := newClient(t, srv.Client(t))
			hc := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(time.Second))
			wc := hc
			attempts := &fairAttempts{}
			if !tc.sameAsHead {
				wrdb := srv.Client(t)
				wrdb.AddHook(attempts)
				wc = newClient(t, wrdb)
			}
			p, err := pc.NewFairMutex(name).Lock(ctx) // watchdog lease: PTTL 30 s
			require.NoError(t, err)
			var opts []rlock.AcquireOption
			if !tc.del {
				opts = append(opts, rlock.WithLeaseTime(lease))
			}
			head := fairGo(ctx, hc.NewFairMutex(name).Lock, opts...)
			fairAwaitQueue(t, rdb, name, 1)
			next := fairGo(ctx, wc.NewFairMutex(name).Lock)
			q := fairAwaitQueue(t, rdb, name, 2)
			awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[1]), 1)
			if !tc.sameAsHead {
				fairAwaitAsleep(t, attempts)
			}

			require.NoError(t, p.Unlock(ctx))
			h := awaitAsync(t, head, 10*time.Second, "the head")
			require.NoError(t, h.err)
			free := time.Now().Add(rdb.PTTL(ctx, name).Val()) // when the head's lease runs out
			if tc.del {
				free = time.Now()
				require.EqualValues(t, 1, rdb.Del(ctx, name).Val())
			}
			fairAwaitServed(t, rdb, name, q[1], next, free, attempts)
		})
	}

	t.Run("Java/QueuedOnFreeLock", func(t *testing.T) {
		srv := redistest.Shared(t)
		rdb := srv.Client(t)
		name := redistest.Name(t)
		attempts := &fairAttempts{}
		wrdb := srv.Client(t)
		wrdb.AddHook(attempts)
		c := newClient(t, wrdb)
		java := javaFair{javaPeer{rdb: rdb, id: uuid.NewString(), publish: "PUBLISH"}}
		ctx := testCtx(t, 60*time.Second)
		ttl, err := java.acquire(ctx, name, 1, fairWaitMs)
		require.NoError(t, err)
		require.Nil(t, ttl)
		ttl, err = java.acquire(ctx, name, 2, fairWaitMs)
		require.NoError(t, err)
		require.NotNil(t, ttl, "Java thread 2 queued")
		v, err := java.unlock(ctx, name, 1) // wakes Java thread 2, the head
		require.NoError(t, err)
		require.EqualValues(t, 1, v)
		// The lock is free, its head has not come back yet: a Go waiter queues.
		next := fairGo(ctx, c.NewFairMutex(name).Lock)
		q := fairAwaitQueue(t, rdb, name, 2)
		require.Equal(t, java.field(2), q[0])
		awaitSubscribers(t, rdb, lua.WaiterChannel(name, q[1]), 1)
		fairAwaitAsleep(t, attempts)
		// Java thread 2 takes it with tryLock(wait, 1 s lease) and never unlocks.
		err = javaFairAcquire.Run(ctx, rdb, java.keys(name), lease.Milliseconds(), java.field(2), fairWaitMs, time.Now().UnixMilli()).Err()
		require.ErrorIs(t, err, redis.Nil, "Java thread 2 acquires")
		fairAwaitServed(t, rdb, name, q[1], next, time.Now().Add(lease), attempts)
	})
}

// fairAttempts is a go-redis hook counting a client's fair acquire attempts
// (fair_acquire.lua: 3 keys and 7 arguments).
type fairAttempts struct{ n atomic.Int64 }

func (h *fairAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *fairAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) == 13 && fmt.Sprint(args[2]) == "3" {
			h.n.Add(1)
		}
		return err
	}
}

func (h *fairAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// fairAwaitAsleep waits until a waiter whose client h counts has made its
// first two attempts, the one that queued it and the one after its
// subscription was confirmed: it then sleeps until a message, a poke or the
// bound the second attempt read.
func fairAwaitAsleep(t testing.TB, h *fairAttempts) {
	t.Helper()
	require.Eventually(t, func() bool { return h.n.Load() >= 2 }, 10*time.Second, time.Millisecond,
		"the waiter's attempts before it sleeps")
	require.EqualValues(t, 2, h.n.Load(), "attempts before it sleeps")
}

// fairAwaitServed waits for the queued waiter field (call next) to take the
// lock, which is free from free on, and fails with the Redis state and the
// count of its attempts when it has not within 5 s of free.
func fairAwaitServed(t *testing.T, rdb *redis.Client, name, field string, next <-chan leaseResult, free time.Time, attempts *fairAttempts) {
	t.Helper()
	select {
	case r := <-next:
		require.NoError(t, r.err)
		t.Logf("the waiter took the lock %v after it was free", fairMs(r.at.Sub(free)))
		require.NoError(t, r.v.Unlock(context.Background()))
		fairRequireClean(t, rdb, name)
	case <-time.After(time.Until(free) + 5*time.Second):
		ctx := context.Background()
		t.Fatalf("the waiter was not served within 5 s of the lock being free. Redis: EXISTS %s = %d; queue %v; deadlines %v (now %d); "+
			"subscribers of its channel %d; its client's acquire attempts so far %d",
			name, rdb.Exists(ctx, name).Val(), fairQueue(t, rdb, name), fairDeadlines(t, rdb, name), time.Now().UnixMilli(),
			numSub(t, rdb, lua.WaiterChannel(name, field)), attempts.n.Load())
	}
}

// fairRequireServed checks that the waiter whose result is r took the lock
// within 5 s of released, and unlocks it.
func fairRequireServed(t *testing.T, r leaseResult, released time.Time, who string) {
	t.Helper()
	require.NoError(t, r.err)
	t.Logf("%s took the lock %v after the release", who, fairMs(r.at.Sub(released)))
	require.Less(t, r.at.Sub(released), 5*time.Second)
	require.NoError(t, r.v.Unlock(context.Background()))
}

// javaFairPrune is the start of the Java fair lock's scripts: drop the
// waiters at the head of the queue (KEYS[2]) whose deadline (KEYS[3]) is
// before ARGV[now].
func javaFairPrune(now int) string {
	return fmt.Sprintf(`
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local t = redis.call('zscore', KEYS[3], head)
  if t == false or tonumber(t) > tonumber(ARGV[%d]) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
`, now)
}

// javaFairTake is what both acquisitions do next: take the lock (KEYS[1], for
// ARGV[2] with lease ARGV[1]) when it is free and ARGV[2] is first in line,
// moving the deadlines of the waiters behind by ARGV[wait], or reenter it.
func javaFairTake(wait int) string {
	return fmt.Sprintf(`if redis.call('exists', KEYS[1]) == 0 and
   (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local waiting = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #waiting do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[%d]), waiting[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
`, wait)
}

// javaFair simulates a Java process using Redisson's RFairLock. Its scripts are
// written here from the protocol facts (shared/redisson-protocol.md §2.6), not
// from holdfast's: the timed acquire (tryLock(wait)/lock(), which queues), the
// single attempt (tryLock(), which never queues), unlock and acquireFailed.
type javaFair struct{ javaPeer }

var (
	// KEYS: N, queue, timeouts. ARGV: lease, lock name, wait, now.
	// nil: acquired; integer: ttl (the waiter is queued).
	javaFairAcquire = newScript(javaFairPrune(4) + javaFairTake(3) + `
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`)

	// KEYS: N, queue, timeouts. ARGV: lease, lock name, now, wait (note the
	// order). nil: acquired; 1: not acquired. Never queues.
	javaFairTryAcquire = newScript(javaFairPrune(3) + javaFairTake(4) + `
return 1`)

	// KEYS: N, queue, timeouts, channel prefix, latch. ARGV: "0", lease,
	// lock name, now, publish command, latch ttl. nil: not owner; 0: still
	// held; 1: released (or N already gone).
	javaFairUnlock = newScript(`
local val = redis.call('get', KEYS[5])
if val ~= false then return tonumber(val) end` + javaFairPrune(4) + `
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
return 1`)

	// KEYS: queue, timeouts. ARGV: lock name, wait.
	javaFairAcquireFailed = newScript(`
local pos = redis.call('lpos', KEYS[1], ARGV[1])
if pos ~= false then
  local behind = redis.call('lrange', KEYS[1], pos + 1, -1)
  for i = 1, #behind do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), behind[i])
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return nil`)
)

func (j javaFair) keys(name string) []string {
	return []string{name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"}
}

// channel is the waiter thread's own channel.
func (j javaFair) channel(name string, thread int) string {
	return "redisson_lock__channel:{" + name + "}:" + j.field(thread)
}

// acquire is one attempt of lock() or tryLock(wait) with the watchdog lease
// (30 s) and the wait allowance wait (ms): nil when acquired, else the ttl.
func (j javaFair) acquire(ctx context.Context, name string, thread int, wait int64) (*int64, error) {
	return javaAcquireReply(javaFairAcquire.Run(ctx, j.rdb, j.keys(name), 30000, j.field(thread), wait, time.Now().UnixMilli()).Result())
}

// tryLock is tryLock(): one attempt that never queues.
func (j javaFair) tryLock(ctx context.Context, name string, thread int) (bool, error) {
	err := javaFairTryAcquire.Run(ctx, j.rdb, j.keys(name), 30000, j.field(thread), time.Now().UnixMilli(), fairWaitMs).Err()
	if err == redis.Nil {
		return true, nil
	}
	return false, err
}

// unlock returns Redisson's answer: nil (not owner), 0 (still held), 1 (released).
func (j javaFair) unlock(ctx context.Context, name string, thread int) (any, error) {
	keys := append(j.keys(name), "redisson_lock__channel:{"+name+"}", "redisson_unlock_latch:{"+name+"}:"+strings.ReplaceAll(uuid.NewString(), "-", ""))
	return javaUnlockReply(javaFairUnlock.Run(ctx, j.rdb, keys, 0, 30000, j.field(thread), time.Now().UnixMilli(), j.publish, 16000).Result())
}

// requireReleased unlocks the lock name held by thread, and requires the
// unlock to release it (Redisson's 1).
func (j javaFair) requireReleased(t *testing.T, ctx context.Context, name string, thread int) {
	t.Helper()
	v, err := j.unlock(ctx, name, thread)
	require.NoError(t, err)
	require.EqualValues(t, 1, v, "thread %d released the lock", thread)
}

// acquireFailed takes a waiter thread that gave up out of the queue.
func (j javaFair) acquireFailed(ctx context.Context, name string, thread int, wait int64) error {
	err := javaFairAcquireFailed.Run(ctx, j.rdb, j.keys(name)[1:], j.field(thread), wait).Err()
	if err == redis.Nil {
		return nil
	}
	return err
}

// TestFairMutexInterop proves, on one server, that holdfast's fair lock and a
// simulated Java RFairLock share one FIFO queue and wake each other through
// the per-waiter channels (see fairInteropJavaHolder, fairInteropGoHolder,
// fairInteropJavaGivesUp).
func TestFairMutexInterop(t *testing.T) {
	t.Run("JavaHolderGoThenJavaWaiter", func(t *testing.T) { fairInteropJavaHolder(t, standaloneInterop(t)) })
	t.Run("GoHolderJavaWaiter", func(t *testing.T) { fairInteropGoHolder(t, standaloneInterop(t)) })
	t.Run("JavaWaiterGivesUp", func(t *testing.T) { fairInteropJavaGivesUp(t, standaloneInterop(t)) })
}

// fairInteropJavaHolder: Java holds; a Go waiter queues, then a Java waiter
// behind it (its deadline Redisson's: the Go waiter's plus 5 min); Java's
// unlock publishes on the Go waiter's channel and Go takes the lock before the
// Java waiter, whose attempts get a ttl while Go holds; Go's unlock publishes
// "0" on the Java waiter's channel, and the Java waiter then acquires.
func fairInteropJavaHolder(t *testing.T, env interopEnv) {
	rdb, c, name, java := env.rdb, env.c, env.name, javaFair{env.java}
	ctx := testCtx(t, 30*time.Second)
	ttl, err := java.acquire(ctx, name, 1, fairWaitMs)
	require.NoError(t, err)
	require.Nil(t, ttl, "Java acquires")

	m := c.NewFairMutex(name)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.Empty(t, fairQueue(t, rdb, name), "Go's single attempt does not queue")
	got := fairGo(ctx, m.Lock)
	q := fairAwaitQueue(t, rdb, name, 1)
	goField := q[0]
	require.True(t, strings.HasPrefix(goField, c.ID()+":"))
	awaitListeners(t, env.subscribers, lua.WaiterChannel(name, goField), 1)

	ttl, err = java.acquire(ctx, name, 2, fairWaitMs)
	require.NoError(t, err)
	require.NotNil(t, ttl, "the Java waiter is queued")
	require.Greater(t, *ttl, int64(fairWaitMs), "its ttl is the Go waiter's deadline")
	require.Equal(t, []string{goField, java.field(2)}, fairQueue(t, rdb, name))
	dl := fairDeadlines(t, rdb, name)
	require.Equal(t, dl[goField]+fairWaitMs, dl[java.field(2)])
	ok, err := java.tryLock(ctx, name, 3)
	require.NoError(t, err)
	require.False(t, ok)
	require.Len(t, fairQueue(t, rdb, name), 2, "Java's tryLock() does not queue")

	sub := env.subscribe(ctx, java.channel(name, 2))
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)

	released := time.Now()
	java.requireReleased(t, ctx, name, 1)
	r := awaitAsync(t, got, 10*time.Second, "the Go waiter")
	require.NoError(t, r.err)
	t.Logf("the Go waiter took the lock %v after the Java unlock", fairMs(r.at.Sub(released)))
	require.Less(t, r.at.Sub(released), 5*time.Second)
	require.Equal(t, []string{java.field(2)}, fairQueue(t, rdb, name))
	require.Equal(t, dl[java.field(2)]-fairWaitMs, fairDeadlines(t, rdb, name)[java.field(2)],
		"Go's acquisition brought the deadlines behind it 5 min sooner")
	ttl, err = java.acquire(ctx, name, 2, fairWaitMs)
	require.NoError(t, err)
	require.NotNil(t, ttl, "Go holds")
	require.Greater(t, *ttl, int64(0))

	released = time.Now()
	require.NoError(t, r.v.Unlock(ctx))
	msg, err := sub.ReceiveMessage(testCtx(t, 5*time.Second))
	require.NoError(t, err, "Go's unlock woke the Java waiter")
	require.Equal(t, java.channel(name, 2), msg.Channel)
	require.Equal(t, "0", msg.Payload)
	t.Logf("the Java waiter heard Go's unlock %v after it", fairMs(time.Since(released)))
	ttl, err = java.acquire(ctx, name, 2, fairWaitMs)
	require.NoError(t, err)
	require.Nil(t, ttl, "the Java waiter acquires")
	require.Empty(t, fairQueue(t, rdb, name))
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	java.requireReleased(t, ctx, name, 2)
	fairRequireClean(t, rdb, name)
}

// fairInteropGoHolder: Go holds; Java's tryLock() fails without queueing, its
// lock() queues; Go's unlock publishes "0" on the Java waiter's channel; while
// the Java waiter has not come back, the free lock is its own: Go's TryLock
// fails; then Java acquires.
func fairInteropGoHolder(t *testing.T, env interopEnv) {
	rdb, c, name, java := env.rdb, env.c, env.name, javaFair{env.java}
	ctx := testCtx(t, 30*time.Second)
	owner := rlock.WithOwner(ctx)
	m := c.NewFairMutex(name)
	l, err := m.Lock(owner)
	require.NoError(t, err)

	ok, err := java.tryLock(ctx, name, 1)
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, fairQueue(t, rdb, name))
	ttl, err := java.acquire(ctx, name, 1, fairWaitMs)
	require.NoError(t, err)
	require.NotNil(t, ttl)
	require.Greater(t, *ttl, int64(20000), "the Go holder's PTTL (watchdog lease)")
	require.Equal(t, []string{java.field(1)}, fairQueue(t, rdb, name))

	sub := env.subscribe(ctx, java.channel(name, 1))
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	released := time.Now()
	require.NoError(t, l.Unlock(owner))
	msg, err := sub.ReceiveMessage(testCtx(t, 5*time.Second))
	require.NoError(t, err, "Go's unlock woke the Java waiter")
	require.Equal(t, "0", msg.Payload)
	t.Logf("the Java waiter heard Go's unlock %v after it", fairMs(time.Since(released)))

	_, err = m.TryLock(rlock.WithOwner(ctx))
	require.ErrorIs(t, err, rlock.ErrNotAcquired, "the free lock is the queued Java waiter's")
	require.Equal(t, []string{java.field(1)}, fairQueue(t, rdb, name))
	ttl, err = java.acquire(ctx, name, 1, fairWaitMs)
	require.NoError(t, err)
	require.Nil(t, ttl, "Java acquires")
	java.requireReleased(t, ctx, name, 1)
	fairRequireClean(t, rdb, name)
}

// fairInteropJavaGivesUp: Java holds; a Java tryLock(10 s) waiter queues, a Go
// waiter behind it; the Java waiter gives up (acquireFailed): the Go waiter is
// the head, its deadline 10 s sooner; Java's unlock then wakes the Go waiter.
func fairInteropJavaGivesUp(t *testing.T, env interopEnv) {
	rdb, c, name, java := env.rdb, env.c, env.name, javaFair{env.java}
	ctx := testCtx(t, 30*time.Second)
	const javaWait = 10000
	ttl, err := java.acquire(ctx, name, 1, fairWaitMs)
	require.NoError(t, err)
	require.Nil(t, ttl)
	ttl, err = java.acquire(ctx, name, 2, javaWait)
	require.NoError(t, err)
	require.NotNil(t, ttl)

	got := fairGo(ctx, c.NewFairMutex(name).Lock)
	q := fairAwaitQueue(t, rdb, name, 2)
	require.Equal(t, java.field(2), q[0])
	goField := q[1]
	require.True(t, strings.HasPrefix(goField, c.ID()+":"))
	dl := fairDeadlines(t, rdb, name)
	require.Equal(t, dl[java.field(2)]+fairWaitMs, dl[goField])
	awaitListeners(t, env.subscribers, lua.WaiterChannel(name, goField), 1)

	require.NoError(t, java.acquireFailed(ctx, name, 2, javaWait))
	require.Equal(t, []string{goField}, fairQueue(t, rdb, name))
	require.Equal(t, dl[goField]-javaWait, fairDeadlines(t, rdb, name)[goField])
	requirePending(t, got, "the Go waiter while Java holds")

	released := time.Now()
	java.requireReleased(t, ctx, name, 1)
	r := awaitAsync(t, got, 10*time.Second, "the Go waiter")
	fairRequireServed(t, r, released, "the Go waiter, after the Java unlock,")
	fairRequireClean(t, rdb, name)
}

// TestFairMutexCluster proves the fair lock on a cluster, where each waiter
// listens on its own shard channel (SSUBSCRIBE) and releases SPUBLISH (classic
// pub/sub on Redis 6.2): four waiters of two clients get the lock in arrival
// order, and the Java interop scenarios hold with Redisson's pub/sub.
func TestFairMutexCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	t.Run("FIFO", func(t *testing.T) { fairClusterFIFO(t, cl) })
	t.Run("JavaHolderGoThenJavaWaiter", func(t *testing.T) { fairInteropJavaHolder(t, clusterInterop(t, cl)) })
	t.Run("GoHolderJavaWaiter", func(t *testing.T) { fairInteropGoHolder(t, clusterInterop(t, cl)) })
	t.Run("JavaWaiterGivesUp", func(t *testing.T) { fairInteropJavaGivesUp(t, clusterInterop(t, cl)) })
}

func fairClusterFIFO(t *testing.T, cl *redistest.Cluster) {
	const waiters = 4
	env := clusterInterop(t, cl)
	rdb, name := env.rdb, env.name
	cs := []*rlock.Client{newClient(t, cl.Client(t)), newClient(t, cl.Client(t))}
	ctx := testCtx(t, 60*time.Second)
	hold, err := env.c.NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)

	var mu sync.Mutex
	var order []int
	results := make([]<-chan leaseResult, waiters)
	fields := make([]string, waiters)
	for k := range waiters {
		m := cs[k%2].NewFairMutex(name)
		results[k] = fairGo(ctx, func(ctx context.Context, opts ...rlock.AcquireOption) (*rlock.Lease, error) {
			l, err := m.Lock(ctx, opts...)
			if err == nil {
				mu.Lock()
				order = append(order, k)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // the critical section's work
				err = l.Unlock(ctx)
			}
			return l, err
		})
		q := fairAwaitQueue(t, rdb, name, k+1)
		fields[k] = q[k]
		require.True(t, strings.HasPrefix(fields[k], cs[k%2].ID()+":"))
		ch := lua.WaiterChannel(name, fields[k])
		require.Eventually(t, func() bool {
			n, other := clusterPubSubOf(t, cl).listeners(ctx, ch)
			return n == 1 && other == 0
		}, 10*time.Second, 5*time.Millisecond, "waiter %d listens on its own channel by %s", k, clusterPubSubOf(t, cl))
	}
	require.Equal(t, fields, fairQueue(t, rdb, name))

	released := time.Now()
	require.NoError(t, hold.Unlock(ctx))
	var lat []time.Duration
	for k := range waiters {
		r := awaitAsync(t, results[k], 15*time.Second, fmt.Sprintf("waiter %d", k))
		require.NoError(t, r.err, "waiter %d", k)
		lat = append(lat, fairMs(r.at.Sub(released)))
	}
	t.Logf("order %v; each waiter done (held and unlocked) %v after the holder's unlock", order, lat)
	require.Equal(t, []int{0, 1, 2, 3}, order, "FIFO")
	require.Less(t, lat[waiters-1], 10*time.Second)
	fairRequireClean(t, rdb, name)
}

// Worker side of TestFairMutexFIFOAcrossProcesses. A worker is
// the test binary re-executed by redistest with WorkerEnv set: it connects to
// the server at $FAIR_ADDR with its own rlock.Client, runs its waiters of the
// global arrival order and reports on stdout, one line per event.

const fairWaiterRole = "fair-waiter" // TestFairMutexFIFOAcrossProcesses

// fairEnvInt reads an integer from the worker's environment.
func fairEnvInt(t *testing.T, key string) int {
	n, err := strconv.Atoi(os.Getenv(key))
	require.NoError(t, err, key)
	return n
}

// fairWaiterWorker is one process of TestFairMutexFIFOAcrossProcesses. Worker i
// of $FAIR_WORKERS runs the waiters k = i, i+workers, ... (k < $FAIR_WAITERS) of
// the global arrival order, each its own owner (goroutine), on the fair lock
// $FAIR_NAME. It says "READY <client id>"; waiter k then waits for its start
// signal (a BLPOP on <$FAIR_CTL>:start:<k>) and calls Lock. Once it holds the
// lock it checks that it is alone inside (INCR of <ctl>:inside), appends
// "<k> <its field> <unix ns>" to the list <ctl>:order, holds briefly and
// unlocks, and says "DONE <k>". The waiter $FAIR_GIVEUP (-1: none) instead has
// its Lock cancelled when <ctl>:cancel:<k> is pushed, and says
// "GAVEUP <k> <error>" once Lock has returned.
func fairWaiterWorker(t *testing.T) {
	addr, name, ctl := os.Getenv("FAIR_ADDR"), os.Getenv("FAIR_NAME"), os.Getenv("FAIR_CTL")
	require.NotEmpty(t, addr, "FAIR_ADDR")
	require.NotEmpty(t, name, "FAIR_NAME")
	require.NotEmpty(t, ctl, "FAIR_CTL")
	workers, waiters, giveUp := fairEnvInt(t, "FAIR_WORKERS"), fairEnvInt(t, "FAIR_WAITERS"), fairEnvInt(t, "FAIR_GIVEUP")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := c.NewFairMutex(name)

	fmt.Println("READY", c.ID())
	var wg sync.WaitGroup
	for k := redistest.WorkerIndex(); k < waiters; k += workers {
		wg.Go(func() {
			if err := rdb.BLPop(ctx, 60*time.Second, fmt.Sprintf("%s:start:%d", ctl, k)).Err(); err != nil {
				t.Errorf("waiter %d: start signal: %v", k, err)
				return
			}
			if k == giveUp {
				fairGiveUp(ctx, t, rdb, m, ctl, k)
				return
			}
			l, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: Lock: %v", k, err)
				return
			}
			at := time.Now().UnixNano()
			if n, err := rdb.Incr(ctx, ctl+":inside").Result(); err != nil || n != 1 {
				t.Errorf("waiter %d: not alone in the critical section: INCR inside = %d, %v", k, n, err)
			}
			fields, err := rdb.HKeys(ctx, name).Result()
			if err != nil || len(fields) != 1 {
				t.Errorf("waiter %d: holders of the lock: %v, %v", k, fields, err)
				fields = append(fields, "?")
			}
			if err := rdb.RPush(ctx, ctl+":order", fmt.Sprintf("%d %s %d", k, fields[0], at)).Err(); err != nil {
				t.Errorf("waiter %d: recording the acquisition: %v", k, err)
			}
			time.Sleep(2 * time.Millisecond) // the critical section's work
			if err := rdb.Decr(ctx, ctl+":inside").Err(); err != nil {
				t.Errorf("waiter %d: DECR inside: %v", k, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", k, err)
			}
			fmt.Println("DONE", k)
		})
	}
	wg.Wait()
}

// fairGiveUp is the waiter k that gives up: its Lock's ctx is cancelled when
// the parent pushes <ctl>:cancel:<k>.
func fairGiveUp(ctx context.Context, t *testing.T, rdb *redis.Client, m *rlock.FairMutex, ctl string, k int) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	signal := make(chan error, 1)
	go func() {
		err := rdb.BLPop(ctx, 60*time.Second, fmt.Sprintf("%s:cancel:%d", ctl, k)).Err()
		cancel()
		signal <- err
	}()
	l, err := m.Lock(lctx)
	if err == nil {
		t.Errorf("waiter %d: acquired although it should have given up", k)
		_ = l.Unlock(ctx)
	}
	if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("waiter %d: Lock returned %v, want ErrNotAcquired and context.Canceled", k, err)
	}
	fmt.Println("GAVEUP", k, err)
	if err := <-signal; err != nil {
		t.Errorf("waiter %d: cancel signal: %v", k, err)
	}
}
