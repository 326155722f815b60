package rlock

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/holdfast-go/holdfast/identity"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/redis/go-redis/v9"
)

// Client creates locks on one Redis deployment and keeps their shared machinery:
// one subscriber connection for every waiter (package pubsub) and one renewal loop
// for every hold (package watchdog). Create one Client per process and share it;
// it is safe for concurrent use. Its id, a random UUID, is the first part of every
// owner field it writes, as a RedissonClient's id.
type Client struct {
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

	mu      sync.Mutex
	locks   map[string]*lockEntry // the locks this client holds or waits for (table.go)
	closing closing               // the holds of other kinds, which Close gives back

	permitQs permitTable // the semaphores' waiters (permitqueue.go)
}

// A closer is a hold of a kind other than the locks' that Close gives back:
// an expirable semaphore's Permits. The lock table's holds Close gives back
// itself, in one pipelined round trip (releaseHolds).
type closer interface {
	// closeHold gives the hold back and ends its handle with an error
	// matching ErrClosed; it is called at most once per hold, by Close.
	closeHold()
}

// closing is the set of closers still open: each joins when it is granted and
// leaves when it ends; Close takes them all once, after which none can join.
type closing struct {
	mu     sync.Mutex
	closed bool
	open   map[closer]struct{}
}

// add makes h one of the holds Close gives back; false once Close has taken
// them: the caller gives h back itself.
func (cl *closing) add(h closer) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return false
	}
	if cl.open == nil {
		cl.open = make(map[closer]struct{})
	}
	cl.open[h] = struct{}{}
	return true
}

// remove forgets h, which ended.
func (cl *closing) remove(h closer) {
	cl.mu.Lock()
	delete(cl.open, h)
	cl.mu.Unlock()
}

// take returns the holds still open and lets no more join.
func (cl *closing) take() []closer {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.closed = true
	open := make([]closer, 0, len(cl.open))
	for h := range cl.open {
		open = append(open, h)
	}
	return open
}

// backend is the lock path's traffic with Redis: the acquire and release scripts
// and the release channel's subscription. Unit tests substitute fakes.
type backend struct {
	acquire    func(context.Context, lua.AcquireArgs) (lua.AcquireReply, error)
	release    func(context.Context, lua.ReleaseArgs) (lua.ReleaseReply, error)
	releaseAll func(context.Context, []lua.ReleaseArgs) ([]lua.ReleaseReply, []error) // pipelined, at Close
	subscribe  func(ctx context.Context, channel string) (subscription, error)
}

