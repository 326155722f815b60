package integration

// Issue 37, item 6: a wait ended by its ctx always says so. For every kind
// that waits, many calls with a ctx of 1 to 4 ms race a goroutine that
// adds and takes back permits, or locks and unlocks, from this client and
// from another: each call ends at whatever point its ctx ends (queued,
// subscribing, in a round trip, handed permits it gives back). Every call
// that fails once its ctx ended must match rlock.ErrNotAcquired and
// ctx.Err() (a latch's Await too, as every wait of the package), and what
// the calls took must all be back at the end.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const (
	ceWorkers = 3               // goroutines racing their tiny deadlines
	ceCalls   = 200             // calls per worker, kind and variant
	ceChurn   = 5 * time.Second // ctx of each call of the churning goroutine
)

// ceCall is one call of a kind under test: nil and the function that gives
// back what it took, or its error.
type ceCall func(ctx context.Context) (giveBack func() error, err error)

// ceTally counts the outcomes of one kind's calls and keeps the first
// wrong ones.
type ceTally struct {
	acquired, ended atomic.Int64
	// deleted: a latch's Await that failed with ErrLatchDeleted before its
	// ctx ended, which a latch set again at once can give (not this test's
	// subject: counted and logged).
	deleted  atomic.Int64
	mu       sync.Mutex
	bad      []string
	badCount int
}

// fail records a wrong outcome.
func (t *ceTally) fail(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.badCount++
	if len(t.bad) < 5 {
		t.bad = append(t.bad, fmt.Sprintf(format, args...))
	}
}

// record checks the outcome of a call with ctx: acquired, or failed once
// ctx ended with an error that says so (acquiring: ErrNotAcquired too).
func (t *ceTally) record(ctx context.Context, err error, acquiring bool) {
	end := ceEnded(ctx)
	switch {
	case err == nil:
		t.acquired.Add(1)
	case end == nil && errors.Is(err, rlock.ErrLatchDeleted):
		t.deleted.Add(1)
	case end == nil:
		t.fail("failed before its ctx ended: %v", err)
	case !errors.Is(err, end):
		t.fail("ctx ended (%v), the error does not match it: %v", end, err)
	case acquiring && !errors.Is(err, rlock.ErrNotAcquired):
		t.fail("ctx ended, the error does not match ErrNotAcquired: %v", err)
	default:
		t.ended.Add(1)
	}
}

// ceEnded returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed: its timer may fire later than a socket given that deadline
// failed a round trip.
func ceEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ceRace runs ceWorkers goroutines making ceCalls calls each, with
// deadlines of 1 to 4 ms, while churn runs in a loop (its i-th turn
// churn(i)) until they are done; then it checks the tally.
func ceRace(t *testing.T, acquiring bool, call ceCall, churn func(i int) error) *ceTally {
	t.Helper()
	tally := &ceTally{}
	done := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				churned <- nil
				return
			default:
			}
			if err := churn(i); err != nil {
				churned <- fmt.Errorf("churn %d: %w", i, err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range ceWorkers {
		wg.Go(func() { ceWorker(tally, w, acquiring, call) })
	}
	wg.Wait()
	close(done)
	require.NoError(t, <-churned)
	t.Logf("%d calls: %d acquired, %d ended by their ctx as they should, %d latch deleted, %d wrong",
		ceWorkers*ceCalls, tally.acquired.Load(), tally.ended.Load(), tally.deleted.Load(), tally.badCount)
	require.Zero(t, tally.badCount, "wrong outcomes, the first: %v", tally.bad)
	return tally
}

// ceWorker makes ceCalls calls, worker w's deadlines cycling from 1 to 4 ms.
func ceWorker(tally *ceTally, w int, acquiring bool, call ceCall) {
	for i := range ceCalls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(i+w)%4)*time.Millisecond)
		giveBack, err := call(ctx)
		tally.record(ctx, err, acquiring)
		cancel()
		if err == nil && giveBack != nil {
			if err := giveBack(); err != nil {
				tally.fail("giving back: %v", err)
			}
		}
	}
}

// ceCtx returns a ctx for the churning goroutine's calls and its cancel.
func ceCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), ceChurn)
}

// ceTest is the body of one kind's test: an admin client, two rlock
// Clients on the shared server (the calls' and another, as another process)
// and a unique name.
type ceTest func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string)

