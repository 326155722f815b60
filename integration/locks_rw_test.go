package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Read/write lock tests (rlock.RWMutex, Redisson's RReadWriteLock) against real
// Redis: shared readers and an exclusive writer on Redisson's layout (one hash
// with "mode", owner fields, ":write" field, a "{N}:<field>:rwlock_timeout:<k>"
// key per read hold), the wake-ups on "redisson_rwlock:{N}" ("0" when the last
// reader leaves, "1" when the writer does), downgrade and the refused upgrade,
// the watchdog of read holds, zombie readers, the inspection rules of each side,
// interop with a simulated Java Redisson client, and a measure of writer
// starvation. Unless a test says otherwise its clients use the default 30 s
// watchdog, so that a waiter woken by a lease running out instead of a message
// would blow the tests' bounds (rwBound).

// rwBound is how long a woken waiter may take to get in: generous (the machine is
// small and shared), yet far below the 30 s lease that a missed wake-up would
// cost.
const rwBound = 5 * time.Second

// rwChannel is the release channel of the read/write lock name, written here
// from the protocol (§0.4) rather than taken from holdfast.
func rwChannel(name string) string { return "redisson_rwlock:{" + name + "}" }

// rwTimeoutKey is the key of the k-th read hold of field on the lock name (§0.4).
func rwTimeoutKey(name, field string, k int) string {
	return "{" + name + "}:" + field + ":rwlock_timeout:" + strconv.Itoa(k)
}

// rwTimeoutKeys returns every read timeout key of the lock name, sorted.
func rwTimeoutKeys(t testing.TB, rdb *redis.Client, name string) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "{"+name+"}:*:rwlock_timeout:*").Result()
	require.NoError(t, err)
	slices.Sort(keys)
	return keys
}

// rwRequireTimeouts checks that the read timeout keys of the lock name are
// exactly those its hash calls for (keys 1..count of every read field), each
// with a PTTL > 0, and returns how many there are.
func rwRequireTimeouts(t testing.TB, rdb *redis.Client, name string) int {
	t.Helper()
	var want []string
	for f, v := range holders(t, rdb, name) {
		if f == "mode" || strings.HasSuffix(f, ":write") {
			continue
		}
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "field %s = %q", f, v)
		for k := 1; k <= n; k++ {
			want = append(want, rwTimeoutKey(name, f, k))
		}
	}
	slices.Sort(want)
	require.Equal(t, want, rwTimeoutKeys(t, rdb, name), "read timeout keys")
	for _, k := range want {
		require.Greater(t, wdPTTL(t, rdb, k), time.Duration(0), "PTTL of %s", k)
	}
	return len(want)
}

// rwRequireGone checks that nothing of the lock name is left: neither the hash
// nor any read timeout key.
func rwRequireGone(t testing.TB, rdb *redis.Client, name string) {
	t.Helper()
	require.False(t, wdExists(t, rdb, name), "the lock hash is gone")
	require.Empty(t, rwTimeoutKeys(t, rdb, name), "no read timeout key is left")
}

// rwField returns the only field of the hash name that starts with prefix and
// is not "mode".
func rwField(t testing.TB, rdb *redis.Client, name, prefix string) string {
	t.Helper()
	var found []string
	for f := range holders(t, rdb, name) {
		if f != "mode" && strings.HasPrefix(f, prefix) {
			found = append(found, f)
		}
	}
	require.Len(t, found, 1, "fields of %s starting with %q", name, prefix)
	return found[0]
}

// rwAwaitWaiting waits until n Lock calls (of clients made with watchWaits)
// are waiting on the lock name and its channel has at least subs subscribers:
// a release from then on is heard.
func rwAwaitWaiting(t testing.TB, rdb *redis.Client, name string, n int, subs int64) {
	t.Helper()
	awaitParked(t, name, n)
	awaitSubscribersAtLeast(t, rdb, rwChannel(name), subs)
}

// rwSubscribe subscribes the test to the lock's channel, as a Java waiter would.
func rwSubscribe(t testing.TB, rdb *redis.Client, name string) *redis.PubSub {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	sub := rdb.Subscribe(ctx, rwChannel(name))
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	return sub
}

// rwRequireMessage waits for the next message of sub and checks its payload.
func rwRequireMessage(t testing.TB, sub *redis.PubSub, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rwBound)
	defer cancel()
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err, "waiting for %q", payload)
	require.Equal(t, payload, msg.Payload)
}

// rwRequireLost checks that l ended as lost.
func rwRequireLost(t testing.TB, l *rlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatalf("lease of %s still open", l.Name())
	}
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
}

