// Package libs puts every lock library under test behind one small
// interface, so the harness drives them all alike.
package libs

import (
	"context"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Locker acquires one named lock. Every Lock call is a fresh, non-reentrant
// owner; the returned unlock releases exactly that acquisition.
type Locker interface {
	Lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// Instance is one process's use of a library: one client (and whatever the
// library shares per client), used by all goroutines of the process.
type Instance interface {
	// NewLocker returns a Locker for the lock name, for one goroutine.
	NewLocker(name string) Locker
	// Ping sends PING through the library's own client.
	Ping(ctx context.Context) error
	// RoundTrips returns how many commands or pipelines the library's client
	// has sent so far.
	RoundTrips() int64
	// Close releases the client.
	Close() error
}

// Variant is one more way of using a library, measured like its uncontended
// Lock+Unlock cycle (interleaved with it, in a row of its own).
type Variant struct {
	// Name is the row's name.
	Name string
	// Op runs one operation.
	Op func(ctx context.Context) error
}

// VariantInstance is an Instance that offers Variants.
type VariantInstance interface {
	Instance
	// Variants prepares the variants on lock names beginning with prefix.
	// Whatever they hold until the end is released by Close.
	Variants(ctx context.Context, prefix string) ([]Variant, error)
}

// ReadLockInstance is an Instance that also offers the read side of a
// reader/writer lock, which many goroutines hold at once.
type ReadLockInstance interface {
	Instance
	// NewReadLocker returns a Locker on the read side of the reader/writer
	// lock name, for one goroutine.
	NewReadLocker(name string) Locker
}

// Client kinds, for choosing the PING yardstick.
const (
	GoRedis = "go-redis"
	Rueidis = "rueidis"
)

// Library describes one lock implementation with one set of settings.
type Library struct {
	// Name identifies the library and settings in tables and flags.
	Name string
	// Module is the Go module the library comes from (for its version).
	Module string
	// Settings states every setting the benchmark uses.
	Settings string
	// Client is GoRedis or Rueidis.
	Client string
	// Open connects to the Redis server at addr.
	Open func(addr string) (Instance, error)
}

// Version returns the version of l.Module linked into this binary.
func (l Library) Version() string { return ModuleVersion(l.Module) }

// Row returns the library's row in a report's table of libraries.
func (l Library) Row() (name, version, settings string) { return l.Name, l.Version(), l.Settings }

var registry = NewRegistry(func(l Library) string { return l.Name })

func register(l Library) { registry.Add(l) }

// All returns the registered libraries, holdfast first when it is built in.
func All() []Library { return registry.All() }

// ByName finds a registered library.
func ByName(name string) (Library, bool) { return registry.ByName(name) }

// IsHoldfast reports whether the library is one of holdfast's (not a peer).
func IsHoldfast(name string) bool { return strings.HasPrefix(name, Holdfast) }

// Registry holds the implementations under test of one kind (locks,
// semaphores), in the order they registered.
type Registry[T any] struct {
	list []T
	name func(T) string
}

// NewRegistry returns an empty Registry; name gives an implementation's
// name.
func NewRegistry[T any](name func(T) string) *Registry[T] { return &Registry[T]{name: name} }

// Add registers l.
func (r *Registry[T]) Add(l T) { r.list = append(r.list, l) }

// All returns the registered implementations, holdfast's first.
func (r *Registry[T]) All() []T {
	var out []T
	for _, holdfast := range []bool{true, false} {
		for _, l := range r.list {
			if IsHoldfast(r.name(l)) == holdfast {
				out = append(out, l)
			}
		}
	}
	return out
}

// ByName finds a registered implementation.
func (r *Registry[T]) ByName(name string) (T, bool) {
	for _, l := range r.list {
		if r.name(l) == name {
			return l, true
		}
	}
	var zero T
	return zero, false
}

// Names of holdfast's locks in the tables (all begin with Holdfast).
const (
	// Holdfast is the name of holdfast's Mutex.
	Holdfast = "holdfast"
	// HoldfastSpin is the name of holdfast's SpinMutex.
	HoldfastSpin = "holdfast-spin"
	// HoldfastFair is the name of holdfast's FairMutex.
	HoldfastFair = "holdfast-fair"
)

// ModuleVersion returns the version of a dependency of this binary,
// "(devel)" for a replaced module, or "?" when unknown.
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return "local checkout " + m.Replace.Path
			}
			return m.Version
		}
	}
	return "?"
}

// counter is a go-redis hook counting commands and pipelines sent through a
// client. Commands of a *redis.PubSub do not pass through process hooks.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// NewGoRedis returns a go-redis client with default options and a counting
// hook, and a function reading the count.
func NewGoRedis(addr string) (*redis.Client, func() int64) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := &counter{}
	rdb.AddHook(c)
	return rdb, c.n.Load
}

// goRedisBase holds what every go-redis based Instance has.
type goRedisBase struct {
	rdb   *redis.Client
	count func() int64
}

func newGoRedisBase(addr string) goRedisBase {
	rdb, count := NewGoRedis(addr)
	return goRedisBase{rdb: rdb, count: count}
}

func (b goRedisBase) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }
func (b goRedisBase) RoundTrips() int64              { return b.count() }
func (b goRedisBase) Close() error                   { return b.rdb.Close() }

// GoRedisSettings describes the client every go-redis based library gets.
const GoRedisSettings = "go-redis client with default options (pool 10 × GOMAXPROCS, MaxRetries 3, RESP3)"