// ceEach runs f twice: with go-redis clients that leave ctx deadlines off
// their sockets (the default: a ctx that ends stops a call before it is
// sent), and with ContextTimeoutEnabled (a ctx that ends cuts a round trip
// short, with an i/o timeout).
func ceEach(t *testing.T, f ceTest) {
	for _, v := range []struct {
		name     string
		deadline bool
	}{{"default", false}, {"ContextTimeoutEnabled", true}} {
		t.Run(v.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			admin := srv.Client(t)
			rdb := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = v.deadline })
			cs := [2]*rlock.Client{newClient(t, rdb), newClient(t, srv.Client(t))}
			f(t, admin, cs, redistest.Name(t))
		})
	}
}

// ceLocker is a kind of lock as the race uses it: its Lock.
type ceLocker func(ctx context.Context) (*rlock.Lease, error)

// ceLockOf is m's Lock without options.
func ceLockOf(m *rlock.Mutex) ceLocker {
	return func(ctx context.Context) (*rlock.Lease, error) { return m.Lock(ctx) }
}

// ceWriteLock is the Lock of the write side of the RWMutex name.
func ceWriteLock(c *rlock.Client, name string) ceLocker {
	return ceLockOf(&c.NewRWMutex(name).WriteLock().Mutex)
}

// ceLockCall is a Lock of l, unlocked at once when taken.
func ceLockCall(l ceLocker) ceCall {
	return func(ctx context.Context) (func() error, error) {
		lease, err := l(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Unlock(context.Background()) }, nil
	}
}

// ceLockChurn locks and unlocks, by turns with ls[0] (the calls' client)
// and ls[1] (the other).
func ceLockChurn(ls [2]ceLocker) func(i int) error {
	return func(i int) error {
		ctx, cancel := ceCtx()
		defer cancel()
		lease, err := ls[i%2](ctx)
		if err != nil {
			return err
		}
		return lease.Unlock(ctx)
	}
}

// ceRequireGone requires the keys to be gone: every hold was given back.
func ceRequireGone(t *testing.T, admin *redis.Client, keys ...string) {
	t.Helper()
	n, err := admin.Exists(context.Background(), keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "keys left of %v", keys)
}

// TestCtxEndedLocks: Lock of every kind of lock (Mutex, FairMutex, both
// sides of an RWMutex, SpinMutex), ended by tiny deadlines while another
// goroutine locks and unlocks.
func TestCtxEndedLocks(t *testing.T) {
	kinds := map[string]func(c *rlock.Client, name string) ceLocker{
		"Mutex":     func(c *rlock.Client, name string) ceLocker { return ceLockOf(c.NewMutex(name)) },
		"FairMutex": func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewFairMutex(name).Mutex) },
		"ReadLock":  func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewRWMutex(name).ReadLock().Mutex) },
		"WriteLock": func(c *rlock.Client, name string) ceLocker { return ceWriteLock(c, name) },
		"SpinMutex": func(c *rlock.Client, name string) ceLocker { return ceLockOf(&c.NewSpinMutex(name).Mutex) },
	}
	for kind, make := range kinds {
		t.Run(kind, func(t *testing.T) {
			ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
				churn := [2]ceLocker{make(cs[0], name), make(cs[1], name)}
				if kind == "ReadLock" { // readers share: the churn takes the write side
					churn = [2]ceLocker{ceWriteLock(cs[0], name), ceWriteLock(cs[1], name)}
				}
				ceRace(t, true, ceLockCall(make(cs[0], name)), ceLockChurn(churn))
				ceRequireGone(t, admin, name, "redisson_lock_queue:{"+name+"}", "redisson_lock_timeout:{"+name+"}")
			})
		})
	}
}

// ceMultiCall is a Lock of a MultiLock or a RedLock, unlocked when taken.
func ceMultiCall(lock func(ctx context.Context) (*rlock.MultiLease, error)) ceCall {
	return func(ctx context.Context) (func() error, error) {
		l, err := lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Unlock(context.Background()) }, nil
	}
}

