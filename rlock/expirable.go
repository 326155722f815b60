package rlock

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// ExpirableSemaphore is a semaphore whose permits have ids and leases,
// Redisson's RPermitExpirableSemaphore: the string key of its name holds the
// permits available, the sorted set "{name}:timeout" the permits acquired,
// each with its expiry. An expired permit goes back to the pool when a call
// that reclaims runs (TryAcquire, Acquire, AvailablePermits, AcquiredPermits,
// TotalPermits, UpdateLease, LeaseTime, and Release of several ids), exactly where
// Redisson reclaims; nothing runs in the background.
//
// Beyond Redisson, a permit taken without WithLeaseTime has a watchdog lease:
// the client's watchdog renews it while the Permits handle is held, so the
// permit of a process that dies returns within the watchdog timeout instead of
// never (Redisson's permits without a lease never expire). Its handle tells
// when it is lost (Permits.Done, Permits.Err).
//
// Counts of permits must be at least 1 (ErrInvalidArgument otherwise, before
// any round trip). Waiters queue in their Client as a Semaphore's do (a
// release of this Client gives its permits to them in its own round trip,
// except with WithReplicaAcks), and the first looks again at the earliest lease
// expiry it read, and at least every recheck interval. WithReplicaAcks
// applies as to a Semaphore: acquisitions that fewer replicas acknowledged
// are undone and fail with ErrNotReplicated; releases and SetPermits,
// TrySetPermits and AddPermits stand and say so; UpdateLease does not wait.
// An ExpirableSemaphore is safe for concurrent use.
type ExpirableSemaphore struct {
	o    syncObject
	keys lua.Permit
}

// NewExpirableSemaphore returns the permit-expirable semaphore name
// (Redisson's getPermitExpirableSemaphore). A name whose channel or permit set
// would hash to another Redis Cluster slot is refused: every call returns an
// error matching ErrInvalidArgument.
func (c *Client) NewExpirableSemaphore(name string) *ExpirableSemaphore {
	return &ExpirableSemaphore{o: newSyncObject(c, name, "semaphore", observe.KindExpirableSemaphore, lua.CheckExpirableSemaphoreName), keys: lua.NewPermit(name)}
}

// Name returns the semaphore's name.
func (s *ExpirableSemaphore) Name() string { return s.o.name }

type permitOptions struct {
	lease time.Duration // 0: watchdog
	wait  time.Duration // TryAcquire only
}

// Acquire takes n permits, waiting until they are available or ctx is done:
// then it returns an error matching ErrNotAcquired and ctx's error. The
// permits are held until Permits.Release, or until their lease runs out
// (WithLeaseTime), or while the watchdog renews them. With WithReplicaAcks,
// an acquisition that fewer replicas acknowledged is undone and the call
// fails with ErrNotReplicated, even while waiting. WithLockReplicaAcks fails
// with ErrInvalidArgument: a semaphore takes the client's WithReplicaAcks.
func (s *ExpirableSemaphore) Acquire(ctx context.Context, n int64, opts ...AcquireOption) (_ *Permits, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpAcquire)
	defer ob.endCall(&err)
	o, err := newLockOptions(opts)
	if err != nil {
		return nil, err
	}
	po, err := s.permitOptions(o)
	if err != nil {
		return nil, err
	}
	return s.acquire(ctx, n, po, true)
}

// TryAcquire takes n permits if they are available now, or with WithWaitTime
// as soon as they are within that time; otherwise it returns an error matching
// ErrNotAcquired, or with WithReplicaAcks ErrNotReplicated (see Acquire).
func (s *ExpirableSemaphore) TryAcquire(ctx context.Context, n int64, opts ...TryOption) (_ *Permits, err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpTryAcquire)
	defer ob.endCall(&err)
	o, err := newTryLockOptions(opts)
	if err != nil {
		return nil, err
	}
	po, err := s.permitOptions(o)
	if err != nil {
		return nil, err
	}
	return s.acquire(ctx, n, po, po.wait > 0)
}

