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
// spinning takes the core Redis needs), without looking at anything.
//
// The renewal rounds, the backstop, go through the same tracked connection
// (route): with NOLOOP their own change of a key is no news, and renew.lua
// reads each key again after extending it, so that it stays tracked. Nothing
// of this is on the caller's path: Watch appends the new hold to a list.
type tracker struct {
	w     *Watchdog
	rdb   redis.UniversalClient
	log   *slog.Logger
	obs   observe.TrackingObserver
	delay time.Duration

	mu      sync.Mutex
	nodes   map[string]*node     // by address
	dirty   map[string]struct{}  // keys the server said changed
	all     bool                 // look at every hold: a flush, a broken connection
	fresh   []*Hold              // new holds not yet looked at, oldest first (some ended: Hold.fresh unset)
	live    int                  // how many of fresh have not ended
	came    bool                 // a new hold came since the last tick
	ticking bool                 // the checker ticks: new holds need no poke
	gap     time.Duration        // the time between ticks, from delay to maxTickGaps delays
	idle    int                  // ticks in a row without new holds
	retried []*Hold              // holds whose look did not reach the server
	retryAt time.Time            // when to look at them again
	follows map[string][]*Follow // waiters' keys (follow.go)
	unread  map[string]time.Time // followed keys to read (new, or changed), by when the news came
	later   map[string]time.Time // followed keys whose read is put off (busy keys), likewise
	heard   map[string]time.Time // when each followed key last changed

	poke      chan struct{}
	done      chan struct{}  // closed when the checker returns
	listeners sync.WaitGroup // every node's listener
}

// newTracker returns the tracker of w's holds on rdb, or nil when rdb is not a
// client it can follow (a Ring, a custom UniversalClient).
func newTracker(w *Watchdog, rdb redis.UniversalClient) *tracker {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return nil
	}
	t := &tracker{w: w, rdb: rdb, log: w.opts.Logger, obs: w.opts.Tracking, delay: w.opts.TrackDelay,
		nodes: make(map[string]*node), dirty: make(map[string]struct{}), poke: make(chan struct{}, 1),
		done: make(chan struct{}), follows: make(map[string][]*Follow), unread: make(map[string]time.Time), later: make(map[string]time.Time), heard: make(map[string]time.Time)}
	t.gap = t.delay
	go t.run()
	return t
}

// added records a new hold (or one to look at again as new), unless it is
// one already; the checker is poked only when it is not ticking. w.mu is held.
func (t *tracker) added(h *Hold) {
	t.mu.Lock()
	if !h.fresh {
		h.fresh, h.freshAt = true, time.Now()
		t.fresh = append(t.fresh, h)
		t.live++
		t.came = true
		if !t.ticking {
			t.ticking = true
			t.wake()
		}
	}
	t.mu.Unlock()
}

// ended forgets h, which the watchdog no longer watches, if it is a new hold
// not yet looked at. w.mu is held.
func (t *tracker) ended(h *Hold) {
	t.mu.Lock()
	if h.fresh {
		h.fresh = false
		if t.live--; t.live == 0 {
			clear(t.fresh)
			t.fresh = t.fresh[:0]
		}
	}
	t.mu.Unlock()
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
	t.followed(keys)
	t.mu.Unlock()
	t.wake()
}

func (t *tracker) wake() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// run is the checker's goroutine: it waits for news, new holds or its tick,
// looks at the holds concerned, one look at a time, and applies what it read.
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
		holds, next := t.due(time.Now())
		if next > 0 {
			timer.Reset(next)
		}
		if len(holds) > 0 {
			t.check(holds)
		}
		if keys := t.takeUnread(); len(keys) > 0 {
			t.readFollowed(keys)
		}
	}
}

