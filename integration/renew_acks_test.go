package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
	"github.com/stretchr/testify/require"
)

// renewLog is a lossLog that also counts renewals by outcome.
type renewLog struct {
	*lossLog
	mu      sync.Mutex
	renewed map[observe.RenewOutcome]int
}

func newRenewLog() *renewLog {
	return &renewLog{lossLog: newLossLog(), renewed: map[observe.RenewOutcome]int{}}
}

func (l *renewLog) Renewed(o observe.RenewOutcome, holds int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed[o] += holds
}

func (l *renewLog) count(o observe.RenewOutcome) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed[o]
}

// leased is one hold of a kind with a lease: its handle, and the error its
// Err must match once lost.
type leased struct {
	kind string
	h    handle
	lost error
}

// takeLeased takes, on c, one hold of every kind the watchdog renews: a
// lock, a read hold, permits, a leadership.
func takeLeased(t *testing.T, ctx context.Context, c *rlock.Client, name string) []leased {
	t.Helper()
	l, err := c.NewMutex(name + ":mutex").Lock(ctx)
	require.NoError(t, err)
	r, err := c.NewRWMutex(name + ":rw").ReadLock().Lock(ctx)
	require.NoError(t, err)
	s := c.NewExpirableSemaphore(name + ":sem")
	_, err = s.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	e, err := c.NewElection(name+":elect").Campaign(ctx, "v")
	require.NoError(t, err)
	return []leased{{"Mutex", l, rlock.ErrLockLost}, {"ReadLock", r, rlock.ErrLockLost},
		{"ExpirableSemaphore", p, rlock.ErrPermitLost}, {"Election", e, rlock.ErrLockLost}}
}

// TestRenewalsCountOnlyWhenAcknowledged: with WithReplicaAcks, a renewal
// moves a hold's deadline only when the replicas acknowledged it. While the
// replica receives the stream, holds of every leased kind live across many
// renewal rounds (no false loss); once the stream is black-holed, the
// primary still confirms every renewal, but the holds end at their
// deadline (the last acknowledged renewal's send time plus the lease), with
// ErrLockLost (ErrPermitLost) caused by watchdog.ErrUnreplicated, and the
// observer hears the loss cause "unreplicated". Without acknowledgements
// the same holds live on: the primary's word moves their deadlines.
func TestRenewalsCountOnlyWhenAcknowledged(t *testing.T) {
	const lease = 1500 * time.Millisecond // renewals every 500 ms
	for _, acks := range []bool{true, false} {
		t.Run(map[bool]string{true: "acks", false: "no-acks"}[acks], func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			r := startReplicated(t)
			obs := newRenewLog()
			opts := []rlock.ClientOption{rlock.WithWatchdogTimeout(lease), rlock.WithObserver(obs)}
			if acks {
				opts = append(opts, rlock.WithReplicaAcks(1, 200*time.Millisecond))
			}
			c := newClient(t, r.rdb, opts...)
			name := redistest.Name(t)
			holds := takeLeased(t, ctx, c, name)

			// Healthy: 3 leases' worth of rounds, every renewal acknowledged.
			require.Eventually(t, func() bool { return obs.count(observe.RenewOK) >= 4*9 }, 20*time.Second,
				10*time.Millisecond, "nine renewal rounds of four holds")
			for _, h := range holds {
				require.NoError(t, h.h.Err(), "%s lost while the replica acknowledged", h.kind)
			}
			require.Zero(t, obs.count(observe.RenewUnreplicated))

			r.link.SetDropAll(true) // the replica no longer receives the stream
			cut := time.Now()
			if !acks {
				before := obs.count(observe.RenewOK)
				require.Eventually(t, func() bool { return obs.count(observe.RenewOK) >= before+4*2*3 }, 20*time.Second,
					10*time.Millisecond, "three leases' worth of rounds after the cut")
				for _, h := range holds {
					require.NoError(t, h.h.Err(), "%s: without acknowledgements the primary's word is enough", h.kind)
				}
				return
			}
			for _, h := range holds {
				select {
				case <-h.h.Done():
				case <-time.After(lease + 2*time.Second):
					t.Fatalf("%s still held %v after the cut", h.kind, time.Since(cut))
				}
				told := time.Since(cut)
				err := h.h.Err()
				require.ErrorIs(t, err, h.lost, h.kind)
				require.ErrorIs(t, err, watchdog.ErrUnreplicated, h.kind)
				require.Less(t, told, lease+time.Second, "%s told %v after the cut: later than its deadline", h.kind, told)
				t.Logf("%s: told %v after the cut: %v", h.kind, told.Round(time.Millisecond), err)
			}
			require.Positive(t, obs.count(observe.RenewUnreplicated), "the primary confirmed the renewals after the cut")
			for _, n := range []string{name + ":mutex", name + ":rw", name + ":sem", name + ":elect"} {
				obs.requireCause(t, n, observe.LossUnreplicated)
			}
		})
	}
}

// TestReplicaAcksNoHandOff: with WithReplicaAcks a release does not hand the
// lock to a waiter of its client in its own round trip (only the releaser's
// WAIT would cover that hand-off): the waiter takes the lock with an
// acquisition of its own, which waits for the replicas. With the replication
// stream black-holed as the holder unlocks, the Unlock reports
// ErrNotReplicated, and the waiter, which a hand-off would have given an
// unreplicated lease, is refused (ErrNotReplicated) and leaves the lock free.
func TestReplicaAcksNoHandOff(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	r := startReplicated(t)
	c := newClient(t, r.rdb, rlock.WithReplicaAcks(1, 200*time.Millisecond))
	name := redistest.Name(t)
	m := c.NewMutex(name)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		_, err := m.Lock(ctx)
		got <- err
	}()
	requireWaiting(t, r.primary, name)
	r.link.SetDropAll(true)
	require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotReplicated)
	select {
	case err := <-got:
		require.ErrorIs(t, err, rlock.ErrNotReplicated, "the waiter's own acquisition waited for the replica")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter neither took the lock nor was refused within 10 s")
	}
	require.Empty(t, holders(t, r.rdb, name), "the refused acquisition was undone")
}
