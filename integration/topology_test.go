package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestCluster runs the lock on a Redis Cluster of 3 primaries, one cluster shared
// by the subtests (none of them breaks it).
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	t.Run("NamesInEveryShard", func(t *testing.T) { clusterNamesInEveryShard(t, cl) })
	t.Run("CounterTwoClients", func(t *testing.T) { clusterCounter(t, cl) })
	t.Run("WaiterWokenInEveryShard", func(t *testing.T) { clusterWaiterWoken(t, cl) })
	t.Run("ShardFeedReconnects", func(t *testing.T) { clusterFeedReconnects(t, cl) })
	t.Run("MultiLockThreeShards", func(t *testing.T) { clusterMultiLock(t, cl) })
	t.Run("EveryEndOfAHoldWakesTheWaiter", func(t *testing.T) { clusterHoldEnds(t, cl) })
	t.Run("SlotMovedWhileHeldAndWaited", func(t *testing.T) { clusterSlotMoved(t, cl) })
	t.Run("OutsideEndWakesWaiters", func(t *testing.T) { clusterOutsideEnd(t, cl) })
}

// clusterOutsideEnd: on a cluster (sharded pub/sub, the tracker on each
// primary), a hold ended from outside with nothing published lets a waiter
// of another client in within 5 s, long before the 30 s lease it read, for
// every kind of outsideKinds.
func clusterOutsideEnd(t *testing.T, cl *redistest.Cluster) {
	cc := cl.Client(t)
	for _, k := range outsideKinds {
		t.Run(k.name, func(t *testing.T) {
			holder, waiter := newClient(t, cc), newClient(t, cc)
			name := redistest.Name(t)
			ctx := testCtx(t, 20*time.Second)
			require.NoError(t, k.hold(ctx, holder, name))
			done := make(chan error, 1)
			go func() { done <- k.wait(ctx, waiter, name) }()
			require.Eventually(t, func() bool { return shardListening(ctx, cc, name) }, 10*time.Second, time.Millisecond,
				"the waiter subscribes")
			at := time.Now()
			require.NoError(t, k.end(ctx, cc, name))
			select {
			case err := <-done:
				require.NoError(t, err)
				require.Less(t, time.Since(at), 5*time.Second)
			case <-ctx.Done():
				t.Fatalf("%s: the waiter did not get in after the hold ended from outside", k.name)
			}
		})
	}
}

// shardListening reports whether a channel of the object name is subscribed
// on some primary of cc: a shard channel, or before Redis 7 (no sharded
// pub/sub) a classic one.
func shardListening(ctx context.Context, cc *redis.ClusterClient, name string) bool {
	var found atomic.Bool
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if chans, err := c.PubSubShardChannels(ctx, "*"+name+"*").Result(); err == nil && len(chans) > 0 {
			found.Store(true)
		}
		if chans, err := c.PubSubChannels(ctx, "*"+name+"*").Result(); err == nil && len(chans) > 0 {
			found.Store(true)
		}
		return nil
	})
	return found.Load()
}

