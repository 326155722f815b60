package integration

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
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
