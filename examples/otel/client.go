package main

import (
	"github.com/holdfast-go/holdfast/holdfastotel"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// newClient returns a holdfast client on rdb whose calls, and rdb's commands,
// report to the OpenTelemetry providers mp and tp.
func newClient(rdb *redis.Client, mp metric.MeterProvider, tp trace.TracerProvider) (*rlock.Client, error) {
	// go-redis: a span and a duration per command. Its spans are children of
	// holdfast's: the observer's context is the one the commands run with.
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		return nil, err
	}
	if err := redisotel.InstrumentMetrics(rdb, redisotel.WithMeterProvider(mp)); err != nil {
		return nil, err
	}
	// holdfast: a span per public call; durations, holds, waits, wake-ups,
	// renewals and subscriptions as metrics.
	obs, err := holdfastotel.NewObserver(holdfastotel.WithMeterProvider(mp), holdfastotel.WithTracerProvider(tp))
	if err != nil {
		return nil, err
	}
	return rlock.New(rdb, rlock.WithObserver(obs))
}
