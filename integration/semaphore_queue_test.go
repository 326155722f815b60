package integration

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
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Tests of the semaphore queue (docs/design.md, "A semaphore's
// queue"), for both kinds: a release in a client whose waiters queue hands
// them its permits in its own round trip and publishes nothing when nothing
// is left; a waiter that gives up while a release serves it gives the permits
// back; a hand-off whose reply is lost is settled from its record; a waiter
// that wants more permits than there are holds back those behind it.

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
func queueParked(t *testing.T, name string, acquire func() (func(context.Context) error, error)) <-chan asyncResult[func(context.Context) error] {
	t.Helper()
	base := parked.on(name)
	got := goAsync(acquire)
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

// eachHeldPermit runs f in a subtest for each kind of semaphore, with one
// permit held (oneHeldPermit).
func eachHeldPermit(t *testing.T, f func(t *testing.T, k syncKind, q heldPermit)) {
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) { f(t, k, oneHeldPermit(t, k)) })
	}
}

// acquireQueued starts an acquisition of one permit on q's client and
// returns once it waits, parked in the client's queue.
func (q heldPermit) acquireQueued(t *testing.T, k syncKind) <-chan asyncResult[func(context.Context) error] {
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

// aroundFirstRelease makes h run f in place of the first semaphore release
// script it sees (f runs it with next, or not); the commands before it (the
// head's own attempts, say) and after it run as usual.
func (h *scriptHook) aroundFirstRelease(f func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook)) {
	var once sync.Once
	h.setAround(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error) {
		took := false
		if isRelease(cmd) {
			once.Do(func() {
				took = true
				f(ctx, cmd, next)
			})
		}
		return took, cmd.Err()
	})
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
	eachHeldPermit(t, func(t *testing.T, k syncKind, q heldPermit) {
		ctx, admin, h, name, release := q.ctx, q.admin, q.h, q.name, q.release
		got := q.acquireQueued(t, k)
		before := q.headLooked(t)
		sub := admin.Subscribe(ctx, syncSemChannel(name))
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(ctx)
		require.NoError(t, err)
		require.NoError(t, release(ctx))
		g := awaitAsync(t, got, 2*time.Second, "the waiter, handed the permit")
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

// TestSemaphoreNewHeadTrustsTheQueuesSubscription: a waiter that becomes the
// head after a hand-off takes over the queue's subscription, which an attempt
// has looked through since its confirmation: it makes no attempt of its own
// (it would find nothing), and the next release hands it the permit.
func TestSemaphoreNewHeadTrustsTheQueuesSubscription(t *testing.T) {
	eachHeldPermit(t, func(t *testing.T, k syncKind, q heldPermit) {
		ctx, admin, h, name, release := q.ctx, q.admin, q.h, q.name, q.release
		first := q.acquireQueued(t, k)
		second := q.acquireQueued(t, k) // behind the first, without a round trip
		before := q.headLooked(t)

		require.NoError(t, release(ctx))
		g1 := awaitAsync(t, first, 2*time.Second, "the first waiter, handed the permit")
		require.NoError(t, g1.err)
		// The new head reports nothing on taking over the queue: watch the
		// scripts for a while instead; the count after the second hand-off
		// below would tell a later attempt too.
		require.Never(t, func() bool { return h.scripts.Load()-before > 1 }, 300*time.Millisecond, 5*time.Millisecond,
			"the release only: the new head made no attempt")
		require.EqualValues(t, 1, h.scripts.Load()-before, "the release only")

		require.NoError(t, g1.v(ctx))
		g2 := awaitAsync(t, second, 2*time.Second, "the second waiter, handed the permit")
		require.NoError(t, g2.err)
		require.EqualValues(t, 2, h.scripts.Load()-before, "the two releases only")
		require.NoError(t, g2.v(ctx))
		require.EqualValues(t, 1, permitsLeft(t, admin, name))
	})
}

// TestSemaphoreWaiterLeftDuringHandOffGivesBack: a waiter whose ctx ends
// while the release that serves it is in flight gives up, and the permits
// it was handed go back: none is lost.
func TestSemaphoreWaiterLeftDuringHandOffGivesBack(t *testing.T) {
	eachHeldPermit(t, func(t *testing.T, k syncKind, q heldPermit) {
		ctx, admin, c, h, name, release := q.ctx, q.admin, q.c, q.h, q.name, q.release
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(wctx, c, name, 1) })

		h.aroundFirstRelease(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) {
			err := next(ctx, cmd) // the release runs, serving the waiter
			cancel()              // which gives up before the reply comes
			g := awaitAsync(t, got, 5*time.Second, "the waiter, cancelled")
			require.ErrorIs(t, g.err, rlock.ErrNotAcquired)
			require.ErrorIs(t, g.err, context.Canceled)
			cmd.SetErr(err)
		})
		require.NoError(t, release(ctx))
		h.setAround(nil)
		require.EqualValues(t, 1, permitsLeft(t, admin, name), "the permit handed to the waiter that left came back")
		if k.kind == "ExpirableSemaphore" {
			require.Zero(t, admin.ZCard(ctx, syncTimeoutKey(name)).Val(), "no permit id is left held")
		}
	})
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
	h.aroundFirstRelease(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) {
		require.NoError(t, next(ctx, cmd))
		cmd.SetErr(lost)
	})
	require.ErrorIs(t, release(ctx), lost)
	h.setAround(nil)
	g := awaitAsync(t, got, 5*time.Second, "the waiter, after the lost reply")
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
			g2 := awaitAsync(t, two, 5*time.Second, "the waiter for 2")
			require.NoError(t, g2.err)
			require.NoError(t, backs[2](ctx))
			g1 := awaitAsync(t, one, 5*time.Second, "the waiter for 1")
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
func stillQueued(t *testing.T, ch <-chan asyncResult[func(context.Context) error], what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s returned early: %v", what, g.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// Tests of a semaphore head's attempt whose reply is lost (an unknown
// outcome, settled from the attempt's request record), without and with
// replica acknowledgements: whatever it took goes back, and the client's
// queue for the semaphore goes on.

// TestSemaphoreHeadAttemptReplyLostGivesBack: the head of a client's queue
// attempts after another client's release, and the reply of its attempt,
// which took the permit, is lost. The head fails with that error; the
// permit goes back (its record says the attempt took it), and the client's
// next Acquire takes it. Before, the head that left stayed in front of its
// queue with the attempt unsettled: the permit was never given back, and
// every later Acquire of that client on the semaphore waited until its ctx
// ended.
func TestSemaphoreHeadAttemptReplyLostGivesBack(t *testing.T) {
	k := syncKinds[0] // a Semaphore's: an ExpirableSemaphore's head attempts again with its ids, found in the zset
	ctx := testCtx(t, 30*time.Second)
	c, h := hookedClient(t)
	srv := redistest.Shared(t)
	other, admin := newClient(t, srv.Client(t)), srv.Client(t)
	name := redistest.Name(t)
	answer(k.set(ctx, other, name, 1)).is(t, true)
	release := answer(k.acquire(ctx, other, name, 1)).value(t)
	got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
	awaitSubscribersAtLeast(t, admin, syncSemChannel(name), 1)
	require.Eventually(t, func() bool { return h.scripts.Load() >= 2 }, 5*time.Second, time.Millisecond,
		"the waiter's own attempt and its attempt once subscribed")
	awaitLooked(t, name, observe.CauseSubscribed, 1)

	lost := errors.New("reply lost")
	var once sync.Once
	h.setAround(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) (bool, error) {
		took := false
		once.Do(func() { // the head's attempt, after the release of the other client
			took = true
			require.NoError(t, next(ctx, cmd))
			require.EqualValues(t, 1, cmd.(*redis.Cmd).Val(), "the attempt took the permit")
			cmd.SetErr(lost)
		})
		return took, cmd.Err()
	})
	require.NoError(t, release(ctx))
	g := awaitAsync(t, got, 5*time.Second, "the waiter")
	h.setAround(nil)
	require.ErrorIs(t, g.err, lost)
	require.Eventually(t, func() bool { return permitsLeft(t, admin, name) == 1 }, 5*time.Second, time.Millisecond,
		"the permit the lost attempt took comes back")

	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, c.NewSemaphore(name).Acquire(actx, 1), "the client's queue goes on")
	require.Zero(t, permitsLeft(t, admin, name))
}

