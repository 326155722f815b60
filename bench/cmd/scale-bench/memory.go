package main

import (
	"context"
	"fmt"
	"log"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/redis/go-redis/v9"
)

// memStats is what one library's holds, or its waiting Lock calls, cost in
// this process.
type memStats struct {
	Lib string `json:"lib"`
	N   int    `json:"n"`
	Err string `json:"err,omitempty"`
	// Per hold (or per waiting call): live heap bytes after a GC, goroutine
	// stack bytes (StackInuse), and goroutines.
	Heap       float64 `json:"heapBytes"`
	Stack      float64 `json:"stackBytes"`
	Goroutines float64 `json:"goroutines"`
}

// memory is a snapshot of the live heap after a GC.
type memory struct {
	heap, stack uint64
	goroutines  int
}

func readMemory() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// per returns the difference from m to later, per one of n.
func (m memory) per(later memory, lib string, n int) *memStats {
	return &memStats{Lib: lib, N: n,
		Heap:       float64(int64(later.heap)-int64(m.heap)) / float64(n),
		Stack:      float64(int64(later.stack)-int64(m.stack)) / float64(n),
		Goroutines: float64(later.goroutines-m.goroutines) / float64(n),
	}
}

// runMemory measures, for each library, the memory per hold and per
// waiting Lock call.
func runMemory(ctx context.Context, srv *redisserver.Server, selected []libs.Library, o options) (holds, waiters []*memStats) {
	for _, lib := range selected {
		ms, err := holdMemory(ctx, srv, lib, o.memHolds)
		if err != nil {
			ms = &memStats{Lib: lib.Name, N: o.memHolds, Err: err.Error()}
		}
		log.Printf("memory: %-22s %7.0f heap B/hold   %6.0f stack B/hold   %.2f goroutines/hold %s", lib.Name, ms.Heap, ms.Stack, ms.Goroutines, ms.Err)
		holds = append(holds, ms)
		ws, err := waiterMemory(ctx, srv, lib, o.memWaiters)
		if err != nil {
			ws = &memStats{Lib: lib.Name, N: o.memWaiters, Err: err.Error()}
		}
		log.Printf("memory: %-22s %7.0f heap B/waiter %6.0f stack B/waiter %.2f goroutines/waiter %s", lib.Name, ws.Heap, ws.Stack, ws.Goroutines, ws.Err)
		waiters = append(waiters, ws)
	}
	return holds, waiters
}

// holdMemory takes n locks, one after the other, with one instance of lib
// and returns the memory they cost (the lockers, the unlock functions the
// library returns and whatever it keeps per hold; the slice of unlock
// functions is allocated before).
func holdMemory(ctx context.Context, srv *redisserver.Server, lib libs.Library, n int) (*memStats, error) {
	inst, err := openWarm(ctx, lib, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	defer flush(ctx, srv)
	names := lockNames("scale:mem:"+lib.Name, n)
	unlocks := make([]func(context.Context) error, 0, n)
	defer func() {
		for _, u := range unlocks {
			_ = u(ctx)
		}
	}()
	m0 := readMemory()
	for _, name := range names {
		u, err := inst.NewLocker(name).Lock(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		unlocks = append(unlocks, u)
	}
	return m0.per(readMemory(), lib.Name, n), nil
}

// waiterMemory holds n locks with one instance of lib and starts n
// goroutines, each waiting in Lock for one of them through a second
// instance; once the server has run 2n commands since they started (every
// waiter has tried about once) and waiterSettle more has passed, it returns
// the memory the waiting goroutines cost, their stacks included.
func waiterMemory(ctx context.Context, srv *redisserver.Server, lib libs.Library, n int) (*memStats, error) {
	holder, err := openWarm(ctx, lib, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	defer flush(ctx, srv)
	names := lockNames("scale:wait:"+lib.Name, n)
	for _, name := range names {
		u, err := holder.NewLocker(name).Lock(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = u(ctx) }()
	}
	inst, err := openWarm(ctx, lib, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	lockers := make([]libs.Locker, n)
	for i, name := range names {
		lockers[i] = inst.NewLocker(name)
	}
	stats := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer stats.Close()
	s0, err := redisserver.ReadCommandStats(ctx, stats)
	if err != nil {
		return nil, err
	}
	m0 := readMemory()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, l := range lockers {
		wg.Go(func() {
			if u, err := l.Lock(wctx); err == nil {
				_ = u(ctx)
			}
		})
	}
	if err := awaitCommands(ctx, stats, s0, int64(2*n)); err != nil {
		return nil, err
	}
	time.Sleep(waiterSettle) // the last waiters finish setting up their wait
	return m0.per(readMemory(), lib.Name, n), nil
}

// waiterSettle is how long waiterMemory lets the waiters run on after the
// server has seen their first commands: long enough for the last of them to
// subscribe and retry, short enough for redsync's 32 tries (about 5 s).
const waiterSettle = 300 * time.Millisecond

// awaitCommands waits until the server has run at least n commands since
// s0, polling every 20 ms for up to 10 s.
func awaitCommands(ctx context.Context, stats *redis.Client, s0 redisserver.CommandStats, n int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := redisserver.ReadCommandStats(ctx, stats)
		if err != nil {
			return err
		}
		got, _ := s.Delta(s0)
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiters: %d of %d commands in 10 s", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warmCycles is how many Lock/Unlock cycles openWarm runs at once: more
// than a go-redis pool's default size (10 per CPU on this 2-core machine), so
// that the waiters of waiterMemory find every connection dialled.
const warmCycles = 64

// openWarm opens lib at addr and runs warmCycles Lock/Unlock cycles at once
// on names nobody else uses: connections dialled, scripts loaded, so that
// the memory measured is the holds' or the waiters', not the pool's.
func openWarm(ctx context.Context, lib libs.Library, addr string) (libs.Instance, error) {
	inst, err := lib.Open(addr)
	if err != nil {
		return nil, err
	}
	errs := make(chan error, warmCycles)
	for i := range warmCycles {
		go func() {
			u, err := inst.NewLocker("scale:warm:" + strconv.Itoa(i)).Lock(ctx)
			if err == nil {
				err = u(ctx)
			}
			errs <- err
		}()
	}
	for range warmCycles {
		if e := <-errs; e != nil {
			err = e
		}
	}
	if err != nil {
		_ = inst.Close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return inst, nil
}

// lockNames returns n names prefix:0 … prefix:n−1.
func lockNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + ":" + strconv.Itoa(i)
	}
	return out
}

// flush empties the server.
func flush(ctx context.Context, srv *redisserver.Server) {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	_ = rdb.FlushAll(ctx).Err()
}
