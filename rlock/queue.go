package rlock

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// The client's side of a lock's queue: what takes a round trip, or crosses
// entries (forget). The queue's state and its transitions are the entry's
// (entry.go).

// remove takes w out of e's queue and reports whether it was there, and whether
// w was to settle a hand-off of unknown outcome. It closes the queue's
// subscription when the queue empties. c.mu must be held.
func (c *Client) remove(e *lockEntry, w *waiter) (was, unsure bool) {
	was, unsure, unsub := e.dequeue(w)
	if unsub != nil {
		unsub.Close()
	}
	c.forget(e)
	return was, unsure
}

// leave ends w's wait with err, unless a release handed w the lock first: then
// it returns that lease. It never waits for another goroutine: a hand-off still
// in flight is the releaser's to give back (giveBack). c.mu must not be held.
func (c *Client) leave(e *lockEntry, w *waiter, err error) (*Lease, error) {
	c.mu.Lock()
	was, unsure := c.remove(e, w)
	c.mu.Unlock()
	if !was {
		return <-w.grant, nil // removed by the hand-off that sent it
	}
	if unsure {
		// A failed release may have handed w the lock: give back what w may hold.
		c.undoAcquire(c.acquireArgs(e.lk, w.o, w.lo))
	}
	return nil, err
}

// handedOff completes a hand-off to succ that Redis confirmed, sent at sent: the
// hold (and its renewal) is recorded before succ can see it, and the lease is
// delivered on succ.grant. When succ left the queue while the release was in
// flight, or the client was closed meanwhile, nobody wants the lock: the lease
// is returned, for the releaser to give back. A reply that came after succ's
// lease may have run out delivers nothing: the hold may be gone and the lock
// someone else's, so succ attempts at once, as after a hand-off whose outcome is
// unknown (its acquire recognises a hold still there and renews it). c.mu must
// be held.
func (c *Client) handedOff(e *lockEntry, succ *waiter, sent time.Time) (giveBack *Lease) {
	a := c.acquireArgs(e.lk, succ.o, succ.lo)
	closed := c.ctx.Err() != nil
	if !closed && late(sent, a.Lease) && e.handOffUnsure(succ) == nil {
		return nil
	}
	l := c.grant(succ.o, e.lk, a, succ.lo, sent, 0)
	if closed {
		e.notHandedOff(succ, time.Now()) // succ, if still queued, leaves with ErrClosed
		return l
	}
	e.handOffDone()
	if was, _ := c.remove(e, succ); !was {
		return l
	}
	succ.grant <- l
	return nil
}

// late reports whether an acquisition sent at sent with lease, whose reply has
// just come, may have expired already: its lease would be dead on arrival.
func late(sent time.Time, lease lua.Millis) bool {
	return !time.Now().Before(sent.Add(lease.Duration()))
}

// giveBack unlocks a lease handed to a waiter that had left, and the leases of
// any further such hand-offs. Failures are ignored: the hold then expires with
// its lease.
func (c *Client) giveBack(ctx context.Context, l *Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.latchTTL.Duration())
	defer cancel()
	for l != nil {
		next, err := c.release(ctx, l)
		if err != nil && c.opts.logger != nil {
			c.opts.logger.Warn("rlock: could not give back a lock handed to a waiter that had left; it expires with its lease",
				"lock", quote(l.Name()), "error", err)
		}
		l = next
	}
}