// due takes the holds to look at now: those whose keys changed, but for the
// new ones (every hold after a flush or a broken connection), the new ones
// at least the delay old, and those to look at again whose pause is over.
// next, if positive, is when to tick again (nextTick).
func (t *tracker) due(now time.Time) (holds []*Hold, next time.Duration) {
	t.mu.Lock()
	keys, all := t.dirty, t.all
	if len(keys) > 0 {
		t.dirty = make(map[string]struct{})
	}
	t.all = false
	fresh := t.takeFresh(now.Add(-t.delay), all)
	looked := len(fresh) > 0
	if len(t.retried) > 0 && (all || !now.Before(t.retryAt)) {
		fresh = append(fresh, t.retried...)
		t.retried = nil
	}
	next = t.nextTick(now, looked)
	t.came = false
	t.mu.Unlock()
	return t.w.pick(keys, all, fresh), next
}

// Tick pacing: at most maxTickGaps delays between ticks; the checker stops
// after idleTicks ticks in a row without new holds.
const (
	maxTickGaps = 16
	idleTicks   = 8
)

// nextTick returns when the checker ticks next, after a tick that found new
// holds to look at (looked) or not: after the gap, which is the delay after
// a tick that found some, and doubles after one that found none though new
// holds came; not before the oldest new hold is due, nor after the holds to
// look at again are. 0: it does not tick (news woke it), or stops, after
// idleTicks ticks without new holds. t.mu is held.
func (t *tracker) nextTick(now time.Time, looked bool) time.Duration {
	if !t.ticking {
		return 0
	}
	switch {
	case looked:
		t.gap, t.idle = t.delay, 0
	case t.came:
		t.gap, t.idle = min(2*t.gap, maxTickGaps*t.delay), 0
	case t.live == 0 && len(t.retried) == 0:
		if t.idle++; t.idle >= idleTicks {
			t.ticking, t.gap, t.idle = false, t.delay, 0
			return 0
		}
	}
	next := t.gap
	if t.live > 0 {
		i := slices.IndexFunc(t.fresh, func(h *Hold) bool { return h.fresh })
		next = max(next, t.fresh[i].freshAt.Add(t.delay).Sub(now))
	}
	if len(t.retried) > 0 {
		next = min(next, t.retryAt.Sub(now))
	}
	return max(next, time.Millisecond/10)
}

// takeFresh takes the new holds not yet ended that began by before (every
// one with all) out of fresh. t.mu is held.
func (t *tracker) takeFresh(before time.Time, all bool) []*Hold {
	var out []*Hold
	i := 0
	for ; i < len(t.fresh); i++ {
		h := t.fresh[i]
		if !all && h.fresh && h.freshAt.After(before) {
			break
		}
		if h.fresh {
			h.fresh = false
			t.live--
			out = append(out, h)
		}
	}
	n := copy(t.fresh, t.fresh[i:])
	clear(t.fresh[n:])
	t.fresh = t.fresh[:n]
	return out
}

// pick returns the watched holds of keys but for the new ones (every one
// with all), and of fresh those still watched, each once.
func (w *Watchdog) pick(keys map[string]struct{}, all bool, fresh []*Hold) []*Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trk.mu.Lock() // for Hold.fresh
	defer w.trk.mu.Unlock()
	seen := make(map[*Hold]bool)
	var out []*Hold
	add := func(h *Hold) {
		if h.index >= 0 && !h.releasing && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	if all {
		for _, h := range w.deadline {
			add(h)
		}
	}
	for k := range keys {
		for _, h := range w.byKey[k] {
			if !h.fresh {
				add(h)
			}
		}
	}
	for _, h := range fresh {
		add(h)
	}
	return out
}

// check looks at holds, node by node in parallel, and applies the answers.
func (t *tracker) check(holds []*Hold) {
	ctx, cancel := context.WithTimeout(t.w.ctx, t.w.opts.Interval)
	defer cancel()
	byNode := make(map[*node][]*Hold)
	for _, h := range holds {
		n, err := t.nodeOf(ctx, h.Key)
		if err != nil || n.mode.Load() == modeRefused {
			continue // no node to ask, or no tracking on it: the renewals alone
		}
		byNode[n] = append(byNode[n], h)
	}
	if len(byNode) == 1 { // one server, or a cluster's news: no goroutine
		for n, hs := range byNode {
			t.checkNode(ctx, n, hs)
		}
		return
	}
	var wg sync.WaitGroup
	for n, hs := range byNode {
		wg.Go(func() { t.checkNode(ctx, n, hs) })
	}
	wg.Wait()
}

