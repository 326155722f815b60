package rlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// redLockRetry is the mean pause between two rounds of a waiting RedLock when no
// release message arrives first; each pause is drawn uniformly from half to one
// and a half times it, so that competing clients do not retry in step.
const redLockRetry = 200 * time.Millisecond

// startCall starts reporting a public call of op on r, to the observer of its
// first part's client.
func (r *RedLock) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	if len(r.parts) == 0 {
		return ctx, nil
	}
	return r.parts[0].c.obs.startCall(ctx, observe.KindRedLock, op, r.parts[0].name)
}

// observers returns who hears of the RedLock's calls: the first part's
// client's; nil without parts.
func (r *RedLock) observers() *observers {
	if len(r.parts) == 0 {
		return nil
	}
	return &r.parts[0].c.obs
}

// RedLock is a lock held while a majority of independent Redis primaries grant
// it: the Redlock algorithm as the Redis documentation states it (Redisson's
// RedissonRedLock, deprecated there; redsync's Mutex). Each part is a Mutex of
// its own Client, one Client per primary, usually all with the same name. It is
// a handle like Mutex: cheap, stateless, safe for concurrent use.
//
// A round tries every part at once, each with a timeout of a twentieth of the
// lease (between 10 ms and 1 s). It succeeds when more than half of the parts
// granted the lock and the lease left after the round, minus a clock drift
// allowance (1 % of the lease + 2 ms), is positive; otherwise it gives back what
// it took. Read docs/safety.md before relying on it: its safety rests on bounded
// clock drift and process pauses, which Redis cannot check.
type RedLock struct {
	parts []*Mutex
}

// NewRedLock returns a RedLock over mutexes, one per independent primary.
func NewRedLock(mutexes ...*Mutex) *RedLock {
	return &RedLock{parts: append([]*Mutex(nil), mutexes...)}
}

// TryLock makes one round, or with WithWaitTime retries rounds up to that time
// (see Lock). It returns an error matching ErrNotAcquired when no round won a
// valid majority.
func (r *RedLock) TryLock(ctx context.Context, opts ...TryOption) (_ *MultiLease, err error) {
	ctx, ob := r.startCall(ctx, observe.OpTryLock)
	defer ob.endCall(&err)
	lo, err := newTryLockOptions(opts)
	if err != nil {
		return nil, err
	}
	if lo.waitTime <= 0 {
		return r.round(ctx, lo)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, lo.waitTime, errWaitElapsed)
	defer cancel()
	return r.lock(ctx, lo)
}

// Lock makes rounds until one wins a valid majority or ctx is done. Between
// rounds it waits for a release message on any part that refused, or for a
// jittered pause (about 200 ms), whichever comes first.
func (r *RedLock) Lock(ctx context.Context, opts ...AcquireOption) (_ *MultiLease, err error) {
	ctx, ob := r.startCall(ctx, observe.OpLock)
	defer ob.endCall(&err)
	lo, err := newLockOptions(opts)
	if err != nil {
		return nil, err
	}
	return r.lock(ctx, lo)
}

// lock makes rounds until one wins a valid majority or ctx is done (await),
// listening between rounds to the parts' release channels.
func (r *RedLock) lock(ctx context.Context, lo lockOptions) (*MultiLease, error) {
	var parts *partsWaker
	defer func() {
		if parts != nil {
			parts.Close()
		}
	}()
	l, err := await(ctx, waitPlan[*MultiLease]{
		attempt: func(ctx context.Context) (turn[*MultiLease], error) {
			l, err := r.round(ctx, lo)
			if errors.Is(err, ErrNotAcquired) && ctx.Err() == nil {
				return turn[*MultiLease]{sleep: redLockRetry/2 + rand.N(redLockRetry), timer: observe.CauseBackoff}, nil
			}
			return turn[*MultiLease]{got: l, done: true}, err
		},
		subscribe: func(ctx context.Context) (waker, error) {
			parts = r.listen(ctx)
			return parts, nil
		},
		watch: r.observers().observedIn(ctx),
	})
	return l, gaveUp(ctx, r.parts[0].name, true, err)
}

