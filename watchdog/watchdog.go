package watchdog

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
)

// Reasons passed to a hold's OnLost callback. Their texts say what happened to
// the hold, not which part noticed: they end up inside the errors users read
// ("rlock: lock lost: \"jobs\": its fixed lease ran out"), and a fixed lease
// is one the watchdog never renews.
var (
	// ErrGone: a renewal found the hold gone: the lock without the owner's
	// field, or the semaphore without the permit (released, reclaimed once
	// expired, or deleted).
	ErrGone = errors.New("the hold is no longer in Redis")
	// ErrNotRenewed: no renewal was confirmed before the hold's deadline.
	ErrNotRenewed = errors.New("no renewal confirmed before the lease ran out")
	// ErrLeaseEnded: a hold with a fixed lease reached its deadline.
	ErrLeaseEnded = errors.New("its fixed lease ran out")
	// ErrShortened: Redis said the hold's lease was cut short (a PEXPIRE from
	// outside, say), and it ran out.
	ErrShortened = errors.New("its lease was cut short in Redis and ran out")
	// ErrUnreplicated: Redis renewed the hold, but too few replicas
	// acknowledged the renewals (Hold.Acks) before its deadline, which
	// therefore did not move: a replica promoted then lets it expire.
	ErrUnreplicated = errors.New("its renewals were not acknowledged by enough replicas before the lease ran out")
)

// Cause returns how the client learnt of a loss whose reason (what OnLost
// got) is err, or wraps it.
func Cause(err error) observe.LossCause {
	switch {
	case errors.Is(err, ErrInvalidated), errors.Is(err, ErrShortened):
		return observe.LossInvalidated
	case errors.Is(err, ErrGone):
		return observe.LossRenewal
	case errors.Is(err, ErrNotRenewed), errors.Is(err, ErrLeaseEnded):
		return observe.LossDeadline
	case errors.Is(err, ErrUnreplicated):
		return observe.LossUnreplicated
	}
	return observe.LossOther
}

// Defaults of Options.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultBatchSize = 100
)

// Options configure a Watchdog. The zero value gives Redisson's defaults.
type Options struct {
	// Timeout is the lease a renewal gives a hold. Default: DefaultTimeout.
	Timeout time.Duration
	// Interval is the time between renewal rounds. Default: Timeout/3.
	Interval time.Duration
	// BatchSize is the largest number of holds renewed by one script call.
	// Default: DefaultBatchSize.
	BatchSize int
	// Logger receives the failed renewal rounds (a warning per round, at
	// most one per half Interval, naming the hold whose lease runs out first
	// and the lease it has left), the first round that renews after failed
	// ones (info), and unacknowledged renewals. It hears nothing while the
	// renewals succeed, nor at Close. Default: none.
	Logger *slog.Logger
	// Cluster makes batches group keys by hash slot. Set it for Redis Cluster.
	Cluster bool
	// Observer, if set, sees every round's renewals by outcome.
	Observer observe.RenewObserver
	// Track watches the holds' keys with client tracking (CLIENT TRACKING,
	// Redis 6.0 and later, every Valkey), through connections of the
	// watchdog's own to each node, which the renewals use too: a hold whose
	// key is deleted, replaced, cut short or flushed is told at once instead
	// of at its next renewal (see tracker). It needs rdb to be a
	// *redis.Client (standalone or Sentinel) or a *redis.ClusterClient; with
	// another client, or a server that refuses tracking, the renewals alone
	// find lost holds, through rdb.
	Track bool
	// TrackDelay is how long a new hold waits, at most, before the tracker's
	// first look at it. Default: DefaultTrackDelay.
	TrackDelay time.Duration
	// Tracking, if set, hears which mode each node is in (tracked, or refused
	// and left to the renewals).
	Tracking observe.TrackingObserver
	// QuietRefused keeps from Logger the nodes that refuse tracking (a
	// proxy, a managed service, miniredis: the client works on, with the
	// renewals alone); Tracking still hears of them.
	QuietRefused bool
	// Name begins the client names of the tracker's connections (a colon and
	// ReaderRole or NewsRole end them), so that CLIENT LIST says whose they
	// are. Default: "holdfast".
	Name string
}

