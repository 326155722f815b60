package rlock

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
)

// core is what the engines of one Client share: the Redis client, the options,
// the subscriber and the renewal loop, the observers, and the client's life
// (ctx, ended by Close).
type core struct {
	rdb      redis.UniversalClient
	id       string
	opts     clientOptions
	hub      *pubsub.Hub
	wd       *watchdog.Watchdog
	backend  backend
	pubsub   atomic.Int32 // pubsubUnknown until shardedPubSub has learnt the kind
	latchTTL lua.Millis   // life of an unlock latch: go-redis' retry window
	watched  lua.Millis   // the lease of a watchdog hold: opts.watchdogTimeout
	// deadlines: go-redis applies a ctx's deadline to its sockets
	// (ContextTimeoutEnabled), so that the release timeout bounds a release.
	deadlines bool
	where     string    // where Redis is, for errors: an address, a cluster's seeds
	obs       observers // WithObserver's, and its optional interfaces
	self      identity.Record
	record    record // keeps self in Redis from the first hold until Close

	ctx    context.Context // cancelled, with cause ErrClosed, by Close
	cancel context.CancelCauseFunc
}

// backend is the lock path's traffic with Redis: the acquire and release scripts
// and the release channel's subscription. Unit tests substitute fakes.
type backend struct {
	acquire    func(context.Context, lua.AcquireArgs) (lua.AcquireReply, error)
	release    func(context.Context, lua.ReleaseArgs) (lua.ReleaseReply, error)
	releaseAll func(context.Context, []lua.ReleaseArgs) ([]lua.ReleaseReply, []error) // pipelined, at Close
	subscribe  func(ctx context.Context, channel string) (subscription, error)
}

// redisBackend is the backend that talks to c's Redis.
func (c *core) redisBackend() backend {
	rdb := c.rdb
	return backend{
		acquire: func(ctx context.Context, a lua.AcquireArgs) (lua.AcquireReply, error) {
			return lua.Acquire(ctx, rdb, a)
		},
		release: func(ctx context.Context, a lua.ReleaseArgs) (lua.ReleaseReply, error) {
			return lua.Release(ctx, rdb, a)
		},
		releaseAll: func(ctx context.Context, as []lua.ReleaseArgs) ([]lua.ReleaseReply, []error) {
			return lua.ReleaseAll(ctx, rdb, as)
		},
		subscribe: func(ctx context.Context, channel string) (subscription, error) {
			return c.listen(ctx, channel, lockWake)
		},
	}
}

// shardedPubSub reports whether releases are announced with SPUBLISH and waited
// for with SSUBSCRIBE (sharded pub/sub, which stays in the lock's shard): on a
// Redis Cluster of version 7 or later, as Redisson does. It asks a node for its
// version once, on first use; until an answer arrives it assumes a cluster is
// recent enough.
func (c *core) shardedPubSub(ctx context.Context) bool {
	switch c.pubsub.Load() {
	case pubsubClassic:
		return false
	case pubsubSharded:
		return true
	}
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		c.pubsub.Store(pubsubClassic)
		return false
	}
	info, err := cc.Do(ctx, "INFO", "server").Text()
	if err != nil {
		return true
	}
	_, v, _ := strings.Cut(info, "redis_version:")
	v, _, _ = strings.Cut(v, ".")
	if major, err := strconv.Atoi(v); err == nil && major < 7 {
		c.pubsub.Store(pubsubClassic)
		return false
	}
	c.pubsub.Store(pubsubSharded)
	return true
}

// The kinds of pub/sub of core.pubsub.
const (
	pubsubUnknown int32 = iota
	pubsubClassic
	pubsubSharded
)

// publishCommand returns the command the scripts announce releases with.
func (c *core) publishCommand(ctx context.Context) string {
	if c.shardedPubSub(ctx) {
		return lua.ShardedPublish
	}
	return lua.Publish
}

// listen subscribes to a channel that announces releases, of a lock (the
// backend's subscribe) or of a synchronizer: SSUBSCRIBE where the scripts
// SPUBLISH (a Redis 7 Cluster), else SUBSCRIBE.
func (c *core) listen(ctx context.Context, channel string, wake pubsub.WakePolicy, opts ...pubsub.SubscribeOption) (subscription, error) {
	subscribe := c.hub.Subscribe
	if c.shardedPubSub(ctx) {
		subscribe = c.hub.SSubscribe
	}
	s, err := subscribe(ctx, channel, wake, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// releaseContext returns the context of a release: ctx's values without its
// cancellation, bounded by the client's release timeout. An Unlock deferred
// with a ctx that has ended (a request's, whose client went away) must still
// release, or the lock would stay held, and renewed, for as long as the process
// lives. When go-redis does not apply ctx deadlines to its sockets, its own
// timeouts bound the release and a deadline would only cost allocations on the
// hot path: the ctx is then only detached, and not even that when it cannot be
// cancelled.
func (c *core) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	switch {
	case c.deadlines:
		return context.WithTimeout(context.WithoutCancel(ctx), c.opts.releaseTimeout)
	case ctx.Done() != nil:
		return context.WithoutCancel(ctx), func() {}
	}
	return ctx, func() {}
}

// waitContext returns ctx, also ended by the deadline (zero: none) and by Close;
// stop releases its resources.
func (c *core) waitContext(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })
	stop := func() { unhook(); cancel(nil) }
	if deadline.IsZero() {
		return ctx, stop
	}
	ctx, cancelTimer := context.WithDeadlineCause(ctx, deadline, errWaitElapsed)
	return ctx, func() { cancelTimer(); stop() }
}

// lockWake is the locks' wake policy for their release channels (Redisson's):
// lua.WakeAllMessage, published when the write side of a read/write lock is
// released or force-unlocked (readers may then all proceed), wakes every
// waiter of this client on the channel; any other message (lua.UnlockMessage)
// wakes one.
func lockWake(payload string) int {
	if payload == lua.WakeAllMessage {
		return pubsub.All
	}
	return 1
}