// permitOptions returns what the options of an acquisition o say to the
// semaphore: WithLockReplicaAcks is refused.
func (s *ExpirableSemaphore) permitOptions(o lockOptions) (permitOptions, error) {
	if o.acks != nil {
		return permitOptions{}, fmt.Errorf("%w: semaphore %s: WithLockReplicaAcks is for locks; a semaphore takes the client's WithReplicaAcks", ErrInvalidArgument, quote(s.o.name))
	}
	return permitOptions{lease: o.leaseTime, wait: o.waitTime}, nil
}

// MaxPermitsPerCall is the most permits one acquisition of an
// ExpirableSemaphore takes: each has an id, made before the first round trip
// and sent to Redis as a script argument.
const MaxPermitsPerCall = 1 << 16

// acquire makes attempts with n new ids, waiting between them if wait is set.
func (s *ExpirableSemaphore) acquire(ctx context.Context, n int64, o permitOptions, wait bool) (*Permits, error) {
	if err := s.o.checkCount(n); err != nil {
		return nil, err
	}
	if n > MaxPermitsPerCall {
		return nil, fmt.Errorf("%w: semaphore %s: %d permits in one acquisition, at most %d", ErrInvalidArgument, quote(s.o.name), n, MaxPermitsPerCall)
	}
	if o.lease < 0 {
		return nil, fmt.Errorf("%w: semaphore %s: negative lease %v", ErrInvalidArgument, quote(s.o.name), o.lease)
	}
	if o.wait < 0 {
		return nil, fmt.Errorf("%w: semaphore %s: negative wait time %v", ErrInvalidArgument, quote(s.o.name), o.wait)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = lua.NewPermitID()
	}
	c := s.o.c
	if !wait || !c.permits.queued(s.o.name) {
		p, absent, err := s.attempt(ctx, ids, o.lease)
		switch {
		case err != nil || p != nil:
			return p, gaveUp(ctx, s.o.name, true, err)
		case !wait:
			return nil, gaveUp(ctx, s.o.name, true, notAvailable(s.o.name, n, absent))
		}
	}
	var deadline time.Time
	if o.wait > 0 {
		deadline = time.Now().Add(o.wait)
	}
	ctx, stop := c.waitContext(ctx, deadline)
	defer stop()
	for {
		w := newPermitWaiter(n)
		w.ids, w.lease = ids, o.lease
		g, err := c.permits.waitPermits(ctx, &s.o, expirableKind{s}, w, s.keys.Channel())
		if err != nil {
			return nil, gaveUp(ctx, s.o.name, true, err)
		}
		life := s.life(o.lease)
		expiry := cmp.Or(g.expiry, g.sent.UnixMilli()+life.Milliseconds())
		if p, _, err := s.grant(ctx, ids, g.sent, o.lease, permitDeadline(g.sent, expiry, life)); p != nil || err != nil {
			return p, err
		}
		// The reply came after the permits' lease: grant gave them back. Wait on.
	}
}

// life is the lease of permits taken with lease: it, or the watchdog's.
func (s *ExpirableSemaphore) life(lease time.Duration) time.Duration {
	if lease == 0 {
		return s.o.c.watched.Duration()
	}
	return lease
}

// attempt tries once to take the permits ids: the handle, or whether the
// semaphore exists.
func (s *ExpirableSemaphore) attempt(ctx context.Context, ids []string, lease time.Duration) (*Permits, bool, error) {
	sent := time.Now()
	now, life := sent.UnixMilli(), s.life(lease)
	try, err := s.take(ctx, now, lua.PermitWaiter{IDs: ids, Expiry: now + life.Milliseconds()})
	switch {
	case err != nil:
		return nil, false, s.o.wrap(err)
	case try.Served > 0:
		p, _, err := s.grant(ctx, ids, sent, lease, permitDeadline(sent, try.Expiry, life))
		return p, false, err
	}
	return nil, try.Absent, nil
}

// expirableKind is an ExpirableSemaphore's side of its queue (permitKind).
type expirableKind struct{ s *ExpirableSemaphore }

