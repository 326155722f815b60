package libs

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

func init() {
	register(Library{
		Name:   "rueidislock",
		Module: "github.com/redis/rueidis",
		Settings: "rueidislock.NewLocker with its README's single-Redis settings: KeyMajority 1, NoLoopTracking true; " +
			"defaults otherwise (KeyValidity 5 s, ExtendInterval 2.5 s, TryNextAfter 20 ms, client-side caching on: " +
			"waiters retry on an invalidation push); WithContext / cancel. Round trips counted by a wrapper " +
			"around rueidis.Client (ClientBuilder) that counts Do and DoMulti calls.",
		Client: Rueidis,
		Open: func(addr string) (Instance, error) {
			l, cnt, err := NewRueidisLocker(addr)
			if err != nil {
				return nil, err
			}
			return &rueidislockInstance{l: l, n: cnt}, nil
		},
	})
}

// NewRueidisLocker opens a rueidislock.Locker on the server at addr with its
// README's single-Redis settings (KeyMajority 1, NoLoopTracking), whose
// client counts its round trips (CountingRueidis) in the counter returned.
func NewRueidisLocker(addr string) (rueidislock.Locker, *atomic.Int64, error) {
	cnt := &atomic.Int64{}
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return &CountingRueidis{Client: c, N: cnt}, nil
		},
	})
	return l, cnt, err
}

type rueidislockInstance struct {
	l rueidislock.Locker
	n *atomic.Int64
}

func (i *rueidislockInstance) NewLocker(name string) Locker {
	return lockFunc(func(ctx context.Context) (func(context.Context) error, error) {
		_, cancel, err := i.l.WithContext(ctx, name)
		if err != nil {
			return nil, err
		}
		// cancel deletes the key and returns once the deletion is done.
		return func(context.Context) error { cancel(); return nil }, nil
	})
}

func (i *rueidislockInstance) Ping(ctx context.Context) error {
	c := i.l.Client()
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

func (i *rueidislockInstance) RoundTrips() int64 { return i.n.Load() }

func (i *rueidislockInstance) Close() error { i.l.Close(); return nil }

// CountingRueidis wraps a rueidis.Client and counts the commands (Do,
// DoCache, DoStream) and pipelines (DoMulti, DoMultiCache, DoMultiStream)
// sent through it.
type CountingRueidis struct {
	rueidis.Client
	// N is the count.
	N *atomic.Int64
}

// Do counts one round trip.
func (c *CountingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti counts one round trip.
func (c *CountingRueidis) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// DoCache counts one round trip (also when served from the local cache).
func (c *CountingRueidis) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}

// DoMultiCache counts one round trip.
func (c *CountingRueidis) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.DoMultiCache(ctx, multi...)
}

// DoStream counts one round trip.
func (c *CountingRueidis) DoStream(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResultStream {
	c.N.Add(1)
	return c.Client.DoStream(ctx, cmd)
}

// DoMultiStream counts one round trip.
func (c *CountingRueidis) DoMultiStream(ctx context.Context, cmds ...rueidis.Completed) rueidis.MultiRedisResultStream {
	c.N.Add(1)
	return c.Client.DoMultiStream(ctx, cmds...)
}

// NewRueidisPinger returns a plain rueidis client configured like
// rueidislock's (PipelineMultiplex -1), for the PING yardstick.
func NewRueidisPinger(addr string) (ping func(context.Context) error, closeFn func(), err error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, PipelineMultiplex: -1})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) error { return c.Do(ctx, c.B().Ping().Build()).Error() }, c.Close, nil
}
