package rlock

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/watchdog"
)

// lockEntry is everything this client knows of one lock that it holds or waits
// for: the holds of its owners, its queue of waiters, and the pacing of its turns
// with other processes. The Client keeps one per name while the lock is held or
// waited for (Client.locks); every field is guarded by Client.mu.
type lockEntry struct {
	name     string
	lk       *lockDef // the names the scripts take, and the lock's kind
	holds    []*hold  // this client's owners holding the lock: one, or none
	holdsBuf [1]*hold
	pace     pacing

	// The queue (queue.go): waiters in arrival order, queue[0] the head. Only the
	// head talks to Redis, through the queue's subscription to the release channel.
	queue []*waiter
	sub   subscription

	// When the head attempts next. Always set while there is a head: the end of
	// the holder's lease as last read from Redis (an attempt's PTTL, a local
	// hold's deadline), or sooner when something suggests the lock is free.
	// Unset (zero) only while the head's attempt is in flight, whose answer sets
	// it unless news that came meanwhile set it sooner.
	attemptAt time.Time
	// attempting: the head's acquire is in flight. Set and cleared by the head.
	attempting bool
	// handing: a release is handing the lock to this waiter, the head. Set and
	// cleared by the releaser. Neither an attempt nor a second hand-off starts
	// while one of the two is in flight.
	handing *waiter
	// unsure: a release that may have handed the lock to this waiter failed with
	// an unknown outcome. The waiter's next attempt settles it; if the waiter
	// leaves first, it gives back what it may hold.
	unsure *waiter

	// fair: the waiters of a fair lock (wait_fair.go). They do not queue here:
	// the lock's queue is in Redis. They are woken when a hold of this client
	// ends without an unlock.
	fair []*waiter
}

// hold is what this client knows of one owner's holds on one lock.
type hold struct {
	e         *lockEntry
	owner     *owner
	field     lua.Text
	count     int64    // the owner's hold count in Redis
	leases    []*Lease // open leases, oldest first
	leasesBuf [1]*Lease
	wd        *watchdog.Hold

	// releasing is set while the owner's last hold is being released; a loss
	// reported meanwhile is kept in lostWhileReleasing and applied if the
	// release fails.
	releasing          bool
	lostWhileReleasing error
}

// entry returns the lockEntry of lk, creating it. c.mu must be held.
func (c *Client) entry(lk *lockDef) *lockEntry {
	e := c.locks[lk.id]
	if e == nil {
		e = &lockEntry{name: lk.Name(), lk: lk}
		e.holds = e.holdsBuf[:0]
		c.locks[lk.id] = e
	}
	return e
}

// forget drops e once nothing of it is left. c.mu must be held.
func (c *Client) forget(e *lockEntry) {
	if len(e.holds) == 0 && len(e.queue) == 0 && len(e.fair) == 0 && e.handing == nil && c.locks[e.lk.id] == e {
		delete(c.locks, e.lk.id)
	}
}

// holdOf returns o's hold of the lock lk, or nil. c.mu must be held.
func (c *Client) holdOf(o *owner, lk *lockDef) *hold {
	if e := c.locks[lk.id]; e != nil {
		return e.holdOf(o)
	}
	return nil
}

// holdOf returns o's hold of the lock, or nil. c.mu must be held.
func (e *lockEntry) holdOf(o *owner) *hold {
	for _, h := range e.holds {
		if h.owner == o {
			return h
		}
	}
	return nil
}

// attemptBy makes the head attempt at t at the latest, and wakes it to look.
func (e *lockEntry) attemptBy(t time.Time) {
	if len(e.queue) == 0 {
		return
	}
	e.soonest(t)
	e.queue[0].poke()
}

// soonest brings attemptAt forward to t (zero attemptAt: unset, during an attempt).
func (e *lockEntry) soonest(t time.Time) {
	if e.attemptAt.IsZero() || t.Before(e.attemptAt) {
		e.attemptAt = t
	}
}

// excluding reports whether owners of this client hold the lock in a way that
// excludes other owners: any hold, but a read lock's (lockDef.shared).
func (e *lockEntry) excluding() bool { return len(e.holds) > 0 && !e.lk.shared() }

