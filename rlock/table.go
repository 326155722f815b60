package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/watchdog"
)

// lockTable is every lock this client holds or waits for, by lock (lockDef.id):
// the locks' engine. Its entries' state and transitions are in entry.go; the
// round trips around them are its methods (acquire.go, wait.go, wait_fair.go,
// release.go, queue.go and this file).
type lockTable struct {
	*core
	mu      sync.Mutex
	entries map[string]*lockEntry
}

// newLockTable returns the empty lock table of the client whose core is c.
func newLockTable(c *core) *lockTable {
	return &lockTable{core: c, entries: make(map[string]*lockEntry)}
}

// entry returns the lockEntry of lk, creating it. t.mu must be held.
func (t *lockTable) entry(lk *lockDef) *lockEntry {
	e := t.entries[lk.id]
	if e == nil {
		e = newEntry(lk)
		t.entries[lk.id] = e
	}
	return e
}

// forget drops e once nothing of it is left. t.mu must be held.
func (t *lockTable) forget(e *lockEntry) {
	if e.idle() && t.entries[e.lk.id] == e {
		delete(t.entries, e.lk.id)
	}
}

// remove takes w out of e's queue and reports whether it was there, and whether
// w was to settle a hand-off of unknown outcome. It closes the queue's
// subscription when the queue empties. t.mu must be held.
func (t *lockTable) remove(e *lockEntry, w *waiter) (was, unsure bool) {
	was, unsure, unsub := e.dequeue(w)
	if unsub != nil {
		unsub.Close()
	}
	t.forget(e)
	return was, unsure
}

// holdOf returns o's hold of the lock lk, or nil. t.mu must be held.
func (t *lockTable) holdOf(o *owner, lk *lockDef) *hold {
	if e := t.entries[lk.id]; e != nil {
		return e.holdOf(o)
	}
	return nil
}

// grant records the acquisition a of lk by o, with options lo, sent at sent,
// that Redis confirmed (o now holds the lock a.Expected+1 times, with the
// fencing token token on a fenced lock), and returns the new Lease. The watchdog
// registration is made here, before the caller can see the lease. t.mu must be
// held.
func (t *lockTable) grant(o *owner, lk *lockDef, a lua.AcquireArgs, lo lockOptions, sent time.Time, token int64) *Lease {
	l := &Lease{t: t, lease: lo.leaseTime, acks: a.Acks, token: token}
	h := t.entry(lk).acquired(o, a.Field, l, a.Expected+1)
	deadline := sent.Add(a.Lease.Duration())
	if h.wd == nil {
		h.seen = t.obs.holdStarted(lk.seen, lk.Name(), sent)
		t.record.keep(t.rdb, t.self, t.opts.logger, t.opts.releaseTimeout)
		h.wd = t.wd.WatchAs(watchdog.Label{Kind: lk.seen, Name: lk.Name()}, lk.Renewal(h.field.String()), deadline, h.renewed(), a.Acks,
			func(reason error) { t.lose(h, reason) })
	} else {
		h.wd.Update(deadline, h.renewed())
	}
	return l
}

// endHold forgets a hold: its leases end with err, its renewal stops. A hold that
// ends without an unlock (err is not ErrUnlocked: lost, force-unlocked, expired)
// wakes this client's waiters on the lock to attempt at once: nothing else will
// tell them the lock may be free. t.mu must be held.
func (t *lockTable) endHold(h *hold, err error) {
	e := h.e
	if !e.ended(h, err) {
		return
	}
	h.wd.Stop()
	t.obs.holdEnded(h.seen, err)
	if !errors.Is(err, ErrUnlocked) {
		t.wakeWaiters(e.lk)
	}
	t.forget(e)
}

