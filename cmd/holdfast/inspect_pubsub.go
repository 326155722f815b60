package main

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// countSubscribers fills in the subscriber counts of st's channels: its own, its
// latch channel and its queued waiters' channels.
func countSubscribers(ctx context.Context, rdb redis.UniversalClient, st *objectStatus) error {
	var channels []string
	for _, ch := range []string{st.Channel, st.LatchChannel} {
		if ch != "" {
			channels = append(channels, ch)
		}
	}
	for _, w := range st.Queue {
		channels = append(channels, w.Channel)
	}
	if len(channels) == 0 {
		return nil
	}
	n, err := numSub(ctx, rdb, st.Name, channels)
	if err != nil {
		return err
	}
	st.Subscribers, st.LatchSubscribers = n[st.Channel], n[st.LatchChannel]
	for i := range st.Queue {
		st.Queue[i].Subscribers = n[st.Queue[i].Channel]
	}
	return nil
}

// numSub returns the subscriptions to each of channels, which are key's pub/sub
// channels: classic ones (PUBSUB NUMSUB) plus sharded ones (PUBSUB SHARDNUMSUB,
// Redis 7). On a Cluster, classic subscriptions are counted on every node and
// sharded ones on the primary of key's slot.
func numSub(ctx context.Context, rdb redis.UniversalClient, key string, channels []string) (map[string]int64, error) {
	cl, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return numSubNode(ctx, rdb, channels, true)
	}
	total := make(map[string]int64, len(channels))
	var mu sync.Mutex
	add := func(m map[string]int64) {
		mu.Lock()
		defer mu.Unlock()
		for ch, n := range m {
			total[ch] += n
		}
	}
	err := cl.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		m, err := numSubNode(ctx, node, channels, false)
		add(m)
		return err
	})
	if err != nil {
		return nil, err
	}
	owner, err := cl.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	m, err := shardNumSub(ctx, owner, channels)
	add(m)
	return total, err
}

// numSubNode asks one server (or a standalone's client) the classic
// subscriptions to channels, and with sharded its sharded ones too, in one round
// trip. A server older than Redis 7, which has no sharded pub/sub, counts none.
func numSubNode(ctx context.Context, c redis.Cmdable, channels []string, sharded bool) (map[string]int64, error) {
	var classic, shard *redis.MapStringIntCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		classic = p.PubSubNumSub(ctx, channels...)
		if sharded {
			shard = p.PubSubShardNumSub(ctx, channels...)
		}
		return nil
	})
	if err := classic.Err(); err != nil {
		return nil, err
	}
	m := classic.Val()
	if shard != nil && shard.Err() == nil {
		for ch, n := range shard.Val() {
			m[ch] += n
		}
	}
	return m, nil
}

// shardNumSub asks one server the sharded subscriptions to channels; a server
// without sharded pub/sub (Redis 6.2 answers "ERR Unknown subcommand … 'shardnumsub'")
// counts none. (redis.HasErrorPrefix cannot tell that reply: it drops "ERR " first.)
func shardNumSub(ctx context.Context, c redis.Cmdable, channels []string) (map[string]int64, error) {
	m, err := c.PubSubShardNumSub(ctx, channels...).Result()
	var reply redis.Error
	if errors.As(err, &reply) && !errors.Is(err, redis.Nil) {
		return map[string]int64{}, nil
	}
	return m, err
}
