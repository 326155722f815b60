package integration

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestReentrancyDepth3AnyUnlockOrder(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	orders := [][3]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {0, 2, 1}, {1, 2, 0}, {2, 0, 1}}
	for _, order := range orders {
		octx := rlock.WithOwner(ctx)
		m := c.NewMutex(name)
		var leases [3]*rlock.Lease
		for i := range leases {
			l, err := m.TryLock(octx)
			require.NoError(t, err)
			leases[i] = l
			n, err := m.HoldCount(octx)
			require.NoError(t, err)
			require.Equal(t, i+1, n)
		}
		// Another owner is excluded at every depth.
		_, err := m.TryLock(rlock.WithOwner(ctx))
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		for k, i := range order {
			require.NoError(t, leases[i].Unlock(octx))
			require.ErrorIs(t, leases[i].Err(), rlock.ErrUnlocked)
			n, err := m.HoldCount(octx)
			require.NoError(t, err)
			require.Equal(t, 2-k, n)
			locked, err := m.IsLocked(ctx)
			require.NoError(t, err)
			require.Equal(t, k < 2, locked)
		}
		require.Empty(t, holders(t, rdb, name))
	}
}

func TestTwoOwnersExcludeEachOther(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	a, b := rlock.WithOwner(ctx), rlock.WithOwner(ctx)
	m := c.NewMutex(name)

	la, err := m.TryLock(a)
	require.NoError(t, err)
	_, err = m.TryLock(b)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	held, err := m.IsHeld(b)
	require.NoError(t, err)
	require.False(t, held)
	held, err = m.IsHeld(a)
	require.NoError(t, err)
	require.True(t, held)

	// b may not unlock a's lock; the lock is unchanged.
	require.ErrorIs(t, m.Unlock(b), rlock.ErrNotHeld)
	require.Len(t, holders(t, rdb, name), 1)

	// A second client (another process) is excluded too.
	other := newClient(t, rdb)
	_, err = other.NewMutex(name).TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)

	require.NoError(t, la.Unlock(a))
	lb, err := m.TryLock(b)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(b))
	require.ErrorIs(t, m.Unlock(b), rlock.ErrNotHeld, "more unlocks than locks")
	require.ErrorIs(t, lb.Unlock(b), rlock.ErrNotHeld, "a lease unlocks once")
	require.Empty(t, holders(t, rdb, name))
}

func TestOwnerlessContextIsNotReentrant(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	m := c.NewMutex(name)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired, "each acquisition without owner is a new owner")
	require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld, "without owner, unlock goes through the lease")
	require.NoError(t, l.Unlock(ctx))
}

func TestLeaseExpiryFreesTheLock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	m := c.NewMutex(name)
	l, err := m.TryLock(ctx, rlock.WithLeaseTime(300*time.Millisecond))
	require.NoError(t, err)
	ttl, err := m.RemainTTL(ctx)
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, 300*time.Millisecond)

	// Another client takes it once the lease ran out, and the first lease ends.
	other := newClient(t, rdb)
	require.Eventually(t, func() bool {
		l2, err := other.NewMutex(name).TryLock(ctx)
		if err != nil {
			return false
		}
		_ = l2.Unlock(ctx)
		return true
	}, 5*time.Second, 20*time.Millisecond)
	select {
	case <-l.Done():
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not end")
	}
	err = l.Unlock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	require.ErrorIs(t, err, rlock.ErrLockLost)
	ttl, err = m.RemainTTL(ctx)
	require.NoError(t, err)
	require.Equal(t, rlock.NotLocked, ttl)
}

func TestForceUnlock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	holder := newClient(t, rdb)
	octx := rlock.WithOwner(ctx)
	l, err := holder.NewMutex(name).TryLock(octx)
	require.NoError(t, err)
	_, err = holder.NewMutex(name).TryLock(octx)
	require.NoError(t, err)

	// A waiter of another client is woken by the force-unlock's message.
	got := make(chan error, 1)
	go func() {
		w, err := c.NewMutex(name).Lock(ctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	awaitSubscribers(t, rdb, "redisson_lock__channel:{"+name+"}", 1)

	ok, err := c.NewMutex(name).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("waiter not woken by the force-unlock (its holder's lease is 30 s)")
	}
	ok, err = c.NewMutex(name).ForceUnlock(ctx)
	require.NoError(t, err)
	require.False(t, ok, "nothing left to delete")

	// The holder's lease is lost, not silently unlocked.
	require.ErrorIs(t, l.Unlock(octx), rlock.ErrNotHeld)

	// A force-unlock by the holding client itself ends its leases at once.
	l, err = holder.NewMutex(name).TryLock(ctx)
	require.NoError(t, err)
	_, err = holder.NewMutex(name).ForceUnlock(ctx)
	require.NoError(t, err)
	<-l.Done()
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
}

