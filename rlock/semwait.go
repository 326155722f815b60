package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// The round trips of the semaphores' queues (permitqueue.go): the head's
// attempts, the settling of an unsure one, and the releases that hand
// permits over.

// permitKind is what one kind of semaphore does in Redis for its queue.
type permitKind interface {
	// attempt takes permits for ws (head first, in order) in one round trip
	// sent at sent, with request req.
	attempt(ctx context.Context, sent time.Time, req lua.Request, ws []*permitWaiter) (permitTry, error)
	// giveBack returns the permits of served waiters that had left.
	giveBack(ctx context.Context, ws []*permitWaiter)
	// recorded reports whether a failed round trip's outcome is read from its
	// request's record (Semaphore). An ExpirableSemaphore's need not be: its
	// waiters' permit ids are the record, which their own next attempt reads.
	recorded() bool
}

// permitTry is what one attempt did.
type permitTry struct {
	served int           // waiters served, from the front
	sleep  time.Duration // none served: how long the head may sleep at most (-1: until a message)
	absent bool          // none served: the semaphore does not exist
	expiry int64         // ExpirableSemaphore: a replayed head's expiry in Redis (0: sent plus the lease)
	// refused: the attempt served waiters, but fewer replicas than the
	// client requires acknowledged it (a *NotReplicatedError): it gave
	// their permits back, and they fail with it.
	refused error
}

// waitPermits queues w on the semaphore o and waits until a round trip serves
// it, or ctx ends (then it returns ctx.Err(); the caller says why). ctx must
// end with Close (waitContext).
func (t *permitTable) waitPermits(ctx context.Context, o *syncObject, k permitKind, w *permitWaiter, channel string) (permitGrant, error) {
	q := t.join(o.name, w)
	t.obs.observedIn(ctx).blocking()
	select {
	case <-w.turn:
		return t.leadPermits(ctx, o, k, q, w, channel)
	case g := <-w.grant:
		return g, g.err
	case <-ctx.Done():
		return t.leavePermits(ctx, o, k, q, w, ctx.Err())
	}
}

// leadPermits runs w as the head of q (await) until a round trip serves it or
// it gives up.
func (t *permitTable) leadPermits(ctx context.Context, o *syncObject, k permitKind, q *permitQueue, w *permitWaiter, channel string) (permitGrant, error) {
	g, err := await(ctx, waitPlan[permitGrant]{
		attempt: func(ctx context.Context) (turn[permitGrant], error) {
			tr, err := t.permitStep(ctx, o, k, q, w)
			if tr.sleep < 0 || tr.sleep > t.opts.recheck {
				tr.sleep, tr.timer = t.opts.recheck, observe.CauseRecheck
			}
			return tr, err
		},
		subscribe: func(ctx context.Context) (waker, error) { return t.listenPermits(ctx, o, q, channel) },
		wake:      w.wake,
		handed:    w.grant,
		confirmed: func() { t.locked(func() { q.attemptAt, q.quiet = time.Time{}, false }) },
		heard:     func() { t.locked(func() { q.attemptAt, q.quiet = time.Now().Add(q.pace.heard()), false }) },
		watch:     t.obs.observedIn(ctx),
	})
	if err != nil {
		return t.leavePermits(ctx, o, k, q, w, err)
	}
	return g, g.err
}

// permitStep is one step of the head w: settle an unsure round trip, pace,
// or attempt for the front waiters (headStep decides).
func (t *permitTable) permitStep(ctx context.Context, o *syncObject, k permitKind, q *permitQueue, w *permitWaiter) (turn[permitGrant], error) {
	t.mu.Lock()
	settle, sleep, ws, confirmed := q.headStep(w)
	t.mu.Unlock()
	switch {
	case settle:
		return t.settle(ctx, o, k, q, w)
	case ws == nil:
		return turn[permitGrant]{sleep: sleep, idle: true, timer: observe.CauseMessage}, nil
	}
	return t.attemptFor(ctx, o, k, q, w, ws, confirmed)
}

