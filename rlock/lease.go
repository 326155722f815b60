package rlock

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// Lease is one acquisition of a lock: Unlock gives it back. Reentrant
// acquisitions by one owner each get their own Lease, and they may be unlocked
// in any order. Done is closed when the lease ends, by Unlock or because the hold
// was lost; Err then says why. A Lease is safe for concurrent use.
type Lease struct {
	t     *lockTable // the engine that granted it
	h     *hold
	lease time.Duration // fixed lease; 0 for a watchdog lease
	acks  lua.Acks      // replica acknowledgements its release waits for
	token int64         // fencing token of a FencedMutex acquisition, else 0
	ended ending        // ended (with t.mu held) when the lease ends

	// resend is the release of the owner's last lease whose outcome is
	// unknown (ErrUnlockUnconfirmed), which Unlock sends again if called
	// again: its latch recognises a first try that ran. Guarded by t.mu.
	resend *lua.ReleaseArgs
}

// Token returns the fencing token of an acquisition of a FencedMutex: a number
// greater than every token handed out before on the lock, by any client (Java
// included). It is 0 for the other locks.
func (l *Lease) Token() int64 { return l.token }

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.h.e.name }

// Holder returns the holding owner's field in the lock's hash, "<client id>:<owner
// id>" ("…:write" on a read/write lock's write side): Redisson's lock name of
// the holder, as HGETALL on the lock and holdfast status show it.
func (l *Lease) Holder() string { return l.h.field.String() }

// Done returns a channel that is closed when the lease ends: as Unlock sends
// its release (before Redis answers: see Err), when the hold is lost (its lease ran out, a renewal found the lock gone, or no
// renewal was confirmed in time), or when the Client is closed. It closes at the
// lease's deadline even if no renewal round ran: the last confirmed renewal's
// (or the acquisition's) send time plus the lease, on the monotonic clock. A
// channel obtained before a long pause of the process (SIGSTOP, a VM freeze)
// closes a scheduling delay after the process resumes; Err, asked right before
// each write, compares the deadline with the clock when called.
func (l *Lease) Done() <-chan struct{} {
	l.t.checkDeadline(l.h)
	return l.ended.Done()
}

// Err returns nil while the lease is held, and once it ended why: an error
// matching ErrUnlocked, ErrLockLost, ErrUnlockUnconfirmed or ErrClosed. The
// lease ends as Unlock sends its release, before Redis answers, since the next
// holder may hold the lock as soon as the release runs: from then on Err says
// ErrUnlocked, until the reply says otherwise (ErrUnlockUnconfirmed when it
// does not come; ErrLockLost when the hold had ended before). It never
// returns nil past the lease's deadline (see Done): it compares the deadline with
// the monotonic clock when called, so a holder that checks Err right before each
// write to the protected resource never writes after its lease may have run out,
// however long the process was paused. See docs/safety.md for the gap between
// the check and the write, which a fencing token closes.
func (l *Lease) Err() error {
	l.t.checkDeadline(l.h)
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	err := l.ended.Err()
	if err == nil && l.h.lostWhileReleasing != nil {
		return l.h.lostWhileReleasing // lost while its Unlock is in flight
	}
	return err
}

// Unlock gives the lease back: the owner's hold count goes down by one, and the
// lock is released when it reaches zero (see Mutex for what happens then). It
// makes one round trip. The lease ends (Err, Done) before the release is sent. The release does not end with ctx (an Unlock deferred
// with a ctx that has ended, such as a finished request's, still releases): it
// is bounded by the client's release timeout instead (WithReleaseTimeout), and
// ctx gives it only its values.
//
// It returns an error matching ErrNotHeld when the lease had already ended
// (lost: it also matches ErrLockLost) and leaves the lock unchanged; after Close,
// the error Close ended the lease with (ErrClosed). When Redis does not confirm
// the release in time (unreachable, a failover), the lease ends anyway and the
// hold is no longer renewed, so that the lock is released or expires by itself
// within its remaining lease: the error, an *UnlockUnconfirmedError matching
// ErrUnlockUnconfirmed, says how long at most. Calling Unlock again then sends
// the same release again, which frees the lock at once if Redis answers (a first
// try that ran is recognised): nil when it does.
func (l *Lease) Unlock(ctx context.Context) (err error) {
	ctx, ob := l.startCall(ctx, observe.OpLeaseUnlock)
	defer ob.endCall(&err)
	return l.unlock(ctx)
}

// unlock is Unlock.
func (l *Lease) unlock(ctx context.Context) error {
	back, err := l.t.release(ctx, l)
	if back != nil {
		l.t.giveBack(ctx, back)
	}
	return err
}

// startCall starts reporting a public call of op on l (see Client.begin).
func (l *Lease) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	return l.t.obs.startCall(ctx, l.h.e.lk.seen, op, l.h.e.name)
}