// TestRWReadersShareWriterWaitsForLast proves that the read side is shared: 8
// owners on 2 clients hold it at once (each signals once it holds and none
// unlocks before all did), with Redisson's layout (mode=read, 8 owner fields, 8
// timeout keys); that writers are excluded meanwhile; and that a writer blocked
// in Lock gets in only after the last reader unlocks, promptly: woken by the
// "0" message, not by the 30 s lease.
func TestRWReadersShareWriterWaitsForLast(t *testing.T) {
	rdb, c1, name := setup(t, watchWaits())
	c2 := newClient(t, rdb, watchWaits())
	ctx := testCtx(t, 30*time.Second)
	rws := []*rlock.RWMutex{c1.NewRWMutex(name), c2.NewRWMutex(name)}

	const readers = 8
	held := make(chan int, readers)
	unlocked := make(chan error, readers)
	release := make([]chan struct{}, readers)
	for i := range readers {
		release[i] = make(chan struct{})
		go func() {
			octx := rlock.WithOwner(ctx)
			m := rws[i%2].ReadLock()
			if _, err := m.Lock(octx); err != nil {
				t.Errorf("reader %d: %v", i, err)
				return
			}
			held <- i
			select {
			case <-release[i]:
			case <-ctx.Done():
			}
			unlocked <- m.Unlock(octx)
		}()
	}
	// The barrier: all 8 hold before any is allowed to unlock.
	for range readers {
		select {
		case <-held:
		case <-time.After(rwBound):
			t.Fatal("the 8 readers did not all get the read lock together")
		}
	}

	h := holders(t, rdb, name)
	require.Equal(t, "read", h["mode"])
	require.Len(t, h, readers+1, "mode and 8 owner fields: %v", h)
	perClient := map[string]int{}
	for f, v := range h {
		if f == "mode" {
			continue
		}
		require.Regexp(t, `^[0-9a-f-]{36}:[0-9]+$`, f)
		require.Equal(t, "1", v)
		perClient[f[:36]]++
	}
	require.Equal(t, map[string]int{c1.ID(): 4, c2.ID(): 4}, perClient)
	require.Equal(t, readers, rwRequireTimeouts(t, rdb, name))
	ttl := wdPTTL(t, rdb, name)
	require.Greater(t, ttl, 25*time.Second)
	require.LessOrEqual(t, ttl, 30*time.Second)

	for _, rw := range rws {
		_, err := rw.WriteLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "a writer is excluded while readers hold")
		locked, err := rw.WriteLock().IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
		locked, err = rw.ReadLock().IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)
	}

	w := lockAsync(ctx, rws[0].WriteLock())
	rwAwaitWaiting(t, rdb, name, 1, 1)

	// Readers 1..7 leave (four of c2, three of c1): the writer still waits.
	for i := 1; i < readers; i++ {
		close(release[i])
		require.NoError(t, <-unlocked, "reader %d unlock", i)
		require.Len(t, holders(t, rdb, name), readers-i+1)
		requirePending(t, w, "the writer")
	}
	require.Equal(t, 1, rwRequireTimeouts(t, rdb, name))
	released := time.Now()
	close(release[0])
	require.NoError(t, <-unlocked, "reader 0 unlock")
	r := awaitAsync(t, w, rwBound, "the writer")
	require.NoError(t, r.err)
	t.Logf("writer got in %v after the last reader's unlock began", r.at.Sub(released).Round(time.Microsecond))

	h = holders(t, rdb, name)
	require.Equal(t, "write", h["mode"])
	require.Len(t, h, 2)
	require.Regexp(t, `^`+c1.ID()+`:[0-9]+:write$`, rwField(t, rdb, name, c1.ID()))
	require.Empty(t, rwTimeoutKeys(t, rdb, name))
	require.NoError(t, r.v.Unlock(ctx))
	rwRequireGone(t, rdb, name)
}

// TestRWWriterExclusive proves that the write side is exclusive and reentrant:
// while an owner holds it (twice: HoldCount 2, field "<uuid>:<id>:write" = 2),
// readers and writers of other owners on both clients fail TryLock; a partial
// write unlock lets nobody in; the final one publishes "1", which lets every
// blocked reader in (4 waiting in the holder's client, 4 in another), promptly.
func TestRWWriterExclusive(t *testing.T) {
	rdb, c1, name := setup(t, watchWaits())
	c2 := newClient(t, rdb, watchWaits())
	ctx := testCtx(t, 30*time.Second)
	rws := []*rlock.RWMutex{c1.NewRWMutex(name), c2.NewRWMutex(name)}
	wm := rws[0].WriteLock()

	wctx := rlock.WithOwner(ctx)
	l1, err := wm.Lock(wctx)
	require.NoError(t, err)
	l2, err := wm.Lock(wctx)
	require.NoError(t, err, "reentrant write")
	n, err := wm.HoldCount(wctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	held, err := wm.IsHeld(wctx)
	require.NoError(t, err)
	require.True(t, held)
	h := holders(t, rdb, name)
	require.Equal(t, "write", h["mode"])
	require.Len(t, h, 2)
	wfield := rwField(t, rdb, name, c1.ID())
	require.Regexp(t, `^`+c1.ID()+`:[0-9]+:write$`, wfield)
	require.Equal(t, "2", h[wfield])
	// holdfast's deliberate difference from Redisson: a reentrant write sets the
	// TTL to the lease instead of adding the lease to it (which would give 60 s).
	ttl := wdPTTL(t, rdb, name)
	require.Greater(t, ttl, 25*time.Second)
	require.LessOrEqual(t, ttl, 30*time.Second, "reentrant write: TTL set to the lease, not added")

	for _, rw := range rws {
		_, err := rw.ReadLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "a reader is excluded by the writer")
		_, err = rw.WriteLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "another writer is excluded")
		_, err = rw.ReadLock().TryLock(ctx, rlock.WithWaitTime(100*time.Millisecond))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "a reader waiting 100 ms is excluded")
	}
	require.Equal(t, h, holders(t, rdb, name), "failed attempts change nothing")
	require.Empty(t, rwTimeoutKeys(t, rdb, name))

	const waiters = 8
	results := make([]<-chan leaseResult, waiters)
	for i := range results {
		results[i] = lockAsync(ctx, rws[i%2].ReadLock())
	}
	rwAwaitWaiting(t, rdb, name, waiters, 2)

	require.NoError(t, l2.Unlock(wctx))
	n, err = wm.HoldCount(wctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for i, ch := range results {
		requirePending(t, ch, fmt.Sprintf("reader %d after a partial write unlock", i))
	}

	released := time.Now()
	require.NoError(t, l1.Unlock(wctx))
	var slowest time.Duration
	var leases []*rlock.Lease
	for i, ch := range results {
		r := awaitAsync(t, ch, rwBound, fmt.Sprintf("reader %d", i))
		require.NoError(t, r.err, "reader %d", i)
		leases = append(leases, r.v)
		slowest = max(slowest, r.at.Sub(released))
	}
	t.Logf("all %d blocked readers (4 per client) got in within %v of the write unlock", waiters, slowest.Round(time.Microsecond))
	require.Less(t, slowest, rwBound)

	h = holders(t, rdb, name)
	require.Equal(t, "read", h["mode"])
	require.Len(t, h, waiters+1, "the 8 readers hold together: %v", h)
	require.Equal(t, waiters, rwRequireTimeouts(t, rdb, name))
	for _, l := range leases {
		require.NoError(t, l.Unlock(ctx))
	}
	rwRequireGone(t, rdb, name)
}

