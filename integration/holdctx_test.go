package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// ctxHandle is a hold of one kind as the Context tests see it.
type ctxHandle struct {
	context func(context.Context) (context.Context, context.CancelFunc)
	err     func() error
	release func(context.Context) error
	key     string // the key whose DEL from outside loses the hold
	lost    error  // what a loss matches
	ended   error  // what a release matches
}

// ctxKinds take a hold of each kind whose handle has a Context.
var ctxKinds = []struct {
	kind string
	take func(t *testing.T, c *rlock.Client, name string) ctxHandle
}{
	{"Lease", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := c.NewMutex(name).Lock(context.Background())
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Unlock, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
	{"MultiLease", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := rlock.NewMultiLock(c.NewMutex(name), c.NewMutex(name+":2")).Lock(context.Background())
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Unlock, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
	{"Permits", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		s := c.NewExpirableSemaphore(name)
		require.NoError(t, s.SetPermits(context.Background(), 2))
		p, err := s.Acquire(context.Background(), 1)
		require.NoError(t, err)
		return ctxHandle{p.Context, p.Err, p.Release, lua.PermitTimeoutsName(name), rlock.ErrPermitLost, rlock.ErrReleased}
	}},
	{"Leadership", func(t *testing.T, c *rlock.Client, name string) ctxHandle {
		l, err := c.NewElection(name).Campaign(context.Background(), "me")
		require.NoError(t, err)
		return ctxHandle{l.Context, l.Err, l.Resign, name, rlock.ErrLockLost, rlock.ErrUnlocked}
	}},
}

// TestHoldContext: each handle's Context is cancelled when the hold ends, by
// its release, by its loss (its key deleted from outside: tracking tells the
// holder within trackBound, long before a renewal) or by Close, with a cause
// matching the reason, as the handle's Err does.
func TestHoldContext(t *testing.T) {
	ends := []struct {
		how  string
		end  func(t *testing.T, c *rlock.Client, rdb *redis.Client, h ctxHandle)
		want func(h ctxHandle) error
	}{
		{"released", func(t *testing.T, _ *rlock.Client, _ *redis.Client, h ctxHandle) {
			require.NoError(t, h.release(context.Background()))
		}, func(h ctxHandle) error { return h.ended }},
		{"lost", func(t *testing.T, _ *rlock.Client, rdb *redis.Client, h ctxHandle) {
			require.NoError(t, rdb.Del(context.Background(), h.key).Err())
		}, func(h ctxHandle) error { return h.lost }},
		{"closed", func(t *testing.T, c *rlock.Client, _ *redis.Client, _ ctxHandle) {
			require.NoError(t, c.Close())
		}, func(ctxHandle) error { return rlock.ErrClosed }},
	}
	for _, k := range ctxKinds {
		for _, e := range ends {
			t.Run(k.kind+"/"+e.how, func(t *testing.T) {
				rdb, c, name := setup(t)
				h := k.take(t, c, name)
				type key struct{}
				ctx, cancel := h.context(context.WithValue(context.Background(), key{}, "request"))
				defer cancel()
				require.Equal(t, "request", ctx.Value(key{}))
				if e.how == "lost" {
					settle(t, c, rdb) // the client tracks the hold's key
				}
				require.NoError(t, ctx.Err(), "held")

				since := time.Now()
				e.end(t, c, rdb, h)
				select {
				case <-ctx.Done():
				case <-time.After(trackBound):
					t.Fatalf("ctx not cancelled %v after the hold ended (Err %v)", trackBound, h.err())
				}
				t.Logf("cancelled after %v: %v", time.Since(since).Round(time.Microsecond), context.Cause(ctx))
				want := e.want(h)
				require.ErrorIs(t, context.Cause(ctx), want)
				require.ErrorIs(t, h.err(), want)
				require.ErrorIs(t, ctx.Err(), context.Canceled)
			})
		}
	}
}
