package rlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// entry returns the lockEntry of lk, creating it. c.mu must be held.
func (c *Client) entry(lk *lockDef) *lockEntry {
	e := c.locks[lk.id]
	if e == nil {
		e = newEntry(lk)
		c.locks[lk.id] = e
	}
	return e
}

// forget drops e once nothing of it is left. c.mu must be held.
func (c *Client) forget(e *lockEntry) {
	if e.idle() && c.locks[e.lk.id] == e {
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

// grant records the acquisition a of lk by o, with options lo, sent at sent,
// that Redis confirmed (o now holds the lock a.Expected+1 times, with the
// fencing token token on a fenced lock), and returns the new Lease. The watchdog
// registration is made here, before the caller can see the lease. c.mu must be
// held.
func (c *Client) grant(o *owner, lk *lockDef, a lua.AcquireArgs, lo lockOptions, sent time.Time, token int64) *Lease {
	l := &Lease{c: c, lease: lo.leaseTime, acks: a.Acks, token: token}
	h := c.entry(lk).acquired(o, a.Field, l, a.Expected+1)
	deadline := sent.Add(a.Lease.Duration())
	if h.wd == nil {
		h.seen = c.obs.holdStarted(lk.seen, lk.Name(), sent)
		h.wd = c.wd.Watch(lk.Renewal(h.field.String()), deadline, h.renewed(), func(reason error) { c.lose(h, reason) })
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
	if !e.ended(h, err) {
		return
	}
	h.wd.Stop()
	c.obs.holdEnded(h.seen, err)
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
		if e := c.locks[id]; e != nil {
			e.wakeAll()
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
	h.recount(count)
	return nil
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
	if h.lostDuringRelease(err) {
		c.mu.Unlock()
		return
	}
	c.endHold(h, err)
	c.mu.Unlock()
	c.obs.lost(h.e.lk.seen, h.e.name, err)
}