func TestWrongTypeLeavesForeignKeyAlone(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, rdb.Set(ctx, name, "not a lock", time.Hour).Err())
	octx := rlock.WithOwner(ctx)
	m := c.NewMutex(name)

	_, err := m.TryLock(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.TryLock(octx, rlock.WithWaitTime(time.Second))
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.Lock(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.ForceUnlock(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.IsLocked(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.HoldCount(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)
	_, err = m.RemainTTL(octx)
	require.ErrorIs(t, err, rlock.ErrWrongType)

	v, err := rdb.Get(ctx, name).Result()
	require.NoError(t, err)
	require.Equal(t, "not a lock", v)
	ttl := rdb.TTL(ctx, name).Val()
	require.Greater(t, ttl, 59*time.Minute, "the foreign key's TTL is untouched")
}

func TestScriptFlushUnderUse(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	m := c.NewMutex(name)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		counter int
		errs    = make(chan error, 8)
	)
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				counter++
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	flushed := 0
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if rdb.ScriptFlush(ctx).Err() == nil {
				mu.Lock()
				flushed++
				mu.Unlock()
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Equal(t, 400, counter)
	mu.Lock()
	require.Positive(t, flushed)
	mu.Unlock()
	require.Empty(t, holders(t, rdb, name))
}

// TestRetriedCallsAreIdempotent loses replies between Redis and go-redis, which then
// sends the same script again: every acquire and release must count once.
func TestRetriedCallsAreIdempotent(t *testing.T) {
	proxy, rdb, direct := proxiedClient(t, 3)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	octx := rlock.WithOwner(ctx)
	m := c.NewMutex(name)

	// Warm the script cache, so that the dropped replies are the scripts' own.
	l, err := m.TryLock(octx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(octx))

	count := func() string {
		for f, v := range holders(t, direct, name) {
			require.True(t, strings.HasPrefix(f, c.ID()+":"))
			return v
		}
		return ""
	}

	proxy.DropReplies(1)
	l1, err := m.TryLock(octx)
	require.NoError(t, err, "a retried first acquire still acquires")
	require.Equal(t, "1", count(), "the first acquire ran twice but counts once")

	proxy.DropReplies(1)
	l2, err := m.TryLock(octx)
	require.NoError(t, err)
	require.Equal(t, "2", count(), "the reentrant acquire ran twice but counts once")

	proxy.DropReplies(1)
	require.NoError(t, l2.Unlock(octx))
	require.Equal(t, "1", count(), "the partial release ran twice but counts once")

	proxy.DropReplies(1)
	require.NoError(t, l1.Unlock(octx), "the final release ran twice: the latch answers the retry")
	require.Empty(t, holders(t, direct, name))

	// The same with a lock this owner does not hold: still "not acquired".
	holder, err := newClient(t, direct).NewMutex(name).TryLock(ctx)
	require.NoError(t, err)
	proxy.DropReplies(1)
	_, err = m.TryLock(octx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.NoError(t, holder.Unlock(ctx))
}

// proxiedClient returns a proxy to the shared server that can swallow replies,
// a client through it with a 300 ms read timeout and maxRetries retries (-1:
// none; go-redis resends a call whose reply timed out), and a direct client.
func proxiedClient(t *testing.T, maxRetries int) (*redistest.Proxy, *redis.Client, *redis.Client) {
	srv := redistest.Shared(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{
		Addr: proxy.Addr, ReadTimeout: 300 * time.Millisecond, MaxRetries: maxRetries,
		MinRetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return proxy, rdb, srv.Client(t)
}

// TestLostReplyWithoutRetryIsUndone: with retries off, an acquire whose reply is
// lost returns an error, and must not leave a hold behind.
func TestLostReplyWithoutRetryIsUndone(t *testing.T) {
	proxy, rdb, direct := proxiedClient(t, -1)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	m := c.NewMutex(name)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	proxy.DropReplies(1)
	_, err = m.TryLock(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, rlock.ErrNotAcquired))
	require.Empty(t, holders(t, direct, name), "the ghost hold was taken back")
}

func TestUnusualNames(t *testing.T) {
	rdb, c, _ := setup(t)
	ctx := testCtx(t, 30*time.Second)
	base := redistest.Name(t)
	// A name whose channel could not share its cluster slot is refused (see
	// Client.NewMutex), here as on a cluster.
	_, err := c.NewMutex(base + ":a}b{c").TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	for _, name := range []string{
		"{" + base + "}:with-tag",
		base + ":a{b}c}d",
		base + "\x00\xff\n\t binary \x01",
		base + strings.Repeat("k", 64<<10),
	} {
		m := c.NewMutex(name)
		octx := rlock.WithOwner(ctx)
		l, err := m.TryLock(octx)
		require.NoError(t, err)
		require.Len(t, holders(t, rdb, name), 1)

		// A waiter of another client hears the release on the right channel.
		other := newClient(t, rdb)
		got := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			w, err := other.NewMutex(name).Lock(ctx)
			if err == nil {
				_ = w.Unlock(ctx)
			}
			got <- time.Since(start)
		}()
		expect := "redisson_lock__channel:{" + name + "}"
		if strings.Contains(name, "{") {
			expect = "redisson_lock__channel:" + name
		}
		awaitSubscribers(t, rdb, expect, 1)
		require.NoError(t, l.Unlock(octx))
		select {
		case <-got:
		case <-time.After(2 * time.Second):
			t.Fatalf("waiter on %q not woken by the release", name[:min(len(name), 40)])
		}
		require.Eventually(t, func() bool { return rdb.Exists(ctx, name).Val() == 0 }, 2*time.Second, 10*time.Millisecond)
	}
}

func TestRedisUnreachableIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) { o.MaxRetries = 1; o.DialTimeout = 200 * time.Millisecond })
	c := newClient(t, rdb)
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewMutex(name).TryLock(ctx)
	require.NoError(t, err)
	srv.Kill()

	start := time.Now()
	err = l.Unlock(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, rlock.ErrNotHeld))
	require.ErrorIs(t, err, rlock.ErrUnlockUnconfirmed)
	require.ErrorIs(t, err, rlock.ErrUnreachable)
	require.ErrorIs(t, l.Err(), rlock.ErrUnlockUnconfirmed, "the lease ends with a failed unlock: never a renewed orphan")
	for _, lock := range []func() error{
		func() error { _, err := c.NewMutex(name + "2").TryLock(ctx); return err },
		func() error { _, err := c.NewMutex(name + "2").Lock(ctx); return err },
		func() error { return c.NewSemaphore(name+"3").TryAcquire(ctx, 1) },
	} {
		err := lock()
		require.ErrorIs(t, err, rlock.ErrUnreachable)
		require.Contains(t, err.Error(), "cannot reach Redis at "+srv.Addr+": ", "says where Redis was expected")
		require.NotContains(t, err.Error(), "rlock: cannot", "one prefix")
	}
	require.Less(t, time.Since(start), 10*time.Second)
}

// lockerCycle takes and gives back any kind of lock through the common
// interface.
func lockerCycle(ctx context.Context, l rlock.Locker) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	return lease.Unlock(ctx)
}

