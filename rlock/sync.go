package rlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// syncObject is what the synchronizers (Semaphore, ExpirableSemaphore,
// CountDownLatch) share: their client, their name, and why the name is
// refused, if it is.
type syncObject struct {
	c    *Client
	name string
	noun string       // "semaphore" or "latch", for errors
	kind observe.Kind // for the client's observer
	bad  error        // the name's refusal; every call returns it
}

// newSyncObject returns the object name of kind k, checked by check.
func newSyncObject(c *Client, name, noun string, k observe.Kind, check func(string) error) syncObject {
	o := syncObject{c: c, name: name, noun: noun, kind: k}
	if name == "" {
		o.bad = fmt.Errorf("%w: empty %s name", ErrInvalidArgument, noun)
	} else if err := check(name); err != nil {
		o.bad = fmt.Errorf("%w: %s name %s: %w", ErrInvalidArgument, noun, quote(name), err)
	}
	return o
}

// startCall starts reporting a public call of op on o (see Client.begin).
func (o *syncObject) startCall(ctx context.Context, op observe.Op) (context.Context, *observed) {
	return o.c.obs.startCall(ctx, o.kind, op, o.name)
}

// check returns why no call on o can run: a refused name, a closed client.
func (o *syncObject) check() error {
	if o.bad != nil {
		return o.bad
	}
	if o.c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// checkCount returns why n cannot be the number of permits a call takes or
// gives: every such call wants at least one.
func (o *syncObject) checkCount(n int64) error {
	if n < 1 {
		return fmt.Errorf("%w: %s %s: permits must be at least 1, got %d", ErrInvalidArgument, o.noun, quote(o.name), n)
	}
	return o.check()
}

// wrap names the object in err, and reads a WRONGTYPE reply as ErrWrongType.
// A *NotReplicatedError names the object already: it is returned as it is.
func (o *syncObject) wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotReplicated):
		return err
	case lua.IsWrongType(err):
		return fmt.Errorf("%w: %s is not a %s (%v)", ErrWrongType, quote(o.name), o.noun, err)
	case errors.Is(err, pubsub.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("rlock: %s %s: %w", o.noun, quote(o.name), unreachable(o.c.where, err))
}

// acks returns the replica acknowledgements the calls on o wait for, the
// client's (WithReplicaAcks): the zero Acks when none.
func (o *syncObject) acks() lua.Acks { return o.c.opts.acks }

// short reports whether acked replicas are fewer than the calls on o require.
func (o *syncObject) short(acked int) bool { return acked < o.c.opts.acks.Replicas }

// notReplicated is the error of a semaphore's call that only acked replicas
// acknowledged: an acquisition (op ""), undone (undo: why giving its permits
// back failed, if it did), a release (op "release") or the count-changing
// call op (see NotReplicatedError.Op).
func (o *syncObject) notReplicated(op string, acked int, undo error) error {
	a := o.acks()
	e := &NotReplicatedError{Semaphore: o.name, Acked: acked, Wanted: a.Replicas, Timeout: a.Timeout, undo: undo}
	switch op {
	case "":
	case opRelease:
		e.Unlock = true
	default:
		e.Op = op
	}
	return e
}

// opRelease is notReplicated's op of a release.
const opRelease = "release"

// replicated returns the error of o's call op that wrote (or not) and that
// acked replicas acknowledged: err, wrapped (wrap), or when err is nil and
// the call wrote, a *NotReplicatedError if acked falls short. Without
// acknowledgements required, wrap(err).
func (o *syncObject) replicated(op string, wrote bool, acked int, err error) error {
	if err == nil && wrote && o.short(acked) {
		return o.notReplicated(op, acked, nil)
	}
	return o.wrap(err)
}

// request returns a new request key for a call that changes a count (see
// lua.Request).
func (o *syncObject) request() lua.Request { return lua.NewRequest(o.name, o.c.latchTTL) }

// syncWait is one wait of a synchronizer: its attempt, the channel that
// wakes it and how, its deadline (zero: none), and whether it acquires.
type syncWait[T any] struct {
	channel   string
	wake      pubsub.WakePolicy
	heard     func(payload string) // told every message of the channel (pubsub.Heard), if set
	deadline  time.Time
	acquiring bool // an ended ctx makes an error matching ErrNotAcquired
	attempt   func(context.Context) (turn[T], error)
}

// run makes the first attempt, and if it did not end the wait, waits (await):
// it listens to the channel with the wake policy between attempts, each sleep
// bounded by the one the attempt asks for and by the recheck interval. The
// first attempt costs nothing more than its round trip: no wait context, no
// subscription. The wait ends with ctx, the deadline and Close: run returns
// then ErrClosed, or for an acquisition an error matching ErrNotAcquired and
// ctx's error, else ctx's error.
func (w syncWait[T]) run(ctx context.Context, o *syncObject) (T, error) {
	first, err := w.attempt(ctx)
	if err != nil || first.done {
		return first.got, w.stopped(ctx, o, err)
	}
	c := o.c
	ctx, stop := c.waitContext(ctx, w.deadline)
	defer stop()
	var sub subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	tried := false
	got, err := await(ctx, waitPlan[T]{
		attempt: func(ctx context.Context) (turn[T], error) {
			t, err := first, error(nil)
			if tried {
				t, err = w.attempt(ctx)
			}
			t.idle, tried = !tried, true
			if t.sleep < 0 || t.sleep > c.opts.recheck {
				t.sleep, t.timer = c.opts.recheck, observe.CauseRecheck
			}
			return t, err
		},
		subscribe: func(ctx context.Context) (waker, error) {
			var opts []pubsub.SubscribeOption
			if w.heard != nil {
				opts = append(opts, pubsub.Heard(w.heard))
			}
			s, err := c.listen(ctx, w.channel, w.wake, opts...)
			sub = s
			return s, o.wrap(err)
		},
		watch: c.obs.observedIn(ctx),
	})
	return got, w.stopped(ctx, o, err)
}

// stopped returns err, or when ctx ended the wait the error that says so
// (gaveUp).
func (w syncWait[T]) stopped(ctx context.Context, o *syncObject, err error) error {
	return gaveUp(ctx, o.name, w.acquiring, err)
}

// semaphoreWake is the wake policy of a semaphore's channel (both kinds share
// it, as Redisson's entry): a message carries the permits now available, or
// released, and wakes that many waiters of this client (the hub caps it at the
// number waiting); a count of 0 or below wakes none. A payload that is not a
// number wakes one, to look.
func semaphoreWake(payload string) int {
	v, err := strconv.ParseInt(payload, 10, 64)
	switch {
	case err != nil:
		return 1
	case v <= 0:
		return 0
	case v > int64(pubsub.All):
		return pubsub.All
	}
	return int(v)
}
