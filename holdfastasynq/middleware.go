package holdfastasynq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/rlock"
)

// DefaultWait is how long Serialize and Limit wait for a lock or a permit
// before they fail the task with ErrBusy, when WithWait is not given.
const DefaultWait = 5 * time.Second

// Default prefixes of the lock and semaphore names (WithPrefix).
const (
	DefaultKeyPrefix   = "asynq:key:"
	DefaultLimitPrefix = "asynq:limit:"
)

// ErrBusy: a task's lock (Serialize) or permit (Limit) was not available
// within the wait. The error a middleware returns then also matches
// rlock.ErrNotAcquired; asynq retries the task (see IsFailure and
// BusyRetryDelay).
var ErrBusy = errors.New("holdfastasynq: lock or permit busy")

// IsFailure is asynq's Config.IsFailure for servers using Serialize or Limit:
// every error but ErrBusy is a failure. A busy task is retried without
// counting against its MaxRetry (asynq archives a task once its failures reach
// MaxRetry). Note that asynq archives a task with MaxRetry(0) at its first
// error of any kind.
func IsFailure(err error) bool { return err != nil && !errors.Is(err, ErrBusy) }

// BusyRetryDelay returns asynq's Config.RetryDelayFunc that retries a busy
// task (ErrBusy) after a random delay between d and 2d, and any other failure
// after next's delay (asynq.DefaultRetryDelayFunc when next is nil). asynq moves
// a retried task back to its queue at its DelayedTaskCheckInterval (5 s by
// default), so shorter delays than that make no difference.
func BusyRetryDelay(d time.Duration, next asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if next == nil {
		next = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, t *asynq.Task) time.Duration {
		if errors.Is(err, ErrBusy) {
			if d <= 0 {
				return 0
			}
			return d + rand.N(d+1)
		}
		return next(n, err, t)
	}
}

// Option configures Serialize and Limit.
type Option func(*mwOptions)

type mwOptions struct {
	prefix    string
	prefixSet bool
	wait      time.Duration
}

// WithPrefix sets the prefix of the lock names (Serialize: DefaultKeyPrefix)
// or semaphore names (Limit: DefaultLimitPrefix). A lock is named prefix+key,
// a semaphore prefix+task type; processes that must exclude each other use the
// same prefix. Put a {hash tag} in the key to choose a Cluster slot.
func WithPrefix(p string) Option {
	return func(o *mwOptions) { o.prefix, o.prefixSet = p, true }
}

// WithWait sets how long a task waits for its lock or permit, in its worker
// slot, before it fails with ErrBusy (DefaultWait by default; 0 makes one
// attempt). The wait also ends with the task's ctx.
func WithWait(d time.Duration) Option {
	return func(o *mwOptions) {
		if d >= 0 {
			o.wait = d
		}
	}
}