// TestRWDowngrade proves the write -> read downgrade: the writer takes the read
// side too, then unlocks the write side, which leaves the hash in mode=read
// with the owner's read field and timeout key, and publishes "1" (holdfast's
// deliberate difference from Redisson), so that readers of other owners that
// were waiting (one in the same client, one in another) get in at once instead
// of after the 30 s lease; the write side is then refused to the owner
// (ErrUpgrade). The owner's final read unlock deletes everything.
func TestRWDowngrade(t *testing.T) {
	rdb, c1, name := setup(t, watchWaits())
	c2 := newClient(t, rdb, watchWaits())
	ctx := testCtx(t, 30*time.Second)
	rw := c1.NewRWMutex(name)
	octx := rlock.WithOwner(ctx)

	wl, err := rw.WriteLock().Lock(octx)
	require.NoError(t, err)
	rl, err := rw.ReadLock().Lock(octx)
	require.NoError(t, err, "the writer may take the read side")
	h := holders(t, rdb, name)
	require.Equal(t, "write", h["mode"])
	require.Len(t, h, 3, "mode, write field, read field: %v", h)
	var rfield, wfield string
	for f := range h {
		switch {
		case strings.HasSuffix(f, ":write"):
			wfield = f
		case f != "mode":
			rfield = f
		}
	}
	require.Regexp(t, `^`+c1.ID()+`:[0-9]+$`, rfield)
	require.Equal(t, rfield+":write", wfield, "one owner's read and write fields")
	require.Equal(t, "1", h[rfield])
	require.Equal(t, 1, rwRequireTimeouts(t, rdb, name))
	locked, err := rw.ReadLock().IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, locked, "write mode with a read hold: the read side is locked (Redisson's rule)")

	sameClient := lockAsync(ctx, rw.ReadLock())
	otherClient := lockAsync(ctx, c2.NewRWMutex(name).ReadLock())
	rwAwaitWaiting(t, rdb, name, 2, 2)
	sub := rwSubscribe(t, rdb, name)

	released := time.Now()
	require.NoError(t, wl.Unlock(octx))
	rwRequireMessage(t, sub, "1")
	h = holders(t, rdb, name)
	require.Equal(t, "read", h["mode"], "the downgrade leaves the lock in read mode")
	require.Equal(t, "1", h[rfield], "with the owner's read hold")
	require.NotContains(t, h, rfield+":write")
	n, err := rw.ReadLock().HoldCount(octx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = rw.WriteLock().HoldCount(octx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = rw.WriteLock().TryLock(octx, rlock.WithWaitTime(time.Second))
	require.ErrorIs(t, err, rlock.ErrUpgrade, "having downgraded, the owner holds only the read side")

	r1 := awaitAsync(t, sameClient, rwBound, "reader of the same client")
	r2 := awaitAsync(t, otherClient, rwBound, "reader of another client")
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	t.Logf("after the downgrade, waiting readers got in after %v (same client) and %v (other client)",
		r1.at.Sub(released).Round(time.Microsecond), r2.at.Sub(released).Round(time.Microsecond))
	require.Len(t, holders(t, rdb, name), 4)
	require.Equal(t, 3, rwRequireTimeouts(t, rdb, name))

	require.NoError(t, r1.v.Unlock(ctx))
	require.NoError(t, r2.v.Unlock(ctx))
	require.Equal(t, 1, rwRequireTimeouts(t, rdb, name))
	require.NoError(t, rl.Unlock(octx))
	rwRequireGone(t, rdb, name)
	require.ErrorIs(t, rl.Err(), rlock.ErrUnlocked)
	require.ErrorIs(t, wl.Err(), rlock.ErrUnlocked)
}

// TestRWUpgradeRefused proves that an owner holding the read side is refused
// the write side at once with ErrUpgrade, by Lock on a ctx without deadline and
// by TryLock with a wait time, and that Redis is left as it was.
func TestRWUpgradeRefused(t *testing.T) {
	rdb, c, name := setup(t)
	rw := c.NewRWMutex(name)
	octx := rlock.WithOwner(context.Background())
	rl, err := rw.ReadLock().Lock(octx)
	require.NoError(t, err)
	before := holders(t, rdb, name)
	keysBefore := rwTimeoutKeys(t, rdb, name)
	require.Len(t, keysBefore, 1)

	type outcome struct {
		err     error
		elapsed time.Duration
	}
	got := make(chan outcome, 2)
	go func() {
		start := time.Now()
		_, err := rw.WriteLock().Lock(octx) // no deadline: only the refusal can end it
		got <- outcome{err, time.Since(start)}
	}()
	go func() {
		start := time.Now()
		_, err := rw.WriteLock().TryLock(octx, rlock.WithWaitTime(10*time.Second))
		got <- outcome{err, time.Since(start)}
	}()
	for _, what := range []string{"first", "second"} {
		select {
		case o := <-got:
			require.ErrorIs(t, o.err, rlock.ErrUpgrade)
			require.Less(t, o.elapsed, time.Second, "refused at once")
			t.Logf("upgrade refused after %v", o.elapsed.Round(time.Microsecond))
		case <-time.After(rwBound):
			t.Fatalf("the %s upgrade attempt was not refused within %v", what, rwBound)
		}
	}

	require.Equal(t, before, holders(t, rdb, name), "nothing changed in the hash")
	require.Equal(t, keysBefore, rwTimeoutKeys(t, rdb, name))
	n, err := rw.WriteLock().HoldCount(octx)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = rw.ReadLock().HoldCount(octx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	select {
	case <-rl.Done():
		t.Fatalf("the read lease ended: %v", rl.Err())
	default:
	}
	require.NoError(t, rw.ReadLock().Unlock(octx))
	rwRequireGone(t, rdb, name)
}

// TestRWWatchdogKeepsReadHolds proves that the watchdog renews read holds, their
// timeout keys included: with a 1 s watchdog, two owners on two clients (one
// holding twice) keep the hash and all 3 timeout keys alive (PTTL > 0 at every
// check, every 50 ms) for 3.5 timeouts, their leases stay open, and once they
// unlock nothing is left.
func TestRWWatchdogKeepsReadHolds(t *testing.T) {
	rdb, c1, name := setup(t, wdOpts()...)
	c2 := newClient(t, rdb, wdOpts()...)
	ctx := testCtx(t, 30*time.Second)
	actx, bctx := rlock.WithOwner(ctx), rlock.WithOwner(ctx)
	ra, rb := c1.NewRWMutex(name).ReadLock(), c2.NewRWMutex(name).ReadLock()
	la1, err := ra.Lock(actx)
	require.NoError(t, err)
	la2, err := ra.Lock(actx)
	require.NoError(t, err)
	lb, err := rb.Lock(bctx)
	require.NoError(t, err)
	fa, fb := rwField(t, rdb, name, c1.ID()), rwField(t, rdb, name, c2.ID())
	require.Equal(t, map[string]string{"mode": "read", fa: "2", fb: "1"}, holders(t, rdb, name))
	keys := []string{name, rwTimeoutKey(name, fa, 1), rwTimeoutKey(name, fa, 2), rwTimeoutKey(name, fb, 1)}
	require.Equal(t, 3, rwRequireTimeouts(t, rdb, name))

	// Hold for 3.5 timeouts on purpose: without renewal every key expires after one.
	minTTL := map[string]time.Duration{}
	end := time.Now().Add(3*wdTimeout + wdTimeout/2)
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	checks := 0
	for time.Now().Before(end) {
		<-ticker.C
		for _, k := range keys {
			ttl := wdPTTL(t, rdb, k)
			require.Greater(t, ttl, time.Duration(0), "PTTL of %s after %d checks", k, checks)
			if m, ok := minTTL[k]; !ok || ttl < m {
				minTTL[k] = ttl
			}
		}
		for _, l := range []*rlock.Lease{la1, la2, lb} {
			wdRequireOpen(t, l)
		}
		checks++
	}
	for i, k := range keys {
		t.Logf("key %d lowest PTTL over %d checks: %v", i, checks, minTTL[k])
	}
	require.Equal(t, map[string]string{"mode": "read", fa: "2", fb: "1"}, holders(t, rdb, name))

	require.NoError(t, la2.Unlock(actx))
	require.False(t, wdExists(t, rdb, rwTimeoutKey(name, fa, 2)), "the released hold's timeout key is deleted")
	require.NoError(t, la1.Unlock(actx))
	require.NoError(t, lb.Unlock(bctx))
	rwRequireGone(t, rdb, name)
}

// TestRWLostReadHold proves that the watchdog notices a read hold deleted from
// outside: after HDEL of one owner's field only that owner's lease ends (Done
// closed, ErrLockLost, WithOnLost called) while the other reader's stays open;
// after DEL of the hash the other's ends too. Unlock afterwards returns
// ErrNotHeld, and the lost holds' timeout keys are no longer renewed.
func TestRWLostReadHold(t *testing.T) {
	lost := make(chan error, 4)
	onLost := rlock.WithOnLost(func(_ string, err error) { lost <- err })
	rdb, c, name := setup(t, wdOpts(onLost)...)
	ctx := testCtx(t, 30*time.Second)
	rm := c.NewRWMutex(name).ReadLock()
	actx, bctx := rlock.WithOwner(ctx), rlock.WithOwner(ctx)
	la, err := rm.Lock(actx)
	require.NoError(t, err)
	fa := rwField(t, rdb, name, c.ID())
	lb, err := rm.Lock(bctx)
	require.NoError(t, err)
	require.Len(t, holders(t, rdb, name), 3)

	awaitOnLost := func() {
		t.Helper()
		select {
		case err := <-lost:
			require.ErrorIs(t, err, rlock.ErrLockLost)
		case <-time.After(rwBound):
			t.Fatal("WithOnLost was not called")
		}
	}

	start := time.Now()
	require.NoError(t, rdb.HDel(ctx, name, fa).Err())
	took := wdAwaitDone(t, la, start, rwBound)
	t.Logf("HDEL of a read field: lease lost after %v", took.Round(time.Millisecond))
	rwRequireLost(t, la)
	awaitOnLost()
	wdRequireOpen(t, lb)
	n, err := rm.HoldCount(bctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ErrorIs(t, rm.Unlock(actx), rlock.ErrNotHeld)
	err = la.Unlock(actx)
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	require.ErrorIs(t, err, rlock.ErrLockLost)
	require.Eventually(t, func() bool { return !wdExists(t, rdb, rwTimeoutKey(name, fa, 1)) },
		rwBound, 20*time.Millisecond, "the lost hold's timeout key expires: not renewed any more")
	wdRequireOpen(t, lb)

	start = time.Now()
	require.NoError(t, rdb.Del(ctx, name).Err())
	took = wdAwaitDone(t, lb, start, rwBound)
	t.Logf("DEL of the hash: lease lost after %v", took.Round(time.Millisecond))
	rwRequireLost(t, lb)
	awaitOnLost()
	require.ErrorIs(t, rm.Unlock(bctx), rlock.ErrNotHeld)
	require.Eventually(t, func() bool { return len(rwTimeoutKeys(t, rdb, name)) == 0 },
		rwBound, 20*time.Millisecond, "every timeout key expires")
	require.False(t, wdExists(t, rdb, name))
}

// TestRWZombieReaderCleanup proves Redisson's step 6 of the read unlock: a dead
// reader (fields and timeout key written by hand, as a crashed Java client
// leaves them) does not hold the lock once its timeout key has expired: the
// last live reader's unlock deletes the whole hash, dead field included, and a
// writer that was waiting gets in at once.
func TestRWZombieReaderCleanup(t *testing.T) {
	rdb, c1, name := setup(t, watchWaits())
	c2 := newClient(t, rdb, watchWaits())
	ctx := testCtx(t, 30*time.Second)
	dead := uuid.NewString() + ":13"
	deadKey := rwTimeoutKey(name, dead, 1)
	require.NoError(t, rdb.HSet(ctx, name, "mode", "read", dead, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, name, 30*time.Second).Err())
	require.NoError(t, rdb.Set(ctx, deadKey, 1, 500*time.Millisecond).Err())

	octx := rlock.WithOwner(ctx)
	rm := c1.NewRWMutex(name).ReadLock()
	rl, err := rm.Lock(octx)
	require.NoError(t, err, "a live reader joins the dead one")
	live := rwField(t, rdb, name, c1.ID())
	require.Equal(t, map[string]string{"mode": "read", dead: "1", live: "1"}, holders(t, rdb, name))

	w := lockAsync(ctx, c2.NewRWMutex(name).WriteLock())
	rwAwaitWaiting(t, rdb, name, 1, 1)
	require.Eventually(t, func() bool { return !wdExists(t, rdb, deadKey) }, rwBound, 10*time.Millisecond,
		"the dead reader's timeout key expires")
	require.Contains(t, holders(t, rdb, name), dead, "the zombie's field is still in the hash")
	requirePending(t, w, "the writer")

	released := time.Now()
	require.NoError(t, rl.Unlock(octx))
	r := awaitAsync(t, w, rwBound, "the writer")
	require.NoError(t, r.err)
	t.Logf("writer got in %v after the last live reader's unlock", r.at.Sub(released).Round(time.Microsecond))
	h := holders(t, rdb, name)
	require.Equal(t, "write", h["mode"])
	require.NotContains(t, h, dead, "the zombie's field was deleted with the hash")
	require.Len(t, h, 2)
	require.NoError(t, r.v.Unlock(ctx))
	rwRequireGone(t, rdb, name)
}

// TestRWInspectAndForceUnlock proves IsLocked, RemainTTL, HoldCount, IsHeld and
// ForceUnlock of each side by Redisson's rules (§1.4): the read side is locked
// in read mode, or in write mode with read holds besides the writer's; the write
// side iff in write mode; a side's ForceUnlock deletes the lock only in its own
// mode (publishing "0" for the read side, "1" for the write side), and the local
// leases then end with ErrLockLost.
func TestRWInspectAndForceUnlock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	rw := c.NewRWMutex(name)
	rm, wm := rw.ReadLock(), rw.WriteLock()
	require.Equal(t, name, rw.Name())
	require.Equal(t, name, rm.Name())
	require.Equal(t, name, wm.Name())
	octx := rlock.WithOwner(ctx)
	other := rlock.WithOwner(ctx)

	type side struct {
		name   string
		m      rlock.Locker
		locked bool
		count  int
	}
	check := func(state string, sides ...side) {
		t.Helper()
		for _, s := range sides {
			locked, err := s.m.IsLocked(ctx)
			require.NoError(t, err)
			require.Equal(t, s.locked, locked, "%s: %s side IsLocked", state, s.name)
			ttl, err := s.m.RemainTTL(ctx)
			require.NoError(t, err)
			if s.locked {
				require.Greater(t, ttl, 25*time.Second, "%s: %s side RemainTTL", state, s.name)
				require.LessOrEqual(t, ttl, 30*time.Second)
			} else {
				require.Equal(t, rlock.NotLocked, ttl, "%s: %s side RemainTTL", state, s.name)
			}
			n, err := s.m.HoldCount(octx)
			require.NoError(t, err)
			require.Equal(t, s.count, n, "%s: %s side HoldCount", state, s.name)
			held, err := s.m.IsHeld(octx)
			require.NoError(t, err)
			require.Equal(t, s.count > 0, held, "%s: %s side IsHeld", state, s.name)
			n, err = s.m.HoldCount(other)
			require.NoError(t, err)
			require.Zero(t, n, "%s: %s side HoldCount of another owner", state, s.name)
		}
	}

	check("free", side{"read", rm, false, 0}, side{"write", wm, false, 0})
	for _, m := range []rlock.Locker{rm, wm} {
		ok, err := m.ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "nothing to force-unlock")
	}

	// Read mode.
	r1, err := rm.Lock(octx)
	require.NoError(t, err)
	r2, err := rm.Lock(octx)
	require.NoError(t, err)
	check("read mode", side{"read", rm, true, 2}, side{"write", wm, false, 0})
	before := holders(t, rdb, name)
	ok, err := wm.ForceUnlock(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the write side's ForceUnlock leaves read mode alone")
	require.Equal(t, before, holders(t, rdb, name))
	wdRequireOpen(t, r1)
	wdRequireOpen(t, r2)
	sub := rwSubscribe(t, rdb, name)
	ok, err = rm.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	rwRequireMessage(t, sub, "0")
	require.False(t, wdExists(t, rdb, name))
	rwRequireLost(t, r1)
	rwRequireLost(t, r2)
	require.ErrorIs(t, rm.Unlock(octx), rlock.ErrNotHeld)
	check("after the read side's ForceUnlock", side{"read", rm, false, 0}, side{"write", wm, false, 0})

	// Write mode, then write mode with the writer's read hold.
	wl, err := wm.Lock(octx)
	require.NoError(t, err)
	check("write mode", side{"read", rm, false, 0}, side{"write", wm, true, 1})
	rl, err := rm.Lock(octx)
	require.NoError(t, err)
	check("write mode with a read hold", side{"read", rm, true, 1}, side{"write", wm, true, 1})
	before = holders(t, rdb, name)
	ok, err = rm.ForceUnlock(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the read side's ForceUnlock leaves write mode alone")
	require.Equal(t, before, holders(t, rdb, name))
	wdRequireOpen(t, wl)
	wdRequireOpen(t, rl)
	ok, err = wm.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	rwRequireMessage(t, sub, "1")
	require.False(t, wdExists(t, rdb, name))
	rwRequireLost(t, wl)
	rwRequireLost(t, rl)
	check("after the write side's ForceUnlock", side{"read", rm, false, 0}, side{"write", wm, false, 0})
	// Like Redisson's forceUnlock, it deletes the hash only: the read hold's
	// timeout key is left to expire with its lease.
	t.Logf("timeout keys left after the write side's ForceUnlock: %d", len(rwTimeoutKeys(t, rdb, name)))
}

// TestRWWrongType proves that both sides refuse a name that holds a string:
// every method returns ErrWrongType (Lock too, at once) and the string is left
// untouched, value and absence of expiry.
func TestRWWrongType(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, rdb.Set(ctx, name, "not a lock", 0).Err())
	rw := c.NewRWMutex(name)
	octx := rlock.WithOwner(ctx)
	for _, s := range []struct {
		name string
		m    rlock.Locker
	}{{"read", rw.ReadLock()}, {"write", rw.WriteLock()}} {
		_, err := s.m.TryLock(octx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s TryLock", s.name)
		_, err = s.m.TryLock(octx, rlock.WithWaitTime(time.Second))
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s TryLock with a wait", s.name)
		lctx, cancel := context.WithTimeout(octx, rwBound)
		_, err = s.m.Lock(lctx)
		cancel()
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s Lock", s.name)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "%s Lock fails at once", s.name)
		_, err = s.m.IsLocked(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s IsLocked", s.name)
		_, err = s.m.HoldCount(octx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s HoldCount", s.name)
		_, err = s.m.RemainTTL(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s RemainTTL", s.name)
		_, err = s.m.ForceUnlock(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "%s ForceUnlock", s.name)
		require.ErrorIs(t, s.m.Unlock(octx), rlock.ErrNotHeld, "%s Unlock", s.name)
	}
	v, err := rdb.Get(ctx, name).Result()
	require.NoError(t, err)
	require.Equal(t, "not a lock", v)
	require.Equal(t, time.Duration(-1), wdPTTL(t, rdb, name), "no expiry was set")
	require.Empty(t, rwTimeoutKeys(t, rdb, name))
}

// javaRW simulates a Java process using Redisson's RReadWriteLock. Its scripts
// are written here from the protocol facts (shared/redisson-protocol.md §2.7,
// §2.8), independently of holdfast's: read field "<uuid>:<thread>", write field
// "<uuid>:<thread>:write", read timeout keys "{N}:<field>:rwlock_timeout:<k>",
// channel "redisson_rwlock:{N}", lease 30 s (the watchdog timeout).
type javaRW struct{ javaPeer }

var (
	// §2.7 read acquire: KEYS = N, T; ARGV = lease, L, W.
	javaReadLock = newScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local key = KEYS[2] .. ':' .. k
  redis.call('set', key, 1)
  redis.call('pexpire', key, ARGV[1])
  local remain = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])`)

	// §2.7 read unlock: KEYS = N, C, T, P, latch; ARGV = "0", L, publish, latch TTL.
	javaReadUnlock = newScript(`
local val = redis.call('get', KEYS[5])
if val ~= false then return tonumber(val) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local maxRemain = -3
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], f))
    if type(n) == 'number' then
      for i = n, 1, -1 do
        maxRemain = math.max(maxRemain, redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if maxRemain > 0 then
    redis.call('pexpire', KEYS[1], maxRemain)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1`)

	// §2.8 write acquire: KEYS = N; ARGV = lease, W.
	javaWriteLock = newScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local current = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], current + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])`)

	// §2.8 write unlock: KEYS = N, C, latch; ARGV = "1", lease, W, publish, latch TTL.
	javaWriteUnlock = newScript(`
local val = redis.call('get', KEYS[3])
if val ~= false then return tonumber(val) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return nil
end
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
  local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
  if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
  end
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  else
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return 1
end
return nil`)
)

// javaLatch returns a fresh unlock latch key of the lock name (§0.4).
func javaLatch(name string) string {
	return "redisson_unlock_latch:{" + name + "}:" + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// javaAcquireReply turns an acquire script's answer into nil (acquired) or the
// holder's PTTL.
func javaAcquireReply(v any, err error) (*int64, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ttl := v.(int64)
	return &ttl, nil
}

// javaUnlockReply turns an unlock script's answer into nil (not owner), 0 (still
// held) or 1 (released).
func javaUnlockReply(v any, err error) (any, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// readLock is readLock().tryLock() with the watchdog lease.
func (j javaRW) readLock(ctx context.Context, name string, thread int) (*int64, error) {
	l := j.field(thread)
	return javaAcquireReply(javaReadLock.Run(ctx, j.rdb,
		[]string{name, "{" + name + "}:" + l + ":rwlock_timeout"}, 30000, l, l+":write").Result())
}

// readUnlock is readLock().unlock().
func (j javaRW) readUnlock(ctx context.Context, name string, thread int) (any, error) {
	l := j.field(thread)
	keys := []string{name, rwChannel(name), "{" + name + "}:" + l + ":rwlock_timeout", "{" + name + "}", javaLatch(name)}
	return javaUnlockReply(javaReadUnlock.Run(ctx, j.rdb, keys, 0, l, j.publish, 16000).Result())
}

// writeLock is writeLock().tryLock() with the watchdog lease.
func (j javaRW) writeLock(ctx context.Context, name string, thread int) (*int64, error) {
	return javaAcquireReply(javaWriteLock.Run(ctx, j.rdb, []string{name}, 30000, j.field(thread)+":write").Result())
}

// writeUnlock is writeLock().unlock().
func (j javaRW) writeUnlock(ctx context.Context, name string, thread int) (any, error) {
	keys := []string{name, rwChannel(name), javaLatch(name)}
	return javaUnlockReply(javaWriteUnlock.Run(ctx, j.rdb, keys, 1, 30000, j.field(thread)+":write", j.publish, 16000).Result())
}

// TestRWInteropJava proves that holdfast's RWMutex and a (simulated) Java
// Redisson RReadWriteLock on the same Redis are one lock, both ways: shared
// reads, exclusion of writers, and each side's release messages waking the
// other's waiters.
func TestRWInteropJava(t *testing.T) {
	env := func(t *testing.T) (*redis.Client, *rlock.Client, string, javaRW, context.Context) {
		rdb, c, name := setup(t, watchWaits())
		return rdb, c, name, javaRW{javaPeer{rdb: rdb, id: uuid.NewString(), publish: "PUBLISH"}}, testCtx(t, 30*time.Second)
	}

	// (a) A Java reader and a Go reader hold at once; a Go writer waits through
	// Java's read unlock (which publishes nothing: a reader is left) and gets in
	// on the "0" of Go's final read unlock.
	t.Run("JavaAndGoReadersThenGoWriter", func(t *testing.T) {
		rdb, c, name, java, ctx := env(t)
		rw := c.NewRWMutex(name)
		ttl, err := java.readLock(ctx, name, 82)
		require.NoError(t, err)
		require.Nil(t, ttl, "the Java reader acquires")
		octx := rlock.WithOwner(ctx)
		gl, err := rw.ReadLock().TryLock(octx)
		require.NoError(t, err, "the Go reader shares the lock with the Java reader")
		gfield := rwField(t, rdb, name, c.ID())
		require.Equal(t, map[string]string{"mode": "read", java.field(82): "1", gfield: "1"}, holders(t, rdb, name))
		require.Equal(t, 2, rwRequireTimeouts(t, rdb, name))
		require.True(t, wdExists(t, rdb, rwTimeoutKey(name, java.field(82), 1)))

		_, err = rw.WriteLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		w := lockAsync(ctx, rw.WriteLock())
		rwAwaitWaiting(t, rdb, name, 1, 1)

		v, err := java.readUnlock(ctx, name, 82)
		require.NoError(t, err)
		require.EqualValues(t, 0, v, "Java's read unlock leaves Go's read hold")
		require.Equal(t, map[string]string{"mode": "read", gfield: "1"}, holders(t, rdb, name))
		require.Greater(t, wdPTTL(t, rdb, name), 25*time.Second, "the hash lives as long as Go's read hold")
		requirePending(t, w, "the Go writer")

		released := time.Now()
		require.NoError(t, gl.Unlock(octx))
		r := awaitAsync(t, w, rwBound, "the Go writer")
		require.NoError(t, r.err)
		t.Logf("Go writer got in %v after the last (Go) reader's unlock", r.at.Sub(released).Round(time.Microsecond))
		ttl, err = java.readLock(ctx, name, 82)
		require.NoError(t, err)
		require.NotNil(t, ttl, "the Go writer excludes a Java reader")
		require.Greater(t, *ttl, int64(25000))
		ttl, err = java.writeLock(ctx, name, 82)
		require.NoError(t, err)
		require.NotNil(t, ttl, "and a Java writer")
		require.NoError(t, r.v.Unlock(ctx))
		rwRequireGone(t, rdb, name)
	})

	// (b) A Go writer excludes Java's reader and writer, which cannot unlock
	// it; its unlock publishes "1" and Java's reader gets in; a Go writer
	// waiting behind Java's reader is woken by the "0" of Java's read unlock.
	t.Run("GoWriterThenJavaReaderThenGoWriter", func(t *testing.T) {
		rdb, c, name, java, ctx := env(t)
		rw := c.NewRWMutex(name)
		wctx := rlock.WithOwner(ctx)
		wl, err := rw.WriteLock().Lock(wctx)
		require.NoError(t, err)
		before := holders(t, rdb, name)
		ttl, err := java.readLock(ctx, name, 1)
		require.NoError(t, err)
		require.NotNil(t, ttl, "a Java reader is excluded")
		require.Greater(t, *ttl, int64(25000))
		ttl, err = java.writeLock(ctx, name, 1)
		require.NoError(t, err)
		require.NotNil(t, ttl, "a Java writer is excluded")
		require.Greater(t, *ttl, int64(25000))
		v, err := java.writeUnlock(ctx, name, 1)
		require.NoError(t, err)
		require.Nil(t, v, "Java cannot unlock Go's write hold")
		v, err = java.readUnlock(ctx, name, 1)
		require.NoError(t, err)
		require.Nil(t, v)
		require.Equal(t, before, holders(t, rdb, name))
		require.Empty(t, rwTimeoutKeys(t, rdb, name))

		sub := rwSubscribe(t, rdb, name)
		require.NoError(t, wl.Unlock(wctx))
		rwRequireMessage(t, sub, "1")
		rwRequireGone(t, rdb, name)
		ttl, err = java.readLock(ctx, name, 1)
		require.NoError(t, err)
		require.Nil(t, ttl, "the Java reader acquires after the Go writer's unlock")
		require.Equal(t, map[string]string{"mode": "read", java.field(1): "1"}, holders(t, rdb, name))
		_, err = rw.WriteLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "the Java reader excludes a Go writer")
		locked, err := rw.ReadLock().IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)

		w := lockAsync(ctx, rw.WriteLock())
		rwAwaitWaiting(t, rdb, name, 1, 2)
		released := time.Now()
		v, err = java.readUnlock(ctx, name, 1)
		require.NoError(t, err)
		require.EqualValues(t, 1, v)
		rwRequireMessage(t, sub, "0")
		r := awaitAsync(t, w, rwBound, "the Go writer")
		require.NoError(t, r.err)
		t.Logf("Go writer got in %v after the Java reader's unlock", r.at.Sub(released).Round(time.Microsecond))
		h := holders(t, rdb, name)
		require.Equal(t, "write", h["mode"])
		require.NotContains(t, h, java.field(1))
		require.Empty(t, rwTimeoutKeys(t, rdb, name), "the Java reader's timeout key was deleted by its unlock")
		require.NoError(t, r.v.Unlock(ctx))
		rwRequireGone(t, rdb, name)
	})

	// (c) A Java writer holds; a Go reader waits and gets in on the "1" of
	// Java's write unlock; then Go and Java read together.
	t.Run("JavaWriterThenGoReader", func(t *testing.T) {
		rdb, c, name, java, ctx := env(t)
		rw := c.NewRWMutex(name)
		ttl, err := java.writeLock(ctx, name, 5)
		require.NoError(t, err)
		require.Nil(t, ttl, "the Java writer acquires")
		require.Equal(t, map[string]string{"mode": "write", java.field(5) + ":write": "1"}, holders(t, rdb, name))
		_, err = rw.ReadLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		_, err = rw.WriteLock().TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		locked, err := rw.WriteLock().IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked, "Go sees Java's write lock")
		locked, err = rw.ReadLock().IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
		remain, err := rw.WriteLock().RemainTTL(ctx)
		require.NoError(t, err)
		require.Greater(t, remain, 25*time.Second)

		octx := rlock.WithOwner(ctx)
		r := lockAsync(octx, rw.ReadLock())
		sub := rwSubscribe(t, rdb, name)
		rwAwaitWaiting(t, rdb, name, 1, 2)
		released := time.Now()
		v, err := java.writeUnlock(ctx, name, 5)
		require.NoError(t, err)
		require.EqualValues(t, 1, v)
		rwRequireMessage(t, sub, "1")
		got := awaitAsync(t, r, rwBound, "the Go reader")
		require.NoError(t, got.err)
		t.Logf("Go reader got in %v after the Java writer's unlock", got.at.Sub(released).Round(time.Microsecond))

		ttl, err = java.writeLock(ctx, name, 5)
		require.NoError(t, err)
		require.NotNil(t, ttl, "the Go reader excludes the Java writer")
		ttl, err = java.readLock(ctx, name, 6)
		require.NoError(t, err)
		require.Nil(t, ttl, "a Java reader shares with the Go reader")
		require.Equal(t, 2, rwRequireTimeouts(t, rdb, name))
		require.NoError(t, rw.ReadLock().Unlock(octx))
		require.Equal(t, map[string]string{"mode": "read", java.field(6): "1"}, holders(t, rdb, name))
		v, err = java.readUnlock(ctx, name, 6)
		require.NoError(t, err)
		require.EqualValues(t, 1, v)
		rwRequireGone(t, rdb, name)
	})
}

