package holdfastgocron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/holdfast-go/holdfast/rlock"
)

// DefaultKeyPrefix is the prefix a Locker puts before a job's name to make the
// lock's name, unless WithKeyPrefix sets another.
const DefaultKeyPrefix = "gocron:"

// Locker is a gocron.Locker on holdfast locks. Each run of a job takes the
// rlock.Mutex named by the key prefix and the job's name, in one attempt, for a
// fresh owner, held with the watchdog; the run's Unlock keeps it until at least
// minHold after it was taken, so that a scheduler whose tick comes a little
// later finds it held and skips the tick (see the package documentation).
// A Locker is safe for concurrent use; one Locker may serve several schedulers
// and jobs (gocron.WithDistributedLocker, gocron.WithDistributedJobLocker).
type Locker struct {
	c       *rlock.Client
	minHold time.Duration
	prefix  string

	mu     sync.Mutex
	kept   map[*lock]struct{} // unlocked by gocron, kept until their minimum hold ends
	closed bool
	wg     sync.WaitGroup // releases under way
}

var _ gocron.Locker = (*Locker)(nil)

// LockerOption configures a Locker.
type LockerOption func(*Locker)

// WithKeyPrefix sets the prefix of the locks' names (default
// DefaultKeyPrefix): the lock of job j is prefix+j. A prefix with a Redis
// Cluster hash tag ("{gocron}:") puts every job's lock in one slot.
func WithKeyPrefix(prefix string) LockerOption {
	return func(l *Locker) { l.prefix = prefix }
}

// NewLocker returns a Locker on c's locks that keeps each lock at least
// minHold after it was taken. minHold must be longer than the skew between
// the schedulers (their clocks' offsets, plus the delay with which each fires)
// and shorter than the interval between two ticks of a job less that skew:
// a tick that comes while the job's lock is still kept is skipped, on every
// instance. Zero makes it a plain lock, released when the run ends. A negative
// minHold is an error matching rlock.ErrInvalidArgument.
func NewLocker(c *rlock.Client, minHold time.Duration, opts ...LockerOption) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("holdfastgocron: nil client: %w", rlock.ErrInvalidArgument)
	}
	if minHold < 0 {
		return nil, fmt.Errorf("holdfastgocron: negative minimum hold %v: %w", minHold, rlock.ErrInvalidArgument)
	}
	l := &Locker{c: c, minHold: minHold, prefix: DefaultKeyPrefix, kept: make(map[*lock]struct{})}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Lock takes the lock of the job called key, in one attempt: gocron skips
// the run when it returns an error. The error matches rlock.ErrNotAcquired
// when another run (of this or another instance) holds the lock or keeps it
// for its minimum hold, and rlock.ErrClosed after Close; other errors are
// rlock's (Redis unreachable, a refused name). The lock is taken for a fresh
// owner whatever ctx carries, so a run never re-enters the lock of another.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("holdfastgocron: locker closed: %w", rlock.ErrClosed)
	}
	lease, err := l.c.NewMutex(l.prefix + key).TryLock(rlock.WithOwner(ctx))
	if err != nil {
		return nil, err
	}
	return &lock{l: l, lease: lease, until: time.Now().Add(l.minHold)}, nil
}

// Close releases at once the locks that runs have unlocked and that are
// kept for their minimum hold, and makes later Locks fail with rlock.ErrClosed.
// Locks of runs still under way are released by their Unlock. It returns the
// releases' errors (rlock.ErrLockLost for a lock lost meanwhile is not one).
// Closing the rlock.Client instead releases them too.
func (l *Locker) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	var now []*lock
	for k := range l.kept {
		if k.timer.Stop() { // else its timer fired: it is being released
			now = append(now, k)
			delete(l.kept, k)
		}
	}
	l.mu.Unlock()
	var errs []error
	for _, k := range now {
		if err := k.release(ctx); err != nil {
			errs = append(errs, err)
		}
		l.wg.Done()
	}
	l.wg.Wait()
	return errors.Join(errs...)
}

// lock is one run's hold of a job's lock.
type lock struct {
	l     *Locker
	lease *rlock.Lease
	until time.Time // the minimum hold ends

	once  sync.Once
	timer *time.Timer
}

// Unlock is called by gocron when the run ends: it releases the lock, or,
// when the minimum hold is not over, leaves it held (renewed by the watchdog)
// and releases it when the hold is over, returning nil at once.
func (k *lock) Unlock(ctx context.Context) error {
	var err error
	k.once.Do(func() {
		wait := time.Until(k.until)
		l := k.l
		l.mu.Lock()
		if wait <= 0 || l.closed {
			l.mu.Unlock()
			err = k.release(ctx)
			return
		}
		l.wg.Add(1)
		l.kept[k] = struct{}{}
		k.timer = time.AfterFunc(wait, func() {
			l.mu.Lock()
			_, mine := l.kept[k]
			delete(l.kept, k)
			l.mu.Unlock()
			if mine { // else Close released it
				_ = k.release(context.Background())
				l.wg.Done()
			}
		})
		l.mu.Unlock()
	})
	return err
}

// release gives the lock back; a lock already lost is not an error.
func (k *lock) release(ctx context.Context) error {
	err := k.lease.Unlock(ctx)
	if errors.Is(err, rlock.ErrLockLost) {
		return nil
	}
	return err
}
