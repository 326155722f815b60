package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Interop of the synchronizers with a simulated Java peer
// (javapeer_sync_test.go), both directions for each object: a Java release
// wakes a Go waiter and the reverse, a Go permit id is released by the Java
// script and the reverse, and every payload holdfast publishes is the decimal
// integer Java would publish for the same operation (§2.14), checked by a
// subscriber that decodes as Java's LongCodec does.
//
// The Go clients re-check a blocked wait only once a minute
// (WithRecheckInterval), so a Go waiter that returns within wakeBound was woken
// by the message.

// wakeBound is how soon a waiter must return after the message that wakes it.
const wakeBound = 5 * time.Second

// syncEnv is where a synchronizer interop scenario runs: one Redis or a Cluster.
type syncEnv struct {
	rdb  redis.UniversalClient // the Java peer's and the test's connection
	c    *rlock.Client         // on a go-redis client of its own, watched by calls
	name string
	java javaSync
	// calls counts the Go client's commands on the object (see goCalls).
	calls *goCalls
	// subscribers counts the connections subscribed to a channel (shard
	// channels on a cluster).
	subscribers func(ctx context.Context, channel string) int64
	// subscribe subscribes like a Java client (SSUBSCRIBE on a cluster).
	subscribe func(ctx context.Context, channels ...string) *redis.PubSub
	// publish publishes like a Java client (SPUBLISH on a cluster).
	publish func(ctx context.Context, channel, payload string) error
}

// syncClientOptions are the options of every Go client of these tests: only a
// message can wake a waiter within wakeBound.
func syncClientOptions(opts []rlock.ClientOption) []rlock.ClientOption {
	return append([]rlock.ClientOption{rlock.WithRecheckInterval(time.Minute), watchWaits()}, opts...)
}

func standaloneSync(t *testing.T, opts ...rlock.ClientOption) syncEnv {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	return newSyncEnv(t, rdb, srv.Client(t), false,
		func(ctx context.Context, ch string) int64 { return rdb.PubSubNumSub(ctx, ch).Val()[ch] }, opts)
}

func clusterSync(t *testing.T, cl *redistest.Cluster, opts ...rlock.ClientOption) syncEnv {
	ps := clusterPubSubOf(t, cl)
	return newSyncEnv(t, cl.Client(t), cl.Client(t), ps.sharded,
		func(ctx context.Context, ch string) int64 { n, _ := ps.listeners(ctx, ch); return n }, opts)
}

// newSyncEnv is the env of a scenario on rdb, the Java peer's and the test's
// connection, and goRdb, the Go client's; sharded is for a cluster of Redis 7.0
// or later (or Valkey), where both peers publish and subscribe by sharded
// pub/sub; on a Redis 6.2 cluster they use classic pub/sub.
func newSyncEnv(t *testing.T, rdb, goRdb redis.UniversalClient, sharded bool, subscribers func(context.Context, string) int64, opts []rlock.ClientOption) syncEnv {
	name := redistest.Name(t)
	calls := &goCalls{name: name}
	goRdb.AddHook(calls)
	env := syncEnv{
		rdb: rdb, c: newClient(t, goRdb, syncClientOptions(opts)...), name: name, calls: calls,
		java:        javaSync{rdb: rdb, publish: "PUBLISH"},
		subscribers: subscribers,
		subscribe:   rdb.Subscribe,
		publish: func(ctx context.Context, ch, payload string) error {
			return rdb.Publish(ctx, ch, payload).Err()
		},
	}
	if sharded {
		env.java.publish = "SPUBLISH"
		env.subscribe = rdb.SSubscribe
		env.publish = func(ctx context.Context, ch, payload string) error {
			return rdb.SPublish(ctx, ch, payload).Err()
		}
	}
	return env
}

// javaSubscribe subscribes a Java subscriber to channel, and waits for the
// subscription's confirmation.
func javaSubscribe(t *testing.T, env syncEnv, channel string) *javaSubscriber {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	marker := "javapeer_marker:{" + env.name + "}" // the slot of the object's channels
	ps := env.subscribe(ctx, channel, marker)
	t.Cleanup(func() { _ = ps.Close() })
	for range 2 {
		v, err := ps.Receive(ctx)
		require.NoError(t, err)
		require.IsType(t, &redis.Subscription{}, v)
	}
	return &javaSubscriber{t: t, msgs: ps.Channel(redis.WithChannelSize(1000)),
		channel: channel, marker: marker, pub: env.publish}
}

// goCalls counts the commands a Go client sends on one object: the scripts
// whose first key is the object's key, and GETs of it. It tells a test when
// its Go waiters are asleep: a holdfast waiter makes an attempt, subscribes,
// makes a second attempt once subscribed, and then sleeps until a message or
// its recheck interval (a minute here); it makes no further attempt unless
// woken. So once w waiters started after the count was n, a count of n + 2w
// means all of them are asleep, and any later attempt was caused by a message.
type goCalls struct {
	name string
	mu   sync.Mutex
	n    int
}

func (g *goCalls) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (g *goCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *goCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *goCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (err == nil || errors.Is(err, redis.Nil)) && g.onObject(cmd.Args()) {
			g.mu.Lock()
			g.n++
			g.mu.Unlock()
		}
		return err
	}
}

func (g *goCalls) onObject(args []any) bool {
	if len(args) < 2 {
		return false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "get":
		return fmt.Sprint(args[1]) == g.name
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
		return len(args) > 3 && fmt.Sprint(args[2]) != "0" && fmt.Sprint(args[3]) == g.name
	}
	return false
}

// waitAsleep waits until the Go client made want more calls on the object
// than from.
func waitAsleep(t *testing.T, env syncEnv, from, want int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return env.calls.count()-from >= want },
		wakeBound, time.Millisecond, "%s: %d calls, want %d", what, env.calls.count()-from, want)
}

// goAsleep starts each f on a goroutine (syncGoErr), one after the other,
// and returns once each is parked in a wait of rlock, holdfast is subscribed
// to channel, and the first made its two attempts (see goCalls): from then
// on, only a message wakes them. (A semaphore's later waiters queue behind
// the first without a call of their own: the head attempts for them.)
func goAsleep(t *testing.T, ctx context.Context, env syncEnv, channel, what string, fs ...func() error) []<-chan asyncResult[struct{}] {
	t.Helper()
	from := env.calls.count()
	gots := goParked(t, env.name, fs...)
	awaitListeners(t, env.subscribers, channel, 2)
	waitAsleep(t, env, from, 2, what)
	return gots
}

// wokenStillWaiting runs java, a Java call that publishes too few permits for
// the Go waiter got, and checks that its message woke the waiter to one more
// attempt, after which the waiter waits on.
func wokenStillWaiting(t *testing.T, env syncEnv, got <-chan asyncResult[struct{}], what string, java func()) {
	t.Helper()
	from := env.calls.count()
	java()
	waitAsleep(t, env, from, 1, what+": woken by the message")
	stillWaiting(t, got, what)
}