// TestRWWriterStarvation measures, without asserting it, how a writer fares
// against a steady stream of readers: 4 goroutines on 2 clients keep taking the
// read lock, each lease held about 5 ms, while a writer calls Lock with a 3 s
// deadline. With "overlapping" readers each goroutine takes its next lease
// before it gives back the previous one, so the read side is never free; with
// "independent" readers each gives back before it takes again, so the read side
// is free whenever the four happen to be out at once. Only the writer's error is
// checked (none, or ErrNotAcquired); the outcome is logged for the docs.
func TestRWWriterStarvation(t *testing.T) {
	for _, overlapping := range []bool{true, false} {
		mode := map[bool]string{true: "overlapping", false: "independent"}[overlapping]
		t.Run(mode, func(t *testing.T) {
			rdb, c1, name := setup(t)
			c2, cw := newClient(t, rdb), newClient(t, rdb)
			ctx := testCtx(t, 30*time.Second)
			sub := rwSubscribe(t, rdb, name)
			var frees atomic.Int64 // "0" messages: the read side became free
			msgs := sub.Channel()
			counted := make(chan struct{})
			go func() {
				defer close(counted)
				for m := range msgs {
					if m.Payload == "0" {
						frees.Add(1)
					}
				}
			}()

			stop := make(chan struct{})
			var cycles atomic.Int64
			var wg sync.WaitGroup
			for g := range 4 {
				m := []*rlock.Client{c1, c2}[g%2].NewRWMutex(name).ReadLock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					var prev *rlock.Lease
					for {
						select {
						case <-stop:
							if prev != nil {
								if err := prev.Unlock(ctx); err != nil {
									t.Errorf("reader %d: %v", g, err)
								}
							}
							return
						default:
						}
						if !overlapping && prev != nil {
							if err := prev.Unlock(ctx); err != nil {
								t.Errorf("reader %d: %v", g, err)
								return
							}
							prev = nil
						}
						l, err := m.Lock(ctx)
						if err != nil {
							t.Errorf("reader %d: %v", g, err)
							return
						}
						time.Sleep(5 * time.Millisecond) // the reader's work, not synchronisation
						if prev != nil {
							if err := prev.Unlock(ctx); err != nil {
								t.Errorf("reader %d: %v", g, err)
								return
							}
						}
						prev = l
						cycles.Add(1)
					}
				}()
			}
			require.Eventually(t, func() bool { return cycles.Load() >= 40 }, rwBound, time.Millisecond,
				"the readers are running")

			startCycles, startFrees := cycles.Load(), frees.Load()
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			start := time.Now()
			wl, err := cw.NewRWMutex(name).WriteLock().Lock(wctx)
			waited := time.Since(start)
			cancel()
			readCycles, freed := cycles.Load()-startCycles, frees.Load()-startFrees
			if err == nil {
				t.Logf("%s readers: writer waited %v (%d read leases and %d releases of the read side meanwhile)",
					mode, waited.Round(time.Microsecond), readCycles, freed)
				require.NoError(t, wl.Unlock(ctx))
			} else {
				require.ErrorIs(t, err, rlock.ErrNotAcquired)
				t.Logf("%s readers: writer starved for %v, its whole 3 s deadline (%d read leases and %d releases of the read side meanwhile)",
					mode, waited.Round(time.Millisecond), readCycles, freed)
			}

			close(stop)
			wg.Wait()
			require.Eventually(t, func() bool { return !wdExists(t, rdb, name) }, rwBound, 10*time.Millisecond)
			require.Empty(t, rwTimeoutKeys(t, rdb, name))
			require.NoError(t, sub.Close())
			<-counted
		})
	}
}

