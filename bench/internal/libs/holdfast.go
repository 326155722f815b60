//go:build !noholdfast

package libs

import (
	"context"

	"github.com/holdfast-go/holdfast/rlock"
)

func init() {
	register(Library{
		Name:   Holdfast,
		Module: "github.com/holdfast-go/holdfast",
		Settings: "rlock.New(client) once per process (one shared pub/sub subscription), Client.NewMutex(name), " +
			"Mutex.Lock(ctx) with defaults (watchdog lease 30 s), Lease.Unlock. " + GoRedisSettings,
		Client: GoRedis,
		Open: func(addr string) (Instance, error) {
			b := newGoRedisBase(addr)
			c, err := rlock.New(b.rdb)
			if err != nil {
				_ = b.Close()
				return nil, err
			}
			return &holdfastInstance{goRedisBase: b, c: c}, nil
		},
	})
}

type holdfastInstance struct {
	goRedisBase
	c *rlock.Client
}

func (i *holdfastInstance) NewLocker(name string) Locker {
	m := i.c.NewMutex(name)
	return lockFunc(func(ctx context.Context) (func(context.Context) error, error) {
		lease, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return lease.Unlock, nil
	})
}

func (i *holdfastInstance) Close() error {
	err := i.c.Close()
	if cerr := i.goRedisBase.Close(); err == nil {
		err = cerr
	}
	return err
}