func TestEveryKindIsALocker(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	for i, l := range []rlock.Locker{
		c.NewMutex(name + ":0"), c.NewNonReentrantMutex(name + ":1"),
		c.NewFencedMutex(name + ":2"), c.NewSpinMutex(name + ":3"),
	} {
		require.NoError(t, lockerCycle(ctx, l), "kind %d", i)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	}
}

// TestNonReentrantMutex: the holding owner's second acquisition fails at once
// and leaves the hold count at 1; one Unlock frees the lock.
func TestNonReentrantMutex(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	requireNonReentrant(t, ctx, c.NewNonReentrantMutex(name), func() {})
	require.Empty(t, holders(t, rdb, name))
}

// requireNonReentrant checks the non-reentrant lock m, free at the start: its
// holder's second acquisition, with or without a wait, fails at once with
// ErrNonReentrant and leaves the hold count at 1; another owner is excluded;
// one Unlock frees it. refused runs after the refusals, for the kind's own
// checks.
func requireNonReentrant(t *testing.T, ctx context.Context, m rlock.Locker, refused func()) {
	t.Helper()
	owner := rlock.WithOwner(ctx)
	l, err := m.Lock(owner)
	require.NoError(t, err)
	start := time.Now()
	_, err = m.Lock(owner)
	require.ErrorIs(t, err, rlock.ErrNonReentrant)
	_, err = m.TryLock(owner)
	require.ErrorIs(t, err, rlock.ErrNonReentrant)
	_, err = m.TryLock(owner, rlock.WithWaitTime(5*time.Second))
	require.ErrorIs(t, err, rlock.ErrNonReentrant)
	require.Less(t, time.Since(start), 2*time.Second, "refused at once, not after a wait")
	n, err := m.HoldCount(owner)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	refused()
	_, err = m.TryLock(rlock.WithOwner(ctx))
	require.ErrorIs(t, err, rlock.ErrNotAcquired, "another owner is excluded")
	require.NoError(t, l.Unlock(owner))
}

