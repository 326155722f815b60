package rlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"
)

// Errors returned by this package. Test for them with errors.Is: returned errors
// wrap them with the lock's name and the cause.
var (
	// ErrNotAcquired: the lock is held by another owner, or the semaphore has
	// too few permits, and the call did not (or could no longer) wait. When a
	// wait ended because ctx was done, the error also matches ctx.Err().
	ErrNotAcquired = errors.New("rlock: not acquired")

	// ErrNotHeld: an unlock by an owner that does not hold the lock, or more
	// unlocks than locks. The lock is left unchanged.
	ErrNotHeld = errors.New("rlock: lock not held by this owner")

	// ErrLockLost: a hold ended without an unlock: its lease ran out, a renewal
	// found the lock gone or taken over, or no renewal could be confirmed before
	// the lease deadline. Lease.Err returns it once Lease.Done is closed.
	ErrLockLost = errors.New("rlock: lock lost")

	// ErrUnlocked: Lease.Err after the lease was unlocked.
	ErrUnlocked = errors.New("rlock: lease unlocked")

	// ErrWrongType: the key at the object's name holds a value that is not
	// that object: a lock's name a value that is not a lock hash, a
	// semaphore's or a latch's something else than an integer count. The key
	// is left untouched.
	ErrWrongType = errors.New("rlock: key holds a value of another kind")

	// ErrConflict: the owner's hold count in Redis changed during the call, twice
	// in a row, by something other than this call: the same owner used by two
	// clients with the same id, or a script of another program writing the owner's
	// field. Nothing was changed; the call may be retried.
	ErrConflict = errors.New("rlock: the owner's hold count changed under the call")

	// ErrNonReentrant: an owner took again a NonReentrantMutex it holds
	// (Redisson's NON_REENTRANT_REACQUIRE). It fails at once; the hold count
	// stays 1.
	ErrNonReentrant = errors.New("rlock: non-reentrant lock already held by this owner")

	// ErrUpgrade: an owner that holds the read side of an RWMutex asked for its
	// write side. Redisson has no read -> write upgrade (two readers upgrading
	// would wait for each other for ever): the call fails at once. Unlock the
	// read leases first, or take the write side from the start.
	ErrUpgrade = errors.New("rlock: cannot take the write lock while holding the read lock")

	// ErrNotReplicated: fewer replicas than required (WithReplicaAcks,
	// WithLockReplicaAcks) acknowledged an acquisition or a release in time.
	// An acquisition is undone before the error is returned; a release is not
	// (it cannot be): the lease ends, but after a failover to a replica that
	// missed the release the lock may still be held by the owner until its
	// lease runs out. The error is a
	// *NotReplicatedError, which says how many replicas acknowledged.
	ErrNotReplicated = errors.New("rlock: not replicated")

	// ErrUnlockUnconfirmed: an Unlock whose release Redis did not confirm within
	// the client's release timeout (WithReleaseTimeout), or refused with an
	// error (Redis unreachable, a failover under way). Its outcome is unknown,
	// so the lease ends anyway and the hold is no longer renewed: the lock is
	// released, or expires by itself within its remaining lease, which the error
	// (an *UnlockUnconfirmedError) states. Lease.Err returns it too.
	ErrUnlockUnconfirmed = errors.New("rlock: unlock not confirmed")

	// ErrClosed: the Client was closed. Close releases the holds still open; a
	// lease it ended says, in its Err and in what its Unlock returns, whether
	// that release was confirmed.
	ErrClosed = errors.New("rlock: client closed")

	// ErrInvalidArgument: an empty lock name or one whose keys cannot share a
	// cluster slot (see Client.NewMutex), a negative duration, a nil client.
	// Returned before any round trip.
	ErrInvalidArgument = errors.New("rlock: invalid argument")

	// ErrPermitLost: an ExpirableSemaphore's Permits handle whose permits are
	// gone before Release: their fixed lease ran out, a renewal found one gone
	// (reclaimed once expired, released by id, the semaphore deleted), or no
	// renewal was confirmed before their deadline. Permits.Err returns it.
	ErrPermitLost = errors.New("rlock: permit lost")

	// ErrNoSuchPermit: a release, lease or lease update of a permit id the
	// semaphore does not hold (released, expired and reclaimed, never
	// acquired). Nothing changed.
	ErrNoSuchPermit = errors.New("rlock: no such permit")

	// ErrReleased: Permits.Err after Permits.Release.
	ErrReleased = errors.New("rlock: permits released")

	// ErrLatchDeleted: CountDownLatch.Await returns it when the latch it
	// waited for was deleted (its delete message heard, its key gone, no
	// opening message heard within 100 ms) rather than counted down to zero.
	ErrLatchDeleted = errors.New("rlock: latch deleted while awaited")

	// ErrUnreachable: a call could not reach Redis: the connection was refused
	// or could not be made, it broke, or the server stopped answering. The error
	// says where Redis was expected and wraps go-redis's own. go-redis decides
	// how long a call tries before it gives up: MaxRetries (3) retries, each
	// dialling up to DialerRetries (5) times DialerRetryTimeout (100 ms) apart
	// within DialTimeout, and ReadTimeout (3 s) for a server that accepted the
	// connection but does not answer (the package documentation, "Redis down").
	ErrUnreachable = errors.New("rlock: cannot reach Redis")
)

