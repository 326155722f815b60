package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Tests of the CountDownLatch against real Redis: invalid counts,
// Await at zero, five awaiters in two clients released together by the last
// CountDown, Delete while awaited, a foreign key at the name.

// latchAwaited sets the latch name to count with setter, starts an Await in
// each of awaiters (a client may come more than once), and returns once all
// of them are parked (the awaiters' clients are made with watchWaits) and
// each of their clients is subscribed to the latch's channel.
func latchAwaited(t *testing.T, ctx context.Context, admin *redis.Client, setter *rlock.Client, name string, count int64, awaiters ...*rlock.Client) []<-chan asyncResult[struct{}] {
	t.Helper()
	answer(setter.NewCountDownLatch(name).TrySetCount(ctx, count)).is(t, true)
	var awaits []func() error
	clients := map[*rlock.Client]bool{}
	for _, c := range awaiters {
		l := c.NewCountDownLatch(name)
		awaits = append(awaits, func() error { return l.Await(ctx) })
		clients[c] = true
	}
	gots := goParked(t, name, awaits...)
	awaitSubscribersAtLeast(t, admin, syncLatchChannel(name), int64(len(clients)))
	return gots
}

// TestLatchInvalidCount: TrySetCount with a count below 1 is
// ErrInvalidArgument before any round trip, as an empty name is.
func TestLatchInvalidCount(t *testing.T) {
	syncOffline(t, func(ctx context.Context, c *rlock.Client, name string) {
		l := c.NewCountDownLatch(name)
		for _, n := range []int64{0, -1, -9} {
			syncRequireInvalid(t, errOf(l.TrySetCount(ctx, n)), "TrySetCount")
		}
		syncRequireInvalid(t, errOf(c.NewCountDownLatch("").Count(ctx)), "empty name")
		syncRequireInvalid(t, c.NewCountDownLatch("").Await(ctx), "Await, empty name")
	})
}

// TestLatchAwaitAtZero: Await returns nil at once on a latch that does not
// exist and on one counted down to zero, and subscribes to nothing; CountDown
// on an absent latch changes nothing.
func TestLatchAwaitAtZero(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 10*time.Second)
	l := c.NewCountDownLatch(name)
	require.NoError(t, l.Await(ctx), "absent latch")
	require.NoError(t, l.CountDown(ctx), "CountDown of an absent latch")
	require.Zero(t, rdb.Exists(ctx, name).Val(), "nothing created")
	answer(l.TrySetCount(ctx, 2)).is(t, true)
	answer(l.TrySetCount(ctx, 5)).is(t, false, "the latch exists")
	answer(l.Count(ctx)).is(t, 2)
	require.NoError(t, l.CountDown(ctx))
	require.NoError(t, l.CountDown(ctx))
	require.Zero(t, rdb.Exists(ctx, name).Val(), "deleted at zero")
	start := time.Now()
	require.NoError(t, l.Await(ctx))
	require.Less(t, time.Since(start), time.Second)
	require.Zero(t, numSub(t, rdb, syncLatchChannel(name)))
}

// TestLatchAwaitersReleasedTogether: five awaiters, three in one client and
// two in another, all parked in their wait, stay there while the count goes
// 3 → 2 → 1, and all return nil together once a third client counts down the
// last time. Their clients' re-check interval is a minute: the message
// releases them.
func TestLatchAwaitersReleasedTogether(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	ca := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	cb := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	cc := newClient(t, srv.Client(t))
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	gots := latchAwaited(t, ctx, admin, cc, name, 3, ca, ca, ca, cb, cb)

	l := cc.NewCountDownLatch(name)
	for want := int64(2); want >= 1; want-- {
		require.NoError(t, l.CountDown(ctx))
		answer(l.Count(ctx)).is(t, want)
		for i, g := range gots {
			requirePending(t, g, fmt.Sprintf("awaiter %d", i))
		}
	}
	last := time.Now()
	require.NoError(t, l.CountDown(ctx))
	var first, slowest time.Duration
	for i, g := range gots {
		got := awaitAsync(t, g, 5*time.Second, fmt.Sprintf("awaiter %d", i))
		require.NoError(t, got.err, "awaiter %d", i)
		d := got.at.Sub(last)
		if i == 0 || d < first {
			first = d
		}
		slowest = max(slowest, d)
	}
	t.Logf("5 awaiters (3 + 2 in two clients) returned %v to %v after the last CountDown", first.Round(time.Microsecond), slowest.Round(time.Microsecond))
	require.Less(t, slowest, 2*time.Second, "released by the message, not by a re-check")
	require.Zero(t, admin.Exists(ctx, name).Val())
}

// TestLatchDeleteWhileAwaited: Delete of a latch that awaiters in two clients
// wait for makes every Await return ErrLatchDeleted (Java's waiters keep
// waiting; holdfast says what happened); Delete of an absent latch is false.
func TestLatchDeleteWhileAwaited(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	ca := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	cb := newClient(t, srv.Client(t), rlock.WithRecheckInterval(time.Minute), watchWaits())
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	gots := latchAwaited(t, ctx, admin, ca, name, 2, ca, ca, cb)

	l := ca.NewCountDownLatch(name)
	deleted := time.Now()
	answer(l.Delete(ctx)).is(t, true)
	for i, g := range gots {
		got := awaitAsync(t, g, 5*time.Second, "awaiter after Delete")
		require.ErrorIs(t, got.err, rlock.ErrLatchDeleted, "awaiter %d", i)
		t.Logf("awaiter %d: %v after Delete: %v", i, got.at.Sub(deleted).Round(time.Microsecond), got.err)
		require.Less(t, got.at.Sub(deleted), 2*time.Second)
	}
	answer(l.Delete(ctx)).is(t, false, "nothing left to delete")
}