// scenario is the start of an interop scenario: a context of d, and a Java
// subscriber of channel.
func (env syncEnv) scenario(t *testing.T, d time.Duration, channel string) (context.Context, *javaSubscriber) {
	t.Helper()
	return testCtx(t, d), javaSubscribe(t, env, channel)
}

// stillWaiting checks that nothing comes on ch for a short while.
func stillWaiting(t *testing.T, ch <-chan asyncResult[struct{}], what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s returned early: %v", what, g.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// zscore returns the score of a permit id in the timeout zset.
func zscore(t *testing.T, env syncEnv, id []byte) (int64, bool) {
	t.Helper()
	s, err := env.rdb.ZScore(context.Background(), javaTimeoutKey(env.name), string(id)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(t, err)
	require.Equal(t, math.Trunc(s), s, "scores are integer epoch ms")
	return int64(s), true
}

// waitPast waits until the local clock (the clock every peer here reads) is
// past the epoch ms ms.
func waitPast(t *testing.T, ms int64) {
	t.Helper()
	require.Eventually(t, func() bool { return javaNow() > ms }, 10*time.Second, time.Millisecond)
}

// requireDecimal checks that the key holds a counter Java's LongCodec reads.
func requireDecimal(t *testing.T, env syncEnv, want int64) {
	t.Helper()
	v, err := env.rdb.Get(context.Background(), env.name).Result()
	require.NoError(t, err)
	require.Equal(t, want, javaDecode(t, env.name, v))
}

// idHex is the id as Redisson shows it to the caller: 32 lowercase hex characters.
func idHex(id []byte) string { return hex.EncodeToString(id) }

// ---- Semaphore (RSemaphore) ----

func TestInteropSemaphoreJavaWakesGo(t *testing.T) { interopSemaphoreJavaWakesGo(t, standaloneSync(t)) }

// interopSemaphoreJavaWakesGo: Java's trySetPermits, release, releaseIfExists
// and addPermits each wake blocked Go acquirers, and a published value v wakes
// up to v of them.
func interopSemaphoreJavaWakesGo(t *testing.T, env syncEnv) {
	name, java, ch := env.name, env.java, javaSemaphoreChannel(env.name)
	ctx, sub := env.scenario(t, 60*time.Second, ch)
	s := env.c.NewSemaphore(name)
	acquire := func(n int64) func() error { return func() error { return s.Acquire(ctx, n) } }

	// A Go Acquire on a semaphore nobody initialised waits (Redisson's #4401:
	// Java would wait forever); Java's trySetPermits wakes it.
	got := goAsleep(t, ctx, env, ch, "Go Acquire on an absent semaphore", acquire(1))[0]
	answer(java.semTrySetPermits(ctx, name, 1, 0)).is(t, true)
	require.NoError(t, awaitAsync(t, got, wakeBound, "Go Acquire after Java trySetPermits").err)
	requireDecimal(t, env, 0)
	require.Equal(t, []int64{1}, sub.until(), "only Java's trySetPermits published: a Go acquire publishes nothing")

	// A Java release of 2 wakes two Go waiters of one client.
	require.ErrorIs(t, s.TryAcquire(ctx, 1), rlock.ErrNotAcquired)
	two := goAsleep(t, ctx, env, ch, "two Go Acquires", acquire(1), acquire(1))
	require.NoError(t, java.semRelease(ctx, name, 2))
	require.NoError(t, awaitAsync(t, two[0], wakeBound, "one of two Go Acquires woken by Java release(2)").err)
	require.NoError(t, awaitAsync(t, two[1], wakeBound, "the other of two Go Acquires woken by Java release(2)").err)
	requireDecimal(t, env, 0)

	// A Go waiter for 2 is not satisfied by Java's releaseIfExists(1) but is
	// by the addPermits(1) that follows.
	g := goAsleep(t, ctx, env, ch, "Go Acquire(2)", acquire(2))[0]
	wokenStillWaiting(t, env, g, "Go Acquire(2) with 1 permit", func() {
		answer(java.semReleaseIfExists(ctx, name, 1)).is(t, true)
	})
	require.NoError(t, java.semAddPermits(ctx, name, 1))
	require.NoError(t, awaitAsync(t, g, wakeBound, "Go Acquire(2) after Java addPermits").err)

	answer(s.AvailablePermits(ctx)).is(t, 0)
	answer(java.semAvailable(ctx, name)).is(t, 0)
	require.Equal(t, []int64{2, 1, 2}, sub.until(), "Java's release, releaseIfExists, addPermits; nothing from Go")
}

func TestInteropSemaphoreGoWakesJava(t *testing.T) { interopSemaphoreGoWakesJava(t, standaloneSync(t)) }

// interopSemaphoreGoWakesJava: every Go operation publishes exactly what Java
// publishes for it (§2.11, §2.14), and a Go release lets a Java waiter acquire.
func interopSemaphoreGoWakesJava(t *testing.T, env syncEnv) {
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 60*time.Second, javaSemaphoreChannel(name))
	s := env.c.NewSemaphore(name)

	answer(s.TrySetPermits(ctx, 1, 0)).is(t, true)
	require.Equal(t, int64(1), sub.next(wakeBound), "trySetPermits publishes n")
	answer(java.semTryAcquire(ctx, name, 1)).is(t, true, "Java acquires the permit Go set")
	answer(java.semTryAcquire(ctx, name, 1)).is(t, false, "the Java peer now waits for a message")

	// The Java waiter hears the Go release and acquires.
	require.NoError(t, s.Release(ctx, 1))
	require.Equal(t, int64(1), sub.next(wakeBound), "release publishes the new available value")
	answer(java.semTryAcquire(ctx, name, 1)).is(t, true, "Java acquires after the Go release")
	require.ErrorIs(t, s.TryAcquire(ctx, 1), rlock.ErrNotAcquired)
	require.Empty(t, sub.until())

	// Each Go operation, with the value Java's script publishes for it.
	require.NoError(t, s.Release(ctx, 3))         // 0+3 = 3
	answer(s.ReleaseIfExists(ctx, 2)).is(t, true) // 3+2 = 5
	require.NoError(t, s.AddPermits(ctx, -6))     // published although ≤ 0: -1
	require.NoError(t, s.AddPermits(ctx, 1))      // 0
	require.ErrorIs(t, s.TryAcquire(ctx, 1), rlock.ErrNotAcquired)
	require.NoError(t, s.AddPermits(ctx, -2))                                     // -2
	answer(s.DrainPermits(ctx)).is(t, -2, "drain of a negative count returns it") // no message
	requireDecimal(t, env, 0)
	answer(s.TrySetPermits(ctx, 9, 0)).is(t, false)          // exists: nothing
	answer(s.Delete(ctx)).is(t, true)                        // Java's delete publishes nothing for a semaphore
	answer(s.ReleaseIfExists(ctx, 1)).is(t, false)           // absent: nothing
	answer(s.TrySetPermits(ctx, 2, time.Minute)).is(t, true) // 2, with PX
	pttl := answer(env.rdb.PTTL(ctx, name).Result()).value(t)
	require.Greater(t, pttl, 50*time.Second)
	require.LessOrEqual(t, pttl, time.Minute)
	require.Equal(t, []int64{3, 5, -1, 0, -2, 2}, sub.until())

	answer(java.semTryAcquire(ctx, name, 2)).is(t, true, "Java acquires the permits of Go's trySetPermits")
	require.Empty(t, sub.until(), "acquires publish nothing")
}

func TestInteropSemaphoreCountsAgree(t *testing.T) {
	env := standaloneSync(t)
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 30*time.Second, javaSemaphoreChannel(name))
	s := env.c.NewSemaphore(name)
	agree := func(want int64) {
		t.Helper()
		answer(s.AvailablePermits(ctx)).is(t, want, "Go's count")
		answer(java.semAvailable(ctx, name)).is(t, want, "Java's count")
	}

	agree(0)
	answer(java.semTrySetPermits(ctx, name, 5, time.Minute)).is(t, true)
	answer(s.TrySetPermits(ctx, 3, 0)).is(t, false, "Java initialised it")
	agree(5)
	require.NoError(t, s.TryAcquire(ctx, 2))
	agree(3)
	answer(java.semDrainPermits(ctx, name)).is(t, 3)
	agree(0)
	require.NoError(t, s.Release(ctx, 4))
	agree(4)
	answer(java.semTryAcquire(ctx, name, 4)).is(t, true)
	agree(0)
	require.NoError(t, java.semAddPermits(ctx, name, -3))
	agree(-3)
	answer(s.DrainPermits(ctx)).is(t, -3)
	agree(0)
	require.NoError(t, java.semRelease(ctx, name, 2))
	require.NoError(t, s.Acquire(ctx, 2))
	agree(0)
	requireDecimal(t, env, 0)
	require.Equal(t, []int64{5, 4, -3, 2}, sub.until())
}

