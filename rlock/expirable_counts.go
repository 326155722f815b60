package rlock

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// UpdateLease gives the permit id a new lease from now (NoExpiry: none, the
// permit never expires), after reclaiming the expired permits, and reports
// whether the semaphore still held it (Redisson's updateLeaseTime). A permit
// this client's watchdog renews gets the watchdog's lease back at its next
// renewal. A Permits handle of this client on the permit follows: a fixed
// lease ends with the new one, a renewed one no later than it.
func (s *ExpirableSemaphore) UpdateLease(ctx context.Context, id string, lease time.Duration) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpUpdateLease)
	defer ob.endCall(&err)
	raw, err := s.rawIDs([]string{id})
	if err != nil {
		return false, err
	}
	if lease <= 0 && lease != NoExpiry {
		return false, fmt.Errorf("%w: lease %v: give a positive lease, or NoExpiry", ErrInvalidArgument, lease)
	}
	sent := time.Now()
	now := sent.UnixMilli()
	expiry, deadline := lua.NoExpiry, sent.Add(noDeadline)
	if lease > 0 {
		expiry = now + max(lease.Milliseconds(), 1)
		deadline = permitDeadline(sent, expiry, lease)
	}
	ok, err := s.keys.SetLease(ctx, s.o.c.rdb, raw[0], expiry, now, s.o.c.publishCommand(ctx))
	if ok {
		for _, h := range s.holdsHere(raw[0]) {
			h.SetDeadline(deadline)
		}
	}
	return ok, s.o.wrap(err)
}

// noDeadline is how far a permit that never expires (NoExpiry) is from its
// handle's deadline: a century.
const noDeadline = 100 * 365 * 24 * time.Hour

// LeaseTime returns how long the permit id has left, or NoExpiry for a permit
// that never expires, after reclaiming the expired permits (Redisson's
// getLeaseTime). A permit the semaphore does not hold gives an error matching
// ErrNoSuchPermit.
func (s *ExpirableSemaphore) LeaseTime(ctx context.Context, id string) (_ time.Duration, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpLeaseTime)
	defer ob.endCall(&err)
	raw, err := s.rawIDs([]string{id})
	if err != nil {
		return 0, err
	}
	ms, ok, err := s.keys.Lease(ctx, s.o.c.rdb, raw[0], time.Now().UnixMilli(), s.o.c.publishCommand(ctx))
	switch {
	case err != nil:
		return 0, s.o.wrap(err)
	case !ok:
		return 0, fmt.Errorf("%w: semaphore %s: permit %s", ErrNoSuchPermit, quote(s.o.name), id)
	case ms < 0:
		return NoExpiry, nil
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64, nil // an expiry beyond a time.Duration
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// AvailablePermits returns the permits available, after reclaiming the expired
// ones: 0 for a semaphore that does not exist; negative after SetPermits or
// AddPermits took more than there were.
func (s *ExpirableSemaphore) AvailablePermits(ctx context.Context) (_ int64, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAvailablePermits)
	defer ob.endCall(&err)
	return s.count(ctx, lua.CountAvailable)
}

// AcquiredPermits returns the permits acquired and not expired.
func (s *ExpirableSemaphore) AcquiredPermits(ctx context.Context) (_ int64, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAcquiredPermits)
	defer ob.endCall(&err)
	return s.count(ctx, lua.CountAcquired)
}

// TotalPermits returns the permits available plus the permits acquired, after
// reclaiming the expired ones: 0 for a semaphore that does not exist, whatever
// permits are still recorded (Redisson's getPermits; a Semaphore has no
// total, only AvailablePermits).
func (s *ExpirableSemaphore) TotalPermits(ctx context.Context) (_ int64, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpTotalPermits)
	defer ob.endCall(&err)
	return s.count(ctx, lua.CountTotal)
}

func (s *ExpirableSemaphore) count(ctx context.Context, what string) (int64, error) {
	if err := s.o.check(); err != nil {
		return 0, err
	}
	n, err := s.keys.Count(ctx, s.o.c.rdb, what, time.Now().UnixMilli(), s.o.c.publishCommand(ctx))
	return n, s.o.wrap(err)
}

// SetPermits makes the total, available plus acquired (expired permits not
// yet reclaimed included), n, by adding the difference to the available
// permits, which may become negative; it creates the semaphore with n permits
// if it does not exist (Redisson's setPermits). Use TrySetPermits to
// initialise a semaphore that many processes share: SetPermits on every start
// drives the count wrong when permits are out. With WithReplicaAcks a change
// that fewer replicas acknowledged returns ErrNotReplicated: it stands on the
// primary.
func (s *ExpirableSemaphore) SetPermits(ctx context.Context, n int64) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpSetPermits)
	defer ob.endCall(&err)
	if err := s.checkTotal(n); err != nil {
		return err
	}
	var req lua.Request // the write that WAIT follows, with acknowledgements (lua.Permit.SetTotalAcked)
	if s.o.acks().Replicas > 0 {
		req = s.o.request()
	}
	acked, err := s.keys.SetTotalAcked(ctx, s.o.c.rdb, n, s.o.c.publishCommand(ctx), req, s.o.acks())
	return s.o.replicated("SetPermits", true, acked, err)
}

// TrySetPermits creates the semaphore with n permits (n >= 0) if it does not
// exist and reports whether it did; n is published. With WithReplicaAcks a
// creation that fewer replicas acknowledged returns true and
// ErrNotReplicated: it stands on the primary.
func (s *ExpirableSemaphore) TrySetPermits(ctx context.Context, n int64) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpTrySetPermits)
	defer ob.endCall(&err)
	if err := s.checkTotal(n); err != nil {
		return false, err
	}
	ok, acked, err := lua.SemaphoreTrySetAcked(ctx, s.o.c.rdb, s.o.name, n, 0, s.o.c.publishCommand(ctx), s.o.request(), s.o.acks())
	return ok, s.o.replicated("TrySetPermits", ok, acked, err)
}

func (s *ExpirableSemaphore) checkTotal(n int64) error {
	if err := s.o.check(); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: semaphore %s: negative permits %d", ErrInvalidArgument, quote(s.o.name), n)
	}
	return nil
}

// AddPermits adds delta (of any sign) to the available permits; a positive
// delta is published (Redisson's addPermits). With WithReplicaAcks a change
// that fewer replicas acknowledged returns ErrNotReplicated: it stands on the
// primary.
func (s *ExpirableSemaphore) AddPermits(ctx context.Context, delta int64) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAddPermits)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return err
	}
	acked, err := lua.SemaphoreAddAcked(ctx, s.o.c.rdb, s.o.name, delta, lua.PublishDelta, s.o.c.publishCommand(ctx), s.o.request(), s.o.acks())
	return s.o.replicated("AddPermits", delta != 0, acked, err)
}

// Delete deletes the semaphore, its count and its acquired permits, and
// reports whether it existed. Handles of its permits end with ErrPermitLost,
// told at once by client tracking (WithTracking), else at their next renewal;
// waiters keep waiting.
func (s *ExpirableSemaphore) Delete(ctx context.Context) (_ bool, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpDelete)
	defer ob.endCall(&err)
	if err := s.o.check(); err != nil {
		return false, err
	}
	n, err := s.o.c.rdb.Del(ctx, s.o.name, lua.PermitTimeoutsName(s.o.name)).Result()
	return n > 0, s.o.wrap(err)
}
