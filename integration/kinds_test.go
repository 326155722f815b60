package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

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
