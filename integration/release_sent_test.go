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

// handle is what the tests of a release in flight need of any holder's
// handle: a Lease, a MultiLease, a Permits, a Leadership.
type handle interface {
	Err() error
	Done() <-chan struct{}
}

// releaseKind is one kind of hold: take it in one client (first), take it
// in another (next, which waits for the first), and give a handle back.
type releaseKind struct {
	name    string
	set     func(ctx context.Context, c *rlock.Client, name string) error
	first   func(ctx context.Context, c *rlock.Client, name string) (handle, error)
	next    func(ctx context.Context, c *rlock.Client, name string) (handle, error)
	release func(ctx context.Context, h handle) error
	spins   bool // the next holder polls (SpinMutex): no subscription shows it waits
}

// lockerKind is a releaseKind of a lock whose first and next holders take it
// the same way (or first by one side, next by the other).
func lockerKind(name string, first, next func(c *rlock.Client, name string) rlock.Locker) releaseKind {
	take := func(f func(c *rlock.Client, name string) rlock.Locker) func(context.Context, *rlock.Client, string) (handle, error) {
		return func(ctx context.Context, c *rlock.Client, name string) (handle, error) { return f(c, name).Lock(ctx) }
	}
	return releaseKind{name: name, first: take(first), next: take(next),
		release: func(ctx context.Context, h handle) error { return h.(*rlock.Lease).Unlock(ctx) }}
}

// spinning marks k's next holder as one that polls.
func spinning(k releaseKind) releaseKind {
	k.spins = true
	return k
}

func releaseKinds() []releaseKind {
	mutex := func(c *rlock.Client, n string) rlock.Locker { return c.NewMutex(n) }
	read := func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).ReadLock() }
	write := func(c *rlock.Client, n string) rlock.Locker { return c.NewRWMutex(n).WriteLock() }
	permits := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return c.NewExpirableSemaphore(n).Acquire(ctx, 1)
	}
	leader := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return c.NewElection(n).Campaign(ctx, "v")
	}
	multi := func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
		return rlock.NewMultiLock(c.NewMutex(n), c.NewMutex(n+":2")).Lock(ctx)
	}
	return []releaseKind{
		lockerKind("Mutex", mutex, mutex),
		lockerKind("FairMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewFairMutex(n) }),
		lockerKind("NonReentrantMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewNonReentrantMutex(n) }),
		lockerKind("FencedMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewFencedMutex(n) }),
		spinning(lockerKind("SpinMutex", func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) },
			func(c *rlock.Client, n string) rlock.Locker { return c.NewSpinMutex(n) })),
		lockerKind("RWMutex/write", write, write),
		lockerKind("RWMutex/read", read, write),
		{name: "ExpirableSemaphore", first: permits, next: permits,
			set: func(ctx context.Context, c *rlock.Client, n string) error {
				_, err := c.NewExpirableSemaphore(n).TrySetPermits(ctx, 1)
				return err
			},
			release: func(ctx context.Context, h handle) error { return h.(*rlock.Permits).Release(ctx) }},
		{name: "Election", first: leader, next: leader,
			release: func(ctx context.Context, h handle) error { return h.(*rlock.Leadership).Resign(ctx) }},
		{name: "MultiLock", first: multi, next: func(ctx context.Context, c *rlock.Client, n string) (handle, error) {
			return c.NewMutex(n).Lock(ctx)
		}, release: func(ctx context.Context, h handle) error { return h.(*rlock.MultiLease).Unlock(ctx) }},
	}
}

// TestHandleEndsWhenItsReleaseIsSent: a holder's handle stops saying valid
// before its release leaves, not when the release's reply comes back. The
// holder's client talks to Redis through a proxy that holds every reply back
// 400 ms from the moment it gives back; a client of another process (here
// another Client, on a direct connection) waits for the object and takes it
// as soon as the release runs. While the holder's release is still in
// flight, after the next holder's grant was observed, the old handle must
// say ended (Err not nil, Done closed): else two handles said valid at one
// moment. For every kind with a handle.
func TestHandleEndsWhenItsReleaseIsSent(t *testing.T) {
	srv := redistest.Shared(t)
	for _, k := range releaseKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			proxy := redistest.NewProxy(t, srv.Addr)
			a := newClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: 5 * time.Second}))
			b := newClient(t, srv.Client(t))
			name := redistest.Name(t)
			if k.set != nil {
				require.NoError(t, k.set(ctx, b, name))
			}
			old, err := k.first(ctx, a, name)
			require.NoError(t, err)

			granted := make(chan handle, 1)
			go func() {
				h, err := k.next(ctx, b, name)
				if err == nil {
					granted <- h
				}
			}()
			if !k.spins {
				requireWaiting(t, srv, name)
			}

			proxy.DelayNextReplies(1000, 400*time.Millisecond)
			released := make(chan error, 1)
			go func() { released <- k.release(ctx, old) }()
			var next handle
			select {
			case next = <-granted:
			case <-time.After(10 * time.Second):
				t.Fatal("the next holder was not granted within 10 s")
			}
			select {
			case err := <-released:
				t.Fatalf("the release's reply came before the next grant was checked (%v): the proxy did not hold it", err)
			default:
			}
			require.NoError(t, next.Err(), "the next holder's handle")
			require.Error(t, old.Err(), "the old handle said valid while the next holder held: two valid handles")
			select {
			case <-old.Done():
			default:
				t.Fatal("the old handle's Done was open while the next holder held")
			}
			proxy.DelayNextReplies(0, 0)
			require.NoError(t, <-released)
			require.Error(t, old.Err())
		})
	}
}

// requireWaiting waits until a subscriber listens for the release of name
// (a waiter of another client has queued), or fails the test after 10 s.
func requireWaiting(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	rdb := srv.Client(t)
	require.Eventually(t, func() bool {
		chans, err := rdb.PubSubChannels(context.Background(), "*"+name+"*").Result()
		return err == nil && len(chans) > 0
	}, 10*time.Second, 5*time.Millisecond, "no waiter subscribed for %s", name)
}
