package rlock

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// Special durations, Redisson's -2 and -1.
const (
	// NotLocked is what RemainTTL returns for a lock that is free.
	NotLocked time.Duration = -2

	// NoExpiry stands for "never expires": what RemainTTL returns for a lock
	// with no time to live (set by another program), what
	// ExpirableSemaphore.LeaseTime returns for a permit without expiry, what
	// ExpirableSemaphore.UpdateLease takes to remove a permit's expiry, and
	// LeaderInfo.TTL's value for a leader whose lock has no time to live.
	NoExpiry time.Duration = -1
)

// Mutex is a handle on a reentrant distributed lock: Redisson's RLock. It stores
// only the client and the name, so it is cheap and safe for concurrent use.
//
// In Redis the lock is a hash at the lock's name whose only field is the holding
// owner, "<client id>:<owner id>", with its hold count as value. A Java process
// using Redisson's getLock(name) on the same Redis sees the same lock: the two
// exclude each other and wake each other's waiters.
//
// The owner comes from ctx (see WithOwner). An owner that already holds the lock
// re-enters it at once, each acquisition returning its own Lease; the lock is
// released when every lease is unlocked. A ctx without an owner acquires for a
// fresh owner each time, so a second Lock with such a ctx waits like sync.Mutex.
//
// Waiting is driven by Redis pub/sub, not polling (see Lock). When an owner of this
// client releases the lock while another goroutine of this client waits for it,
// the release hands the lock straight to the longest-waiting goroutine in the same
// round trip; after a few hand-offs in a row it publishes the release instead, so
// that other processes get their turn. Across processes the lock is not fair, as
// Redisson's RLock.
type Mutex struct {
	c    *Client
	name string
	lk   *lockDef // the name's keys and channel, encoded once for the scripts, and the kind
	bad  error    // why the name cannot be a lock (checkName), returned by every method
}

// newMutex returns the handle of the lock name of kind k.
func newMutex(c *Client, name string, k kind) Mutex {
	return newLayoutMutex(c, name, lua.LayoutLock, k)
}

// newLayoutMutex returns the handle of the lock name of the layout l and kind k.
func newLayoutMutex(c *Client, name string, l lua.Layout, k kind) Mutex {
	return Mutex{c: c, name: name, lk: newLockDef(name, l, k), bad: checkName(name)}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// TryLock makes one attempt to acquire the lock (one round trip), or with
// WithWaitTime waits up to that time (Redisson's tryLock(waitTime, leaseTime)).
// Without WithLeaseTime the lock has a watchdog lease, renewed while held; with
// it, the lock expires after that lease unless unlocked before.
//
// When the lock is held by another owner it returns an error matching
// ErrNotAcquired; when ctx ends the wait, the error also matches ctx.Err(). It
// returns ErrWrongType when the name holds a value that is not a lock (another
// type, or a hash of another shape: see ForceUnlock), ErrLockLost
// when the owner's earlier holds of this lock were lost, ErrInvalidArgument for an
// empty name or a negative duration (before any round trip), and wrapped Redis
// errors. A call that fails leaves no hold, subscription or renewal behind.
func (m *Mutex) TryLock(ctx context.Context, opts ...TryOption) (_ *Lease, err error) {
	ctx, ob := m.startCall(ctx, observe.OpTryLock)
	defer ob.endCall(&err)
	lo, err := newTryLockOptions(opts)
	if err != nil {
		return nil, err
	}
	return m.tryLock(ctx, lo)
}

// tryLock is TryLock with its options read.
func (m *Mutex) tryLock(ctx context.Context, lo lockOptions) (*Lease, error) {
	if m.bad != nil {
		return nil, m.bad
	}
	var deadline time.Time
	if lo.waitTime > 0 {
		deadline = time.Now().Add(lo.waitTime)
	}
	return m.c.locks.obtain(ctx, m.lk, ownerFrom(ctx), lo, lo.waitTime > 0, deadline)
}

// Lock acquires the lock, waiting until it is free or ctx is done (Redisson's
// lock(), interruptible by ctx). WithLeaseTime applies as in TryLock. To
// bound the wait, give ctx a deadline (context.WithTimeout), or use TryLock
// with WithWaitTime.
//
// Waiting costs no polling: the client's waiters on a lock queue in arrival
// order, and only the first, the head, talks to Redis. It subscribes to the
// lock's release channel (one subscription shared by the queue) and attempts
// again on each release message, when the holder's remaining lease as last read
// from Redis has passed, or at once when a hold of this client ends without an
// unlock (lost, expired, force-unlocked), whichever comes first. A lost message
// thus delays a waiter by at most the holder's remaining lease. A release by an
// owner of this client hands the lock to the head in the same round trip.
//
// When ctx ends the wait the error matches both ErrNotAcquired and ctx.Err(),
// unless the lock was handed to the call at that very moment: then it returns
// the lease. When an owner of this client holds the lock, the error names it:
// a Lock nested in code that holds the lock waits for it, as sync.Mutex does,
// unless its ctx carries the holder's owner (see WithOwner). The other errors
// are those of TryLock.
func (m *Mutex) Lock(ctx context.Context, opts ...AcquireOption) (_ *Lease, err error) {
	ctx, ob := m.startCall(ctx, observe.OpLock)
	defer ob.endCall(&err)
	lo, err := newLockOptions(opts)
	if err != nil {
		return nil, err
	}
	return m.lock(ctx, lo)
}

// lock is Lock with its options read.
func (m *Mutex) lock(ctx context.Context, lo lockOptions) (*Lease, error) {
	if m.bad != nil {
		return nil, m.bad
	}
	return m.c.locks.obtain(ctx, m.lk, ownerFrom(ctx), lo, true, time.Time{})
}

// Unlock gives back the most recent open lease of ctx's owner on this lock, for
// code where lock and unlock sit in different functions (Redisson's unlock()). It
// returns an error matching ErrNotHeld, and changes nothing, when the owner holds
// no lease of this lock (or ctx has no owner). See Lease.Unlock.
func (m *Mutex) Unlock(ctx context.Context) (err error) {
	ctx, ob := m.startCall(ctx, observe.OpUnlock)
	defer ob.endCall(&err)
	if m.bad != nil {
		return m.bad
	}
	o := ownerFrom(ctx)
	if o == nil {
		return fmt.Errorf("%w: %s: ctx has no owner (see WithOwner); unlock through the Lease", ErrNotHeld, quote(m.name))
	}
	m.c.locks.mu.Lock()
	h := m.c.locks.holdOf(o, m.lk)
	var l *Lease
	if h != nil && len(h.leases) > 0 {
		l = h.leases[len(h.leases)-1]
	}
	m.c.locks.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: %s", ErrNotHeld, quote(m.name))
	}
	return l.unlock(ctx)
}

