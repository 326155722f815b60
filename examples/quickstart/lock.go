package main

import (
	"context"

	"github.com/holdfast-go/holdfast/rlock"
)

// ship stands for the work done under the lock: it honours its ctx.
func ship(ctx context.Context) error { return ctx.Err() }

// The README's first example, verbatim from here on (see TestReadmeShowsLock).

func shipOrder(ctx context.Context, c *rlock.Client) error {
	lease, err := c.NewMutex("orders:42").Lock(ctx) // waits until it is free, or ctx ends
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx) // until then the watchdog keeps the lock alive

	work, cancel := lease.Context(ctx) // cancelled if the lock is lost
	defer cancel()
	return ship(work)
}