func (k expirableKind) attempt(ctx context.Context, sent time.Time, _ lua.Request, ws []*permitWaiter) (permitTry, error) {
	now := sent.UnixMilli()
	try, err := k.s.take(ctx, now, k.waiters(now, ws)...)
	if nr, ok := err.(*NotReplicatedError); ok {
		return permitTry{served: try.Served, refused: nr}, nil
	}
	if err != nil || try.Served > 0 {
		return permitTry{served: try.Served, expiry: try.Expiry}, err
	}
	sleep := time.Duration(-1)
	if try.NextExpiry > 0 {
		sleep = max(time.Duration(try.NextExpiry-now)*time.Millisecond, time.Millisecond)
	}
	return permitTry{sleep: sleep, absent: try.Absent}, nil
}

// waiters returns what the scripts serve of ws at now, epoch ms: their ids,
// expiring after their lease.
func (k expirableKind) waiters(now int64, ws []*permitWaiter) []lua.PermitWaiter {
	out := make([]lua.PermitWaiter, len(ws))
	for i, w := range ws {
		out[i] = lua.PermitWaiter{IDs: w.ids, Expiry: now + k.s.life(w.lease).Milliseconds()}
	}
	return out
}

func (k expirableKind) giveBack(ctx context.Context, ws []*permitWaiter) {
	for _, w := range ws {
		if k.s.o.acks().Replicas > 0 {
			_ = k.s.undo(ctx, w.ids) // no hand-off with acknowledgements (handOff), nor a wait for them
		} else {
			_ = k.s.release(ctx, w.ids, nil)
		}
	}
}

// take takes permits for the waiters ws (the caller's first, see
// lua.Permit.Acquire) at now, epoch ms, in one round trip. With the client's
// replica acknowledgements, WAIT follows the script in that round trip, and
// an acquisition that served waiters and that fewer replicas acknowledged is
// undone (their ids given back, undo) and fails with a *NotReplicatedError,
// returned with what the attempt read. A replayed answer (the first waiter's
// ids found live: a second execution, which wrote nothing for the WAIT to
// count) is acknowledged by a round trip of its own (lua.Confirm); one whose
// confirmation fails is undone too, and fails with that error.
func (s *ExpirableSemaphore) take(ctx context.Context, now int64, ws ...lua.PermitWaiter) (lua.PermitTry, error) {
	c, acks := s.o.c, s.o.acks()
	try, replayed, acked, err := s.keys.AcquireAcked(ctx, c.rdb, now, c.publishCommand(ctx), acks, ws...)
	if err != nil || try.Served == 0 || acks.Replicas == 0 {
		return try, err
	}
	if replayed {
		acked, err = lua.Confirm(ctx, c.rdb, s.o.request(), acks)
	}
	if err == nil && !s.o.short(acked) {
		return try, nil
	}
	var undo error
	for _, w := range ws[:try.Served] {
		undo = cmp.Or(undo, s.undo(ctx, w.IDs))
	}
	if err != nil {
		return lua.PermitTry{}, err
	}
	return try, s.o.notReplicated("", acked, undo)
}

// undo gives back the permits ids (raw) that an acquisition took but must not
// keep, in a round trip of its own bounded by the client's release timeout:
// a release as Release makes (a request record of its own: go-redis resending
// it counts it once), that waits for no replica and hands nothing to this
// client's waiters (it publishes, and they attempt). An id already gone (an
// expired permit reclaimed) leaves nothing to give back.
func (s *ExpirableSemaphore) undo(ctx context.Context, ids []string) error {
	c := s.o.c
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	now, publish, req := time.Now().UnixMilli(), c.publishCommand(ctx), s.o.request()
	var err error
	if len(ids) == 1 {
		_, _, err = s.keys.Release(ctx, c.rdb, ids[0], now, publish, req, false)
	} else {
		_, _, err = s.keys.ReleaseAll(ctx, c.rdb, ids, now, publish, req, false)
	}
	return err
}

func (expirableKind) recorded() bool { return false }

