package holdfastasynq

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests and then, when they passed, checks that no
// goroutine leaked (redistest.Main: goleak.Find), after stopping the shared
// Redis server.
// go-redis' own log (failed dials of the procs that are cut off) is dropped.
func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	redistest.Main(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// proc stands for one process: a go-redis client of its own and an rlock
// Client on it with a 2 s watchdog timeout. Its connections go through a
// proxy of its own, so that cut cuts it off from Redis as a process that died
// or was partitioned away: no renewal, no release, nothing it enqueues
// (closing the go-redis client would not do: rlock renews on connections of
// its own).
type proc struct {
	rdb   *redis.Client
	c     *rlock.Client
	proxy *redistest.Proxy
}

// cut black-holes the proc's proxy both ways: its commands never reach Redis
// and time out (its connections stay open, so go-redis does not redial).
func (p *proc) cut() {
	p.proxy.SetDropRequests(true)
	p.proxy.SetDropAll(true)
}

const testWatchdog = 2 * time.Second

func newProc(t testing.TB, srv *redistest.Server, opts ...rlock.ClientOption) *proc {
	t.Helper()
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.Addr, o.Dialer = proxy.Addr, nil
		o.MaxRetries = -1 // a cut-off proc fails after one timeout rather than after retries
		o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	})
	opts = append([]rlock.ClientOption{rlock.WithWatchdogTimeout(testWatchdog), rlock.WithLogger(quietSlog)}, opts...)
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &proc{rdb: rdb, c: c, proxy: proxy}
}

var quietSlog = slog.New(slog.DiscardHandler)

// quiet is an asynq.Logger that drops everything.
type quiet struct{}

func (quiet) Debug(...any) {}
func (quiet) Info(...any)  {}
func (quiet) Warn(...any)  {}
func (quiet) Error(...any) {}
func (quiet) Fatal(...any) {}

// queueName is a queue of the test's own.
func queueName(t testing.TB) string {
	return strings.ReplaceAll(redistest.Name(t), ":", "-")
}

// testCtx returns a context cancelled at the end of the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startServer starts an asynq server of p on queue q with handler h, shut
// down at the end of the test.
func startServer(t testing.TB, p *proc, q string, concurrency int, h asynq.Handler) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(p.rdb, asynq.Config{
		Concurrency:              concurrency,
		Queues:                   map[string]int{q: 1},
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		IsFailure:                IsFailure,
		RetryDelayFunc:           BusyRetryDelay(50*time.Millisecond, nil),
		Logger:                   quiet{},
		LogLevel:                 asynq.FatalLevel,
	})
	require.NoError(t, srv.Start(h))
	t.Cleanup(srv.Shutdown)
}
