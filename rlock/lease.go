package rlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/watchdog"
)

// Lease is one acquisition of a lock: Unlock gives it back. Reentrant
// acquisitions by one owner each get their own Lease, and they may be unlocked
// in any order. Done is closed when the lease ends, by Unlock or because the hold
// was lost; Err then says why. A Lease is safe for concurrent use.
type Lease struct {
	c     *Client
	h     *hold
	lease time.Duration // fixed lease; 0 for a watchdog lease
	done  chan struct{}
	err   error // guarded by c.mu; set before done is closed

	// releaseID is the request id of an unlock whose outcome is unknown (its call
	// failed), reused when Unlock is called again so that the latch recognises it.
	releaseID string
}

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.h.name }

// Done returns a channel that is closed when the lease ends: after Unlock, when
// the hold is lost (its lease ran out, a renewal found the lock gone, or no
// renewal was confirmed in time), or when the Client is closed.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, and once Done is closed why it ended:
// an error matching ErrUnlocked, ErrLockLost or ErrClosed.
func (l *Lease) Err() error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.err
}

// Unlock gives the lease back: the owner's hold count goes down by one, and the
// lock is released when it reaches zero (see Mutex for what happens then). It
// makes one round trip and is safe to retry after a failure: a retried unlock of
// the same lease is recognised even if the first one was executed. It returns an
// error matching ErrNotHeld when the lease already ended (unlocked, or lost:
// then it also matches ErrLockLost) and leaves the lock unchanged. On any other
// error (Redis unreachable) the lease stays open and the hold is kept renewed.
func (l *Lease) Unlock(ctx context.Context) error { return l.c.unlock(ctx, l) }

// holdKey identifies one owner's holds on one lock.
type holdKey struct{ owner, name string }

// hold is what this client knows of one owner's holds on one lock.
type hold struct {
	key    holdKey
	name   string
	field  string
	owner  *owner
	count  int64    // the owner's hold count in Redis
	leases []*Lease // open leases, oldest first
	wd     *watchdog.Hold

	// releasing is set while the owner's last hold is being released.
	releasing bool
	// lostWhileReleasing is a loss reported while releasing, applied if the
	// release fails.
	lostWhileReleasing error
}

// renewed reports whether some open lease of the hold is a watchdog lease.
func (h *hold) renewed() bool {
	for _, l := range h.leases {
		if l.lease == 0 {
			return true
		}
	}
	return false
}

// leaseOf returns the lease a hold's acquisition gives the lock in Redis.
func (c *Client) leaseOf(lo lockOptions) time.Duration {
	if lo.leaseTime > 0 {
		return lo.leaseTime
	}
	return c.opts.watchdogTimeout
}

// grant records that o now holds name count times, the last acquisition with
// options lo sent at sent, and returns the new Lease. The watchdog registration is
// made here, before the caller can see the lease. c.mu must be held.
func (c *Client) grant(o *owner, name string, count int64, lo lockOptions, sent time.Time) *Lease {
	k := holdKey{o.id, name}
	h := c.holds[k]
	st := c.state(name)
	if h == nil {
		h = &hold{key: k, name: name, field: c.field(o), owner: o}
		c.holds[k] = h
		st.held++
	}
	st.seen = 0
	st.echoes = 0
	h.count = count
	l := &Lease{c: c, h: h, lease: lo.leaseTime, done: make(chan struct{})}
	h.leases = append(h.leases, l)
	deadline := sent.Add(c.leaseOf(lo))
	if h.wd == nil {
		h.wd = c.wd.Watch(name, h.field, deadline, h.renewed(), c.onLost(h))
	} else {
		h.wd.Update(deadline, h.renewed())
	}
	return l
}

// endLease closes a lease's Done with err. c.mu must be held.
func endLease(l *Lease, err error) {
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
}

// endHold forgets a hold: its leases end with err, its renewal stops. c.mu must be
// held.
func (c *Client) endHold(h *hold, err error) {
	if c.holds[h.key] != h {
		return
	}
	for _, l := range h.leases {
		endLease(l, err)
	}
	h.leases = nil
	h.count = 0
	if h.wd != nil {
		h.wd.Stop()
	}
	delete(c.holds, h.key)
	if st := c.locks[h.name]; st != nil {
		st.held--
		c.dropState(st)
	}
}

// onLost returns the watchdog's callback for a hold.
func (c *Client) onLost(h *hold) func(error) {
	return func(reason error) {
		err := fmt.Errorf("%w: %s: %w", ErrLockLost, quote(h.name), reason)
		c.mu.Lock()
		if c.holds[h.key] != h {
			c.mu.Unlock()
			return
		}
		if h.releasing {
			h.lostWhileReleasing = err
			c.mu.Unlock()
			return
		}
		c.endHold(h, err)
		c.mu.Unlock()
		c.reportLost(h.name, err)
	}
}

// reportLost logs a lost hold and calls the client's hook. c.mu must not be held.
func (c *Client) reportLost(name string, err error) {
	if c.opts.logger != nil {
		c.opts.logger.Warn("holdfast: lock lost", "lock", quote(name), "error", err)
	}
	if c.opts.onLost != nil {
		c.opts.onLost(name, err)
	}
}

// quote renders a lock name for error messages, cut to 64 bytes.
func quote(name string) string {
	if len(name) > 64 {
		return strconv.Quote(name[:64]) + "..."
	}
	return strconv.Quote(name)
}
