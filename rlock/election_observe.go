package rlock

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/pubsub"
)

// Observe returns a channel that delivers the election's leader each time it
// changes (another leader, a new value, or no leader: a LeaderInfo whose
// Elected is false), beginning with the current one, until ctx ends or the
// Client is closed; then it is closed. It listens to the election's channel,
// where campaigns, Proclaim and Resign announce changes, and reads the leader
// (as Leader does) after each message and at least every recheck interval
// (WithRecheckInterval): a lost message, or a change nobody announces (a
// leader whose lease ran out, a Java participant), reaches the follower within
// that interval.
//
// Each LeaderInfo it delivers was read from Redis after the previous one was
// delivered (and read again on every message while the receiver is slow), so
// a receiver that is slow sees the latest state, not every state in between.
// It never goes back in term: no LeaderInfo older than one this handle
// delivered, nor than one the handle's Leader or Campaign had returned when
// the LeaderInfo was read (a Leader call racing a delivery may return a newer
// term than the one delivered next; the delivery after that catches up). The goroutine behind it ends with ctx or Close, which
// waits for it. The client's observer, if it is an observe.ElectionObserver,
// is told of every change delivered after the first.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo)
	if e.check() != nil {
		close(out)
		return out
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	if !e.c.closing.add(w) {
		cancel()
		close(out)
		return out
	}
	go func() {
		defer close(w.done)
		defer e.c.closing.remove(w)
		defer close(out)
		defer cancel()
		e.observe(ctx, out)
	}()
	return out
}

// watcher is an Observe goroutine, as Close stops it.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// closeHold stops the goroutine and waits for it.
func (w *watcher) closeHold() {
	w.cancel()
	<-w.done
}

// observe runs Observe: it reads the leader when the subscription is
// confirmed (or the first recheck passed), after each message and each
// recheck, and offers the latest change on out until the receiver takes it.
func (e *Election) observe(ctx context.Context, out chan<- LeaderInfo) {
	sub, err := e.c.listen(ctx, lua.ElectionChannel(e.name), wakeEvery)
	if errors.Is(err, pubsub.ErrClosed) {
		return
	}
	var ready <-chan pubsub.Wake
	var confirmed <-chan struct{}
	if err == nil {
		sub = e.c.follow(sub, lua.ElectionChannel(e.name), e.lk.Name(), false)
		defer sub.Close()
		ready, confirmed = sub.Ready(), sub.Confirmed()
	}
	recheck := e.c.opts.recheck
	timer := time.NewTimer(recheck)
	defer timer.Stop()
	tell, _ := e.c.opts.observer.(observe.ElectionObserver)
	var last, next LeaderInfo
	delivered, pending := false, false
	if confirmed == nil {
		pending, next = e.look(ctx, last, delivered) // no subscription: poll
	}
	for {
		if pending && next.Token < e.seen.Load() {
			pending, next = e.look(ctx, last, delivered) // the handle reported a newer term meanwhile
		}
		var send chan<- LeaderInfo
		if pending {
			send = out
		}
		select {
		case send <- next:
			if delivered && tell != nil {
				tell.LeaderChanged(observe.LeaderChange{Name: e.name, Elected: next.Elected(), Token: next.Token,
					NewTerm: next.Elected() && (next.Token != last.Token || next.Holder != last.Holder)})
			}
			last, delivered, pending = next, true, false
			continue
		case <-confirmed:
			confirmed = nil
		case <-ready:
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		pending, next = e.look(ctx, last, delivered)
		timer.Reset(recheck)
	}
}

// look reads the leader and reports whether it is news to a receiver that
// was last given last (if delivered): a change of holder, term or value, not
// older than any term the handle reported. A failed read is no news.
func (e *Election) look(ctx context.Context, last LeaderInfo, delivered bool) (bool, LeaderInfo) {
	info, err := e.leader(ctx)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return false, LeaderInfo{}
	}
	info.TTL = 0
	switch {
	case info.Token < e.seen.Load():
		return false, LeaderInfo{} // a newer term was reported meanwhile
	case !delivered:
		return true, info
	}
	return info.Holder != last.Holder || info.Token != last.Token || info.Value != last.Value, info
}

// wakeEvery is the election channel's wake policy: every message wakes every
// observer of this client.
func wakeEvery(string) int { return pubsub.All }
