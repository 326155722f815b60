package lua

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acks asks that a script's writes reach Replicas replicas before the call
// returns, waiting at most Timeout: WAIT, sent behind the script in the same
// round trip on the same connection (Redisson's checkLockSyncedSlaves). The zero
// Acks asks for none.
type Acks struct {
	Replicas int
	Timeout  time.Duration
}

// pipeliner is a client that can send a pipeline on one connection.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// runAcked sends the script with args and then WAIT in one pipeline, on a
// connection to the primary that owns the script's first key, and returns the
// script's reply and how many replicas acknowledged. A WAIT that fails after the
// script answered counts no acknowledgement.
func (s script) runAcked(ctx context.Context, rdb Processor, args []any, acks Acks) (any, int, error) {
	node, err := primaryOf(ctx, rdb, args[3].(string))
	if err != nil {
		return nil, 0, err
	}
	for _, eval := range []bool{false, true} {
		args[0], args[1] = "evalsha", s.sha
		if eval {
			args[0], args[1] = "eval", s.src
		}
		pipe := node.Pipeline()
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = pipe.Process(ctx, cmd)
		wait := redis.NewIntCmd(ctx, "wait", acks.Replicas, max(acks.Timeout.Milliseconds(), 1))
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx)
		if !eval && IsNoScript(cmd.Err()) {
			continue
		}
		v, err := cmd.Result()
		return v, int(wait.Val()), err
	}
	panic("unreachable")
}

// primaryOf returns the client of the primary that owns key: rdb itself, or on a
// Cluster the client of the key's shard (WAIT counts the replicas of the
// connection's node).
func primaryOf(ctx context.Context, rdb Processor, key string) (pipeliner, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	p, ok := rdb.(pipeliner)
	if !ok {
		return nil, errors.New("lua: replica acknowledgements need a client that pipelines")
	}
	return p, nil
}
