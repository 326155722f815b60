// Command otel runs a contended holdfast workload with OpenTelemetry
// installed, holdfastotel for holdfast's calls and redisotel for go-redis'
// commands, and shows the metrics through a Prometheus exporter:
//
//	go run .                  # runs the workload once, prints the holdfast_* metrics
//	go run . -listen :9464    # runs it until interrupted, serves /metrics (all of them)
//	REDIS_URL=redis://:password@host:6379/0 go run . -workers 16 -rounds 50
//
// It leaves nothing behind in Redis: every lock is unlocked, the semaphore and
// the latch are deleted, and the client is closed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// config is what the flags set.
type config struct {
	listen  string        // serve /metrics here and loop until ctx is done; "" prints once
	workers int           // goroutines contending for each object
	rounds  int           // lock/unlock and acquire/release rounds per worker
	hold    time.Duration // the critical section
}

func main() {
	cfg := config{hold: 2 * time.Millisecond}
	flag.StringVar(&cfg.listen, "listen", "", "serve /metrics at this address (e.g. :9464) and repeat the workload until interrupted")
	flag.IntVar(&cfg.workers, "workers", 8, "goroutines contending for each object")
	flag.IntVar(&cfg.rounds, "rounds", 25, "Lock/Unlock and Acquire/Release rounds per worker")
	flag.Parse()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, url, os.Stdout, cfg); err != nil {
		log.Fatalf("otel: %v (is Redis running at %s? set REDIS_URL)", err, url)
	}
}

func run(ctx context.Context, url string, out io.Writer, cfg config) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	// The SDK: metrics read by a Prometheus exporter (into a registry of our
	// own rather than the global one), and traces. Put your exporters here
	// (OTLP...); spans are only counted by this example.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	spans := newSpanCounter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.WithoutCancel(ctx))

	c, err := newClient(rdb, mp, tp)
	if err != nil {
		return err
	}
	defer c.Close()

	if cfg.listen != "" {
		return serve(ctx, c, reg, out, cfg)
	}
	if err := workload(ctx, c, cfg); err != nil {
		return err
	}
	if err := c.Close(); err != nil { // ends the subscriptions: the gauges read 0
		return err
	}
	if err := printMetrics(out, reg, "holdfast_"); err != nil {
		return err
	}
	spans.print(out)
	return nil
}

// The names of the workload's objects.
const (
	mutexName     = "otel-example:mutex"
	semaphoreName = "otel-example:semaphore"
	latchName     = "otel-example:latch"
)

// workload runs cfg.workers goroutines that take the mutex in turns,
// cfg.rounds times each; then, once all are done with it, take the permits of
// a 2-permit semaphore cfg.rounds times each, two at a time, and count a latch
// down, which one more goroutine awaits. It deletes the semaphore and the
// latch on return.
func workload(ctx context.Context, c *rlock.Client, cfg config) error {
	m := c.NewMutex(mutexName)
	sem := c.NewSemaphore(semaphoreName)
	latch := c.NewCountDownLatch(latchName)
	defer func() { // even after ctx is done
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = sem.Delete(cleanup)
		_, _ = latch.Delete(cleanup)
	}()
	if _, err := sem.TrySetPermits(ctx, 2, 0); err != nil {
		return err
	}
	if _, err := latch.TrySetCount(ctx, int64(cfg.workers)); err != nil {
		return err
	}
	awaitCtx, stopAwait := context.WithCancel(ctx)
	defer stopAwait()
	awaited := make(chan error, 1)
	go func() { awaited <- latch.Await(awaitCtx) }() // waits until every worker counted down

	err := inParallel(cfg.workers, func() error { return lockRounds(ctx, m, cfg) })
	if err == nil {
		err = inParallel(cfg.workers, func() error {
			if err := acquireRounds(ctx, sem, cfg); err != nil {
				return err
			}
			return latch.CountDown(ctx)
		})
	}
	if err != nil {
		stopAwait() // the latch will not reach zero
		<-awaited
		return err
	}
	return <-awaited
}

// inParallel runs f in n goroutines and returns their errors.
func inParallel(n int, f func() error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lockRounds takes and gives back the mutex cfg.rounds times, as an owner of
// its own.
func lockRounds(ctx context.Context, m *rlock.Mutex, cfg config) error {
	owner := rlock.WithOwner(ctx)
	giveBack := context.WithoutCancel(owner) // unlock even when interrupted
	for range cfg.rounds {
		lease, err := m.Lock(owner) // waits on pub/sub while another worker holds it
		if err != nil {
			return err
		}
		time.Sleep(cfg.hold)
		if err := lease.Unlock(giveBack); err != nil {
			return err
		}
	}
	return nil
}

// acquireRounds takes a permit of sem and gives it back cfg.rounds times.
func acquireRounds(ctx context.Context, sem *rlock.Semaphore, cfg config) error {
	giveBack := context.WithoutCancel(ctx)
	for range cfg.rounds {
		if err := sem.Acquire(ctx, 1); err != nil { // a permit: a count, not a hold
			return err
		}
		time.Sleep(cfg.hold)
		if err := sem.Release(giveBack, 1); err != nil {
			return err
		}
	}
	return nil
}

// serve serves reg's metrics (holdfast's and redisotel's) at cfg.listen and
// runs the workload every second until ctx is done.
func serve(ctx context.Context, c *rlock.Client, reg *prometheus.Registry, out io.Writer, cfg config) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "serving http://%s/metrics; running the workload every second until interrupted\n", ln.Addr())

	for ctx.Err() == nil {
		if err = workload(ctx, c, cfg); err != nil {
			if ctx.Err() != nil {
				err = nil // interrupted: the calls in flight returned ctx's error
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(err, srv.Shutdown(shutdown), ignoreClosed(<-served))
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// printMetrics writes the metric families of reg whose name begins with
// prefix, in Prometheus' text format: what /metrics would show of them.
func printMetrics(out io.Writer, reg *prometheus.Registry, prefix string) error {
	families, err := reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(out, mf); err != nil {
			return err
		}
	}
	return nil
}
