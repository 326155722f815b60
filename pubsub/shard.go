package pubsub

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// healthCheck is how long a shard feed waits for traffic before it pings its
// connection; a second silent interval declares the connection dead.
const healthCheck = 3 * time.Second

// shardFeed is the subscriber connection to one shard of a Redis Cluster: every
// shard channel of the client whose slot that shard owned when it was first
// subscribed. Its goroutine owns the connection and keeps it subscribed to the
// channels the hub wants, with one SSUBSCRIBE per channel (Redis refuses one
// SSUBSCRIBE naming channels of different slots, which is how go-redis would
// re-subscribe them after a reconnect). On any trouble (a broken connection, an
// error reply, a channel the server unsubscribed because its slot moved) it
// drops the connection and subscribes everything again on a new one, to the
// slot's owner of now; every re-subscription wakes the channel's waiters.
type shardFeed struct {
	h    *Hub
	key  string              // the shard's primary when the feed was made
	want map[string]struct{} // channels to carry; guarded by h.mu
	poke chan struct{}       // want changed
	done chan struct{}       // closed when run has returned
	rdb  *redis.ClusterClient
}

// wake tells the feed that want changed.
func (f *shardFeed) wake() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// received is one result of PubSub.ReceiveTimeout.
type received struct {
	msg any
	err error
}

// run keeps the feed's connection in line with want until ctx ends or want is
// empty.
func (f *shardFeed) run(ctx context.Context) {
	var c *shardConn
	defer func() { c.close() }()
	backoff := time.Duration(0)
	for {
		want := f.wanted()
		if len(want) == 0 {
			c.close()
			c = nil
			if f.idle() {
				return // nothing to carry: the hub forgot this feed
			}
			continue
		}
		if c == nil {
			c = f.connect(ctx, anyOf(want))
		}
		if err := c.sync(ctx, want); err != nil {
			c = f.drop(ctx, c, &backoff)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-f.poke:
		case r := <-c.in:
			if f.handle(ctx, c, r) {
				backoff = 0
			} else {
				c = f.drop(ctx, c, &backoff)
			}
		}
	}
}

func anyOf(set map[string]struct{}) string {
	for k := range set {
		return k
	}
	return ""
}

// idle forgets the feed and reports true when it has nothing to carry.
func (f *shardFeed) idle() bool {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	if len(f.want) > 0 {
		return false
	}
	if f.h.shards[f.key] == f {
		delete(f.h.shards, f.key)
	}
	return true
}

// wanted returns a copy of want.
func (f *shardFeed) wanted() map[string]struct{} {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	w := make(map[string]struct{}, len(f.want))
	for ch := range f.want {
		w[ch] = struct{}{}
	}
	return w
}

// drop closes c after trouble, refreshes the client's view of the cluster (a
// failover moves slots) and waits a growing back-off, then returns nil: the
// loop connects again.
func (f *shardFeed) drop(ctx context.Context, c *shardConn, backoff *time.Duration) *shardConn {
	c.close()
	f.rdb.ReloadState(ctx)
	*backoff = min(max(2**backoff, 50*time.Millisecond), time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
	return nil
}

// handle acts on one result of the connection and reports whether the
// connection is still good.
func (f *shardFeed) handle(ctx context.Context, c *shardConn, r received) bool {
	var ne net.Error
	switch m := r.msg.(type) {
	case nil:
		if errors.As(r.err, &ne) && ne.Timeout() && !c.pinged {
			c.pinged = true
			return c.ps.Ping(ctx) == nil
		}
		return false // an error reply, a broken or silent connection
	case *redis.Subscription:
		switch m.Kind {
		case "ssubscribe":
			f.h.subscribed(m.Channel)
		case "sunsubscribe":
			if _, asked := c.have[m.Channel]; asked {
				return false // the server dropped it: its slot moved
			}
		}
	case *redis.Message:
		f.h.deliver(m.Channel, m.Payload == "1")
	}
	c.pinged = false
	return true
}

// shardConn is one connection of a feed and the goroutine that reads it.
type shardConn struct {
	ps     *redis.PubSub
	in     chan received
	quit   chan struct{}       // closed by close: the reader stops
	have   map[string]struct{} // channels SSUBSCRIBEd on ps
	pinged bool                // a health-check PING is unanswered
	wg     sync.WaitGroup
}

// connect opens a connection to the shard that owns first's slot.
func (f *shardFeed) connect(ctx context.Context, first string) *shardConn {
	c := &shardConn{ps: f.rdb.SSubscribe(ctx), in: make(chan received), quit: make(chan struct{}), have: map[string]struct{}{}}
	_ = c.ps.SSubscribe(ctx, first) // routes the connection; an error shows up in the reader
	c.have[first] = struct{}{}
	c.wg.Add(1)
	go c.read(ctx)
	return c
}

// read passes what the connection receives to the feed until it is closed.
func (c *shardConn) read(ctx context.Context) {
	defer c.wg.Done()
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, healthCheck)
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		select {
		case c.in <- received{msg, err}:
		case <-c.quit:
			return
		}
	}
}

// sync subscribes the channels of want that c lacks and unsubscribes those it
// has in excess, one command per channel.
func (c *shardConn) sync(ctx context.Context, want map[string]struct{}) error {
	for ch := range want {
		if _, ok := c.have[ch]; !ok {
			if err := c.ps.SSubscribe(ctx, ch); err != nil {
				return err
			}
			c.have[ch] = struct{}{}
		}
	}
	for ch := range c.have {
		if _, ok := want[ch]; !ok {
			delete(c.have, ch)
			if err := c.ps.SUnsubscribe(ctx, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

// close closes the connection and waits for its reader. A nil c is closed.
func (c *shardConn) close() {
	if c == nil {
		return
	}
	close(c.quit)
	_ = c.ps.Close()
	c.wg.Wait()
}
