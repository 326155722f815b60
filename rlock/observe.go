package rlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/watchdog"
)

// observers is who hears of the client's calls and holds: its observer
// (WithObserver) and the optional interfaces it implements, found once by New,
// and for lost holds its logger (WithLogger) and hook (WithOnLost). The
// observer's fields are all nil when none is installed: every report then
// costs a nil check. A nil *observers (no client: a RedLock without parts)
// reports nothing.
type observers struct {
	calls  observe.Observer
	holds  observe.HoldObserver
	waits  observe.WaitObserver
	log    *slog.Logger
	onLost func(name string, err error)
	// quietExpiry keeps from log the fixed leases that ran out (the lease
	// the caller chose did what it said): the default logger, slog.Default,
	// tells trouble only.
	quietExpiry bool
}

// newObservers looks up the optional interfaces of the client's observer.
func newObservers(o clientOptions) observers {
	obs := observers{calls: o.observer, log: o.logger, onLost: o.onLost, quietExpiry: !o.loggerSet}
	if o.observer != nil {
		obs.holds, _ = o.observer.(observe.HoldObserver)
		obs.waits, _ = o.observer.(observe.WaitObserver)
	}
	return obs
}

// pubsubEvents is what the client's hub reports to: the observer's
// PubSubObserver, if it has one, and the client's logger, which logs
// reconnections.
type pubsubEvents struct {
	obs observe.PubSubObserver
	log *slog.Logger
}

// newPubSubEvents returns what the hub reports to: nil when neither the
// observer o nor the logger wants its events.
func newPubSubEvents(o observe.Observer, log *slog.Logger) observe.PubSubObserver {
	obs, _ := o.(observe.PubSubObserver)
	if log == nil {
		return obs
	}
	return pubsubEvents{obs: obs, log: log}
}

// Subscriptions passes a change of the subscriptions on to the observer.
func (e pubsubEvents) Subscriptions(delta int) {
	if e.obs != nil {
		e.obs.Subscriptions(delta)
	}
}

// Reconnected logs a reconnection and passes it on to the observer.
func (e pubsubEvents) Reconnected() {
	e.log.Warn(observe.EventReconnect) // messages may have been lost; every waiter looks again
	if e.obs != nil {
		e.obs.Reconnected()
	}
}

// trackingObserver returns the observer's TrackingObserver, if it has one,
// after telling it that tracking is off when the options turned it off.
func trackingObserver(o clientOptions) observe.TrackingObserver {
	obs, _ := o.observer.(observe.TrackingObserver)
	if obs != nil && o.noTracking {
		obs.Tracking("", observe.TrackingOff)
	}
	return obs
}

// observed is one public call that the client's observer sees: the ctx the
// observer returned for it (the call's from then on, which the waits below it
// find), the call, and whether it blocked. It is made only when an observer is
// installed; a nil *observed reports nothing.
type observed struct {
	context.Context
	obs     *observers
	call    observe.Call
	parent  *observed // the public call this one runs in: a MultiLock's, for its parts' Lock
	waited  bool      // the call, or one it runs, blocked
	blocked bool      // this call blocked: WaitStart was reported, WaitEnd is due
}

// observedKey is the ctx key under which an observed call finds itself.
type observedKey struct{}

// Value answers observedKey with o, and any other key as o's ctx does.
func (o *observed) Value(key any) any {
	if key == (observedKey{}) {
		return o
	}
	return o.Context.Value(key)
}

// startCall starts reporting a public call of op on the object name of kind
// k, and returns the ctx the call goes on with. With no observer installed (or
// none at all: a MultiLock without parts) it returns ctx itself and nil.
func (obs *observers) startCall(ctx context.Context, k observe.Kind, op observe.Op, name string) (context.Context, *observed) {
	if obs == nil || obs.calls == nil {
		return ctx, nil
	}
	o := &observed{obs: obs, call: observe.Call{Kind: k, Op: op, Name: name, Start: time.Now()}}
	o.parent, _ = ctx.Value(observedKey{}).(*observed)
	o.Context = obs.calls.Start(ctx, o.call)
	return o, o
}

