package watchdog

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
)

// ErrInvalidated: a look the client took because the server said a hold's key
// changed (client tracking), or because its connection to the server broke,
// found the hold gone. It matches ErrGone.
var ErrInvalidated = fmt.Errorf("%w (its key changed)", ErrGone)

// DefaultTrackDelay is how long a new hold waits, at most, before the tracker
// looks at it: the holds that come within it are looked at together, and a
// hold released within it costs nothing.
const DefaultTrackDelay = 2 * time.Millisecond

// tracker learns at once that a hold's key changed: for every Redis node the
// holds live on, a connection of its own reads their keys with CLIENT
// TRACKING on (the server then remembers them for it), and another receives
// the server's invalidations. A change to a key, a flush, or a broken
// connection makes it look at the holds concerned in one round trip
// (check.lua): those gone end at once (ErrInvalidated), those whose lease was
// cut short get their deadline brought forward. New holds are looked at,
// which tracks their keys, once they are DefaultTrackDelay old (within twice
// that), together; a hold released before costs no look. A hold whose release
// is in flight is not looked at (SetReleasing). A hold whose key its owner
// changed (Update: a reentrant acquire, a partial release) is looked at again
// as a new one: the look tracks the key again. Until its look, a new hold is
// left out of the looks that news of its key makes: the key's change may be
// its own acquire, or an earlier hold's release, and a look would track the
// key again, so that the next change (its release) makes another look, and
// so on for every hold on a busy key; its own look reads what any change did.
//
// The caller's path never sets a timer, and pokes the checker only when it
// does not tick: the checker's goroutine ticks while new holds come, every
// delay while its ticks find holds to look at, and, while they find none
// (the new holds end young: short holds, an uncontended Lock and Unlock),
// less and less often, down to one tick every maxTickGaps delays; it stops
// after idleTicks ticks without new holds. Each wake-up of a goroutine costs
// the machine far more than its own work: woken every 2 ms, the checker made
// the uncontended cycle 20 % slower on a 2-core machine (the Go scheduler's
// spinning takes the core Redis needs), without looking at anything. The
// pacing is tickPolicy's.
//
// Each fact has one owner, under one mutex: the watchdog's index (w.mu) owns
// whether a hold is watched, its deadline and whether its release is in
// flight; the tracker's mu owns its work: the keys the server said changed,
// the new holds (arrivals), the holds to look at again, and the tick; follows
// own the waiters' keys; nodeSet owns the nodes. The order is w.mu, then the
// tracker's mu. Each pass of the checker is straight-line: due takes the work
// (tracker's mu, then pick under w.mu), look asks the nodes (no lock), apply
// writes the answers into the index (w.mu). The nodes and the clock are
// interfaces (servers, server, clock), which the tests replace.
//
// The renewal rounds, the backstop, go through the same tracked connection
// (route): with NOLOOP their own change of a key is no news, and renew.lua
// reads each key again after extending it, so that it stays tracked. Nothing
// of this is on the caller's path: Watch appends the new hold to a queue.
type tracker struct {
	w     *Watchdog
	log   *slog.Logger
	obs   observe.TrackingObserver
	delay time.Duration
	clock clock
	nodes servers  // the nodes the holds live on, and their connections
	fol   *follows // the waiters' keys (follow.go)

	mu      sync.Mutex          // the checker's work, which is all below
	dirty   map[string]struct{} // keys the server said changed
	all     bool                // look at every hold: a flush, a broken connection
	fresh   arrivals[*Hold]     // new holds not yet looked at
	retried []*Hold             // holds whose look did not reach the server
	retryAt time.Time           // when to look at them again
	tick    tickPolicy          // when the checker ticks

	poke chan struct{}
	done chan struct{} // closed when the checker returns
}

// clock is the tracker's time: the machine's (realClock), or a test's.
type clock interface {
	now() time.Time
	afterFunc(d time.Duration, f func()) // f on a goroutine of its own after d
}

