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

// waitFair waits for the fair lock lk. Its queue is in Redis, shared with every
// client: each waiter queues itself there with its first attempt and then
// attempts on its own, never through the client's queue of lockEntry. It
// attempts again after its channel's subscription is confirmed, when a release
// wakes it on that channel as the queue's head, when a hold of this client ends
// without an unlock, and at the latest by the bound its last attempt answered.
// A waiter that gives up leaves the Redis queue before waitFair returns.
func (t *lockTable) waitFair(ctx context.Context, lk *lockDef, w *waiter) (*Lease, error) {
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	e := t.entry(lk)
	e.addFair(w)
	t.mu.Unlock()

	l, err := t.takeTurn(ctx, e, w)

	t.mu.Lock()
	e.dropFair(w)
	t.forget(e)
	t.mu.Unlock()
	if err != nil {
		t.leaveQueue(lk, w)
	}
	return l, err
}

// takeTurn attempts until w holds the fair lock of e or gives up (await): an
// attempt queues w in Redis, then w listens on its own channel, on which a
// release wakes the queue's head, and on w.wake, and attempts again at the
// latest by the bound its last attempt answered.
func (t *lockTable) takeTurn(ctx context.Context, e *lockEntry, w *waiter) (*Lease, error) {
	var sub subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	l, err := await(ctx, waitPlan[*Lease]{
		attempt: func(ctx context.Context) (turn[*Lease], error) {
			l, ttl, err := t.attempt(ctx, w.o, e.lk, w.lo)
			if errors.Is(err, ErrNotAcquired) && ctx.Err() == nil {
				return turn[*Lease]{sleep: time.Until(t.opts.expiry(ttl)), timer: observe.CauseLeaseExpiry}, nil
			}
			return turn[*Lease]{got: l, done: true}, err
		},
		subscribe: func(ctx context.Context) (waker, error) {
			var err error
			sub, err = t.subscribeWaiter(ctx, e, w)
			return sub, err
		},
		wake:  w.wake,
		watch: t.obs.observedIn(ctx),
	})
	return l, gaveUp(ctx, e.name, true, err)
}

// subscribeWaiter subscribes to w's own channel on the fair lock of e, on which
// a release wakes the queue's head.
func (t *lockTable) subscribeWaiter(ctx context.Context, e *lockEntry, w *waiter) (subscription, error) {
	field := e.lk.fieldOf(w.o, t.id).String()
	channel := lua.WaiterChannel(e.name, field)
	s, err := t.backend.subscribe(ctx, channel)
	switch {
	case errors.Is(err, pubsub.ErrClosed):
		return nil, ErrClosed
	case err != nil:
		return nil, fmt.Errorf("rlock: subscribe to %s: %w", quote(e.name), err)
	}
	return t.followFair(s, channel, e.lk.Name(), lua.QueueName(e.name), field), nil
}

// leaveQueue takes w out of the fair lock's Redis queue after it gave up, so
// that it does not hold up the waiters behind it (Redisson's acquireFailed).
// Failures are logged: the queue then skips w after its deadline.
func (t *lockTable) leaveQueue(lk *lockDef, w *waiter) {
	ctx, cancel := context.WithTimeout(context.Background(), t.latchTTL.Duration())
	defer cancel()
	a := t.acquireArgs(lk, w.o, w.lo)
	_, err := lua.Leave(ctx, t.rdb, lk.Lock, a.Field.String(), a.Wait, t.publishCommand(ctx))
	if err != nil && t.opts.logger != nil {
		t.opts.logger.Warn(observe.EventLeave, observe.AttrKind, lk.seen.String(), observe.AttrName, lk.Name(),
			"error", fmt.Errorf("a waiter that gave up could not leave the queue; it is skipped after its deadline: %w", err))
	}
}