// checkNode looks at hs, all on node n, in one pipelined round trip of
// batches of one slot each, and applies the answers. A look that did not
// reach the server is tried again a little later (retryPause).
func (t *tracker) checkNode(ctx context.Context, n *node, hs []*Hold) {
	batches := t.w.batches(hs)
	sent := time.Now()
	for try := 0; try < 2; try++ {
		pipe := n.reader.Pipeline()
		cmds := make([]*redis.Cmd, len(batches))
		for i, b := range batches {
			cmds[i] = lua.CheckCmd(ctx, pipe, renewals(b), sent)
		}
		_, err := pipe.Exec(ctx)
		if try == 0 && lua.IsNoScript(cmds[0].Err()) && lua.LoadCheck(ctx, n.reader) == nil {
			continue
		}
		if err != nil && t.w.ctx.Err() == nil {
			t.retry(hs) // not reached, or refused (LOADING after a restart, say)
			return
		}
		for i, cmd := range cmds {
			if left, err := lua.CheckResult(cmd); err == nil && len(left) == len(batches[i]) {
				t.w.apply(batches[i], left, sent)
			}
		}
		return
	}
}

// retryPause is how long a look that did not reach the server waits before
// it is tried again.
const retryPause = 100 * time.Millisecond

// retry looks at hs again after retryPause, with the new holds due then.
func (t *tracker) retry(hs []*Hold) {
	t.mu.Lock()
	if len(t.retried) == 0 {
		t.retryAt = time.Now().Add(retryPause)
	}
	t.retried = append(t.retried, hs...)
	t.ticking = true
	t.mu.Unlock()
	t.wake()
}

// route says where the batches of a renewal round go: those of a node that
// tracks to its reader, which reads their keys again after extending them,
// so that they stay tracked (NOLOOP: the renewal's own change is no news);
// the others (a node that refused tracking, one not found) to the client.
func (t *tracker) route(ctx context.Context, batches [][]*Hold) []route {
	byNode := make(map[*node]*route)
	plain := &route{c: t.rdb}
	var out []route
	for i, b := range batches {
		n, err := t.nodeOf(ctx, b[0].Key) // one slot per batch: one node
		r := plain
		if err == nil && n.mode.Load() != modeRefused {
			if r = byNode[n]; r == nil {
				r = &route{c: n.reader, reread: true}
				byNode[n] = r
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
	t.mu.Lock()
	n := t.nodes[sentinelAddr]
	if n == nil || n.remote() == "" || n.remote() == addr {
		t.mu.Unlock()
		return false
	}
	delete(t.nodes, sentinelAddr)
	t.mu.Unlock()
	if t.log != nil {
		t.log.Warn(observe.EventTracking, observe.AttrNode, sentinelAddr,
			"error", "the Sentinels name another primary than the server the tracker reads (a failover): dialling again")
	}
	n.close()
	t.changed(nil) // the holds are looked at on the new node
	return true
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

// nodeOf returns the node that holds key, making it on first use.
func (t *tracker) nodeOf(ctx context.Context, key string) (*node, error) {
	c, ok := t.rdb.(*redis.Client)
	if !ok {
		var err error
		if c, err = t.rdb.(*redis.ClusterClient).MasterForKey(ctx, key); err != nil {
			return nil, err
		}
	}
	addr := c.Options().Addr
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.nodes[addr]; n != nil {
		return n, nil
	}
	n := newNode(t, addr, c.Options())
	t.nodes[addr] = n
	return n, nil
}

// close waits for the checker, closes every node's connections and waits for
// their listeners; the watchdog's ctx is cancelled already.
func (t *tracker) close() {
	<-t.done
	t.mu.Lock()
	nodes := make([]*node, 0, len(t.nodes))
	for _, n := range t.nodes {
		nodes = append(nodes, n)
	}
	t.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
	t.listeners.Wait()
}
