// Command outage shows what a holder of a lock is told when its Redis server
// stops, with the default options: it takes a lock kept alive by the
// watchdog, asks you to stop Redis, and waits until the lock is lost. The
// client's lines go to slog.Default() (stderr), as any program's would:
// a warning per failed renewal round, with the lease left, then the loss.
// go-redis adds lines of its own (its failed dials), through its own logger.
//
//	go run ./examples/outage                               # redis://localhost:6379
//	REDIS_URL=redis://localhost:6390 go run ./examples/outage -watchdog 6s
//
// Then stop the server (redis-cli -p 6390 shutdown nosave, or kill it). A
// server back before the lease runs out renews the lock again, and the log
// says so (recovered); the program then waits for the next outage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	watchdog := flag.Duration("watchdog", 0, "the watchdog timeout (rlock.WithWatchdogTimeout); 0: the default, 30s")
	flag.Parse()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379"
	}
	held := func(name string) {
		fmt.Printf("holding %q at %s: stop Redis now; the client's log follows\n", name, url)
	}
	if err := run(context.Background(), url, *watchdog, os.Stdout, held); err != nil {
		log.Fatalf("outage: %v (is Redis running at %s? set REDIS_URL)", err, url)
	}
}

// run takes the lock, calls held, and returns once the lock is lost, saying
// so on out.
func run(ctx context.Context, url string, watchdog time.Duration, out io.Writer, held func(name string)) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	var copts []rlock.ClientOption // none: the default logger, slog.Default()
	if watchdog > 0 {
		copts = append(copts, rlock.WithWatchdogTimeout(watchdog))
	}
	c, err := rlock.New(rdb, copts...)
	if err != nil {
		return err
	}
	defer c.Close()

	m := c.NewMutex("outage:demo")
	lease, err := m.Lock(rlock.WithOwner(ctx))
	if err != nil {
		return err
	}
	held(m.Name())
	start := time.Now()
	<-lease.Done() // closed when the lock is lost (or unlocked: not here)
	fmt.Fprintf(out, "lost after %v: %v\n", time.Since(start).Round(100*time.Millisecond), lease.Err())
	return nil
}
