package integration

// Tests of a semaphore head's attempt whose reply is lost (an unknown
// outcome, settled from the attempt's request record), without and with
// replica acknowledgements: whatever it took goes back, and the client's
// queue for the semaphore goes on.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

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
	g := syncAwait(t, got, 5*time.Second, "the waiter")
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
func lostHeadAttempt(t *testing.T, k syncKind) (replicated, string, *tripLog, int, syncGot[func(context.Context) error]) {
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
	g1 := syncAwait(t, first, 10*time.Second, "the head")
	require.ErrorIs(t, g1.err, lose.err)
	g2 := syncAwait(t, second, 10*time.Second, "the second waiter")
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
