package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// obtain acquires lk for o, waiting when wait is set until deadline (zero: no
// deadline) or ctx is done. When it fails because the lock is held, the error
// names the owner of this client that holds it, if one does.
func (t *lockTable) obtain(ctx context.Context, lk *lockDef, o *owner, lo lockOptions, wait bool, deadline time.Time) (*Lease, error) {
	implicit := o == nil
	if implicit {
		o = newOwner()
	}
	l, err := t.acquire(ctx, lk, o, lo, wait, deadline)
	if errors.Is(err, ErrNotAcquired) {
		err = t.nameHolder(lk, err, implicit)
	}
	return l, err
}

// nameHolder adds to err, a failed acquisition of lk, which owner of this
// client holds lk, if one does. When the caller's ctx carried no owner (implicit),
// it adds why that matters: most often the caller's own code holds the lock
// with a ctx that carried one, and the call waits for it like sync.Mutex (see
// WithOwner). Two owners of one client that contend, each with its own
// WithOwner, are ordinary contention: the holder is named, nothing more.
func (t *lockTable) nameHolder(lk *lockDef, err error, implicit bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range lk.keyIDs() {
		e := t.entries[id]
		if e == nil || len(e.holds) == 0 || lk.shared() && e.lk.shared() {
			continue // read holds do not keep a reader out
		}
		if !implicit {
			return fmt.Errorf("%w (held in this client by owner %d)", err, e.holds[0].owner.id)
		}
		return fmt.Errorf("%w (held in this client by owner %d: a call whose ctx carries no owner waits for it "+
			"like sync.Mutex, even on the same goroutine; see WithOwner)", err, e.holds[0].owner.id)
	}
	return err
}

// acquire is obtain, but for the description of the holder.
func (t *lockTable) acquire(ctx context.Context, lk *lockDef, o *owner, lo lockOptions, wait bool, deadline time.Time) (*Lease, error) {
	reentrant, queued, err := t.look(lk, o)
	if err != nil {
		return nil, err
	}
	var first time.Time
	if reentrant || !wait || !queued && lk.Layout() != lua.LayoutFair {
		// No waiter of this client is ahead (a fair lock's waiters queue in
		// Redis instead): try at once. The uncontended path ends here, without
		// any pub/sub work.
		l, ttl, err := t.attempt(ctx, o, lk, lo)
		if err == nil || reentrant || !wait || !errors.Is(err, ErrNotAcquired) || ctx.Err() != nil {
			return l, gaveUp(ctx, lk.Name(), true, err)
		}
		first = t.opts.expiry(ttl)
	}
	ctx, stop := t.waitContext(ctx, deadline)
	defer stop()
	switch {
	case lk.spin != nil:
		return t.spin(ctx, lk, o, lo)
	case lk.Layout() == lua.LayoutFair:
		lo.queue = true
		return t.waitFair(ctx, lk, newWaiter(o, lo))
	}
	return t.wait(ctx, lk, newWaiter(o, lo), first)
}

// look reads what the client knows of lk before o's call: whether o holds it
// already, whether a waiter of this client is ahead of the call or an owner of
// it excludes the call, and why o may not take lk at all (refuse).
func (t *lockTable) look(lk *lockDef, o *owner) (reentrant, queued bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[lk.id]
	reentrant = e != nil && e.holdOf(o) != nil
	queued = e != nil && (len(e.queue) > 0 || e.excluding())
	return reentrant, queued, t.refuse(lk, o, reentrant)
}

// refuse returns why o may not take lk at all, at once: a second hold of a
// non-reentrant lock, or the write side of a read/write lock whose read side o
// holds. t.mu must be held.
func (t *lockTable) refuse(lk *lockDef, o *owner, reentrant bool) error {
	switch {
	case reentrant && lk.nonReentrant:
		return fmt.Errorf("%w: %s", ErrNonReentrant, quote(lk.Name()))
	case lk.Layout() == lua.LayoutWrite && !reentrant:
		if e := t.entries[entryID(lk.Name(), lua.LayoutRead)]; e != nil && e.holdOf(o) != nil {
			return fmt.Errorf("%w: %s", ErrUpgrade, quote(lk.Name()))
		}
	}
	return nil
}

// spin waits for lk the spin lock's way (Redisson's RSpinLock; await without a
// channel): no queue and no pub/sub, an attempt after each pause of lk's
// back-off until one succeeds or ctx is done. The caller made the first
// attempt: the wait begins with a pause.
func (t *lockTable) spin(ctx context.Context, lk *lockDef, o *owner, lo lockOptions) (*Lease, error) {
	n := -1
	l, err := await(ctx, waitPlan[*Lease]{
		attempt: func(ctx context.Context) (turn[*Lease], error) {
			if n++; n == 0 {
				return turn[*Lease]{sleep: lk.spin.Delay(0), idle: true, timer: observe.CauseBackoff}, nil
			}
			l, _, err := t.attempt(ctx, o, lk, lo)
			if errors.Is(err, ErrNotAcquired) && ctx.Err() == nil {
				return turn[*Lease]{sleep: lk.spin.Delay(n), timer: observe.CauseBackoff}, nil
			}
			return turn[*Lease]{got: l, done: true}, err
		},
		watch: t.obs.observedIn(ctx),
	})
	return l, gaveUp(ctx, lk.Name(), true, err)
}