// wakeWaiters makes this client's waiters on lk's Redis key look again at once:
// the head of each queue on the key (both sides of a read/write lock) and every
// fair waiter. t.mu must be held.
func (t *lockTable) wakeWaiters(lk *lockDef) {
	for _, id := range lk.keyIDs() {
		if e := t.entries[id]; e != nil {
			e.wakeAll()
		}
	}
}

// resync sets a hold's count to what Redis holds. When the owner's holds are
// gone it ends them and returns the ErrLockLost error. t.mu must be held.
func (t *lockTable) resync(h *hold, count int64) error {
	if count == 0 {
		err := fmt.Errorf("%w: %s: the owner's holds expired or were force-unlocked", ErrLockLost, quote(h.e.name))
		t.endHold(h, err)
		return err
	}
	h.recount(count)
	return nil
}

// checkDeadline declares h lost at once if its deadline has passed, before the
// watchdog's timer does: a lease is never valid past its deadline, even for the
// moment after a paused process resumes. t.mu must not be held.
func (t *lockTable) checkDeadline(h *hold) {
	if reason := h.wd.Overdue(time.Now()); reason != nil {
		t.lose(h, reason)
	}
}

// lose ends h, lost for reason (the watchdog's), and reports it; while the
// owner's last Unlock is in flight the loss is kept for that Unlock to apply if
// it fails. t.mu must not be held.
func (t *lockTable) lose(h *hold, reason error) {
	err := fmt.Errorf("%w: %s: %w", ErrLockLost, quote(h.e.name), reason)
	t.mu.Lock()
	if h.e.holdOf(h.owner) != h {
		t.mu.Unlock()
		return
	}
	if h.lostDuringRelease(err) {
		t.mu.Unlock()
		return
	}
	t.endHold(h, err)
	t.mu.Unlock()
	t.obs.lost(h.e.lk.seen, h.e.name, err)
}

// releaseHolds gives back, at Close, every hold still open but those whose
// Unlock is in flight, and ends their leases with ErrClosed: as the release
// is sent, then with what it found.
func (t *lockTable) releaseHolds() {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.releaseTimeout)
	defer cancel()
	publish := t.publishCommand(ctx)
	t.mu.Lock()
	var holds []*hold
	var args []lua.ReleaseArgs
	for _, e := range t.entries {
		for _, h := range e.holds {
			if h.releasing {
				continue // its Unlock ends it
			}
			h.beginRelease()
			for _, l := range h.leases { // a handle ends as its release is sent
				l.ended.end(fmt.Errorf("%w: %s is being released by Close", ErrClosed, quote(e.name)))
			}
			holds = append(holds, h)
			args = append(args, lua.ReleaseArgs{Lock: e.lk.Lock, Field: h.field, Expected: h.count, Levels: h.count,
				Latch: e.lk.NewLatch(), LatchTTL: t.latchTTL, Publish: publish, Quiet: e.lk.spin != nil})
		}
	}
	t.mu.Unlock()
	if len(holds) == 0 {
		return
	}
	replies, errs := t.backend.releaseAll(ctx, args)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, h := range holds {
		h.endRelease()
		t.endHold(h, h.closedHold(replies[i], errs[i], t.opts))
	}
}

// closedHold is the error that ends the leases of a hold Close released with
// the reply r or the error err. t.mu must be held.
func (h *hold) closedHold(r lua.ReleaseReply, err error, o clientOptions) error {
	name := quote(h.e.name)
	switch {
	case err == nil && r.Outcome == lua.Released:
		return fmt.Errorf("%w: %s was released by Close", ErrClosed, name)
	case err == nil && r.Outcome == lua.NotHeld:
		return fmt.Errorf("%w: %s had expired or been force-unlocked before Close", ErrClosed, name)
	case err == nil:
		err = fmt.Errorf("the owner's hold count changed under Close")
	}
	return fmt.Errorf("%w: %s: Close could not release it (%w); it is no longer renewed and expires within %v",
		ErrClosed, name, err, h.expiresWithin(o).Round(time.Millisecond))
}
