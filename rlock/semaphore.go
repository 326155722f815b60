package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// Semaphore is a counting semaphore shared through Redis, Redisson's
// RSemaphore: the string key of its name holds the number of permits
// available. It is not fair and has no owners: any goroutine of any client may
// release permits, whether or not it acquired them, and a release adds permits
// even beyond the count the semaphore started with (Java's semantics). A
// permit taken by a process that dies is never returned; use an
// ExpirableSemaphore where that matters.
//
// A semaphore that does not exist has no permits: create it with
// TrySetPermits. The waiters of one Client queue in arrival order (one that
// wants more permits than are free holds back those behind it); the first
// listens on the semaphore's channel, attempts for as many of them as a
// release announces, and looks again at least every recheck interval
// (WithRecheckInterval), so that a lost message delays them by at most that.
// A Release in a Client whose waiters queue gives them its permits in its own
// round trip and publishes only what is left (not with WithReplicaAcks: then
// it publishes, and the waiters take the permits with acquisitions of their
// own, which the replicas acknowledge). Counts of permits to acquire or
// release must be at least 1: 0 and negative counts fail with
// ErrInvalidArgument before any round trip.
//
// With WithReplicaAcks, every acquisition, release and change of the count
// waits in its round trip for the replicas (Redis' WAIT): an acquisition
// that fewer acknowledged is undone, its permits given back, and fails with
// a *NotReplicatedError (ErrNotReplicated), a waiting one too; a release or
// a change of the count stands on the primary and returns that error. A
// Semaphore is safe for concurrent use.
type Semaphore struct{ o syncObject }

// NewSemaphore returns the semaphore name (Redisson's getSemaphore). A name
// whose channel would hash to another Redis Cluster slot is refused: every call
// returns an error matching ErrInvalidArgument.
func (c *Client) NewSemaphore(name string) *Semaphore {
	return &Semaphore{o: newSyncObject(c, name, "semaphore", observe.KindSemaphore, lua.CheckSemaphoreName)}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.o.name }

// Acquire takes n permits, waiting until they are available or ctx is done:
// then it returns an error matching ErrNotAcquired and ctx's error (ErrClosed
// once the Client is closed). A waiter is woken by releases and looks again
// at least every recheck interval. It costs one round trip when the permits
// are there. With WithReplicaAcks, an acquisition that fewer replicas
// acknowledged is undone and the call fails with ErrNotReplicated, even
// while waiting.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAcquire)
	defer ob.endCall(&err)
	return s.acquire(ctx, n, true, time.Time{})
}

// TryAcquire takes n permits if they are available now (one round trip), or
// with WithWaitTime as soon as they are within that time; otherwise it returns
// an error matching ErrNotAcquired (and ctx's error if ctx ended the wait),
// or with WithReplicaAcks ErrNotReplicated (see Acquire). Its only option is
// WithWaitTime: WithLeaseTime and WithLockReplicaAcks fail with
// ErrInvalidArgument (its permits have no lease; it takes the client's
// WithReplicaAcks).
func (s *Semaphore) TryAcquire(ctx context.Context, n int64, opts ...TryOption) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpTryAcquire)
	defer ob.endCall(&err)
	o, err := newTryLockOptions(opts)
	switch {
	case err != nil:
		return err
	case o.leaseTime != 0:
		return fmt.Errorf("%w: semaphore %s: a lease (WithLeaseTime) for permits that have none; use an ExpirableSemaphore", ErrInvalidArgument, quote(s.o.name))
	case o.acks != nil:
		return fmt.Errorf("%w: semaphore %s: WithLockReplicaAcks is for locks; a semaphore takes the client's WithReplicaAcks", ErrInvalidArgument, quote(s.o.name))
	}
	wait := o.waitTime
	if wait == 0 {
		return s.acquire(ctx, n, false, time.Time{})
	}
	return s.acquire(ctx, n, true, time.Now().Add(wait))
}

// acquire takes n permits: first with one attempt of its own, unless waiters
// of this client queue already, and then, if wait is set, in the client's
// queue for the semaphore (waitPermits) until deadline (zero: none) or ctx
// is done.
func (s *Semaphore) acquire(ctx context.Context, n int64, wait bool, deadline time.Time) error {
	if err := s.o.checkCount(n); err != nil {
		return err
	}
	c := s.o.c
	if !wait || !c.permits.queued(s.o.name) {
		req := s.o.request()
		r, err := s.take(ctx, req, n)
		switch {
		case err != nil:
			s.settleTake(ctx, req, n, err)
			return gaveUp(ctx, s.o.name, true, s.o.wrap(err))
		case r > 0:
			return nil
		case !wait:
			return gaveUp(ctx, s.o.name, true, notAvailable(s.o.name, n, r == lua.SemaphoreAbsent))
		}
	}
	ctx, stop := c.waitContext(ctx, deadline)
	defer stop()
	_, err := c.permits.waitPermits(ctx, &s.o, semaphoreKind{s}, newPermitWaiter(n), lua.SemaphoreChannel(s.o.name))
	return gaveUp(ctx, s.o.name, true, err)
}