// round tries every part at once and keeps the acquisitions if they make a
// valid majority, else gives them back.
func (r *RedLock) round(ctx context.Context, lo lockOptions) (*MultiLease, error) {
	if len(r.parts) == 0 {
		return nil, fmt.Errorf("%w: a RedLock needs at least one lock", ErrInvalidArgument)
	}
	if ownerFrom(ctx) == nil {
		ctx = WithOwner(ctx)
	}
	lease := lo.lease(r.parts[0].c.watched).Duration()
	start := time.Now()
	leases, errs := r.tryAll(ctx, lo, min(max(lease/20, 10*time.Millisecond), time.Second))
	validity := lease - time.Since(start) - (lease/100 + 2*time.Millisecond)
	if len(leases) > len(r.parts)/2 && validity > 0 {
		var validUntil time.Time
		if lo.leaseTime > 0 {
			validUntil = start.Add(validity)
		}
		return newMultiLease(observe.KindRedLock, leases, validUntil), nil
	}
	giveBackAll(context.WithoutCancel(ctx), leases)
	return nil, gaveUp(ctx, r.parts[0].name, true, fmt.Errorf("%w: %s: %d of %d primaries granted it, %v of its lease left (first refusal: %w)",
		ErrNotAcquired, quote(r.parts[0].name), len(leases), len(r.parts), validity.Round(time.Millisecond), firstError(errs)))
}

// tryAll makes one attempt on every part at once, each bounded by timeout, and
// returns the leases taken and the other parts' errors.
func (r *RedLock) tryAll(ctx context.Context, lo lockOptions, timeout time.Duration) ([]*Lease, []error) {
	leases := make([]*Lease, len(r.parts))
	errs := make([]error, len(r.parts))
	var wg sync.WaitGroup
	for i, p := range r.parts {
		if p.bad != nil {
			errs[i] = p.bad
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			leases[i], errs[i] = p.c.locks.obtain(pctx, p.lk, ownerFrom(ctx), lo, false, time.Time{})
		}()
	}
	wg.Wait()
	var taken []*Lease
	for _, l := range leases {
		if l != nil {
			taken = append(taken, l)
		}
	}
	return taken, errs
}

// listen subscribes to every part's release channel (a part whose primary is
// down is skipped: the wait's timer bounds the pause).
func (r *RedLock) listen(ctx context.Context) *partsWaker {
	var subs []subscription
	for _, p := range r.parts {
		if p.bad != nil {
			continue
		}
		if sub, err := p.c.backend.subscribe(ctx, p.lk.Channel()); err == nil {
			subs = append(subs, sub)
		}
	}
	return newPartsWaker(subs)
}

// partsWaker is the waker of a RedLock's wait: the subscriptions of its parts'
// channels merged, a message on any of them a token, confirmed once all are.
// Its goroutines, one per subscription, end with Close.
type partsWaker struct {
	subs      []subscription
	ready     chan pubsub.Wake // one token, buffered
	confirmed chan struct{}
	stop      chan struct{}
	wg        sync.WaitGroup
}

func newPartsWaker(subs []subscription) *partsWaker {
	w := &partsWaker{subs: subs, ready: make(chan pubsub.Wake, 1), confirmed: make(chan struct{}), stop: make(chan struct{})}
	var left sync.WaitGroup
	left.Add(len(subs))
	for _, s := range subs {
		w.wg.Go(func() { w.forward(s, &left) })
	}
	w.wg.Go(func() {
		left.Wait()
		close(w.confirmed)
	})
	return w
}

// forward passes s's confirmation and tokens on until Close.
func (w *partsWaker) forward(s subscription, left *sync.WaitGroup) {
	select {
	case <-s.Confirmed():
		left.Done()
	case <-w.stop:
		left.Done()
		return
	}
	for {
		select {
		case why := <-s.Ready():
			select {
			case w.ready <- why:
			default:
			}
		case <-w.stop:
			return
		}
	}
}

func (w *partsWaker) Confirmed() <-chan struct{} { return w.confirmed }
func (w *partsWaker) Ready() <-chan pubsub.Wake  { return w.ready }

// Close stops the goroutines and closes the subscriptions.
func (w *partsWaker) Close() {
	close(w.stop)
	w.wg.Wait()
	for _, s := range w.subs {
		s.Close()
	}
}

// firstError returns the first non-nil error of errs.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
