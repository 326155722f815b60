package rlock

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
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
//
// A Client is a facade: the handles it makes (Mutex, Semaphore, Election, …)
// reach two engines through it, the lock table (every lock this client holds
// or waits for, lockTable) and the permit queues (the semaphores' waiters,
// permitTable), both over the machinery they share (core).
type Client struct {
	*core
	locks   *lockTable   // the locks' holds and queues
	permits *permitTable // the semaphores' queues
	closing closing      // the holds of other kinds, which Close gives back
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
	c := &core{
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
	return &Client{
		core:    c,
		locks:   newLockTable(c),
		permits: &permitTable{core: c},
	}, nil
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
	c.locks.mu.Lock() // a wait that joins a queue checks c.ctx under it
	if c.ctx.Err() != nil {
		c.locks.mu.Unlock()
		return nil
	}
	c.cancel(ErrClosed)
	c.locks.mu.Unlock()

	c.wd.Close()
	c.locks.releaseHolds()
	for _, h := range c.closing.take() {
		h.closeHold()
	}
	c.record.stop()
	return c.hub.Close()
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
