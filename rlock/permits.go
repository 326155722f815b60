package rlock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/watchdog"
)

// Permits is one acquisition of permits of an ExpirableSemaphore: their ids,
// and whether they are still held. Release gives them back. Done is closed when
// they are released or lost, Err then says why; like a Lease, the handle never
// reports permits valid past their deadline (the send time of the last
// confirmed renewal, or of the acquisition, plus the lease). Permits is safe
// for concurrent use.
type Permits struct {
	s     *ExpirableSemaphore
	raw   []string      // the ids as the scripts take them: 16 raw bytes
	ended ending        // ended when released or lost
	seen  *observe.Hold // what the client's observer was told of the hold's start; nil without one

	mu      sync.Mutex
	holds   []*watchdog.Hold // one per id: renewed (watchdog lease) or watched (fixed)
	sending bool             // a release (Release, Close) is in flight or was confirmed
}

// grant makes the handle of the permits ids, taken by an attempt sent at sent
// with lease (0: a watchdog lease) and held until deadline (permitDeadline):
// their holds are watched or renewed from now on, and Close gives them back. A
// reply that came after that deadline gives them back and asks for another
// attempt at once.
func (s *ExpirableSemaphore) grant(ctx context.Context, ids []string, sent time.Time, lease time.Duration, deadline time.Time) (*Permits, time.Duration, error) {
	if !time.Now().Before(deadline) {
		_ = s.release(ctx, ids, nil)
		return nil, 0, nil
	}
	c := s.o.c
	p := &Permits{s: s, raw: ids}
	p.mu.Lock() // Close's closeHold claims p: it waits for the holds below
	if !c.closing.add(p) {
		p.mu.Unlock()
		_ = s.release(ctx, ids, nil) // Close gave back the permits it knew of: these too
		return nil, 0, ErrClosed
	}
	p.seen = c.obs.holdStarted(observe.KindExpirableSemaphore, s.o.name, sent) // before the watchdog may end p
	c.record.keep(c.rdb, c.self, c.opts.logger, c.opts.releaseTimeout)
	for _, id := range ids {
		p.holds = append(p.holds, c.wd.WatchAs(watchdog.Label{Kind: observe.KindExpirableSemaphore, Name: s.o.name},
			s.keys.Renewal(id), deadline, lease == 0, c.opts.acks, p.lose))
	}
	p.mu.Unlock()
	return p, 0, nil
}

// permitDeadline is when permits that Redis holds until expiry (epoch ms, on
// this host's wall clock, as the scripts compare it) end on the monotonic
// clock of sent, the attempt's send time: at that expiry, and never later
// than sent plus life, the lease the attempt asked for. A second execution
// that found the permits of an earlier one answers their expiry, not the one
// it sent: the handle is counted from what Redis holds.
func permitDeadline(sent time.Time, expiry int64, life time.Duration) time.Time {
	return sent.Add(min(time.UnixMilli(expiry).Sub(sent), life))
}

// holdsHere returns the watchdog holds of this client's Permits handles on the
// permit raw (16 raw bytes) of s: what a release or lease update by id in this
// client tells at once.
func (s *ExpirableSemaphore) holdsHere(raw string) []*watchdog.Hold {
	return s.o.c.wd.Holds(s.keys.Renewal(raw))
}

// Name returns the semaphore's name.
func (p *Permits) Name() string { return p.s.o.name }

// IDs returns the permits' ids, 32 lowercase hex digits each, as Redisson ≥
// 3.17 shows them: ExpirableSemaphore.Release, UpdateLease and LeaseTime take
// them, in any process.
func (p *Permits) IDs() []string { return hexIDs(p.raw) }

func hexIDs(raw []string) []string {
	ids := make([]string, len(raw))
	for i, r := range raw {
		ids[i] = hex.EncodeToString([]byte(r))
	}
	return ids
}

// Done returns a channel closed when the permits are released or lost: their
// lease ran out (WithLeaseTime), a renewal found one gone (reclaimed,
// released by id, the semaphore deleted), no renewal was confirmed in time, or
// the Client was closed.
func (p *Permits) Done() <-chan struct{} {
	p.checkDeadline()
	return p.ended.Done()
}

// Err returns nil while the permits are held, and then why they are not: an
// error matching ErrReleased, ErrPermitLost, ErrUnlockUnconfirmed or ErrClosed.
// It never returns nil past the permits' deadline.
func (p *Permits) Err() error {
	p.checkDeadline()
	return p.ended.Err()
}

// checkDeadline ends p if one of its holds is past its deadline.
func (p *Permits) checkDeadline() {
	now := time.Now()
	for _, h := range p.watched() {
		if reason := h.Overdue(now); reason != nil {
			p.lose(reason)
			return
		}
	}
}

// errReleasedByID is why a Permits handle ends when this client's
// ExpirableSemaphore.Release gave one of its permits back by id.
var errReleasedByID = errors.New("released by id with ExpirableSemaphore.Release")

// lose ends p, lost for reason (a watchdog's), and reports it; given back by
// id in this client (errReleasedByID), it ends released, not lost.
func (p *Permits) lose(reason error) {
	c := p.s.o.c
	if errors.Is(reason, errReleasedByID) {
		p.finish(fmt.Errorf("%w: semaphore %s: permits %v: %w", ErrReleased, quote(p.s.o.name), p.IDs(), reason))
		return
	}
	err := fmt.Errorf("%w: semaphore %s: permits %v: %w", ErrPermitLost, quote(p.s.o.name), p.IDs(), reason)
	if p.finish(err) {
		c.obs.lost(observe.KindExpirableSemaphore, p.s.o.name, err)
	}
}