// New returns a Client that locks through rdb, which may be any
// redis.UniversalClient: a *redis.Client, a Sentinel *redis.Client (NewFailoverClient)
// or a *redis.ClusterClient.
// New does no I/O. From the client's first hold, a goroutine keeps its
// record (package identity: who holds its locks) in Redis, and Close deletes
// it. Close the Client when done; closing rdb is the caller's job.
func New(rdb redis.UniversalClient, opts ...ClientOption) (*Client, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidArgument)
	}
	var o clientOptions
	for _, f := range opts {
		f(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if rt := readTimeout(rdb); o.acks.Replicas > 0 && rt > 0 && o.acks.Timeout >= rt {
		return nil, fmt.Errorf("%w: replica acknowledgement timeout %v is not shorter than the client's ReadTimeout %v: go-redis would give up on WAIT's reply first",
			ErrInvalidArgument, o.acks.Timeout, rt)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &Client{
		rdb:       rdb,
		id:        uuid.NewString(),
		opts:      o,
		obs:       newObservers(o),
		latchTTL:  lua.NewMillis(retryWindow(rdb)),
		deadlines: honoursDeadlines(rdb),
		where:     whereIs(rdb),
		watched:   lua.NewMillis(o.watchdogTimeout),
		ctx:       ctx,
		cancel:    cancel,
		locks:     make(map[string]*lockEntry),
	}
	c.backend = c.redisBackend()
	c.self = identity.Self(c.id, o.service)
	renewals, _ := o.observer.(observe.RenewObserver)
	c.hub = pubsub.New(rdb, pubsub.Options{Observer: newPubSubEvents(o.observer, o.logger)})
	_, cluster := rdb.(*redis.ClusterClient)
	c.wd = watchdog.New(rdb, watchdog.Options{
		Timeout:  o.watchdogTimeout,
		Interval: o.renewInterval,
		Logger:   o.logger,
		Cluster:  cluster,
		Observer: renewals,
		Track:    !o.noTracking,
		Tracking: trackingObserver(o),
		// a server that refuses tracking is no trouble to tell a user who
		// did not ask for the client's log (WithLogger)
		QuietRefused: !o.loggerSet,
		Name:         c.self.ConnName("watchdog"),
	})
	return c, nil
}

// redisBackend is the backend that talks to c's Redis.
func (c *Client) redisBackend() backend {
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

// isNil reports whether rdb is nil, or a nil pointer in the interface.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// ID returns the client's id: the UUID in the owner fields it writes, as
// Redisson's client id ("node id").
func (c *Client) ID() string { return c.id }

// Identity returns what the client says of itself in its record (package
// identity), which names it as the holder of its locks.
func (c *Client) Identity() identity.Record { return c.self }

// Close gives back the holds still open, in one pipelined round trip bounded by
// the release timeout (WithReleaseTimeout), which wakes their waiters in every
// process, as etcd's Session.Close revokes its lease; then it stops the
// client's renewal loop and subscriber and waits for their goroutines. Waiting
// calls return ErrClosed. The leases Close ends have an Err matching ErrClosed
// that says whether their release was confirmed (one that was not expires
// within its lease, unrenewed), and their Unlock returns that error. Close is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil
	}
	c.cancel(ErrClosed)
	c.mu.Unlock()

	c.wd.Close()
	c.releaseHolds()
	for _, h := range c.closing.take() {
		h.closeHold()
	}
	c.record.stop()
	return c.hub.Close()
}

// shardedPubSub reports whether releases are announced with SPUBLISH and waited
// for with SSUBSCRIBE (sharded pub/sub, which stays in the lock's shard): on a
// Redis Cluster of version 7 or later, as Redisson does. It asks a node for its
// version once, on first use; until an answer arrives it assumes a cluster is
// recent enough.
func (c *Client) shardedPubSub(ctx context.Context) bool {
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

// The kinds of pub/sub of Client.pubsub.
const (
	pubsubUnknown int32 = iota
	pubsubClassic
	pubsubSharded
)

// publishCommand returns the command the scripts announce releases with.
func (c *Client) publishCommand(ctx context.Context) string {
	if c.shardedPubSub(ctx) {
		return lua.ShardedPublish
	}
	return lua.Publish
}

// checkName returns why name cannot be a lock's name, or nil.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	if err := lua.CheckName(name); err != nil {
		return fmt.Errorf("%w: lock name %s: %w", ErrInvalidArgument, quote(name), err)
	}
	return nil
}

// whereIs says where rdb's Redis is, for errors: the address of a
// *redis.Client, the seeds of a Cluster or a Ring.
func whereIs(rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.Client:
		if a := c.Options().Addr; a != "FailoverClient" { // NewFailoverClient's placeholder
			return a
		}
		return "the primary the Sentinels name"
	case *redis.ClusterClient:
		return "cluster " + strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := slices.Sorted(maps.Values(c.Options().Addrs))
		return "ring " + strings.Join(addrs, ",")
	}
	return "the client's Redis"
}

// readTimeout returns rdb's read timeout, which bounds a pipeline's replies
// (a WAIT's too); 0 for none, or a client it cannot tell.
func readTimeout(rdb redis.UniversalClient) time.Duration {
	var rt time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	case *redis.Ring:
		rt = c.Options().ReadTimeout
	}
	return max(rt, 0)
}

// honoursDeadlines reports whether rdb applies a ctx's deadline to its sockets
// (go-redis' ContextTimeoutEnabled); true for a client it cannot tell.
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// retryWindow returns how long after a call go-redis may still send it again:
// every retry may wait for a full read timeout plus the largest back-off. Unlock
// latches must outlive it.
func retryWindow(rdb redis.UniversalClient) time.Duration {
	var retries int
	var timeout, backoff time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		retries, timeout, backoff = o.MaxRetries, max(o.ReadTimeout, o.WriteTimeout), o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		retries, timeout, backoff = o.MaxRetries, max(o.ReadTimeout, o.WriteTimeout), o.MaxRetryBackoff
	case *redis.Ring:
		o := c.Options()
		retries, timeout, backoff = o.MaxRetries, max(o.ReadTimeout, o.WriteTimeout), o.MaxRetryBackoff
	default:
		return time.Minute
	}
	if timeout <= 0 {
		return time.Minute // no read timeout: a reply can be awaited for ever
	}
	w := time.Duration(max(retries, 0)+1)*(timeout+max(backoff, 0)) + time.Second
	return min(w, 5*time.Minute)
}

// listen subscribes to a channel that announces releases, of a lock (the
// backend's subscribe) or of a synchronizer: SSUBSCRIBE where the scripts
// SPUBLISH (a Redis 7 Cluster), else SUBSCRIBE.
func (c *Client) listen(ctx context.Context, channel string, wake pubsub.WakePolicy, opts ...pubsub.SubscribeOption) (subscription, error) {
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
func (c *Client) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
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
func (c *Client) waitContext(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
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
