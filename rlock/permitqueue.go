package rlock

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// The semaphores' waits (Semaphore and ExpirableSemaphore alike) run on one
// queue per client and semaphore, as the Mutex's do:
//
//   - Waiters queue in arrival order. Only the front one, the head, attempts:
//     woken by a message on the semaphore's channel (one token for the whole
//     queue), it makes one attempt for as many waiters from the front as the
//     message announced permits (at most maxServed), and hands the others
//     what it got. A waiter that wants more permits than there are holds back
//     those behind it in the same round trip, as in golang.org/x/sync/semaphore.
//   - A release of this client while waiters queue hands its permits to them
//     in the release's own round trip and publishes only what is left; after
//     maxHandOffs such releases in a row, only when no other client listens
//     (pacing), so that other processes' waiters get their turn.
//   - Each round trip serves waiters no other round trip in flight serves
//     (flight); a release serves the first such waiters while the head's
//     attempt is in flight for others. A waiter that gives up while one
//     serves it is marked left: what it gets goes back. A round trip whose
//     outcome is unknown (it failed) is settled by the head from the call's
//     request record before anything else (unsure).
//
// This file holds the queue's state and its transitions, under
// permitTable.mu; semwait.go does the round trips around them.

// maxServed bounds the waiters one attempt or hand-off serves.
const maxServed = 32

// maxPermitHandOffs is how many releases in a row a client may hand to its own
// waiters while other clients listen, before it publishes one for them (the
// Mutex's maxHandOffs). A semaphore's permits are many and each release hands
// over one of them: a longer streak keeps the other clients' share of the
// permits while sparing the round trips of a race for each one.
const maxPermitHandOffs = 8

// permitTable is the client's permit queues, by semaphore name: the
// semaphores' engine. Its state is here; the round trips around it are in
// semwait.go.
type permitTable struct {
	*core
	mu sync.Mutex
	m  map[string]*permitQueue
}

// permitQueue is this client's waiters for one semaphore.
type permitQueue struct {
	name    string
	waiters line[*permitWaiter] // arrival order; waiters[0] is the head
	sub     subscription        // the queue's share of the channel, once the head listens
	pace    pacing
	// attemptAt: the head attempts no sooner (pacing after a message).
	attemptAt time.Time
	// quiet: the last look found too few permits for a waiter it served (or
	// the queue's first waiter has just looked): the head waits for news (a
	// message, its recheck) before it attempts.
	quiet bool
	// announced: the permits the last message said were free (0: unknown),
	// the budget of the head's next attempt (choose).
	announced int64
	// unsure: round trips that failed, whose outcome the head reads from
	// their request's record before anything else.
	unsure []*unsureServe
	// looked: an attempt sent after sub was confirmed has answered, so a
	// head that takes sub over has missed no message: it waits for the next
	// one (or its recheck) instead of attempting at the confirmation
	// (listenPermits).
	looked bool
}

// unsureServe is a round trip that may have served waiters: its request,
// the offset of the number served in what it records, when it was sent, and
// the waiters.
type unsureServe struct {
	req    lua.Request
	offset int64
	sent   time.Time
	ws     []*permitWaiter
}

// permitWaiter is one call of a semaphore's Acquire or TryAcquire in a queue.
type permitWaiter struct {
	place[permitGrant] // wake: what was in flight ended
	n                  int64
	ids                []string      // an ExpirableSemaphore's: the permits' ids, raw
	lease              time.Duration // an ExpirableSemaphore's: the permits' lease, 0: the watchdog's
	fly                bool          // a round trip in flight, or an unsure one, serves it
	left               bool          // gave up while fly: what it gets goes back
}

// permitGrant is what a served waiter gets: when the round trip that served it
// was sent, and for an ExpirableSemaphore's replayed head the expiry Redis
// holds (0: the one sent); or err, the refusal of an attempt that served it
// but was not acknowledged by enough replicas (its permits went back).
type permitGrant struct {
	sent   time.Time
	expiry int64
	err    error
}

func newPermitWaiter(n int64) *permitWaiter {
	return &permitWaiter{place: newPlace[permitGrant](), n: n}
}

// join queues w on the semaphore name and returns its queue.
func (t *permitTable) join(name string, w *permitWaiter) *permitQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.m[name]
	if q == nil {
		if t.m == nil {
			t.m = make(map[string]*permitQueue)
		}
		q = &permitQueue{name: name, quiet: true} // w has just looked
		t.m[name] = q
	}
	q.waiters.push(w)
	q.promote(false)
	return q
}

// queued reports whether waiters of this client queue on the semaphore name:
// a new call queues behind them instead of attempting first.
func (t *permitTable) queued(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[name] != nil
}

// promote makes the front waiter the head; with poke, a head that was one
// already is told to look again (a round trip not its own ended).
func (q *permitQueue) promote(poke bool) {
	if len(q.waiters) == 0 {
		return
	}
	if h := q.waiters[0]; !h.promote() && poke {
		h.poke()
	}
}

// headStep is what the head w does next: settle an unsure round trip first
// (settle), or sleep for sleep (< 0: until news: a message, its recheck, a
// round trip of another goroutine that ends), or attempt for ws, the front
// waiters it serves, now marked in flight (confirmed: the queue's
// subscription was confirmed before the attempt). t.mu must be held.
func (q *permitQueue) headStep(w *permitWaiter) (settle bool, sleep time.Duration, ws []*permitWaiter, confirmed bool) {
	if len(q.unsure) > 0 {
		return true, 0, nil, false
	}
	if d := time.Until(q.attemptAt); d > 0 {
		return false, d, nil, false
	}
	if q.quiet {
		q.quiet = false // whatever wakes the head next, it attempts
		return false, -1, nil, false
	}
	budget := int64(math.MaxInt64)
	if q.announced > 0 {
		budget, q.announced = q.announced, 0
	}
	if ws = q.choose(budget, w); ws == nil {
		return false, -1, nil, false // a release serves w: its grant comes
	}
	return false, 0, ws, q.sub != nil && isClosed(q.sub.Confirmed())
}

