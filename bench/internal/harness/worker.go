package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
)

// Config is what the coordinator tells a worker process.
type Config struct {
	// Lib names the library the worker opens.
	Lib string `json:"lib"`
	// Addr is the Redis server's host:port.
	Addr string `json:"addr"`
	// Key is the name of the lock or semaphore the run uses.
	Key string `json:"key"`
	// Proc is the worker's index; Execute sets it.
	Proc int `json:"proc"`
	// Goroutines is how many goroutines the worker runs.
	Goroutines int `json:"goroutines"`
	// Hold is how long each acquisition holds before its release (0: none).
	Hold time.Duration `json:"hold"`
	// Warmup is the unmeasured start of the run, Duration its measured
	// window.
	Warmup   time.Duration `json:"warmup"`
	Duration time.Duration `json:"duration"`
	// Timeout is the deadline of each acquire call.
	Timeout time.Duration `json:"timeout"`
	// Mode is the command's own choice of what the goroutines acquire.
	Mode string `json:"mode,omitempty"`
}

// WorkerEnv is the environment variable that carries a worker's Config;
// its presence makes a command's binary run as a worker.
const WorkerEnv = "HOLDFAST_BENCH_WORKER"

// ServeWorker runs serve with the Config in WorkerEnv, if the variable is
// set, and reports whether it did. On an error it logs it and exits.
func ServeWorker(serve func(Config) error) bool {
	s := os.Getenv(WorkerEnv)
	if s == "" {
		return false
	}
	var cfg Config
	err := json.Unmarshal([]byte(s), &cfg)
	if err == nil {
		err = serve(cfg)
	}
	if err != nil {
		log.Fatalf("worker: %v", err)
	}
	return true
}

// Acquire takes one hold (a lock, a permit) and returns the function that
// gives exactly that hold back.
type Acquire func(ctx context.Context) (release func(context.Context) error, err error)

// Verbs name an acquire and its release in errors.
type Verbs struct{ Acquire, Release string }

// The verbs of locks and of semaphores.
var (
	LockVerbs      = Verbs{"Lock", "Unlock"}
	SemaphoreVerbs = Verbs{"Acquire", "Release"}
)

// Worker is the worker process's side of a contended run.
type Worker struct {
	Config Config
	// Warm takes a hold before the run, given back at once (connections,
	// scripts, subscriptions), with a deadline of 10 s.
	Warm Acquire
	// Acquire returns goroutine g's acquire.
	Acquire func(g int) Acquire
	// RoundTrips reads the library client's round-trip counter.
	RoundTrips func() int64
	// Close releases the library's client.
	Close func() error
	// Verbs name the acquire and the release in errors.
	Verbs Verbs

	acquire []Acquire
	stopped atomic.Bool
	mu      sync.Mutex
	errs    map[string]int
}

// Serve warms up, says READY on stdout, reads the start time
// (CLOCK_MONOTONIC ns) from stdin, loops acquire, hold, release on every
// goroutine from the start until the measured window ends, prints the
// Result and closes the library (giving it 5 s).
func (w *Worker) Serve() error {
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := Cycle(w.Warm)(wctx)
	wcancel()
	if err != nil {
		return fmt.Errorf("warm-up %s/%s: %w", w.Verbs.Acquire, w.Verbs.Release, err)
	}
	w.acquire = make([]Acquire, w.Config.Goroutines)
	for g := range w.acquire {
		w.acquire[g] = w.Acquire(g)
	}
	fmt.Println("READY")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read start: %w", err)
	}
	start, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("parse start: %w", err)
	}
	ws := start + int64(w.Config.Warmup)
	we := ws + int64(w.Config.Duration)

	root, stop := context.WithCancel(context.Background())
	w.errs = map[string]int{}
	res := Result{Proc: w.Config.Proc, Errors: w.errs}
	recs := make([][]Call, len(w.acquire))
	var wg sync.WaitGroup
	monoclock.SleepUntil(start)
	for g := range w.acquire {
		wg.Go(func() { recs[g] = w.loop(root, g) })
	}
	monoclock.SleepUntil(ws)
	res.RTStart = w.RoundTrips()
	monoclock.SleepUntil(we)
	res.RTEnd = w.RoundTrips()
	w.stopped.Store(true)
	stop()
	wg.Wait()
	for _, r := range recs {
		res.Calls = append(res.Calls, r...)
	}
	if err := printResult(res); err != nil {
		return err
	}
	w.close()
	return nil
}

// loop is goroutine g's acquire, hold, release loop; it returns its calls.
func (w *Worker) loop(root context.Context, g int) []Call {
	acquire := w.acquire[g]
	out := make([]Call, 0, 1024)
	for !w.stopped.Load() {
		actx, acancel := context.WithTimeout(root, w.Config.Timeout)
		t0 := monoclock.Now()
		release, err := acquire(actx)
		t1 := monoclock.Now()
		if err != nil {
			acancel()
			st := int64(Failed)
			if w.stopped.Load() {
				st = Cancelled
			} else {
				w.countErr("", err)
			}
			out = append(out, Call{int64(g), st, t0, t1, 0, 0})
			if st == Failed && !errors.Is(err, context.DeadlineExceeded) {
				time.Sleep(time.Millisecond) // do not spin on a broken library
			}
			continue
		}
		if w.Config.Hold > 0 {
			time.Sleep(w.Config.Hold)
		}
		t2 := monoclock.Now()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		rerr := release(rctx)
		t3 := monoclock.Now()
		rcancel()
		acancel() // after the release: rueidislock ties a lock to its acquire ctx
		if rerr != nil {
			w.countErr(strings.ToLower(w.Verbs.Release)+": ", rerr)
		}
		out = append(out, Call{int64(g), Acquired, t0, t1, t2, t3})
	}
	return out
}

// countErr counts err under its message (cut at 120 bytes) after prefix.
func (w *Worker) countErr(prefix string, err error) {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	w.mu.Lock()
	w.errs[prefix+s]++
	w.mu.Unlock()
}

// close closes the library, giving up after 5 s.
func (w *Worker) close() {
	done := make(chan struct{})
	go func() { _ = w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

func printResult(res Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("RESULT %s\n", b)
	return err
}
