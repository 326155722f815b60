package holdfastotel_test

import (
	"context"
	"log"
	"strings"

	"github.com/holdfast-go/holdfast/holdfastotel"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// An Observer on your providers, installed on a client; redisotel makes
// go-redis' command spans the children of holdfast's call spans.
func Example() {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider() // with your exporter: sdktrace.WithBatcher(...)
	mp := sdkmetric.NewMeterProvider() // with your reader: sdkmetric.WithReader(...)
	defer tp.Shutdown(ctx)
	defer mp.Shutdown(ctx)

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		log.Fatal(err)
	}

	obs, err := holdfastotel.NewObserver(
		holdfastotel.WithTracerProvider(tp),
		holdfastotel.WithMeterProvider(mp),
	)
	if err != nil {
		log.Fatal(err)
	}
	c, err := rlock.New(rdb, rlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// A span "holdfast.Mutex.Lock" with an "evalsha" child, a point in
	// holdfast.acquire.duration, and a hold in holdfast.hold.active until the
	// Unlock.
	ctx = rlock.WithOwner(ctx)
	lease, err := c.NewMutex("orders:42").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
}

// Object names are left out unless WithNames opts in: here the family of an
// order's lock ("orders" for "orders:42"), and no name for other objects.
func ExampleWithNames() {
	obs, err := holdfastotel.NewObserver(holdfastotel.WithNames(func(kind observe.Kind, name string) string {
		if family, _, ok := strings.Cut(name, ":"); ok && family == "orders" {
			return family
		}
		return "" // no holdfast.name for this object
	}))
	if err != nil {
		log.Fatal(err)
	}
	_ = obs // rlock.New(rdb, rlock.WithObserver(obs))
}
