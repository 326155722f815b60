package integration

// Tests of issue 29's semaphore queue (docs/design.md, "A semaphore's
// queue"), for both kinds: a release in a client whose waiters queue hands
// them its permits in its own round trip and publishes nothing when nothing
// is left; a waiter that gives up while a release serves it gives the permits
// back; a hand-off whose reply is lost is settled from its record; a waiter
// that wants more permits than there are holds back those behind it.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// scriptHook counts the scripts a client runs, and lets a test act around
// one of them: around, when set, runs instead of next for the scripts it
// takes (it returns false to leave the script alone).
type scriptHook struct {
	scripts atomic.Int64
	mu      sync.Mutex
	around  func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error)
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		around := h.around
		h.mu.Unlock()
		took, err := false, error(nil)
		if around != nil {
			took, err = around(ctx, cmd, next)
		}
		if !took {
			err = next(ctx, cmd)
		}
		if !lua.IsNoScript(err) {
			h.scripts.Add(1) // a round trip the script ran in (EVALSHA's NOSCRIPT and its EVAL are one)
		}
		return err
	}
}

// setAround sets (nil: clears) the hook's around.
func (h *scriptHook) setAround(f func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error)) {
	h.mu.Lock()
	h.around = f
	h.mu.Unlock()
}

// hookedClient returns an rlock.Client whose scripts h sees; its waiters
// re-check once a minute, so that only messages and hand-offs move them, and
// report to parked (watchWaits).
func hookedClient(t *testing.T) (*rlock.Client, *scriptHook) {
	rdb := redistest.Shared(t).Client(t)
	h := &scriptHook{}
	rdb.AddHook(h)
	return newClient(t, rdb, rlock.WithRecheckInterval(time.Minute), watchWaits()), h
}

// queueParked starts acquire, an acquisition on the semaphore name by a
// client made with watchWaits, on a goroutine and returns once it waits,
// parked in the client's queue.
func queueParked(t *testing.T, name string, acquire func() (func(context.Context) error, error)) <-chan syncGot[func(context.Context) error] {
	t.Helper()
	base := parked.on(name)
	got := syncGo(acquire)
	awaitParked(t, name, base+1)
	return got
}

// heldPermit is a semaphore of one permit, held by a hooked client (the
// scenario of most tests here): how to reach it, and how to give it back.
type heldPermit struct {
	ctx     context.Context
	admin   *redis.Client
	c       *rlock.Client
	h       *scriptHook
	name    string
	release func(context.Context) error
}

// oneHeldPermit makes a semaphore of kind k with one permit, which a hooked
// client takes.
func oneHeldPermit(t *testing.T, k syncKind) heldPermit {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	c, h := hookedClient(t)
	name := redistest.Name(t)
	answer(k.set(ctx, c, name, 1)).is(t, true)
	release := answer(k.acquire(ctx, c, name, 1)).value(t)
	return heldPermit{ctx, redistest.Shared(t).Client(t), c, h, name, release}
}

// acquireQueued starts an acquisition of one permit on q's client and
// returns once it waits, parked in the client's queue.
func (q heldPermit) acquireQueued(t *testing.T, k syncKind) <-chan syncGot[func(context.Context) error] {
	t.Helper()
	return queueParked(t, q.name, func() (func(context.Context) error, error) { return k.acquire(q.ctx, q.c, q.name, 1) })
}

// headLooked waits until the queue's first waiter listens and the set-up's
// scripts have run (TrySetPermits, the holder's acquisition, the waiter's own
// attempt and its attempt once subscribed: await's), and returns how many
// scripts q's client has run.
func (q heldPermit) headLooked(t *testing.T) int64 {
	t.Helper()
	awaitSubscribersAtLeast(t, q.admin, syncSemChannel(q.name), 1)
	require.Eventually(t, func() bool { return q.h.scripts.Load() >= 4 }, 5*time.Second, time.Millisecond,
		"the waiter made its attempt once subscribed")
	return q.h.scripts.Load()
}

// isRelease reports whether cmd runs a semaphore's release script: its keys
// name both the channel it publishes on and a request key (an acquisition's
// script names one of the two at most).
func isRelease(cmd redis.Cmder) bool {
	var channel, request bool
	for _, a := range cmd.Args() {
		if k, ok := a.(string); ok {
			channel = channel || strings.HasPrefix(k, "redisson_sc:")
			request = request || strings.HasPrefix(k, "holdfast_request:")
		}
	}
	return channel && request
}

