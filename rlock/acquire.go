package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// attempt makes one acquisition attempt of name for o: one round trip, two when
// the owner's hold count had to be resynchronised. It returns the new lease, or
// an error matching ErrNotAcquired and the holder's remaining lease (-1: none).
func (t *lockTable) attempt(ctx context.Context, o *owner, lk *lockDef, lo lockOptions) (*Lease, time.Duration, error) {
	name := lk.Name()
	o.lockCalls(lockRef{t.id, name})
	defer o.unlockCalls(lockRef{t.id, name})
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		return nil, 0, ErrClosed
	}
	var expected int64
	if h := t.holdOf(o, lk); h != nil {
		expected = h.count
	}
	t.mu.Unlock()
	a := t.acquireArgs(lk, o, lo)
	a.Publish = t.publishCommand(ctx)
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, waitEnded(ctx, name, true)
		}
		a.Expected = expected
		sent := time.Now()
		r, err := t.backend.acquire(ctx, a)
		switch {
		case err != nil:
			return nil, 0, t.acquireFailed(a, err)
		case r.Acquired && r.Acked < a.Acks.Replicas:
			t.undoAcquire(a)
			return nil, 0, &NotReplicatedError{Lock: name, Acked: r.Acked, Wanted: a.Acks.Replicas, Timeout: a.Acks.Timeout}
		case r.Acquired:
			l, err := t.acquired(o, lk, a, lo, sent, r.Token)
			return l, 0, err
		case !r.Resync:
			return nil, r.TTL, fmt.Errorf("%w: %s is held by another owner", ErrNotAcquired, quote(name))
		case try > 0:
			return nil, 0, fmt.Errorf("%w: lock %s", ErrConflict, quote(name))
		}
		if err := t.adopt(o, lk, r.Count); err != nil {
			return nil, 0, err
		}
		expected = r.Count
	}
}

// acquired records an acquisition Redis confirmed, unless the client was closed
// meanwhile or the reply came after the lease it set may have run out: then it
// is undone. A late first acquisition counts as not acquired (the lock may
// be free again: a waiting call attempts again at once); a late reentry means
// the owner's hold is lost, as the script set the key's lease to one that may
// have run out.
func (t *lockTable) acquired(o *owner, lk *lockDef, a lua.AcquireArgs, lo lockOptions, sent time.Time, token int64) (*Lease, error) {
	t.mu.Lock()
	var err error
	switch {
	case t.ctx.Err() != nil:
		err = ErrClosed
	case late(sent, a.Lease) && a.Expected > 0:
		err = fmt.Errorf("%w: %s: Redis answered a reentrant acquisition after its lease of %v may have run out",
			ErrLockLost, quote(lk.Name()), a.Lease.Duration())
		if h := t.holdOf(o, lk); h != nil {
			t.endHold(h, err)
		}
	case late(sent, a.Lease):
		err = fmt.Errorf("%w: %s: Redis answered after the lease of %v may have run out",
			ErrNotAcquired, quote(lk.Name()), a.Lease.Duration())
	default:
		l := t.grant(o, lk, a, lo, sent, token)
		t.mu.Unlock()
		return l, nil
	}
	t.mu.Unlock()
	t.undoAcquire(a)
	if errors.Is(err, ErrLockLost) {
		t.obs.lost(lk.seen, lk.Name(), err)
	}
	return nil, err
}

// acquireFailed turns a failed acquire into the caller's error. When the call
// may have run and only its reply was lost, the acquisition is undone; not
// when it never left the client (Redis refused the connection: the undo would
// fail the same way, after as long again).
func (t *lockTable) acquireFailed(a lua.AcquireArgs, err error) error {
	if lua.IsWrongType(err) {
		return fmt.Errorf("%w: %s is not a lock", ErrWrongType, quote(a.Lock.Name()))
	}
	if !isReply(err) && !notSent(err) {
		t.undoAcquire(a)
	}
	return fmt.Errorf("rlock: lock %s: %w", quote(a.Lock.Name()), unreachable(t.where, err))
}

// adopt takes Redis' count of o's holds on name, which disagreed with the
// client's: holds left by calls whose reply never arrived are counted (the
// owner's last Unlock gives them back), holds gone from Redis are lost.
func (t *lockTable) adopt(o *owner, lk *lockDef, count int64) error {
	t.mu.Lock()
	h := t.holdOf(o, lk)
	var lost error
	if h != nil {
		lost = t.resync(h, count)
	}
	t.mu.Unlock()
	if lost != nil {
		t.obs.lost(lk.seen, lk.Name(), lost)
	}
	return lost
}

// acquireArgs returns the first acquisition of lk by o with options lo.
func (t *lockTable) acquireArgs(lk *lockDef, o *owner, lo lockOptions) lua.AcquireArgs {
	acks := t.opts.acks
	if lo.acks != nil {
		acks = *lo.acks
	}
	a := lua.AcquireArgs{Lock: lk.Lock, Fenced: lk.fenced || lo.elect != nil, Elect: lo.elect,
		Field: lk.fieldOf(o, t.id), Lease: lo.lease(t.watched), Acks: acks}
	if lk.Layout() == lua.LayoutFair && lo.queue {
		a.Wait = lo.waitTime
		if a.Wait <= 0 {
			a.Wait = t.opts.fairWait
		}
	}
	return a
}

// undoAcquire takes back an acquisition a whose outcome is unknown or unwanted:
// it releases one hold if and only if the owner's count is a.Expected+1, so it is
// a no-op when the acquisition did not happen. It is bounded by the release
// timeout, as an Unlock is: it runs on the caller's path, and the caller's
// wait must not outlive its ctx by more. Failures are ignored: the hold then
// expires with its lease.
//
// An acquisition whose reply was cut short by the caller's deadline may not
// have run yet when the undo, sent on another connection, finds nothing to
// take back: the server reads the two connections in its own order. So an
// undo that finds nothing looks again once, undoRecheck later; an acquisition
// delayed longer than that (a slow network) keeps its lease until it expires.
func (t *lockTable) undoAcquire(a lua.AcquireArgs) {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.releaseTimeout)
	defer cancel()
	release := func() (lua.ReleaseReply, error) {
		return t.backend.release(ctx, lua.ReleaseArgs{
			Lock: a.Lock, Field: a.Field, Latch: a.Lock.NewLatch(), Lease: a.Lease,
			Expected: a.Expected + 1, Levels: 1, LatchTTL: t.latchTTL, Publish: t.publishCommand(ctx),
		})
	}
	if r, err := release(); err != nil || r.Outcome != lua.NotHeld {
		return
	}
	timer := time.NewTimer(undoRecheck)
	defer timer.Stop()
	select {
	case <-timer.C:
		_, _ = release()
	case <-ctx.Done():
	}
}

// late reports whether an acquisition sent at sent with lease, whose reply has
// just come, may have expired already: its lease would be dead on arrival.
func late(sent time.Time, lease lua.Millis) bool {
	return !time.Now().Before(sent.Add(lease.Duration()))
}

// undoRecheck is how long after an undo that found nothing it looks again.
const undoRecheck = 20 * time.Millisecond

// isReply reports whether err is an error reply from Redis (the command ran and
// failed), as opposed to a network or context error after which the command may
// or may not have run.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
