package rlock_test

import (
	"context"
	"errors"
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