// Watchdog renews and watches the holds of one client. It is safe for concurrent
// use; Close stops its goroutine.
type Watchdog struct {
	rdb  redis.UniversalClient
	opts Options

	mu       sync.Mutex
	deadline deadlines          // every hold, earliest deadline first
	renewed  map[*Hold]struct{} // the holds to renew
	byKey    map[string][]*Hold // every hold of deadline, by its key
	closed   bool

	health    health   // runs of failed rounds; the loop's goroutine only
	trk       *tracker // nil unless Options.Track
	poke      chan struct{}
	renewNow  chan struct{}   // run a renewal round at once (followPrimary)
	followers sync.WaitGroup  // followPrimary
	wakeAt    time.Time       // when the loop wakes next; guarded by mu
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	done      chan struct{}
}

// Hold is one watched hold: of a lock, a read lock, or a permit. Its fields
// are read-only after Watch.
type Hold struct {
	lua.Renewal             // what is renewed: the kind, the key, the member in it
	OnLost      func(error) // called once, on the watchdog's goroutine, if the hold is lost
	Acks        lua.Acks    // the replicas that must acknowledge its renewals (see Watch)
	Label       Label       // what logs and the observer call it (WatchAs)
	w           *Watchdog
	renew       bool      // renewed by the watchdog; else a fixed lease
	due         time.Time // the deadline, monotonic
	index       int       // position in the deadline heap; -1 once stopped or past due
	stopped     bool      // Stop was called
	cut         bool      // due was brought forward by what Redis said (see apply)
	unacked     bool      // its last renewal was confirmed but not acknowledged by enough replicas
	failErr     error     // its last renewal's error, if it failed: said in its loss
	releasing   bool      // a release is in flight: the tracker does not look at it
}

// New starts a watchdog that renews through rdb.
func New(rdb redis.UniversalClient, opts Options) *Watchdog {
	w := newWatchdog(rdb, opts)
	if w.opts.Track {
		w.trk = newTracker(w, rdb)
	}
	w.start()
	return w
}