// attemptFor is the head w's attempt for ws, the front waiters it serves
// (confirmed: the queue's subscription was confirmed before it was sent),
// and the end of its round trip.
func (t *permitTable) attemptFor(ctx context.Context, o *syncObject, k permitKind, q *permitQueue, w *permitWaiter,
	ws []*permitWaiter, confirmed bool) (turn[permitGrant], error) {
	sent, req := time.Now(), o.request()
	rctx, cancel := t.releaseContext(ctx) // the round trip serves others: ctx does not cut it short
	r, err := k.attempt(rctx, sent, req, ws)
	cancel()
	t.mu.Lock()
	var back []*permitWaiter
	if r.refused != nil {
		q.refused(ws, r.served, r.refused, w)
	} else {
		back = t.ended(q, k, ws, r.served, err, req, 0, sent, w)
	}
	q.looked = q.looked || confirmed && err == nil
	switch {
	case r.refused != nil: // the permits are back: the next head attempts at once (refused)
	case err == nil && r.served > 0:
		q.pace.attemptWon()
		q.pace.acquired()
	default:
		q.quiet = false // w stays the head: the sleep it returns is its news
	}
	t.forgetLocked(q)
	k.giveBack(ctx, back)
	switch {
	case r.refused != nil:
		return turn[permitGrant]{got: permitGrant{err: r.refused}, done: true}, nil
	case err != nil:
		return turn[permitGrant]{}, o.wrap(err)
	case r.served > 0:
		return turn[permitGrant]{got: permitGrant{sent: sent, expiry: r.expiry}, done: true}, nil
	}
	return turn[permitGrant]{sleep: r.sleep, timer: observe.CauseLeaseExpiry}, nil
}

// ended records the end of a round trip that served ws, sent at sent with
// request req (offset: see unsureServe), by w (nil: a release): served of
// them, or an unknown outcome (err) that the head settles later when k reads
// it from the record. It returns the waiters whose permits go back. t.mu
// must be held.
func (t *permitTable) ended(q *permitQueue, k permitKind, ws []*permitWaiter, served int, err error,
	req lua.Request, offset int64, sent time.Time, w *permitWaiter) []*permitWaiter {
	if err != nil && k.recorded() {
		q.failed(ws, req, offset, sent)
		return nil
	}
	if err != nil {
		served = 0
	}
	return q.served(ws, served, sent, w)
}

// settle reads the outcome of q's first unsure round trip from its request's
// record and serves by it; w, the head (nil: none), may be one it served.
func (t *permitTable) settle(ctx context.Context, o *syncObject, k permitKind, q *permitQueue, w *permitWaiter) (turn[permitGrant], error) {
	t.mu.Lock()
	if len(q.unsure) == 0 {
		t.mu.Unlock()
		return turn[permitGrant]{idle: true}, nil
	}
	u := q.unsure[0]
	q.unsure = q.unsure[1:] // its waiters fly still: nobody else serves them
	t.mu.Unlock()
	rctx, cancel := t.releaseContext(ctx)
	v, ran, err := lua.Recorded(rctx, t.rdb, u.req)
	cancel()
	served := 0
	if ran {
		served = int(v - u.offset)
	}
	var refund []*permitWaiter
	if served > 0 && o.acks().Replicas > 0 {
		// The replicas' acknowledgement was lost with the reply: what the round
		// trip served goes back, and its waiters wait on, to attempt again.
		refund, served = u.ws[:served], 0
	}
	t.mu.Lock()
	back := t.ended(q, k, u.ws, served, err, u.req, u.offset, u.sent, w)
	if refund != nil {
		q.quiet = false // the permits are back: the head attempts at once
	}
	t.forgetLocked(q)
	k.giveBack(ctx, back)
	k.giveBack(ctx, refund)
	if err != nil {
		return turn[permitGrant]{}, o.wrap(err)
	}
	if i := slices.Index(u.ws, w); w != nil && i >= 0 && i < served {
		return turn[permitGrant]{got: permitGrant{sent: u.sent}, done: true}, nil
	}
	return turn[permitGrant]{sleep: 0}, nil
}