// ---- ExpirableSemaphore (RPermitExpirableSemaphore) ----

const lowerHexID = `^[0-9a-f]{32}$`

// permitCounts checks Go's and Java's available, acquired and total counts.
func permitCounts(t *testing.T, ctx context.Context, env syncEnv, es *rlock.ExpirableSemaphore, available, acquired, total int64) {
	t.Helper()
	answer(es.AvailablePermits(ctx)).is(t, available, "Go available")
	answer(es.AcquiredPermits(ctx)).is(t, acquired, "Go acquired")
	answer(es.TotalPermits(ctx)).is(t, total, "Go total")
	answer(env.java.pesAvailable(ctx, env.name)).is(t, available, "Java availablePermits")
	answer(env.java.pesAcquired(ctx, env.name)).is(t, acquired, "Java acquiredPermits")
	answer(env.java.pesGetPermits(ctx, env.name)).is(t, total, "Java getPermits")
}

// TestInteropPermitGoIDsReleasedByJava: Go's permits are stored as Java
// stores them (16 raw bytes, expiry in epoch ms), Java's single and list
// releases release them, and Go then refuses those ids and learns that its
// handle lost its permits.
func TestInteropPermitGoIDsReleasedByJava(t *testing.T) {
	const watchdog = 6 * time.Second
	env := standaloneSync(t, rlock.WithWatchdogTimeout(watchdog))
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 60*time.Second, javaSemaphoreChannel(name))
	es := env.c.NewExpirableSemaphore(name)

	answer(es.TrySetPermits(ctx, 4)).is(t, true)
	before := javaNow()
	p := answer(es.Acquire(ctx, 2)).value(t)
	ids := p.IDs()
	require.Len(t, ids, 2)
	require.NotEqual(t, ids[0], ids[1])
	members := answer(env.rdb.ZRangeWithScores(ctx, javaTimeoutKey(name), 0, -1).Result()).value(t)
	after := javaNow()
	require.Len(t, members, 2)
	want := map[string]bool{}
	for _, id := range ids {
		require.Regexp(t, lowerHexID, id)
		want[string(javaID(t, id))] = true
	}
	for _, m := range members {
		require.True(t, want[m.Member.(string)], "zset member %x is one of Go's ids as 16 raw bytes", m.Member)
		require.GreaterOrEqual(t, int64(m.Score), before+watchdog.Milliseconds(), "score = now + watchdog timeout")
		require.LessOrEqual(t, int64(m.Score), after+watchdog.Milliseconds())
	}
	requireDecimal(t, env, 2)
	permitCounts(t, ctx, env, es, 2, 2, 4)

	// Java's single tryRelease of a Go id.
	answer(java.pesTryRelease(ctx, name, javaID(t, ids[0]))).is(t, true, "Java releases Go's permit")
	require.ErrorIs(t, es.Release(ctx, ids[0]), rlock.ErrNoSuchPermit)
	require.ErrorIs(t, es.Release(ctx, ids[1], ids[0]), rlock.ErrNoSuchPermit, "all or nothing")
	_, held := zscore(t, env, javaID(t, ids[1]))
	require.True(t, held, "a refused list release released nothing")
	// Java's list tryRelease of the other.
	released := time.Now()
	answer(java.pesTryReleaseList(ctx, name, javaID(t, ids[1]))).is(t, 1)
	expEnds(t, p, released, 2*watchdog, rlock.ErrPermitLost, "the Go handle learning that Java released its permits")
	// A lost handle's Release still sends the release: Redis no longer has
	// the ids, so it changes nothing (Java's tryRelease of an unknown id).
	require.ErrorIs(t, p.Release(ctx), rlock.ErrNoSuchPermit)
	permitCounts(t, ctx, env, es, 4, 0, 4)

	// Java's list release of several Go ids at once.
	q := answer(es.Acquire(ctx, 3)).value(t)
	var qids [][]byte
	for _, id := range q.IDs() {
		qids = append(qids, javaID(t, id))
	}
	answer(java.pesTryReleaseList(ctx, name, qids...)).is(t, 3)
	permitCounts(t, ctx, env, es, 4, 0, 4)

	// Java's list release is all or nothing with a Go id among stale ones.
	rp := answer(es.TryAcquire(ctx, 1)).value(t)
	rid := javaID(t, rp.IDs()[0])
	answer(java.pesTryReleaseList(ctx, name, rid, javaNewID(t))).is(t, 0)
	answer(java.pesTryReleaseList(ctx, name, rid, qids[0])).is(t, 0)
	lease := answer(es.LeaseTime(ctx, rp.IDs()[0])).value(t)
	require.Greater(t, lease, time.Duration(0))
	require.LessOrEqual(t, lease, watchdog)
	jl := answer(java.pesGetLeaseTime(ctx, name, rid)).value(t)
	require.Greater(t, jl, int64(0), "Java reads the Go permit's remaining lease")
	require.LessOrEqual(t, jl, watchdog.Milliseconds())
	require.NoError(t, rp.Release(ctx))
	permitCounts(t, ctx, env, es, 4, 0, 4)

	// Go's trySetPermits 4; Java's single release: new value 3; list
	// releases: the number released; Go's single release: new value 4. No
	// renewal published anything.
	require.Equal(t, []int64{4, 3, 1, 3, 4}, sub.until())
}