// TestFencedMutexTokens: tokens strictly increase over owners, clients and
// re-entries, also when a waiter of the same client takes over (no hand-off).
func TestFencedMutexTokens(t *testing.T) {
	rdb, c, name := setup(t)
	other := newClient(t, rdb)
	ctx := testCtx(t, 30*time.Second)
	var last int64
	next := func(l *rlock.Lease, err error) *rlock.Lease {
		t.Helper()
		require.NoError(t, err)
		require.Greater(t, l.Token(), last, "token after %d", last)
		last = l.Token()
		cur, err := c.NewFencedMutex(name).Token(ctx)
		require.NoError(t, err)
		require.Equal(t, last, cur, "Token reads the latest")
		return l
	}
	owner := rlock.WithOwner(ctx)
	m := c.NewFencedMutex(name)
	l1 := next(m.Lock(owner))
	l2 := next(m.TryLock(owner)) // re-entry takes a token too
	require.NoError(t, l2.Unlock(owner))
	require.NoError(t, l1.Unlock(owner))
	l3 := next(other.NewFencedMutex(name).Lock(ctx))

	got := make(chan *rlock.Lease, 1)
	go func() {
		l, err := m.Lock(ctx) // a waiter of the same client as the next holder
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	require.NoError(t, l3.Unlock(ctx))
	l4 := next(<-got, nil)
	require.NoError(t, l4.Unlock(ctx))
}

// TestSpinMutex: exclusion over goroutines of two clients with no pub/sub at
// all, and a waiter that takes the lock within the back-off's longest pause of
// the release.
func TestSpinMutex(t *testing.T) {
	rdb, c, name := setup(t)
	other := newClient(t, rdb)
	ctx := testCtx(t, 60*time.Second)
	channel := lua.ChannelName(name)
	sub := rdb.Subscribe(ctx, channel)
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)

	var inside, overlaps, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 6 {
		cl := c
		if g%2 == 1 {
			cl = other
		}
		m := cl.NewSpinMutex(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside > 1 {
					overlaps++
				}
				total++
				mu.Unlock()
				time.Sleep(time.Millisecond) // the critical section's work
				mu.Lock()
				inside--
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, overlaps)
	require.Equal(t, 90, total)
	require.EqualValues(t, 1, rdb.PubSubNumSub(ctx, channel).Val()[channel], "no waiter subscribed: the only subscriber is the test's")
	select {
	case m := <-sub.Channel():
		t.Fatalf("a spin lock published %v", m)
	default:
	}

	// A waiter that has retried a few times takes the lock soon after the
	// release: within its back-off's longest pause (128 ms) plus an attempt.
	m := c.NewSpinMutex(name)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	admin := redistest.Shared(t).Client(t)
	attempts := func() int64 { return wdCommandStats(t, admin)["evalsha"] }
	before := attempts()
	got := make(chan time.Time, 1)
	go func() {
		lw, err := other.NewSpinMutex(name).Lock(ctx)
		if err == nil {
			got <- time.Now()
			_ = lw.Unlock(ctx)
		}
	}()
	require.Eventually(t, func() bool { return attempts()-before >= 8 }, 10*time.Second, 5*time.Millisecond,
		"the waiter retries with growing pauses")
	released := time.Now()
	require.NoError(t, l.Unlock(ctx))
	at := <-got
	t.Logf("spin waiter took the lock %v after the release", at.Sub(released).Round(time.Millisecond))
	require.Less(t, at.Sub(released), 2*time.Second)

	_, err = c.NewSpinMutex(name, rlock.ConstantBackoff(0)).Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.NewSpinMutex(name, rlock.ExponentialBackoff{Initial: time.Second, Max: time.Millisecond, Multiplier: 2}).Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

// javaFencedLock is RedissonFencedLock's token-returning acquire, written from
// the protocol facts (shared/redisson-protocol.md §2.10): {-1, token} when
// acquired, {pttl, -1} when held by another.
var javaFencedLock = newScript(`
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}`)

// TestInteropFencedMutex: tokens increase across a simulated Java RFencedLock
// and holdfast, both ways, and a Go waiter is woken by the Java release.
func TestInteropFencedMutex(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	java := javaPeer{rdb: rdb, id: uuid.NewString(), publish: "PUBLISH"}
	keys := []string{name, "redisson_lock_token:{" + name + "}"}

	r, err := javaFencedLock.Run(ctx, rdb, keys, 30000, java.field(7)).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(-1), r[0], "Java acquires")
	javaToken := r[1]

	m := c.NewFencedMutex(name)
	got := make(chan *rlock.Lease, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	channel := lua.ChannelName(name)
	awaitSubscribers(t, rdb, channel, 1)
	v, err := java.unlock(ctx, name, 7)
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
	l := <-got
	require.Greater(t, l.Token(), javaToken, "Go's token follows Java's")

	r, err = javaFencedLock.Run(ctx, rdb, keys, 30000, java.field(7)).Int64Slice()
	require.NoError(t, err)
	require.Greater(t, r[0], int64(0), "Java sees the lock held by Go")
	require.NoError(t, l.Unlock(ctx))
	r, err = javaFencedLock.Run(ctx, rdb, keys, 30000, java.field(7)).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(-1), r[0])
	require.Greater(t, r[1], l.Token(), "Java's token follows Go's")
	_, err = java.unlock(ctx, name, 7)
	require.NoError(t, err)
}

// lockKinds are the lock kinds with scripts of their own layout, each made
// from a client and a name.
var lockKinds = []struct {
	name string
	make func(c *rlock.Client, name string) rlock.Locker
}{
	{"FairMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewFairMutex(name) }},
	{"ReadMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewRWMutex(name).ReadLock() }},
	{"WriteMutex", func(c *rlock.Client, name string) rlock.Locker { return c.NewRWMutex(name).WriteLock() }},
}

// TestKindsRetriedCallsAreIdempotent: for the fair lock and both sides of the
// read/write lock, as for Mutex (TestRetriedCallsAreIdempotent), go-redis
// resending a script whose reply was lost (a proxy swallows one reply) counts
// each acquisition and release once: first acquire, reentrant acquire, partial
// and final release. Nothing is left in Redis at the end but expiring latches.
func TestKindsRetriedCallsAreIdempotent(t *testing.T) {
	for _, k := range lockKinds {
		t.Run(k.name, func(t *testing.T) {
			proxy, rdb, direct := proxiedClient(t, 3)
			name := redistest.Name(t)
			ctx := testCtx(t, 30*time.Second)
			octx := rlock.WithOwner(ctx)
			m := k.make(newClient(t, rdb), name)

			// Warm the script cache, so that the dropped replies are the scripts' own.
			l, err := m.TryLock(octx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(octx))

			count := func() int {
				n, err := m.HoldCount(octx)
				require.NoError(t, err)
				return n
			}
			proxy.DropReplies(1)
			l1, err := m.TryLock(octx)
			require.NoError(t, err, "a retried first acquire still acquires")
			require.Equal(t, 1, count(), "the first acquire ran twice but counts once")

			proxy.DropReplies(1)
			l2, err := m.TryLock(octx)
			require.NoError(t, err)
			require.Equal(t, 2, count(), "the reentrant acquire ran twice but counts once")

			proxy.DropReplies(1)
			require.NoError(t, l2.Unlock(octx))
			require.Equal(t, 1, count(), "the partial release ran twice but counts once")

			proxy.DropReplies(1)
			require.NoError(t, l1.Unlock(octx), "the final release ran twice: the latch answers the retry")
			require.Zero(t, direct.Exists(ctx, name).Val(), "the lock is gone")
			left, err := direct.Keys(ctx, "*"+name+"*").Result()
			require.NoError(t, err)
			for _, key := range left {
				require.Contains(t, key, "redisson_unlock_latch:", "only latches are left")
			}
		})
	}
}

// TestKindsLostReplyWithoutRetryIsUndone: with retries off, an acquisition of
// the fair lock or of either side of the read/write lock whose reply is lost
// returns an error that is not ErrNotAcquired, and leaves no hold behind (nor a
// fair waiter in the queue).
func TestKindsLostReplyWithoutRetryIsUndone(t *testing.T) {
	for _, k := range lockKinds {
		t.Run(k.name, func(t *testing.T) {
			proxy, rdb, direct := proxiedClient(t, -1)
			name := redistest.Name(t)
			ctx := testCtx(t, 30*time.Second)
			m := k.make(newClient(t, rdb), name)
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))

			proxy.DropReplies(1)
			_, err = m.Lock(ctx)
			require.Error(t, err)
			require.False(t, errors.Is(err, rlock.ErrNotAcquired))
			require.Zero(t, direct.Exists(ctx, name).Val(), "the ghost hold was taken back")
			require.Zero(t, direct.LLen(ctx, "redisson_lock_queue:{"+name+"}").Val(), "no waiter left queued")
		})
	}
}

// TestIdentityRecord: a client that holds a lock keeps its record (service,
// host, pid, version, start) from its first hold, its tracker's connections
// carry its service in their names, and Close deletes the record; a client
// that holds nothing writes none.
func TestIdentityRecord(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 20*time.Second)
	c, err := rlock.New(rdb, rlock.WithService("orders-svc"))
	require.NoError(t, err)
	idle := newClient(t, rdb)
	_, err = c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)

	var got map[string]identity.Record
	require.Eventually(t, func() bool {
		got, err = identity.Read(ctx, rdb, c.ID(), idle.ID())
		return err == nil && len(got) == 1
	}, 5*time.Second, 5*time.Millisecond, "the holder's record is written, the idle client's is not")
	r := got[c.ID()]
	host, _ := os.Hostname()
	require.Equal(t, "orders-svc", r.Service)
	require.Equal(t, host, r.Host)
	require.Equal(t, os.Getpid(), r.PID)
	require.Equal(t, c.Identity(), r)
	require.Contains(t, r.String(), "orders-svc on "+host+", pid ")
	ttl := rdb.PTTL(ctx, identity.Key(c.ID())).Val()
	require.True(t, ttl > 0 && ttl <= identity.Life, "the record expires if the client dies: %v", ttl)

	require.Eventually(t, func() bool {
		return strings.Contains(rdb.ClientList(ctx).Val(), "name="+r.ConnName("watchdog")+":")
	}, 5*time.Second, 5*time.Millisecond, "the tracker's connections are named after the service")

	require.NoError(t, c.Close())
	got, err = identity.Read(ctx, rdb, c.ID())
	require.NoError(t, err)
	require.Empty(t, got, "Close deletes the record")
}

