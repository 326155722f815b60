package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// The first scene's workload.
const (
	contentionRounds = 4                      // holds per worker
	contentionHold   = 100 * time.Millisecond // work under the lock
	contentionThink  = 130 * time.Millisecond // work between two holds
)

// worker is one goroutine of the first scene.
type worker struct {
	who    string // "A/worker-1"
	client string // "A" or "B"
	m      *rlock.Mutex
}

// turn is the last release of the first scene's lock, read by the worker that
// takes it next.
type turn struct {
	mu     sync.Mutex
	who    string    // the worker that released
	client string    // its client
	at     time.Time // when its Unlock started; zero before the first release
}

// contention: four workers, two per client, take turns on one lock.
func (d *demo) contention(ctx context.Context) error {
	err := d.begin(ctx, "1/5  Taking turns: 4 workers in 2 processes share orders:42",
		"Watch: one holder at a time, and each release passes the lock on within a few milliseconds.",
		"Inside a process the release script hands it straight to the next waiting goroutine; when",
		"none waits there, it publishes the release and the other process's waiter wakes. (After 3",
		"hand-offs in a row it publishes anyway, so that one busy process cannot keep the lock.)")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tr := &turn{}
	var wg sync.WaitGroup
	for i, w := range d.workers("orders:42") {
		wg.Go(func() {
			if err := d.work(ctx, w, tr, time.Duration(i)*5*time.Millisecond); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// workers returns the first scene's workers on the lock short: two of A, two of B.
func (d *demo) workers(short string) []worker {
	return []worker{
		{who: "A/worker-1", client: "A", m: d.a.NewMutex(d.key(short))},
		{who: "A/worker-2", client: "A", m: d.a.NewMutex(d.key(short))},
		{who: "B/worker-3", client: "B", m: d.b.NewMutex(d.key(short))},
		{who: "B/worker-4", client: "B", m: d.b.NewMutex(d.key(short))},
	}
}

// work runs a worker's rounds, starting after delay.
func (d *demo) work(ctx context.Context, w worker, tr *turn, delay time.Duration) error {
	if err := sleep(ctx, delay); err != nil {
		return err
	}
	for range contentionRounds {
		if err := d.round(ctx, w, tr); err != nil {
			return fmt.Errorf("%s: %w", w.who, err)
		}
		if err := sleep(ctx, contentionThink); err != nil {
			return err
		}
	}
	return nil
}

// round takes the lock (waiting if busy), works under it and releases it.
func (d *demo) round(ctx context.Context, w worker, tr *turn) error {
	short := d.short(w.m.Name())
	start := time.Now()
	lease, err := w.m.TryLock(ctx)
	waited := errors.Is(err, rlock.ErrNotAcquired)
	if waited {
		d.tl.say(w.who, "waits for %s", short)
		lease, err = w.m.Lock(ctx)
	}
	if err != nil {
		return err
	}
	d.tl.say(w.who, "holds %s (count 1)%s", short, d.took(w, tr, start, waited))
	if err := sleep(ctx, contentionHold); err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	tr.mu.Lock()
	tr.who, tr.client, tr.at = w.who, w.client, time.Now()
	tr.mu.Unlock()
	d.tl.say(w.who, "releases %s", short)
	return lease.Unlock(ctx)
}

// took records an acquisition by w that began at start, and says how the lock
// came to w: free, or passed on by the last release.
func (d *demo) took(w worker, tr *turn, start time.Time, waited bool) string {
	now := time.Now()
	if !waited {
		d.st.held(0)
		return ": it was free"
	}
	d.st.held(now.Sub(start))
	tr.mu.Lock()
	who, client, at := tr.who, tr.client, tr.at
	tr.mu.Unlock()
	if at.IsZero() {
		return fmt.Sprintf(" after waiting %s", ms(now.Sub(start)))
	}
	d.st.passed(now.Sub(at), client == w.client)
	how := "inside " + client
	if client != w.client {
		how = "from " + client + " to " + w.client + ", by pub/sub"
	}
	return fmt.Sprintf(": released by %s → took it after %s (%s; waited %s)", who, ms(now.Sub(at)), how, ms(now.Sub(start)))
}