func TestInteropPermitJavaIDsReleasedByGo(t *testing.T) {
	interopPermitJavaIDsReleasedByGo(t, standaloneSync(t))
}

// interopPermitJavaIDsReleasedByGo: Go reads, re-leases and releases (alone
// and in a list, in either hex case) the permits Java took with its own ids,
// and Java reads Go's lease and publishes as Go expects.
func interopPermitJavaIDsReleasedByGo(t *testing.T, env syncEnv) {
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 60*time.Second, javaSemaphoreChannel(name))
	es := env.c.NewExpirableSemaphore(name)

	answer(java.pesTrySetPermits(ctx, name, 3)).is(t, true)
	require.Equal(t, []int64{3}, sub.until())
	a, b, c := javaNewID(t), javaNewID(t), javaNewID(t)
	answer(java.pesTryAcquire(ctx, name, 0, a)).is(t, javaAcquired) // no lease
	answer(java.pesTryAcquire(ctx, name, time.Minute, b)).is(t, javaAcquired)

	answer(es.LeaseTime(ctx, idHex(a))).is(t, rlock.NoExpiry, "Java's sentinel score is no lease")
	lease := answer(es.LeaseTime(ctx, strings.ToUpper(idHex(b)))).value(t)
	require.Greater(t, lease, 50*time.Second)
	require.LessOrEqual(t, lease, time.Minute)
	permitCounts(t, ctx, env, es, 1, 2, 3)

	// Go takes the last permit; a Java tryAcquire is told the earliest expiry,
	// which is Go's watchdog lease (30 s, before Java's 60 s).
	p := answer(es.TryAcquire(ctx, 1)).value(t)
	goScore, held := zscore(t, env, javaID(t, p.IDs()[0]))
	require.True(t, held)
	answer(java.pesTryAcquire(ctx, name, 0, c)).is(t, javaWaitUntil(goScore))

	// Go releases Java's permit a by its upper-case hex id: Java's single
	// release, publishing the new available value.
	require.NoError(t, es.Release(ctx, strings.ToUpper(idHex(a))))
	_, held = zscore(t, env, a)
	require.False(t, held)
	require.Equal(t, int64(1), sub.next(wakeBound))
	require.ErrorIs(t, es.Release(ctx, idHex(a)), rlock.ErrNoSuchPermit)
	answer(java.pesTryAcquire(ctx, name, 0, c)).is(t, javaAcquired, "the Java waiter acquires the permit Go released")

	// Go re-leases Java's permit b; Java reads the sentinel and the new lease.
	answer(es.UpdateLease(ctx, idHex(b), rlock.NoExpiry)).is(t, true)
	answer(java.pesGetLeaseTime(ctx, name, b)).is(t, -1, "Go stored the no-lease sentinel as Java's exact text "+javaNoLease)
	answer(es.UpdateLease(ctx, idHex(b), 45*time.Second)).is(t, true)
	jl := answer(java.pesGetLeaseTime(ctx, name, b)).value(t)
	require.Greater(t, jl, int64(40000))
	require.LessOrEqual(t, jl, int64(45000))
	answer(java.pesUpdateLeaseTime(ctx, name, b, time.Minute)).is(t, true)
	require.Greater(t, answer(es.LeaseTime(ctx, idHex(b))).value(t), 50*time.Second)

	// Go's list release of two Java ids is all or nothing...
	require.ErrorIs(t, es.Release(ctx, idHex(b), idHex(javaNewID(t))), rlock.ErrNoSuchPermit)
	permitCounts(t, ctx, env, es, 0, 3, 3)
	// ... and releases both, publishing the number released.
	require.NoError(t, es.Release(ctx, idHex(b), strings.ToUpper(idHex(c))))
	require.ErrorIs(t, es.Release(ctx, idHex(c)), rlock.ErrNoSuchPermit)
	permitCounts(t, ctx, env, es, 2, 1, 3)
	require.NoError(t, p.Release(ctx))
	permitCounts(t, ctx, env, es, 3, 0, 3)
	require.Equal(t, []int64{2, 3}, sub.until(), "list release: the delta; single release: the new value")
}

// TestInteropPermitReclaim: Java reclaims a Go permit whose fixed lease ran
// out, and Go reclaims Java's, where Redisson reclaims (tryAcquire,
// availablePermits), publishing what Java publishes.
func TestInteropPermitReclaim(t *testing.T) {
	env := standaloneSync(t)
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 60*time.Second, javaSemaphoreChannel(name))
	es := env.c.NewExpirableSemaphore(name)

	answer(es.TrySetPermits(ctx, 1)).is(t, true)
	// Long enough for the Java peer to see the permit held first.
	const lease = time.Second
	before := javaNow()
	p := answer(es.TryAcquire(ctx, 1, rlock.WithLeaseTime(lease))).value(t)
	after := javaNow()
	goID := p.IDs()[0]
	score, held := zscore(t, env, javaID(t, goID))
	require.True(t, held)
	require.GreaterOrEqual(t, score, before+lease.Milliseconds(), "score = now + lease")
	require.LessOrEqual(t, score, after+lease.Milliseconds())
	k := javaNewID(t)
	answer(java.pesTryAcquire(ctx, name, 0, k)).is(t, javaWaitUntil(score), "Java waits until Go's lease ends")

	// Java's tryAcquire reclaims the expired Go permit.
	waitPast(t, score)
	reclaimed := time.Now()
	answer(java.pesTryAcquire(ctx, name, 0, k)).is(t, javaAcquired)
	expEnds(t, p, reclaimed, wakeBound, rlock.ErrPermitLost, "the Go handle of a reclaimed permit")
	require.ErrorIs(t, es.Release(ctx, goID), rlock.ErrNoSuchPermit)
	require.ErrorIs(t, errOf(es.LeaseTime(ctx, goID)), rlock.ErrNoSuchPermit)
	require.ErrorIs(t, p.Release(ctx), rlock.ErrNoSuchPermit, "Java reclaimed it: nothing to give back")
	permitCounts(t, ctx, env, es, 0, 1, 1)
	answer(es.LeaseTime(ctx, idHex(k))).is(t, rlock.NoExpiry)

	// Go's availablePermits reclaims Java's expired permit.
	answer(java.pesTryRelease(ctx, name, k)).is(t, true)
	j := javaNewID(t)
	const javaLease = 300 * time.Millisecond
	answer(java.pesTryAcquire(ctx, name, javaLease, j)).is(t, javaAcquired)
	score, held = zscore(t, env, j)
	require.True(t, held)
	waitPast(t, score)
	answer(es.AvailablePermits(ctx)).is(t, 1)
	_, held = zscore(t, env, j)
	require.False(t, held, "Go reclaimed Java's expired permit")
	answer(java.pesGetLeaseTime(ctx, name, j)).is(t, 0, "unknown to Java")

	// Go's tryAcquire reclaims Java's expired permit.
	answer(java.pesTryAcquire(ctx, name, javaLease, j)).is(t, javaAcquired)
	score, _ = zscore(t, env, j)
	waitPast(t, score)
	q := answer(es.TryAcquire(ctx, 1)).value(t)
	_, held = zscore(t, env, j)
	require.False(t, held)
	require.NoError(t, q.Release(ctx))
	permitCounts(t, ctx, env, es, 1, 0, 1)

	// trySetPermits 1 (Go); Java's reclaim 1; Java's release 1; Go's reclaim
	// in availablePermits 1, in tryAcquire 1; Go's release 1.
	require.Equal(t, []int64{1, 1, 1, 1, 1, 1}, sub.until())
}