// TestRWMutexEveryEndOfAHoldWakesTheWaiter proves the waiting invariant ("no
// wait outlives the hold", docs/design.md) for the read/write lock, from both
// sides: a writer or a reader holds, a reader or a writer waits, in the same
// client or in another one, and the hold ends by Unlock, by its lease running
// out, by ForceUnlock from a third client, or by DEL from outside. The holder's
// client has a 1 s watchdog, so a waiter that missed every message would still
// be bounded by about 1 s; the test allows 5 s and logs the latency.
func TestRWMutexEveryEndOfAHoldWakesTheWaiter(t *testing.T) {
	type side func(*rlock.RWMutex) rlock.Locker
	read := func(rw *rlock.RWMutex) rlock.Locker { return rw.ReadLock() }
	write := func(rw *rlock.RWMutex) rlock.Locker { return rw.WriteLock() }
	pairs := []struct {
		name           string
		holder, waiter side
	}{
		{"WriterHoldsReaderWaits", write, read},
		{"WriterHoldsWriterWaits", write, write},
		{"ReaderHoldsWriterWaits", read, write},
	}
	ends := []string{"Unlock", "LeaseExpiry", "ForceUnlock", "DeletedFromOutside"}
	for _, p := range pairs {
		for _, sameClient := range []bool{true, false} {
			for _, end := range ends {
				where := "OtherClient"
				if sameClient {
					where = "SameClient"
				}
				t.Run(p.name+"/"+where+"/"+end, func(t *testing.T) {
					rwWakeCase(t, p.holder, p.waiter, sameClient, end)
				})
			}
		}
	}
}