// realClock is the machine's clock.
type realClock struct{}

func (realClock) now() time.Time                      { return time.Now() }
func (realClock) afterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// servers are the nodes the holds' keys live on, as the tracker reaches them:
// nodeSet, or a test's.
type servers interface {
	// of returns the node that holds key.
	of(ctx context.Context, key string) (server, error)
	// primaryIs hears that the Sentinels name addr as the primary (see
	// tracker.primaryIs).
	primaryIs(addr string) bool
	// close closes every node's connections and waits for their listeners.
	close()
}

// server is what the tracker asks of one node, on its tracked connection
// (node, or a test's).
type server interface {
	// tracks reports false once the server refused tracking: the renewals
	// alone look at its holds.
	tracks() bool
	// look runs check.lua on each batch, in one round trip, with sent as the
	// clock: for each batch, the lease each hold has left (lua.Gone: gone),
	// nil when its answer is of no use; err when the round trip failed.
	look(ctx context.Context, batches [][]lua.Renewal, sent time.Time) ([][]int64, error)
	// read reads the followed keys ks, in one round trip, and returns the
	// news of those whose read is news.
	read(ctx context.Context, ks []string, keys map[string]unread) (map[string]Read, error)
	// conn is where the renewals of its holds go.
	conn() pipeliner
}

// newTracker returns the tracker of w's holds on rdb, its checker started, or
// nil when rdb is not a client it can follow (a Ring, a custom
// UniversalClient).
func newTracker(w *Watchdog, rdb redis.UniversalClient) *tracker {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return nil
	}
	t := newTrackerOf(w, realClock{})
	t.nodes = newNodeSet(t, rdb)
	go t.run()
	return t
}

// newTrackerOf returns a tracker of w's holds that keeps time with clk, with
// neither its nodes nor its checker.
func newTrackerOf(w *Watchdog, clk clock) *tracker {
	t := &tracker{w: w, log: w.opts.Logger, obs: w.opts.Tracking, delay: w.opts.TrackDelay, clock: clk,
		dirty: make(map[string]struct{}), tick: newTickPolicy(w.opts.TrackDelay),
		poke: make(chan struct{}, 1), done: make(chan struct{})}
	t.fol = newFollows(clk, t.wake)
	return t
}

// added records a new hold (or one to look at again as new), unless it is
// one already; the checker is poked only when it is not ticking. w.mu is held.
func (t *tracker) added(h *Hold) {
	t.mu.Lock()
	poke := t.fresh.add(h, t.clock.now()) && t.tick.arrived()
	t.mu.Unlock()
	if poke {
		t.wake()
	}
}

// ended forgets h, which the watchdog no longer watches, if it is a new hold
// not yet looked at. w.mu is held.
func (t *tracker) ended(h *Hold) {
	t.mu.Lock()
	t.fresh.drop(h)
	t.mu.Unlock()
}

// leaveNew returns hs but for the new holds. w.mu is held: no hold becomes
// new or ends meanwhile.
func (t *tracker) leaveNew(hs []*Hold) []*Hold {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.DeleteFunc(hs, t.fresh.has)
}

// changed records keys the server said changed; nil keys: every key.
func (t *tracker) changed(keys []string) {
	t.mu.Lock()
	if keys == nil {
		t.all = true
	}
	for _, k := range keys {
		t.dirty[k] = struct{}{}
	}
	t.mu.Unlock()
	t.fol.changed(keys)
	t.wake()
}

func (t *tracker) wake() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// run is the checker's goroutine: it waits for news, new holds or its tick,
// takes the holds due, sets its next tick, and looks at them.
func (t *tracker) run() {
	defer close(t.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-t.w.ctx.Done():
			return
		case <-t.poke:
		case <-timer.C:
		}
		holds, next := t.due(t.clock.now())
		if next > 0 {
			timer.Reset(next)
		}
		t.look(holds)
	}
}