// unreachable returns err, or, when it says Redis could not be reached (a
// dial that failed, a connection reset or closed, a read that timed out), a
// *reachError that matches ErrUnreachable and says where Redis was expected. A
// ctx that ended is not Redis' failure: its error is returned as it is.
func unreachable(where string, err error) error {
	var ne net.Error
	switch {
	case err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ne), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return &reachError{where: where, err: err}
	}
	return err
}

// reachError is the error of a call that could not reach Redis at where. It
// matches ErrUnreachable and unwraps to go-redis' error; it reads "cannot
// reach Redis at 127.0.0.1:6379: dial tcp …" inside the error of the call.
type reachError struct {
	where string
	err   error
}

func (e *reachError) Error() string        { return "cannot reach Redis at " + e.where + ": " + e.err.Error() }
func (e *reachError) Is(target error) bool { return target == ErrUnreachable }
func (e *reachError) Unwrap() error        { return e.err }

// notSent reports whether err says a command never left the client: its
// connection could not be made. Its outcome is known: it did not run.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// errWaitElapsed is the cause of a wait ended by TryLock's wait time.
var errWaitElapsed = errors.New("wait time elapsed")

// waitEnded is the error of a call on the object name whose ctx ended it (see
// Client.waitContext): ErrClosed when Close ended it; for an acquisition, an
// error matching ErrNotAcquired and, when TryLock's wait time ended it,
// errWaitElapsed, else ctx's error (ctxEnded), as Lock and TryLock document;
// for another wait (a latch's Await), ctx's error.
func waitEnded(ctx context.Context, name string, acquiring bool) error {
	cause, end := context.Cause(ctx), ctxEnded(ctx)
	switch {
	case errors.Is(cause, ErrClosed):
		return ErrClosed
	case !acquiring:
		return end
	case errors.Is(cause, errWaitElapsed):
		return fmt.Errorf("%w: %s: %w", ErrNotAcquired, quote(name), errWaitElapsed)
	}
	return fmt.Errorf("%w: %s: %w", ErrNotAcquired, quote(name), end)
}

// gaveUp is the one rule for the error err of a call on the object name that
// acquires (acquiring: a lock, permits, a leadership) or waits (a latch's
// Await) when its ctx may have ended. Once ctx has ended (ctxEnded), the call
// ended because of it, whatever err says (ctx's error from go-redis, an i/o
// timeout at the deadline ctx gave a socket, a subscription cut short, a
// refusal read as ctx ended), and the error is waitEnded's: for an
// acquisition one matching ErrNotAcquired and ctx's error, for Await ctx's
// error, after Close ErrClosed. Two errors stand as they are: ErrClosed, and
// ErrNotReplicated (an acquisition undone, which its callers document even
// while waiting). nil, and any error of a call whose ctx has not ended, are
// returned as they are.
func gaveUp(ctx context.Context, name string, acquiring bool, err error) error {
	end := ctxEnded(ctx)
	switch {
	case err == nil || end == nil:
		return err
	case errors.Is(err, ErrClosed) || errors.Is(err, ErrNotReplicated):
		return err
	case errors.Is(err, end) && (!acquiring || errors.Is(err, ErrNotAcquired)):
		return err
	}
	return waitEnded(ctx, name, acquiring)
}

