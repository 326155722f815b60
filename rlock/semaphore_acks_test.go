package rlock

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// TestNotReplicatedErrorText: the error names the lock or the semaphore and
// the kind of call, says how many replicas acknowledged and what became of
// the call, and matches ErrNotReplicated however it is wrapped.
func TestNotReplicatedErrorText(t *testing.T) {
	undoFailed := errors.New("connection reset")
	for _, tc := range []struct {
		e    *NotReplicatedError
		want string
	}{
		{&NotReplicatedError{Lock: "l", Acked: 0, Wanted: 1, Timeout: 200 * time.Millisecond},
			`rlock: not replicated: lock "l": 0 of 1 replicas acknowledged within 200ms; the acquisition was undone`},
		{&NotReplicatedError{Lock: "l", Unlock: true, Acked: 1, Wanted: 2, Timeout: time.Second},
			`rlock: not replicated: unlock "l": 1 of 2 replicas acknowledged within 1s; the lock was released on the primary only`},
		{&NotReplicatedError{Semaphore: "s", Acked: 0, Wanted: 1, Timeout: 200 * time.Millisecond},
			`rlock: not replicated: semaphore "s": acquisition: 0 of 1 replicas acknowledged within 200ms; it was undone, its permits given back`},
		{&NotReplicatedError{Semaphore: "s", Acked: 0, Wanted: 1, Timeout: 200 * time.Millisecond, undo: undoFailed},
			`rlock: not replicated: semaphore "s": acquisition: 0 of 1 replicas acknowledged within 200ms; giving its permits back failed (connection reset): they may stay taken`},
		{&NotReplicatedError{Semaphore: "s", Unlock: true, Acked: 0, Wanted: 1, Timeout: time.Second},
			`rlock: not replicated: semaphore "s": release: 0 of 1 replicas acknowledged within 1s; the permits were released on the primary only`},
		{&NotReplicatedError{Semaphore: "s", Op: "DrainPermits", Acked: 0, Wanted: 1, Timeout: time.Second},
			`rlock: not replicated: semaphore "s": DrainPermits: 0 of 1 replicas acknowledged within 1s; it took effect on the primary only`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		wrapped := fmt.Errorf("outer: %w", tc.e)
		var nr *NotReplicatedError
		if !errors.Is(wrapped, ErrNotReplicated) || !errors.As(wrapped, &nr) || nr != tc.e {
			t.Errorf("%q does not match ErrNotReplicated and *NotReplicatedError once wrapped", tc.want)
		}
	}
}

// TestSyncObjectNotReplicated: the errors of a semaphore's calls name it and
// the call, and carry the client's requirement; a call that wrote nothing,
// or without a requirement, gives none.
func TestSyncObjectNotReplicated(t *testing.T) {
	c := &Client{core: &core{}}
	c.opts.acks.Replicas, c.opts.acks.Timeout = 2, time.Second
	o := &syncObject{c: c, name: "s", noun: "semaphore"}
	var nr *NotReplicatedError
	if !errors.As(o.replicated(opRelease, true, 1, nil), &nr) || !nr.Unlock || nr.Op != "" || nr.Semaphore != "s" || nr.Acked != 1 || nr.Wanted != 2 || nr.Timeout != time.Second {
		t.Errorf("a release: %+v", nr)
	}
	if !errors.As(o.replicated("AddPermits", true, 0, nil), &nr) || nr.Unlock || nr.Op != "AddPermits" {
		t.Errorf("AddPermits: %+v", nr)
	}
	if err := o.replicated("TrySetPermits", false, 0, nil); err != nil {
		t.Errorf("a call that wrote nothing: %v", err)
	}
	if err := o.replicated(opRelease, true, 2, nil); err != nil {
		t.Errorf("acknowledged: %v", err)
	}
	c.opts.acks.Replicas = 0
	if err := o.replicated(opRelease, true, 0, nil); err != nil {
		t.Errorf("no requirement: %v", err)
	}
}

// TestPermitQueueRefused: a round trip that served the first two of three
// waiters but was not acknowledged fails those two (the head, whose round
// trip it was, returns the error itself), keeps the third waiting as the
// new head, and lets it attempt at once.
func TestPermitQueueRefused(t *testing.T) {
	var tb permitTable
	w1, w2, w3 := newPermitWaiter(1), newPermitWaiter(1), newPermitWaiter(1)
	q := tb.join("s", w1)
	tb.join("s", w2)
	tb.join("s", w3)
	ws := q.choose(3, w1)
	if len(ws) != 3 {
		t.Fatalf("chose %d waiters", len(ws))
	}
	refusal := &NotReplicatedError{Semaphore: "s", Wanted: 1}
	q.quiet = true
	q.refused(ws, 2, refusal, w1)
	select {
	case g := <-w2.grant:
		if g.err != refusal {
			t.Errorf("w2 got %+v", g)
		}
	default:
		t.Error("w2 was not told")
	}
	select {
	case g := <-w1.grant:
		t.Errorf("the head was sent %+v: it returns the error itself", g)
	default:
	}
	if len(q.waiters) != 1 || q.waiters[0] != w3 || !isHead(w3) || w3.fly || q.quiet {
		t.Errorf("waiters %v, w3 head %v fly %v, quiet %v", q.waiters, isHead(w3), w3.fly, q.quiet)
	}
}

// TestPermitQueueLeaveUnsure: the head whose own round trip failed (unsure)
// leaves with its error: it goes at once, so that the next waiter becomes
// the head and settles that round trip, or, the last one, the queue's
// orphan settles it. A waiter that a round trip in flight serves stays until
// that round trip ends.
func TestPermitQueueLeaveUnsure(t *testing.T) {
	var tb permitTable
	w1, w2 := newPermitWaiter(1), newPermitWaiter(1)
	q := tb.join("s", w1)
	tb.join("s", w2)
	ws := q.choose(2, w1)
	q.failed(ws, lua.Request{Key: "r"}, 0, time.Now())
	if q.leave(w1) {
		t.Fatal("w1 was served")
	}
	if !w1.left || len(q.waiters) != 1 || q.waiters[0] != w2 || !isHead(w2) {
		t.Errorf("after w1 left: waiters %v, w2 head %v", q.waiters, isHead(w2))
	}
	if q.leave(w2) || len(q.waiters) != 0 || len(q.unsure) != 1 || q.idle() {
		t.Errorf("after w2 left: waiters %v, unsure %d: the orphan settles it", q.waiters, len(q.unsure))
	}

	w3 := newPermitWaiter(1)
	q = tb.join("t", w3)
	q.choose(1, w3) // in flight
	q.leave(w3)
	if !w3.left || len(q.waiters) != 1 {
		t.Errorf("a waiter in flight left the queue before its round trip ended: %v", q.waiters)
	}
}
