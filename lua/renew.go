package lua

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed renew.lua
var renewSrc string

var renewScript = redis.NewScript(renewSrc)

// Renewal is one hold the watchdog renews: the owner's field in the lock key,
// and for a read hold of a read/write lock its timeout keys' prefix
// (Lock.ReadTimeouts; "" for the other holds).
type Renewal struct {
	Key, Field, ReadTimeouts string
}

// RenewCmd queues, as EVALSHA on a pipeline, the extension to lease of every hold
// still in Redis (renew.lua): the watchdog sends many batches in one round trip.
// All keys of one batch must share one hash slot. Read the reply with RenewResult
// after Exec; a NOSCRIPT error (see IsNoScript) means the script must be loaded
// (LoadRenew) and the batch sent again.
func RenewCmd(ctx context.Context, p redis.Pipeliner, holds []Renewal, lease time.Duration) *redis.Cmd {
	keys := make([]string, len(holds))
	args := make([]any, 0, 2*len(holds)+1)
	args = append(args, millis(lease))
	for i, h := range holds {
		keys[i] = h.Key
		args = append(args, h.Field, h.ReadTimeouts)
	}
	return renewScript.EvalSha(ctx, p, keys, args...)
}

// LoadRenew loads the renewal script into the server's script cache, after a
// pipeline of RenewCmd was answered NOSCRIPT.
func LoadRenew(ctx context.Context, c redis.Scripter) error {
	return renewScript.Load(ctx, c).Err()
}

// RenewResult reads the reply of a renewal: per key, whether it was extended.
func RenewResult(cmd *redis.Cmd) ([]bool, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x == 1
	}
	return out, nil
}
