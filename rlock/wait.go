package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/pubsub"
)

// maxHandOffs is how many times in a row a release may hand the lock straight to
// a waiter of the same client while other clients wait for it too. After that the
// release is published, so that waiters of other processes get their turn.
const maxHandOffs = 3

// yieldStep paces the race that follows a published release: a head that has
// seen fewer releases by other clients since its client last held the lock waits
// a little longer before attempting, yieldStep times (yieldRounds - seen), so
// that the client that has waited longest attempts at once and the one that just
// released (which does not count its own release) comes last.
const (
	yieldStep   = 150 * time.Microsecond
	yieldRounds = 3
)

// lockState is what the client knows of one lock it holds or waits for: how many
// of its owners hold it, and its waiters in arrival order.
//
// Only the first waiter, the head, talks to Redis: it subscribes to the lock's
// channel (one subscription shared by the queue), attempts after the subscription
// is confirmed, and then waits for a wake-up from the channel, for the holder's
// remaining lease to pass, or for a hand-off. The others wait for their turn
// without any round trip. A release by an owner of this client hands the lock
// directly to the head, in the same round trip, up to maxHandOffs times in a row.
type lockState struct {
	name        string
	held        int       // owners of this client holding the lock
	releasing   int       // of which: owners whose last hold is being released
	waiters     []*waiter // arrival order; waiters[0] is the head
	sub         *pubsub.Subscription
	subscribing bool
	streak      int // hand-offs since the lock was last published or taken by an attempt
	seen        int // release messages the head received since an owner of this client acquired
	echoes      int // releases this client published while it had waiters: their messages are not counted in seen
}

type waiterState int

const (
	waiting    waiterState = iota
	attempting             // the head's attempt is in flight
	granting               // a release is handing the lock to this waiter
	granted                // the hand-off succeeded; lease is set
)

// waiter is one call of Lock or TryLock waiting in a lockState.
type waiter struct {
	o      *owner
	lo     lockOptions
	state  waiterState
	signal chan struct{} // something changed: promotion to head or the end of a hand-off

	// Head bookkeeping.
	attemptNow bool          // attempt at the next turn of the loop
	confirmed  bool          // the head saw the subscription confirmed
	ttl        time.Duration // bound of the next sleep; < 0: none
	lease      *Lease        // when granted
}

func (w *waiter) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// state returns the lockState of name, creating it. c.mu must be held.
func (c *Client) state(name string) *lockState {
	st := c.locks[name]
	if st == nil {
		st = &lockState{name: name}
		c.locks[name] = st
	}
	return st
}

// dropState forgets a lockState nobody holds or waits for. c.mu must be held.
func (c *Client) dropState(st *lockState) {
	if st.held == 0 && st.releasing == 0 && len(st.waiters) == 0 && !st.subscribing && c.locks[st.name] == st {
		delete(c.locks, st.name)
	}
}

// lock acquires name for o, waiting when wait is set until deadline (zero: no
// deadline) or ctx is done.
func (c *Client) lock(ctx context.Context, name string, o *owner, lo lockOptions, wait bool, deadline time.Time) (*Lease, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	if o == nil {
		o = newOwner()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	_, reentrant := c.holds[holdKey{o.id, name}]
	st := c.locks[name]
	queued := st != nil && (len(st.waiters) > 0 || st.held > 0)
	c.mu.Unlock()

	ttl := time.Duration(-1)
	if reentrant || !wait || !queued {
		// No waiter of this client is ahead: try at once. The uncontended path
		// ends here, without any pub/sub work.
		l, t, err := c.attempt(ctx, o, name, lo)
		if err == nil || reentrant || !wait || !errors.Is(err, ErrNotAcquired) {
			return l, c.gaveUp(ctx, name, err)
		}
		ttl = t
	}
	return c.wait(ctx, name, &waiter{o: o, lo: lo, signal: make(chan struct{}, 1), ttl: ttl}, deadline)
}

// wait queues w on name and runs it until it holds the lock or gives up.
func (c *Client) wait(ctx context.Context, name string, w *waiter, deadline time.Time) (*Lease, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	st := c.state(name)
	st.waiters = append(st.waiters, w)
	c.mu.Unlock()

	var deadlineC <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		deadlineC = t.C
	}
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
	defer sleep.Stop()

	for {
		c.mu.Lock()
		if w.state == granted {
			c.mu.Unlock()
			return w.lease, nil
		}
		head := st.waiters[0] == w
		subscribe := head && st.sub == nil && !st.subscribing
		if subscribe {
			st.subscribing = true
		}
		sub := st.sub
		if head && sub != nil && !w.confirmed && isClosed(sub.Confirmed()) {
			// Confirmed: releases are heard from now on. Attempt once more unless
			// an owner of this client holds the lock: its release will wake us.
			w.confirmed = true
			if st.held == st.releasing {
				w.attemptNow = true
			}
		}
		attempt := head && w.attemptNow && w.state == waiting
		if attempt {
			w.attemptNow = false
			w.state = attempting
		}
		bound := w.ttl
		c.mu.Unlock()

		switch {
		case subscribe:
			s, err := c.hub.Subscribe(ctx, lua.ChannelName(name))
			c.mu.Lock()
			st.subscribing = false
			if s != nil && len(st.waiters) == 0 {
				// Everyone left, or the lock was handed to w, while subscribing.
				s.Close()
				s = nil
			}
			st.sub = s
			c.dropState(st)
			c.mu.Unlock()
			if err != nil {
				return nil, c.leave(st, w, fmt.Errorf("rlock: subscribe to %s: %w", quote(name), err))
			}
			continue
		case attempt:
			l, ttl, err := c.attempt(ctx, w.o, name, w.lo)
			c.mu.Lock()
			w.state = waiting
			if err == nil {
				st.streak = 0
				c.dequeue(st, w, c.leaseOf(w.lo))
				c.mu.Unlock()
				return l, nil
			}
			if ttl >= 0 {
				ttl = max(ttl, time.Millisecond) // the key expires within the millisecond
			}
			w.ttl = ttl
			c.mu.Unlock()
			if !errors.Is(err, ErrNotAcquired) {
				return nil, c.leave(st, w, c.gaveUp(ctx, name, err))
			}
			continue
		}

		var ready, confirmed <-chan struct{}
		var sleepC <-chan time.Time
		if head && sub != nil {
			ready = sub.Ready()
			if !w.confirmed {
				confirmed = sub.Confirmed()
			}
		}
		if head && bound >= 0 {
			sleep.Reset(bound)
			sleepC = sleep.C
		}
		select {
		case <-w.signal:
		case <-confirmed:
		case <-ready:
			c.mu.Lock()
			if st.echoes > 0 {
				st.echoes-- // our own release coming back
			} else {
				st.seen++
			}
			if d := yieldStep * time.Duration(yieldRounds-st.seen); d > 0 {
				w.ttl = d // attempt when it runs out
			} else {
				w.attemptNow = true
			}
			c.mu.Unlock()
		case <-sleepC:
			c.setAttempt(w)
		case <-ctx.Done():
			return nil, c.leave(st, w, fmt.Errorf("%w: %s: %w", ErrNotAcquired, quote(name), ctx.Err()))
		case <-deadlineC:
			return nil, c.leave(st, w, fmt.Errorf("%w: %s: wait time elapsed", ErrNotAcquired, quote(name)))
		case <-c.closing:
			return nil, c.leave(st, w, ErrClosed)
		}
		sleep.Stop()
	}
}

