package integration

// The waits every test shares: for a channel's subscribers, and for calls
// that are parked (blocked in a wait of rlock). They poll a condition with
// generous deadlines; none sleeps to synchronise.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// awaitBound is how long the waits of this file wait at most: far above
// what any of them takes on a loaded machine.
const awaitBound = 10 * time.Second

// subscriberCount counts the subscribers of a channel: classic NUMSUB on one
// server (numSubOf), or an environment's own count (a cluster's sharded
// channels).
type subscriberCount func(ctx context.Context, channel string) int64

// numSubOf counts the classic subscribers of a channel on rdb's server (0
// when the command fails).
func numSubOf(rdb redis.Cmdable) subscriberCount {
	return func(ctx context.Context, channel string) int64 {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel]
	}
}

// numSub returns how many clients are subscribed to channel.
func numSub(t testing.TB, rdb redis.Cmdable, channel string) int64 {
	t.Helper()
	m, err := rdb.PubSubNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

// awaitSubscribers waits until channel has exactly n subscribers.
func awaitSubscribers(t testing.TB, rdb redis.Cmdable, channel string, n int64) {
	t.Helper()
	awaitCounted(t, numSubOf(rdb), channel, func(got int64) bool { return got == n }, "%d subscriber(s)", n)
}

// awaitSubscribersAtLeast waits until channel has n subscribers or more.
func awaitSubscribersAtLeast(t testing.TB, rdb redis.Cmdable, channel string, n int64) {
	t.Helper()
	awaitListeners(t, numSubOf(rdb), channel, n)
}

// awaitListeners waits until count says channel has n subscribers or more.
func awaitListeners(t testing.TB, count subscriberCount, channel string, n int64) {
	t.Helper()
	awaitCounted(t, count, channel, func(got int64) bool { return got >= n }, "at least %d subscriber(s)", n)
}

// awaitCounted waits until count's answer for channel satisfies ok.
func awaitCounted(t testing.TB, count subscriberCount, channel string, ok func(int64) bool, want string, args ...any) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return ok(count(ctx, channel))
	}, awaitBound, 2*time.Millisecond, "%s to %s expected", fmt.Sprintf(want, args...), channel)
}

// waitTally is an observer (observe.Observer and observe.WaitObserver) that
// counts, by object name, the calls that are blocked: WaitStart minus
// WaitEnd. A client made with watchWaits reports to the package's tally,
// parked; tests use unique names, so the counts of one test are its own.
// WaitStart is reported once a call has made its first attempt and is about
// to block: a Mutex's, RWMutex's or fair lock's waiter queued on the client's
// entry, a semaphore's waiter queued behind (or as) the head, a latch's
// awaiter subscribed and about to sleep.
type waitTally struct {
	mu     sync.Mutex
	parked map[string]int
	woken  map[wokenKey]int
}

// wokenKey counts the looks at Redis of the waits on an object for a cause.
type wokenKey struct {
	name  string
	cause observe.Cause
}

// parked is the tally of every client made with watchWaits.
var parked = &waitTally{parked: map[string]int{}, woken: map[wokenKey]int{}}

// watchWaits is the option that makes a client report its waits to parked.
func watchWaits() rlock.ClientOption { return rlock.WithObserver(parked) }

func (w *waitTally) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (w *waitTally) End(context.Context, observe.Call, observe.Result)         {}

func (w *waitTally) WaitStart(x observe.Wait) { w.add(x.Name, 1) }
func (w *waitTally) WaitEnd(x observe.Wait)   { w.add(x.Name, -1) }

// Woken counts a blocked call's look at Redis, by cause. A look is reported
// after it ran, before the call sleeps again.
func (w *waitTally) Woken(x observe.Wait, cause observe.Cause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.woken[wokenKey{x.Name, cause}]++
}

func (w *waitTally) add(name string, d int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parked[name] += d
}

// on returns how many calls on the object name are blocked.
func (w *waitTally) on(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parked[name]
}

// looks returns how many looks at Redis the blocked calls on the object name
// made for cause.
func (w *waitTally) looks(name string, cause observe.Cause) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.woken[wokenKey{name, cause}]
}

// awaitLooked waits until the blocked calls on the object name (of clients
// made with watchWaits) made n looks at Redis for cause: with
// observe.CauseSubscribed, a waiter's attempt once its subscription was
// confirmed, after which it sleeps until a message, a hand-off or its
// re-check.
func awaitLooked(t testing.TB, name string, cause observe.Cause, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return parked.looks(name, cause) >= n }, awaitBound, 2*time.Millisecond,
		"%d look(s) of the waits on %s for %v expected", n, name, cause)
}

// awaitParked waits until at least n calls on the object name (of clients
// made with watchWaits) are blocked.
func awaitParked(t testing.TB, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return parked.on(name) >= n }, awaitBound, 2*time.Millisecond,
		"%d call(s) blocked on %s expected", n, name)
}

// goParked runs each f on a goroutine (goAsyncErr), one after the other, each
// once the one before is blocked on the object name, and returns once all of
// them are: the calls of fs must be of clients made with watchWaits.
func goParked(t testing.TB, name string, fs ...func() error) []<-chan asyncResult[struct{}] {
	t.Helper()
	base := parked.on(name)
	gots := make([]<-chan asyncResult[struct{}], len(fs))
	for i, f := range fs {
		gots[i] = goAsyncErr(f)
		awaitParked(t, name, base+i+1)
	}
	return gots
}

// asyncResult is what a call run on a goroutine by goAsync returned, and when.
type asyncResult[T any] struct {
	v   T
	err error
	at  time.Time
}

// leaseResult is what a Lock or TryLock run by goAsync returned.
type leaseResult = asyncResult[*rlock.Lease]

// goAsync runs f on a goroutine; the channel receives its result once.
func goAsync[T any](f func() (T, error)) <-chan asyncResult[T] {
	ch := make(chan asyncResult[T], 1)
	go func() {
		v, err := f()
		ch <- asyncResult[T]{v, err, time.Now()}
	}()
	return ch
}

// goAsyncErr is goAsync for a call that returns only an error.
func goAsyncErr(f func() error) <-chan asyncResult[struct{}] {
	return goAsync(func() (struct{}, error) { return struct{}{}, f() })
}

// lockAsync runs l.Lock(ctx) on a goroutine (goAsync).
func lockAsync(ctx context.Context, l rlock.Locker) <-chan leaseResult {
	return goAsync(func() (*rlock.Lease, error) { return l.Lock(ctx) })
}

// awaitAsync waits at most d for the result of a call started by goAsync.
func awaitAsync[T any](t testing.TB, ch <-chan asyncResult[T], d time.Duration, what string) asyncResult[T] {
	t.Helper()
	select {
	case g := <-ch:
		return g
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
		panic("unreachable")
	}
}

// requirePending fails the test if the call started by goAsync has already
// returned.
func requirePending[T any](t testing.TB, ch <-chan asyncResult[T], what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s returned early: %v, err %v", what, g.v, g.err)
	default:
	}
}
