package integration

// A latch set and counted down over and over by other clients is never
// reported deleted to its awaiters: an opening whose message is still in
// flight behind a late "set" message is an opening. A real Delete still is
// reported, and a raw DEL still reads as an opening.

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

const (
	latchChurnAwaiters = 3   // goroutines awaiting, one after the other, in one client
	latchChurnAwaits   = 200 // Awaits per goroutine
)

// latchChurnTally counts the outcomes of the Awaits of TestLatchChurnNeverDeleted.
type latchChurnTally struct {
	opened, deleted, other atomic.Int64
	mu                     sync.Mutex
	first                  error // the first error that is not ErrLatchDeleted
}

// record counts the outcome err of one Await.
func (t *latchChurnTally) record(err error) {
	switch {
	case err == nil:
		t.opened.Add(1)
	case errors.Is(err, rlock.ErrLatchDeleted):
		t.deleted.Add(1)
	default:
		t.other.Add(1)
		t.mu.Lock()
		t.first = cmp.Or(t.first, err)
		t.mu.Unlock()
	}
}

// latchChurn sets the latch name to 1 and counts it down, alternating between
// the clients cs, until stop is closed; it returns the first error on the
// channel it returns (nil once stopped).
func latchChurn(ctx context.Context, name string, stop <-chan struct{}, cs ...*rlock.Client) <-chan error {
	out := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- nil
				return
			default:
			}
			l := cs[i%len(cs)].NewCountDownLatch(name)
			_, err := l.TrySetCount(ctx, 1)
			if err = errors.Join(err, l.CountDown(ctx)); err != nil {
				out <- err
				return
			}
		}
	}()
	return out
}

// TestLatchChurnNeverDeleted: while two other clients set a latch to 1 and
// count it down, over and over, 600 Awaits in a third client (no deadline)
// all return nil: none reports ErrLatchDeleted, since nothing deletes the
// latch. Then, with the churn stopped, a Delete of a latch awaited in two
// clients makes every Await return ErrLatchDeleted, and a raw DEL (no
// message) makes it return nil.
func TestLatchChurnNeverDeleted(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	ca := newClient(t, srv.Client(t), watchWaits())
	cb := newClient(t, srv.Client(t), watchWaits())
	cc := newClient(t, srv.Client(t))
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })

	stop := make(chan struct{})
	churned := latchChurn(ctx, name, stop, cb, cc)
	tally := &latchChurnTally{}
	var wg sync.WaitGroup
	for range latchChurnAwaiters {
		wg.Go(func() {
			l := ca.NewCountDownLatch(name)
			for range latchChurnAwaits {
				tally.record(l.Await(ctx))
			}
		})
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-churned, "churn")
	t.Logf("%d Awaits under churn: %d opened, %d latch deleted, %d other errors",
		latchChurnAwaiters*latchChurnAwaits, tally.opened.Load(), tally.deleted.Load(), tally.other.Load())
	require.Zero(t, tally.other.Load(), "other errors, the first: %v", tally.first)
	require.Zero(t, tally.deleted.Load(), "Awaits told ErrLatchDeleted of a latch nobody deleted")

	l := ca.NewCountDownLatch(name)
	require.NoError(t, admin.Del(ctx, name).Err())
	gots := latchAwaited(t, ctx, admin, ca, name, 2, ca, ca, cb)
	answer(l.Delete(ctx)).is(t, true)
	for i, g := range gots {
		require.ErrorIs(t, syncAwait(t, g, 5*time.Second, "awaiter after Delete").err, rlock.ErrLatchDeleted, "awaiter %d", i)
	}

	gots = latchAwaited(t, ctx, admin, ca, name, 2, ca, cb)
	require.NoError(t, admin.Del(ctx, name).Err()) // no message: reads as an opening
	for i, g := range gots {
		require.NoError(t, syncAwait(t, g, 30*time.Second, "awaiter after a raw DEL").err, "awaiter %d", i)
	}
}
