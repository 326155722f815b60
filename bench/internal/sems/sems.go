// Package sems puts every Redis semaphore under test behind one small
// interface, so that cmd/semaphore-bench drives them all alike: holdfast's
// Semaphore and ExpirableSemaphore (with the watchdog lease and with a fixed
// lease) and the peers, a polling Redis semaphore as Go projects write it and
// the same made safe against go-redis's retries as holdfast's are
// (polling.go).
package sems

import (
	"context"
	"errors"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/redis/go-redis/v9"
)

// Sem acquires one permit of one named semaphore. The returned release gives
// back exactly that permit.
type Sem interface {
	Acquire(ctx context.Context) (release func(context.Context) error, err error)
}

// TrySem is a Sem that can also make one attempt without waiting.
type TrySem interface {
	Sem
	// TryAcquire makes one attempt; it fails at once when no permit is free.
	TryAcquire(ctx context.Context) (release func(context.Context) error, err error)
}

// Instance is one process's use of a semaphore library: one Redis client
// (and whatever the library shares per client), used by all goroutines of
// the process.
type Instance interface {
	// Init creates the semaphore name with permits free permits. It is
	// called once, before anyone acquires.
	Init(ctx context.Context, name string, permits int64) error
	// Available returns the semaphore's free permits as Redis holds them.
	Available(ctx context.Context, name string) (int64, error)
	// NewSem returns a handle on the semaphore name, for one goroutine.
	NewSem(name string) Sem
	// Ping sends PING through the library's client.
	Ping(ctx context.Context) error
	// RoundTrips returns how many commands or pipelines the library's client
	// has sent so far.
	RoundTrips() int64
	// Close releases the client (and the library's client on it).
	Close() error
}

// Library describes one semaphore implementation with one set of settings.
type Library struct {
	// Name identifies the library and settings in tables and flags.
	Name string
	// Module is the Go module the implementation comes from.
	Module string
	// Settings states every setting the benchmark uses.
	Settings string
	// Open connects to the Redis server at addr.
	Open func(addr string) (Instance, error)
}

// Version returns the version of l.Module linked into this binary.
func (l Library) Version() string { return libs.ModuleVersion(l.Module) }

// Row returns the semaphore's row in a report's table of semaphores.
func (l Library) Row() (name, version, settings string) { return l.Name, l.Version(), l.Settings }

var registry = libs.NewRegistry(func(l Library) string { return l.Name })

func register(l Library) { registry.Add(l) }

// All returns the registered libraries, holdfast's first.
func All() []Library { return registry.All() }

// ByName finds a registered library.
func ByName(name string) (Library, bool) { return registry.ByName(name) }

// IsHoldfast reports whether the library is one of holdfast's semaphores.
func IsHoldfast(name string) bool { return libs.IsHoldfast(name) }

// base is the go-redis client every library here gets, with libs' counting
// hook (one per command, one per pipeline).
type base struct {
	rdb   *redis.Client
	count func() int64
}

func newBase(addr string) base {
	rdb, count := libs.NewGoRedis(addr)
	return base{rdb: rdb, count: count}
}

func (b base) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }
func (b base) RoundTrips() int64              { return b.count() }

// semFunc adapts a function to Sem.
type semFunc func(ctx context.Context) (func(context.Context) error, error)

func (f semFunc) Acquire(ctx context.Context) (func(context.Context) error, error) { return f(ctx) }

// trySem adapts two functions to TrySem.
type trySem struct {
	acquire, try semFunc
}

func (t trySem) Acquire(ctx context.Context) (func(context.Context) error, error) {
	return t.acquire(ctx)
}

func (t trySem) TryAcquire(ctx context.Context) (func(context.Context) error, error) {
	return t.try(ctx)
}

// errNoPermit is a failed TryAcquire of the peers.
var errNoPermit = errors.New("no permit free")