// choose starts serving front waiters that no round trip serves yet, from
// the head on (from, when set: the head attempts for itself first), as many
// as budget permits cover (the first one whatever its count: the script sees
// whether it fits) and at most maxServed, and returns them; nil when none
// waits, the head is served already, or an unsure round trip is still to be
// settled. t.mu must be held.
func (q *permitQueue) choose(budget int64, from *permitWaiter) []*permitWaiter {
	if len(q.unsure) > 0 || len(q.waiters) == 0 || from != nil && (q.waiters[0] != from || from.fly) {
		return nil
	}
	var ws []*permitWaiter
	for _, w := range q.waiters {
		if len(ws) == maxServed || len(ws) > 0 && w.n > budget {
			break
		}
		if !w.fly {
			w.fly = true
			ws = append(ws, w)
			budget -= w.n
		}
	}
	return ws
}

// served ends the round trip that served ws: its first k were served, sent
// at sent. It delivers their grants, but to skip (the head whose own round
// trip it was, which takes its own) and to those that left, which it
// returns: their permits go back. The rest keep waiting, for news: a waiter
// not served found too few permits, a message follows (a release that did not
// serve publishes what it left), or the round trip served all it was given
// (what the message announced, a release's permits); only a full batch, all
// served, lets the head attempt again at once. t.mu must be held.
func (q *permitQueue) served(ws []*permitWaiter, k int, sent time.Time, skip *permitWaiter) (giveBack []*permitWaiter) {
	// Only a full batch, all served, leaves permits possibly free for more.
	q.quiet = k < len(ws) || len(ws) < maxServed
	for i, w := range ws {
		w.fly = false
		switch {
		case i < k && w.left:
			giveBack = append(giveBack, w)
		case i < k && w != skip:
			w.grant <- permitGrant{sent: sent}
		case i >= k && !w.left:
			continue
		}
		q.remove(w)
	}
	q.promote(false)
	return giveBack
}

// refused ends the round trip that served the first k of ws but that fewer
// replicas than required acknowledged: it gave their permits back (all of
// them, the permits of those that left included). Those k fail with err (a
// *NotReplicatedError), but skip (the head whose own round trip it was, which
// returns err itself): a waiting call that met a short acknowledgement
// fails, as a single attempt does, rather than attempting again for as long
// as the replicas lag. The rest keep waiting; as the permits are back, the
// next head attempts at once. t.mu must be held.
func (q *permitQueue) refused(ws []*permitWaiter, k int, err error, skip *permitWaiter) {
	q.quiet = false
	for i, w := range ws {
		w.fly = false
		switch {
		case i < k && !w.left && w != skip:
			w.grant <- permitGrant{err: err}
		case i >= k && !w.left:
			continue
		}
		q.remove(w)
	}
	q.promote(false)
}

// failed ends a round trip that served ws with an unknown outcome: the head
// reads it from the request's record (req, whose value less offset is the
// number served) before it attempts again. t.mu must be held.
func (q *permitQueue) failed(ws []*permitWaiter, req lua.Request, offset int64, sent time.Time) {
	q.unsure = append(q.unsure, &unsureServe{req: req, offset: offset, sent: sent, ws: ws})
	for _, w := range ws {
		if w.left {
			q.remove(w) // it stays in the unsure list, for the settling to give back
		}
	}
	q.promote(true)
}

// leave takes w out of the queue as it gives up, and reports whether it was
// served meanwhile (its grant is waiting on w.grant). A waiter that a round
// trip in flight, or an unsure one, serves is marked left instead: what ends
// or settles that round trip takes it out, and gives back what it got. t.mu
// must be held.
func (q *permitQueue) leave(w *permitWaiter) (served bool) {
	if w.fly {
		w.left = true // what serves it, or settles it, takes it out
		if q.unsureHas(w) {
			// No round trip is in flight for it, only one to settle, which
			// gives back what it got from the unsure list (as failed does):
			// it goes now, or, the head that made that round trip, it would
			// stay in front and no head would settle it.
			q.remove(w)
			q.promote(false)
		}
		return false
	}
	if !q.waiters.has(w) {
		return true
	}
	q.remove(w)
	q.promote(false)
	return false
}

// unsureHas reports whether w is one of the waiters of an unsure round trip
// still to settle (one that settle took out is in flight again).
func (q *permitQueue) unsureHas(w *permitWaiter) bool {
	for _, u := range q.unsure {
		if slices.Contains(u.ws, w) {
			return true
		}
	}
	return false
}

// remove takes w out of the queue.
func (q *permitQueue) remove(w *permitWaiter) {
	q.waiters.remove(w)
}

// idle reports whether the queue may go: nobody waits (a waiter that left
// stays while a round trip serves it) and nothing is unsure.
func (q *permitQueue) idle() bool {
	return len(q.waiters) == 0 && len(q.unsure) == 0
}

// forget drops q once idle, and returns its subscription to close.
func (t *permitTable) forget(q *permitQueue) subscription {
	if !q.idle() || t.m[q.name] != q {
		return nil
	}
	delete(t.m, q.name)
	s := q.sub
	q.sub = nil
	return s
}

// wants returns the counts of ws, the arguments of the scripts that serve
// them.
func wants(ws []*permitWaiter) []int64 {
	n := make([]int64, len(ws))
	for i, w := range ws {
		n[i] = w.n
	}
	return n
}