// loseNextAcquisition makes the next acquisition pipeline of a client (a
// script that is not a release, and its WAIT) run and lose its reply, once
// armed.
type loseNextAcquisition struct {
	armed atomic.Bool
	err   error
}

func (h *loseNextAcquisition) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loseNextAcquisition) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loseNextAcquisition) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if name := cmds[0].Name(); (name == "evalsha" || name == "eval") && !isRelease(cmds[0]) && h.armed.CompareAndSwap(true, false) {
			for _, c := range cmds {
				c.SetErr(h.err)
			}
			return h.err
		}
		return err
	}
}

// lostHeadAttempt plays, with replica acknowledgements, the head of a
// client's queue attempting for its two waiters after another client
// releases two permits, the reply of that round trip lost: the head fails
// with that error, the second waiter takes a permit. It returns the primary
// and its replica, the name, the client's round trips (from the release on:
// mark) and the second waiter's outcome.
func lostHeadAttempt(t *testing.T, k syncKind) (replicated, string, *tripLog, int, asyncResult[func(context.Context) error]) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	p := startReplicated(t)
	lose := &loseNextAcquisition{err: errors.New("reply lost")}
	rdb := p.primary.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
	log := &tripLog{}
	rdb.AddHook(log)
	rdb.AddHook(lose)
	c := newClient(t, rdb, rlock.WithReplicaAcks(1, ackTimeout), rlock.WithRecheckInterval(time.Minute), rlock.WithTracking(false), watchWaits())
	other := newClient(t, p.primary.Client(t))
	name := redistest.Name(t)
	answer(k.set(ctx, other, name, 2)).is(t, true)
	release := answer(k.acquire(ctx, other, name, 2)).value(t)
	mark := log.mark()
	first := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
	second := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
	awaitSubscribersAtLeast(t, p.rdb, syncSemChannel(name), 1)
	require.Eventually(t, func() bool { return log.acquisitions(mark) >= 2 }, 5*time.Second, time.Millisecond,
		"the first waiter's own attempt and its attempt once subscribed")
	awaitLooked(t, name, observe.CauseSubscribed, 1)

	lose.armed.Store(true)
	mark = log.mark()
	require.NoError(t, release(ctx))
	g1 := awaitAsync(t, first, 10*time.Second, "the head")
	require.ErrorIs(t, g1.err, lose.err)
	g2 := awaitAsync(t, second, 10*time.Second, "the second waiter")
	require.NoError(t, g2.err)
	return p, name, log, mark, g2
}

