package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

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