func TestInteropPermitWake(t *testing.T) { interopPermitWake(t, standaloneSync(t)) }

// interopPermitWake: a Java single release and list release wake blocked Go
// acquirers (whose only other wake-up is a minute away), and a Go release
// wakes the Java waiter.
func interopPermitWake(t *testing.T, env syncEnv) {
	name, java, ch := env.name, env.java, javaSemaphoreChannel(env.name)
	ctx, sub := env.scenario(t, 60*time.Second, ch)
	es := env.c.NewExpirableSemaphore(name)

	answer(java.pesTrySetPermits(ctx, name, 1)).is(t, true)
	j := javaNewID(t)
	answer(java.pesTryAcquire(ctx, name, 0, j)).is(t, javaAcquired)

	// The Java holder has no lease: the Go waiter has no expiry to wait for,
	// only the message.
	var p *rlock.Permits
	got := goAsleep(t, ctx, env, ch, "Go Acquire", func() (err error) { p, err = es.Acquire(ctx, 1); return err })[0]
	answer(java.pesTryRelease(ctx, name, j)).is(t, true)
	require.NoError(t, awaitAsync(t, got, wakeBound, "Go Acquire after Java tryRelease").err)
	require.Equal(t, []int64{1, 1}, sub.until(), "Java's trySetPermits and release; nothing from Go's acquire")

	// The Java waiter is told Go's expiry; Go's release wakes it.
	k := javaNewID(t)
	goScore, _ := zscore(t, env, javaID(t, p.IDs()[0]))
	answer(java.pesTryAcquire(ctx, name, 0, k)).is(t, javaWaitUntil(goScore))
	require.NoError(t, p.Release(ctx))
	require.Equal(t, int64(1), sub.next(wakeBound), "Go's release publishes the new available value")
	answer(java.pesTryAcquire(ctx, name, 0, k)).is(t, javaAcquired)
	answer(java.pesTryAcquire(ctx, name, 0, javaNewID(t))).is(t, "", "nil: no permit and no expiry to wait for")

	// A Go waiter for 2 permits (timed) is not satisfied by Java's
	// addPermits(1), and is by Java's list release that follows.
	var q *rlock.Permits
	got = goAsleep(t, ctx, env, ch, "Go TryAcquire(2)", func() (err error) {
		q, err = es.TryAcquire(ctx, 2, rlock.WithWaitTime(40*time.Second))
		return err
	})[0]
	wokenStillWaiting(t, env, got, "Go TryAcquire(2) with 1 permit", func() {
		require.NoError(t, java.pesAddPermits(ctx, name, 1))
	})
	answer(java.pesTryReleaseList(ctx, name, k)).is(t, 1)
	require.NoError(t, awaitAsync(t, got, wakeBound, "Go TryAcquire(2) after Java's list release").err)
	require.Len(t, q.IDs(), 2)
	require.NoError(t, q.Release(ctx))
	permitCounts(t, ctx, env, es, 2, 0, 2)
	// Java's addPermits 1, list release 1; Go's list release of its 2 ids: 2.
	require.Equal(t, []int64{1, 1, 2}, sub.until())
}

// TestInteropPermitGoPublishes: each Go operation on the permit-expirable
// semaphore publishes what Java's script publishes for it (§2.12, §2.14).
func TestInteropPermitGoPublishes(t *testing.T) {
	env := standaloneSync(t)
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 30*time.Second, javaSemaphoreChannel(name))
	es := env.c.NewExpirableSemaphore(name)

	require.NoError(t, es.SetPermits(ctx, 3))     // absent: SET 3, publish 3
	answer(es.TrySetPermits(ctx, 5)).is(t, false) // exists: nothing
	j := javaNewID(t)
	answer(java.pesTryAcquire(ctx, name, 0, j)).is(t, javaAcquired)
	require.NoError(t, es.SetPermits(ctx, 3))  // total is 3: nothing
	require.NoError(t, es.SetPermits(ctx, 5))  // publish the total, 5
	require.NoError(t, es.AddPermits(ctx, 2))  // publish the delta, 2
	require.NoError(t, es.AddPermits(ctx, -1)) // nothing
	permitCounts(t, ctx, env, es, 5, 1, 6)
	require.NoError(t, es.SetPermits(ctx, 1)) // available 0, publish 1
	permitCounts(t, ctx, env, es, 0, 1, 1)
	require.ErrorIs(t, errOf(es.TryAcquire(ctx, 1)), rlock.ErrNotAcquired)
	answer(es.Delete(ctx)).is(t, true)
	_, held := zscore(t, env, j)
	require.False(t, held, "Delete covers both keys, as Java's")
	answer(es.TrySetPermits(ctx, 2)).is(t, true) // publish 2
	require.Equal(t, []int64{3, 5, 2, 1, 2}, sub.until())

	// Java's counterparts publish the same on Go's semaphore.
	require.NoError(t, java.pesSetPermits(ctx, name, 4))
	require.NoError(t, java.pesAddPermits(ctx, name, 1))
	permitCounts(t, ctx, env, es, 5, 0, 5)
	require.Equal(t, []int64{4, 1}, sub.until())
}

// ---- CountDownLatch (RCountDownLatch) ----

func TestInteropLatchJavaOpensGoAwait(t *testing.T) {
	interopLatchJavaOpensGoAwait(t, standaloneSync(t))
}

func interopLatchJavaOpensGoAwait(t *testing.T, env syncEnv) {
	name, java, ch := env.name, env.java, javaLatchChannel(env.name)
	ctx, sub := env.scenario(t, 30*time.Second, ch)
	l := env.c.NewCountDownLatch(name)

	answer(java.latchTrySetCount(ctx, name, 2)).is(t, true)
	answer(l.TrySetCount(ctx, 5)).is(t, false, "Java set it")
	answer(l.Count(ctx)).is(t, 2)

	got := goAsleep(t, ctx, env, ch, "Go Await", func() error { return l.Await(ctx) })[0]
	require.NoError(t, java.latchCountDown(ctx, name))
	answer(l.Count(ctx)).is(t, 1)
	stillWaiting(t, got, "Go Await at count 1")
	require.NoError(t, java.latchCountDown(ctx, name))
	require.NoError(t, awaitAsync(t, got, wakeBound, "Go Await after Java's last countDown").err)
	answer(l.Count(ctx)).is(t, 0)
	require.NoError(t, l.Await(ctx), "at zero, at once")
	require.Equal(t, []int64{1, 0}, sub.until(), "Java's trySetCount and opening countDown")
}

