package rlock_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
)

// callLog is an observer of its own: it prints each call's span name and
// outcome, and counts the holds that ended by outcome. holdfastotel's
// NewObserver is the ready-made one for OpenTelemetry.
type callLog struct {
	mu    sync.Mutex
	ended map[observe.HoldOutcome]int
}

func (o *callLog) Start(ctx context.Context, call observe.Call) context.Context { return ctx }

func (o *callLog) End(ctx context.Context, call observe.Call, res observe.Result) {
	fmt.Printf("%s: %v (waited %v)\n", observe.SpanName(call.Kind, call.Op), res.Outcome, res.Waited)
}

func (o *callLog) HoldStart(observe.Hold) {}

func (o *callLog) HoldEnd(h observe.Hold, outcome observe.HoldOutcome, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended[outcome]++
}

// An observer sees every public call of the client's objects, and the holds,
// waits, renewals and subscriptions of the interfaces it implements.
func ExampleWithObserver() {
	obs := &callLog{ended: map[observe.HoldOutcome]int{}}
	c, closeAll := exampleClient(rlock.WithObserver(obs)) // rlock.New(rdb, rlock.WithObserver(obs))
	defer closeAll()
	ctx := context.Background()

	m := c.NewMutex("orders:42")
	lease, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, _ = m.TryLock(ctx)                                          // another owner: not acquired, an outcome
	_, _ = m.TryLock(ctx, rlock.WithWaitTime(10*time.Millisecond)) // a wait that runs out
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("holds released:", obs.ended[observe.HoldReleased])
	// Output:
	// holdfast.Mutex.Lock: ok (waited false)
	// holdfast.Mutex.TryLock: not_acquired (waited false)
	// holdfast.Mutex.TryLock: timeout (waited true)
	// holdfast.Lease.Unlock: ok (waited false)
	// holds released: 1
}