// due takes the holds to look at now: those whose keys changed, but for the
// new ones (every hold after a flush or a broken connection), the new ones
// at least the delay old, and those to look at again whose pause is over.
// next, if positive, is when to tick again (nextTick).
func (t *tracker) due(now time.Time) (holds []*Hold, next time.Duration) {
	t.mu.Lock()
	var keys map[string]struct{} // the changed keys are the pass's now: pick reads them without t.mu
	if len(t.dirty) > 0 {
		keys, t.dirty = t.dirty, make(map[string]struct{})
	}
	all := t.all
	t.all = false
	fresh := t.fresh.take(now.Add(-t.delay), all)
	looked := len(fresh) > 0
	if len(t.retried) > 0 && (all || !now.Before(t.retryAt)) {
		fresh = append(fresh, t.retried...)
		t.retried = nil
	}
	next = t.nextTick(now, looked)
	t.mu.Unlock()
	return t.w.pick(keys, all, fresh, t.leaveNew), next
}

// nextTick returns when the checker ticks next (tickPolicy.next, after a tick
// that found new holds to look at or not): not before the oldest new hold is
// due, nor after the holds to look at again are; 0: no tick. t.mu is held.
func (t *tracker) nextTick(now time.Time, looked bool) time.Duration {
	next := t.tick.next(looked, t.fresh.len() > 0 || len(t.retried) > 0)
	if next == 0 {
		return 0
	}
	if at, ok := t.fresh.oldest(); ok {
		next = max(next, at.Add(t.delay).Sub(now))
	}
	if len(t.retried) > 0 {
		next = min(next, t.retryAt.Sub(now))
	}
	return max(next, time.Millisecond/10)
}

// look looks at holds, and reads the followed keys whose news came.
func (t *tracker) look(holds []*Hold) {
	if len(holds) > 0 {
		t.check(holds)
	}
	if keys := t.fol.take(); len(keys) > 0 {
		t.readFollowed(keys)
	}
}