func TestInteropLatchGoCountDownSeenByJava(t *testing.T) {
	interopLatchGoCountDownSeenByJava(t, standaloneSync(t))
}

func interopLatchGoCountDownSeenByJava(t *testing.T, env syncEnv) {
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 30*time.Second, javaLatchChannel(name))
	l := env.c.NewCountDownLatch(name)

	answer(l.TrySetCount(ctx, 2)).is(t, true)
	require.Equal(t, int64(1), sub.next(wakeBound), "trySetCount publishes 1")
	answer(java.latchTrySetCount(ctx, name, 3)).is(t, false, "Go set it")
	answer(java.latchGetCount(ctx, name)).is(t, 2)
	requireDecimal(t, env, 2)

	require.NoError(t, l.CountDown(ctx))
	answer(java.latchGetCount(ctx, name)).is(t, 1)
	require.Empty(t, sub.until(), "no message above zero")
	require.NoError(t, l.CountDown(ctx))
	require.Equal(t, int64(0), sub.next(wakeBound), "the Java waiters open on 0")
	answer(env.rdb.Exists(ctx, name).Result()).is(t, 0, "deleted at zero")

	// Counting down an absent latch changes nothing and publishes nothing.
	require.NoError(t, l.CountDown(ctx))
	answer(env.rdb.Exists(ctx, name).Result()).is(t, 0)
	require.Empty(t, sub.until())

	// Java can set it again, Go counts down Java's latch.
	answer(java.latchTrySetCount(ctx, name, 1)).is(t, true)
	require.NoError(t, l.CountDown(ctx))
	require.Equal(t, []int64{1, 0}, sub.until())
}

func TestInteropLatchJavaDeleteFailsGoAwait(t *testing.T) {
	interopLatchJavaDeleteFailsGoAwait(t, standaloneSync(t))
}

func interopLatchJavaDeleteFailsGoAwait(t *testing.T, env syncEnv) {
	name, java, ch := env.name, env.java, javaLatchChannel(env.name)
	ctx, sub := env.scenario(t, 30*time.Second, ch)
	l := env.c.NewCountDownLatch(name)

	answer(java.latchTrySetCount(ctx, name, 1)).is(t, true)
	got := goAsleep(t, ctx, env, ch, "Go Await", func() error { return l.Await(ctx) })[0]
	answer(java.latchDelete(ctx, name)).is(t, true)
	require.ErrorIs(t, awaitAsync(t, got, wakeBound, "Go Await after Java's delete").err, rlock.ErrLatchDeleted)
	require.Equal(t, []int64{1, 1}, sub.until(), "Java's trySetCount and delete")
}

func TestInteropLatchGoDeletePublishesOne(t *testing.T) {
	env := standaloneSync(t)
	name, java := env.name, env.java
	ctx, sub := env.scenario(t, 30*time.Second, javaLatchChannel(name))
	l := env.c.NewCountDownLatch(name)

	answer(java.latchTrySetCount(ctx, name, 3)).is(t, true)
	require.Equal(t, []int64{1}, sub.until())
	answer(l.Delete(ctx)).is(t, true)
	require.Equal(t, int64(1), sub.next(wakeBound), "delete publishes 1")
	answer(l.Delete(ctx)).is(t, false)
	answer(java.latchGetCount(ctx, name)).is(t, 0)
	require.Empty(t, sub.until(), "deleting an absent latch publishes nothing")
	answer(java.latchTrySetCount(ctx, name, 1)).is(t, true, "Java can set the latch Go deleted")
}

// ---- Cluster ----

// TestInteropClusterSemaphorePermitLatch runs the scenarios on a cluster, where
// Redisson and holdfast publish and subscribe with sharded pub/sub in the
// object's slot (classic pub/sub on Redis 6.2).
func TestInteropClusterSemaphorePermitLatch(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	t.Run("SemaphoreJavaWakesGo", func(t *testing.T) { interopSemaphoreJavaWakesGo(t, clusterSync(t, cl)) })
	t.Run("SemaphoreGoWakesJava", func(t *testing.T) { interopSemaphoreGoWakesJava(t, clusterSync(t, cl)) })
	t.Run("PermitJavaIDsReleasedByGo", func(t *testing.T) { interopPermitJavaIDsReleasedByGo(t, clusterSync(t, cl)) })
	t.Run("PermitWake", func(t *testing.T) { interopPermitWake(t, clusterSync(t, cl)) })
	t.Run("LatchJavaOpensGoAwait", func(t *testing.T) { interopLatchJavaOpensGoAwait(t, clusterSync(t, cl)) })
	t.Run("LatchGoCountDownSeenByJava", func(t *testing.T) { interopLatchGoCountDownSeenByJava(t, clusterSync(t, cl)) })
	t.Run("LatchJavaDeleteFailsGoAwait", func(t *testing.T) { interopLatchJavaDeleteFailsGoAwait(t, clusterSync(t, cl)) })
}

// javaSync simulates a Java process using Redisson's RSemaphore,
// RPermitExpirableSemaphore and RCountDownLatch on the same Redis. Its scripts
// are written here from the protocol facts (shared/redisson-protocol.md §2.11,
// §2.12, §2.13, with the corrections of §9), independently of holdfast's own
// scripts, and called with Java's argument encodings: numbers as decimal ASCII,
// permit ids as 16 raw bytes, the no-lease sentinel as the text
// "922337203685477", the publish command's name as an ARGV element, and "now"
// as the caller's wall clock in epoch milliseconds.
type javaSync struct {
	rdb     redis.UniversalClient
	publish string // PUBLISH, or SPUBLISH on a Redis 7 cluster (Redisson 3.23+)
}

// javaNoLease is the score Redisson gives a permit without lease (§1.9, §2.12).
const javaNoLease = "922337203685477"

// Key and channel names of an object named name without braces (§0.4).
func javaSemaphoreChannel(name string) string { return "redisson_sc:{" + name + "}" }
func javaTimeoutKey(name string) string       { return "{" + name + "}:timeout" }
func javaLatchChannel(name string) string     { return "redisson_countdownlatch__channel__{" + name + "}" }

// javaNewID draws a permit id as Redisson does: 16 random bytes, shown to the
// caller as 32 lowercase hex characters.
func javaNewID(t testing.TB) []byte {
	t.Helper()
	id := make([]byte, 16)
	_, err := rand.Read(id)
	require.NoError(t, err)
	return id
}

// javaID is Java's hex decoding of a permit id (it accepts either case).
func javaID(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	require.Len(t, b, 16)
	return b
}

func javaNow() int64 { return time.Now().UnixMilli() }

