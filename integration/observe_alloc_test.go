package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// noopObserver implements every interface of package observe and does
// nothing: what the client's reporting costs by itself.
type noopObserver struct{}

func (noopObserver) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (noopObserver) End(context.Context, observe.Call, observe.Result)         {}
func (noopObserver) HoldStart(observe.Hold)                                    {}
func (noopObserver) HoldEnd(observe.Hold, observe.HoldOutcome, error)          {}
func (noopObserver) WaitStart(observe.Wait)                                    {}
func (noopObserver) Woken(observe.Wait, observe.Cause)                         {}
func (noopObserver) WaitEnd(observe.Wait)                                      {}

// TestObserverAllocations pins what an observer costs the uncontended cycle in
// allocations, with one that allocates nothing itself: one per observed call
// (the call's record: TryLock, Unlock) and one per observed hold.
func TestObserverAllocations(t *testing.T) {
	srv := redistest.Shared(t)
	cycle := func(opts ...rlock.ClientOption) float64 {
		m := newClient(t, srv.Client(t), opts...).NewMutex(redistest.Name(t))
		ctx := testCtx(t, 30*time.Second)
		return testing.AllocsPerRun(200, func() {
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		})
	}
	none := cycle()
	noop := cycle(rlock.WithObserver(noopObserver{}))
	t.Logf("allocations per cycle: %.1f without an observer, %.1f with a no-op one", none, noop)
	require.LessOrEqual(t, noop-none, 3.0, "one record per observed call (TryLock, Unlock) and per hold")
}
