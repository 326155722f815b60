package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// The examples run under go test against an embedded Redis (miniredis), so that
// their output is checked. In a program, rdb is a client of your Redis server
// (a *redis.Client, redis.NewFailoverClient for Sentinel, or a
// *redis.ClusterClient) and exampleClient's body is simply rlock.New(rdb).

// exampleClient stands for rlock.New on your Redis:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	c, err := rlock.New(rdb, opts...)
//
// It starts an embedded server for the example; closeAll closes the Client, the
// go-redis client and the server.
func exampleClient(opts ...rlock.ClientOption) (c *rlock.Client, closeAll func()) {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c, err = rlock.New(rdb, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return c, func() {
		c.Close()
		rdb.Close()
		srv.Close()
	}
}

// The basic use: one Client per process, a Mutex per lock name, and a Lease per
// acquisition.
func Example() {
	ctx := context.Background()
	srv, err := miniredis.Run() // an embedded Redis for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// On your server: redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	c, err := rlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.NewMutex("orders:42")
	lease, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... critical section; the watchdog keeps the lock while it runs.
	locked, _ := m.IsLocked(ctx)
	fmt.Println("locked:", locked)

	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	locked, _ = m.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// locked: true
	// locked: false
}

// An owner in the context makes the lock reentrant, as a Java thread does with
// Redisson: nested calls with the same ctx re-enter instead of waiting.
func ExampleWithOwner() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()

	ctx := rlock.WithOwner(context.Background())
	m := c.NewMutex("orders:42")

	outer, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Unlock(ctx)

	inner, err := m.TryLock(ctx) // same owner: no waiting
	if err != nil {
		log.Fatal(err)
	}
	n, _ := m.HoldCount(ctx) // HoldCount, IsHeld and m.Unlock need the owner's ctx
	fmt.Println("hold count:", n)

	if err := inner.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ := m.IsHeld(ctx)
	fmt.Println("still held:", held)
	// Output:
	// hold count: 2
	// still held: true
}

// TryLock without options makes one attempt; with a wait time it is Redisson's
// tryLock(waitTime, leaseTime): here, wait at most five seconds, then hold for
// at most ten.
func ExampleMutex_TryLock() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	m := c.NewMutex("reports")

	other, err := m.Lock(ctx) // another owner holds the lock...
	if err != nil {
		log.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { other.Unlock(ctx) }) // ...for 50 ms

	_, err = m.TryLock(ctx)
	fmt.Println("busy:", errors.Is(err, rlock.ErrNotAcquired))

	lease, err := m.TryLock(ctx, rlock.WithWaitTime(5*time.Second), rlock.WithLeaseTime(10*time.Second))
	switch {
	case errors.Is(err, rlock.ErrNotAcquired):
		fmt.Println("still busy after 5 s, try later")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("acquired after waiting")
	// Output:
	// busy: true
	// acquired after waiting
}

// Code ported from Java often locks and unlocks in different functions: the owner
// in ctx lets Mutex.Unlock find the hold.
func ExampleMutex_Unlock() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := rlock.WithOwner(context.Background()) // without an owner, Unlock fails with ErrNotHeld
	m := c.NewMutex("inventory")

	begin := func(ctx context.Context) error { _, err := m.Lock(ctx); return err }
	end := func(ctx context.Context) error { return m.Unlock(ctx) }

	if err := begin(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ := m.IsHeld(ctx)
	fmt.Println("held after begin:", held)

	if err := end(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ = m.IsHeld(ctx)
	fmt.Println("held after end:", held)

	err := end(context.Background()) // a ctx without the owner finds nothing to unlock
	fmt.Println(errors.Is(err, rlock.ErrNotHeld))
	// Output:
	// held after begin: true
	// held after end: false
	// true
}

// Work that must not go on without the lock watches Lease.Done. Here the lock
// is force-unlocked while the work runs (as `holdfast unlock --force leader`
// would do), and the work stops.
func ExampleLease_Done() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	lease, err := c.NewMutex("leader").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx) // after a loss it only reports ErrNotHeld

	go c.NewMutex("leader").ForceUnlock(ctx) // someone takes the lock away

	for {
		select {
		case <-lease.Done():
			fmt.Println("lost the lock:", errors.Is(lease.Err(), rlock.ErrLockLost))
			return
		case <-time.After(10 * time.Millisecond):
			// ... one more step of the work
		}
	}
	// Output:
	// lost the lock: true
}

// Work run under a lease's Context stops when the lease ends: here the lock is
// taken away, and the work's ctx is cancelled with the loss as its cause.
func ExampleLease_Context() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	lease, err := c.NewMutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx) // after a loss it only reports ErrNotHeld

	work, cancel := lease.Context(ctx) // cancelled when the lease ends
	defer cancel()

	go c.NewMutex("nightly-report").ForceUnlock(ctx) // someone takes the lock away

	<-work.Done() // a query, an HTTP call, a loop: whatever honours work stops
	fmt.Println("work cancelled, lock lost:", errors.Is(context.Cause(work), rlock.ErrLockLost))
	// Output:
	// work cancelled, lock lost: true
}

// A MultiLock takes several locks all or none: on a Redis Cluster the names may
// live in different shards.
func ExampleMultiLock() {
	c, closeAll := exampleClient() // rlock.New on your Redis (e.g. a *redis.ClusterClient)
	defer closeAll()
	ctx := context.Background()

	from, to := c.NewMutex("account:17"), c.NewMutex("account:42")
	lease, err := rlock.NewMultiLock(from, to).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... move money between the two accounts.
	fmt.Println("parts held:", len(lease.Leases()))

	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	l1, _ := from.IsLocked(ctx)
	l2, _ := to.IsLocked(ctx)
	fmt.Println("locked after unlock:", l1, l2)
	// Output:
	// parts held: 2
	// locked after unlock: false false
}