func rwWakeCase(t *testing.T, holderSide, waiterSide func(*rlock.RWMutex) rlock.Locker, sameClient bool, end string) {
	rdb, holderClient, name := setup(t, rlock.WithWatchdogTimeout(time.Second))
	waiterClient := holderClient
	if !sameClient {
		waiterClient = newClient(t, rdb)
	}
	ctx := testCtx(t, 20*time.Second)
	var opts []rlock.AcquireOption
	if end == "LeaseExpiry" {
		opts = append(opts, rlock.WithLeaseTime(700*time.Millisecond))
	}
	lease, err := holderSide(holderClient.NewRWMutex(name)).Lock(ctx, opts...)
	require.NoError(t, err)

	got := make(chan time.Time, 1)
	go func() {
		l, err := waiterSide(waiterClient.NewRWMutex(name)).Lock(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	channel := lua.RWChannelName(name)
	awaitSubscribersAtLeast(t, rdb, channel, 1) // the waiter subscribes

	ended := time.Now()
	switch end {
	case "Unlock":
		require.NoError(t, lease.Unlock(ctx))
	case "LeaseExpiry":
		ended = time.Now().Add(time.Until(leaseDeadline(t, rdb, name)))
	case "ForceUnlock":
		ok, err := holderSide(newClient(t, rdb).NewRWMutex(name)).ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	case "DeletedFromOutside":
		require.NoError(t, rdb.Del(ctx, name).Err())
	}
	select {
	case at, ok := <-got:
		require.True(t, ok, "the waiter failed")
		t.Logf("waiter acquired %v after the hold ended (%s)", at.Sub(ended).Round(time.Millisecond), end)
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter was not woken within 5 s of the hold's end (%s)", end)
	}
}

// leaseDeadline returns when the lock's key expires, as its PTTL says now.
func leaseDeadline(t *testing.T, rdb *redis.Client, name string) time.Time {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), name).Result()
	require.NoError(t, err)
	return time.Now().Add(d)
}
