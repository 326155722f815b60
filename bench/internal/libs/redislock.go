package libs

import (
	"context"
	"time"

	"github.com/bsm/redislock"
)

// RedislockTTL is the lock TTL given to redislock's Obtain.
const RedislockTTL = 10 * time.Second

func init() {
	register(Library{
		Name:   "redislock-lin100ms",
		Module: "github.com/bsm/redislock",
		Settings: "redislock.New(client).Obtain(ctx, name, 10 s TTL, RetryStrategy: LinearBackoff(100 ms)) " +
			"(its README's retry example), retrying until the Lock ctx deadline; Lock.Release. " + GoRedisSettings,
		Client: GoRedis,
		Open: func(addr string) (Instance, error) {
			return newRedislock(addr, func() redislock.RetryStrategy { return redislock.LinearBackoff(100 * time.Millisecond) }), nil
		},
	})
	register(Library{
		Name:   "redislock-exp16-256ms",
		Module: "github.com/bsm/redislock",
		Settings: "as redislock-lin100ms but RetryStrategy: ExponentialBackoff(16 ms, 256 ms), a new strategy per Obtain " +
			"(back-off 16, 16, 16, 32, 64, 128, 256, 256 … ms). " + GoRedisSettings,
		Client: GoRedis,
		Open: func(addr string) (Instance, error) {
			return newRedislock(addr, func() redislock.RetryStrategy {
				return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
			}), nil
		},
	})
}

func newRedislock(addr string, strategy func() redislock.RetryStrategy) *redislockInstance {
	b := newGoRedisBase(addr)
	return &redislockInstance{goRedisBase: b, c: redislock.New(b.rdb), strategy: strategy}
}

type redislockInstance struct {
	goRedisBase
	c        *redislock.Client
	strategy func() redislock.RetryStrategy
}

func (i *redislockInstance) NewLocker(name string) Locker {
	return lockFunc(func(ctx context.Context) (func(context.Context) error, error) {
		l, err := i.c.Obtain(ctx, name, RedislockTTL, &redislock.Options{RetryStrategy: i.strategy()})
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	})
}
