package integration

// The bound of an expirable semaphore's wait when nothing is published: a
// permit with a fixed lease that its holder never releases. The waiter's
// attempt reads the earliest lease expiry and sleeps until then, not until
// its recheck interval (set to a minute here), in the holder's client and in
// another one (docs/design.md, "Waiting, and the bound of every wait").

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

func TestSyncWaitBoundedByFixedLease(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(map[bool]string{true: "same client", false: "other client"}[same], func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			admin, holder, name := setup(t, rlock.WithRecheckInterval(time.Minute))
			waiter := holder
			if !same {
				waiter = newClient(t, admin, rlock.WithRecheckInterval(time.Minute))
			}
			s := expSemaphore(t, admin, holder, name, 1)

			const lease = 700 * time.Millisecond
			held := answer(s.Acquire(ctx, 1, rlock.WithLeaseTime(lease))).value(t)
			taken := time.Now()

			got := syncGo(func() (*rlock.Permits, error) { return waiter.NewExpirableSemaphore(name).Acquire(ctx, 1) })
			g := syncAwait(t, got, 5*time.Second, "waiter on a never-released fixed-lease permit")
			require.NoError(t, g.err)
			waited := g.at.Sub(taken)
			t.Logf("permit with a %v lease never released: the waiter acquired %v after it was taken", lease, waited.Round(time.Millisecond))
			require.GreaterOrEqual(t, waited, lease-50*time.Millisecond, "acquired before the lease could have run out")
			require.ErrorIs(t, held.Err(), rlock.ErrPermitLost)
			require.NoError(t, g.v.Release(ctx))
		})
	}
}