// newWatchdog returns the watchdog of New, with opts' defaults, without its
// tracker and not started.
func newWatchdog(rdb redis.UniversalClient, opts Options) *Watchdog {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Interval <= 0 {
		opts.Interval = opts.Timeout / 3
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.TrackDelay <= 0 {
		opts.TrackDelay = DefaultTrackDelay
	}
	if opts.Name == "" {
		opts.Name = "holdfast"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Watchdog{
		rdb:      rdb,
		opts:     opts,
		renewed:  make(map[*Hold]struct{}),
		byKey:    make(map[string][]*Hold),
		poke:     make(chan struct{}, 1),
		renewNow: make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
}

// start starts the watchdog's goroutines: its loop, and followPrimary for a
// client through Sentinel.
func (w *Watchdog) start() {
	go w.run()
	if dial := sentinelDialer(w.rdb); dial != nil {
		w.followers.Add(1)
		go w.followPrimary(dial)
	}
}

// Watch registers the hold r (a field on a lock key, a read hold of a
// read/write lock with its timeout keys, or a permit in a semaphore's sorted
// set: see lua.RenewalKind) that expires at deadline (the send time of the
// acquire plus its lease). With renew set, the watchdog renews it every
// Interval; otherwise it only watches the deadline. onLost is called at most once,
// without any watchdog lock held. After Close, Watch returns a hold that is never
// renewed nor reported.
//
// With acks.Replicas > 0, the rounds that renew the hold wait for that many
// replicas of its node (WAIT, behind the node's renewals in the same round
// trip, for at most acks.Timeout), and a renewal moves the hold's deadline
// only when they acknowledged it. A hold whose renewals Redis confirmed but
// too few replicas acknowledged keeps its deadline, and is lost at it with
// ErrUnreplicated: by then a replica promoted in a failover lets it expire
// too.
func (w *Watchdog) Watch(r lua.Renewal, deadline time.Time, renew bool, acks lua.Acks, onLost func(error)) *Hold {
	return w.WatchAs(Label{}, r, deadline, renew, acks, onLost)
}

// WatchAs is Watch for a hold that logs and the observer call l.
func (w *Watchdog) WatchAs(l Label, r lua.Renewal, deadline time.Time, renew bool, acks lua.Acks, onLost func(error)) *Hold {
	h := &Hold{Renewal: r, OnLost: onLost, Acks: acks, Label: l, w: w, renew: renew, due: deadline, index: -1}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return h
	}
	heap.Push(&w.deadline, h)
	w.byKey[r.Key] = append(w.byKey[r.Key], h)
	if renew {
		w.renewed[h] = struct{}{}
	}
	w.wakeBy(deadline)
	if w.trk != nil {
		w.trk.added(h)
	}
	return h
}

// Holds returns the holds watched for r: registered, and neither stopped nor
// lost yet.
func (w *Watchdog) Holds(r lua.Renewal) []*Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*Hold
	for _, h := range w.byKey[r.Key] {
		if h.Renewal == r {
			out = append(out, h)
		}
	}
	return out
}

// Update changes a hold after its lease was set again (a reentrant acquire or a
// partial release of a lock): its new deadline and whether it is renewed. With
// tracking, the hold is looked at again as a new one: its owner's change of the
// key ended the key's tracking.
func (h *Hold) Update(deadline time.Time, renew bool) {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.index < 0 {
		return
	}
	h.due, h.cut, h.unacked, h.failErr = deadline, false, false, nil
	heap.Fix(&w.deadline, h.index)
	h.renew = renew
	if renew {
		w.renewed[h] = struct{}{}
	} else {
		delete(w.renewed, h)
	}
	w.wakeBy(deadline)
	if w.trk != nil {
		w.trk.added(h)
	}
}

// SetDeadline records that the hold's lease was set from outside the watchdog
// to end at d (a permit's UpdateLease): a fixed lease's deadline becomes d; a
// renewed hold's only comes forward to d, as its next renewal gives it the
// watchdog's lease again (and a renewal never moves a deadline back).
func (h *Hold) SetDeadline(d time.Time) {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.index < 0 || (h.renew && !d.Before(h.due)) {
		return
	}
	h.due, h.cut = d, false
	heap.Fix(&w.deadline, h.index)
	w.wakeBy(d)
}

// SetReleasing records that the holder's release of the hold is in flight
// (on) or answered (off). Meanwhile the tracker does not look at the hold:
// the release's own change of the key is no news, and a look would find the
// hold gone. The renewals go on; Stop ends the hold as usual.
func (h *Hold) SetReleasing(on bool) {
	h.w.mu.Lock()
	h.releasing = on
	h.w.mu.Unlock()
}

// Lose ends the hold for reason as a round that found it gone would: it takes
// it out of the rounds and calls its OnLost, unless it was stopped or already
// lost. It is for news of a hold's end that reaches the client some other way
// than a renewal (a permit released by id in the same client).
func (h *Hold) Lose(reason error) {
	w := h.w
	w.mu.Lock()
	if h.stopped || h.index < 0 {
		w.mu.Unlock()
		return
	}
	w.remove(h)
	w.mu.Unlock()
	h.OnLost(reason)
}

// Deadline returns when the hold's lease runs out as last confirmed: the send
// time of the acquire or of the last renewal Redis answered, plus the lease.
func (h *Hold) Deadline() time.Time {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.due
}

// Overdue returns, when the hold's deadline is not after now, why it is lost
// (ErrNotRenewed or ErrLeaseEnded), and takes it out of the watchdog's rounds.
// It returns nil for a hold within its deadline and for a stopped one. Callers
// that must not trust a lease past its deadline, even for the instant before the
// watchdog's timer fires (a process resumed after a pause, say), ask it first;
// the watchdog may still call OnLost for the same deadline, so OnLost and the
// caller's own handling must tolerate each other.
func (h *Hold) Overdue(now time.Time) error {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.stopped || h.due.After(now) {
		return nil
	}
	w.remove(h)
	return h.lostReason()
}

// lostReason is why a hold past its deadline is lost.
func (h *Hold) lostReason() error {
	switch {
	case h.cut:
		return ErrShortened
	case h.unacked:
		return ErrUnreplicated
	}
	if h.renew && h.failErr != nil {
		return notRenewed{h.failErr}
	}
	if h.renew {
		return ErrNotRenewed
	}
	return ErrLeaseEnded
}

// Stop ends the hold's registration. After Stop returns, no later round renews the
// hold and OnLost is not called. Stop is idempotent.
func (h *Hold) Stop() {
	w := h.w
	w.mu.Lock()
	h.stopped = true
	w.remove(h)
	w.mu.Unlock()
}

// Close stops the watchdog and waits for its goroutine. Holds still registered are
// neither renewed nor reported any more.
func (w *Watchdog) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	<-w.done
	w.followers.Wait()
	if w.trk != nil {
		w.trk.close()
	}
}

