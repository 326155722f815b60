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
func (t *lockTable) release(ctx context.Context, l *Lease) (*Lease, error) {
	ctx, cancel := t.releaseContext(ctx)
	defer cancel()
	name := l.h.e.name
	l.h.owner.lockCalls(lockRef{t.id, name})
	defer l.h.owner.unlockCalls(lockRef{t.id, name})
	if a := l.pendingRelease(); a != nil {
		return nil, t.resend(ctx, l, *a)
	}
	publish := t.publishCommand(ctx)
	for try := 0; ; try++ {
		req, err := t.prepareRelease(l, publish, try > 0)
		if err != nil {
			return nil, err
		}
		r, err := t.backend.release(ctx, req.a)
		if err != nil {
			return nil, t.releaseFailed(&req, err)
		}
		t.mu.Lock()
		back, again, err := t.released(&req, r)
		t.mu.Unlock()
		if errors.Is(err, ErrLockLost) {
			t.obs.lost(l.h.e.lk.seen, name, err)
		}
		switch {
		case again && try > 0:
			return nil, t.conflict(l)
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
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	return l.resend
}

// resend sends again a, the release of an owner's last lease whose first try was
// not confirmed, so that a retried Unlock frees the lock at once rather than by
// its expiry; its latch recognises a first try that ran. The lease ended with
// the first try: a confirmed resend turns its Err into ErrUnlocked.
func (t *lockTable) resend(ctx context.Context, l *Lease, a lua.ReleaseArgs) error {
	r, err := t.backend.release(ctx, a)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		u := &UnlockUnconfirmedError{Lock: l.h.e.name, ExpiresWithin: l.h.expiresWithin(t.opts), Err: err}
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
func (t *lockTable) prepareRelease(l *Lease, publish string, again bool) (releaseReq, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
		LatchTTL: t.latchTTL, Publish: publish, Quiet: h.e.lk.spin != nil, Acks: l.acks,
	}}
	if len(h.leases) == 1 {
		req.a.Levels = h.count
	}
	req.sent = time.Now()
	if req.a.Levels < h.count {
		req.a.Lease = h.remainingLease(l, t.watched)
		return req, nil
	}
	h.beginRelease()
	if h.e.lk.handsOff() && t.ctx.Err() == nil && req.a.Acks.Replicas == 0 && t.opts.acks.Replicas == 0 {
		req.succ = h.e.successor() // with acknowledgements, the next holder's own acquisition waits for them
	}
	if req.succ != nil {
		req.a.Successor = req.succ.o.field(t.id)
		req.a.SuccessorLease = req.succ.lo.lease(t.watched)
		req.a.Streak = h.e.pace.limit()
	}
	return req, nil
}

// conflict ends l, whose release found the owner's hold count changed under
// it twice (it did not run), and returns the ErrConflict error it ended with.
// The lease ended as its release was sent; the owner's other leases keep the
// hold, whose count the next call resynchronises; the owner's last lease ends
// the hold, no longer renewed, so that the lock expires within its lease.
func (t *lockTable) conflict(l *Lease) error {
	h := l.h
	t.mu.Lock()
	defer t.mu.Unlock()
	err := fmt.Errorf("%w: unlock %s: the owner's hold count kept changing; not renewed, the lock expires within %v",
		ErrConflict, quote(h.e.name), h.expiresWithin(t.opts).Round(time.Millisecond))
	left := h.gaveBack(l, 0)
	l.ended.settle(err)
	if left == 0 {
		t.endHold(h, err)
		t.forget(h.e)
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
func (t *lockTable) releaseFailed(req *releaseReq, err error) error {
	l := req.l
	h, name := l.h, l.h.e.name
	t.mu.Lock()
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
		err = l.unconfirmed(final, unreachable(t.where, err))
	}
	switch {
	case lost != nil:
		t.endHold(h, lost)
	case final:
		t.endHold(h, err)
		resend := req.a // a copy: req stays on the caller's stack
		l.resend = &resend
		l.resend.Successor, l.resend.SuccessorLease, l.resend.Streak = lua.Text{}, lua.Millis{}, 0
	}
	t.forget(h.e)
	t.mu.Unlock()
	if lost != nil {
		t.obs.lost(h.e.lk.seen, name, lost)
	}
	if undo != nil {
		// The lock may have been handed to a waiter that has left since.
		t.undoAcquire(t.acquireArgs(h.e.lk, undo.o, undo.lo))
	}
	return err
}

// unconfirmed ends l, whose release failed with err, and returns the error
// that says so. The owner's last lease (final) ends the hold (its caller does
// so), whose lock then expires within its lease at most; otherwise the owner's
// other leases keep the hold, whose count the next call resynchronises. t.mu
// must be held.
func (l *Lease) unconfirmed(final bool, err error) error {
	h := l.h
	u := &UnlockUnconfirmedError{Lock: h.e.name, Err: err}
	switch {
	case !final:
		u.Others = h.gaveBack(l, 0)
		l.ended.settle(u)
	default:
		u.ExpiresWithin = h.expiresWithin(l.t.opts)
	}
	return u
}

// released applies what Redis answered to a release. again asks for the release
// to be sent once more, after the owner's count was resynchronised. t.mu must be
// held.
func (t *lockTable) released(req *releaseReq, r lua.ReleaseReply) (back *Lease, again bool, err error) {
	l, succ := req.l, req.succ
	h := l.h
	e := h.e
	h.endRelease()
	defer t.forget(e)
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
		t.endHold(h, ErrUnlocked)
		e.published(succ)
		return nil, false, nil
	case lua.HandedOff:
		t.endHold(h, ErrUnlocked)
		if succ == nil {
			// A retried execution by go-redis of a release that handed the
			// lock to the head of then: the head attempts at once, which
			// recognises such a hand-off.
			e.notHandedOff(nil, time.Now())
			return nil, false, nil
		}
		return t.handedOff(e, succ, req.sent), false, nil
	case lua.Resync:
		if lost := t.resync(h, r.Count); lost != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
		}
		return nil, true, nil
	default: // lua.NotHeld: the hold expired or was deleted before this unlock
		e.notHandedOff(succ, time.Now())
		lost := fmt.Errorf("%w: %s: the lock expired or was force-unlocked before Unlock", ErrLockLost, quote(e.name))
		t.endHold(h, lost)
		return nil, false, fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
}

// remainingLease returns the lease a partial release re-applies: the watchdog
// timeout while a watchdog lease stays open, else the lease of the latest
// acquisition that stays open (Redisson re-applies the last lease used). t.mu
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

// handedOff completes a hand-off to succ that Redis confirmed, sent at sent: the
// hold (and its renewal) is recorded before succ can see it, and the lease is
// delivered on succ.grant. When succ left the queue while the release was in
// flight, or the client was closed meanwhile, nobody wants the lock: the lease
// is returned, for the releaser to give back. A reply that came after succ's
// lease may have run out delivers nothing: the hold may be gone and the lock
// someone else's, so succ attempts at once, as after a hand-off whose outcome is
// unknown (its acquire recognises a hold still there and renews it). t.mu must
// be held.
func (t *lockTable) handedOff(e *lockEntry, succ *waiter, sent time.Time) (giveBack *Lease) {
	a := t.acquireArgs(e.lk, succ.o, succ.lo)
	closed := t.ctx.Err() != nil
	if !closed && late(sent, a.Lease) && e.handOffUnsure(succ) == nil {
		return nil
	}
	l := t.grant(succ.o, e.lk, a, succ.lo, sent, 0)
	if closed {
		e.notHandedOff(succ, time.Now()) // succ, if still queued, leaves with ErrClosed
		return l
	}
	e.handOffDone()
	if was, _ := t.remove(e, succ); !was {
		return l
	}
	succ.grant <- l
	return nil
}

// giveBack unlocks a lease handed to a waiter that had left, and the leases of
// any further such hand-offs. Failures are ignored: the hold then expires with
// its lease.
func (t *lockTable) giveBack(ctx context.Context, l *Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.latchTTL.Duration())
	defer cancel()
	for l != nil {
		next, err := t.release(ctx, l)
		if err != nil && t.opts.logger != nil {
			t.opts.logger.Warn("rlock: could not give back a lock handed to a waiter that had left; it expires with its lease",
				"lock", quote(l.Name()), "error", err)
		}
		l = next
	}
}