// finish ends p with err, stops its holds and forgets it; false if p had
// already ended.
func (p *Permits) finish(err error) bool {
	if !p.ended.end(err) {
		return false
	}
	p.forget(err)
	return true
}

// forget stops p's holds and forgets p, which ended with err.
func (p *Permits) forget(err error) {
	p.stopHolds()
	c := p.s.o.c
	c.obs.holdEnded(p.seen, err)
	c.closing.remove(p)
}

// sent ends p as its release (Release, Close) is sent, with err: the handle
// stops saying valid before the release leaves, whatever the reply (a waiter
// may hold the permits a moment after the release runs). It reports whether
// it ended p, and the release's outcome is then for the caller to settle
// (settled); false when p had ended before (lost), which forgot it then.
func (p *Permits) sent(err error) bool {
	p.stopHolds()
	return p.ended.end(err)
}

// settled gives p, ended by sent, the reason its release's outcome says.
func (p *Permits) settled(err error) {
	p.ended.restate(err)
	p.forget(err)
}

// Release gives the permits back (all of them, in one round trip bounded by
// the client's release timeout, not by ctx), waking waiters. The handle ends
// (Err says ErrReleased, Done closes) before the release is sent, since a
// waiter may hold the permits as soon as it runs; the reply then settles why. Permits already
// given back give an error matching ErrNoSuchPermit. Permits whose handle
// ended (lost) are still sent back, in case Redis has them yet (a lease
// extended by UpdateLease, say): nil if it had, else an error matching
// ErrNoSuchPermit and the loss. A release Redis does not confirm ends the
// handle with an error matching ErrUnlockUnconfirmed (the permits are no
// longer renewed and return to the pool within their lease); Release may be
// called again to resend it.
func (p *Permits) Release(ctx context.Context) (err error) {
	ctx, ob := p.startCall(ctx, observe.OpPermitsRelease)
	defer ob.endCall(&err)
	p.checkDeadline()
	if !p.claim() {
		return fmt.Errorf("%w: %w", ErrNoSuchPermit, p.ended.Err())
	}
	mine := p.sent(releasedError{p})
	lost := p.ended.Err()
	err = p.s.release(ctx, p.raw, nil)
	switch {
	case err == nil:
		if mine {
			p.settled(releasedError{p})
		}
		return nil
	case errors.Is(err, ErrNoSuchPermit) && !mine:
		return fmt.Errorf("%w: %w", err, lost)
	case errors.Is(err, ErrNoSuchPermit):
		p.settled(fmt.Errorf("%w: %w", ErrPermitLost, err))
		return err
	case errors.Is(err, ErrNotReplicated): // released, but fewer replicas than asked have it
		if mine {
			p.settled(releasedError{p})
		}
		return err
	}
	p.unclaim()
	err = fmt.Errorf("%w: semaphore %s: release of permits %v not confirmed (%w); they are no longer renewed and return within their lease",
		ErrUnlockUnconfirmed, quote(p.s.o.name), p.IDs(), err)
	if mine {
		p.settled(err)
	}
	return err
}

// releasedError is why a Permits handle ended after its Release: it matches
// ErrReleased, and its text, made only when read, names the permits.
type releasedError struct{ p *Permits }

func (e releasedError) Error() string {
	return fmt.Sprintf("%v: semaphore %s: permits %v", ErrReleased, quote(e.p.s.o.name), e.p.IDs())
}

func (e releasedError) Unwrap() error { return ErrReleased }

// startCall starts reporting a public call of op on p (see Client.begin).
func (p *Permits) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	return p.s.o.c.obs.startCall(ctx, observe.KindExpirableSemaphore, op, p.s.o.name)
}

// claim marks a release as sent; false if one already was.
func (p *Permits) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sending {
		return false
	}
	p.sending = true
	return true
}

// unclaim allows another release after one whose outcome is unknown.
func (p *Permits) unclaim() {
	p.mu.Lock()
	p.sending = false
	p.mu.Unlock()
}

// watched returns the permits' holds.
func (p *Permits) watched() []*watchdog.Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds
}

// stopHolds stops renewing and watching the permits.
func (p *Permits) stopHolds() {
	for _, h := range p.watched() {
		h.Stop()
	}
}

// closeHold gives the permits back at Close, and ends the handle with an
// error matching ErrClosed that says whether Redis confirmed it; a handle
// whose Release is in flight is left to that Release.
func (p *Permits) closeHold() {
	if !p.claim() {
		return
	}
	mine := p.sent(fmt.Errorf("%w: semaphore %s: permits %v are being released by Close", ErrClosed, quote(p.s.o.name), p.IDs()))
	err := p.s.release(context.Background(), p.raw, nil)
	if err != nil {
		err = fmt.Errorf("%w: semaphore %s: Close could not release permits %v (%w)", ErrClosed, quote(p.s.o.name), p.IDs(), err)
	} else {
		err = fmt.Errorf("%w: semaphore %s: permits %v released by Close", ErrClosed, quote(p.s.o.name), p.IDs())
	}
	if mine {
		p.settled(err)
	}
}