// take takes permits for waiters that want wants (the caller's first, see
// lua.SemaphoreAcquire) with request req, in one round trip, and returns how
// many it served. With the client's replica acknowledgements, WAIT follows
// the script in that round trip, and an acquisition that served waiters and
// that fewer replicas acknowledged is undone (undo) and fails with a
// *NotReplicatedError; the count served is returned with it.
func (s *Semaphore) take(ctx context.Context, req lua.Request, wants ...int64) (int64, error) {
	r, acked, err := lua.SemaphoreAcquireAcked(ctx, s.o.c.rdb, s.o.name, req, s.o.acks(), wants...)
	if err != nil || r <= 0 || !s.o.short(acked) {
		return r, err
	}
	var n int64
	for _, w := range wants[:r] {
		n += w
	}
	return r, s.o.notReplicated("", acked, s.undo(ctx, n))
}

// settleTake gives back the n permits that the caller's own attempt, request
// req, may have taken though it failed with err: a round trip cut short (its
// ctx's deadline on the socket, a lost connection) may have run. It reads the
// request's record (lua.Recorded, which also claims a request that has not
// run, so that a late execution takes nothing) and, when the attempt served
// the caller, undoes it. An error reply, or a refusal by the replicas (take
// undid it), took nothing to give back.
func (s *Semaphore) settleTake(ctx context.Context, req lua.Request, n int64, err error) {
	if isReply(err) || errors.Is(err, ErrNotReplicated) {
		return
	}
	rctx, cancel := s.o.c.releaseContext(ctx)
	v, ran, rerr := lua.Recorded(rctx, s.o.c.rdb, req)
	cancel()
	if rerr == nil && ran && v > 0 {
		_ = s.undo(ctx, n)
	}
}

// undo gives back n permits that an acquisition took but must not keep, in a
// round trip of its own bounded by the client's release timeout: a release
// with a request record of its own (go-redis resending it counts it once)
// that waits for no replica (it undoes; a failover that loses it loses the
// acquisition too, unless the replica had that alone) and hands nothing to
// this client's waiters: it publishes the count, and they attempt.
func (s *Semaphore) undo(ctx context.Context, n int64) error {
	c := s.o.c
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	_, _, err := lua.SemaphoreRelease(ctx, c.rdb, s.o.name, n, false, c.publishCommand(ctx), s.o.request(), false)
	return err
}

// semaphoreKind is a Semaphore's side of its queue (permitKind).
type semaphoreKind struct{ s *Semaphore }

func (k semaphoreKind) attempt(ctx context.Context, _ time.Time, req lua.Request, ws []*permitWaiter) (permitTry, error) {
	r, err := k.s.take(ctx, req, wants(ws)...)
	if nr, ok := err.(*NotReplicatedError); ok {
		return permitTry{served: int(r), refused: nr}, nil
	}
	return permitTry{served: int(max(r, 0)), sleep: -1, absent: r == lua.SemaphoreAbsent}, err
}

func (k semaphoreKind) giveBack(ctx context.Context, ws []*permitWaiter) {
	var n int64
	for _, w := range ws {
		n += w.n
	}
	switch {
	case n == 0:
	case k.s.o.acks().Replicas > 0:
		_ = k.s.undo(ctx, n) // no hand-off with acknowledgements (handOff), nor a wait for them
	default:
		_, _ = k.s.release(ctx, n, false)
	}
}

func (semaphoreKind) recorded() bool { return true }

// notAvailable is the error of an attempt on the semaphore name that found
// fewer than n permits, or, absent, no semaphore at all.
func notAvailable(name string, n int64, absent bool) error {
	if absent {
		return fmt.Errorf("%w: semaphore %s does not exist (TrySetPermits creates it)", ErrNotAcquired, quote(name))
	}
	return fmt.Errorf("%w: semaphore %s has fewer than %d permits available", ErrNotAcquired, quote(name), n)
}

