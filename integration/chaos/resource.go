package chaos

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Resource is the shared resource of the critical sections, on a Redis
// server of its own that no fault touches:
//   - an unfenced counter per object name, incremented by GET then SET (two
//     round trips, so two holders inside at once lose increments);
//   - a fenced register per FencedMutex name that keeps the highest token it
//     saw and refuses a write whose token is lower (a holder writes several
//     times with one token, so equal tokens pass). Refusals are counted.
type Resource struct{ rdb *redis.Client }

// counterKey and fenceKey are the resource's keys for an object.
func counterKey(name string) string { return "res:" + name }
func fenceKey(name string) string   { return "fence:" + name }

// fenceScript: KEYS[1] the register, ARGV[1] the token. Returns 1 (written)
// or 0 (refused: a higher token was seen).
var fenceScript = redis.NewScript(`
local hi = tonumber(redis.call('HGET', KEYS[1], 'hi') or '0')
local tok = tonumber(ARGV[1])
if tok < hi then
  redis.call('HINCRBY', KEYS[1], 'stale', 1)
  return 0
end
redis.call('HSET', KEYS[1], 'hi', tok)
return 1`)

// increment adds one to name's counter, not atomically. It returns whether
// the increment was confirmed.
func (r Resource) increment(ctx context.Context, name string) bool {
	v, err := r.rdb.Get(ctx, counterKey(name)).Int64()
	if err != nil && err != redis.Nil {
		return false
	}
	return r.rdb.Set(ctx, counterKey(name), v+1, 0).Err() == nil
}

// fenced writes token to name's register: refused is true when a higher
// token was seen before.
func (r Resource) fenced(ctx context.Context, name string, token int64) (refused bool, err error) {
	n, err := fenceScript.Run(ctx, r.rdb, []string{fenceKey(name)}, token).Int()
	return err == nil && n == 0, err
}

// Totals returns every counter under prefix, by object name.
func (r Resource) Totals(ctx context.Context, prefix string) (map[string]int64, error) {
	out := map[string]int64{}
	iter := r.rdb.Scan(ctx, 0, counterKey(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := r.rdb.Get(ctx, iter.Val()).Int64()
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(iter.Val(), "res:")] = n
	}
	return out, iter.Err()
}
