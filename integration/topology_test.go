package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redLockSetup starts n independent primaries and, for each of two processes'
// worth of clients (A and B), one rlock.Client per primary.
func redLockSetup(t *testing.T, n int) (servers []*redistest.Server, a, b []*rlock.Client) {
	t.Helper()
	short := func(o *redis.Options) { o.MaxRetries = 1; o.DialTimeout = 200 * time.Millisecond }
	for range n {
		s := redistest.Start(t)
		servers = append(servers, s)
		a = append(a, newClient(t, s.Client(t, short)))
		b = append(b, newClient(t, s.Client(t, short)))
	}
	return servers, a, b
}

func redLockOf(clients []*rlock.Client, name string) *rlock.RedLock {
	var ms []*rlock.Mutex
	for _, c := range clients {
		ms = append(ms, c.NewMutex(name))
	}
	return rlock.NewRedLock(ms...)
}

// TestRedLock: over 5 independent primaries, a RedLock excludes another one, a
// waiting one is woken by the release, it still acquires with 2 primaries
// killed, and with 3 killed it fails cleanly and leaves nothing held.
func TestRedLock(t *testing.T) {
	servers, ca, cb := redLockSetup(t, 5)
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	ra, rb := redLockOf(ca, name), redLockOf(cb, name)

	la, err := ra.Lock(ctx)
	require.NoError(t, err)
	require.Len(t, la.Leases(), 5)
	_, err = rb.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	t.Logf("refused: %v", err)

	got := make(chan time.Time, 1)
	go func() {
		lb, err := rb.Lock(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		at := time.Now()
		if err := lb.Unlock(ctx); err != nil {
			t.Error(err)
		}
		got <- at
	}()
	// Let B fail a round and wait on the release channels.
	admin := servers[0].Client(t)
	channel := "redisson_lock__channel:{" + name + "}"
	awaitSubscribersAtLeast(t, admin, channel, 1)
	released := time.Now()
	require.NoError(t, la.Unlock(ctx))
	at, ok := <-got
	require.True(t, ok)
	t.Logf("waiting RedLock acquired %v after the release", at.Sub(released).Round(time.Millisecond))
	require.Less(t, at.Sub(released), 2*time.Second)

	// Fixed lease: the validity is reported.
	lf, err := ra.TryLock(ctx, rlock.WithLeaseTime(5*time.Second))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(5*time.Second), lf.ValidUntil(), 200*time.Millisecond)
	require.NoError(t, lf.Unlock(ctx))

	// 2 of 5 primaries down: a majority is still there.
	servers[0].Kill()
	servers[1].Kill()
	l3, err := ra.TryLock(ctx)
	require.NoError(t, err)
	require.Len(t, l3.Leases(), 3)
	_, err = rb.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.NoError(t, l3.Unlock(ctx))

	// 3 of 5 down: no majority; what was taken on the 2 alive ones is given back.
	servers[2].Kill()
	start := time.Now()
	_, err = ra.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	t.Logf("with 3 of 5 primaries down, TryLock failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	for _, s := range servers[3:] {
		n, err := s.Client(t).Exists(context.Background(), name).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the partial acquisition on %s was given back", s.Addr)
	}
}