// §2.11 RSemaphore.
var (
	// K1 = N; A1 = n. If K1 exists and its value >= n: DECRBY n, return 1; else 0.
	javaSemTryAcquire = newScript(`
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0`)
	// K1 = N, K2 = channel; A1 = n, A2 = publish command. v = INCRBY n; publish v.
	javaSemRelease = newScript(`
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)`)
	// As release, but only when K1 exists; returns whether it did.
	javaSemReleaseIfExists = newScript(`
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1`)
	// K1, K2; A1 = n, A2 = publish command [, A3 = ttl ms]. If GET is nil: SET n
	// (PX A3), publish n, return 1; else 0.
	javaSemTrySetPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  if ARGV[3] ~= nil then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
  else
    redis.call('set', KEYS[1], ARGV[1])
  end
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
	// K1, K2; A1 = d, A2 = publish command. v = (GET or 0) + d; SET v; publish v.
	javaSemAddPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  value = 0
end
local v = tonumber(value) + tonumber(ARGV[1])
redis.call('set', KEYS[1], v)
redis.call(ARGV[2], KEYS[2], v)`)
	// K1. If GET is nil return 0; else SET 0 and return the previous value.
	javaSemDrainPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  return 0
end
redis.call('set', KEYS[1], 0)
return value`)
)

// evalVoid runs a script whose Java call decodes no reply (EVAL_VOID).
func evalVoid(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

func (j javaSync) semTryAcquire(ctx context.Context, name string, n int64) (bool, error) {
	return javaSemTryAcquire.Run(ctx, j.rdb, []string{name}, n).Bool()
}

func (j javaSync) semRelease(ctx context.Context, name string, n int64) error {
	return evalVoid(javaSemRelease.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, n, j.publish).Err())
}

func (j javaSync) semReleaseIfExists(ctx context.Context, name string, n int64) (bool, error) {
	return javaSemReleaseIfExists.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, n, j.publish).Bool()
}

func (j javaSync) semTrySetPermits(ctx context.Context, name string, n int64, ttl time.Duration) (bool, error) {
	args := []any{n, j.publish}
	if ttl > 0 {
		args = append(args, ttl.Milliseconds())
	}
	return javaSemTrySetPermits.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, args...).Bool()
}

func (j javaSync) semAddPermits(ctx context.Context, name string, d int64) error {
	return evalVoid(javaSemAddPermits.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, d, j.publish).Err())
}

func (j javaSync) semDrainPermits(ctx context.Context, name string) (int64, error) {
	return javaSemDrainPermits.Run(ctx, j.rdb, []string{name}).Int64()
}

// semAvailable is availablePermits: a plain GET, nil -> 0.
func (j javaSync) semAvailable(ctx context.Context, name string) (int64, error) {
	v, err := j.rdb.Get(ctx, name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// javaReclaim is §2.12's reclaim step, shared by the permit-expirable scripts:
// take the members of z with score in [0, now] (at most limit when given), ZREM
// them, INCRBY n by their number, and publish the result on c when it is > 0.
// It returns the INCRBY result, or nil when nothing was reclaimed.
const javaReclaim = `
local function reclaim(n, z, c, now, publish, limit)
  local expired
  if limit ~= nil then
    expired = redis.call('zrangebyscore', z, 0, now, 'limit', 0, limit)
  else
    expired = redis.call('zrangebyscore', z, 0, now)
  end
  if #expired == 0 then
    return nil
  end
  redis.call('zrem', z, unpack(expired))
  local value = redis.call('incrby', n, #expired)
  if value > 0 then
    redis.call(publish, c, value)
  end
  return value
end
`

// §2.12 RPermitExpirableSemaphore.
var (
	// K1 = N, K2 = Z, K3 = C; A1 = count, A2 = expiry (now + lease, or S),
	// A3 = now, A4 = S, A5 = publish command, A6.. = ids.
	javaPESTryAcquire = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5], ARGV[1])
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and first[2] ~= ARGV[4] then
  return ':' .. first[2]
end
return nil`)
	// K1 = N, K2 = C, K3 = Z; A1 = id, A2 = 1, A3 = now, A4 = publish command.
	// No reclaim.
	javaPESTryReleaseOne = newScript(`
local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if removed == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[3]) then
  return 0
end
return 1`)
	// K1 = N, K2 = C, K3 = Z; A1 = number of ids (unused), A2 = now,
	// A3 = publish command, A4.. = ids. All or nothing.
	javaPESTryReleaseList = newScript(javaReclaim + `
for i = 4, #ARGV do
  local expire = redis.call('zscore', KEYS[3], ARGV[i])
  if expire == false or tonumber(expire) <= tonumber(ARGV[2]) then
    return 0
  end
end
reclaim(KEYS[1], KEYS[3], KEYS[2], ARGV[2], ARGV[3], nil)
local r = redis.call('zrem', KEYS[3], unpack(ARGV, 4, #ARGV))
redis.call('incrby', KEYS[1], r)
redis.call(ARGV[3], KEYS[2], r)
return r`)
	// K1 = N, K2 = Z, K3 = C; A1 = now, A2 = publish command.
	javaPESAvailable = newScript(javaReclaim + `
local value = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
if value ~= nil then
  return value
end
value = redis.call('get', KEYS[1])
if value == false then
  return 0
end
return tonumber(value)`)
	javaPESGetPermits = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
local value = redis.call('get', KEYS[1])
if value == false then
  return 0
end
return tonumber(value) + redis.call('zcount', KEYS[2], 0, '+inf')`)
	javaPESAcquired = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
return redis.call('zcount', KEYS[2], 0, '+inf')`)
	// K1 = N, K2 = C, K3 = Z; A1 = n, A2 = publish command. No reclaim.
	javaPESSetPermits = newScript(`
local value = redis.call('get', KEYS[1])
if value == false then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return
end
local total = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(value)
if total ~= tonumber(ARGV[1]) then
  redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1 = N, K2 = C; A1 = d, A2 = publish command. Publishes d when d > 0.
	javaPESAddPermits = newScript(`
local value = redis.call('get', KEYS[1])
if value == false then
  value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1 = N, K2 = Z, K3 = C; A1 = id, A2 = new expiry (now + lease, or S),
	// A3 = now, A4 = publish command.
	javaPESUpdateLeaseTime = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], nil)
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0`)
	// K1 = N, K2 = Z, K3 = C; A1 = id, A2 = S, A3 = now, A4 = publish command.
	javaPESGetLeaseTime = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], nil)
local expire = redis.call('zscore', KEYS[2], ARGV[1])
if expire == false then
  return 0
end
if expire == ARGV[2] then
  return -1
