//go:build !noholdfast

package sems

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/rlock"
)

// Names of holdfast's semaphores in tables and flags.
const (
	// HoldfastSemaphore is Client.NewSemaphore (Redisson's RSemaphore).
	HoldfastSemaphore = "holdfast-semaphore"
	// HoldfastExpirable is Client.NewExpirableSemaphore with the default,
	// watchdog-renewed permit lease.
	HoldfastExpirable = "holdfast-expirable"
	// HoldfastExpirableLease is Client.NewExpirableSemaphore with a fixed
	// permit lease (FixedLease).
	HoldfastExpirableLease = "holdfast-expirable-lease"
)

// FixedLease is the permit lease of HoldfastExpirableLease: far longer than
// any hold of the benchmark, so no permit expires.
const FixedLease = 10 * time.Second

const holdfastClient = "rlock.New(client) once per process (one shared pub/sub connection, one watchdog), defaults. "

func init() {
	register(Library{
		Name:   HoldfastSemaphore,
		Module: "github.com/holdfast-go/holdfast",
		Settings: holdfastClient + "Client.NewSemaphore(name), TrySetPermits(ctx, P, 0) once; Acquire(ctx, 1) then Release(ctx, 1). " +
			libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) {
			return openHoldfast(addr, func(b base, c *rlock.Client) Instance { return &semInstance{holdfastBase{b, c}} })
		},
	})
	register(Library{
		Name:   HoldfastExpirable,
		Module: "github.com/holdfast-go/holdfast",
		Settings: holdfastClient + "Client.NewExpirableSemaphore(name), TrySetPermits(ctx, P) once; Acquire(ctx, 1) without " +
			"WithLeaseTime (watchdog-renewed permit, default watchdog timeout 30 s) then Permits.Release(ctx). " + libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) {
			return openHoldfast(addr, func(b base, c *rlock.Client) Instance { return &pesInstance{holdfastBase{b, c}, nil} })
		},
	})
	register(Library{
		Name:   HoldfastExpirableLease,
		Module: "github.com/holdfast-go/holdfast",
		Settings: holdfastClient + "as holdfast-expirable, with Acquire(ctx, 1, WithLeaseTime(10 s)): a fixed lease, no watchdog. " +
			libs.GoRedisSettings,
		Open: func(addr string) (Instance, error) {
			return openHoldfast(addr, func(b base, c *rlock.Client) Instance {
				return &pesInstance{holdfastBase{b, c}, []rlock.AcquireOption{rlock.WithLeaseTime(FixedLease)}}
			})
		},
	})
}

type holdfastBase struct {
	base
	c *rlock.Client
}

func openHoldfast(addr string, inst func(base, *rlock.Client) Instance) (Instance, error) {
	b := newBase(addr)
	c, err := rlock.New(b.rdb)
	if err != nil {
		_ = b.rdb.Close()
		return nil, err
	}
	return inst(b, c), nil
}

// Close closes the rlock.Client, then its go-redis client.
func (h holdfastBase) Close() error {
	err := h.c.Close()
	if cerr := h.rdb.Close(); err == nil {
		err = cerr
	}
	return err
}

type semInstance struct{ holdfastBase }

func (i *semInstance) Init(ctx context.Context, name string, permits int64) error {
	_, err := i.c.NewSemaphore(name).TrySetPermits(ctx, permits, 0)
	return err
}

func (i *semInstance) Available(ctx context.Context, name string) (int64, error) {
	return i.c.NewSemaphore(name).AvailablePermits(ctx)
}

func (i *semInstance) NewSem(name string) Sem {
	s := i.c.NewSemaphore(name)
	release := func(ctx context.Context) error { return s.Release(ctx, 1) }
	return trySem{
		acquire: func(ctx context.Context) (func(context.Context) error, error) {
			if err := s.Acquire(ctx, 1); err != nil {
				return nil, err
			}
			return release, nil
		},
		try: func(ctx context.Context) (func(context.Context) error, error) {
			if err := s.TryAcquire(ctx, 1); err != nil {
				return nil, err
			}
			return release, nil
		},
	}
}

type pesInstance struct {
	holdfastBase
	opts []rlock.AcquireOption
}

func (i *pesInstance) Init(ctx context.Context, name string, permits int64) error {
	_, err := i.c.NewExpirableSemaphore(name).TrySetPermits(ctx, permits)
	return err
}

func (i *pesInstance) Available(ctx context.Context, name string) (int64, error) {
	return i.c.NewExpirableSemaphore(name).AvailablePermits(ctx)
}

func (i *pesInstance) NewSem(name string) Sem {
	s := i.c.NewExpirableSemaphore(name)
	return semFunc(func(ctx context.Context) (func(context.Context) error, error) {
		p, err := s.Acquire(ctx, 1, i.opts...)
		if err != nil {
			return nil, err
		}
		return p.Release, nil
	})
}