// clusterSlotMoved: a lock's slot moves to another primary (a resharding:
// MIGRATING, IMPORTING, MIGRATE, SETSLOT NODE) while one client holds it with
// the watchdog and another waits; the waiter's client also waits for a second
// lock, held too, whose slot stays on the same primary (one subscriber
// connection per shard carries both channels). The holder keeps its holds,
// renewed on the new owner, though nothing else of its client touches the
// slot; the waiter's subscription of the moved lock follows it to the new
// owner and the other stays, so that each unlock wakes its waiter at once
// (their waits are otherwise bounded by the lease, 30 s, and the recheck
// interval, a minute here). Then the slot moves on, and the same again.
func clusterSlotMoved(t *testing.T, cl *redistest.Cluster) {
	ctx := testCtx(t, 90*time.Second)
	holder := newClient(t, cl.Client(t), rlock.WithWatchdogTimeout(time.Second))
	waiter := newClient(t, cl.Client(t), rlock.WithRecheckInterval(time.Minute))
	owner := func(key string) *redistest.Server { // a client of its own: the view of the cluster of now
		admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		defer admin.Close()
		m, err := admin.MasterForKey(ctx, key)
		require.NoError(t, err)
		for _, p := range cl.Primaries {
			if p.Addr == m.Options().Addr {
				return p
			}
		}
		t.Fatalf("no primary owns %s", key)
		return nil
	}
	name := redistest.Name(t)
	for round := range 2 {
		from := owner(name)
		sibling := name + ":sibling"
		for i := 0; owner(sibling) != from || lua.Slot(sibling) == lua.Slot(name); i++ {
			sibling = fmt.Sprintf("%s:sibling%d", name, i)
		}
		var leases []*rlock.Lease
		got := make(chan error, 2)
		for _, n := range []string{name, sibling} {
			l, err := holder.NewMutex(n).Lock(ctx)
			require.NoError(t, err)
			leases = append(leases, l)
			go func() {
				wl, err := waiter.NewMutex(n).Lock(ctx)
				if err == nil {
					err = wl.Unlock(ctx)
				}
				got <- err
			}()
			requireClusterWaiting(t, cl, n)
		}
		to := cl.Primaries[(slices.Index(cl.Primaries, from)+1)%len(cl.Primaries)]
		require.NoError(t, cl.MoveSlot(ctx, lua.Slot(name), from, to))
		require.Equal(t, to, owner(name), "the slot's new owner")
		deadline := time.Now().Add(3 * time.Second) // three leases: renewals reached the new owner
		for time.Now().Before(deadline) {
			require.NoError(t, leases[0].Err(), "round %d: the hold was lost when its slot moved", round)
			<-time.After(100 * time.Millisecond) // the hold must live through the whole window, by design
		}
		for i, l := range leases {
			released := time.Now()
			require.NoError(t, l.Unlock(ctx))
			select {
			case err := <-got:
				require.NoError(t, err)
				t.Logf("round %d, lock %d: slot %d moved %s → %s; a waiter took the lock %v after the unlock", round, i,
					lua.Slot(name), from.Addr, to.Addr, time.Since(released).Round(time.Millisecond))
				require.Less(t, time.Since(released), 2*time.Second, "the waiter was not woken by the release")
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d, lock %d: the waiter was not woken within 10 s of the unlock", round, i)
			}
		}
	}
}