// Release gives back the permits ids (32 hex digits each, either case), all
// or none, and publishes what Redisson publishes, waking waiters. One id is
// released as Redisson's tryRelease(id) does (an expired permit still goes back
// to the pool, but the call fails); several as tryRelease(ids), which changes
// nothing when one is unknown or expired. A permit the semaphore does not hold
// gives an error matching ErrNoSuchPermit. The round trip ends with the
// client's release timeout, not with ctx. A Permits handle of this client whose
// permit is released here ends at once, with an error matching ErrReleased; one
// of another client ends with ErrPermitLost, told at once by client tracking
// (WithTracking), else at its next renewal. With WithReplicaAcks, a release
// that fewer replicas acknowledged returns ErrNotReplicated: it stands on the
// primary, and the handles end as they do on success.
func (s *ExpirableSemaphore) Release(ctx context.Context, ids ...string) (err error) {
	ctx, ob := s.o.startCall(ctx, observe.OpRelease)
	defer ob.endCall(&err)
	raw, err := s.rawIDs(ids)
	if err != nil {
		return err
	}
	err = s.release(ctx, raw, ids)
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return err
	}
	for _, id := range raw {
		for _, h := range s.holdsHere(id) {
			h.Lose(errReleasedByID)
		}
	}
	return err // nil, or a short acknowledgement of a release that stands
}

// release gives back the raw ids, shown in errors as shown, or as hexIDs(raw)
// when shown is nil (made only then).
func (s *ExpirableSemaphore) release(ctx context.Context, raw, shown []string) error {
	c := s.o.c
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	var r int64
	acked := 0
	err := c.permits.handOff(ctx, &s.o, expirableKind{s}, int64(len(raw)), func(ws []*permitWaiter, alone bool, req lua.Request) (served int, err error) {
		now := time.Now().UnixMilli()
		publish, serve := c.publishCommand(ctx), expirableKind{s}.waiters(now, ws)
		if len(raw) == 1 {
			r, served, acked, err = s.keys.ReleaseAcked(ctx, c.rdb, raw[0], now, publish, req, s.o.acks(), alone, serve...)
		} else {
			r, served, acked, err = s.keys.ReleaseAllAcked(ctx, c.rdb, raw, now, publish, req, s.o.acks(), alone, serve...)
		}
		return served, err
	})
	switch {
	case err != nil:
		return s.o.wrap(err)
	case len(raw) == 1 && r == lua.PermitExpired:
		return fmt.Errorf("%w: semaphore %s: permit %s had expired (it went back to the pool)", ErrNoSuchPermit, quote(s.o.name), shownIDs(raw, shown)[0])
	case len(raw) == 1 && r == lua.PermitUnknown:
		return fmt.Errorf("%w: semaphore %s: permit %s was released, reclaimed or never acquired", ErrNoSuchPermit, quote(s.o.name), shownIDs(raw, shown)[0])
	case len(raw) > 1 && r == 0:
		return fmt.Errorf("%w: semaphore %s: one of permits %v was released, expired or never acquired; none was released",
			ErrNoSuchPermit, quote(s.o.name), shownIDs(raw, shown))
	}
	return s.o.replicated(opRelease, true, acked, nil)
}

// shownIDs returns shown, or hexIDs(raw) when shown is nil (see release).
func shownIDs(raw, shown []string) []string {
	if shown == nil {
		return hexIDs(raw)
	}
	return shown
}

// rawIDs checks the ids users give (32 hex digits, no duplicate) and returns
// them as the 16 raw bytes the scripts take.
func (s *ExpirableSemaphore) rawIDs(ids []string) ([]string, error) {
	if err := s.o.check(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: semaphore %s: no permit id", ErrInvalidArgument, quote(s.o.name))
	}
	raw := make([]string, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		b, err := hex.DecodeString(id)
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("%w: permit id %q is not 32 hex digits", ErrInvalidArgument, id)
		}
		if seen[string(b)] {
			return nil, fmt.Errorf("%w: permit id %s given twice", ErrInvalidArgument, id)
		}
		seen[string(b)] = true
		raw[i] = string(b)
	}
	return raw, nil
}