// permitsLeft returns the available permits of the semaphore name.
func permitsLeft(t *testing.T, admin *redis.Client, name string) int64 {
	t.Helper()
	v, _ := syncGet(t, admin, name)
	return v
}

// TestSemaphoreReleaseHandsOffInItsRoundTrip: the holder of the only permit
// releases it while a waiter of its client queues: the waiter has it when
// the release returns, without a round trip of its own, and nothing is
// published (the first message on the channel is a later release's).
func TestSemaphoreReleaseHandsOffInItsRoundTrip(t *testing.T) {
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			q := oneHeldPermit(t, k)
			ctx, admin, h, name, release := q.ctx, q.admin, q.h, q.name, q.release
			got := q.acquireQueued(t, k)
			before := q.headLooked(t)
			sub := admin.Subscribe(ctx, syncSemChannel(name))
			t.Cleanup(func() { _ = sub.Close() })
			_, err := sub.Receive(ctx)
			require.NoError(t, err)
			require.NoError(t, release(ctx))
			g := syncAwait(t, got, 2*time.Second, "the waiter, handed the permit")
			require.NoError(t, g.err)
			require.EqualValues(t, 1, h.scripts.Load()-before, "one round trip: the release's; the waiter made none")
			require.Zero(t, permitsLeft(t, admin, name), "the permit went from holder to waiter")

			// The waiter's release publishes (nobody waits): that is the first message.
			require.NoError(t, g.v(ctx))
			m, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			require.NotEqual(t, "0", m.Payload, "the hand-off published nothing; this is the waiter's release")
			require.EqualValues(t, 1, permitsLeft(t, admin, name))
		})
	}
}

// TestSemaphoreNewHeadTrustsTheQueuesSubscription: a waiter that becomes the
// head after a hand-off takes over the queue's subscription, which an attempt
// has looked through since its confirmation: it makes no attempt of its own
// (it would find nothing), and the next release hands it the permit.
func TestSemaphoreNewHeadTrustsTheQueuesSubscription(t *testing.T) {
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			q := oneHeldPermit(t, k)
			ctx, admin, h, name, release := q.ctx, q.admin, q.h, q.name, q.release
			first := q.acquireQueued(t, k)
			second := q.acquireQueued(t, k) // behind the first, without a round trip
			before := q.headLooked(t)

			require.NoError(t, release(ctx))
			g1 := syncAwait(t, first, 2*time.Second, "the first waiter, handed the permit")
			require.NoError(t, g1.err)
			// The new head reports nothing on taking over the queue: watch the
			// scripts for a while instead; the count after the second hand-off
			// below would tell a later attempt too.
			require.Never(t, func() bool { return h.scripts.Load()-before > 1 }, 300*time.Millisecond, 5*time.Millisecond,
				"the release only: the new head made no attempt")
			require.EqualValues(t, 1, h.scripts.Load()-before, "the release only")

			require.NoError(t, g1.v(ctx))
			g2 := syncAwait(t, second, 2*time.Second, "the second waiter, handed the permit")
			require.NoError(t, g2.err)
			require.EqualValues(t, 2, h.scripts.Load()-before, "the two releases only")
			require.NoError(t, g2.v(ctx))
			require.EqualValues(t, 1, permitsLeft(t, admin, name))
		})
	}
}

// TestSemaphoreWaiterLeftDuringHandOffGivesBack: a waiter whose ctx ends
// while the release that serves it is in flight gives up, and the permits
// it was handed go back: none is lost.
func TestSemaphoreWaiterLeftDuringHandOffGivesBack(t *testing.T) {
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			q := oneHeldPermit(t, k)
			ctx, admin, c, h, name, release := q.ctx, q.admin, q.c, q.h, q.name, q.release
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(wctx, c, name, 1) })

			var once sync.Once
			h.setAround(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error) {
				took := false
				if !isRelease(cmd) {
					return false, nil // the head's own attempt, say
				}
				once.Do(func() {
					took = true
					err := next(ctx, cmd) // the release runs, serving the waiter
					cancel()              // which gives up before the reply comes
					g := syncAwait(t, got, 5*time.Second, "the waiter, cancelled")
					require.ErrorIs(t, g.err, rlock.ErrNotAcquired)
					require.ErrorIs(t, g.err, context.Canceled)
					cmd.SetErr(err)
				})
				return took, cmd.Err()
			})
			require.NoError(t, release(ctx))
			h.setAround(nil)
			require.EqualValues(t, 1, permitsLeft(t, admin, name), "the permit handed to the waiter that left came back")
			if k.kind == "ExpirableSemaphore" {
				require.Zero(t, admin.ZCard(ctx, syncTimeoutKey(name)).Val(), "no permit id is left held")
			}
		})
	}
}

