package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// holding is one acquisition of any kind, as a worker uses it.
type holding interface {
	Done() <-chan struct{} // nil for a plain Semaphore's permit: it has no lease
	Err() error
	release(ctx context.Context) error
	token() int64
	field() string // the holder's field in a lock's hash ("" for permits)
}

type leaseHold struct{ *rlock.Lease }

func (l leaseHold) release(ctx context.Context) error { return l.Unlock(ctx) }
func (l leaseHold) token() int64                      { return l.Token() }
func (l leaseHold) field() string                     { return l.Holder() }

type permitsHold struct{ *rlock.Permits }

func (p permitsHold) release(ctx context.Context) error { return p.Release(ctx) }
func (p permitsHold) token() int64                      { return 0 }
func (p permitsHold) field() string                     { return "" }

type semHold struct{ s *rlock.Semaphore }

func (s semHold) Done() <-chan struct{}             { return nil }
func (s semHold) Err() error                        { return nil }
func (s semHold) release(ctx context.Context) error { return s.s.Release(ctx, 1) }
func (s semHold) token() int64                      { return 0 }
func (s semHold) field() string                     { return "" }

type leaderHold struct{ *rlock.Leadership }

func (l leaderHold) release(ctx context.Context) error { return l.Resign(ctx) }
func (l leaderHold) token() int64                      { return l.Token() }
func (l leaderHold) field() string                     { return l.Holder() }

// locker returns the lock of kind called name.
func locker(c *rlock.Client, kind, name string) (rlock.Locker, error) {
	switch kind {
	case KindMutex:
		return c.NewMutex(name), nil
	case KindFair:
		return c.NewFairMutex(name), nil
	case KindRead:
		return c.NewRWMutex(name).ReadLock(), nil
	case KindWrite:
		return c.NewRWMutex(name).WriteLock(), nil
	case KindSpin:
		return c.NewSpinMutex(name), nil
	case KindFenced:
		return c.NewFencedMutex(name), nil
	case KindNonReentrant:
		return c.NewNonReentrantMutex(name), nil
	}
	return nil, fmt.Errorf("chaos: %q is not a lock kind", kind)
}

// acquire takes one hold of kind on name, waiting until ctx ends; lease > 0
// asks locks for a fixed lease instead of the watchdog's.
func acquire(ctx context.Context, c *rlock.Client, kind, name string, lease time.Duration) (holding, error) {
	switch kind {
	case KindElection:
		l, err := c.NewElection(name).Campaign(ctx, "candidate")
		if err != nil {
			return nil, err
		}
		return leaderHold{l}, nil
	case KindSemaphore:
		s := c.NewSemaphore(name)
		if err := s.Acquire(ctx, 1); err != nil {
			return nil, err
		}
		return semHold{s}, nil
	case KindExpirable:
		var opts []rlock.AcquireOption
		if lease > 0 {
			opts = append(opts, rlock.WithLeaseTime(lease))
		}
		p, err := c.NewExpirableSemaphore(name).Acquire(ctx, 1, opts...)
		if err != nil {
			return nil, err
		}
		return permitsHold{p}, nil
	}
	l, err := locker(c, kind, name)
	if err != nil {
		return nil, err
	}
	var opts []rlock.AcquireOption
	if lease > 0 {
		opts = append(opts, rlock.WithLeaseTime(lease))
	}
	lease2, err := l.Lock(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return leaseHold{lease2}, nil
}

// lostErr reports whether a release error says the hold had already ended
// without it (lost, or not held any more).
func lostErr(err error) bool {
	return errors.Is(err, rlock.ErrLockLost) || errors.Is(err, rlock.ErrNotHeld) || errors.Is(err, rlock.ErrNotLeader) ||
		errors.Is(err, rlock.ErrPermitLost) || errors.Is(err, rlock.ErrNoSuchPermit)
}

// setUp creates the objects that need it before a scenario: the semaphores
// with permits permits (one call per name; existing ones are left alone).
func setUp(ctx context.Context, c *rlock.Client, prefix string, kinds []string, names, permits int) error {
	for _, k := range kinds {
		for i := range names {
			name := objectName(prefix, k, i)
			var err error
			switch k {
			case KindSemaphore:
				_, err = c.NewSemaphore(name).TrySetPermits(ctx, int64(permits), 0)
			case KindExpirable:
				_, err = c.NewExpirableSemaphore(name).TrySetPermits(ctx, int64(permits))
			}
			if err != nil {
				return fmt.Errorf("chaos: setting up %s: %w", name, err)
			}
		}
	}
	return nil
}