// ForceUnlock deletes the lock whoever holds it, and announces the release to
// waiters (Redisson's forceUnlock). It reports whether the lock existed. Leases
// on the lock end with ErrLockLost: at once in this client, and in another
// client at once with client tracking (WithTracking), else at its next renewal. A key that is not a lock is left
// alone: ErrWrongType. That is a key of another type, or a hash with a field
// other than owner fields ("<client id>:<owner id>", with a positive integer
// count) and a read/write lock's "mode" ("read" or "write"); Redisson would
// delete it.
func (m *Mutex) ForceUnlock(ctx context.Context) (_ bool, err error) {
	ctx, ob := m.startCall(ctx, observe.OpForceUnlock)
	defer ob.endCall(&err)
	if err := m.check(); err != nil {
		return false, err
	}
	ok, err := lua.ForceRelease(ctx, m.c.rdb, m.lk.Lock, m.c.publishCommand(ctx))
	if err != nil {
		return false, m.wrap(err)
	}
	lost := fmt.Errorf("%w: %s: %w", ErrLockLost, quote(m.name), errForceUnlocked)
	if !ok {
		return false, nil
	}
	m.c.locks.mu.Lock()
	for _, id := range m.lk.keyIDs() {
		if e := m.c.locks.entries[id]; e != nil {
			for len(e.holds) > 0 {
				m.c.locks.endHold(e.holds[0], lost)
			}
		}
	}
	m.c.locks.mu.Unlock()
	return ok, nil
}

// IsLocked reports whether any owner, of any client, holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (_ bool, err error) {
	ctx, ob := m.startCall(ctx, observe.OpIsLocked)
	defer ob.endCall(&err)
	in, err := m.inspect(ctx, "")
	return in.Locked, err
}

// IsHeld reports whether ctx's owner holds the lock (Redisson's
// isHeldByCurrentThread). It is false for a ctx without an owner.
func (m *Mutex) IsHeld(ctx context.Context) (_ bool, err error) {
	ctx, ob := m.startCall(ctx, observe.OpIsHeld)
	defer ob.endCall(&err)
	n, err := m.holdCount(ctx)
	return n > 0, err
}

// HoldCount returns how many times ctx's owner holds the lock, as recorded in
// Redis (Redisson's getHoldCount); 0 for a ctx without an owner.
func (m *Mutex) HoldCount(ctx context.Context) (_ int, err error) {
	ctx, ob := m.startCall(ctx, observe.OpHoldCount)
	defer ob.endCall(&err)
	return m.holdCount(ctx)
}

// holdCount is HoldCount.
func (m *Mutex) holdCount(ctx context.Context) (int, error) {
	o := ownerFrom(ctx)
	if o == nil {
		return 0, m.check()
	}
	in, err := m.inspect(ctx, m.lk.fieldOf(o, m.c.id).String())
	return int(in.Count), err
}

// RemainTTL returns the lock's remaining time to live (Redisson's
// remainTimeToLive): NotLocked when it is free, NoExpiry when it has no expiry.
func (m *Mutex) RemainTTL(ctx context.Context) (_ time.Duration, err error) {
	ctx, ob := m.startCall(ctx, observe.OpRemainTTL)
	defer ob.endCall(&err)
	in, err := m.inspect(ctx, "")
	if err != nil || !in.Locked {
		return NotLocked, err
	}
	return in.TTL, nil
}

func (m *Mutex) inspect(ctx context.Context, field string) (lua.Inspection, error) {
	if err := m.check(); err != nil {
		return lua.Inspection{}, err
	}
	in, err := lua.Inspect(ctx, m.c.rdb, m.lk.Lock, field)
	if err != nil {
		return lua.Inspection{}, m.wrap(err)
	}
	return in, nil
}

// startCall starts reporting a public call of op on m (see Client.begin).
func (m *Mutex) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	return m.c.obs.startCall(ctx, m.lk.seen, op, m.name)
}

func (m *Mutex) check() error {
	if m.bad != nil {
		return m.bad
	}
	if m.c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

func (m *Mutex) wrap(err error) error {
	if lua.IsWrongType(err) {
		return fmt.Errorf("%w: %s is not a lock", ErrWrongType, quote(m.name))
	}
	return fmt.Errorf("rlock: %s: %w", quote(m.name), unreachable(m.c.where, err))
}