// TestCtxEndedMultiLocks: MultiLock and RedLock of two parts, ended by tiny
// deadlines while another goroutine locks and unlocks the second part.
func TestCtxEndedMultiLocks(t *testing.T) {
	for _, kind := range []string{"MultiLock", "RedLock"} {
		t.Run(kind, func(t *testing.T) {
			ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
				a, b := cs[0].NewMutex(name+"-a"), cs[0].NewMutex(name+"-b")
				lock := func(ctx context.Context) (*rlock.MultiLease, error) { return rlock.NewMultiLock(a, b).Lock(ctx) }
				if kind == "RedLock" {
					lock = func(ctx context.Context) (*rlock.MultiLease, error) { return rlock.NewRedLock(a, b).Lock(ctx) }
				}
				churn := ceLockChurn([2]ceLocker{ceLockOf(cs[0].NewMutex(name + "-b")), ceLockOf(cs[1].NewMutex(name + "-b"))})
				ceRace(t, true, ceMultiCall(lock), churn)
				ceRequireGone(t, admin, name+"-a", name+"-b")
			})
		})
	}
}

// TestCtxEndedCampaign: Election.Campaign ended by tiny deadlines while
// another candidate campaigns and resigns.
func TestCtxEndedCampaign(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		e := cs[0].NewElection(name)
		call := func(ctx context.Context) (func() error, error) {
			l, err := e.Campaign(ctx, "worker")
			if err != nil {
				return nil, err
			}
			return func() error { return l.Resign(context.Background()) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			l, err := cs[i%2].NewElection(name).Campaign(ctx, "churn")
			if err != nil {
				return err
			}
			return l.Resign(ctx)
		}
		ceRace(t, true, call, churn)
		ceRequireGone(t, admin, name)
	})
}

// TestCtxEndedSemaphore: Semaphore.Acquire ended by tiny deadlines while
// another goroutine releases a permit and takes it back, or adds one and
// removes it, from this client (handing permits to its waiters) and from
// another. The count is 0 at the end.
func TestCtxEndedSemaphore(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })
		s := cs[0].NewSemaphore(name)
		answer(s.TrySetPermits(context.Background(), 0, 0)).is(t, true)
		call := func(ctx context.Context) (func() error, error) {
			if err := s.Acquire(ctx, 1); err != nil {
				return nil, err
			}
			return func() error { return s.Release(context.Background(), 1) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cs := cs[i%2].NewSemaphore(name)
			if i%3 == 2 {
				return errors.Join(cs.AddPermits(ctx, 1), cs.AddPermits(ctx, -1))
			}
			if err := cs.Release(ctx, 1); err != nil {
				return err
			}
			return cs.Acquire(ctx, 1)
		}
		ceRace(t, true, call, churn)
		answer(s.AvailablePermits(context.Background())).is(t, int64(0), "permits left")
	})
}

// TestCtxEndedExpirableSemaphore: ExpirableSemaphore.Acquire ended by tiny
// deadlines while another goroutine takes the one permit and releases it,
// and adds a permit and removes it, from this client and from another. One
// permit is available and none is taken at the end.
func TestCtxEndedExpirableSemaphore(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		s := expSemaphore(t, admin, cs[0], name, 1)
		call := func(ctx context.Context) (func() error, error) {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				return nil, err
			}
			return func() error { return p.Release(context.Background()) }, nil
		}
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cs := cs[i%2].NewExpirableSemaphore(name)
			if i%3 == 2 {
				return errors.Join(cs.AddPermits(ctx, 1), cs.AddPermits(ctx, -1))
			}
			p, err := cs.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}
		ceRace(t, true, call, churn)
		answer(s.AvailablePermits(context.Background())).is(t, int64(1), "permits available")
		answer(s.AcquiredPermits(context.Background())).is(t, int64(0), "permits taken")
	})
}

// TestCtxEndedLatch: CountDownLatch.Await ended by tiny deadlines while
// another goroutine sets the latch and counts it down: an Await that fails
// because its ctx ended matches ErrNotAcquired and ctx.Err().
func TestCtxEndedLatch(t *testing.T) {
	ceEach(t, func(t *testing.T, admin *redis.Client, cs [2]*rlock.Client, name string) {
		t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })
		l := cs[0].NewCountDownLatch(name)
		call := func(ctx context.Context) (func() error, error) { return nil, l.Await(ctx) }
		churn := func(i int) error {
			ctx, cancel := ceCtx()
			defer cancel()
			cl := cs[i%2].NewCountDownLatch(name)
			_, err := cl.TrySetCount(ctx, 1)
			return errors.Join(err, cl.CountDown(ctx))
		}
		ceRace(t, true, call, churn)
		ceRequireGone(t, admin, name)
	})
}