// wait queues w on name, waits for its turn and then leads until w holds the
// lock or gives up. first, when set, is when the head attempts first: the end of
// the holder's lease as the caller's own attempt just read it.
func (t *lockTable) wait(ctx context.Context, lk *lockDef, w *waiter, first time.Time) (*Lease, error) {
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	e := t.entry(lk)
	e.enqueue(w, first)
	t.mu.Unlock()

	t.obs.observedIn(ctx).blocking()
	select {
	case <-w.turn:
		return t.lead(ctx, e, w)
	case <-ctx.Done():
		return t.leave(e, w, waitEnded(ctx, e.name, true))
	}
}

// lead runs w as the head of e's queue (await): attempt whenever attemptAt is
// due, subscribed to the lock's release channel after the first step, until w
// holds the lock, is handed it by a release of this client (w.grant), or gives
// up. A release message and the subscription's confirmation reset attemptAt,
// paced (heard, listening); news from this client arrives on w.wake.
func (t *lockTable) lead(ctx context.Context, e *lockEntry, w *waiter) (*Lease, error) {
	l, err := await(ctx, waitPlan[*Lease]{
		attempt: func(ctx context.Context) (turn[*Lease], error) {
			return t.step(ctx, e, w)
		},
		subscribe: func(ctx context.Context) (waker, error) { return t.join(ctx, e) },
		wake:      w.wake,
		handed:    w.grant,
		confirmed: func() { t.locked(e.listening) },
		heard:     func() { t.locked(e.heard) },
		watch:     t.obs.observedIn(ctx),
	})
	if err == nil {
		return l, nil
	}
	return t.leave(e, w, gaveUp(ctx, e.name, true, err))
}

// join returns the queue's subscription to the lock's release channel, making it
// if w is the first head to need it.
func (t *lockTable) join(ctx context.Context, e *lockEntry) (subscription, error) {
	t.mu.Lock()
	s := e.sub
	t.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := t.backend.subscribe(ctx, e.lk.Channel())
	if errors.Is(err, pubsub.ErrClosed) {
		return nil, ErrClosed
	} else if err != nil {
		return nil, fmt.Errorf("rlock: subscribe to %s: %w", quote(e.name), err)
	}
	s = t.follow(s, e.lk.Channel(), e.lk.Name(), false)
	t.mu.Lock()
	use, spare := e.subscribed(s)
	t.mu.Unlock()
	if spare {
		s.Close()
	}
	return use, nil
}

// step returns the lease handed to w, or makes w's attempt if it is due and no
// hand-off to w is in flight, or else returns how long w may sleep (idle):
// until attemptAt, or (-1) until the releaser handing w the lock wakes it.
func (t *lockTable) step(ctx context.Context, e *lockEntry, w *waiter) (turn[*Lease], error) {
	t.mu.Lock()
	handed, attempt, sleep := e.headStep(w)
	t.mu.Unlock()
	switch {
	case handed:
		return turn[*Lease]{got: <-w.grant, done: true, handed: true}, nil
	case !attempt:
		return turn[*Lease]{sleep: sleep, idle: true, timer: observe.CauseLeaseExpiry}, nil
	}

	l, ttl, err := t.attempt(ctx, w.o, e.lk, w.lo)

	t.mu.Lock()
	defer t.mu.Unlock()
	answered := err == nil || errors.Is(err, ErrNotAcquired) && ctx.Err() == nil
	sleep = e.attempted(w, err == nil, answered, t.opts.expiry(ttl))
	switch {
	case err == nil:
		t.remove(e, w)
	case answered:
		err = nil // held: sleep
	}
	return turn[*Lease]{got: l, done: l != nil, sleep: sleep, timer: observe.CauseLeaseExpiry}, err
}

// leave ends w's wait with err, unless a release handed w the lock first: then
// it returns that lease. It never waits for another goroutine: a hand-off still
// in flight is the releaser's to give back (giveBack). t.mu must not be held.
func (t *lockTable) leave(e *lockEntry, w *waiter, err error) (*Lease, error) {
	t.mu.Lock()
	was, unsure := t.remove(e, w)
	t.mu.Unlock()
	if !was {
		return <-w.grant, nil // removed by the hand-off that sent it
	}
	if unsure {
		// A failed release may have handed w the lock: give back what w may hold.
		t.undoAcquire(t.acquireArgs(e.lk, w.o, w.lo))
	}
	return nil, err
}

// locked runs f, a transition of an entry, with t.mu held.
func (t *lockTable) locked(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
}
