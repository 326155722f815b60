package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// Leadership is one term of a leader, returned by Campaign: it lasts until
// Resign, until the leadership is lost (the lock's lease ran out unrenewed,
// or its key was deleted or replaced), or until the Client is closed. Done
// and Err say when and why, as a Lease's: a loss is known at once with client
// tracking, and never later than the lease's deadline. A leader that checks
// Err before each act it must only do while leading, and hands Token to the
// resources it writes, is safe even when paused past its lease (see
// docs/election.md). A Leadership is safe for concurrent use.
type Leadership struct {
	e     *Election
	lease *Lease
	mu    sync.Mutex
	value string
}

// Done returns a channel that is closed when the leadership ends: Resign,
// loss, or Close (see Lease.Done).
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Err returns nil while the caller leads, and then why it no longer does: an
// error matching ErrUnlocked after Resign, ErrLockLost after a loss,
// ErrClosed after Close (see Lease.Err). It compares the lease's deadline with
// the clock when called.
func (l *Leadership) Err() error { return l.lease.Err() }

// Token returns the term's fencing token: greater than every earlier term's
// of the election, whoever led then.
func (l *Leadership) Token() int64 { return l.lease.Token() }

// Value returns the value the leader proclaimed last (Campaign, Proclaim).
func (l *Leadership) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Name returns the election's name.
func (l *Leadership) Name() string { return l.e.name }

// Holder returns the leader's owner field in the lock's hash, as
// LeaderInfo.Holder shows it.
func (l *Leadership) Holder() string { return l.lease.Holder() }

// Proclaim sets the leader's value, keeping the leadership and its term,
// and announces it to followers: one round trip. On a leadership that has
// ended it returns an error matching ErrNotLeader and Err's reason, and
// changes nothing; one found lost in Redis ends with ErrLockLost.
func (l *Leadership) Proclaim(ctx context.Context, value string) (err error) {
	ctx, ob := l.e.startCall(ctx, observe.OpProclaim)
	defer ob.endCall(&err)
	if err := l.ended(); err != nil {
		return err
	}
	c := l.e.c
	ok, err := lua.Proclaim(ctx, c.rdb, l.e.lk.Lock, l.Holder(), l.Token(), value, c.publishCommand(ctx))
	switch {
	case err != nil:
		return l.e.wrap(err)
	case !ok:
		c.locks.lose(l.lease.h, errors.New("Proclaim found the election's lock no longer held"))
		return l.ended()
	}
	l.mu.Lock()
	l.value = value
	l.mu.Unlock()
	return nil
}

// Resign gives the leadership up: it releases the election's lock, which
// wakes the next candidate at once, and then clears the leader record and
// announces that there is no leader. The leadership ends (Err says
// ErrUnlocked, Done closes) before the release is sent: the next candidate
// may lead as soon as it runs, before its reply comes back. Like Lease.Unlock, it is bounded by the
// client's release timeout, not by ctx's cancellation. It returns the
// release's error (see Lease.Unlock): an error matching ErrNotLeader (and
// ErrNotHeld, or after Close ErrClosed) when the leadership had already
// ended, an *UnlockUnconfirmedError when Redis did not confirm the release (the
// leadership ended anyway; the lock expires within its lease). A failure to clear the record is not
// reported: a record whose holder no longer holds the lock is never read,
// and followers learn the change within their recheck interval.
func (l *Leadership) Resign(ctx context.Context) (err error) {
	ctx, ob := l.e.startCall(ctx, observe.OpResign)
	defer ob.endCall(&err)
	if err := l.lease.unlock(ctx); err != nil {
		if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return err
	}
	c := l.e.c
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	_, _ = lua.Resign(ctx, c.rdb, l.e.lk.Lock, l.Holder(), l.Token(), c.publishCommand(ctx))
	return nil
}

// ended returns nil while the caller leads, else an error matching
// ErrNotLeader and the reason.
func (l *Leadership) ended() error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: election %s: %w", ErrNotLeader, quote(l.e.name), err)
	}
	return nil
}