// TestLatchLostMessage: a latch whose key disappears without a message (a
// raw DEL, as a count-down whose "0" was lost) still releases its awaiter,
// within the awaiter's re-check interval: nil, since without the message the
// end reads as an opening.
func TestLatchLostMessage(t *testing.T) {
	const recheck = 500 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	c := newClient(t, srv.Client(t), rlock.WithRecheckInterval(recheck), watchWaits())
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	got := latchAwaited(t, ctx, admin, c, name, 1, c)[0]

	deleted := time.Now()
	require.NoError(t, admin.Del(ctx, name).Err()) // no PUBLISH
	g := awaitAsync(t, got, recheck+5*time.Second, "Await after a raw DEL")
	require.NoError(t, g.err)
	took := g.at.Sub(deleted)
	t.Logf("lost message (raw DEL, no publish): awaiter returned %v after the DEL (re-check interval %v)",
		took.Round(time.Millisecond), recheck)
	require.Less(t, took, recheck+2*time.Second, "bounded by the re-check interval")
}

// TestLatchWrongType: with a hash, a list or a string that is not an integer
// at the name, every call fails with ErrWrongType (Await at once) and the key
// stays as it was.
func TestLatchWrongType(t *testing.T) {
	syncRequireWrongType(t, func(ctx context.Context, c *rlock.Client, name string) []syncCall {
		l := c.NewCountDownLatch(name)
		return []syncCall{
			{"TrySetCount", func() error { return errOf(l.TrySetCount(ctx, 2)) }},
			{"CountDown", func() error { return l.CountDown(ctx) }},
			{"Count", func() error { return errOf(l.Count(ctx)) }},
			{"Await", func() error { return l.Await(ctx) }},
		}
	})
}

// A latch set and counted down over and over by other clients is never
// reported deleted to its awaiters: an opening whose message is still in
// flight behind a late "set" message is an opening. A real Delete still is
// reported, and a raw DEL still reads as an opening.

const (
	latchChurnAwaiters = 3   // goroutines awaiting, one after the other, in one client
	latchChurnAwaits   = 200 // Awaits per goroutine
)

// latchChurnTally counts the outcomes of the Awaits of TestLatchChurnNeverDeleted.
type latchChurnTally struct {
	opened, deleted, other atomic.Int64
	mu                     sync.Mutex
	first                  error // the first error that is not ErrLatchDeleted
}

// record counts the outcome err of one Await.
func (t *latchChurnTally) record(err error) {
	switch {
	case err == nil:
		t.opened.Add(1)
	case errors.Is(err, rlock.ErrLatchDeleted):
		t.deleted.Add(1)
	default:
		t.other.Add(1)
		t.mu.Lock()
		t.first = cmp.Or(t.first, err)
		t.mu.Unlock()
	}
}

// latchChurn sets the latch name to 1 and counts it down, alternating between
// the clients cs, until stop is closed; it returns the first error on the
// channel it returns (nil once stopped).
func latchChurn(ctx context.Context, name string, stop <-chan struct{}, cs ...*rlock.Client) <-chan error {
	out := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- nil
				return
			default:
			}
			l := cs[i%len(cs)].NewCountDownLatch(name)
			_, err := l.TrySetCount(ctx, 1)
			if err = errors.Join(err, l.CountDown(ctx)); err != nil {
				out <- err
				return
			}
		}
	}()
	return out
}

// TestLatchChurnNeverDeleted: while two other clients set a latch to 1 and
// count it down, over and over, 600 Awaits in a third client (no deadline)
// all return nil: none reports ErrLatchDeleted, since nothing deletes the
// latch. Then, with the churn stopped, a Delete of a latch awaited in two
// clients makes every Await return ErrLatchDeleted, and a raw DEL (no
// message) makes it return nil.
func TestLatchChurnNeverDeleted(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	ca := newClient(t, srv.Client(t), watchWaits())
	cb := newClient(t, srv.Client(t), watchWaits())
	cc := newClient(t, srv.Client(t))
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })

	stop := make(chan struct{})
	churned := latchChurn(ctx, name, stop, cb, cc)
	tally := &latchChurnTally{}
	var wg sync.WaitGroup
	for range latchChurnAwaiters {
		wg.Go(func() {
			l := ca.NewCountDownLatch(name)
			for range latchChurnAwaits {
				tally.record(l.Await(ctx))
			}
		})
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-churned, "churn")
	t.Logf("%d Awaits under churn: %d opened, %d latch deleted, %d other errors",
		latchChurnAwaiters*latchChurnAwaits, tally.opened.Load(), tally.deleted.Load(), tally.other.Load())
	require.Zero(t, tally.other.Load(), "other errors, the first: %v", tally.first)
	require.Zero(t, tally.deleted.Load(), "Awaits told ErrLatchDeleted of a latch nobody deleted")

	l := ca.NewCountDownLatch(name)
	require.NoError(t, admin.Del(ctx, name).Err())
	gots := latchAwaited(t, ctx, admin, ca, name, 2, ca, ca, cb)
	answer(l.Delete(ctx)).is(t, true)
	for i, g := range gots {
		require.ErrorIs(t, awaitAsync(t, g, 5*time.Second, "awaiter after Delete").err, rlock.ErrLatchDeleted, "awaiter %d", i)
	}

	gots = latchAwaited(t, ctx, admin, ca, name, 2, ca, cb)
	require.NoError(t, admin.Del(ctx, name).Err()) // no message: reads as an opening
	for i, g := range gots {
		require.NoError(t, awaitAsync(t, g, 30*time.Second, "awaiter after a raw DEL").err, "awaiter %d", i)
	}
}
