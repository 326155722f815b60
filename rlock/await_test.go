package rlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/stretchr/testify/require"
)

// fakeWaker is a subscription the test drives: confirm and message.
type fakeWaker struct {
	confirmed chan struct{}
	ready     chan pubsub.Wake
}

func newFakeWaker() *fakeWaker {
	return &fakeWaker{confirmed: make(chan struct{}), ready: make(chan pubsub.Wake, 1)}
}

func (w *fakeWaker) Confirmed() <-chan struct{} { return w.confirmed }
func (w *fakeWaker) Ready() <-chan pubsub.Wake  { return w.ready }
func (w *fakeWaker) message()                   { w.ready <- pubsub.WakeMessage }

// script is a fake attempt: it records each call and answers from a list; past
// the list it says "sleep an hour".
type script struct {
	mu      sync.Mutex
	turns   []turn[int]
	calls   int
	attempt chan int // the call number, after each call
}

func newScript(turns ...turn[int]) *script {
	return &script{turns: turns, attempt: make(chan int, 100)}
}

func (s *script) next(context.Context) (turn[int], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.attempt <- s.calls
	if s.calls <= len(s.turns) {
		return s.turns[s.calls-1], nil
	}
	return turn[int]{sleep: time.Hour}, nil
}

type awaited struct {
	got int
	err error
}

func runAwait(ctx context.Context, p waitPlan[int]) <-chan awaited {
	ch := make(chan awaited, 1)
	go func() {
		got, err := await(ctx, p)
		ch <- awaited{got, err}
	}()
	return ch
}

func expectAttempt(t *testing.T, s *script, n int) {
	t.Helper()
	select {
	case got := <-s.attempt:
		require.Equal(t, n, got)
	case <-time.After(2 * time.Second):
		t.Fatalf("attempt %d not made", n)
	}
}

func expectNoAttempt(t *testing.T, s *script) {
	t.Helper()
	select {
	case got := <-s.attempt:
		t.Fatalf("unexpected attempt %d", got)
	case <-time.After(50 * time.Millisecond):
	}
}

func expectResult(t *testing.T, ch <-chan awaited) awaited {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * time.Second):
		t.Fatal("await did not return")
	}
	return awaited{}
}

// A first attempt that ends the wait costs no subscription.
func TestAwaitNoSubscriptionWhenTheFirstAttemptEndsIt(t *testing.T) {
	s := newScript(turn[int]{got: 7, done: true})
	subscribed := false
	got, err := await(context.Background(), waitPlan[int]{attempt: s.next,
		subscribe: func(context.Context) (waker, error) { subscribed = true; return newFakeWaker(), nil }})
	require.NoError(t, err)
	require.Equal(t, 7, got)
	require.False(t, subscribed)
}

// After the first attempt the wait subscribes, and attempts again once the
// subscription is confirmed (a release published before it listened), and on
// each message.
func TestAwaitAttemptsAfterConfirmationAndOnMessages(t *testing.T) {
	w := newFakeWaker()
	s := newScript(turn[int]{sleep: time.Hour}, turn[int]{sleep: time.Hour}, turn[int]{got: 3, done: true})
	var confirmed, heard int
	res := runAwait(context.Background(), waitPlan[int]{attempt: s.next,
		subscribe: func(context.Context) (waker, error) { return w, nil },
		confirmed: func() { confirmed++ },
		heard:     func() { heard++ },
	})
	expectAttempt(t, s, 1)
	expectNoAttempt(t, s)
	close(w.confirmed)
	expectAttempt(t, s, 2)
	w.message()
	expectAttempt(t, s, 3)
	r := expectResult(t, res)
	require.NoError(t, r.err)
	require.Equal(t, 3, r.got)
	require.Equal(t, 1, confirmed)
	require.Equal(t, 1, heard)
}

// A lost message costs at most the bound the last attempt returned: the wait
// attempts again when it passes, without any message.
func TestAwaitBoundWithoutMessage(t *testing.T) {
	w := newFakeWaker()
	close(w.confirmed)
	s := newScript(turn[int]{sleep: time.Hour}, turn[int]{sleep: 30 * time.Millisecond}, turn[int]{got: 1, done: true})
	start := time.Now()
	got, err := await(context.Background(), waitPlan[int]{attempt: s.next,
		subscribe: func(context.Context) (waker, error) { return w, nil }})
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "slept until the bound")
}

// ctx ends the wait at once, with ctx's error; a local wake-up makes the next
// attempt; a hand-off ends the wait with its result; a negative sleep waits
// for one of those, not a timer.
func TestAwaitCancellationWakeAndHandOff(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newScript(turn[int]{sleep: -1})
		res := runAwait(ctx, waitPlan[int]{attempt: s.next})
		expectAttempt(t, s, 1)
		cancel()
		r := expectResult(t, res)
		require.ErrorIs(t, r.err, context.Canceled)
	})
	t.Run("wake", func(t *testing.T) {
		wake := make(chan struct{}, 1)
		s := newScript(turn[int]{sleep: -1}, turn[int]{got: 2, done: true})
		res := runAwait(context.Background(), waitPlan[int]{attempt: s.next, wake: wake})
		expectAttempt(t, s, 1)
		expectNoAttempt(t, s)
		wake <- struct{}{}
		expectAttempt(t, s, 2)
		require.Equal(t, 2, expectResult(t, res).got)
	})
	t.Run("handed", func(t *testing.T) {
		handed := make(chan int, 1)
		s := newScript(turn[int]{sleep: -1})
		res := runAwait(context.Background(), waitPlan[int]{attempt: s.next, handed: handed})
		expectAttempt(t, s, 1)
		handed <- 9
		r := expectResult(t, res)
		require.NoError(t, r.err)
		require.Equal(t, 9, r.got)
		expectNoAttempt(t, s)
	})
}

// An attempt's error, or the subscription's, ends the wait with that error.
func TestAwaitErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := await(context.Background(), waitPlan[int]{attempt: func(context.Context) (turn[int], error) {
		return turn[int]{}, boom
	}})
	require.ErrorIs(t, err, boom)
	s := newScript(turn[int]{sleep: time.Hour})
	_, err = await(context.Background(), waitPlan[int]{attempt: s.next,
		subscribe: func(context.Context) (waker, error) { return nil, boom }})
	require.ErrorIs(t, err, boom)
}

// partsWaker merges several subscriptions: confirmed once all are, a token on
// a message from any, and Close stops its goroutines.
func TestPartsWaker(t *testing.T) {
	a, b := newFakeSubscription(), newFakeSubscription()
	w := newPartsWaker([]subscription{a, b})
	close(a.w.confirmed)
	select {
	case <-w.Confirmed():
		t.Fatal("confirmed before every part")
	case <-time.After(20 * time.Millisecond):
	}
	close(b.w.confirmed)
	select {
	case <-w.Confirmed():
	case <-time.After(2 * time.Second):
		t.Fatal("not confirmed")
	}
	b.w.message()
	select {
	case <-w.Ready():
	case <-time.After(2 * time.Second):
		t.Fatal("a part's message did not wake")
	}
	w.Close()
	require.True(t, a.closed && b.closed)
}

type fakeSubscription struct {
	w      *fakeWaker
	closed bool
}

func newFakeSubscription() *fakeSubscription { return &fakeSubscription{w: newFakeWaker()} }

func (s *fakeSubscription) Confirmed() <-chan struct{} { return s.w.Confirmed() }
func (s *fakeSubscription) Ready() <-chan pubsub.Wake  { return s.w.Ready() }
func (s *fakeSubscription) Close()                     { s.closed = true }