end
return tonumber(expire) - tonumber(ARGV[3])`)
)

// javaAcquired is the reply of pesTryAcquire when the ids are held.
const javaAcquired = "OK"

// javaWaitUntil is the reply of pesTryAcquire that tells its caller the
// earliest expiry, the epoch ms score, to wait until.
func javaWaitUntil(score int64) string { return ":" + strconv.FormatInt(score, 10) }

// pesTryAcquire is tryAcquire(ids, lease): lease <= 0 is a permit without
// lease (score S). It returns the reply as text: javaAcquired ("OK"),
// javaWaitUntil(earliest expiry) (":<ms>") or "" for nil.
func (j javaSync) pesTryAcquire(ctx context.Context, name string, lease time.Duration, ids ...[]byte) (string, error) {
	now := javaNow()
	expiry := javaNoLease
	if lease > 0 {
		expiry = strconv.FormatInt(now+lease.Milliseconds(), 10)
	}
	args := []any{len(ids), expiry, now, javaNoLease, j.publish}
	for _, id := range ids {
		args = append(args, id)
	}
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	v, err := javaPESTryAcquire.Run(ctx, j.rdb, keys, args...).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// pesTryRelease is tryRelease(id): whether the id was held and not expired.
func (j javaSync) pesTryRelease(ctx context.Context, name string, id []byte) (bool, error) {
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return javaPESTryReleaseOne.Run(ctx, j.rdb, keys, id, 1, javaNow(), j.publish).Bool()
}

// pesTryReleaseList is tryRelease(ids): how many were released, 0 when any id
// is unknown or expired.
func (j javaSync) pesTryReleaseList(ctx context.Context, name string, ids ...[]byte) (int64, error) {
	args := []any{len(ids), javaNow(), j.publish}
	for _, id := range ids {
		args = append(args, id)
	}
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return javaPESTryReleaseList.Run(ctx, j.rdb, keys, args...).Int64()
}

func (j javaSync) pesCounter(ctx context.Context, s *redis.Script, name string) (int64, error) {
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return s.Run(ctx, j.rdb, keys, javaNow(), j.publish).Int64()
}

func (j javaSync) pesAvailable(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESAvailable, name)
}

func (j javaSync) pesAcquired(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESAcquired, name)
}

func (j javaSync) pesGetPermits(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESGetPermits, name)
}

func (j javaSync) pesSetPermits(ctx context.Context, name string, n int64) error {
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return evalVoid(javaPESSetPermits.Run(ctx, j.rdb, keys, n, j.publish).Err())
}

// pesTrySetPermits is trySetPermits(n): RSemaphore's script without a TTL
// (K1 = N, K2 = C; A1 = n, A2 = publish command: §2.11 and §2.12 agree).
func (j javaSync) pesTrySetPermits(ctx context.Context, name string, n int64) (bool, error) {
	return j.semTrySetPermits(ctx, name, n, 0)
}

func (j javaSync) pesAddPermits(ctx context.Context, name string, d int64) error {
	keys := []string{name, javaSemaphoreChannel(name)}
	return evalVoid(javaPESAddPermits.Run(ctx, j.rdb, keys, d, j.publish).Err())
}

// pesUpdateLeaseTime is updateLeaseTime(id, lease): lease < 0 is permanent (S).
func (j javaSync) pesUpdateLeaseTime(ctx context.Context, name string, id []byte, lease time.Duration) (bool, error) {
	now := javaNow()
	expiry := javaNoLease
	if lease >= 0 {
		expiry = strconv.FormatInt(now+lease.Milliseconds(), 10)
	}
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return javaPESUpdateLeaseTime.Run(ctx, j.rdb, keys, id, expiry, now, j.publish).Bool()
}

// pesGetLeaseTime is getLeaseTime(id)'s script reply: remaining ms, -1 for no
// lease, 0 for an unknown id (which Java turns into IllegalArgumentException).
func (j javaSync) pesGetLeaseTime(ctx context.Context, name string, id []byte) (int64, error) {
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return javaPESGetLeaseTime.Run(ctx, j.rdb, keys, id, javaNoLease, javaNow(), j.publish).Int64()
}

// §2.13 RCountDownLatch.
var (
	// K1 = N, K2 = channel; A1 = "0", A2 = publish command.
	javaLatchCountDown = newScript(`
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
end
if v == 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1, K2; A1 = "1", A2 = count, A3 = publish command.
	javaLatchTrySetCount = newScript(`
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return 1
end
return 0`)
	// K1, K2; A1 = "1", A2 = publish command.
	javaLatchDelete = newScript(`
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
)

func (j javaSync) latchCountDown(ctx context.Context, name string) error {
	return evalVoid(javaLatchCountDown.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 0, j.publish).Err())
}

func (j javaSync) latchTrySetCount(ctx context.Context, name string, n int64) (bool, error) {
	return javaLatchTrySetCount.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 1, n, j.publish).Bool()
}

func (j javaSync) latchDelete(ctx context.Context, name string) (bool, error) {
	return javaLatchDelete.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 1, j.publish).Bool()
}

// latchGetCount is getCount: GET, nil -> 0.
func (j javaSync) latchGetCount(ctx context.Context, name string) (int64, error) {
	return j.semAvailable(ctx, name)
}

// javaSubscriber is a Java subscriber of one channel: it decodes every payload
// as Redisson's LongCodec does (Long.valueOf of the UTF-8 text) and fails the
// test on anything else. Its connection is also subscribed to a marker channel
// in the same slot, so that until can tell exactly which messages were
// published between two points of a test: Redis delivers the messages of one
// connection in the order it executed the publishes.
type javaSubscriber struct {
	t       *testing.T
	msgs    <-chan *redis.Message
	channel string
	marker  string
	pub     func(ctx context.Context, channel, payload string) error
}

// javaDecode is LongCodec's decoder: Long.valueOf(text), which takes an
// optional sign and decimal digits fitting an int64, nothing else.
func javaDecode(t testing.TB, channel, payload string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(payload, 10, 64)
	require.NoError(t, err, "Java's LongCodec cannot decode %q published on %s", payload, channel)
	return v
}

// next returns the next value published on the channel, failing the test when
// none comes within d.
func (s *javaSubscriber) next(d time.Duration) int64 {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		require.True(s.t, ok, "subscription closed")
		require.Equal(s.t, s.channel, m.Channel, "expected a message on %s, got marker", s.channel)
		return javaDecode(s.t, m.Channel, m.Payload)
	case <-time.After(d):
		s.t.Fatalf("no message on %s within %v", s.channel, d)
		return 0
	}
}

// until returns every value published on the channel since the last call (or
// the subscription), in order: it publishes a marker and collects messages up
// to it.
func (s *javaSubscriber) until() []int64 {
	s.t.Helper()
	ctx := testCtx(s.t, 10*time.Second)
	require.NoError(s.t, s.pub(ctx, s.marker, "0"))
	got := []int64{}
	for {
		select {
		case m, ok := <-s.msgs:
			require.True(s.t, ok, "subscription closed")
			if m.Channel == s.marker {
				return got
			}
			got = append(got, javaDecode(s.t, m.Channel, m.Payload))
		case <-ctx.Done():
			s.t.Fatalf("marker not received on %s: %v (so far %v)", s.marker, ctx.Err(), got)
		}
	}
}
