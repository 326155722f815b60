package integration

import (
	"context"
	"testing"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/redis/go-redis/v9"
)

// clusterPubSub is how releases travel on a cluster: by sharded pub/sub
// (SPUBLISH, SSUBSCRIBE) on Redis 7.0 and later and on every Valkey, by classic
// pub/sub on Redis 6.2, which has no sharded pub/sub. holdfast, as Redisson 3.23
// and later, chooses by the server's version; the cluster tests check whichever
// applies, and on 6.2 that the classic fallback wakes waiters as promptly.
type clusterPubSub struct {
	cl      *redistest.Cluster
	sharded bool
}

// clusterPubSubOf returns the pub/sub of the cluster cl.
func clusterPubSubOf(t testing.TB, cl *redistest.Cluster) clusterPubSub {
	return clusterPubSub{cl: cl, sharded: cl.Primaries[0].Version(t).AtLeast(7, 0)}
}

// String names the pub/sub, for messages.
func (p clusterPubSub) String() string {
	if p.sharded {
		return "sharded pub/sub"
	}
	return "classic pub/sub (no sharded pub/sub before Redis 7.0)"
}

// listeners returns how many subscriptions to channel the nodes have of the
// kind releases travel by, and how many of the other kind (which should be
// none). Safe in a require.Eventually condition.
func (p clusterPubSub) listeners(ctx context.Context, channel string) (n, other int64) {
	classic, sharded := clusterSubscribers(ctx, p.cl, channel)
	if p.sharded {
		return sharded, classic
	}
	return classic, sharded
}

// publishCommand is the command a Redisson client publishes releases with.
func (p clusterPubSub) publishCommand() string {
	if p.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// subscribe subscribes to channel as a Redisson client does.
func (p clusterPubSub) subscribe(ctx context.Context, rdb *redis.ClusterClient, channel string) *redis.PubSub {
	if p.sharded {
		return rdb.SSubscribe(ctx, channel)
	}
	return rdb.Subscribe(ctx, channel)
}

// publish publishes payload on channel as a Redisson client does.
func (p clusterPubSub) publish(ctx context.Context, rdb *redis.ClusterClient, channel, payload string) error {
	if p.sharded {
		return rdb.SPublish(ctx, channel, payload).Err()
	}
	return rdb.Publish(ctx, channel, payload).Err()
}
