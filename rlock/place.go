package rlock

import "slices"

// place is a waiter's place in one of the client's local queues, a lock's
// (waiter) or a semaphore's (permitWaiter): how its turn, its news and its
// grant reach it. Both queues are FIFO; the front waiter, the head, alone
// listens and attempts, and a round trip of another goroutine (a release's
// hand-off, a head's attempt for several) delivers what it got on grant,
// which holds one: the deliverer never blocks. A waiter that gives up takes
// itself out of its queue under the queue's mutex; if it is no longer there,
// a grant was sent to it first, and it takes that instead (the cancellation
// race, undone the same way in both queues).
type place[G any] struct {
	turn  chan struct{} // closed when the waiter becomes the head
	wake  chan struct{} // the head should look again
	grant chan G        // what a round trip of another goroutine got for it
}

func newPlace[G any]() place[G] {
	return place[G]{turn: make(chan struct{}), wake: make(chan struct{}, 1), grant: make(chan G, 1)}
}

// promote makes the waiter the head, and reports whether it was not one.
func (p *place[G]) promote() bool {
	if isClosed(p.turn) {
		return false
	}
	close(p.turn)
	return true
}

// poke tells the head to look again; a poke already pending suffices.
func (p *place[G]) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// inLine is a waiter of a local queue: a *waiter or a *permitWaiter.
type inLine interface {
	comparable
	promote() bool
	poke()
}

// line is a local queue's waiters in arrival order, the FIFO of both
// engines (x/sync/semaphore's list of waiters): line[0], the head, alone
// listens and attempts; the others wait for their turn.
type line[W inLine] []W

// push appends w and reports whether it is the head: it came to an empty
// line. The caller promotes it.
func (l *line[W]) push(w W) (head bool) {
	*l = append(*l, w)
	return len(*l) == 1
}

// remove takes w out and reports whether it was in, and whether it was the
// head: the caller then promotes the next one.
func (l *line[W]) remove(w W) (was, head bool) {
	i := slices.Index(*l, w)
	if i < 0 {
		return false, false
	}
	*l = slices.Delete(*l, i, i+1)
	return true, i == 0
}

// has reports whether w is in the line.
func (l line[W]) has(w W) bool { return slices.Contains(l, w) }