// ctxHandle is a hold of one kind as the Context tests see it.
type ctxHandle struct {
	context func(context.Context) (context.Context, context.CancelFunc)
	err     func() error
	release func(context.Context) error
	key     string // the key whose DEL from outside loses the hold
	lost    error  // what a loss matches
	ended   error  // what a release matches
}

// ctxKinds take a hold of each kind whose handle has a Context.
var ctxKinds = []struct {
	kind string
	take func(t *testing.T, c *rlock.Client, name string) ctxHandle
}{
	{"Lease", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := c.NewMutex(name).Lock(context.Background())
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Unlock, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
	{"MultiLease", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := rlock.NewMultiLock(c.NewMutex(name), c.NewMutex(name+":2")).Lock(context.Background())
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Unlock, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
	{"Permits", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		s := c.NewExpirableSemaphore(name)
		require.NoError(t, s.SetPermits(context.Background(), 2))
		p, err := s.Acquire(context.Background(), 1)
		require.NoError(t, err)
		return ctxHandle{p.Context, p.Err, p.Release, lua.PermitTimeoutsName(name), rlock.ErrPermitLost, rlock.ErrReleased}
	}},
	{"Leadership", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := c.NewElection(name).Campaign(context.Background(), "me")
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Resign, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
}

// TestHoldContext: each handle's Context is cancelled when the hold ends, by
// its release, by its loss (its key deleted from outside: tracking tells the
// holder within trackBound, long before a renewal) or by Close, with a cause
// matching the reason, as the handle's Err does.
func TestHoldContext(t *testing.T) {
	ends := []struct {
		how  string
		end  func(t *testing.T, c *rlock.Client, rdb *redis.Client, h ctxHandle)
		want func(h ctxHandle) error
	}{
		{"released", func(t *testing.T, _ *rlock.Client, _ *redis.Client, h ctxHandle) {
			require.NoError(t, h.release(context.Background()))
		}, func(h ctxHandle) error { return h.ended }},
		{"lost", func(t *testing.T, _ *rlock.Client, rdb *redis.Client, h ctxHandle) {
			require.NoError(t, rdb.Del(context.Background(), h.key).Err())
		}, func(h ctxHandle) error { return h.lost }},
		{"closed", func(t *testing.T, c *rlock.Client, _ *redis.Client, _ ctxHandle) {
			require.NoError(t, c.Close())
		}, func(ctxHandle) error { return rlock.ErrClosed }},
	}
	for _, k := range ctxKinds {
		for _, e := range ends {
			t.Run(k.kind+"/"+e.how, func(t *testing.T) {
				rdb, c, name := setup(t)
				h := k.take(t, c, name)
				type key struct{}
				ctx, cancel := h.context(context.WithValue(context.Background(), key{}, "request"))
				defer cancel()
				require.Equal(t, "request", ctx.Value(key{}))
				if e.how == "lost" {
					settle(t, c, rdb) // the client tracks the hold's key
				}
				require.NoError(t, ctx.Err(), "held")

				since := time.Now()
				e.end(t, c, rdb, h)
				select {
				case <-ctx.Done():
				case <-time.After(trackBound):
					t.Fatalf("ctx not cancelled %v after the hold ended (Err %v)", trackBound, h.err())
				}
				t.Logf("cancelled after %v: %v", time.Since(since).Round(time.Microsecond), context.Cause(ctx))
				want := e.want(h)
				require.ErrorIs(t, context.Cause(ctx), want)
				require.ErrorIs(t, h.err(), want)
				require.ErrorIs(t, ctx.Err(), context.Canceled)
			})
		}
	}
}

// promptly bounds a call that must answer without waiting: far below the
// waits the calls are given (2 s), far above a round trip.
const promptly = time.Second

// lockKind is one kind of lock, as a Locker on a name.
type lockKind struct {
	name string
	of   func(c *rlock.Client, name string) rlock.Locker
}

// allKinds are every kind of lock of package rlock, both sides of an RWMutex
// included.
var allKinds = []lockKind{
	{"Mutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewMutex(n) }},
	{"NonReentrantMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) }},
	{"FencedMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) }},
	{"SpinMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) }},
	{"FairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) }},
	{"NonReentrantFairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantFairMutex(n) }},
	{"ReadSide", func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).ReadLock() }},
	{"WriteSide", func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).WriteLock() }},
}

// notALockShapes are hashes that lock_shape.lua refuses: no ':' in an owner
// field, a count that is not a positive integer, a "mode" of another value.
var notALockShapes = []struct {
	name string
	hash map[string]string
}{
	{"foo-bar", map[string]string{"foo": "bar"}},
	{"count-x", map[string]string{"a:1": "x"}},
	{"count-0", map[string]string{"a:1": "0"}},
	{"mode-other", map[string]string{"mode": "other", "a:1": "1"}},
	{"nocolon", map[string]string{"nocolon": "1"}},
}

// putHash writes hash at name, with the time to live ttl (0: none).
func putHash(t testing.TB, rdb redis.Cmdable, name string, hash map[string]string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.Del(ctx, name).Err())
	require.NoError(t, rdb.HSet(ctx, name, hash).Err())
	if ttl > 0 {
		require.NoError(t, rdb.PExpire(ctx, name, ttl).Err())
	}
}

// keysOf returns every key of the server that mentions name's random suffix
// (redistest.Name's): the lock's own key and any key derived from it (token,
// queue, deadlines, read timeouts, latches).
func keysOf(t testing.TB, rdb redis.Cmdable, name string) []string {
	t.Helper()
	suffix := name[strings.LastIndexByte(name, ':')+1:]
	require.Regexp(t, `^[0-9a-f]{12}$`, suffix, "redistest.Name's suffix")
	keys, err := rdb.Keys(context.Background(), "*"+suffix+"*").Result()
	require.NoError(t, err)
	return keys
}

// requireHashAsPut requires the key name to be hash, unchanged, its time to
// live ttl (0: none) give or take the test's duration, and no key derived
// from name to exist.
func requireHashAsPut(t testing.TB, rdb redis.Cmdable, name string, hash map[string]string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, "hash", rdb.Type(ctx, name).Val())
	require.Equal(t, hash, holders(t, rdb, name), "the hash is unchanged")
	pttl, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	if ttl == 0 {
		require.Equal(t, time.Duration(-1), pttl, "still no time to live")
	} else {
		require.Greater(t, pttl, ttl-20*time.Second, "time to live kept")
		require.LessOrEqual(t, pttl, ttl, "time to live kept")
	}
	require.Equal(t, []string{name}, keysOf(t, rdb, name), "no key added")
}

// TestNotALockHashIsWrongTypeForEveryKind: a hash that is not a lock's, with or
// without a time to live, is ErrWrongType for every call of every kind that
// reads it as a lock: acquisitions (the conflict path, with and without a wait,
// which must not wait), inspections and ForceUnlock. After all of them the hash
// is as it was, its time to live too, and no key was added beside it.
func TestNotALockHashIsWrongTypeForEveryKind(t *testing.T) {
	for _, shape := range notALockShapes {
		for _, ttl := range []time.Duration{0, time.Minute} {
			for _, k := range allKinds {
				ttlName := "ttl"
				if ttl == 0 {
					ttlName = "nottl"
				}
				t.Run(shape.name+"/"+ttlName+"/"+k.name, func(t *testing.T) {
					t.Parallel()
					rdb, c, name := setup(t)
					putHash(t, rdb, name, shape.hash, ttl)
					l := k.of(c, name)
					ctx := testCtx(t, 30*time.Second)

					lease, err := l.TryLock(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock")
					require.Nil(t, lease)

					start := time.Now()
					lease, err = l.TryLock(ctx, rlock.WithWaitTime(300*time.Millisecond))
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock with a wait time")
					require.NotErrorIs(t, err, rlock.ErrNotAcquired)
					require.Nil(t, lease)
					require.Less(t, time.Since(start), promptly, "TryLock with a wait time must not wait")

					lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					start = time.Now()
					lease, err = l.Lock(lctx)
					took := time.Since(start)
					lctxErr := lctx.Err()
					cancel()
					require.ErrorIs(t, err, rlock.ErrWrongType, "Lock")
					require.NotErrorIs(t, err, rlock.ErrNotAcquired)
					require.NotErrorIs(t, err, context.DeadlineExceeded)
					require.Nil(t, lease)
					require.NoError(t, lctxErr, "Lock returned before its deadline")
					require.Less(t, took, promptly, "Lock must not wait")

					// Owned ctx: the same calls by an owner, and its inspections.
					octx := rlock.WithOwner(ctx)
					_, err = l.TryLock(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "TryLock by an owner")

					locked, err := l.IsLocked(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "IsLocked")
					require.False(t, locked)
					held, err := l.IsHeld(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "IsHeld")
					require.False(t, held)
					n, err := l.HoldCount(octx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "HoldCount")
					require.Zero(t, n)
					_, err = l.RemainTTL(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "RemainTTL")

					ok, err := l.ForceUnlock(ctx)
					require.ErrorIs(t, err, rlock.ErrWrongType, "ForceUnlock")
					require.False(t, ok, "ForceUnlock deleted nothing")

					require.ErrorIs(t, l.Unlock(octx), rlock.ErrNotHeld, "the owner holds nothing")
					requireHashAsPut(t, rdb, name, shape.hash, ttl)
				})
			}
		}
	}
}

// Owner fields as Redisson writes them: "<client uuid>:<thread id>".
const javaClient = "6f1a3a7e-7a35-4b43-9c1e-2f1d1b7f0c2e"

// lockShapes are hashes Redisson writes, with the kinds for which each is
// locked (isLocked): a plain lock hash for every kind of the RLock layout,
// and not for the sides of a read/write lock, whose isLocked reads "mode"; a
// read/write lock's hash for the side of its mode, and for every other kind
// (any hash is held for them).
var lockShapes = []struct {
	name   string
	hash   map[string]string
	mode   string // "" for a plain lock hash
	holder string // a field that holds it
}{
	{"plain-1", map[string]string{javaClient + ":57": "1"}, "", javaClient + ":57"},
	{"plain-3", map[string]string{javaClient + ":57": "3"}, "", javaClient + ":57"},
	{"read", map[string]string{"mode": "read", javaClient + ":1": "2", javaClient + ":2": "1"}, "read", javaClient + ":1"},
	{"write", map[string]string{"mode": "write", javaClient + ":1:write": "1"}, "write", javaClient + ":1:write"},
}

// TestLockShapedHashesAreLocks: the hashes Redisson writes are locks for every
// kind: an acquisition by a new owner is refused as held (ErrNotAcquired,
// never ErrWrongType), or granted where Redisson grants it (a reader on a lock
// in read mode); IsLocked and ForceUnlock read them as Redisson does: a side of
// a read/write lock is locked, and force-released, only in its own mode.
func TestLockShapedHashesAreLocks(t *testing.T) {
	const ttl = time.Minute
	for _, shape := range lockShapes {
		for _, k := range allKinds {
			t.Run(shape.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				rdb, c, name := setup(t)
				ctx := testCtx(t, 30*time.Second)
				side := map[string]string{"ReadSide": "read", "WriteSide": "write"}[k.name]
				wantLocked := side == "" || side == shape.mode

				putHash(t, rdb, name, shape.hash, ttl)
				l := k.of(c, name)
				octx := rlock.WithOwner(ctx)
				if side == "read" && shape.mode == "read" {
					// Redisson's read lock: another reader joins the readers. On
					// a name of its own: its release clears the zombie readers
					// and leaves an unlock latch.
					join := redistest.Name(t)
					putHash(t, rdb, join, shape.hash, ttl)
					lease, err := k.of(c, join).TryLock(octx)
					require.NoError(t, err, "a reader joins a lock in read mode")
					require.Equal(t, "1", holders(t, rdb, join)[lease.Holder()])
					require.Equal(t, len(shape.hash)+1, len(holders(t, rdb, join)))
					require.NoError(t, lease.Unlock(ctx))
				} else {
					lease, err := l.TryLock(octx)
					require.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock of a held lock")
					require.NotErrorIs(t, err, rlock.ErrWrongType)
					require.NotContains(t, err.Error(), "held in this client")
					require.Nil(t, lease)
					start := time.Now()
					_, err = l.TryLock(octx, rlock.WithWaitTime(50*time.Millisecond))
					require.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock with a wait time of a held lock")
					require.NotErrorIs(t, err, rlock.ErrWrongType)
					require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it waited")
				}
				requireHashAsPut(t, rdb, name, shape.hash, ttl)

				locked, err := l.IsLocked(ctx)
				require.NoError(t, err)
				require.Equal(t, wantLocked, locked, "IsLocked")
				n, err := l.HoldCount(octx)
				require.NoError(t, err)
				require.Zero(t, n, "the new owner holds nothing")
				remain, err := l.RemainTTL(ctx)
				require.NoError(t, err)
				if wantLocked {
					require.Greater(t, remain, ttl-20*time.Second)
					require.LessOrEqual(t, remain, ttl)
				} else {
					require.Equal(t, rlock.NotLocked, remain)
				}

				ok, err := l.ForceUnlock(ctx)
				require.NoError(t, err)
				require.Equal(t, wantLocked, ok, "ForceUnlock releases a lock in its kind's mode only")
				if wantLocked {
					require.Zero(t, rdb.Exists(ctx, name).Val(), "ForceUnlock deleted the lock")
					require.Empty(t, keysOf(t, rdb, name))
				} else {
					requireHashAsPut(t, rdb, name, shape.hash, ttl)
				}
			})
		}
	}
}

// TestCLIStatusAgreesWithLibraryOnNotALock: holdfast status and unlock --force
// apply the library's rule: every hash the library refuses with ErrWrongType
// is "not_a_lock" and left alone by unlock --force (65); a lock's hash, which
// the library reads as locked, is a "lock" that unlock --force releases.
func TestCLIStatusAgreesWithLibraryOnNotALock(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	url := sharedURL(t)

	var names []string
	for _, shape := range notALockShapes {
		n := name + ":" + shape.name
		putHash(t, rdb, n, shape.hash, 0)
		_, err := c.NewMutex(n).IsLocked(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType, "the library: %s", shape.name)
		names = append(names, n)
	}
	lock := name + ":lock"
	lockHash := map[string]string{javaClient + ":57": "2"}
	putHash(t, rdb, lock, lockHash, time.Minute)
	locked, err := c.NewMutex(lock).IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, locked)

	list := statusJSON(t, append(names, lock)...)
	require.Len(t, list, len(names)+1)
	for i, n := range names {
		require.Equal(t, n, list[i].Name)
		require.Equal(t, "not_a_lock", list[i].Kind, n)
		require.Equal(t, "hash", list[i].RedisType, n)
	}
	st := list[len(names)]
	require.Equal(t, lock, st.Name)
	require.Equal(t, "lock", st.Kind)
	require.Len(t, st.Holders, 1)
	require.Equal(t, javaClient+":57", st.Holders[0].Field)
	require.EqualValues(t, 2, st.Holders[0].Count)

	for i, n := range names {
		r := statusCLI(t, "unlock", "--force", "--yes", "--redis", url, n)
		require.Equal(t, 65, r.code, "%s: stdout %q, stderr %q", n, r.stdout, r.stderr)
		require.Contains(t, r.stderr, "not a lock")
		require.Equal(t, notALockShapes[i].hash, holders(t, rdb, n), "unlock --force left %s alone", n)
		require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, n).Val())
	}

	r := statusCLI(t, "unlock", "--force", "--yes", "--redis", url, lock)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stdout, "force-released "+lock)
	require.Zero(t, rdb.Exists(ctx, lock).Val())
}

