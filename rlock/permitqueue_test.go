package rlock

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

// The permit queue's decisions, without a server: one property each, in the
// style of golang.org/x/sync/semaphore's tests. The round trips around them
// (permitTable's methods) are tested against real servers in integration;
// the refusal of a short acknowledgement and a leave during an unsure round
// trip are in semaphore_acks_test.go.

// permitLine queues waiters wanting the counts ns on one semaphore and
// returns the queue and the waiters, in arrival order.
func permitLine(t *testing.T, ns ...int64) (*permitTable, *permitQueue, []*permitWaiter) {
	t.Helper()
	pt := &permitTable{core: &core{}}
	ws := make([]*permitWaiter, len(ns))
	var q *permitQueue
	for i, n := range ns {
		ws[i] = newPermitWaiter(n)
		q = pt.join("s", ws[i])
	}
	return pt, q, ws
}

// isHead reports whether w's turn has come.
func isHead(w *permitWaiter) bool { return isClosed(w.turn) }

// granted returns w's grant, if one was delivered.
func granted(w *permitWaiter) (permitGrant, bool) {
	select {
	case g := <-w.grant:
		return g, true
	default:
		return permitGrant{}, false
	}
}

// Waiters are served in arrival order; only the front one is the head.
func TestPermitQueueFIFO(t *testing.T) {
	_, q, ws := permitLine(t, 1, 1, 1)
	require.True(t, isHead(ws[0]))
	require.False(t, isHead(ws[1]) || isHead(ws[2]), "only the front waiter is the head")

	batch := q.choose(2, nil)
	require.Equal(t, ws[:2], batch, "a budget of 2 serves the first two")
	require.Empty(t, q.served(batch, 2, time.Now(), nil))
	for _, w := range ws[:2] {
		_, ok := granted(w)
		require.True(t, ok, "a served waiter gets its grant")
	}
	require.True(t, isHead(ws[2]), "the next waiter becomes the head")
	require.Equal(t, line[*permitWaiter]{ws[2]}, q.waiters)
}

// A waiter that wants more permits than the budget holds back those behind
// it, though they would fit (x/sync/semaphore's rule): no small waiter
// overtakes a large one.
func TestPermitQueueHoldBackBehindLargeWaiter(t *testing.T) {
	_, q, ws := permitLine(t, 1, 5, 1)
	require.Equal(t, ws[:1], q.choose(3, nil), "the 5 stops the batch; the 1 behind it waits")

	_, q, ws = permitLine(t, 5, 1)
	require.Equal(t, ws[:1], q.choose(3, nil),
		"the first waiter is tried whatever its count (the script sees whether it fits); the 1 behind it waits")
}

// A waiter that gives up while a round trip serves it is marked left, and
// what that round trip gets for it goes back; one that a round trip served
// before it gave up takes its grant instead of leaving empty-handed.
func TestPermitQueueCancelAfterGrantGivesBack(t *testing.T) {
	pt, q, ws := permitLine(t, 1, 1)
	batch := q.choose(2, nil)
	require.False(t, q.leave(ws[0]), "in flight: not served yet")
	require.Equal(t, []*permitWaiter{ws[0]}, q.served(batch, 2, time.Now(), nil),
		"the round trip served the waiter that left: its permit goes back")
	_, ok := granted(ws[0])
	require.False(t, ok, "nothing is delivered to a waiter that left")
	require.True(t, q.leave(ws[1]), "served before it gave up: its grant waits")
	_, ok = granted(ws[1])
	require.True(t, ok)
	require.True(t, q.idle())
	require.Nil(t, pt.forget(q))
}

// A round trip whose reply was lost is settled before anything else: no
// waiter is served again, nor a new batch chosen, until it is; a waiter of
// it that gives up meanwhile leaves the queue, and the settling gives back
// what it got.
func TestPermitQueueLostReplySettledFirst(t *testing.T) {
	_, q, ws := permitLine(t, 1, 1, 1)
	batch := q.choose(2, nil)
	q.failed(batch, lua.Request{}, 0, time.Now())
	require.Len(t, q.unsure, 1)
	require.Nil(t, q.choose(10, nil), "nothing is chosen while a round trip is unsure")
	settle, _, ws2, _ := q.headStep(ws[0])
	require.True(t, settle, "the head settles it before anything else")
	require.Nil(t, ws2)
	require.False(t, q.idle(), "an unsure round trip keeps the queue")

	require.False(t, q.leave(ws[0]), "a waiter of the unsure round trip gives up")
	require.Equal(t, line[*permitWaiter](ws[1:]), q.waiters, "it leaves at once; the next is the head")
	require.True(t, isHead(ws[1]))

	u := q.unsure[0]
	q.unsure = q.unsure[1:] // what settle takes, before its read
	require.Equal(t, []*permitWaiter{ws[0]}, q.served(u.ws, 2, u.sent, nil),
		"the record says both were served: the one that left gives back")
	_, ok := granted(ws[1])
	require.True(t, ok, "the other was served")
	require.Equal(t, line[*permitWaiter](ws[2:]), q.waiters)
	require.Equal(t, ws[2:], q.choose(10, nil), "settled: the queue goes on")
}

// A head whose last look found too few permits waits for news before it
// attempts again; any news (a message, its recheck) lets it attempt.
func TestPermitQueueQuietWaitsForNews(t *testing.T) {
	_, q, ws := permitLine(t, 2)
	_, sleep, batch, _ := q.headStep(ws[0])
	require.Nil(t, batch, "the first waiter has just looked: it waits for news")
	require.Negative(t, sleep)
	_, _, batch, _ = q.headStep(ws[0])
	require.Equal(t, ws, batch, "woken again, it attempts")
	q.served(batch, 0, time.Now(), ws[0]) // too few permits
	_, sleep, batch, _ = q.headStep(ws[0])
	require.Nil(t, batch, "it found too few: it waits for news")
	require.Negative(t, sleep)
}