// leavePermits takes w out of q as it gives up with err; a round trip that
// served it meanwhile makes it return that grant instead. The last waiter of
// a queue with an unsure round trip settles it, or nobody would.
func (t *permitTable) leavePermits(ctx context.Context, o *syncObject, k permitKind, q *permitQueue, w *permitWaiter, err error) (permitGrant, error) {
	t.mu.Lock()
	served := q.leave(w)
	orphan := len(q.unsure) > 0 && len(q.waiters) == 0
	sub := t.forget(q)
	t.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
	if served {
		g := <-w.grant
		return g, g.err
	}
	if orphan {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.latchTTL.Duration())
		_, _ = t.settle(sctx, o, k, q, nil)
		cancel()
		t.mu.Lock()
		t.forgetLocked(q)
	}
	return permitGrant{}, err
}

// listenPermits returns q's subscription to the semaphore's channel, making
// it if the head is the first to need it. A head that takes over a
// subscription an attempt has looked through since its confirmation is not
// told of the confirmation (lookedThrough): a message since would have left
// it a token.
func (t *permitTable) listenPermits(ctx context.Context, o *syncObject, q *permitQueue, channel string) (waker, error) {
	t.mu.Lock()
	s, looked := q.sub, q.looked
	t.mu.Unlock()
	if s != nil && looked {
		return lookedThrough{s}, nil
	}
	if s != nil {
		return s, nil
	}
	s, err := t.listen(ctx, channel, semaphoreWake, pubsub.Heard(func(payload string) {
		n := int64(semaphoreWake(payload))
		t.locked(func() { q.announced = n })
	}))
	if err != nil {
		return nil, o.wrap(err)
	}
	s = t.follow(s, channel, o.name, true)
	t.mu.Lock()
	use := q.sub
	if use == nil && t.m[q.name] == q {
		q.sub, use = s, s
	}
	t.mu.Unlock()
	if use != s {
		s.Close()
	}
	if use == nil {
		return s, nil // q is gone: it cannot be, while its head listens
	}
	return use, nil
}

// handOff runs release, a round trip of this client that gives n permits of
// the semaphore o back, handing them to the front waiters of its queue that
// no other round trip serves, as many as n covers: release gets them (nil:
// none), whether to serve them only if no other client listens, and its
// request, and returns how many it served. With replica acknowledgements
// (WithReplicaAcks) it hands nothing over: the release's WAIT would stand
// for the waiters' acquisitions, and a short one could not be undone for
// them; release publishes, and the waiters take the permits with attempts
// of their own, acknowledged.
func (t *permitTable) handOff(ctx context.Context, o *syncObject, k permitKind, n int64,
	release func(ws []*permitWaiter, onlyIfAlone bool, req lua.Request) (int, error)) error {
	t.mu.Lock()
	q := t.m[o.name]
	var ws []*permitWaiter
	alone := false
	if q != nil && o.acks().Replicas == 0 {
		ws, alone = q.choose(n, nil), q.pace.streak >= maxPermitHandOffs
	}
	t.mu.Unlock()
	sent, req := time.Now(), o.request()
	served, err := release(ws, alone, req)
	if q == nil {
		return err
	}
	t.mu.Lock()
	var back []*permitWaiter
	if ws != nil {
		back = t.ended(q, k, ws, served, err, req, 1, sent, nil)
	}
	if served > 0 {
		q.pace.handedOff()
		q.pace.acquired()
	} else if len(q.waiters) > 0 {
		q.pace.published(true) // its message wakes this client's head too
	}
	t.forgetLocked(q)
	k.giveBack(ctx, back)
	return err
}

// forgetLocked drops q once idle (permitTable.forget), and unlocks t.mu,
// held by the caller, before it closes q's subscription.
func (t *permitTable) forgetLocked(q *permitQueue) {
	sub := t.forget(q)
	t.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

// locked runs f with t.mu held.
func (t *permitTable) locked(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
}

// lookedThrough is a queue's subscription that an attempt has looked through
// since its confirmation: its confirmation calls for no attempt.
type lookedThrough struct{ waker }

func (lookedThrough) Confirmed() <-chan struct{} { return nil }
