// Package integration holds holdfast's tests against real Redis servers, started
// by package redistest (or the server at REDIS_ADDR).
package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newClient returns an rlock.Client on rdb, closed at the end of the test.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup returns a client of the shared server, an rlock.Client on it and a
// unique lock name.
func setup(t testing.TB, opts ...rlock.ClientOption) (*redis.Client, *rlock.Client, string) {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	return rdb, newClient(t, rdb, opts...), redistest.Name(t)
}

// setupHeld is setup with the Mutex name held by the rlock.Client (a watchdog
// lease), and its lease.
func setupHeld(t testing.TB, opts ...rlock.ClientOption) (*redis.Client, *rlock.Client, string, *rlock.Lease) {
	t.Helper()
	rdb, c, name := setup(t, opts...)
	lease, err := c.NewMutex(name).Lock(testCtx(t, 30*time.Second))
	require.NoError(t, err)
	return rdb, c, name, lease
}

// testCtx returns a context cancelled at the end of the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// field returns the Redis field of ctx's owner, found through the hash.
func holders(t testing.TB, rdb redis.Cmdable, name string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), name).Result()
	require.NoError(t, err)
	return m
}