// pick returns the watched holds of keys but for the new ones (leaveNew;
// every one with all), and of fresh those still watched, each once, but for
// those whose release is in flight.
func (w *Watchdog) pick(keys map[string]struct{}, all bool, fresh []*Hold, leaveNew func([]*Hold) []*Hold) []*Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	var every, keyed []*Hold
	if all {
		every = w.deadline
	}
	for k := range keys {
		keyed = append(keyed, w.byKey[k]...)
	}
	seen := make(map[*Hold]bool)
	var out []*Hold
	for _, h := range slices.Concat(every, leaveNew(keyed), fresh) {
		if h.index >= 0 && !h.releasing && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// check looks at holds, node by node in parallel, and applies the answers.
func (t *tracker) check(holds []*Hold) {
	ctx, cancel := context.WithTimeout(t.w.ctx, t.w.opts.Interval)
	defer cancel()
	byNode := make(map[server][]*Hold)
	for _, h := range holds {
		s, err := t.nodes.of(ctx, h.Key)
		if err != nil || !s.tracks() {
			continue // no node to ask, or no tracking on it: the renewals alone
		}
		byNode[s] = append(byNode[s], h)
	}
	if len(byNode) == 1 { // one server, or a cluster's news: no goroutine
		for s, hs := range byNode {
			t.checkNode(ctx, s, hs)
		}
		return
	}
	var wg sync.WaitGroup
	for s, hs := range byNode {
		wg.Go(func() { t.checkNode(ctx, s, hs) })
	}
	wg.Wait()
}

// checkNode looks at hs, all on node s, in one pipelined round trip of
// batches of one slot each, and applies the answers. A look that did not
// reach the server is tried again a little later (retryPause).
func (t *tracker) checkNode(ctx context.Context, s server, hs []*Hold) {
	batches := t.w.batches(hs)
	rs := make([][]lua.Renewal, len(batches))
	for i, b := range batches {
		rs[i] = renewals(b)
	}
	sent := t.clock.now()
	lefts, err := s.look(ctx, rs, sent)
	if err != nil && t.w.ctx.Err() == nil {
		t.retry(hs) // not reached, or refused (LOADING after a restart, say)
		return
	}
	for i, left := range lefts {
		if left != nil && len(left) == len(batches[i]) {
			t.w.apply(batches[i], left, sent)
		}
	}
}

// retryPause is how long a look that did not reach the server waits before
// it is tried again.
const retryPause = 100 * time.Millisecond

// retry looks at hs again after retryPause, with the new holds due then.
func (t *tracker) retry(hs []*Hold) {
	t.mu.Lock()
	if len(t.retried) == 0 {
		t.retryAt = t.clock.now().Add(retryPause)
	}
	t.retried = append(t.retried, hs...)
	t.tick.retrying()
	t.mu.Unlock()
	t.wake()
}

// route says where the batches of a renewal round go: those of a node that
// tracks to its reader, which reads their keys again after extending them,
// so that they stay tracked (NOLOOP: the renewal's own change is no news);
// the others (a node that refused tracking, one not found) to the client.
func (t *tracker) route(ctx context.Context, batches [][]*Hold) []route {
	byNode := make(map[server]*route)
	plain := &route{c: t.w.rdb}
	var out []route
	for i, b := range batches {
		s, err := t.nodes.of(ctx, b[0].Key) // one slot per batch: one node
		r := plain
		if err == nil && s.tracks() {
			if r = byNode[s]; r == nil {
				r = &route{c: s.conn(), reread: true}
				byNode[s] = r
			}
		}
		r.batches = append(r.batches, i)
	}
	for _, r := range byNode {
		out = append(out, *r)
	}
	if len(plain.batches) > 0 {
		out = append(out, *plain)
	}
	return out
}

// primaryIs hears from followPrimary that the Sentinels name addr as the
// primary. When the node's reader is connected elsewhere (a failover it did
// not follow), it replaces the node, which dials the new primary and looks at
// every hold, and reports true: the renewals went to a server that is no
// longer the primary, and extended the holds where nobody else looks.
func (t *tracker) primaryIs(addr string) bool {
	return t.nodes.primaryIs(addr)
}

// renewals returns what the holds of b are.
func renewals(b []*Hold) []lua.Renewal {
	out := make([]lua.Renewal, len(b))
	for i, h := range b {
		out[i] = h.Renewal
	}
	return out
}

// apply applies a look at hs sent at sent: a hold gone ends (ErrInvalidated);
// a hold with less lease left in Redis than its deadline says gets the earlier
// deadline, and if Redis cut it short (it has less than 90 % of what the
// deadline left, less 10 ms for the round trips' difference), it ends, when
// that deadline comes, with ErrShortened.
func (w *Watchdog) apply(hs []*Hold, left []int64, sent time.Time) {
	var lost []*Hold
	w.mu.Lock()
	for i, h := range hs {
		switch {
		case h.index < 0:
		case left[i] == lua.Gone:
			w.remove(h)
			lost = append(lost, h)
		case left[i] >= 0:
			d := sent.Add(time.Duration(left[i]) * time.Millisecond)
			if !d.Before(h.due) {
				continue
			}
			expected := h.due.Sub(sent)
			h.cut = h.cut || d.Sub(sent) < expected*9/10-10*time.Millisecond
			h.due = d
			heap.Fix(&w.deadline, h.index)
			w.wakeBy(d)
		}
	}
	w.mu.Unlock()
	for _, h := range lost {
		h.OnLost(ErrInvalidated)
	}
}

// close waits for the checker, closes every node's connections and waits for
// their listeners; the watchdog's ctx is cancelled already.
func (t *tracker) close() {
	<-t.done
	t.nodes.close()
}
