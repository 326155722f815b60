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
			return openHoldfast(addr, func(b goRedisBase, c *rlock.Client) Instance {
				return &holdfastInstance{goRedisBase: b, c: c}
			})
		},
	})
}

// openHoldfast opens a go-redis client and an rlock.Client on it, and makes the
// Instance of them.
func openHoldfast(addr string, inst func(goRedisBase, *rlock.Client) Instance) (Instance, error) {
	b := newGoRedisBase(addr)
	c, err := rlock.New(b.rdb)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return inst(b, c), nil
}

// lockerOf adapts a holdfast lock: Lock, then the lease's Unlock.
func lockerOf(m rlock.Locker) Locker {
	return lockFunc(func(ctx context.Context) (func(context.Context) error, error) {
		lease, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return lease.Unlock, nil
	})
}

// closeHoldfast closes the rlock.Client, then its go-redis client.
func closeHoldfast(c *rlock.Client, b goRedisBase) error {
	err := c.Close()
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// Names of holdfast's Variants.
const (
	HoldfastTryLock   = "holdfast TryLock (free)"
	HoldfastReentrant = "holdfast reentrant"
)

type holdfastInstance struct {
	goRedisBase
	c    *rlock.Client
	held []*rlock.Lease // taken by Variants, given back by Close
}

func (i *holdfastInstance) NewLocker(name string) Locker { return lockerOf(i.c.NewMutex(name)) }

// Variants returns HoldfastTryLock, Mutex.TryLock on a free lock (for a fresh
// owner, as Lock in NewLocker) then Lease.Unlock, and HoldfastReentrant: an
// owner (rlock.WithOwner) takes a lock here and keeps it until Close; each op
// is one reentrant TryLock of that owner (one round trip, the hold count goes
// to 2) then its Lease.Unlock (one round trip, back to 1). The reentrant op
// runs with the owner's ctx (derived from ctx), not with the one it is given.
func (i *holdfastInstance) Variants(ctx context.Context, prefix string) ([]Variant, error) {
	free := i.c.NewMutex(prefix + "trylock")
	reentrant := i.c.NewMutex(prefix + "reentrant")
	owner := rlock.WithOwner(ctx)
	held, err := reentrant.Lock(owner)
	if err != nil {
		return nil, err
	}
	i.held = append(i.held, held)
	return []Variant{
		{Name: HoldfastTryLock, Op: func(ctx context.Context) error { return tryCycle(ctx, free) }},
		{Name: HoldfastReentrant, Op: func(context.Context) error { return tryCycle(owner, reentrant) }},
	}, nil
}

// tryCycle acquires m with one TryLock and gives the lease back.
func tryCycle(ctx context.Context, m *rlock.Mutex) error {
	l, err := m.TryLock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}

func (i *holdfastInstance) Close() error {
	for _, l := range i.held {
		_ = l.Unlock(context.Background())
	}
	return closeHoldfast(i.c, i.goRedisBase)
}

func init() {
	register(Library{
		Name:   HoldfastSpin,
		Module: "github.com/holdfast-go/holdfast",
		Settings: "as holdfast, with Client.NewSpinMutex(name): no pub/sub, waiters retry after Redisson's default " +
			"back-off (1 ms doubling to 128 ms, plus up to n ms of jitter). " + GoRedisSettings,
		Client: GoRedis,
		Open:   openHoldfastKind(func(c *rlock.Client, name string) rlock.Locker { return c.NewSpinMutex(name) }),
	})
	register(Library{
		Name:   HoldfastFair,
		Module: "github.com/holdfast-go/holdfast",
		Settings: "as holdfast, with Client.NewFairMutex(name): waiters queue in Redis (redisson_lock_queue:{name}) " +
			"and each is woken on its own channel, in arrival order across processes; default fair wait timeout (5 min). " +
			GoRedisSettings,
		Client: GoRedis,
		Open:   openHoldfastKind(func(c *rlock.Client, name string) rlock.Locker { return c.NewFairMutex(name) }),
	})
}

// openHoldfastKind returns the Open of one of holdfast's other lock kinds,
// whose lock called name newLock makes.
func openHoldfastKind(newLock func(c *rlock.Client, name string) rlock.Locker) func(addr string) (Instance, error) {
	return func(addr string) (Instance, error) {
		return openHoldfast(addr, func(b goRedisBase, c *rlock.Client) Instance {
			return &holdfastKindInstance{goRedisBase: b, c: c, newLock: newLock}
		})
	}
}

type holdfastKindInstance struct {
	goRedisBase
	c       *rlock.Client
	newLock func(c *rlock.Client, name string) rlock.Locker
}

func (i *holdfastKindInstance) NewLocker(name string) Locker { return lockerOf(i.newLock(i.c, name)) }

func (i *holdfastKindInstance) Close() error { return closeHoldfast(i.c, i.goRedisBase) }

// NewReadLocker returns a Locker on the read side of the RWMutex called name
// (Client.NewRWMutex(name).ReadLock()): every Lock call is a fresh owner, so
// the Lockers of one name hold it together.
func (i *holdfastInstance) NewReadLocker(name string) Locker {
	return lockerOf(i.c.NewRWMutex(name).ReadLock())
}
