package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
)

// Locker is what every lock of this package offers, so that code can take "a
// lock" without caring which: Mutex, NonReentrantMutex, FencedMutex, SpinMutex,
// FairMutex, NonReentrantFairMutex and both sides of an RWMutex implement it.
type Locker interface {
	Name() string
	Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error)
	TryLock(ctx context.Context, opts ...TryOption) (*Lease, error)
	Unlock(ctx context.Context) error
	IsLocked(ctx context.Context) (bool, error)
	IsHeld(ctx context.Context) (bool, error)
	HoldCount(ctx context.Context) (int, error)
	RemainTTL(ctx context.Context) (time.Duration, error)
	ForceUnlock(ctx context.Context) (bool, error)
}

var (
	_ Locker = (*Mutex)(nil)
	_ Locker = (*NonReentrantMutex)(nil)
	_ Locker = (*FencedMutex)(nil)
	_ Locker = (*SpinMutex)(nil)
	_ Locker = (*FairMutex)(nil)
	_ Locker = (*NonReentrantFairMutex)(nil)
	_ Locker = (*ReadMutex)(nil)
	_ Locker = (*WriteMutex)(nil)
)

// NewMutex returns a handle on the reentrant lock called name (Redisson's RLock
// from getLock(name)). The handle is cheap, holds no state of its own and is safe
// for concurrent use: create one where convenient. Any string is a valid name but
// the empty one and those whose channel and latch keys could not share the
// name's Redis Cluster hash slot (see below); a name with a {hash tag} keeps it
// in Redis Cluster.
//
// The lock's channel and unlock latches are named from the name by Redisson's
// rule ("redisson_lock__channel:{name}", or ":name" when the name has a '{'),
// which keeps them in the name's slot unless the name has a '}' but no non-empty
// {tag} at its first '{' ("a}b", "acc:{}:x") or a '{' that no '}' closes ("a{b").
// For those, every method of the Mutex returns an error matching
// ErrInvalidArgument that says so, on any deployment, so that a program tested
// on one server does not fail on a cluster.
func (c *Client) NewMutex(name string) *Mutex {
	m := newMutex(c, name, kind{})
	return &m
}

// NonReentrantMutex is a lock that its owner cannot take twice (Redisson's
// getNonReentrantLock): a second Lock or TryLock by the owner that holds it
// fails at once with ErrNonReentrant, and the hold count stays 1. Otherwise it
// is a Mutex, on the same keys.
type NonReentrantMutex struct{ Mutex }

// NewNonReentrantMutex returns a handle on the non-reentrant lock called name.
func (c *Client) NewNonReentrantMutex(name string) *NonReentrantMutex {
	return &NonReentrantMutex{newMutex(c, name, kind{nonReentrant: true})}
}

// FencedMutex is a Mutex whose every acquisition, reentrant ones included,
// takes a fencing token (Redisson's getFencedLock): Lease.Token returns a number
// greater than every token of the lock before it, whichever client (Java
// included) took those. A resource that remembers the highest token it has seen
// and refuses smaller ones turns away a holder that lost the lock while paused
// (see docs/safety.md). The counter is Redisson's key redisson_lock_token:{name},
// which no unlock resets. A release never hands the lock straight to a waiter of
// the client: every holder's token comes from its own acquisition.
type FencedMutex struct{ Mutex }

// NewFencedMutex returns a handle on the fenced lock called name.
func (c *Client) NewFencedMutex(name string) *FencedMutex {
	return &FencedMutex{newMutex(c, name, kind{fenced: true})}
}

// Token returns the lock's latest fencing token, without acquiring: 0 when none
// was ever taken (Redisson's getToken).
func (m *FencedMutex) Token(ctx context.Context) (_ int64, err error) {
	ctx, ob := m.startCall(ctx, observe.OpToken)
	defer ob.endCall(&err)
	if err := m.check(); err != nil {
		return 0, err
	}
	t, err := m.c.rdb.Get(ctx, lua.TokenName(m.name)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, m.wrap(err)
	}
	return t, nil
}

// SpinMutex is a Mutex whose waiters do not use pub/sub (Redisson's
// getSpinLock): they retry after the pauses of a Backoff, and its releases
// publish nothing, so that thousands of lock operations cost the cluster no
// messages. A waiter learns of a release only at its next attempt: up to the
// back-off's longest pause after it.
type SpinMutex struct{ Mutex }

// NewSpinMutex returns a handle on the spin lock called name, whose waiters
// pause as backoff says (DefaultBackoff when omitted). An invalid back-off, or
// more than one, makes every method return ErrInvalidArgument.
func (c *Client) NewSpinMutex(name string, backoff ...Backoff) *SpinMutex {
	b := Backoff(DefaultBackoff)
	if len(backoff) > 0 {
		b = backoff[0]
	}
	m := &SpinMutex{newMutex(c, name, kind{spin: b})}
	err := checkBackoff(b)
	if len(backoff) > 1 {
		err = fmt.Errorf("%w: %d back-offs given to NewSpinMutex, which takes at most one", ErrInvalidArgument, len(backoff))
	}
	if err != nil && m.bad == nil {
		m.bad = err
	}
	return m
}
