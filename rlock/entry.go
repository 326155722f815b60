package rlock

import (
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/watchdog"
)

// lockEntry is everything this client knows of one lock that it holds or waits
// for: the holds of its owners, its queue of waiters, and the pacing of its turns
// with other processes. The Client keeps one per name while the lock is held or
// waited for (Client.locks); every field is guarded by Client.mu and written in
// this file only, by the entry's transitions below. The Client does the I/O
// around them (wait.go, acquire.go, release.go, table.go).
type lockEntry struct {
	name     string
	lk       *lockDef // the names the scripts take, and the lock's kind
	holds    []*hold  // this client's owners holding the lock: one, or none
	holdsBuf [1]*hold
	pace     pacing

	// The queue: waiters in arrival order, queue[0] the head. Only the head
	// talks to Redis, through the queue's subscription to the release channel.
	queue line[*waiter]
	sub   subscription

	// When the head attempts next. Always set while there is a head: the end of
	// the holder's lease as last read from Redis (an attempt's PTTL, a local
	// hold's deadline), or sooner when something suggests the lock is free.
	// Unset (zero) only while the head's attempt is in flight, whose answer sets
	// it unless news that came meanwhile set it sooner.
	attemptAt time.Time
	// attempting: the head's acquire is in flight.
	attempting bool
	// handing: a release is handing the lock to this waiter, the head. Neither
	// an attempt nor a second hand-off starts while one of the two is in flight.
	handing *waiter
	// unsure: a release that may have handed the lock to this waiter failed with
	// an unknown outcome. The waiter's next attempt settles it; if the waiter
	// leaves first, it gives back what it may hold.
	unsure *waiter

	// fair: the waiters of a fair lock (wait_fair.go). They do not queue here:
	// the lock's queue is in Redis. They are woken when a hold of this client
	// ends without an unlock.
	fair []*waiter
}

// hold is what this client knows of one owner's holds on one lock. Its fields
// are guarded by Client.mu and written in this file only.
type hold struct {
	e         *lockEntry
	owner     *owner
	field     lua.Text
	count     int64    // the owner's hold count in Redis
	leases    []*Lease // open leases, oldest first
	leasesBuf [1]*Lease
	wd        *watchdog.Hold
	seen      *observe.Hold // what the client's observer was told of the hold's start; nil without one

	// releasing is set while the owner's last hold is being released; a loss
	// reported meanwhile is kept in lostWhileReleasing and applied if the
	// release fails.
	releasing          bool
	lostWhileReleasing error
}

// waiter is one call of Lock or TryLock waiting in a lock's queue, or for a fair
// lock's turn. It waits for its turn (turn is closed when it becomes the head);
// as the head it attempts (wait.go) until it takes the lock, is handed it by a
// release of this client (the lease arrives on grant), or gives up.
type waiter struct {
	place[*Lease] // grant: a release handed the lock to the waiter
	o             *owner
	lo            lockOptions
}

func newWaiter(o *owner, lo lockOptions) *waiter {
	return &waiter{place: newPlace[*Lease](), o: o, lo: lo}
}

func newEntry(lk *lockDef) *lockEntry {
	e := &lockEntry{name: lk.Name(), lk: lk}
	e.holds = e.holdsBuf[:0]
	return e
}

// idle reports whether nothing is left of e: the client may forget it.
func (e *lockEntry) idle() bool {
	return len(e.holds) == 0 && len(e.queue) == 0 && len(e.fair) == 0 && e.handing == nil
}

// --- Holds ---

// holdOf returns o's hold of the lock, or nil.
func (e *lockEntry) holdOf(o *owner) *hold {
	for _, h := range e.holds {
		if h.owner == o {
			return h
		}
	}
	return nil
}

// excluding reports whether owners of this client hold the lock in a way that
// excludes other owners: any hold, but a read lock's (lockDef.shared).
func (e *lockEntry) excluding() bool { return len(e.holds) > 0 && !e.lk.shared() }