// A RedLock holds a lock while a majority of independent primaries grant it:
// one Client per primary, the same name on each. Here one of the three
// primaries refuses (another client holds the name there); two of three are a
// majority.
func ExampleRedLock() {
	ctx := context.Background()
	var parts []*rlock.Mutex
	for range 3 { // e.g. redis-a:6379, redis-b:6379, redis-c:6379
		c, closeAll := exampleClient() // rlock.New on one primary
		defer closeAll()
		parts = append(parts, c.NewMutex("report:daily"))
	}
	if _, err := parts[2].Lock(ctx); err != nil { // someone else, on the third primary
		log.Fatal(err)
	}

	lease, err := rlock.NewRedLock(parts...).TryLock(ctx,
		rlock.WithWaitTime(5*time.Second), rlock.WithLeaseTime(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// ... work until lease.ValidUntil() at the latest.
	fmt.Printf("granted by %d of %d primaries, valid for about a minute: %v\n",
		len(lease.Leases()), len(parts), time.Until(lease.ValidUntil()) > 50*time.Second)
	// Output:
	// granted by 2 of 3 primaries, valid for about a minute: true
}

// With replicas, WithReplicaAcks refuses an acquisition that no replica has
// received: a failover could otherwise lose it and grant the lock twice. The
// embedded server of this example has no replica (its WAIT answers 0), so the
// acquisition is refused and undone.
func ExampleWithReplicaAcks() {
	// rlock.New(rdb, rlock.WithReplicaAcks(1, 200*time.Millisecond)) on your
	// primary, e.g. rdb := redis.NewFailoverClient(&redis.FailoverOptions{...}).
	c, closeAll := exampleClient(rlock.WithReplicaAcks(1, 200*time.Millisecond))
	defer closeAll()
	ctx := context.Background()
	m := c.NewMutex("orders:42")

	lease, err := m.Lock(ctx)
	var nr *rlock.NotReplicatedError
	if errors.As(err, &nr) {
		fmt.Printf("only %d of %d replicas acknowledged: try again later\n", nr.Acked, nr.Wanted)
		locked, _ := m.IsLocked(ctx)
		fmt.Println("locked:", locked)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	// Output:
	// only 0 of 1 replicas acknowledged: try again later
	// locked: false
}

// tokenStore is a resource that remembers the highest fencing token it has
// seen and refuses writes with a smaller one.
type tokenStore struct {
	mu     sync.Mutex
	tokens map[string]int64
}

func (s *tokenStore) WriteIfNewer(ctx context.Context, key string, token int64, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.tokens[key] {
		return fmt.Errorf("write %q refused: its token is below one already written", key)
	}
	if s.tokens == nil {
		s.tokens = make(map[string]int64)
	}
	s.tokens[key] = token
	// ... store value.
	return nil
}

// A FencedMutex's lease carries a fencing token; the resource refuses writes
// with a token smaller than one it has seen, so a holder that lost the lock
// while paused cannot overwrite its successor's work.
func ExampleFencedMutex() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	store := &tokenStore{}
	m := c.NewFencedMutex("invoice:42")

	first, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The first holder pauses for longer than its lease; the lock passes on.
	if _, err := m.ForceUnlock(ctx); err != nil {
		log.Fatal(err)
	}
	second, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	fmt.Println(store.WriteIfNewer(ctx, "invoice:42", second.Token(), []byte("paid")))

	// The first holder wakes up and writes with its old token.
	if err := store.WriteIfNewer(ctx, "invoice:42", first.Token(), []byte("open")); err != nil {
		fmt.Println(err) // a later holder already wrote
	}
	// Output:
	// <nil>
	// write "invoice:42" refused: its token is below one already written
}

// A fair lock serves waiters in arrival order across every process: jobs that
// must run in the order they were queued.
func ExampleFairMutex() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	jobs := c.NewFairMutex("jobs:ingest")

	running, err := jobs.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	for _, job := range []string{"first", "second", "third"} {
		wg.Go(func() {
			// Waits behind everyone already queued, in any process. A waiter
			// that gives up (here after a minute) leaves the queue at once.
			lease, err := jobs.TryLock(ctx, rlock.WithWaitTime(time.Minute))
			if errors.Is(err, rlock.ErrNotAcquired) {
				return // still busy after a minute
			}
			if err != nil {
				log.Fatal(err)
			}
			defer lease.Unlock(ctx)
			fmt.Println("run", job) // ... run the job.
		})
		time.Sleep(100 * time.Millisecond) // for the example: let each job queue before the next
	}
	running.Unlock(ctx)
	wg.Wait()
	// Output:
	// run first
	// run second
	// run third
}

// A read/write lock lets many readers in at once, or one writer. The writer may
// downgrade to a read hold; a reader cannot upgrade.
func ExampleRWMutex() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := rlock.WithOwner(context.Background())
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

	other, err := rw.ReadLock().TryLock(context.Background()) // readers share the lock
	if err != nil {
		log.Fatal(err)
	}
	defer other.Unlock(ctx)
	fmt.Println("two readers")

	_, err = rw.WriteLock().TryLock(ctx)
	fmt.Println("upgrade refused:", errors.Is(err, rlock.ErrUpgrade))
	// Output:
	// two readers
	// upgrade refused: true
}
