package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// The basic use: one Client per process, a Mutex per lock name, and a Lease per
// acquisition.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	c, err := rlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := c.NewMutex("orders:42").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// ... critical section; the watchdog keeps the lock while it runs.
}

// An owner in the context makes the lock reentrant, as a Java thread does with
// Redisson: nested calls with the same ctx re-enter instead of waiting.
func ExampleWithOwner() {
	ctx := rlock.WithOwner(context.Background())
	var c *rlock.Client // from rlock.New
	m := c.NewMutex("orders:42")

	outer, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Unlock(ctx)

	inner, err := m.TryLock(ctx) // same owner: hold count 2, no waiting
	if err != nil {
		log.Fatal(err)
	}
	defer inner.Unlock(ctx)
}

// TryLock with a wait time is Redisson's tryLock(waitTime, leaseTime): wait at
// most five seconds, then hold for at most ten.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	var c *rlock.Client // from rlock.New
	lease, err := c.NewMutex("reports").TryLock(ctx,
		rlock.WithWaitTime(5*time.Second), rlock.WithLeaseTime(10*time.Second))
	switch {
	case errors.Is(err, rlock.ErrNotAcquired):
		log.Print("busy, try later")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
}

// Code ported from Java often locks and unlocks in different functions: the owner
// in ctx lets Mutex.Unlock find the hold.
func ExampleMutex_Unlock() {
	ctx := rlock.WithOwner(context.Background())
	var c *rlock.Client // from rlock.New
	m := c.NewMutex("inventory")

	begin := func() error { _, err := m.Lock(ctx); return err }
	end := func() error { return m.Unlock(ctx) }

	if err := begin(); err != nil {
		log.Fatal(err)
	}
	if err := end(); err != nil {
		log.Fatal(err)
	}
}

// Work that must not go on without the lock watches Lease.Done.
func ExampleLease_Done() {
	ctx := context.Background()
	var c *rlock.Client // from rlock.New
	lease, err := c.NewMutex("leader").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)

	work := make(chan struct{})
	go func() { defer close(work) /* ... */ }()
	select {
	case <-work:
	case <-lease.Done():
		log.Printf("lost the lock: %v", lease.Err()) // errors.Is(err, rlock.ErrLockLost)
	}
}

// A MultiLock takes several locks all or none, here on a Redis Cluster where
// the two names live in different shards.
func ExampleMultiLock() {
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7000"}})
	defer rdb.Close()
	c, err := rlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	transfer := rlock.NewMultiLock(c.NewMutex("account:17"), c.NewMutex("account:42"))
	lease, err := transfer.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// ... move money between the two accounts.
}

// A RedLock holds a lock while a majority of independent primaries grant it:
// one Client per primary, the same name on each.
func ExampleRedLock() {
	ctx := context.Background()
	var parts []*rlock.Mutex
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		c, err := rlock.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		parts = append(parts, c.NewMutex("report:daily"))
	}
	lease, err := rlock.NewRedLock(parts...).TryLock(ctx, rlock.WithWaitTime(5*time.Second), rlock.WithLeaseTime(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// ... work until lease.ValidUntil() at the latest.
}

// With replicas, WithReplicaAcks refuses an acquisition that no replica has
// received: a failover could otherwise lose it and grant the lock twice.
func ExampleWithReplicaAcks() {
	ctx := context.Background()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "locks", SentinelAddrs: []string{"localhost:26379"}})
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithReplicaAcks(1, 200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := c.NewMutex("orders:42").Lock(ctx)
	var nr *rlock.NotReplicatedError
	if errors.As(err, &nr) {
		log.Printf("only %d of %d replicas acknowledged: try again later", nr.Acked, nr.Wanted)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
}

// A FencedMutex's lease carries a fencing token; the resource refuses writes
// with a token smaller than one it has seen, so a holder that lost the lock
// while paused cannot overwrite its successor's work.
func ExampleFencedMutex() {
	ctx := context.Background()
	var c *rlock.Client // from rlock.New
	var store interface {
		WriteIfNewer(ctx context.Context, key string, token int64, value []byte) error
	}

	lease, err := c.NewFencedMutex("invoice:42").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	if err := store.WriteIfNewer(ctx, "invoice:42", lease.Token(), []byte("paid")); err != nil {
		log.Print(err) // a later holder already wrote
	}
}

// A fair lock serves waiters in arrival order across every process: jobs that
// must run in the order they were queued.
func ExampleFairMutex() {
	ctx := context.Background()
	var c *rlock.Client // from rlock.New
	jobs := c.NewFairMutex("jobs:ingest")

	// Waits behind everyone already queued, in any process. A waiter that gives
	// up (here after a minute) leaves the queue at once.
	lease, err := jobs.TryLock(ctx, rlock.WithWaitTime(time.Minute))
	if errors.Is(err, rlock.ErrNotAcquired) {
		return // still busy after a minute
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// ... run the job.
}

// A read/write lock lets many readers in at once, or one writer. The writer may
// downgrade to a read hold; a reader cannot upgrade.
func ExampleRWMutex() {
	ctx := rlock.WithOwner(context.Background())
	var c *rlock.Client // from rlock.New
	rw := c.NewRWMutex("config")

	w, err := rw.WriteLock().Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... update the configuration, then keep reading it without letting
	// another writer in: take the read side before giving up the write side.
	r, err := rw.ReadLock().Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	defer r.Unlock(ctx)

	_, err = rw.WriteLock().TryLock(ctx)
	fmt.Println(errors.Is(err, rlock.ErrUpgrade))
}
