package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// waiter is one call of Lock or TryLock waiting in a lock's queue. It waits for
// its turn (turn is closed when it becomes the head); as the head it attempts
// (wait.go) until it takes the lock, is handed it by a release of this client
// (the lease arrives on grant), or gives up.
type waiter struct {
	o     *owner
	lo    lockOptions
	turn  chan struct{} // closed when the waiter becomes the head
	wake  chan struct{} // the head should look at the lock's state again
	grant chan *Lease   // a release handed the lock to the waiter
}

func newWaiter(o *owner, lo lockOptions) *waiter {
	return &waiter{
		o:     o,
		lo:    lo,
		turn:  make(chan struct{}),
		wake:  make(chan struct{}, 1),
		grant: make(chan *Lease, 1),
	}
}

func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// enqueue appends w to e's queue; a waiter that arrives at an empty queue is
// the head at once. c.mu must be held.
func (e *lockEntry) enqueue(w *waiter) {
	e.queue = append(e.queue, w)
	if len(e.queue) == 1 {
		e.promote()
	}
}

// promote makes queue[0] the head: it attempts at once, unless an owner of this
// client holds the lock exclusively, in which case it waits for that hold to end
// (its release hands over, publishes or fails, and each of these wakes the head)
// or for its lease to run out. c.mu must be held.
func (e *lockEntry) promote() {
	e.attemptAt = time.Now()
	if d, held := e.excludedUntil(); held {
		e.attemptAt = d
	}
	close(e.queue[0].turn)
}

// remove takes w out of e's queue and reports whether it was there. When w was
// the head the next waiter is promoted; when the queue empties its subscription
// is closed. c.mu must be held.
func (c *Client) remove(e *lockEntry, w *waiter) bool {
	i := slices.Index(e.queue, w)
	if i < 0 {
		return false
	}
	e.queue = slices.Delete(e.queue, i, i+1)
	switch {
	case len(e.queue) == 0 && e.sub != nil:
		e.sub.Close()
		e.sub = nil
	case i == 0 && len(e.queue) > 0:
		e.promote()
	}
	c.forget(e)
	return true
}

// leave ends w's wait with err, unless a release handed w the lock first: then
// it returns that lease. It never waits for another goroutine: a hand-off still
// in flight is the releaser's to give back (giveBack). c.mu must not be held.
func (c *Client) leave(e *lockEntry, w *waiter, err error) (*Lease, error) {
	c.mu.Lock()
	if !c.remove(e, w) {
		c.mu.Unlock()
		return <-w.grant, nil // removed by the hand-off that sent it
	}
	unsure := e.unsure == w
	if unsure {
		e.unsure = nil
	}
	c.mu.Unlock()
	if unsure {
		// A failed release may have handed w the lock: give back what w may hold.
		c.undoAcquire(c.acquireArgs(e.lk, w.o, w.lo))
	}
	return nil, err
}

// successor picks the waiter a final release of e may hand the lock to, the
// head, and marks the hand-off in flight; nil when there is none or the head is
// attempting or holds the lock already. c.mu must be held.
func (e *lockEntry) successor() *waiter {
	if len(e.queue) == 0 || e.attempting || e.handing != nil {
		return nil
	}
	w := e.queue[0]
	if e.holdOf(w.o) != nil {
		return nil
	}
	e.handing = w
	return w
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
	e.handing = nil
	a := c.acquireArgs(e.lk, succ.o, succ.lo)
	queued := slices.Contains(e.queue, succ)
	if queued && c.ctx.Err() == nil && late(sent, a.Lease) {
		e.unsure = succ
		e.attemptBy(time.Now())
		return nil
	}
	l := c.grant(succ.o, e.lk, a, succ.lo, sent, 0)
	if c.ctx.Err() != nil {
		e.attemptBy(time.Now()) // succ, if still queued, leaves with ErrClosed
		return l
	}
	e.pace.handedOff()
	if !c.remove(e, succ) {
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

// notHandedOff ends a hand-off to succ (nil: none was tried) that did not
// happen, or whose outcome is unknown, and makes the head attempt by attemptAt.
// When the outcome is unknown the lock may be succ's: its next attempt will tell
// (an acquire recognises its own hold), and if it leaves first it gives back what
// it may hold (leave). If succ has left already, the caller must give it back:
// notHandedOff then returns succ. c.mu must be held.
func (c *Client) notHandedOff(e *lockEntry, succ *waiter, attemptAt time.Time, unknown bool) (undo *waiter) {
	if succ != nil {
		e.handing = nil
		switch {
		case unknown && slices.Contains(e.queue, succ):
			e.unsure = succ
		case unknown:
			undo = succ
		}
	}
	e.attemptBy(attemptAt)
	c.forget(e)
	return undo
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
