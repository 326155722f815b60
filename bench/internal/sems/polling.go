package sems

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
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

// PollRecordedName is the peer with holdfast's retry safety.
const PollRecordedName = "poll-10ms-recorded"

// recordTTL is how long a recorded call's record lives: go-redis's retry
// window at its defaults (4 tries × (3 s read timeout + 512 ms back-off) +
// 1 s), as holdfast computes it for the same client.
const recordTTL = 15048 // ms

// The recorded peer is the same polling semaphore made safe against
// go-redis's retries as holdfast's semaphores are: go-redis resends a script
// whose reply was lost (MaxRetries 3), and a second execution of an acquire
// or a release that had run takes or gives the permit twice. Each call
// carries a request key of its own ({name}:req:<32 hex>, in the
// semaphore's slot); the script answers what the key records if it is
// there, and records its answer (SET PX) when it changed the count. It is
// the plain peer plus the record, the like-for-like baseline of holdfast's
// round trips.
var (
	acquireRecordedScript = redis.NewScript(`
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local free = tonumber(redis.call('get', KEYS[1]) or '0')
if free >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], 1, 'px', ARGV[2])
  return 1
end
return 0
`)
	releaseRecordedScript = redis.NewScript(`
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
redis.call('incrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
return 1
`)
)

func init() {
	register(Library{
		Name:   PollName,
		Module: "github.com/redis/go-redis/v9",
		Settings: "hand-rolled polling semaphore in bench/internal/sems/polling.go (the common Go pattern): " +
			"one string key of free permits; acquire = EVALSHA of `if GET >= n then DECRBY n` (redis.Script, EVAL fall-back), " +
			"retried after a uniform random 5–15 ms (10 ms ± 50 %) until it succeeds or ctx ends; release = INCRBY n. " +
			"No pub/sub, no queue, no lease; a call go-redis resends after a lost reply takes or gives its permit twice. " + libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) { return &pollInstance{base: newBase(addr)}, nil },
	})
	register(Library{
		Name:   PollRecordedName,
		Module: "github.com/redis/go-redis/v9",
		Settings: "poll-10ms made safe against go-redis's retries as holdfast's semaphores are: each acquire attempt and release " +
			"carries a request key of its own ({name}:req:<32 hex>); its script (EVALSHA) answers the key's record if there is one, " +
			"else acquires (`GET`, `DECRBY`) or releases (`INCRBY`) and records its answer with `SET` PX 15048 ms " +
			"(go-redis's retry window at its defaults). Same polling as poll-10ms. " + libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) { return &pollInstance{base: newBase(addr), recorded: true}, nil },
	})
}

type pollInstance struct {
	base
	recorded bool // poll-10ms-recorded
}

func (i *pollInstance) Init(ctx context.Context, name string, permits int64) error {
	return i.rdb.Set(ctx, name, permits, 0).Err()
}

func (i *pollInstance) Available(ctx context.Context, name string) (int64, error) {
	return i.rdb.Get(ctx, name).Int64()
}

func (i *pollInstance) Close() error { return i.rdb.Close() }

// calls returns the peer's attempt and release on the semaphore name.
func (i *pollInstance) calls(name string) (try func(context.Context) (bool, error), release func(context.Context) error) {
	if !i.recorded {
		return func(ctx context.Context) (bool, error) {
				n, err := acquireScript.Run(ctx, i.rdb, []string{name}, 1).Int()
				return n == 1, err
			}, func(ctx context.Context) error {
				return i.rdb.IncrBy(ctx, name, 1).Err()
			}
	}
	return func(ctx context.Context) (bool, error) {
			n, err := acquireRecordedScript.Run(ctx, i.rdb, []string{name, requestKey(name)}, 1, recordTTL).Int()
			return n == 1, err
		}, func(ctx context.Context) error {
			return releaseRecordedScript.Run(ctx, i.rdb, []string{name, requestKey(name)}, 1, recordTTL).Err()
		}
}

// requestKey returns a new request key in the slot of the semaphore name.
func requestKey(name string) string {
	var id [16]byte
	_, _ = crand.Read(id[:])
	return "{" + name + "}:req:" + hex.EncodeToString(id[:])
}

func (i *pollInstance) NewSem(name string) Sem {
	try, release := i.calls(name)
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