// TestSentinelPrimaryKilled: with Sentinel (a primary, 2 replicas, 3 Sentinels)
// and go-redis' failover client, the primary is killed while client A holds a
// lock (replicated) and client B waits for it. The Sentinels promote a replica;
// A's hold survives (its watchdog renews on the new primary), A's Unlock goes to
// the new primary, B, subscribed again there, is woken by it, and new locks work.
//
// "The new primary" is the one the failover settles on, whichever replica that
// is: the Sentinels sometimes fail over a second time, to the other replica, a
// second after naming the first (see redistest.Failover), and go-redis follows
// them there with its commands. Its subscriber connections it does not move: a
// failover closes the pooled connections to the old address, not the pub/sub
// ones, so after a second failover B may stay subscribed on the first new
// primary, which the Sentinels make a replica of the settled one about 10 s
// later. There B hears the release all the same: a primary's PUBLISH reaches
// its replicas' subscribers (docs/safety.md, "Sentinel").
func TestSentinelPrimaryKilled(t *testing.T) {
	f := redistest.StartFailover(t, 2, 3)
	ctx := testCtx(t, 90*time.Second)
	opts := func(o *redis.FailoverOptions) { o.MaxRetries = 10 }
	ra, rb := f.Client(t, opts), f.Client(t, opts)
	// A 12 s lease, renewed every 4 s, outlasts two renewals lost to a failover
	// (one to the killed primary, one to a first promoted primary that the
	// Sentinels replace a second later): see docs/safety.md, "Sentinel".
	a := newClient(t, ra, rlock.WithWatchdogTimeout(12*time.Second))
	b := newClient(t, rb, rlock.WithWatchdogTimeout(12*time.Second))
	name := redistest.Name(t)

	la, err := a.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	acked, err := ra.Do(ctx, "WAIT", 2, 5000).Int()
	require.NoError(t, err)
	require.Equal(t, 2, acked, "the hold reached both replicas before the kill")

	type result struct {
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		lb, err := b.NewMutex(name).Lock(ctx)
		got <- result{time.Now(), err}
		if err == nil {
			_ = lb.Unlock(ctx)
		}
	}()
	primary := f.Primary.Client(t)
	channel := lua.ChannelName(name)
	awaitSubscribers(t, primary, channel, 1) // B subscribed

	f.Primary.Kill()
	killed := time.Now()
	promoted, err := f.WaitMasterChange(ctx, f.Primary.Addr)
	require.NoError(t, err)
	t.Logf("Sentinels promoted %s %v after the kill", promoted, time.Since(killed).Round(time.Millisecond))
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var on string
	var last error
	settled, err := f.WaitSettled(sctx, func(addr string) error {
		on, last = subscribedOn(sctx, f, channel)
		return last
	})
	if err != nil {
		select {
		case r := <-got:
			t.Fatalf("B's Lock returned during the failover, %v after the kill: %v; A: %v", r.at.Sub(killed), r.err, la.Err())
		default:
		}
	}
	require.NoError(t, err, "B subscribed again on the new primary or one of its replicas (last: %v)", last)
	t.Logf("the failover settled on %s, B subscribed on %s, %v after the kill", settled, on, time.Since(killed).Round(time.Millisecond))
	if settled != promoted {
		t.Logf("the Sentinels failed over again after promoting %s", promoted)
	}
	select {
	case r := <-got:
		t.Fatalf("B acquired while A held the lock: %v", r.err)
	default:
	}
	require.Nil(t, la.Err(), "A's hold survived the failover")

	var unlocked time.Time
	require.Eventually(t, func() bool {
		err := la.Unlock(ctx)
		unlocked = time.Now()
		return err == nil || errors.Is(err, rlock.ErrNotHeld)
	}, 20*time.Second, 50*time.Millisecond)
	require.ErrorIs(t, la.Err(), rlock.ErrUnlocked, "A's Unlock went to the new primary")
	r := <-got
	require.NoError(t, r.err)
	t.Logf("B acquired %v after A's Unlock", r.at.Sub(unlocked).Round(time.Millisecond))
	require.Less(t, r.at.Sub(unlocked), 2*time.Second, "woken by the release, not by the lease")

	lc, err := a.NewMutex(redistest.Name(t) + ":after").TryLock(ctx)
	require.NoError(t, err, "new locks work")
	require.NoError(t, lc.Unlock(ctx))
}

// subscribedOn returns the server of f where the one subscriber of channel is,
// once f has settled (every live server is the primary or its replica in sync,
// so a PUBLISH on the primary reaches it), or an error saying how many there are.
func subscribedOn(ctx context.Context, f *redistest.Failover, channel string) (string, error) {
	var on []string
	for _, s := range append([]*redistest.Server{f.Primary}, f.Replicas...) {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
		n, err := c.PubSubNumSub(ctx, channel).Result()
		_ = c.Close()
		if err == nil {
			for range n[channel] {
				on = append(on, s.Addr)
			}
		}
	}
	if len(on) != 1 {
		return "", fmt.Errorf("%d subscribers of %s (on %v)", len(on), channel, on)
	}
	return on[0], nil
}
