package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// javaPeer simulates a Java process using Redisson's RLock on the same Redis. Its
// scripts are written here from the protocol facts (shared/redisson-protocol.md
// §2.1, §2.2), independently of holdfast's own scripts, with Redisson's field
// "<uuid>:<threadId>" and channel "redisson_lock__channel:{name}".
type javaPeer struct {
	rdb     redis.UniversalClient
	id      string // the RedissonClient's id
	publish string // PUBLISH, or SPUBLISH on a Redis 7 cluster (Redisson 3.23+)
}

// interopEnv is where an interop scenario runs: one Redis or a Cluster.
type interopEnv struct {
	rdb  redis.UniversalClient
	c    *rlock.Client
	name string
	java javaPeer
	// subscribers counts the subscriptions to a channel (classic, or shard
	// channels on a cluster, summed over the nodes).
	subscribers func(ctx context.Context, channel string) int64
	// subscribe subscribes like a Java waiter.
	subscribe func(ctx context.Context, channel string) *redis.PubSub
}

func standaloneInterop(t *testing.T) interopEnv {
	rdb, c, name := setup(t)
	return interopEnv{
		rdb: rdb, c: c, name: name, java: javaPeer{rdb: rdb, id: uuid.NewString(), publish: "PUBLISH"},
		subscribers: func(ctx context.Context, ch string) int64 { return rdb.PubSubNumSub(ctx, ch).Val()[ch] },
		subscribe:   func(ctx context.Context, ch string) *redis.PubSub { return rdb.Subscribe(ctx, ch) },
	}
}

func clusterInterop(t *testing.T, cl *redistest.Cluster) interopEnv {
	rdb := cl.Client(t)
	ps := clusterPubSubOf(t, cl)
	return interopEnv{
		rdb: rdb, c: newClient(t, rdb), name: redistest.Name(t), java: javaPeer{rdb: rdb, id: uuid.NewString(), publish: ps.publishCommand()},
		subscribers: func(ctx context.Context, ch string) int64 { n, _ := ps.listeners(ctx, ch); return n },
		subscribe:   func(ctx context.Context, ch string) *redis.PubSub { return ps.subscribe(ctx, rdb, ch) },
	}
}

// TestInteropCluster runs the interop scenarios on a cluster, where Redisson
// and holdfast both use sharded pub/sub (classic pub/sub on Redis 6.2).
func TestInteropCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	t.Run("JavaHolderExcludesGo", func(t *testing.T) { interopJavaHolderExcludesGo(t, clusterInterop(t, cl)) })
	t.Run("GoHolderExcludesJava", func(t *testing.T) { interopGoHolderExcludesJava(t, clusterInterop(t, cl)) })
}

var (
	javaLock = newScript(`
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`)
	javaUnlock = newScript(`
local val = redis.call('get', KEYS[3])
if val ~= false then return tonumber(val) end
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`)
)

func (j javaPeer) field(thread int) string { return j.id + ":" + strconv.Itoa(thread) }

// tryLock is tryLock() with the watchdog lease (30 s): it returns nil when
// acquired, else the holder's PTTL.
func (j javaPeer) tryLock(ctx context.Context, name string, thread int) (*int64, error) {
	return javaAcquireReply(javaLock.Run(ctx, j.rdb, []string{name}, 30000, j.field(thread)).Result())
}

// unlock returns Redisson's answer: nil (not owner), 0 (still held), 1 (released).
func (j javaPeer) unlock(ctx context.Context, name string, thread int) (any, error) {
	keys := []string{name, "redisson_lock__channel:{" + name + "}", "redisson_unlock_latch:{" + name + "}:" + uuid.NewString()[:8]}
	return javaUnlockReply(javaUnlock.Run(ctx, j.rdb, keys, 0, 30000, j.field(thread), j.publish, 16000).Result())
}

func TestInteropJavaHolderExcludesGo(t *testing.T) {
	interopJavaHolderExcludesGo(t, standaloneInterop(t))
}

