//go:build soak

package integration

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

// TestSoakReplicaAcksNoFalseLoss: with WithReplicaAcks on a healthy primary
// and two replicas, renewals that must be acknowledged never cost a hold.
// One client holds 50 of each leased kind (locks, read holds, permits,
// leaderships) under a 1 s watchdog (a renewal round every 333 ms) for the
// soak's duration, while 8 goroutines take and give back other locks in a
// loop (write traffic for the replicas to acknowledge); no hold may be lost
// and no round may go unacknowledged (make soak; HOLDFAST_SOAK_DURATION).
func TestSoakReplicaAcksNoFalseLoss(t *testing.T) {
	d := soakDuration(t)
	ctx := testCtx(t, d+time.Minute)
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary.Addr)
	for range 2 {
		rc := redistest.Start(t, "--replicaof", host, port).Client(t)
		require.Eventually(t, func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 10*time.Second, 10*time.Millisecond)
	}
	rdb := primary.Client(t)
	require.Eventually(t, func() bool {
		n, err := rdb.Do(ctx, "wait", 2, 100).Int()
		return err == nil && n == 2
	}, 10*time.Second, 10*time.Millisecond, "both replicas acknowledge")
	obs := newRenewLog()
	c := newClient(t, rdb, rlock.WithReplicaAcks(1, 500*time.Millisecond), rlock.WithWatchdogTimeout(time.Second),
		rlock.WithObserver(obs))
	name := redistest.Name(t)
	var holds []handle
	for i := range 50 {
		for _, l := range takeLeased(t, ctx, c, fmt.Sprintf("%s:%d", name, i)) {
			holds = append(holds, l.h)
		}
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	var cycles, errs int64
	var mu sync.Mutex
	for g := range 8 {
		wg.Go(func() {
			m := c.NewMutex(fmt.Sprintf("%s:churn:%d", name, g%4))
			for time.Now().Before(stop) {
				l, err := m.Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				mu.Lock()
				cycles++
				if err != nil {
					errs++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, h := range holds {
		require.NoError(t, h.Err(), "hold %d", i)
	}
	require.Empty(t, obs.lost(), "holds lost")
	require.Zero(t, obs.count(observe.RenewUnreplicated), "renewals not acknowledged")
	require.Zero(t, errs, "churn errors")
	t.Logf("%v: %d renewals acknowledged, 0 unacknowledged, 0 holds lost of %d; %d churn cycles", d,
		obs.count(observe.RenewOK), len(holds), cycles)
}