// ownerIDOf is the owner id of a lease's holder: the decimal part after the
// holder field's last ':'.
func ownerIDOf(t testing.TB, l *rlock.Lease) string {
	t.Helper()
	h := l.Holder()
	id := h[strings.LastIndexByte(h, ':')+1:]
	require.Regexp(t, `^[1-9][0-9]*$`, id, "holder %q", h)
	return id
}

// requireNamesHolder requires err to be a failed acquisition that names id,
// an owner of the same client, as the holder.
// requireNamesHolder requires err to be a failed acquisition that names the
// owner id of this client as the holder, with the hint about WithOwner when
// the call's ctx carried no owner (hint), without it otherwise: two owners of
// one client that contend, each with its own WithOwner, are ordinary contention.
func requireNamesHolder(t testing.TB, err error, id string, hint bool) {
	t.Helper()
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "held in this client by owner "+id)
	if hint {
		require.Contains(t, err.Error(), "WithOwner")
	} else {
		require.NotContains(t, err.Error(), "WithOwner", "ordinary contention between two owners")
	}
}

// TestSecondLockWithoutOwnerNamesTheHolder: an acquisition that fails because
// an owner of the same client holds the lock (most often the caller itself,
// with a ctx that does not carry that owner) says so, naming that owner: Lock
// ended by its ctx, TryLock with and without a wait time. An acquisition in
// another client, blocked by the same holder, does not claim it is held in
// its client.
func TestSecondLockWithoutOwnerNamesTheHolder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(ctx context.Context) context.Context // ctx of the holder
		second func(ctx context.Context) context.Context // ctx of the second call, from the holder's
		hint   bool                                      // the error points at WithOwner
	}{
		{"NoOwner", func(ctx context.Context) context.Context { return ctx },
			func(ctx context.Context) context.Context { return ctx }, true},
		{"FreshOwner", rlock.WithOwner, rlock.WithOwner, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, name := setup(t)
			base := testCtx(t, 30*time.Second)
			m := c.NewMutex(name)
			hctx := tc.first(base)
			lease, err := m.Lock(hctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, lease.Unlock(base)) }()
			id := ownerIDOf(t, lease)

			start := time.Now()
			lctx, cancel := context.WithTimeout(tc.second(hctx), 300*time.Millisecond)
			l2, err := m.Lock(lctx)
			took := time.Since(start)
			lctxErr := lctx.Err()
			cancel()
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, lctxErr, context.DeadlineExceeded, "it waited for its ctx")
			require.Less(t, took, 5*time.Second)

			l2, err = m.TryLock(tc.second(hctx))
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)

			l2, err = m.TryLock(tc.second(hctx), rlock.WithWaitTime(100*time.Millisecond))
			require.Nil(t, l2)
			requireNamesHolder(t, err, id, tc.hint)

			// Another client, blocked by this client's holder: not held there.
			other := newClient(t, redistest.Shared(t).Client(t))
			om := other.NewMutex(name)
			octx, ocancel := context.WithTimeout(base, 300*time.Millisecond)
			l2, err = om.Lock(octx)
			ocancel()
			require.Nil(t, l2)
			require.ErrorIs(t, err, rlock.ErrNotAcquired)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotContains(t, err.Error(), "held in this client")

			l2, err = om.TryLock(base)
			require.Nil(t, l2)
			require.ErrorIs(t, err, rlock.ErrNotAcquired)
			require.NotContains(t, err.Error(), "held in this client")

			// None of the failed calls disturbed the holder.
			held, err := m.IsLocked(base)
			require.NoError(t, err)
			require.True(t, held)
			require.NoError(t, lease.Err())
		})
	}
}