// gaveUp makes an error that ended a call because ctx was done match
// ErrNotAcquired as well as ctx.Err(), as documented for Lock and TryLock.
func (c *Client) gaveUp(ctx context.Context, name string, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ErrNotAcquired) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrNotAcquired, quote(name), ctx.Err())
}

func (c *Client) setAttempt(w *waiter) {
	c.mu.Lock()
	w.attemptNow = true
	c.mu.Unlock()
}

// leave takes w out of the queue and returns err. If a hand-off to w is in flight
// it waits for its outcome, and gives the lock back if it was handed over: a call
// that gives up never leaves a hold behind.
func (c *Client) leave(st *lockState, w *waiter, err error) error {
	c.mu.Lock()
	for w.state == granting {
		c.mu.Unlock()
		<-w.signal
		c.mu.Lock()
	}
	if w.state == granted {
		l := w.lease
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.latchTTL)
		defer cancel()
		if uerr := l.Unlock(ctx); uerr != nil && c.opts.logger != nil {
			c.opts.logger.Warn("holdfast: could not give back a lock handed to a cancelled waiter; it expires with its lease",
				"lock", quote(st.name), "error", uerr)
		}
		return err
	}
	c.dequeue(st, w, -1)
	c.mu.Unlock()
	return err
}

// dequeue removes w from the queue. When w was the head, the next waiter becomes
// head: if w acquired the lock (ttl >= 0 is the lease it took) the new head waits
// for a wake-up first; if w gave up it attempts at once. c.mu must be held.
func (c *Client) dequeue(st *lockState, w *waiter, ttl time.Duration) {
	i := 0
	for i < len(st.waiters) && st.waiters[i] != w {
		i++
	}
	if i == len(st.waiters) {
		return
	}
	st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
	if i == 0 && len(st.waiters) > 0 {
		next := st.waiters[0]
		next.confirmed = false
		next.attemptNow = ttl < 0
		if ttl >= 0 {
			next.ttl = ttl
		}
		next.wake()
	}
	if len(st.waiters) == 0 && st.sub != nil {
		st.sub.Close()
		st.sub = nil
	}
	c.dropState(st)
}

// successor picks the waiter a final release may hand the lock to, and marks it.
// c.mu must be held.
func (c *Client) successor(st *lockState) *waiter {
	if len(st.waiters) == 0 {
		return nil
	}
	w := st.waiters[0]
	if w.state != waiting {
		return nil
	}
	if _, holds := c.holds[holdKey{w.o.id, st.name}]; holds {
		return nil
	}
	w.state = granting
	return w
}

// handOff completes a hand-off to succ: it records the hold (and its renewal)
// before succ can see it, then wakes succ. c.mu must be held.
func (c *Client) handOff(st *lockState, succ *waiter, sent time.Time) {
	succ.lease = c.grant(succ.o, st.name, 1, succ.lo, sent)
	succ.state = granted
	st.streak++
	c.dequeue(st, succ, c.leaseOf(succ.lo))
	succ.wake()
}

// endHandOff ends a hand-off to succ that did not happen. If the release was
// published (the script declined because other clients wait too), succ races for
// the lock with the other clients' waiters when the message reaches it, not
// before; only a head that may have missed the message (subscription not yet
// confirmed) attempts at once. Otherwise (nothing published, or the outcome is
// unknown) succ attempts at once: an attempt recognises a hand-off that did
// happen. c.mu must be held.
func (c *Client) endHandOff(succ *waiter, published bool) {
	if succ == nil || succ.state != granting {
		return
	}
	succ.state = waiting
	if !published || !succ.confirmed {
		succ.attemptNow = true
	}
	succ.wake()
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