// Release gives n permits to the semaphore, creating it if it does not exist,
// and publishes the new count, which wakes up to that many waiters (Redisson's
// release). Waiters of this Client that queue get the permits first, in the
// same round trip: then only the count left is published (nothing when none
// is); not with WithReplicaAcks, which makes the release wait for the
// replicas and return ErrNotReplicated (the permits are released on the
// primary) when fewer acknowledged. It makes one round trip, which does not
// end with ctx but with the client's release timeout (WithReleaseTimeout), as
// Unlock.
func (s *Semaphore) Release(ctx context.Context, n int64) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpRelease)
	defer ob.endCall(&err)
	_, err = s.release(ctx, n, false)
	return err
}

// ReleaseIfExists is Release for a semaphore that exists: it reports whether
// the semaphore existed and got the permits (Redisson's releaseIfExists).
func (s *Semaphore) ReleaseIfExists(ctx context.Context, n int64) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpReleaseIfExists)
	defer ob.endCall(&err)
	return s.release(ctx, n, true)
}

func (s *Semaphore) release(ctx context.Context, n int64, ifExists bool) (ok bool, err error) {
	if err := s.o.checkCount(n); err != nil {
		return false, err
	}
	c := s.o.c
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	acked := 0
	err = c.permits.handOff(ctx, &s.o, semaphoreKind{s}, n, func(ws []*permitWaiter, alone bool, req lua.Request) (int, error) {
		var served int64
		ok, served, acked, err = lua.SemaphoreReleaseAcked(ctx, c.rdb, s.o.name, n, ifExists, c.publishCommand(ctx), req, s.o.acks(), alone, wants(ws)...)
		return int(served), err
	})
	return ok, s.o.replicated(opRelease, ok, acked, err)
}

// TrySetPermits creates the semaphore with n permits (n >= 0) if it does not
// exist, and reports whether it did; a positive ttl makes the semaphore expire
// after it (Redisson's trySetPermits(n) and trySetPermits(n, ttl)). The new
// count is published, waking waiters. With WithReplicaAcks a creation that
// fewer replicas acknowledged returns true and ErrNotReplicated: it stands on
// the primary.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int64, ttl time.Duration) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpTrySetPermits)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return false, err
	}
	if n < 0 {
		return false, fmt.Errorf("%w: semaphore %s: negative permits %d", ErrInvalidArgument, quote(s.o.name), n)
	}
	if ttl < 0 {
		return false, fmt.Errorf("%w: semaphore %s: negative time to live %v", ErrInvalidArgument, quote(s.o.name), ttl)
	}
	ok, acked, err := lua.SemaphoreTrySetAcked(ctx, s.o.c.rdb, s.o.name, n, ttl, s.o.c.publishCommand(ctx), s.o.request(), s.o.acks())
	return ok, s.o.replicated("TrySetPermits", ok, acked, err)
}

// AddPermits adds delta permits (delta may be negative, and the count may go
// to zero or below) and publishes the new count (Redisson's addPermits). The
// semaphore is rewritten, which removes a time to live set by TrySetPermits.
// With WithReplicaAcks a change that fewer replicas acknowledged returns
// ErrNotReplicated: it stands on the primary.
func (s *Semaphore) AddPermits(ctx context.Context, delta int64) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAddPermits)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return err
	}
	acked, err := lua.SemaphoreAddAcked(ctx, s.o.c.rdb, s.o.name, delta, lua.PublishTotal, s.o.c.publishCommand(ctx), s.o.request(), s.o.acks())
	return s.o.replicated("AddPermits", delta != 0, acked, err)
}

// AvailablePermits returns the number of permits available: 0 for a semaphore
// that does not exist; it may be negative after AddPermits.
func (s *Semaphore) AvailablePermits(ctx context.Context) (_ int64, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAvailablePermits)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return 0, err
	}
	n, err := lua.Count(ctx, s.o.c.rdb, s.o.name)
	return n, s.o.wrap(err)
}

// DrainPermits takes every available permit and returns how many there were
// (a negative count is set to 0 and returned); nothing is published
// (Redisson's drainPermits). With WithReplicaAcks a drain that fewer replicas
// acknowledged returns the count and ErrNotReplicated: it stands on the
// primary (a failover to a replica that missed it would give the permits
// back).
func (s *Semaphore) DrainPermits(ctx context.Context) (_ int64, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpDrainPermits)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return 0, err
	}
	n, acked, err := lua.SemaphoreDrainAcked(ctx, s.o.c.rdb, s.o.name, s.o.request(), s.o.acks())
	return n, s.o.replicated("DrainPermits", n != 0, acked, err)
}

// Delete deletes the semaphore and reports whether it existed. Waiters keep
// waiting: a deleted semaphore has no permits. Nothing is published (as in
// Redisson).
func (s *Semaphore) Delete(ctx context.Context) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpDelete)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return false, err
	}
	n, err := s.o.c.rdb.Del(ctx, s.o.name).Result()
	return n > 0, s.o.wrap(err)
}
