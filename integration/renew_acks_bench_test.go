package integration

// What a renewal round costs with replica acknowledgements: the watchdog's
// round is one pipeline per node (renew.lua batches of up to 100 holds), and
// with WithReplicaAcks a WAIT behind them in the same round trip. Measured on
// a primary with one replica on loopback, beside PING on the same connection
// (the baseline of the run: compare ratios, not absolute times).
//
//	go test -run '^$' -bench 'RenewalRound' -benchtime 2000x -count 5 . | benchstat -

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

func BenchmarkRenewalRound(b *testing.B) {
	ctx := context.Background()
	primary := redistest.Start(b, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := redistest.Start(b, "--replicaof", host, port)
	rc := replica.Client(b)
	require.Eventually(b, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond, "replica in sync")
	rdb := primary.Client(b)
	require.NoError(b, lua.LoadRenew(ctx, rdb))
	b.Run("PING", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, rdb.Ping(ctx).Err())
		}
	})
	for _, holds := range []int{1, 100} {
		rs := make([]lua.Renewal, holds)
		for i := range rs {
			lk := lua.NewLock(fmt.Sprintf("{bench-renew}:%d", i))
			require.NoError(b, rdb.HSet(ctx, lk.Name(), "c:1", 1).Err())
			rs[i] = lk.Renewal("c:1")
		}
		for _, acks := range []int{0, 1} {
			b.Run(fmt.Sprintf("holds=%d/acks=%d", holds, acks), func(b *testing.B) {
				for b.Loop() {
					pipe := rdb.Pipeline()
					cmd := lua.RenewCmd(ctx, pipe, rs, time.Now(), 30*time.Second, false)
					if acks > 0 {
						pipe.Do(ctx, "wait", acks, 1000)
					}
					_, err := pipe.Exec(ctx)
					require.NoError(b, err)
					ok, err := lua.RenewResult(cmd)
					require.NoError(b, err)
					require.True(b, ok[0])
				}
			})
		}
	}
}
