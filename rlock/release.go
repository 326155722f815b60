package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/watchdog"
)

// release gives back one lease: one round trip (two when the owner's count had
// to be resynchronised), bounded by the client's release timeout and not by
// ctx's cancellation (see releaseContext). The owner's last lease gives back
// every hold the owner still has on the lock, and may hand the lock to the head
// of the queue. It returns the lease of a hand-off to a waiter that had left, for
// the caller to give back (giveBack).
func (c *Client) release(ctx context.Context, l *Lease) (*Lease, error) {
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	name := l.h.e.name
	l.h.owner.lockCalls(lockRef{c.id, name})
	defer l.h.owner.unlockCalls(lockRef{c.id, name})
	if a := l.pendingRelease(); a != nil {
		return nil, c.resend(ctx, l, *a)
	}
	publish := c.publishCommand(ctx)
	for try := 0; ; try++ {
		req, err := c.prepareRelease(l, publish, try > 0)
		if err != nil {
			return nil, err
		}
		r, err := c.backend.release(ctx, req.a)
		if err != nil {
			return nil, c.releaseFailed(&req, err)
		}
		c.mu.Lock()
		back, again, err := c.released(&req, r)
		c.mu.Unlock()
		if errors.Is(err, ErrLockLost) {
			c.obs.lost(l.h.e.lk.seen, name, err)
		}
		switch {
		case again && try > 0:
			return nil, c.conflict(l)
		case !again && err == nil && r.Acked < req.a.Acks.Replicas:
			return back, &NotReplicatedError{Lock: name, Unlock: true, Acked: r.Acked, Wanted: req.a.Acks.Replicas, Timeout: req.a.Acks.Timeout}
		case !again:
			return back, err
		}
	}
}

// releaseReq is one release request, built once by prepareRelease: the lease
// it gives back, the script's arguments, the waiter it may hand the lock to,
// and when it was sent.
type releaseReq struct {
	l    *Lease
	a    lua.ReleaseArgs
	succ *waiter
	sent time.Time
}

// pendingRelease returns the release to send again for l, if its owner's last
// Unlock was not confirmed.
func (l *Lease) pendingRelease() *lua.ReleaseArgs {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.resend
}

// resend sends again a, the release of an owner's last lease whose first try was
// not confirmed, so that a retried Unlock frees the lock at once rather than by
// its expiry; its latch recognises a first try that ran. The lease ended with
// the first try: a confirmed resend turns its Err into ErrUnlocked.
func (c *Client) resend(ctx context.Context, l *Lease, a lua.ReleaseArgs) error {
	r, err := c.backend.release(ctx, a)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		u := &UnlockUnconfirmedError{Lock: l.h.e.name, ExpiresWithin: l.h.expiresWithin(c.opts), Err: err}
		var first *UnlockUnconfirmedError
		if errors.As(l.ended.Err(), &first) {
			u.ExpiresWithin = first.ExpiresWithin // the bound the first try stated
		}
		return u
	case r.Outcome == lua.NotHeld:
		l.resend = nil
		return fmt.Errorf("%w: %s: the lock expired before the retried Unlock", ErrNotHeld, quote(l.h.e.name))
	}
	l.resend = nil
	l.ended.restate(ErrUnlocked)
	return nil
}

// prepareRelease builds the release of l, and ends l: a handle stops saying
// valid before its release leaves, whatever the reply (the next holder may
// hold the lock a moment after the release runs, before its reply arrives);
// the reply then settles why it ended. again: l's release is sent once more
// (after a resynchronisation), l has ended already. The owner's last lease
// releases every hold it has, and may hand the lock to the head of the queue.
func (c *Client) prepareRelease(l *Lease, publish string, again bool) (releaseReq, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := l.h
	switch ended := l.ended.Err(); {
	case again:
	case errors.Is(ended, ErrClosed) || errors.Is(ended, ErrUnlockUnconfirmed):
		return releaseReq{}, ended // it says what became of the hold
	case ended != nil:
		return releaseReq{}, fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(h.e.name), ended)
	}
	l.ended.end(ErrUnlocked)
	req := releaseReq{l: l, a: lua.ReleaseArgs{
		Lock: h.e.lk.Lock, Field: h.field, Expected: h.count, Levels: 1, Latch: h.e.lk.NewLatch(),
		LatchTTL: c.latchTTL, Publish: publish, Quiet: h.e.lk.spin != nil, Acks: l.acks,
	}}
	if len(h.leases) == 1 {
		req.a.Levels = h.count
	}
	req.sent = time.Now()
	if req.a.Levels < h.count {
		req.a.Lease = h.remainingLease(l, c.watched)
		return req, nil
	}
	h.beginRelease()
	if h.e.lk.handsOff() && c.ctx.Err() == nil && req.a.Acks.Replicas == 0 && c.opts.acks.Replicas == 0 {
		req.succ = h.e.successor() // with acknowledgements, the next holder's own acquisition waits for them
	}
	if req.succ != nil {
		req.a.Successor = req.succ.o.field(c.id)
		req.a.SuccessorLease = req.succ.lo.lease(c.watched)
		req.a.Streak = h.e.pace.limit()
	}
	return req, nil
}

// conflict ends l, whose release found the owner's hold count changed under
// it twice (it did not run), and returns the ErrConflict error it ended with.
// The lease ended as its release was sent; the owner's other leases keep the
// hold, whose count the next call resynchronises; the owner's last lease ends
// the hold, no longer renewed, so that the lock expires within its lease.
func (c *Client) conflict(l *Lease) error {
	h := l.h
	c.mu.Lock()
	defer c.mu.Unlock()
	err := fmt.Errorf("%w: unlock %s: the owner's hold count kept changing; not renewed, the lock expires within %v",
		ErrConflict, quote(h.e.name), h.expiresWithin(c.opts).Round(time.Millisecond))
	left := h.gaveBack(l, 0)
	l.ended.settle(err)
	if left == 0 {
		c.endHold(h, err)
		c.forget(h.e)
	}
	return err
}