// TestSemaphoreHandOffReplyLostIsSettled: the reply of a release that served
// a waiter is lost (the caller gets an error); the waiter's head settles the
// outcome from the release's record and has the permit: none is lost, none
// granted twice.
func TestSemaphoreHandOffReplyLostIsSettled(t *testing.T) {
	k := syncKinds[0] // a Semaphore's: an ExpirableSemaphore's waiters settle by their ids (TestExpirableLateReplyNeverGrantsAnExpiredPermit)
	q := oneHeldPermit(t, k)
	ctx, admin, c, h, name, release := q.ctx, q.admin, q.c, q.h, q.name, q.release
	got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
	lost := errors.New("reply lost")
	var once sync.Once
	h.setAround(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error) {
		took := false
		if !isRelease(cmd) {
			return false, nil // the head's own attempt, say
		}
		once.Do(func() {
			took = true
			require.NoError(t, next(ctx, cmd))
			cmd.SetErr(lost)
		})
		return took, cmd.Err()
	})
	require.ErrorIs(t, release(ctx), lost)
	h.setAround(nil)
	g := syncAwait(t, got, 5*time.Second, "the waiter, after the lost reply")
	require.NoError(t, g.err)
	require.Zero(t, permitsLeft(t, admin, name), "the waiter holds the permit the release handed it")
	require.NoError(t, g.v(ctx))
	require.EqualValues(t, 1, permitsLeft(t, admin, name))
}

// TestSemaphoreQueueHoldsBackBehindTheHead: a waiter for 2 permits queued
// before a waiter for 1 holds it back while only one permit is free (as
// golang.org/x/sync/semaphore); both get theirs in order as permits come.
func TestSemaphoreQueueHoldsBackBehindTheHead(t *testing.T) {
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			admin := redistest.Shared(t).Client(t)
			c, h := hookedClient(t)
			other := newClient(t, redistest.Shared(t).Client(t))
			name := redistest.Name(t)
			answer(k.set(ctx, other, name, 3)).is(t, true)
			var backs []func(context.Context) error
			for range 3 {
				backs = append(backs, answer(k.acquire(ctx, other, name, 1)).value(t))
			}
			two := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 2) })
			one := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
			awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)

			before := h.scripts.Load()
			require.NoError(t, backs[0](ctx))
			require.Eventually(t, func() bool { return h.scripts.Load() > before }, 5*time.Second, time.Millisecond,
				"the head attempts on the release's message")
			stillQueued(t, two, "the waiter for 2 with 1 permit free")
			stillQueued(t, one, "the waiter for 1, behind the waiter for 2")
			require.EqualValues(t, 1, permitsLeft(t, admin, name))

			require.NoError(t, backs[1](ctx))
			g2 := syncAwait(t, two, 5*time.Second, "the waiter for 2")
			require.NoError(t, g2.err)
			require.NoError(t, backs[2](ctx))
			g1 := syncAwait(t, one, 5*time.Second, "the waiter for 1")
			require.NoError(t, g1.err)
			require.Zero(t, permitsLeft(t, admin, name))
			require.NoError(t, g2.v(ctx))
			require.NoError(t, g1.v(ctx))
			require.EqualValues(t, 3, permitsLeft(t, admin, name))
		})
	}
}

// stillQueued checks that ch, a waiter's result, brings nothing for a short
// while: the waiter still waits.
func stillQueued(t *testing.T, ch <-chan syncGot[func(context.Context) error], what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s returned early: %v", what, g.err)
	case <-time.After(200 * time.Millisecond):
	}
}
