package integration

// Worker side of the multi-process tests of wait_test.go. A worker is the test
// binary re-executed by redistest with WorkerEnv set; it connects to the server
// named in its environment (never to a Shared server of its own) and reports on
// stdout, one line per event.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const (
	waitMutexRole  = "wait-mutex"  // TestWaitMutualExclusionAcrossProcesses
	waitHolderRole = "wait-holder" // TestWaitDeadHolderTakenOver/WatchdogHolderKilled

	waitGoroutines = 4  // goroutines per process in the mutual exclusion test
	waitIters      = 50 // critical sections per goroutine
)

// waitWorkerClient returns a go-redis client of the server at $WAIT_ADDR,
// closed at the end of the worker's test.
func waitWorkerClient(t *testing.T) *redis.Client {
	addr := os.Getenv("WAIT_ADDR")
	require.NotEmpty(t, addr, "WAIT_ADDR")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// waitMutexRun runs goroutines x iters critical sections on name, each an
// increment of counter by GET and SET, and returns their intervals.
func waitMutexRun(ctx context.Context, rdb *redis.Client, c *rlock.Client, name, counter, who string, goroutines, iters int) ([]waitInterval, []error) {
	m := c.NewMutex(name)
	var mu sync.Mutex
	var ivs []waitInterval
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range iters {
				l, err := m.Lock(ctx)
				if err != nil {
					fail(fmt.Errorf("%s/g%d: Lock: %w", who, g, err))
					return
				}
				start := waitMono()
				err = waitIncr(ctx, rdb, counter)
				end := waitMono()
				mu.Lock()
				ivs = append(ivs, waitInterval{start, end, fmt.Sprintf("%s/g%d", who, g)})
				mu.Unlock()
				if err != nil {
					fail(fmt.Errorf("%s/g%d: increment: %w", who, g, err))
				}
				if err := l.Unlock(ctx); err != nil {
					fail(fmt.Errorf("%s/g%d: Unlock: %w", who, g, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return ivs, errs
}

// waitParseInterval parses a worker's "IV <start> <end>" line; ok is false for
// other lines.
func waitParseInterval(line, who string) (iv waitInterval, ok bool, err error) {
	rest, found := strings.CutPrefix(line, "IV ")
	if !found {
		return iv, false, nil
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return iv, false, fmt.Errorf("bad interval line %q", line)
	}
	iv.start, err = strconv.ParseInt(f[0], 10, 64)
	if err == nil {
		iv.end, err = strconv.ParseInt(f[1], 10, 64)
	}
	iv.who = who + "/" + f[2]
	return iv, err == nil, err
}

// waitMutexWorker is one process of TestWaitMutualExclusionAcrossProcesses: it
// says READY, waits for the start signal (a BLPOP on $WAIT_START), runs its
// critical sections with its own rlock.Client and prints them as
// "IV <start> <end> <goroutine>" lines.
func waitMutexWorker(t *testing.T) {
	rdb := waitWorkerClient(t)
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	goroutines, err := strconv.Atoi(os.Getenv("WAIT_GOROUTINES"))
	require.NoError(t, err)
	iters, err := strconv.Atoi(os.Getenv("WAIT_ITERS"))
	require.NoError(t, err)

	fmt.Println("READY")
	require.NoError(t, rdb.BLPop(ctx, 60*time.Second, os.Getenv("WAIT_START")).Err())
	ivs, errs := waitMutexRun(ctx, rdb, c, os.Getenv("WAIT_NAME"), os.Getenv("WAIT_COUNTER"), "worker", goroutines, iters)
	for _, iv := range ivs {
		fmt.Printf("IV %d %d %s\n", iv.start, iv.end, strings.TrimPrefix(iv.who, "worker/"))
	}
	for _, err := range errs {
		t.Error(err)
	}
	fmt.Println("DONE", len(ivs))
}

// waitHolderWorker is the holder of TestWaitDeadHolderTakenOver/WatchdogHolderKilled:
// it takes $WAIT_NAME with a watchdog lease of $WAIT_WATCHDOG, says HELD, and
// keeps it (renewed) until it is killed.
func waitHolderWorker(t *testing.T) {
	rdb := waitWorkerClient(t)
	wd, err := time.ParseDuration(os.Getenv("WAIT_WATCHDOG"))
	require.NoError(t, err)
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(wd))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.NewMutex(os.Getenv("WAIT_NAME")).TryLock(ctx)
	require.NoError(t, err)
	fmt.Println("HELD")
	select {
	case <-l.Done():
		t.Errorf("hold ended before the worker was killed: %v", l.Err())
	case <-ctx.Done():
		t.Error("not killed within a minute")
	}
}