func interopJavaHolderExcludesGo(t *testing.T, env interopEnv) {
	c, name, java := env.c, env.name, env.java
	ctx := testCtx(t, 30*time.Second)

	ttl, err := java.tryLock(ctx, name, 82)
	require.NoError(t, err)
	require.Nil(t, ttl, "the Java peer acquires")
	ttl, err = java.tryLock(ctx, name, 82)
	require.NoError(t, err)
	require.Nil(t, ttl, "and re-enters")

	m := c.NewMutex(name)
	octx := rlock.WithOwner(ctx)
	_, err = m.TryLock(octx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired)
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, locked)
	held, err := m.IsHeld(octx)
	require.NoError(t, err)
	require.False(t, held)
	remain, err := m.RemainTTL(ctx)
	require.NoError(t, err)
	require.Greater(t, remain, 25*time.Second)

	// A Go waiter is woken by the Java release message, long before the Java
	// peer's 30 s lease would have run out.
	got := make(chan error, 1)
	go func() {
		l, err := m.Lock(octx)
		if err == nil {
			err = l.Unlock(octx)
		}
		got <- err
	}()
	channel := "redisson_lock__channel:{" + name + "}"
	require.Eventually(t, func() bool { return env.subscribers(ctx, channel) == 1 },
		5*time.Second, 10*time.Millisecond)
	v, err := java.unlock(ctx, name, 82)
	require.NoError(t, err)
	require.EqualValues(t, 0, v, "still held once")
	select {
	case err := <-got:
		t.Fatalf("Go acquired a lock Java still holds: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	v, err = java.unlock(ctx, name, 82)
	require.NoError(t, err)
	require.EqualValues(t, 1, v, "released")
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("the Go waiter was not woken by the Java release")
	}
}

func TestInteropGoHolderExcludesJava(t *testing.T) {
	interopGoHolderExcludesJava(t, standaloneInterop(t))
}

func interopGoHolderExcludesJava(t *testing.T, env interopEnv) {
	rdb, c, name, java := env.rdb, env.c, env.name, env.java
	ctx := testCtx(t, 30*time.Second)
	octx := rlock.WithOwner(ctx)
	m := c.NewMutex(name)
	l1, err := m.Lock(octx)
	require.NoError(t, err)
	l2, err := m.Lock(octx)
	require.NoError(t, err)

	// Java sees the lock held, with Redisson's layout: one field
	// "<uuid>:<decimal>" whose value is the hold count.
	ttl, err := java.tryLock(ctx, name, 1)
	require.NoError(t, err)
	require.NotNil(t, ttl, "the Java peer is excluded")
	require.Greater(t, *ttl, int64(25000))
	h := holders(t, rdb, name)
	require.Len(t, h, 1)
	for f, v := range h {
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+$`, f)
		require.Equal(t, c.ID(), f[:36])
		require.Equal(t, "2", v, "Java's getHoldCount would read 2")
	}
	// Java cannot unlock Go's hold.
	v, err := java.unlock(ctx, name, 1)
	require.NoError(t, err)
	require.Nil(t, v, "not owner")

	// A Java waiter (a plain subscriber) hears the Go release.
	sub := env.subscribe(ctx, "redisson_lock__channel:{"+name+"}")
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(octx))
	require.NoError(t, l1.Unlock(octx))
	msg, err := sub.ReceiveMessage(testCtx(t, 2*time.Second))
	require.NoError(t, err)
	require.Equal(t, "0", msg.Payload)

	ttl, err = java.tryLock(ctx, name, 1)
	require.NoError(t, err)
	require.Nil(t, ttl, "the Java peer acquires after the Go release")
	_, err = m.TryLock(octx)
	require.ErrorIs(t, err, rlock.ErrNotAcquired, "and now excludes Go")
	_, err = java.unlock(ctx, name, 1)
	require.NoError(t, err)
}
