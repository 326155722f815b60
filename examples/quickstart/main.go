// Command quickstart is holdfast's quick start, the program shown in the
// README: it takes a lock, re-enters it, shows that another owner is kept
// out, and gives everything back. Run it against a Redis server:
//
//	go run ./examples/quickstart                              # redis://localhost:6379
//	REDIS_URL=redis://:password@host:6379/0 go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379"
	}
	if err := run(context.Background(), url, os.Stdout); err != nil {
		log.Fatalf("quickstart: %v (is Redis running at %s? set REDIS_URL)", err, url)
	}
}

func run(ctx context.Context, url string, out io.Writer) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts) // any redis.UniversalClient: Sentinel and Cluster too
	defer rdb.Close()

	c, err := rlock.New(rdb) // one Client per process
	if err != nil {
		return err
	}
	defer c.Close()

	m := c.NewMutex("quickstart:orders:42") // a cheap handle on one lock, safe to share
	if err := processOrder(rlock.WithOwner(ctx), m, out); err != nil {
		return err
	}

	locked, err := m.IsLocked(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "after processOrder: locked=%v\n", locked)
	return nil
}

// processOrder runs with an owner in ctx (rlock.WithOwner): the Go counterpart of
// the Java thread that holds a Redisson lock.
func processOrder(ctx context.Context, m *rlock.Mutex, out io.Writer) error {
	lease, err := m.Lock(ctx) // waits on pub/sub until the lock is free, or ctx is done
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx) // the watchdog keeps the lock alive until then
	fmt.Fprintf(out, "locked %q\n", m.Name())

	inner, err := m.TryLock(ctx) // the same owner re-enters at once
	if err != nil {
		return err
	}
	defer inner.Unlock(ctx)
	n, err := m.HoldCount(ctx) // needs the owner's ctx, as IsHeld and m.Unlock do
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "re-entered: hold count %d\n", n)

	// A ctx without an owner is another owner each time: it is kept out.
	_, err = m.TryLock(context.Background())
	fmt.Fprintf(out, "another owner: busy=%v\n", errors.Is(err, rlock.ErrNotAcquired))
	return nil
}
