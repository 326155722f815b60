package rlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// release gives back one lease: one round trip (two when the owner's count had
// to be resynchronised). The owner's last lease gives back every hold the owner
// still has on the lock, and may hand the lock to the head of the queue. It
// returns the lease of a hand-off to a waiter that had left, for the caller to
// give back (giveBack).
func (c *Client) release(ctx context.Context, l *Lease) (*Lease, error) {
	name := l.h.e.name
	l.h.owner.begin(lockRef{c, name})
	defer l.h.owner.end(lockRef{c, name})
	publish := c.publishCommand(ctx)
	for try := 0; ; try++ {
		a, succ, err := c.prepareRelease(l, publish)
		if err != nil {
			return nil, err
		}
		sent := time.Now()
		r, err := c.backend.release(ctx, a)
		if err != nil {
			return nil, c.releaseFailed(l, succ, err)
		}
		c.mu.Lock()
		back, again, err := c.released(l, a, succ, r, sent)
		c.mu.Unlock()
		if errors.Is(err, ErrLockLost) {
			c.reportLost(name, err)
		}
		switch {
		case again && try > 0:
			return nil, fmt.Errorf("%w: unlock %s", ErrConflict, quote(name))
		case !again && err == nil && r.Acked < a.Acks.Replicas:
			return back, &NotReplicatedError{Lock: name, Unlock: true, Acked: r.Acked, Wanted: a.Acks.Replicas, Timeout: a.Acks.Timeout}
		case !again:
			return back, err
		}
	}
}

// prepareRelease builds the release of l. The owner's last lease releases every
// hold it has; unless an earlier Unlock of l failed (its outcome, a hand-off
// included, is then unknown), it may hand the lock to the head of the queue.
func (c *Client) prepareRelease(l *Lease, publish string) (lua.ReleaseArgs, *waiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := l.h
	switch {
	case l.err != nil:
		return lua.ReleaseArgs{}, nil, fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(h.e.name), l.err)
	case c.ctx.Err() != nil:
		return lua.ReleaseArgs{}, nil, ErrClosed
	}
	a := lua.ReleaseArgs{
		Lock: h.e.lk.Lock, Field: h.field, Expected: h.count, Levels: 1,
		LatchTTL: c.latchTTL, Publish: publish, Quiet: h.e.lk.spin != nil, Acks: l.acks,
	}
	if len(h.leases) == 1 {
		a.Levels = h.count
	}
	retried := l.latch != ""
	if !retried {
		l.latch = h.e.lk.NewLatch()
	}
	a.Latch = l.latch
	if a.Levels < h.count {
		a.Lease = c.remainingLease(h, l)
		return a, nil, nil
	}
	h.releasing = true
	if retried {
		return a, nil, nil
	}
	var succ *waiter
	if h.e.lk.handsOff() {
		succ = h.e.successor()
	}
	if succ != nil {
		a.Successor = c.field(succ.o)
		a.SuccessorLease = c.leaseOf(succ.lo)
		a.OnlyIfAlone = h.e.pace.onlyIfAlone()
	}
	return a, succ, nil
}

// releaseFailed handles a release without an answer (Redis unreachable: the
// outcome is unknown, the lease stays open for Unlock to be retried) or whose key
// turned out to hold another type (the hold is lost).
func (c *Client) releaseFailed(l *Lease, succ *waiter, err error) error {
	h := l.h
	name := h.e.name
	c.mu.Lock()
	h.releasing = false
	lost := h.lostWhileReleasing
	h.lostWhileReleasing = nil
	var undo *waiter
	if lua.IsWrongType(err) {
		c.notHandedOff(h.e, succ, time.Now(), false)
		lost = fmt.Errorf("%w: %s: the key was replaced by another type", ErrLockLost, quote(name))
		err = fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(name), ErrWrongType)
	} else {
		undo = c.notHandedOff(h.e, succ, time.Now(), true)
		err = fmt.Errorf("rlock: unlock %s: %w", quote(name), err)
	}
	if lost != nil {
		c.endHold(h, lost)
	}
	c.mu.Unlock()
	if lost != nil {
		c.reportLost(name, lost)
	}
	if undo != nil {
		// The lock may have been handed to a waiter that has left since.
		c.undoAcquire(c.acquireArgs(h.e.lk, undo.o, undo.lo))
	}
	return err
}

// released applies what Redis answered to a release. again asks for the release
// to be sent once more, after the owner's count was resynchronised. c.mu must be
// held.
func (c *Client) released(l *Lease, a lua.ReleaseArgs, succ *waiter, r lua.ReleaseReply, sent time.Time) (back *Lease, again bool, err error) {
	h := l.h
	e := h.e
	h.releasing = false
	h.lostWhileReleasing = nil
	switch r.Outcome {
	case lua.Partial:
		h.count -= a.Levels
		h.leases = slices.DeleteFunc(h.leases, func(x *Lease) bool { return x == l })
		l.end(ErrUnlocked)
		h.wd.Update(sent.Add(a.Lease.Duration()), h.renewed())
		return nil, false, nil
	case lua.Released:
		c.endHold(h, ErrUnlocked)
		c.notHandedOff(e, succ, time.Now().Add(e.pace.published(len(e.queue) > 0)), false)
		return nil, false, nil
	case lua.HandedOff:
		c.endHold(h, ErrUnlocked)
		if succ == nil {
			// A retried Unlock: an earlier try handed the lock to the head of
			// then. The head attempts at once, which recognises such a hand-off.
			c.notHandedOff(e, nil, time.Now(), false)
			return nil, false, nil
		}
		return c.handedOff(e, succ, sent), false, nil
	case lua.Resync:
		if lost := c.resync(h, r.Count); lost != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
		}
		return nil, true, nil
	default: // lua.NotHeld: the hold expired or was deleted before this unlock
		c.notHandedOff(e, succ, time.Now(), false)
		lost := fmt.Errorf("%w: %s: the lock expired or was force-unlocked before Unlock", ErrLockLost, quote(e.name))
		c.endHold(h, lost)
		return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
}

// remainingLease returns the lease a partial release re-applies: the watchdog
// timeout while a watchdog lease stays open, else the lease of the latest
// acquisition that stays open (Redisson re-applies the last lease used). c.mu
// must be held.
func (c *Client) remainingLease(h *hold, releasing *Lease) lua.Millis {
	var last time.Duration
	for _, l := range h.leases {
		if l == releasing {
			continue
		}
		if l.lease == 0 {
			return c.watched
		}
		last = l.lease
	}
	return c.leaseOf(lockOptions{leaseTime: last})
}