// excludedUntil returns when the earliest excluding local hold's lease runs
// out, as last confirmed by Redis, and whether there is one (excluding).
func (e *lockEntry) excludedUntil() (time.Time, bool) {
	if !e.excluding() {
		return time.Time{}, false
	}
	var first time.Time
	for _, h := range e.holds {
		if d := h.wd.Deadline(); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first, !first.IsZero()
}

// acquired records a new lease l of o, whose field is field, now holding the
// lock count times, and returns its hold (new when o held nothing).
func (e *lockEntry) acquired(o *owner, field lua.Text, l *Lease, count int64) *hold {
	h := e.holdOf(o)
	if h == nil {
		h = &hold{e: e, owner: o, field: field}
		h.leases = h.leasesBuf[:0]
		e.holds = append(e.holds, h)
	}
	e.pace.acquired()
	h.count = count
	l.h = h
	h.leases = append(h.leases, l)
	return h
}

// ended takes h out, its leases ended with err (those whose release was sent
// ended then: err is now why), and reports whether it was in.
func (e *lockEntry) ended(h *hold, err error) bool {
	if e.holdOf(h.owner) != h {
		return false
	}
	for _, l := range h.leases {
		l.ended.settle(err)
	}
	h.leases = h.leasesBuf[:0]
	h.count = 0
	e.holds = slices.DeleteFunc(e.holds, func(x *hold) bool { return x == h })
	return true
}

// renewed reports whether some open lease of the hold is a watchdog lease.
func (h *hold) renewed() bool {
	for _, l := range h.leases {
		if l.lease == 0 {
			return true
		}
	}
	return false
}

// expiresWithin bounds how long the ended hold h may still live in Redis: a
// fixed lease's remaining time; for a watchdog lease the watchdog timeout plus
// one renewal interval of the client's options o, as a renewal round already
// in flight may still land. The client's mutex must be held.
func (h *hold) expiresWithin(o clientOptions) time.Duration {
	if h.renewed() {
		return o.watchdogTimeout + o.renewInterval
	}
	return max(time.Until(h.wd.Deadline()), 0)
}

// recount sets the owner's count to what Redis holds.
func (h *hold) recount(count int64) { h.count = count }

// gaveBack records that l gave back levels holds and the owner keeps the lock
// (a partial release), or, when its outcome is unknown (levels 0), that l ended
// alone: the owner's other leases keep the hold, whose count the next call
// resynchronises. It returns how many leases are left.
func (h *hold) gaveBack(l *Lease, levels int64) int {
	h.count -= levels
	h.leases = slices.DeleteFunc(h.leases, func(x *Lease) bool { return x == l })
	return len(h.leases)
}

// releasing marks the owner's last hold as being released.
func (h *hold) beginRelease() {
	h.releasing = true
	h.wd.SetReleasing(true) // the release's own change of the key is no news
}

// lostDuringRelease keeps err, a loss reported while the owner's last release
// is in flight, for that release to apply if it fails; it reports whether one
// is in flight.
func (h *hold) lostDuringRelease(err error) bool {
	if h.releasing {
		h.lostWhileReleasing = err
	}
	return h.releasing
}

// endRelease marks the release answered (or failed) and returns the loss
// reported meanwhile, if any.
func (h *hold) endRelease() (final bool, lost error) {
	h.wd.SetReleasing(false)
	final, lost = h.releasing, h.lostWhileReleasing
	h.releasing, h.lostWhileReleasing = false, nil
	return final, lost
}

// --- The queue ---

// enqueue appends w to the queue; a waiter that arrives at an empty queue is
// the head at once, and attempts first at first when set (the end of the
// holder's lease as the caller's own attempt read it).
func (e *lockEntry) enqueue(w *waiter, first time.Time) {
	if e.queue.push(w) {
		e.promote()
		if !first.IsZero() {
			e.attemptAt = first
		}
	}
}

// promote makes queue[0] the head: it attempts at once, unless an owner of this
// client holds the lock exclusively, in which case it waits for that hold to end
// (its release hands over, publishes or fails, and each of these wakes the head)
// or for its lease to run out.
func (e *lockEntry) promote() {
	e.attemptAt = time.Now()
	if d, held := e.excludedUntil(); held {
		e.attemptAt = d
	}
	e.queue[0].promote()
}

// dequeue takes w out of the queue and reports whether it was there, and
// whether w was to settle a hand-off of unknown outcome (unsure). When w was the
// head the next waiter is promoted; when the queue empties, its subscription is
// returned, for the caller to close.
func (e *lockEntry) dequeue(w *waiter) (was, unsure bool, unsub subscription) {
	was, head := e.queue.remove(w)
	if !was {
		return false, false, nil
	}
	if unsure = e.unsure == w; unsure {
		e.unsure = nil
	}
	switch {
	case len(e.queue) == 0:
		unsub, e.sub = e.sub, nil
	case head:
		e.promote()
	}
	return true, unsure, unsub
}

// attemptBy makes the head attempt at t at the latest, and wakes it to look.
func (e *lockEntry) attemptBy(t time.Time) {
	if len(e.queue) == 0 {
		return
	}
	e.soonest(t)
	e.queue[0].poke()
}

// soonest brings attemptAt forward to t (zero attemptAt: unset, during an attempt).
func (e *lockEntry) soonest(t time.Time) {
	if e.attemptAt.IsZero() || t.Before(e.attemptAt) {
		e.attemptAt = t
	}
}

// --- The head's steps ---

// headStep is what the head w does next: it was handed the lock (handed:
// receive it on w.grant), or it attempts now (attempt: the attempt is marked in
// flight), or it sleeps for sleep (< 0: until the releaser handing it the lock
// wakes it).
func (e *lockEntry) headStep(w *waiter) (handed, attempt bool, sleep time.Duration) {
	switch {
	case len(e.queue) == 0 || e.queue[0] != w:
		return true, false, 0 // only a hand-off takes a head out of the queue for it
	case e.handing != nil:
		return false, false, -1
	}
	if d := time.Until(e.attemptAt); d > 0 {
		return false, false, d
	}
	e.attempting = true
	e.attemptAt = time.Time{}
	return false, true, 0
}

// attempted records the answer to the head w's attempt: it won the lock
// (won), or Redis answered that it is held until bound (answered), or the
// attempt failed and w leaves. It returns how long w may sleep.
func (e *lockEntry) attempted(w *waiter, won, answered bool, bound time.Time) time.Duration {
	e.attempting = false
	if answered && e.unsure == w {
		e.unsure = nil // Redis answered: a hand-off that happened was found
	}
	switch {
	case won:
		e.pace.attemptWon()
		return 0
	case answered:
		e.soonest(bound)
		return time.Until(e.attemptAt)
	}
	e.attemptAt = time.Now() // w leaves: whoever is next looks at once
	return 0
}

// listening records that the head's subscription is confirmed: releases are heard
// from now on. The head attempts once more, unless an owner of this client holds
// the lock exclusively: the end of that hold wakes it.
func (e *lockEntry) listening() {
	if _, held := e.excludedUntil(); !held {
		e.attemptBy(time.Now())
	}
}

// heard records a release message: the head attempts after its pacing delay.
func (e *lockEntry) heard() { e.attemptBy(time.Now().Add(e.pace.heard())) }

// subscribed offers s, a new subscription of the head to the release channel,
// and returns the one the queue uses, and whether s is left for the caller to
// close (another head made one meanwhile, or nobody is left to listen).
func (e *lockEntry) subscribed(s subscription) (use subscription, spare bool) {
	switch {
	case e.sub != nil:
		return e.sub, true
	case len(e.queue) == 0: // the head was handed the lock meanwhile
		return s, true
	}
	e.sub = s
	return s, false
}

// --- Settling a release ---

// successor picks the waiter a final release may hand the lock to, the head,
// and marks the hand-off in flight; nil when there is none, the head is
// attempting or holds the lock already, or wants replica acknowledgements
// (WithLockReplicaAcks): a hand-off is covered by the releaser's WAIT only, and the
// head's own acquisition waits for them.
func (e *lockEntry) successor() *waiter {
	if len(e.queue) == 0 || e.attempting || e.handing != nil {
		return nil
	}
	w := e.queue[0]
	if e.holdOf(w.o) != nil || (w.lo.acks != nil && w.lo.acks.Replicas > 0) {
		return nil
	}
	e.handing = w
	return w
}

// handOffDone ends the hand-off in flight, which Redis confirmed, and counts
// it in the pacing.
func (e *lockEntry) handOffDone() {
	e.handing = nil
	e.pace.handedOff()
}

// published records a release of this client that was published (not handed
// over): the head attempts after the pacing's delay.
func (e *lockEntry) published(succ *waiter) {
	e.notHandedOff(succ, time.Now().Add(e.pace.published(len(e.queue) > 0)))
}

// handOffUnsure ends a hand-off to succ (nil: none was tried) whose outcome is
// unknown, or whose reply came too late to deliver: the lock may be succ's. A
// succ still queued settles it with its next attempt (unsure); one that has
// left is returned, for the caller to give back what it may hold. The head
// attempts at once.
func (e *lockEntry) handOffUnsure(succ *waiter) (undo *waiter) {
	if succ != nil {
		e.handing = nil
		if e.queue.has(succ) {
			e.unsure = succ
		} else {
			undo = succ
		}
	}
	e.attemptBy(time.Now())
	return undo
}

// notHandedOff ends a hand-off to succ (nil: none was tried) that did not
// happen, and makes the head attempt by attemptAt.
func (e *lockEntry) notHandedOff(succ *waiter, attemptAt time.Time) {
	if succ != nil {
		e.handing = nil
	}
	e.attemptBy(attemptAt)
}

// --- Fair waiters ---

// addFair records w, a waiter of the fair lock.
func (e *lockEntry) addFair(w *waiter) { e.fair = append(e.fair, w) }

// dropFair forgets w.
func (e *lockEntry) dropFair(w *waiter) {
	e.fair = slices.DeleteFunc(e.fair, func(x *waiter) bool { return x == w })
}

// wakeAll makes the head attempt at once and wakes every fair waiter: a hold
// ended without an unlock, and nothing else will tell them.
func (e *lockEntry) wakeAll() {
	e.attemptBy(time.Now())
	for _, w := range e.fair {
		w.poke()
	}
}