// excludedUntil returns when the earliest excluding local hold's lease runs
// out, as last confirmed by Redis, and whether there is one (excluding).
func (e *lockEntry) excludedUntil() (time.Time, bool) {
	if !e.excluding() {
		return time.Time{}, false
	}
	var first time.Time
	for _, h := range e.holds {
		if d := h.wd.Deadline(); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first, !first.IsZero()
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
func (c *Client) leaseOf(lo lockOptions) lua.Millis {
	if lo.leaseTime > 0 {
		return lua.NewMillis(lo.leaseTime)
	}
	return c.watched
}

// grant records the acquisition a of lk by o, with options lo, sent at sent,
// that Redis confirmed (o now holds the lock a.Expected+1 times, with the
// fencing token token on a fenced lock), and returns the new Lease. The watchdog
// registration is made here, before the caller can see the lease. c.mu must be
// held.
func (c *Client) grant(o *owner, lk *lockDef, a lua.AcquireArgs, lo lockOptions, sent time.Time, token int64) *Lease {
	e := c.entry(lk)
	h := e.holdOf(o)
	if h == nil {
		h = &hold{e: e, owner: o, field: a.Field}
		h.leases = h.leasesBuf[:0]
		e.holds = append(e.holds, h)
	}
	e.pace.acquired()
	h.count = a.Expected + 1
	l := &Lease{c: c, h: h, lease: lo.leaseTime, acks: a.Acks, token: token}
	h.leases = append(h.leases, l)
	deadline := sent.Add(a.Lease.Duration())
	if h.wd == nil {
		r := lk.Renewal(h.field.String())
		h.wd = c.wd.Watch(r, deadline, h.renewed(), c.onLost(h))
	} else {
		h.wd.Update(deadline, h.renewed())
	}
	return l
}

// endHold forgets a hold: its leases end with err, its renewal stops. A hold that
// ends without an unlock (err is not ErrUnlocked: lost, force-unlocked, expired)
// wakes this client's waiters on the lock to attempt at once: nothing else will
// tell them the lock may be free. c.mu must be held.
func (c *Client) endHold(h *hold, err error) {
	e := h.e
	if e.holdOf(h.owner) != h {
		return
	}
	for _, l := range h.leases {
		l.end(err)
	}
	h.leases = h.leasesBuf[:0]
	h.count = 0
	h.wd.Stop()
	e.holds = slices.DeleteFunc(e.holds, func(x *hold) bool { return x == h })
	if !errors.Is(err, ErrUnlocked) {
		c.wakeWaiters(e.lk)
	}
	c.forget(e)
}

// wakeWaiters makes this client's waiters on lk's Redis key look again at once:
// the head of each queue on the key (both sides of a read/write lock) and every
// fair waiter. c.mu must be held.
func (c *Client) wakeWaiters(lk *lockDef) {
	for _, id := range lk.keyIDs() {
		e := c.locks[id]
		if e == nil {
			continue
		}
		e.attemptBy(time.Now())
		for _, w := range e.fair {
			w.poke()
		}
	}
}

// resync sets a hold's count to what Redis holds. When the owner's holds are
// gone it ends them and returns the ErrLockLost error. c.mu must be held.
func (c *Client) resync(h *hold, count int64) error {
	if count == 0 {
		err := fmt.Errorf("%w: %s: the owner's holds expired or were force-unlocked", ErrLockLost, quote(h.e.name))
		c.endHold(h, err)
		return err
	}
	h.count = count
	return nil
}

// onLost returns the watchdog's callback for a hold.
func (c *Client) onLost(h *hold) func(error) {
	return func(reason error) { c.lose(h, reason) }
}

// checkDeadline declares h lost at once if its deadline has passed, before the
// watchdog's timer does: a lease is never valid past its deadline, even for the
// moment after a paused process resumes. c.mu must not be held.
func (c *Client) checkDeadline(h *hold) {
	if reason := h.wd.Overdue(time.Now()); reason != nil {
		c.lose(h, reason)
	}
}

// lose ends h, lost for reason (the watchdog's), and reports it; while the
// owner's last Unlock is in flight the loss is kept for that Unlock to apply if
// it fails. c.mu must not be held.
func (c *Client) lose(h *hold, reason error) {
	err := fmt.Errorf("%w: %s: %w", ErrLockLost, quote(h.e.name), reason)
	c.mu.Lock()
	if h.e.holdOf(h.owner) != h {
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
	c.reportLost(h.e.name, err)
}

// reportLost logs a lost hold and calls the client's hook. c.mu must not be held.
func (c *Client) reportLost(name string, err error) {
	if c.opts.logger != nil {
		c.opts.logger.Warn("rlock: lock lost", "lock", quote(name), "error", err)
	}
	if c.opts.onLost != nil {
		c.opts.onLost(name, err)
	}
}
