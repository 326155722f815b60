package rlock

import (
	"context"
	"sync"
)

// Context returns a copy of parent that is cancelled when the lease ends
// (Unlock, loss, Close: see Done), with the reason as its cause:
// context.Cause(ctx) then returns the error Err returned as the lease ended,
// matching ErrUnlocked, ErrLockLost or ErrClosed as Err does (Err may restate
// it later, with the release's outcome: ErrUnlockUnconfirmed). It is
// also cancelled when parent is (with parent's cause), or when cancel is
// called (context.Canceled). Work that must stop when the hold ends runs under
// ctx, which is cancelled as Done closes; a write that must not happen after
// the hold ended still asks Err right before it (docs/safety.md).
//
// No goroutine watches the lease: the lease's end cancels ctx directly.
// Calling cancel releases what ctx holds; call it when the work is done, as
// with context.WithCancel. A lease that has already ended returns a ctx
// already cancelled.
func (l *Lease) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	l.t.checkDeadline(l.h)
	return holdContext(parent, &l.ended, l.Err)
}

// Context returns a copy of parent that is cancelled when the permits end
// (Release, loss, Close: see Done), with the reason as its cause:
// context.Cause(ctx) then matches ErrReleased, ErrPermitLost,
// ErrUnlockUnconfirmed or ErrClosed, as Err does. It is also cancelled when
// parent is, or when cancel is called; call cancel when the work is done.
// See Lease.Context.
func (p *Permits) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	p.checkDeadline()
	return holdContext(parent, &p.ended, p.ended.Err)
}

// Context returns a copy of parent that is cancelled when the leadership ends
// (Resign, loss, Close: see Done), with the reason as its cause:
// context.Cause(ctx) then matches ErrUnlocked, ErrLockLost or ErrClosed, as
// Err does. It is also cancelled when parent is, or when cancel is called;
// call cancel when the work is done. The leader's work runs under ctx, so
// that it stops when the term ends (docs/election.md). See Lease.Context.
func (l *Leadership) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	return l.lease.Context(parent)
}

// Context returns a copy of parent that is cancelled when the lease ends
// (Unlock, the loss of a part, the end of a RedLock's validity, Close: see
// Done), with the reason as its cause, as Err says it. It is also cancelled
// when parent is, or when cancel is called; call cancel when the work is done.
// See Lease.Context.
func (l *MultiLease) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	return holdContext(parent, &l.ended, l.Err) // Err checks the deadlines
}

// holdContext returns a ctx derived from parent that e's end cancels with its
// reason as the cause, without a goroutine: the cancellation is registered
// with e, and removed when ctx ends otherwise. errNow is the handle's Err, asked
// once at the start (a handle may report an end e does not know yet).
func holdContext(parent context.Context, e *ending, errNow func() error) (context.Context, context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	if err := errNow(); err != nil {
		cancelCause(err)
		return ctx, func() { cancelCause(context.Canceled) }
	}
	forget := e.watch(func(err error) { cancelCause(err) })
	// parent's end (or cancel's) unregisters the watch; cancel does it at once,
	// so that nothing is left behind when it returns.
	stop := context.AfterFunc(ctx, forget)
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			if stop() {
				forget()
			}
		})
		cancelCause(context.Canceled)
	}
}
