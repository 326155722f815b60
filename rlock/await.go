package rlock

import (
	"cmp"
	"context"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// subscription is the queue's share of a release channel's subscription
// (pubsub.Subscription; a fake in unit tests).
type subscription interface {
	waker
	Close()
}

// waker is what a wait listens to between its attempts: a release channel's
// subscription (pubsub.Subscription; several channels' merged, for a RedLock).
type waker interface {
	// Confirmed is closed once messages published from now on are heard.
	Confirmed() <-chan struct{}
	// Ready yields a token per message meant for this waiter, which says
	// whether a message or a re-subscription sent it.
	Ready() <-chan pubsub.Wake
}

// turn is what one attempt of a wait gave: the result, or how long the waiter
// may sleep before it attempts again.
type turn[T any] struct {
	got  T
	done bool // got is the result: the wait ends
	// sleep is the bound of the next sleep: the end of the holder's lease as the
	// attempt read it, or sooner. Negative: until something wakes the waiter (a
	// hand-off to it is in flight, whose releaser wakes it).
	sleep time.Duration
	// idle: the attempt did not look at Redis, it only said how long to sleep.
	idle bool
	// handed: got came from a release of this client that handed it over (a
	// hand-off the attempt found complete), not from a look at Redis.
	handed bool
	// timer is what it means when the sleep runs out (observers' wake cause):
	// the holder's lease as last read, a recheck, a back-off.
	timer observe.Cause
}

// waitPlan is one wait, as await runs it.
type waitPlan[T any] struct {
	// attempt makes the waiter's next attempt, or says how long to sleep
	// first. An error ends the wait.
	attempt func(context.Context) (turn[T], error)
	// subscribe, if set, returns what the wait listens to; it is called once,
	// after the first attempt that did not end the wait, so that a wait that
	// ends at once costs no subscription. Its caller closes what it returns.
	subscribe func(context.Context) (waker, error)
	// wake carries news from this client (a hold ended without an unlock, a
	// release that did not hand over): attempt again. Nil: none.
	wake <-chan struct{}
	// handed carries a result another goroutine obtained for the waiter (a
	// release's hand-off): it ends the wait. Nil: none.
	handed <-chan T
	// confirmed and heard, if set, run when the subscription is confirmed and
	// when a message arrives, before the next attempt (the Mutex paces them);
	// either way the waiter attempts again.
	confirmed, heard func()
	// watch is the observed call the wait belongs to (nil: none), told when
	// it blocks and what wakes it.
	watch *observed
}

// await runs a wait: attempt; if that did not end it, sleep until the bound the
// attempt returned, a message, the subscription's confirmation, news from this
// client, a hand-off or ctx, and attempt again. Every sleep but a hand-off's is
// bounded by what the last attempt read of the holder's lease, so a lost
// message delays the waiter by at most that lease: no wait outlives the hold it
// waits for. The first attempt after the subscription is confirmed closes the
// window in which a release was published before the waiter listened. When ctx
// ends the wait, await returns ctx.Err(): the caller says why (stopped) and
// leaves whatever queue it joined.
func await[T any](ctx context.Context, p waitPlan[T]) (T, error) {
	var zero T
	var listen waker
	var confirmed <-chan struct{}
	var woke observe.Cause // what ended the last sleep, told at the next look
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t, err := p.attempt(ctx)
		switch {
		case t.handed:
			p.watch.woken(observe.CauseHandOff)
		case !t.idle && woke != 0:
			p.watch.woken(woke)
			woke = 0
		}
		if err != nil || t.done {
			return t.got, err
		}
		if listen == nil && p.subscribe != nil {
			if listen, err = p.subscribe(ctx); err != nil {
				return zero, err
			}
			confirmed = listen.Confirmed()
		}
		var due <-chan time.Time
		if t.sleep >= 0 {
			timer.Reset(t.sleep)
			due = timer.C
		}
		var ready <-chan pubsub.Wake
		if listen != nil {
			ready = listen.Ready()
		}
		p.watch.blocking()
		select {
		case got := <-p.handed:
			p.watch.woken(observe.CauseHandOff)
			return got, nil
		case <-p.wake:
			woke = observe.CauseLocal
		case <-due:
			woke = cmp.Or(woke, t.timer) // a short pacing sleep keeps the news before it
		case <-confirmed:
			confirmed = nil
			woke = observe.CauseSubscribed
			call(p.confirmed, p.wake)
		case w := <-ready:
			woke = causeOf(w)
			call(p.heard, p.wake)
		case <-ctx.Done():
			return zero, ctx.Err()
		}
		timer.Stop()
	}
}

// call runs f, if set, and then takes the token f may have put on wake: the
// next attempt looks anyway.
func call(f func(), wake <-chan struct{}) {
	if f == nil {
		return
	}
	f()
	select {
	case <-wake:
	default:
	}
}

// causeOf is the observers' cause of a subscription's token.
func causeOf(w pubsub.Wake) observe.Cause {
	switch w {
	case pubsub.WakeResubscribed:
		return observe.CauseResubscribe
	case pubsub.WakeChanged:
		return observe.CauseChanged
	}
	return observe.CauseMessage
}