// requireClusterWaiting waits until some node has a subscriber of a channel
// naming name (sharded or classic), or fails after 10 s.
func requireClusterWaiting(t *testing.T, cl *redistest.Cluster, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range cl.Primaries {
			c := n.Client(t)
			chans := append(c.PubSubShardChannels(context.Background(), "*"+name+"*").Val(),
				c.PubSubChannels(context.Background(), "*"+name+"*").Val()...)
			_ = c.Close()
			if len(chans) > 0 {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no waiter subscribed for %s", name)
}

// clusterHoldEnds: with sharded pub/sub (classic on Redis 6.2), a waiter is
// served after every way a hold ends: an unlock in the same client (hand-off)
// and in another, a force-unlock by a third client (its SPUBLISH), and a fixed
// lease that runs out without an unlock (the waiter's own bound, 1 s, not the
// 30 s watchdog).
func clusterHoldEnds(t *testing.T, cl *redistest.Cluster) {
	ctx := testCtx(t, 60*time.Second)
	ps := clusterPubSubOf(t, cl)
	ca, cb, cc := newClient(t, cl.Client(t)), newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	for _, tc := range []struct {
		name   string
		waiter *rlock.Client
		lease  time.Duration
		end    func(l *rlock.Lease, name string) error
	}{
		{"unlock, same client", ca, 0, func(l *rlock.Lease, _ string) error { return l.Unlock(ctx) }},
		{"unlock, other client", cb, 0, func(l *rlock.Lease, _ string) error { return l.Unlock(ctx) }},
		{"force-unlock by a third client", cb, 0, func(_ *rlock.Lease, name string) error {
			_, err := cc.NewMutex(name).ForceUnlock(ctx)
			return err
		}},
		{"fixed lease runs out", cb, time.Second, func(*rlock.Lease, string) error { return nil }},
	} {
		name := redistest.Name(t)
		l, err := ca.NewMutex(name).Lock(ctx, rlock.WithLeaseTime(tc.lease))
		require.NoError(t, err, tc.name)
		taken := time.Now()
		got := make(chan time.Time, 1)
		go func() {
			lw, err := tc.waiter.NewMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			_ = lw.Unlock(ctx)
		}()
		if tc.waiter != ca {
			require.Eventually(t, func() bool {
				n, _ := ps.listeners(ctx, lua.ChannelName(name))
				return n > 0
			}, 10*time.Second, 5*time.Millisecond, "%s: the waiter listens by %s", tc.name, ps)
		}
		ended := time.Now()
		require.NoError(t, tc.end(l, name), tc.name)
		at, ok := <-got
		require.True(t, ok, tc.name)
		if tc.lease > 0 {
			ended = taken.Add(tc.lease)
		}
		t.Logf("%s: the waiter acquired %v after the hold ended", tc.name, at.Sub(ended).Round(time.Millisecond))
		require.Less(t, at.Sub(ended), 2*time.Second, tc.name)
	}
}

// clusterMultiLock: a MultiLock over locks in the three shards is all or
// nothing, a second one waits for it (woken by its release) and two MultiLocks
// listing the same locks in opposite orders never deadlock.
func clusterMultiLock(t *testing.T, cl *redistest.Cluster) {
	ctx := testCtx(t, 60*time.Second)
	ca, cb := newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	var names []string
	for _, ns := range clusterNames(t, cl, cl.Client(t), redistest.Name(t)) {
		names = append(names, ns[0])
	}
	require.Len(t, names, 3)
	mutexes := func(c *rlock.Client, order []int) []*rlock.Mutex {
		var ms []*rlock.Mutex
		for _, i := range order {
			ms = append(ms, c.NewMutex(names[i]))
		}
		return ms
	}

	// All or nothing: B holds the last part, A's TryLock takes none.
	lb, err := cb.NewMutex(names[2]).Lock(ctx)
	require.NoError(t, err)
	_, err = rlock.NewMultiLock(mutexes(ca, []int{0, 1, 2})...).TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	for _, n := range names[:2] {
		locked, err := ca.NewMutex(n).IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked, "%s was given back", n)
	}

	// A waits for B's part, woken by its release.
	got := make(chan *rlock.MultiLease, 1)
	go func() {
		l, err := rlock.NewMultiLock(mutexes(ca, []int{2, 0, 1})...).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	require.Eventually(t, func() bool {
		n, _ := clusterPubSubOf(t, cl).listeners(ctx, lua.ChannelName(names[2]))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	released := time.Now()
	require.NoError(t, lb.Unlock(ctx))
	la := <-got
	require.NotNil(t, la)
	t.Logf("MultiLock acquired %v after the release", time.Since(released).Round(time.Millisecond))
	require.Len(t, la.Leases(), 3)
	_, err = cb.NewMutex(names[0]).TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	require.NoError(t, la.Err())
	require.NoError(t, la.Unlock(ctx))
	<-la.Done()
	require.ErrorIs(t, la.Err(), rlock.ErrUnlocked)

	// Opposite orders, two clients, 2 × 20 rounds: no deadlock.
	var wg sync.WaitGroup
	for k, c := range []*rlock.Client{ca, cb} {
		order := []int{0, 1, 2}
		if k == 1 {
			order = []int{2, 1, 0}
		}
		ml := rlock.NewMultiLock(mutexes(c, order)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				l, err := ml.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// clusterFeedReconnects: waiters of one client on locks of four slots of one shard
// share one subscriber connection; when the server kills it, the feed subscribes
// every channel again (one SSUBSCRIBE each: one command naming channels of two
// slots would fail with CROSSSLOT) and every waiter is still woken by its release.
// On Redis 6.2 (classic pub/sub) the client's one subscriber connection, on
// whichever node, is killed and comes back the same way.
func clusterFeedReconnects(t *testing.T, cl *redistest.Cluster) {
	ctx := testCtx(t, 60*time.Second)
	rdb := cl.Client(t)
	ps := clusterPubSubOf(t, cl)
	ca, cb := newClient(t, cl.Client(t)), newClient(t, rdb)
	prefix := redistest.Name(t)
	var names []string
	var owner *redis.Client
	for i := 0; len(names) < 4; i++ {
		name := fmt.Sprintf("%s:%d", prefix, i)
		m, err := rdb.MasterForKey(ctx, lua.ChannelName(name))
		require.NoError(t, err)
		if owner == nil {
			owner = m
		}
		if m.Options().Addr == owner.Options().Addr {
			names = append(names, name)
		}
	}
	feedNodes := []*redis.Client{owner} // a shard's feed is on its primary
	if !ps.sharded {
		feedNodes = nil // the classic subscriber connection is on any node
		for _, n := range cl.Nodes() {
			feedNodes = append(feedNodes, n.Client(t))
		}
	}
	var leases []*rlock.Lease
	got := make(chan time.Time, len(names))
	for _, name := range names {
		l, err := ca.NewMutex(name).Lock(ctx)
		require.NoError(t, err)
		leases = append(leases, l)
		go func() {
			lb, err := cb.NewMutex(name).Lock(ctx)
			if err == nil {
				got <- time.Now()
				_ = lb.Unlock(ctx)
			}
		}()
	}
	subscribed := func() bool {
		for _, name := range names {
			if n, other := ps.listeners(ctx, lua.ChannelName(name)); n != 1 || other != 0 {
				return false
			}
		}
		return true
	}
	conns := func() []string {
		var ids []string
		for _, n := range feedNodes {
			for _, id := range clusterPubSubConns(t, ctx, n) {
				ids = append(ids, n.Options().Addr+"/"+id)
			}
		}
		return ids
	}
	require.Eventually(t, subscribed, 10*time.Second, 5*time.Millisecond, "every waiter listens by %s", ps)
	before := conns()
	require.Len(t, before, 1, "one subscriber connection for the shard")
	for _, n := range feedNodes {
		require.NoError(t, n.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	}
	require.Eventually(t, func() bool {
		after := conns()
		return len(after) == 1 && after[0] != before[0] && subscribed()
	}, 10*time.Second, 5*time.Millisecond, "subscribed again on one new connection")
	for _, l := range leases {
		released := time.Now()
		require.NoError(t, l.Unlock(ctx))
		select {
		case at := <-got:
			require.Less(t, at.Sub(released), 2*time.Second, "woken by the release, not by the 30 s lease")
		case <-ctx.Done():
			t.Fatal("waiter not woken")
		}
	}
}

// clusterPubSubConns returns the ids of the node's pub/sub connections.
func clusterPubSubConns(t *testing.T, ctx context.Context, node *redis.Client) []string {
	t.Helper()
	return subscriberIDs(t, node)
}

// clusterNames returns, for every primary's address, a name without a hash tag
// and a name with one, both in a slot that primary owns.
func clusterNames(t testing.TB, cl *redistest.Cluster, rdb *redis.ClusterClient, prefix string) map[string][]string {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	byShard := map[string]map[string]string{}
	full := func() bool {
		if len(byShard) < len(cl.Primaries) {
			return false
		}
		for _, kinds := range byShard {
			if len(kinds) < 2 {
				return false
			}
		}
		return true
	}
	for i := 0; !full(); i++ {
		for kind, name := range map[string]string{"plain": fmt.Sprintf("%s:%d", prefix, i), "tag": fmt.Sprintf("{%s:%d}:x", prefix, i)} {
			m, err := rdb.MasterForKey(ctx, name)
			require.NoError(t, err)
			addr := m.Options().Addr
			if byShard[addr] == nil {
				byShard[addr] = map[string]string{}
			}
			if _, ok := byShard[addr][kind]; !ok {
				byShard[addr][kind] = name
			}
		}
	}
	out := map[string][]string{}
	for addr, kinds := range byShard {
		out[addr] = []string{kinds["plain"], kinds["tag"]}
	}
	return out
}

// clusterSubscribers returns how many subscriptions to channel the nodes have:
// classic (PUBSUB NUMSUB, summed over the nodes) and sharded (PUBSUB SHARDNUMSUB).
func clusterSubscribers(ctx context.Context, cl *redistest.Cluster, channel string) (classic, sharded int64) {
	for _, n := range cl.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		if m, err := c.PubSubNumSub(ctx, channel).Result(); err == nil {
			classic += m[channel]
		}
		if m, err := c.PubSubShardNumSub(ctx, channel).Result(); err == nil {
			sharded += m[channel]
		}
		_ = c.Close()
	}
	return classic, sharded
}

// clusterNamesInEveryShard: in every shard, with and without a hash tag, a lock
// is taken, re-entered (partial unlock), released, and excludes another owner;
// names whose keys cannot share a slot are refused before any round trip.
func clusterNamesInEveryShard(t *testing.T, cl *redistest.Cluster) {
	rdb := cl.Client(t)
	c := newClient(t, rdb)
	ctx := testCtx(t, 30*time.Second)
	byShard := clusterNames(t, cl, rdb, redistest.Name(t))
	for shard, names := range byShard {
		for _, name := range names {
			m := c.NewMutex(name)
			owner := rlock.WithOwner(ctx)
			l1, err := m.Lock(owner)
			require.NoError(t, err, "%s on %s", name, shard)
			l2, err := m.TryLock(owner)
			require.NoError(t, err, "re-entry of %s", name)
			_, err = m.TryLock(rlock.WithOwner(ctx))
			require.ErrorIs(t, err, rlock.ErrNotAcquired, name)
			require.NoError(t, l2.Unlock(owner), "partial unlock of %s", name)
			n, err := m.HoldCount(owner)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.NoError(t, l1.Unlock(owner), "final unlock of %s", name)
			locked, err := m.IsLocked(ctx)
			require.NoError(t, err)
			require.False(t, locked, name)
			ok, err := m.ForceUnlock(ctx)
			require.NoError(t, err)
			require.False(t, ok)
		}
		t.Logf("shard %s: %v", shard, names)
	}
	for _, name := range []string{"acc:{}:empty", "a}b", "a{b"} {
		_, err := c.NewMutex(name).Lock(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, name)
	}
}

// clusterCounter: 2 clients × 4 goroutines increment a counter under the lock
// (GET then SET, in the lock's slot): no increment is lost.
func clusterCounter(t *testing.T, cl *redistest.Cluster) {
	const clients, goroutines, rounds = 2, 4, 25
	base := redistest.Name(t)
	name, counter := "{"+base+"}:lock", "{"+base+"}:counter"
	ctx := testCtx(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, clients*goroutines)
	for range clients {
		rdb := cl.Client(t)
		c := newClient(t, rdb)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- clusterIncrement(ctx, rdb, c.NewMutex(name), counter, rounds)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := cl.Client(t).Get(ctx, counter).Int()
	require.NoError(t, err)
	require.Equal(t, clients*goroutines*rounds, got)
}

func clusterIncrement(ctx context.Context, rdb *redis.ClusterClient, m *rlock.Mutex, counter string, rounds int) error {
	for range rounds {
		l, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		n, err := rdb.Get(ctx, counter).Int()
		if err != nil && err != redis.Nil {
			return err
		}
		if err := rdb.Set(ctx, counter, strconv.Itoa(n+1), 0).Err(); err != nil {
			return err
		}
		if err := l.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// clusterWaiterWoken: in every shard, a waiter in another client is woken by the
// release (not by the holder's lease, 30 s), and the median of the release →
// acquisition times stays low.
func clusterWaiterWoken(t *testing.T, cl *redistest.Cluster) {
	ca, cb := newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	ctx := testCtx(t, 60*time.Second)
	var delays []time.Duration
	for shard, names := range clusterNames(t, cl, cl.Client(t), redistest.Name(t)) {
		for _, name := range names {
			for range 3 {
				delays = append(delays, clusterHandOver(t, ctx, cl, ca.NewMutex(name), cb.NewMutex(name)))
			}
		}
		t.Logf("shard %s: woken", shard)
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("release → waiter acquired: median %v, max %v over %d", delays[len(delays)/2], delays[len(delays)-1], len(delays))
	require.Less(t, delays[len(delays)/2], 2*time.Second, "woken by the release, not by the lease")
}

// clusterHandOver takes ma, starts a waiter on mb, unlocks ma once the waiter has
// attempted, and returns the time from the unlock to the waiter's acquisition.
func clusterHandOver(t *testing.T, ctx context.Context, cl *redistest.Cluster, ma, mb *rlock.Mutex) time.Duration {
	t.Helper()
	la, err := ma.Lock(ctx)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		lb, err := mb.Lock(ctx)
		if err == nil {
			got <- time.Now()
			_ = lb.Unlock(ctx)
		}
		close(got)
	}()
	// The waiter's first attempt reads the lease (30 s): wait until it has
	// subscribed, so that only the release can wake it in time.
	channel := lua.ChannelName(ma.Name())
	ps := clusterPubSubOf(t, cl)
	require.Eventually(t, func() bool {
		n, _ := ps.listeners(ctx, channel)
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the waiter listens by %s", ps)
	_, other := ps.listeners(ctx, channel)
	require.Zero(t, other, "releases travel by %s only", ps)
	if ps.sharded {
		owner, err := cl.Client(t).MasterForKey(ctx, channel)
		require.NoError(t, err)
		chans, err := owner.PubSubShardChannels(ctx, channel).Result()
		require.NoError(t, err)
		require.Equal(t, []string{channel}, chans, "the subscription is on the shard that owns the lock")
	}
	released := time.Now()
	require.NoError(t, la.Unlock(ctx))
	at, ok := <-got
	require.True(t, ok, "waiter failed")
	return at.Sub(released)
}

// TestClusterFailover: holders and waiters of two clients loop on a lock while
// the lock's shard fails over (CLUSTER FAILOVER on its replica): no two holders
// overlap, no Lock waits past its 10 s deadline, and the lock works on the new
// primary, whose shard channel the waiters follow.
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := testCtx(t, 90*time.Second)
	name := redistest.Name(t)
	admin := cl.Client(t)
	owner, err := admin.MasterForKey(ctx, name)
	require.NoError(t, err)
	var replica *redistest.Server
	for i, p := range cl.Primaries {
		if p.Addr == owner.Options().Addr {
			replica = cl.Replicas[i][0]
		}
	}
	require.NotNil(t, replica)

	var inside, violations, acquired, stuck, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		c := newClient(t, cl.Client(t))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.NewMutex(name)
				for {
					select {
					case <-stop:
						return
					default:
					}
					clusterFailoverTurn(ctx, m, &inside, &violations, &acquired, &stuck, &failed)
				}
			}()
		}
	}
	require.Eventually(t, func() bool { return acquired.Load() > 20 }, 20*time.Second, 10*time.Millisecond)
	before := acquired.Load()
	rc := replica.Client(t)
	clusterTakeOver(t, ctx, rc)
	promoted := acquired.Load()
	require.Eventually(t, func() bool { return acquired.Load() > promoted+50 }, 30*time.Second, 10*time.Millisecond,
		"acquisitions go on after the failover")
	close(stop)
	wg.Wait()
	t.Logf("acquisitions: %d before the failover, %d in all; violations %d, stuck %d, failed calls %d",
		before, acquired.Load(), violations.Load(), stuck.Load(), failed.Load())
	require.Zero(t, violations.Load(), "two holders at once")
	require.Zero(t, stuck.Load(), "a Lock waited past its 10 s deadline")
	_, sharded := clusterSubscribers(ctx, cl, lua.ChannelName(name))
	t.Logf("shard subscriptions left: %d", sharded)
}

// clusterFailoverTurn takes m once (10 s deadline), checks that nobody else is
// inside, and unlocks, retrying the unlock while the cluster fails over.
func clusterFailoverTurn(ctx context.Context, m *rlock.Mutex, inside, violations, acquired, stuck, failed *atomic.Int64) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := m.Lock(lctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		stuck.Add(1)
		return
	case err != nil:
		failed.Add(1)
		time.Sleep(20 * time.Millisecond) // Redis is failing over: do not spin
		return
	}
	if !inside.CompareAndSwap(0, 1) {
		violations.Add(1)
	}
	acquired.Add(1)
	time.Sleep(time.Millisecond) // the critical section's work
	inside.Store(0)
	for range 100 {
		err := l.Unlock(ctx)
		if err == nil || errors.Is(err, rlock.ErrNotHeld) {
			return
		}
		failed.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterTakeOver makes the replica rc its master's master with CLUSTER
// FAILOVER, asking again when a manual failover times out: the server aborts
// one that has not completed within 5 s (CLUSTER_MF_TIMEOUT), which a loaded
// 2-core machine can make it miss (Redis 6.2 in the server matrix, with two
// servers' suites at once). 30 s in all.
func clusterTakeOver(t *testing.T, ctx context.Context, rc *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		require.NoError(t, rc.Do(ctx, "CLUSTER", "FAILOVER").Err())
		if within(7*time.Second, func() bool {
			role, err := rc.Do(ctx, "ROLE").Slice()
			return err == nil && role[0] == "master"
		}) {
			return
		}
		t.Logf("CLUSTER FAILOVER did not complete within 7 s; asking again")
	}
	t.Fatal("the replica did not take over within 30 s")
}

// within reports whether cond holds within d, looking every 10 ms.
func within(d time.Duration, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// clusterPubSub is how releases travel on a cluster: by sharded pub/sub
// (SPUBLISH, SSUBSCRIBE) on Redis 7.0 and later and on every Valkey, by classic
// pub/sub on Redis 6.2, which has no sharded pub/sub. holdfast, as Redisson 3.23
// and later, chooses by the server's version; the cluster tests check whichever
// applies, and on 6.2 that the classic fallback wakes waiters as promptly.
type clusterPubSub struct {
	cl      *redistest.Cluster
	sharded bool
}

// clusterPubSubOf returns the pub/sub of the cluster cl.
func clusterPubSubOf(t testing.TB, cl *redistest.Cluster) clusterPubSub {
	return clusterPubSub{cl: cl, sharded: cl.Primaries[0].Version(t).AtLeast(7, 0)}
}

// String names the pub/sub, for messages.
func (p clusterPubSub) String() string {
	if p.sharded {
		return "sharded pub/sub"
	}
	return "classic pub/sub (no sharded pub/sub before Redis 7.0)"
}

// listeners returns how many subscriptions to channel the nodes have of the
// kind releases travel by, and how many of the other kind (which should be
// none). Safe in a require.Eventually condition.
func (p clusterPubSub) listeners(ctx context.Context, channel string) (n, other int64) {
	classic, sharded := clusterSubscribers(ctx, p.cl, channel)
	if p.sharded {
		return sharded, classic
	}
	return classic, sharded
}

// publishCommand is the command a Redisson client publishes releases with.
func (p clusterPubSub) publishCommand() string {
	if p.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// subscribe subscribes to channel as a Redisson client does.
func (p clusterPubSub) subscribe(ctx context.Context, rdb *redis.ClusterClient, channel string) *redis.PubSub {
	if p.sharded {
		return rdb.SSubscribe(ctx, channel)
	}
	return rdb.Subscribe(ctx, channel)
}

// publish publishes payload on channel as a Redisson client does.
func (p clusterPubSub) publish(ctx context.Context, rdb *redis.ClusterClient, channel, payload string) error {
	if p.sharded {
		return rdb.SPublish(ctx, channel, payload).Err()
	}
	return rdb.Publish(ctx, channel, payload).Err()
}

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