// Fencing tokens that never go backwards when Redis loses its data: a
// restart without persistence, FLUSHALL, and a failover to a
// replica that missed the last INCRs. Before, the counter started again at 1
// (or at the replica's stale value), and a resource that keeps the highest
// token it saw refused every later holder.

// fencedTokens takes n tokens of the fenced lock name through c and returns
// the highest; each must exceed above.
func fencedTokens(t *testing.T, ctx context.Context, c *rlock.Client, name string, n int, above int64) int64 {
	t.Helper()
	m := c.NewFencedMutex(name)
	for range n {
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		require.Greater(t, l.Token(), above, "a token at or below one handed out before")
		above = l.Token()
		require.NoError(t, l.Unlock(ctx))
	}
	return above
}

func TestFencedTokensSurviveDataLoss(t *testing.T) {
	t.Run("restart without persistence", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		srv := redistest.Start(t)
		c := newClient(t, srv.Client(t))
		name := redistest.Name(t)
		last := fencedTokens(t, ctx, c, name, 3, 0)
		srv.Restart(t)
		fencedTokens(t, ctx, c, name, 3, last)
	})
	t.Run("FLUSHALL", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		srv := redistest.Start(t)
		rdb := srv.Client(t)
		c := newClient(t, rdb)
		name := redistest.Name(t)
		last := fencedTokens(t, ctx, c, name, 3, 0)
		require.NoError(t, rdb.FlushAll(ctx).Err())
		fencedTokens(t, ctx, c, name, 3, last)
	})
	t.Run("failover to a replica that missed INCRs", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
		host, port, _ := strings.Cut(primary.Addr, ":")
		replica := redistest.Start(t, "--replicaof", host, port)
		rc := replica.Client(t)
		require.Eventually(t, func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 10*time.Second, 10*time.Millisecond, "replica in sync")
		pc := newClient(t, primary.Client(t))
		name := redistest.Name(t)
		synced := fencedTokens(t, ctx, pc, name, 2, 0)
		require.Eventually(t, func() bool {
			v, err := rc.Get(ctx, "redisson_lock_token:{"+name+"}").Int64()
			return err == nil && v == synced
		}, 10*time.Second, 5*time.Millisecond, "the replica has the counter")

		// The replica is promoted before it hears of the primary's next tokens.
		require.NoError(t, rc.SlaveOf(ctx, "NO", "ONE").Err())
		last := fencedTokens(t, ctx, pc, name, 3, synced)
		v, err := rc.Get(ctx, "redisson_lock_token:{"+name+"}").Int64()
		require.NoError(t, err)
		require.Equal(t, synced, v, "the promoted replica missed the last INCRs")

		rcClient := newClient(t, replica.Client(t, func(o *redis.Options) { o.MaxRetries = -1 }))
		fencedTokens(t, ctx, rcClient, name, 3, last)
	})
}

// TestFencedTokensFollowJavaCounter: Java's RFencedLock INCRs the same counter;
// a token holdfast takes after a Java one is still above it, and Java's INCR
// keeps working on the raised counter.
func TestFencedTokensFollowJavaCounter(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	rdb, c, name := setup(t)
	counter := "redisson_lock_token:{" + name + "}"
	require.NoError(t, rdb.Set(ctx, counter, 41, 0).Err()) // as Java leaves it after 41 acquisitions
	t.Cleanup(func() { rdb.Del(context.Background(), counter) })
	last := fencedTokens(t, ctx, c, name, 1, 41)
	java, err := rdb.Incr(ctx, counter).Result()
	require.NoError(t, err)
	require.Equal(t, last+1, java)
	fencedTokens(t, ctx, c, name, 1, java)
}