func newOptions(prefix string, opts []Option) mwOptions {
	o := mwOptions{prefix: prefix, wait: DefaultWait}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// hold is what a handler runs under: a Lease or Permits, whose Context ends
// with it and whose Err says why.
type hold interface {
	Err() error
	Context(parent context.Context) (context.Context, context.CancelFunc)
}

// runHeld runs next with a ctx cancelled, with h.Err() as its cause, when h
// ends (the hold's Context), then releases h. A handler that returns nil
// after h was lost still fails the task (an error wrapping h.Err()): part of
// its work may have run without the lock, and asynq runs it again.
func runHeld(ctx context.Context, h hold, release func(context.Context) error, what string, next asynq.Handler, t *asynq.Task) error {
	hctx, cancel := h.Context(ctx)
	defer cancel()
	err := next.ProcessTask(hctx, t)
	lost := h.Err()
	if lost == nil {
		// Still held: give it back. A release Redis did not confirm leaves it
		// to expire by itself; the task's outcome does not depend on it.
		_ = release(context.Background())
		return err
	}
	if err != nil {
		return fmt.Errorf("holdfastasynq: %s lost while the task ran: %w (task: %w)", what, lost, err)
	}
	return fmt.Errorf("holdfastasynq: %s lost while the task ran: %w", what, lost)
}

// KeyFunc returns the key a task is serialized by, "" for none (the task then
// runs without a lock). Tasks with the same key, across every server sharing
// the Redis and the prefix, never run at the same time.
type KeyFunc func(*asynq.Task) string

// Serialize returns a middleware that runs the tasks of one key (key(task))
// one at a time across every asynq server: before the handler it takes the
// rlock Mutex named prefix+key (WithPrefix; DefaultKeyPrefix), waiting up to
// WithWait (DefaultWait), and unlocks it when the handler returns. The lock is
// held with c's watchdog: a worker that dies frees it within c's watchdog
// timeout.
//
// The handler's ctx is cancelled when the lock is lost, with the Lease's Err
// (matching rlock.ErrLockLost) as its cause; the task then fails with an error
// wrapping it, and asynq retries it. A lock not taken within the wait fails the
// task with an error matching ErrBusy and rlock.ErrNotAcquired; any other
// error of the acquisition (Redis unreachable) is returned as it is. Each
// task takes the lock for a fresh owner: a handler that enqueues and runs a
// task of the same key inline would wait for itself.
func Serialize(c *rlock.Client, key KeyFunc, opts ...Option) asynq.MiddlewareFunc {
	o := newOptions(DefaultKeyPrefix, opts)
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			k := key(t)
			if k == "" {
				return next.ProcessTask(ctx, t)
			}
			var tryOpts []rlock.TryOption
			if o.wait > 0 {
				tryOpts = append(tryOpts, rlock.WithWaitTime(o.wait))
			}
			lease, err := c.NewMutex(o.prefix+k).TryLock(ctx, tryOpts...)
			if err != nil {
				if errors.Is(err, rlock.ErrNotAcquired) && ctx.Err() == nil {
					return fmt.Errorf("%w: %w", ErrBusy, err)
				}
				return err
			}
			return runHeld(ctx, lease, lease.Unlock, "lock", next, t)
		})
	}
}

// Limit returns a middleware that bounds how many tasks of each type in limits
// run at once across every asynq server: before the handler it takes one
// permit of the rlock ExpirableSemaphore named prefix+type (WithPrefix;
// DefaultLimitPrefix), created with limits[type] permits by the first task
// that finds it missing (TrySetPermits), waiting up to WithWait (DefaultWait);
// the permit is released when the handler returns. Tasks of other types run
// unbounded. The permit is held with c's watchdog: a worker that dies gives
// it back within c's watchdog timeout (the semaphore reclaims expired
// permits).
//
// The count is set once, by whoever creates the semaphore: to change it, set
// it with the semaphore's SetPermits or AddPermits, or delete the key while no task runs.
// Loss and busy permits are handled as by Serialize: the handler's ctx is
// cancelled with the Permits' Err (rlock.ErrPermitLost) as its cause, and a
// permit not taken within the wait fails the task with ErrBusy.
func Limit(c *rlock.Client, limits map[string]int64, opts ...Option) asynq.MiddlewareFunc {
	o := newOptions(DefaultLimitPrefix, opts)
	lim := make(map[string]int64, len(limits))
	for k, v := range limits {
		lim[k] = v
	}
	var created sync.Map // type -> struct{}: its semaphore was seen or made
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			n, ok := lim[t.Type()]
			if !ok {
				return next.ProcessTask(ctx, t)
			}
			s := c.NewExpirableSemaphore(o.prefix + t.Type())
			if _, ok := created.Load(t.Type()); !ok {
				if _, err := s.TrySetPermits(ctx, n); err != nil {
					return err
				}
				created.Store(t.Type(), struct{}{})
			}
			var tryOpts []rlock.TryOption
			if o.wait > 0 {
				tryOpts = append(tryOpts, rlock.WithWaitTime(o.wait))
			}
			p, err := s.TryAcquire(ctx, 1, tryOpts...)
			if err != nil {
				if errors.Is(err, rlock.ErrNotAcquired) && ctx.Err() == nil {
					return fmt.Errorf("%w: %w", ErrBusy, err)
				}
				return err
			}
			return runHeld(ctx, p, p.Release, "permit", next, t)
		})
	}
}