// ctxEnded returns ctx's error once it has ended, else nil. A ctx whose
// deadline has passed has ended (context.DeadlineExceeded) even before its
// timer fires and ctx.Err() says so: a socket given that deadline
// (ContextTimeoutEnabled) may fail a round trip first, and under load ctx.Err()
// can stay nil for a while after.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// quote renders a lock name for error messages, cut to 64 bytes.
func quote(name string) string {
	if len(name) > 64 {
		return strconv.Quote(name[:64]) + "..."
	}
	return strconv.Quote(name)
}

// NotReplicatedError is the error of a call that fewer replicas than required
// acknowledged in time. It matches ErrNotReplicated. The call was a lock's
// (Lock names it) or a semaphore's (Semaphore names it: a Semaphore's or an
// ExpirableSemaphore's). An acquisition is undone before the error is
// returned: the lock released, the permits given back (the text says so if
// giving them back failed). A release (Unlock) and a change of a
// semaphore's count (Op) stand on the primary: they cannot be undone.
type NotReplicatedError struct {
	Lock      string // the lock's name; "" for a semaphore's call
	Semaphore string // the semaphore's name; "" for a lock's call
	// Unlock: the call was a release (a lock's Unlock, a semaphore's
	// Release or Permits.Release); else an acquisition, undone, or Op.
	Unlock bool
	// Op is the method of a semaphore's call that neither acquires nor
	// releases permits but changes their count: "TrySetPermits",
	// "AddPermits", "DrainPermits" or "SetPermits". "" for the others.
	Op      string
	Acked   int           // replicas that acknowledged within Timeout
	Wanted  int           // replicas required
	Timeout time.Duration // how long the call waited for them
	undo    error         // an acquisition's give-back that failed: its permits may stay taken
}

func (e *NotReplicatedError) Error() string {
	if e.Semaphore != "" {
		return e.semaphoreError()
	}
	op, then := "lock", "the acquisition was undone"
	if e.Unlock {
		op, then = "unlock", "the lock was released on the primary only"
	}
	return fmt.Sprintf("%v: %s %s: %d of %d replicas acknowledged within %v; %s",
		ErrNotReplicated, op, quote(e.Lock), e.Acked, e.Wanted, e.Timeout, then)
}

// semaphoreError is the text of a semaphore's call's error.
func (e *NotReplicatedError) semaphoreError() string {
	op, then := "acquisition", "it was undone, its permits given back"
	switch {
	case e.Unlock:
		op, then = "release", "the permits were released on the primary only"
	case e.Op != "":
		op, then = e.Op, "it took effect on the primary only"
	case e.undo != nil:
		then = fmt.Sprintf("giving its permits back failed (%v): they may stay taken", e.undo)
	}
	return fmt.Sprintf("%v: semaphore %s: %s: %d of %d replicas acknowledged within %v; %s",
		ErrNotReplicated, quote(e.Semaphore), op, e.Acked, e.Wanted, e.Timeout, then)
}

// Is reports whether target is ErrNotReplicated.
func (e *NotReplicatedError) Is(target error) bool { return target == ErrNotReplicated }

// UnlockUnconfirmedError is the error of an Unlock whose release was not
// confirmed (see ErrUnlockUnconfirmed), and Lease.Err afterwards. It matches
// ErrUnlockUnconfirmed and unwraps to the cause.
type UnlockUnconfirmedError struct {
	Lock string // the lock's name
	// ExpiresWithin bounds how long the lock may stay held by this owner if the
	// release did not happen: its remaining lease, as nothing renews it any more.
	// Zero when Others is not.
	ExpiresWithin time.Duration
	// Others is the number of the owner's leases on the lock still open: when
	// the lease was not the owner's last, the hold stays, kept by those.
	Others int
	Err    error // why the release was not confirmed
}

func (e *UnlockUnconfirmedError) Error() string {
	if e.Others > 0 {
		return fmt.Sprintf("%v: %s: %v; the lease ended, the owner's %d other leases still hold the lock",
			ErrUnlockUnconfirmed, quote(e.Lock), e.Err, e.Others)
	}
	return fmt.Sprintf("%v: %s: %v; the lock is no longer renewed: it is released, or expires by itself within %v",
		ErrUnlockUnconfirmed, quote(e.Lock), e.Err, e.ExpiresWithin.Round(time.Millisecond))
}

// Is reports whether target is ErrUnlockUnconfirmed.
func (e *UnlockUnconfirmedError) Is(target error) bool { return target == ErrUnlockUnconfirmed }

// Unwrap returns the cause.
func (e *UnlockUnconfirmedError) Unwrap() error { return e.Err }
