package integration

// Worker side of TestFairMutexFIFOAcrossProcesses (fair_test.go). A worker is
// the test binary re-executed by redistest with WorkerEnv set: it connects to
// the server at $FAIR_ADDR with its own rlock.Client, runs its waiters of the
// global arrival order and reports on stdout, one line per event.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const fairWaiterRole = "fair-waiter" // TestFairMutexFIFOAcrossProcesses

// fairEnvInt reads an integer from the worker's environment.
func fairEnvInt(t *testing.T, key string) int {
	n, err := strconv.Atoi(os.Getenv(key))
	require.NoError(t, err, key)
	return n
}

// fairWaiterWorker is one process of TestFairMutexFIFOAcrossProcesses. Worker i
// of $FAIR_WORKERS runs the waiters k = i, i+workers, ... (k < $FAIR_WAITERS) of
// the global arrival order, each its own owner (goroutine), on the fair lock
// $FAIR_NAME. It says "READY <client id>"; waiter k then waits for its start
// signal (a BLPOP on <$FAIR_CTL>:start:<k>) and calls Lock. Once it holds the
// lock it checks that it is alone inside (INCR of <ctl>:inside), appends
// "<k> <its field> <unix ns>" to the list <ctl>:order, holds briefly and
// unlocks, and says "DONE <k>". The waiter $FAIR_GIVEUP (-1: none) instead has
// its Lock cancelled when <ctl>:cancel:<k> is pushed, and says
// "GAVEUP <k> <error>" once Lock has returned.
func fairWaiterWorker(t *testing.T) {
	addr, name, ctl := os.Getenv("FAIR_ADDR"), os.Getenv("FAIR_NAME"), os.Getenv("FAIR_CTL")
	require.NotEmpty(t, addr, "FAIR_ADDR")
	require.NotEmpty(t, name, "FAIR_NAME")
	require.NotEmpty(t, ctl, "FAIR_CTL")
	workers, waiters, giveUp := fairEnvInt(t, "FAIR_WORKERS"), fairEnvInt(t, "FAIR_WAITERS"), fairEnvInt(t, "FAIR_GIVEUP")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := c.NewFairMutex(name)

	fmt.Println("READY", c.ID())
	var wg sync.WaitGroup
	for k := redistest.WorkerIndex(); k < waiters; k += workers {
		wg.Go(func() {
			if err := rdb.BLPop(ctx, 60*time.Second, fmt.Sprintf("%s:start:%d", ctl, k)).Err(); err != nil {
				t.Errorf("waiter %d: start signal: %v", k, err)
				return
			}
			if k == giveUp {
				fairGiveUp(ctx, t, rdb, m, ctl, k)
				return
			}
			l, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: Lock: %v", k, err)
				return
			}
			at := time.Now().UnixNano()
			if n, err := rdb.Incr(ctx, ctl+":inside").Result(); err != nil || n != 1 {
				t.Errorf("waiter %d: not alone in the critical section: INCR inside = %d, %v", k, n, err)
			}
			fields, err := rdb.HKeys(ctx, name).Result()
			if err != nil || len(fields) != 1 {
				t.Errorf("waiter %d: holders of the lock: %v, %v", k, fields, err)
				fields = append(fields, "?")
			}
			if err := rdb.RPush(ctx, ctl+":order", fmt.Sprintf("%d %s %d", k, fields[0], at)).Err(); err != nil {
				t.Errorf("waiter %d: recording the acquisition: %v", k, err)
			}
			time.Sleep(2 * time.Millisecond) // the critical section's work
			if err := rdb.Decr(ctx, ctl+":inside").Err(); err != nil {
				t.Errorf("waiter %d: DECR inside: %v", k, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", k, err)
			}
			fmt.Println("DONE", k)
		})
	}
	wg.Wait()
}

// fairGiveUp is the waiter k that gives up: its Lock's ctx is cancelled when
// the parent pushes <ctl>:cancel:<k>.
func fairGiveUp(ctx context.Context, t *testing.T, rdb *redis.Client, m *rlock.FairMutex, ctl string, k int) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	signal := make(chan error, 1)
	go func() {
		err := rdb.BLPop(ctx, 60*time.Second, fmt.Sprintf("%s:cancel:%d", ctl, k)).Err()
		cancel()
		signal <- err
	}()
	l, err := m.Lock(lctx)
	if err == nil {
		t.Errorf("waiter %d: acquired although it should have given up", k)
		_ = l.Unlock(ctx)
	}
	if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("waiter %d: Lock returned %v, want ErrNotAcquired and context.Canceled", k, err)
	}
	fmt.Println("GAVEUP", k, err)
	if err := <-signal; err != nil {
		t.Errorf("waiter %d: cancel signal: %v", k, err)
	}
}
