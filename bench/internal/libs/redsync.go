package libs

import (
	"context"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

func init() {
	register(Library{
		Name:   "redsync",
		Module: "github.com/go-redsync/redsync/v4",
		Settings: "redsync.New(goredis.NewPool(client)), NewMutex defaults: expiry 8 s, 32 tries, " +
			"retry delay uniform 50–250 ms, per-try timeout 0.4 s; LockContext/UnlockContext; " +
			"a new Mutex per Lock call. " + GoRedisSettings,
		Client: GoRedis,
		Open: func(addr string) (Instance, error) {
			b := newGoRedisBase(addr)
			return &redsyncInstance{goRedisBase: b, rs: redsync.New(goredis.NewPool(b.rdb))}, nil
		},
	})
}

type redsyncInstance struct {
	goRedisBase
	rs *redsync.Redsync
}

func (i *redsyncInstance) NewLocker(name string) Locker {
	return lockFunc(func(ctx context.Context) (func(context.Context) error, error) {
		m := i.rs.NewMutex(name)
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := m.UnlockContext(ctx)
			return err
		}, nil
	})
}

// lockFunc adapts a function to Locker.
type lockFunc func(ctx context.Context) (func(context.Context) error, error)

func (f lockFunc) Lock(ctx context.Context) (func(context.Context) error, error) { return f(ctx) }
