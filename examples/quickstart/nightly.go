package main

import (
	"context"
	"log"
	"sync"

	"github.com/holdfast-go/holdfast/rlock"
)

// The README's example of the synchronizers, verbatim from here on (see
// TestReadmeShowsNightly).

func nightly(ctx context.Context, c *rlock.Client) error {
	// At most 5 exports at once, in every process.
	exports := c.NewSemaphore("exports")
	if _, err := exports.TrySetPermits(ctx, 5, 0); err != nil { // the first call sets it; 0: no TTL
		return err
	}
	if err := exports.Acquire(ctx, 1); err != nil { // waits until a permit is free, or ctx is done
		return err
	}
	defer exports.Release(ctx, 1)

	// The same, safe when a holder dies: the watchdog keeps the permit while p is held.
	workers := c.NewExpirableSemaphore("workers")
	if _, err := workers.TrySetPermits(ctx, 3); err != nil {
		return err
	}
	p, err := workers.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Release(ctx) // p.Done() closes if the permit is lost; p.IDs() work in any process

	// Wait until three parts are imported, by any processes.
	parts := c.NewCountDownLatch("import:parts")
	if _, err := parts.TrySetCount(ctx, 3); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for range 3 {
		wg.Go(func() {
			// ... import one part, then:
			if err := parts.CountDown(ctx); err != nil {
				log.Print(err)
			}
		})
	}
	return parts.Await(ctx) // nil at zero; rlock.ErrLatchDeleted if the latch is deleted
}
