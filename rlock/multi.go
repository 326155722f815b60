package rlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/observe"
)

// MultiLock takes several locks as one, all or none (Redisson's RedissonMultiLock):
// locks of one client or of several, on one Redis or on independent ones, in
// different slots of a Cluster. It is a handle like Mutex: cheap, stateless,
// safe for concurrent use.
//
// The locks are taken one after the other in a fixed order (by name, then by
// client id), so two MultiLocks over the same locks, listed in any order, never
// wait for each other in a cycle. Waiting for a part is that part's Mutex.Lock:
// pub/sub-driven, bounded by its holder's lease. A part that appears twice (the
// same client and name) is re-entered.
type MultiLock struct {
	parts []*Mutex // in acquisition order
}

// NewMultiLock returns a MultiLock over mutexes, which must not be empty.
func NewMultiLock(mutexes ...*Mutex) *MultiLock {
	parts := slices.Clone(mutexes)
	slices.SortStableFunc(parts, func(a, b *Mutex) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.c.id, b.c.id))
	})
	return &MultiLock{parts: parts}
}

// Lock takes every part, waiting for each in turn until ctx is done. On any
// failure it gives back the parts it took and returns the error, which matches
// what the failing part's Lock returned. Options apply to every part.
//
// Without an owner in ctx, the parts are taken for one fresh owner, so that a
// name listed twice is re-entered rather than waited for.
func (m *MultiLock) Lock(ctx context.Context, opts ...AcquireOption) (_ *MultiLease, err error) {
	ctx, ob := m.startCall(ctx, observe.OpLock)
	defer ob.endCall(&err)
	return m.take(ctx, func(ctx context.Context, p *Mutex) (*Lease, error) { return p.Lock(ctx, opts...) })
}

// TryLock takes every part with one attempt each, or with WithWaitTime waits up
// to that time for all of them together. When a part cannot be taken it gives
// back those it took and returns an error matching ErrNotAcquired.
func (m *MultiLock) TryLock(ctx context.Context, opts ...TryOption) (_ *MultiLease, err error) {
	ctx, ob := m.startCall(ctx, observe.OpTryLock)
	defer ob.endCall(&err)
	lo, err := newTryLockOptions(opts)
	if err != nil {
		return nil, err
	}
	if lo.waitTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, lo.waitTime, errWaitElapsed)
		defer cancel()
		lo.waitTime = 0
		return m.take(ctx, func(ctx context.Context, p *Mutex) (*Lease, error) { return p.lock(ctx, lo) })
	}
	return m.take(ctx, func(ctx context.Context, p *Mutex) (*Lease, error) { return p.tryLock(ctx, lo) })
}

// startCall starts reporting a public call of op on m, to the observer of its
// first part's client.
func (m *MultiLock) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	if len(m.parts) == 0 {
		return ctx, nil
	}
	return m.parts[0].c.obs.startCall(ctx, observe.KindMultiLock, op, m.parts[0].name)
}

// startCall starts reporting a public call of op on l, to the observer of its
// first part's client.
func (l *MultiLease) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	if len(l.parts) == 0 {
		return ctx, nil
	}
	return l.parts[0].t.obs.startCall(ctx, l.kind, op, l.parts[0].Name())
}

// take takes the parts in order with lock, or none.
func (m *MultiLock) take(ctx context.Context, lock func(context.Context, *Mutex) (*Lease, error)) (*MultiLease, error) {
	if len(m.parts) == 0 {
		return nil, fmt.Errorf("%w: a MultiLock needs at least one lock", ErrInvalidArgument)
	}
	if ownerFrom(ctx) == nil {
		ctx = WithOwner(ctx)
	}
	leases := make([]*Lease, 0, len(m.parts))
	for _, p := range m.parts {
		l, err := lock(ctx, p)
		if err != nil {
			giveBackAll(context.WithoutCancel(ctx), leases)
			return nil, err
		}
		leases = append(leases, l)
	}
	return newMultiLease(observe.KindMultiLock, leases, time.Time{}), nil
}

// giveBackAll unlocks leases, the last first, ignoring errors: a part that
// cannot be unlocked expires with its lease.
func giveBackAll(ctx context.Context, leases []*Lease) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := len(leases) - 1; i >= 0; i-- {
		_ = leases[i].Unlock(ctx)
	}
}

// MultiLease is the acquisition of a MultiLock or a RedLock: the leases of its
// parts, given back together. It ends as soon as any part's lease ends, or, for
// a RedLock with a fixed lease, when its validity ends (ValidUntil).
type MultiLease struct {
	kind       observe.Kind // KindMultiLock or KindRedLock, for the observer
	parts      []*Lease
	validUntil time.Time   // RedLock with a fixed lease: the end of its validity
	timer      *time.Timer // ends the lease at validUntil
	ended      ending
}

// newMultiLease returns the lease of parts taken by a lock of kind k, valid
// until validUntil when it is set; it ends with the first part that ends.
func newMultiLease(k observe.Kind, parts []*Lease, validUntil time.Time) *MultiLease {
	l := &MultiLease{kind: k, parts: parts, validUntil: validUntil}
	if !validUntil.IsZero() {
		l.timer = time.AfterFunc(time.Until(validUntil), func() { l.ended.end(l.expired()) })
		l.ended.onEnd(func(error) { l.timer.Stop() })
	}
	for _, p := range parts {
		p.ended.onEnd(func(err error) { l.ended.end(err) })
	}
	return l
}

// expired is the reason a RedLock's lease ended at its validity.
func (l *MultiLease) expired() error {
	return fmt.Errorf("%w: %s: the RedLock's validity ended at %v", ErrLockLost, quote(l.parts[0].Name()),
		l.validUntil.Format(time.RFC3339Nano))
}

// ValidUntil returns, for a RedLock taken with WithLeaseTime, the end of its
// validity: the round's start plus the lease, minus the round's time and the
// clock drift allowance. It is zero otherwise (a MultiLock, or watchdog leases
// that the parts' clients renew).
func (l *MultiLease) ValidUntil() time.Time { return l.validUntil }

// Leases returns the parts' leases, in acquisition order.
func (l *MultiLease) Leases() []*Lease { return slices.Clone(l.parts) }

// Done returns a channel closed when any part's lease ends, or the RedLock's
// validity: the parts are then no longer all held.
func (l *MultiLease) Done() <-chan struct{} {
	l.Err() // the parts' and the validity's deadlines, checked now
	return l.ended.Done()
}

// Err returns nil while every part is held (and, for a RedLock with a fixed
// lease, before ValidUntil), else why the first part to end ended (ErrUnlocked,
// ErrLockLost, ErrUnlockUnconfirmed, ErrClosed). Like Lease.Err it is never nil
// past a deadline.
func (l *MultiLease) Err() error {
	for _, p := range l.parts {
		p.Err() // ends a part past its deadline, which ends l
	}
	if !l.validUntil.IsZero() && !time.Now().Before(l.validUntil) {
		l.ended.end(l.expired())
	}
	return l.ended.Err()
}

// Unlock gives back every part, the last taken first, and returns their errors
// joined. Like Lease.Unlock it does not end with ctx. A part whose release was
// not confirmed ends anyway (ErrUnlockUnconfirmed): calling Unlock again sends
// its release again and skips the parts already given back.
func (l *MultiLease) Unlock(ctx context.Context) (err error) {
	ctx, ob := l.startCall(ctx, observe.OpLeaseUnlock)
	defer ob.endCall(&err)
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		p := l.parts[i]
		if errors.Is(p.ended.Err(), ErrUnlocked) {
			continue
		}
		if err := p.Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
