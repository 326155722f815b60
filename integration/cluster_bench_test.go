package integration

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// BenchmarkClusterReleases runs Lock+Unlock cycles on 12 locks spread over the
// shards of a cluster of 3 primaries with 1 replica each, from parallel
// goroutines of one client, and reports acquisitions per second and the nodes
// each release reaches: the origin plus the nodes the cluster bus carried the
// message to (CLUSTER INFO cluster_stats_messages_publish(shard)_received, summed
// over the nodes). With sharded pub/sub a release reaches its shard (2 nodes);
// the baseline, the classic PUBLISH that releases made before, reaches all 6.
//
//	go test -run '^$' -bench ClusterReleases -benchtime 3000x
func BenchmarkClusterReleases(b *testing.B) {
	cl := redistest.StartCluster(b, 3, 1)
	rdb := cl.Client(b)
	c := newClient(b, rdb)
	ctx := context.Background()
	var names []string // 4 per shard: clusterNames gives 2 per shard for each prefix
	for _, prefix := range []string{redistest.Name(b) + "a", redistest.Name(b) + "b"} {
		for _, ns := range clusterNames(b, cl, rdb, prefix) {
			names = append(names, ns...)
		}
	}
	b.Run("holdfast", func(b *testing.B) {
		var next atomic.Int64
		before := clusterBusReceived(b, cl)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := c.NewMutex(names[next.Add(1)%int64(len(names))])
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		b.ReportMetric(1+float64(clusterBusReceived(b, cl)-before)/float64(b.N), "nodes/release")
	})
	b.Run("classic-publish", func(b *testing.B) {
		before := clusterBusReceived(b, cl)
		for i := range b.N {
			require.NoError(b, rdb.Publish(ctx, lua.ChannelName(names[i%len(names)]), lua.UnlockMessage).Err())
		}
		b.ReportMetric(1+float64(clusterBusReceived(b, cl)-before)/float64(b.N), "nodes/release")
	})
}

// clusterBusReceived sums, over the nodes, the pub/sub messages the cluster bus
// delivered to them (classic and sharded).
func clusterBusReceived(tb testing.TB, cl *redistest.Cluster) int64 {
	tb.Helper()
	var total int64
	for _, n := range cl.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		info, err := c.ClusterInfo(context.Background()).Result()
		_ = c.Close()
		require.NoError(tb, err)
		for _, line := range strings.Split(info, "\r\n") {
			for _, key := range []string{"cluster_stats_messages_publish_received:", "cluster_stats_messages_publishshard_received:"} {
				if v, ok := strings.CutPrefix(line, key); ok {
					x, err := strconv.ParseInt(v, 10, 64)
					require.NoError(tb, err)
					total += x
				}
			}
		}
	}
	return total
}