// TestSemaphoreReplicaAcksUnsureAttemptGivesBack: with replica
// acknowledgements, the head attempts for the two waiters of its client
// after another client releases two permits, and the reply of that
// round trip (the script, which served both, and its WAIT) is lost. The
// head fails with that error; the other waiter, served by a round trip
// whose acknowledgement is unknown, is not granted the permit: the two
// permits go back, and it takes one with an acquisition of its own,
// acknowledged.
func TestSemaphoreReplicaAcksUnsureAttemptGivesBack(t *testing.T) {
	k := syncKinds[0] // a Semaphore's: its round trips are settled from their record
	ctx := testCtx(t, 60*time.Second)
	p, name, log, mark, g2 := lostHeadAttempt(t, k)
	t.Logf("round trips from the release on: %v", log.since(mark))
	require.GreaterOrEqual(t, log.acquisitions(mark), 2, "the lost attempt, then the second waiter's own")
	require.EqualValues(t, 1, permitsLeft(t, p.rdb, name), "one permit held, by the second waiter; the other back")
	require.NoError(t, g2.v(ctx))
	require.EqualValues(t, 2, permitsLeft(t, p.rdb, name))
}

// TestExpirableReplicaAcksReplayIsConfirmed: with replica acknowledgements,
// the head of a client's queue attempts for its two waiters after another
// client releases two permits, and the reply of that round trip (which
// served both) is lost. The head fails with that error; the second waiter
// attempts again with its ids, which the script finds live in the zset: a
// replayed answer, which wrote nothing, so that the WAIT behind it counts
// nothing of the lost round trip's writes. A round trip of its own, a write
// and WAIT (lua.Confirm), has the replica acknowledge them before the
// waiter is granted its permit.
func TestExpirableReplicaAcksReplayIsConfirmed(t *testing.T) {
	k := syncKinds[1]
	ctx := testCtx(t, 60*time.Second)
	p, name, log, mark, g2 := lostHeadAttempt(t, k)
	trips := log.since(mark)
	t.Logf("round trips from the release on: %v", trips)
	confirmed := false
	for _, tr := range trips {
		confirmed = confirmed || len(tr.cmds) == 2 && tr.cmds[0] == "set" && tr.cmds[1] == "wait"
	}
	require.True(t, confirmed, "the replayed acquisition was confirmed by a write and WAIT")
	require.NoError(t, g2.v(ctx))
	t.Logf("after the second waiter's release: %d available, %d ids in the zset (the failed head's, until its lease runs out)",
		permitsLeft(t, p.rdb, name), syncZCard(t, p.rdb, syncTimeoutKey(name)))
}
