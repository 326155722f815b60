package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// A Semaphore lets at most N holders in at once, in every process (Redisson's
// RSemaphore): here at most 5 exports run at a time. It has no owners: whoever
// acquired permits gives them back with Release.
func ExampleSemaphore() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	exports := c.NewSemaphore("exports")

	// Every process may run this: only the first call creates the semaphore.
	// A semaphore that does not exist has no permits, so waiters would wait.
	if _, err := exports.TrySetPermits(ctx, 5, 0); err != nil { // 0: no time to live
		log.Fatal(err)
	}
	again, _ := exports.TrySetPermits(ctx, 10, 0)
	fmt.Println("set again:", again)

	if err := exports.Acquire(ctx, 2); err != nil { // waits until 2 permits are free
		log.Fatal(err)
	}
	n, _ := exports.AvailablePermits(ctx)
	fmt.Println("available during the exports:", n)
	// ... run two exports.
	if err := exports.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}
	n, _ = exports.AvailablePermits(ctx)
	fmt.Println("available after:", n)

	// Counts below 1 are refused before any round trip (Redisson's acquire(0)
	// succeeds without taking anything).
	err := exports.Acquire(ctx, 0)
	fmt.Println("acquire 0:", errors.Is(err, rlock.ErrInvalidArgument))
	// Output:
	// set again: false
	// available during the exports: 3
	// available after: 5
	// acquire 0: true
}

// TryAcquire without options makes one attempt; with a wait time it is
// Redisson's tryAcquire(n, wait): the waiter is woken by the release's message
// and looks again at least every recheck interval (WithRecheckInterval), so a
// lost message delays it by at most that.
func ExampleSemaphore_TryAcquire() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	gpu := c.NewSemaphore("gpu")
	if _, err := gpu.TrySetPermits(ctx, 1, 0); err != nil {
		log.Fatal(err)
	}

	if err := gpu.Acquire(ctx, 1); err != nil { // another job takes the only permit...
		log.Fatal(err)
	}
	released := make(chan error, 1)
	time.AfterFunc(50*time.Millisecond, func() { released <- gpu.Release(ctx, 1) }) // ...for 50 ms

	err := gpu.TryAcquire(ctx, 1)
	fmt.Println("busy:", errors.Is(err, rlock.ErrNotAcquired))

	err = gpu.TryAcquire(ctx, 1, rlock.WithWaitTime(5*time.Second))
	switch {
	case errors.Is(err, rlock.ErrNotAcquired):
		fmt.Println("still busy after 5 s, try later")
		return
	case err != nil:
		log.Fatal(err)
	}
	if err := <-released; err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired after waiting")
	if err := gpu.Release(ctx, 1); err != nil {
		log.Fatal(err)
	}
	// Output:
	// busy: true
	// acquired after waiting
}

// An ExpirableSemaphore's permits have ids and leases (Redisson's
// RPermitExpirableSemaphore). A permit taken without WithLeaseTime is kept
// by the watchdog while its Permits handle is held, so a process that dies
// gives it back within the watchdog timeout; one with a fixed lease expires
// after it unless released first.
func ExampleExpirableSemaphore() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	workers := c.NewExpirableSemaphore("workers")
	if _, err := workers.TrySetPermits(ctx, 3); err != nil { // once, by whoever comes first
		log.Fatal(err)
	}

	p, err := workers.Acquire(ctx, 1) // a watchdog lease
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d permit, id of %d hex digits\n", len(p.IDs()), len(p.IDs()[0]))

	batch, err := workers.Acquire(ctx, 2, rlock.WithLeaseTime(time.Minute)) // a fixed lease
	if err != nil {
		log.Fatal(err)
	}
	left, err := workers.LeaseTime(ctx, batch.IDs()[0]) // any process may ask, by id
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fixed lease left, about a minute:", left > 50*time.Second && left <= time.Minute)
	acquired, _ := workers.AcquiredPermits(ctx)
	available, _ := workers.AvailablePermits(ctx)
	fmt.Println("acquired:", acquired, "available:", available)

	if err := batch.Release(ctx); err != nil { // both permits, in one round trip
		log.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-p.Done() // closed when the permits are released or lost
	fmt.Println("released:", errors.Is(p.Err(), rlock.ErrReleased))
	available, _ = workers.AvailablePermits(ctx)
	fmt.Println("available:", available)
	// Output:
	// 1 permit, id of 32 hex digits
	// fixed lease left, about a minute: true
	// acquired: 3 available: 0
	// released: true
	// available: 3
}

// A CountDownLatch lets processes wait until N others are done (Redisson's
// RCountDownLatch): here three workers count down and the coordinator's Await
// returns after the last one.
func ExampleCountDownLatch() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	done := c.NewCountDownLatch("import:2024-06-01")
	if _, err := done.TrySetCount(ctx, 3); err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	for range 3 { // in a program, three processes
		wg.Go(func() {
			// ... import one part, then:
			if err := done.CountDown(ctx); err != nil {
				log.Print(err)
			}
		})
	}

	// Await returns when the count reaches zero; it ends with ctx too, and
	// with an error matching ErrLatchDeleted if the latch is deleted.
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := done.Await(wait); err != nil {
		log.Fatal(err)
	}
	n, _ := done.Count(ctx)
	fmt.Println("all parts imported, count", n)
	wg.Wait()
	// Output:
	// all parts imported, count 0
}
