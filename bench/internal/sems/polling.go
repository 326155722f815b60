package sems

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/redis/go-redis/v9"
)

// PollName is the peer's name in tables and flags.
const PollName = "poll-10ms"

// PollInterval is the peer's mean time between two attempts of a waiter.
const PollInterval = 10 * time.Millisecond

// The peer is the Redis semaphore Go projects write by hand. redsync,
// bsm/redislock and rueidislock have no semaphore, and the Go modules found
// that offer one (amitaifrey/redisemaphore: a sorted set plus a mutex around
// each operation; bluele/gosem, on gopkg.in/redis.v3; GettEngineering's
// redis-semaphore-go, untouched since 2019) poll too, with more round trips
// per attempt, and are imported by no one as their package pages say; the
// stronger peer is the plain one: a counter of free permits, taken by a
// check-and-decrement script and given back by INCRBY, with waiters that
// retry on a timer. It has the data model of Redisson's RSemaphore (and of
// holdfast's Semaphore): one string key holding the free permits, no holder
// identities, no lease. Waiters never hear of a release: they poll, every
// PollInterval ± 50 % (uniform jitter, so that waiters spread out), and
// whoever polls first after a release wins (no queue, no fairness).
//
// acquireScript: KEYS[1] the semaphore key; ARGV[1] the permits to take.
// Returns 1 when taken, 0 when fewer are free (a missing key is 0 free).
var acquireScript = redis.NewScript(`
local free = tonumber(redis.call('get', KEYS[1]) or '0')
if free >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0
`)

func init() {
	register(Library{
		Name:   PollName,
		Module: "github.com/redis/go-redis/v9",
		Settings: "hand-rolled polling semaphore in bench/internal/sems/polling.go (the common Go pattern): " +
			"one string key of free permits; acquire = EVALSHA of `if GET >= n then DECRBY n` (redis.Script, EVAL fall-back), " +
			"retried after a uniform random 5–15 ms (10 ms ± 50 %) until it succeeds or ctx ends; release = INCRBY n. " +
			"No pub/sub, no queue, no lease. " + libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) { return &pollInstance{base: newBase(addr)}, nil },
	})
}

type pollInstance struct{ base }

func (i *pollInstance) Init(ctx context.Context, name string, permits int64) error {
	return i.rdb.Set(ctx, name, permits, 0).Err()
}

func (i *pollInstance) Available(ctx context.Context, name string) (int64, error) {
	return i.rdb.Get(ctx, name).Int64()
}

func (i *pollInstance) Close() error { return i.rdb.Close() }

func (i *pollInstance) NewSem(name string) Sem {
	release := func(ctx context.Context) error { return i.rdb.IncrBy(ctx, name, 1).Err() }
	try := func(ctx context.Context) (bool, error) {
		n, err := acquireScript.Run(ctx, i.rdb, []string{name}, 1).Int()
		return n == 1, err
	}
	return trySem{
		acquire: func(ctx context.Context) (func(context.Context) error, error) {
			for {
				ok, err := try(ctx)
				if err != nil {
					return nil, err
				}
				if ok {
					return release, nil
				}
				d := PollInterval/2 + rand.N(PollInterval)
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-t.C:
				}
			}
		},
		try: func(ctx context.Context) (func(context.Context) error, error) {
			ok, err := try(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errNoPermit
			}
			return release, nil
		},
	}
}
