package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// The demo's pace.
const (
	demoWatchdog = time.Second // both clients' watchdog timeout: renewals every third of it
	readPause    = time.Second // after a scene's header, to read it
)

// Durations of scenes 2 to 5.
const (
	sectionWork  = 150 * time.Millisecond  // work in each part of the reentrant section
	holderWork   = 400 * time.Millisecond  // how long the holder of scene 3 keeps the lock
	longJob      = 2500 * time.Millisecond // the watchdog scene's job: 2.5 times the timeout
	ttlSample    = 25 * time.Millisecond   // how often the watchdog scene reads PTTL
	delAfter     = 400 * time.Millisecond  // when the lost-lock scene deletes the key
	lossDeadline = 3 * time.Second         // how long the loss may take to be reported
)

// demo is what the scenes share: the timeline, the server, the two clients that
// stand for two processes, and the statistics of the summary.
type demo struct {
	tl     *timeline
	rdb    redis.UniversalClient
	prefix string        // of every key name
	a, b   *rlock.Client // processes "A" and "B"
	st     stats
	lost   chan string // lock names reported by OnLost (short names)
}

// runDemo plays every scene on srv, then the summary. The clients are closed
// when it returns.
func runDemo(ctx context.Context, srv *demoServer, tl *timeline) error {
	d, err := newDemo(srv, tl)
	if err != nil {
		return err
	}
	defer d.close()
	d.intro(srv.where)
	scenes := []func(context.Context) error{d.contention, d.reentrant, d.wakeUp, d.watchdog, d.lostLock}
	for _, scene := range scenes {
		if err := scene(ctx); err != nil {
			return err
		}
	}
	d.summary()
	return tl.failed()
}

// newDemo makes the two clients on srv, their lost holds reported on tl.
func newDemo(srv *demoServer, tl *timeline) (*demo, error) {
	d := &demo{tl: tl, rdb: srv.rdb, prefix: srv.prefix, lost: make(chan string, 8)}
	var err error
	if d.a, err = d.newClient("A"); err != nil {
		return nil, err
	}
	if d.b, err = d.newClient("B"); err != nil {
		_ = d.a.Close()
		return nil, err
	}
	return d, nil
}

// newClient returns an rlock.Client with the demo's short watchdog timeout
// whose lost holds are printed as "<label>/OnLost".
func (d *demo) newClient(label string) (*rlock.Client, error) {
	onLost := func(name string, err error) {
		name = d.short(name)
		d.st.add(func(s *stats) { s.lost++ })
		d.tl.say(label+"/OnLost", "WithOnLost callback: %s lost: %v", name, err)
		select {
		case d.lost <- name:
		default:
		}
	}
	// no log (WithLogger(nil)): the demo tells its losses in its own timeline
	return rlock.New(d.rdb, rlock.WithWatchdogTimeout(demoWatchdog), rlock.WithOnLost(onLost), rlock.WithLogger(nil))
}

// close closes both clients, waiting for their goroutines.
func (d *demo) close() {
	_ = d.a.Close()
	_ = d.b.Close()
}

// key returns the Redis name of the demo's lock short.
func (d *demo) key(short string) string { return d.prefix + short }

// short returns the name of a lock without the demo's prefix.
func (d *demo) short(key string) string { return strings.TrimPrefix(key, d.prefix) }

// intro prints what the demo is about to show.
func (d *demo) intro(where string) {
	d.tl.note("holdfast demo: Redisson's locks in Go, on %s.", where)
	d.tl.note("Two rlock.Clients, A and B, stand for two processes; workers are goroutines.")
	d.tl.note("Both clients run with WithWatchdogTimeout(%v): the watchdog renews holds every %s.",
		demoWatchdog, ms(demoWatchdog/3))
	if d.prefix != "" {
		d.tl.note("Key names get the prefix %q, and are deleted at the end.", d.prefix)
	}
}

// begin prints a scene's header, then leaves time to read it.
func (d *demo) begin(ctx context.Context, title string, notes ...string) error {
	d.tl.header(title, notes...)
	return sleep(ctx, readPause)
}

// summary prints the demo's counts and measures.
func (d *demo) summary() {
	s := &d.st
	s.mu.Lock()
	defer s.mu.Unlock()
	d.tl.header("Summary")
	row := func(label, format string, args ...any) {
		d.tl.note("  %-18s "+format, append([]any{label}, args...)...)
	}
	row("holds", "%d acquisitions (re-entries included)", s.holds)
	row("passed on", "%d times from a release to a waiter: %d inside a client, %d to the other client (pub/sub wake-ups)",
		len(s.passes), s.inside, s.across)
	row("release → acquire", "p50 %s, p99 %s", ms(percentile(s.passes, 50)), ms(percentile(s.passes, 99)))
	row("wait when busy", "p50 %s, p99 %s (%d waits)", ms(percentile(s.waits, 50)), ms(percentile(s.waits, 99)), len(s.waits))
	row("watchdog", "%d renewals seen, with a %v timeout", s.renewals, demoWatchdog)
	row("lost locks", "%d reported (WithOnLost, Lease.Done)", s.lost)
}

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// unlockQuietly gives back lease on a failure path, even when ctx is done.
func unlockQuietly(ctx context.Context, lease *rlock.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = lease.Unlock(ctx)
}

// errorf returns an error of the scene about the lock short.
func (d *demo) errorf(short, format string, args ...any) error {
	return fmt.Errorf("%s: %s", short, fmt.Sprintf(format, args...))
}