func (w *Watchdog) remove(h *Hold) {
	if h.index < 0 {
		return
	}
	heap.Remove(&w.deadline, h.index)
	h.index = -1
	if w.trk != nil {
		w.trk.ended(h)
	}
	delete(w.renewed, h)
	hs := w.byKey[h.Key]
	if i := slices.Index(hs, h); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
	}
	if len(hs) == 0 {
		delete(w.byKey, h.Key)
	} else {
		w.byKey[h.Key] = hs
	}
}

// wakeBy makes sure the loop wakes by t, poking it only when it would sleep
// longer: registrations on the hot path usually cost no wake-up. w.mu must be held.
func (w *Watchdog) wakeBy(t time.Time) {
	if !t.Before(w.wakeAt) {
		return
	}
	w.wakeAt = t
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// run is the watchdog's goroutine: it declares lost the holds past their deadline,
// then renews when a round is due, and sleeps until the next of both.
func (w *Watchdog) run() {
	defer close(w.done)
	// The first pass only sets the wake-up time: holds watched before this
	// goroutine started found no wake-up time to bring forward, and are in the
	// deadline heap that the pass reads.
	timer := time.NewTimer(0)
	defer timer.Stop()
	nextRound := time.Now().Add(w.opts.Interval)
	for {
		now := false
		select {
		case <-w.ctx.Done():
			return
		case <-w.poke:
		case <-timer.C:
		case <-w.renewNow:
			now = true
		}
		w.expire(time.Now())
		if t := time.Now(); now || !t.Before(nextRound) {
			nextRound = t.Add(w.opts.Interval)
			if w.round() {
				nextRound = t.Add(min(w.opts.Interval, movedRetry))
			}
		}
		w.mu.Lock()
		w.wakeAt = nextRound
		if len(w.deadline) > 0 && w.deadline[0].due.Before(w.wakeAt) {
			w.wakeAt = w.deadline[0].due
		}
		timer.Reset(max(time.Until(w.wakeAt), 0))
		w.mu.Unlock()
	}
}

// expire reports every hold whose deadline is not after now.
func (w *Watchdog) expire(now time.Time) {
	var lost []*Hold
	w.mu.Lock()
	for len(w.deadline) > 0 && !w.deadline[0].due.After(now) {
		h := w.deadline[0]
		w.remove(h)
		lost = append(lost, h)
	}
	w.mu.Unlock()
	for _, h := range lost {
		h.OnLost(h.lostReason())
	}
}

// movedRetry is how soon a round runs again after a Cluster node answered
// that a hold's slot has moved (a resharding, a failover): once the client's
// view of the cluster is reloaded, the renewals reach the slot's new owner.
const movedRetry = 250 * time.Millisecond

// round renews every renewed hold: batches of at most BatchSize keys of one
// slot, all sent in one pipeline. It reports whether a node answered that a
// slot moved: the client's view of the cluster is then reloaded, and the
// caller runs the next round soon (movedRetry).
func (w *Watchdog) round() bool {
	w.mu.Lock()
	if len(w.renewed) == 0 {
		w.mu.Unlock()
		w.calm()
		return false
	}
	renewed := make([]*Hold, 0, len(w.renewed))
	for h := range w.renewed {
		renewed = append(renewed, h)
	}
	w.mu.Unlock()
	batches := w.batches(renewed)
	sent := time.Now()
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.Interval+waitOf(renewed).Timeout)
	defer cancel()
	results := w.send(ctx, batches, sent)
	lost, count, failed, moved := w.settle(batches, results, sent)
	count.lost = len(lost)
	count.report(w.opts.Observer)
	w.report(failed, count.ok+count.unacked, sent)
	for _, h := range lost {
		h.OnLost(ErrGone)
	}
	if cc, ok := w.rdb.(*redis.ClusterClient); ok && moved {
		cc.ReloadState(w.ctx)
	}
	return moved
}

