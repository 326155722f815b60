package rlock

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// Lease is one acquisition of a lock: Unlock gives it back. Reentrant
// acquisitions by one owner each get their own Lease, and they may be unlocked
// in any order. Done is closed when the lease ends, by Unlock or because the hold
// was lost; Err then says why. A Lease is safe for concurrent use.
type Lease struct {
	c     *Client
	h     *hold
	lease time.Duration // fixed lease; 0 for a watchdog lease
	acks  lua.Acks      // replica acknowledgements its release waits for
	token int64         // fencing token of a FencedMutex acquisition, else 0
	done  chan struct{} // made by the first Done call; guarded by c.mu
	err   error         // guarded by c.mu; set when the lease ends

	// latch is the unlock latch of an unlock whose outcome is unknown (its call
	// failed), reused when Unlock is called again so that it recognises what the
	// first call did. Guarded by the owner's call on the lock (owner.begin).
	latch string
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

// Done returns a channel that is closed when the lease ends: after Unlock, when
// the hold is lost (its lease ran out, a renewal found the lock gone, or no
// renewal was confirmed in time), or when the Client is closed.
func (l *Lease) Done() <-chan struct{} {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.done == nil {
		// Made on demand: most callers never ask, and a channel per lease would
		// cost an allocation on the hot path.
		l.done = make(chan struct{})
		if l.err != nil {
			close(l.done)
		}
	}
	return l.done
}

// Err returns nil while the lease is held, and once Done is closed why it ended:
// an error matching ErrUnlocked, ErrLockLost or ErrClosed.
func (l *Lease) Err() error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.err
}

// Unlock gives the lease back: the owner's hold count goes down by one, and the
// lock is released when it reaches zero (see Mutex for what happens then). It
// makes one round trip and is safe to retry after a failure: a retried unlock of
// the same lease is recognised even if the first one was executed. It returns an
// error matching ErrNotHeld when the lease already ended (unlocked, or lost:
// then it also matches ErrLockLost) and leaves the lock unchanged. On any other
// error (Redis unreachable) the lease stays open and the hold is kept renewed.
func (l *Lease) Unlock(ctx context.Context) error {
	back, err := l.c.release(ctx, l)
	if back != nil {
		l.c.giveBack(ctx, back)
	}
	return err
}

// end closes the lease's Done with err, once. c.mu must be held.
func (l *Lease) end(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	if l.done != nil {
		close(l.done)
	}
}
