package pubsub

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// healthCheck is how long a shard feed waits for traffic before it pings its
// connection; a second silent interval declares the connection dead.
const healthCheck = 3 * time.Second

// movedWait bounds how long a feed waits for the client to learn a slot's new
// owner after the old one gave it up.
const movedWait = 5 * time.Second

// shardFeed is the subscriber connection to one shard of a Redis Cluster: every
// shard channel of the client whose slot that shard owned when it was first
// subscribed. Its goroutine owns the connection and keeps it subscribed to the
// channels the hub wants, with one SSUBSCRIBE per channel (Redis refuses one
// SSUBSCRIBE naming channels of different slots, which is how go-redis would
// re-subscribe them after a reconnect). On any trouble (a broken connection, an
// error reply) it drops the connection and subscribes everything again on a new
// one; every re-subscription wakes the channel's waiters. When a slot moved (a
// failover, or a resharding: the node answered MOVED, or unsubscribed a channel
// by itself), each channel whose slot another primary owns now goes to that
// primary's feed (rehome), and the feed carries on with the rest.
type shardFeed struct {
	h    *Hub
	key  string              // the shard's primary when the feed was made
	want map[string]struct{} // channels to carry; guarded by h.mu
	poke chan struct{}       // want changed
	rdb  *redis.ClusterClient
	// dropped: the feed dropped its connection after trouble; the next one
	// it makes is a reconnection. Owned by the feed's goroutine.
	dropped bool
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
	avoid := "" // a node that lost the feed's slots: connect elsewhere
	for ctx.Err() == nil {
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
			c = f.connect(ctx, anyOf(want), avoid)
			avoid = ""
			if f.dropped && f.h.obs != nil {
				f.h.obs.Reconnected()
			}
			f.dropped = false
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
			switch f.handle(ctx, c, r) {
			case keep:
				backoff = 0
			case moved:
				if !f.rehome(ctx, c.addr) {
					avoid = c.addr // the client's view has not caught up yet
				}
				c = f.drop(ctx, c, &backoff)
			default:
				c = f.drop(ctx, c, &backoff)
			}
		}
	}
}

// rehome gives the channels of the feed whose slot a primary other than the
// one at addr owns now to that primary's feed, once the client's view of the
// cluster (reloaded in the background) says so, waiting for it at most
// movedWait; it reports whether any moved. The hub re-subscribes them there,
// which wakes their waiters.
func (f *shardFeed) rehome(ctx context.Context, addr string) bool {
	var owners map[string]string
	deadline := time.Now().Add(movedWait)
	for len(owners) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		f.rdb.ReloadState(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		owners = f.movedAway(ctx, addr)
	}
	if len(owners) == 0 {
		return false
	}
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	for ch, owner := range owners {
		e := f.h.entries[ch]
		if _, ok := f.want[ch]; !ok || e == nil || e.shard != f {
			continue // left meanwhile
		}
		delete(f.want, ch)
		f.h.carry(e, owner)
	}
	return true
}

// movedAway returns the feed's channels whose slot, by the client's view of
// the cluster, a primary other than the one at addr owns, with that primary.
func (f *shardFeed) movedAway(ctx context.Context, addr string) map[string]string {
	owners := map[string]string{}
	for ch := range f.wanted() {
		if m, err := f.rdb.MasterForKey(ctx, ch); err == nil && m.Options().Addr != addr {
			owners[ch] = m.Options().Addr
		}
	}
	return owners
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
	f.dropped = true
	f.rdb.ReloadState(ctx)
	*backoff = min(max(2**backoff, 50*time.Millisecond), time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
	return nil
}

// verdict is what a feed makes of something its connection received.
type verdict int

const (
	keep      verdict = iota // the connection is fine
	reconnect                // broken, silent, or an error reply: connect again
	moved                    // the node gave up the slots: connect to their new owner
)

// handle acts on one result of the connection.
func (f *shardFeed) handle(ctx context.Context, c *shardConn, r received) verdict {
	var ne net.Error
	switch m := r.msg.(type) {
	case nil:
		switch {
		case errors.As(r.err, &ne) && ne.Timeout() && !c.pinged:
			c.pinged = true
			if c.ps.Ping(ctx) != nil {
				return reconnect
			}
			return keep
		case r.err != nil && strings.HasPrefix(r.err.Error(), "MOVED"):
			return moved
		}
		return reconnect
	case *redis.Subscription:
		switch m.Kind {
		case "ssubscribe":
			f.h.subscribed(m.Channel)
		case "sunsubscribe":
			if _, carried := c.have[m.Channel]; carried {
				return moved // not asked for: the server dropped it, its slot moved
			}
		}
	case *redis.Message:
		f.h.message(m)
	}
	c.pinged = false
	return keep
}

// shardConn is one connection of a feed and the goroutine that reads it.
type shardConn struct {
	ps     *redis.PubSub
	in     chan received
	quit   chan struct{}       // closed by close: the reader stops
	addr   string              // the node, as the client's view of the cluster named it
	have   map[string]struct{} // channels SSUBSCRIBEd on ps
	pinged bool                // a health-check PING is unanswered
	wg     sync.WaitGroup
}

// connect opens a connection to the shard that owns first's slot. When avoid is
// set (the node that just gave the slot up), it first waits, for at most
// movedWait, until the client's view of the cluster names another owner: a
// connection to the old owner, now a replica, would hear nothing.
func (f *shardFeed) connect(ctx context.Context, first, avoid string) *shardConn {
	deadline := time.Now().Add(movedWait)
	for avoid != "" && time.Now().Before(deadline) && ctx.Err() == nil {
		if m, err := f.rdb.MasterForKey(ctx, first); err == nil && m.Options().Addr != avoid {
			break
		}
		f.rdb.ReloadState(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	c := &shardConn{ps: f.rdb.SSubscribe(ctx), in: make(chan received), quit: make(chan struct{}), have: map[string]struct{}{}}
	if m, err := f.rdb.MasterForKey(ctx, first); err == nil {
		c.addr = m.Options().Addr
	}
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