// settle applies what Redis answered to a round's batches, sent at sent: it
// returns the holds found gone (taken out of the rounds), the renewals'
// counts, what failed, and whether a node answered that a slot moved.
func (w *Watchdog) settle(batches [][]*Hold, results []batchResult, sent time.Time) (lost []*Hold, count tally, failed failure, moved bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, b := range batches {
		if err := results[i].err; err != nil {
			count.failed += len(b)
			for _, h := range b {
				failed.noted(h, err)
			}
			moved = moved || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
			continue
		}
		for j, h := range b {
			if h.index < 0 || !h.renew {
				continue // stopped or changed while the round was in flight
			}
			if j >= len(results[i].ok) || !results[i].ok[j] {
				w.remove(h)
				lost = append(lost, h)
				continue
			}
			w.renewed1(h, sent, results[i].acked >= h.Acks.Replicas, &count)
		}
	}
	return lost, count, failed, moved
}

// renewed1 applies one hold's renewal, sent at sent, that Redis confirmed:
// its deadline moves to sent plus the lease when the replicas acknowledged
// the round (acked), and stays where it is otherwise. w.mu is held.
func (w *Watchdog) renewed1(h *Hold, sent time.Time, acked bool, count *tally) {
	h.failErr = nil
	if !acked {
		count.unacked++
		h.unacked = true
		return
	}
	count.ok++
	h.unacked = false
	if d := sent.Add(w.opts.Timeout); d.After(h.due) {
		h.due, h.cut = d, false
		heap.Fix(&w.deadline, h.index)
	}
}

// batches cuts hs into batches of at most BatchSize holds of one hash slot
// each (every hold one batch without Cluster): one script call each.
func (w *Watchdog) batches(hs []*Hold) [][]*Hold {
	bySlot := make(map[int][]*Hold)
	for _, h := range hs {
		s := 0
		if w.opts.Cluster {
			s = lua.Slot(h.Key)
		}
		bySlot[s] = append(bySlot[s], h)
	}
	var out [][]*Hold
	for _, b := range bySlot {
		for len(b) > 0 {
			n := min(len(b), w.opts.BatchSize)
			out = append(out, b[:n])
			b = b[n:]
		}
	}
	return out
}

// tally counts a round's renewals by outcome.
type tally struct{ ok, failed, lost, unacked int }

// report gives the counts that are not zero to o, if set.
func (t tally) report(o observe.RenewObserver) {
	if o == nil {
		return
	}
	for _, r := range [...]struct {
		outcome observe.RenewOutcome
		n       int
	}{{observe.RenewOK, t.ok}, {observe.RenewFailed, t.failed}, {observe.RenewLost, t.lost},
		{observe.RenewUnreplicated, t.unacked}} {
		if r.n > 0 {
			o.Renewed(r.outcome, r.n)
		}
	}
}

// batchResult is what Redis answered to one batch of a round: which holds
// it renewed, and how many replicas of its node acknowledged the round's
// renewals there (math.MaxInt when none of its holds asked).
type batchResult struct {
	ok    []bool
	err   error
	acked int
}

// send runs the batches, with sent as the clock of the renewals (a permit's
// new expiry is sent plus Timeout): in one pipelined round trip per
// connection they go on (route: the client's, or with tracking the tracker's
// reader of each node), in parallel.
func (w *Watchdog) send(ctx context.Context, batches [][]*Hold, sent time.Time) []batchResult {
	out := make([]batchResult, len(batches))
	var routes []route
	if w.trk != nil {
		routes = w.trk.route(ctx, batches)
	} else {
		routes = w.plainRoutes(ctx, batches)
	}
	if len(routes) == 1 {
		w.sendOn(ctx, routes[0], batches, sent, out)
	} else {
		var wg sync.WaitGroup
		for _, r := range routes {
			wg.Go(func() { w.sendOn(ctx, r, batches, sent, out) })
		}
		wg.Wait()
	}
	for i, r := range out { // failed batches: report, once per round
		if a := waitOf(batches[i]); r.err == nil && r.acked < a.Replicas && w.opts.Logger != nil {
			w.opts.Logger.Warn(observe.EventRenewal, observe.AttrOutcome, observe.RenewUnreplicated.String(),
				observe.AttrHolds, len(batches[i]), "error", errTooFewAcks(r.acked, a))
		}
	}
	return out
}