// releaseFailed handles a release without an answer (a timeout, Redis
// unreachable: the outcome is unknown) or that Redis refused. The lease ends
// either way, and the owner's last lease stops the hold's renewal, so that the
// lock is released or expires by itself: never a renewed orphan. A key that
// turned out to hold another type means the hold was lost; a hold found gone
// while the owner's last release was in flight is, most likely, that
// release's work (its own invalidation, told at once): unconfirmed, not lost.
func (c *Client) releaseFailed(req *releaseReq, err error) error {
	l := req.l
	h, name := l.h, l.h.e.name
	c.mu.Lock()
	final, lost := h.endRelease()
	if final && errors.Is(lost, watchdog.ErrGone) {
		lost = nil // most likely this release's own doing: unconfirmed, and a retry's latch tells
	}
	var undo *waiter
	if lua.IsWrongType(err) {
		h.e.notHandedOff(req.succ, time.Now())
		lost = fmt.Errorf("%w: %s: the key was replaced by another type", ErrLockLost, quote(name))
		err = fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(name), ErrWrongType)
	} else {
		undo = h.e.handOffUnsure(req.succ)
		err = l.unconfirmed(final, unreachable(c.where, err))
	}
	switch {
	case lost != nil:
		c.endHold(h, lost)
	case final:
		c.endHold(h, err)
		resend := req.a // a copy: req stays on the caller's stack
		l.resend = &resend
		l.resend.Successor, l.resend.SuccessorLease, l.resend.Streak = lua.Text{}, lua.Millis{}, 0
	}
	c.forget(h.e)
	c.mu.Unlock()
	if lost != nil {
		c.obs.lost(h.e.lk.seen, name, lost)
	}
	if undo != nil {
		// The lock may have been handed to a waiter that has left since.
		c.undoAcquire(c.acquireArgs(h.e.lk, undo.o, undo.lo))
	}
	return err
}

// unconfirmed ends l, whose release failed with err, and returns the error
// that says so. The owner's last lease (final) ends the hold (its caller does
// so), whose lock then expires within its lease at most; otherwise the owner's
// other leases keep the hold, whose count the next call resynchronises. c.mu
// must be held.
func (l *Lease) unconfirmed(final bool, err error) error {
	h := l.h
	u := &UnlockUnconfirmedError{Lock: h.e.name, Err: err}
	switch {
	case !final:
		u.Others = h.gaveBack(l, 0)
		l.ended.settle(u)
	default:
		u.ExpiresWithin = h.expiresWithin(l.c.opts)
	}
	return u
}

// released applies what Redis answered to a release. again asks for the release
// to be sent once more, after the owner's count was resynchronised. c.mu must be
// held.
func (c *Client) released(req *releaseReq, r lua.ReleaseReply) (back *Lease, again bool, err error) {
	l, succ := req.l, req.succ
	h := l.h
	e := h.e
	h.endRelease()
	defer c.forget(e)
	switch r.Outcome {
	case lua.Partial:
		h.gaveBack(l, req.a.Levels)
		deadline := req.sent.Add(req.a.Lease.Duration())
		if d := h.wd.Deadline(); r.Acked < req.a.Acks.Replicas && d.Before(deadline) {
			deadline = d // a lease the replicas may not have moves nothing
		}
		h.wd.Update(deadline, h.renewed())
		return nil, false, nil
	case lua.Released:
		c.endHold(h, ErrUnlocked)
		e.published(succ)
		return nil, false, nil
	case lua.HandedOff:
		c.endHold(h, ErrUnlocked)
		if succ == nil {
			// A retried execution by go-redis of a release that handed the
			// lock to the head of then: the head attempts at once, which
			// recognises such a hand-off.
			e.notHandedOff(nil, time.Now())
			return nil, false, nil
		}
		return c.handedOff(e, succ, req.sent), false, nil
	case lua.Resync:
		if lost := c.resync(h, r.Count); lost != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
		}
		return nil, true, nil
	default: // lua.NotHeld: the hold expired or was deleted before this unlock
		e.notHandedOff(succ, time.Now())
		lost := fmt.Errorf("%w: %s: the lock expired or was force-unlocked before Unlock", ErrLockLost, quote(e.name))
		c.endHold(h, lost)
		return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
}

// remainingLease returns the lease a partial release re-applies: the watchdog
// timeout while a watchdog lease stays open, else the lease of the latest
// acquisition that stays open (Redisson re-applies the last lease used). c.mu
// must be held.
func (h *hold) remainingLease(releasing *Lease, watched lua.Millis) lua.Millis {
	var last time.Duration
	for _, l := range h.leases {
		if l == releasing {
			continue
		}
		if l.lease == 0 {
			return watched
		}
		last = l.lease
	}
	return lockOptions{leaseTime: last}.lease(watched)
}

// expiresWithin bounds how long the ended hold h may still live in Redis: a
// fixed lease's remaining time; for a watchdog lease the watchdog timeout plus
// one renewal interval of the client's options o, as a renewal round already
// in flight may still land. The client's mutex must be held.
func (h *hold) expiresWithin(o clientOptions) time.Duration {
	if h.renewed() {
		return o.watchdogTimeout + o.renewInterval
	}
	return max(time.Until(h.wd.Deadline()), 0)
}
