package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/watchdog"
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
		c.record.keep(c.rdb, c.self, c.opts.logger, c.opts.releaseTimeout)
		h.wd = c.wd.WatchAs(watchdog.Label{Kind: lk.seen, Name: lk.Name()}, lk.Renewal(h.field.String()), deadline, h.renewed(), a.Acks,
			func(reason error) { c.lose(h, reason) })
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

// releaseHolds gives back, at Close, every hold still open but those whose
// Unlock is in flight, and ends their leases with ErrClosed: as the release
// is sent, then with what it found.
func (c *Client) releaseHolds() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.releaseTimeout)
	defer cancel()
	publish := c.publishCommand(ctx)
	c.mu.Lock()
	var holds []*hold
	var args []lua.ReleaseArgs
	for _, e := range c.locks {
		for _, h := range e.holds {
			if h.releasing {
				continue // its Unlock ends it
			}
			h.beginRelease()
			for _, l := range h.leases { // a handle ends as its release is sent
				l.ended.end(fmt.Errorf("%w: %s is being released by Close", ErrClosed, quote(e.name)))
			}
			holds = append(holds, h)
			args = append(args, lua.ReleaseArgs{Lock: e.lk.Lock, Field: h.field, Expected: h.count, Levels: h.count,
				Latch: e.lk.NewLatch(), LatchTTL: c.latchTTL, Publish: publish, Quiet: e.lk.spin != nil})
		}
	}
	c.mu.Unlock()
	if len(holds) == 0 {
		return
	}
	replies, errs := c.backend.releaseAll(ctx, args)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range holds {
		h.endRelease()
		c.endHold(h, h.closedHold(replies[i], errs[i], c.opts))
	}
}

// closedHold is the error that ends the leases of a hold Close released with
// the reply r or the error err. c.mu must be held.
func (h *hold) closedHold(r lua.ReleaseReply, err error, o clientOptions) error {
	name := quote(h.e.name)
	switch {
	case err == nil && r.Outcome == lua.Released:
		return fmt.Errorf("%w: %s was released by Close", ErrClosed, name)
	case err == nil && r.Outcome == lua.NotHeld:
		return fmt.Errorf("%w: %s had expired or been force-unlocked before Close", ErrClosed, name)
	case err == nil:
		err = fmt.Errorf("the owner's hold count changed under Close")
	}
	return fmt.Errorf("%w: %s: Close could not release it (%w); it is no longer renewed and expires within %v",
		ErrClosed, name, err, h.expiresWithin(o).Round(time.Millisecond))
}