// route is where some batches of a round go: a connection, and whether the
// renewals read their keys again (the tracker's reader: they stay tracked).
type route struct {
	c       pipeliner
	reread  bool
	batches []int // indexes in the round's batches
}

// pipeliner is what a route sends through: a client, or a tracker's reader.
type pipeliner interface {
	Pipeline() redis.Pipeliner
	redis.Scripter
}

// plainRoutes says where the batches of a round go without the tracker: the
// client, in one pipeline; on a Cluster whose holds ask for replica
// acknowledgements, the primary of each batch's slot, in one pipeline each,
// since WAIT counts the replicas of the node whose connection sends it.
func (w *Watchdog) plainRoutes(ctx context.Context, batches [][]*Hold) []route {
	cc, ok := w.rdb.(*redis.ClusterClient)
	if !ok || waitOf(slices.Concat(batches...)).Replicas == 0 {
		return []route{{c: w.rdb, batches: allOf(batches)}}
	}
	byNode := make(map[*redis.Client]*route)
	var out []route
	for i, b := range batches {
		n, err := cc.MasterForKey(ctx, b[0].Key)
		if err != nil {
			out = append(out, route{c: w.rdb, batches: []int{i}}) // fails again, and says why
			continue
		}
		if byNode[n] == nil {
			byNode[n] = &route{c: n}
		}
		byNode[n].batches = append(byNode[n].batches, i)
	}
	for _, r := range byNode {
		out = append(out, *r)
	}
	return out
}

// allOf returns the indexes of batches.
func allOf(batches [][]*Hold) []int {
	idx := make([]int, len(batches))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// waitOf returns the acknowledgements a round must wait for to satisfy
// every hold of hs: the most replicas any asks for, the longest timeout.
func waitOf(hs []*Hold) lua.Acks {
	var a lua.Acks
	for _, h := range hs {
		a.Replicas = max(a.Replicas, h.Acks.Replicas)
		a.Timeout = max(a.Timeout, h.Acks.Timeout)
	}
	return a
}

// errTooFewAcks says a round's renewals were acknowledged by acked replicas
// only, fewer than a asked for.
func errTooFewAcks(acked int, a lua.Acks) error {
	return fmt.Errorf("%d of %d replicas acknowledged the renewals within %v: the holds' deadlines stay", acked, a.Replicas, a.Timeout)
}

// sendOn runs the batches of r in one pipelined round trip, with the holds' Acks
// a WAIT behind them, and puts their results in out. When the server lost its
// script cache (NOSCRIPT), it loads the script and sends the pipeline once
// more.
func (w *Watchdog) sendOn(ctx context.Context, r route, batches [][]*Hold, sent time.Time, out []batchResult) {
	var hs []*Hold
	for _, i := range r.batches {
		hs = append(hs, batches[i]...)
	}
	acks := waitOf(hs)
	for try := 0; try < 2; try++ {
		pipe := r.c.Pipeline()
		cmds := make([]*redis.Cmd, len(r.batches))
		for j, i := range r.batches {
			cmds[j] = lua.RenewCmd(ctx, pipe, renewals(batches[i]), sent, w.opts.Timeout, r.reread)
		}
		var wait *redis.IntCmd
		if acks.Replicas > 0 {
			wait = redis.NewIntCmd(ctx, "wait", acks.Replicas, max(acks.Timeout.Milliseconds(), 1))
			_ = pipe.Process(ctx, wait)
		}
		_, _ = pipe.Exec(ctx)
		acked := math.MaxInt
		if wait != nil {
			acked = int(wait.Val()) // 0 when WAIT failed
		}
		noScript := false
		for j, cmd := range cmds {
			ok, err := lua.RenewResult(cmd)
			out[r.batches[j]] = batchResult{ok: ok, err: err, acked: acked}
			noScript = noScript || lua.IsNoScript(err)
		}
		if !noScript || try > 0 || lua.LoadRenew(ctx, r.c) != nil {
			return
		}
	}
}

// deadlines is a min-heap of holds by deadline.
type deadlines []*Hold

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].due.Before(d[j].due) }
func (d deadlines) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].index = i
	d[j].index = j
}
func (d *deadlines) Push(x any) {
	h := x.(*Hold)
	h.index = len(*d)
	*d = append(*d, h)
}
func (d *deadlines) Pop() any {
	old := *d
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	return h
}