// endCall reports the end of the call, whose error is *err; deferred with the
// call's named error result.
func (o *observed) endCall(err *error) {
	if o == nil {
		return
	}
	if o.blocked && o.obs.waits != nil {
		o.obs.waits.WaitEnd(o.wait())
	}
	o.obs.calls.End(o.Context, o.call, observe.Result{Outcome: outcomeOf(*err), Waited: o.waited, Err: *err})
}

// observedIn returns the observed call ctx belongs to, or nil (always nil
// without an observer: no ctx lookup).
func (obs *observers) observedIn(ctx context.Context) *observed {
	if obs == nil || obs.calls == nil {
		return nil
	}
	o, _ := ctx.Value(observedKey{}).(*observed)
	return o
}

// blocking records that the call is about to block (idempotent): it and the
// calls it runs in waited.
func (o *observed) blocking() {
	if o == nil || o.blocked {
		return
	}
	o.blocked = true
	for p := o; p != nil; p = p.parent {
		p.waited = true
	}
	if o.obs.waits != nil {
		o.obs.waits.WaitStart(o.wait())
	}
}

// woken reports what made the blocked call look at Redis again.
func (o *observed) woken(cause observe.Cause) {
	if o != nil && o.obs.waits != nil {
		o.obs.waits.Woken(o.wait(), cause)
	}
}

func (o *observed) wait() observe.Wait {
	return observe.Wait{Kind: o.call.Kind, Op: o.call.Op, Name: o.call.Name}
}

// outcomeOf classifies a call's error: a wait that ran out and an object
// found taken are outcomes, not failures.
func outcomeOf(err error) observe.Outcome {
	switch {
	case err == nil:
		return observe.OutcomeOK
	case errors.Is(err, errWaitElapsed) || errors.Is(err, context.DeadlineExceeded):
		return observe.OutcomeTimeout
	case errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed):
		return observe.OutcomeCanceled
	case errors.Is(err, ErrNotAcquired):
		return observe.OutcomeNotAcquired
	}
	return observe.OutcomeError
}

// errForceUnlocked is the reason of holds ended by this client's ForceUnlock.
var errForceUnlocked = errors.New("force-unlocked")

// holdOutcomeOf classifies the reason a hold ended with.
func holdOutcomeOf(err error) observe.HoldOutcome {
	switch {
	case errors.Is(err, ErrUnlocked) || errors.Is(err, ErrReleased):
		return observe.HoldReleased
	case errors.Is(err, ErrClosed):
		return observe.HoldClosed
	case errors.Is(err, ErrUnlockUnconfirmed):
		return observe.HoldUnconfirmed
	case errors.Is(err, errForceUnlocked):
		return observe.HoldForceReleased
	case errors.Is(err, watchdog.ErrLeaseEnded):
		return observe.HoldExpired
	}
	return observe.HoldLost
}

// holdStarted reports a hold that began with an acquisition sent at sent,
// and returns what holdEnded reports of it: nil without a HoldObserver, so
// that an unobserved hold carries one pointer.
func (obs *observers) holdStarted(k observe.Kind, name string, sent time.Time) *observe.Hold {
	if obs.holds == nil {
		return nil
	}
	h := &observe.Hold{Kind: k, Name: name, Start: sent}
	obs.holds.HoldStart(*h)
	return h
}

// holdEnded reports the end of the hold h (nil: not observed) with the reason
// err.
func (obs *observers) holdEnded(h *observe.Hold, err error) {
	if h == nil {
		return
	}
	outcome, end := holdOutcomeOf(err), *h
	switch outcome {
	case observe.HoldReleased:
		err = nil
	case observe.HoldLost:
		end.Loss = watchdog.Cause(err)
	}
	obs.holds.HoldEnd(end, outcome, err)
}

// lost logs a lost hold of the object name of kind k (the observer's event
// and attributes) and calls the client's hook (WithOnLost). The client's
// mutex must not be held.
func (obs *observers) lost(k observe.Kind, name string, err error) {
	if obs.log != nil && !(obs.quietExpiry && errors.Is(err, watchdog.ErrLeaseEnded)) {
		obs.log.Warn(observe.EventHoldEnd, observe.AttrKind, k.String(), observe.AttrName, name,
			observe.AttrOutcome, holdOutcomeOf(err).String(), observe.AttrLoss, watchdog.Cause(err).String(), "error", err)
	}
	if obs.onLost != nil {
		obs.onLost(name, err)
	}
}
