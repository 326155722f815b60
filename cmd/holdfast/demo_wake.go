package main

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// actor is a named worker of one client.
type actor struct {
	who string // "B/reporter"
	c   *rlock.Client
}

// wake is what a waiter of scene 3 got from Lock, and when.
type wake struct {
	lease      *rlock.Lease
	start, got time.Time // Lock called, returned
	err        error
}

// wakeUp: a waiter blocked in Lock is woken by the release itself, from the
// other process and from the same one.
func (d *demo) wakeUp(ctx context.Context) error {
	err := d.begin(ctx, "3/5  Woken at release: waiting without polling, on reports:daily",
		"Watch: the waiter blocks in Lock and sends nothing. The holder unlocks with most of its",
		"lease left, yet the waiter holds the lock within a millisecond or so: woken by the release's",
		"pub/sub message from the other process, or handed the lock by the release in the same one.")
	if err != nil {
		return err
	}
	const short = "reports:daily"
	nightly := actor{"A/nightly", d.a}
	if err := d.handover(ctx, short, nightly, actor{"B/reporter", d.b}); err != nil {
		return err
	}
	return d.handover(ctx, short, nightly, actor{"A/mailer", d.a})
}

// handover: holder takes the lock short, waiter waits for it, holder releases
// it; it prints how long after the release the waiter held it.
func (d *demo) handover(ctx context.Context, short string, holder, waiter actor) error {
	m := holder.c.NewMutex(d.key(short))
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	d.st.held(0)
	d.tl.say(holder.who, "holds %s", short)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	woke := make(chan wake, 1)
	go d.wait(wctx, waiter, short, woke)
	released, err := d.release(ctx, holder.who, m, lease)
	if err != nil {
		cancel()
		if w := <-woke; w.lease != nil {
			unlockQuietly(ctx, w.lease)
		}
		return err
	}
	return d.woken(ctx, waiter, holder, short, released, <-woke)
}

// wait is the waiter's goroutine of handover: it blocks in Lock and sends what
// it got on woke.
func (d *demo) wait(ctx context.Context, waiter actor, short string, woke chan<- wake) {
	d.tl.say(waiter.who, "waits for %s (blocked in Lock)", short)
	start := time.Now()
	lease, err := waiter.c.NewMutex(d.key(short)).Lock(ctx)
	woke <- wake{lease: lease, start: start, got: time.Now(), err: err}
}

// release works holderWork under lease, then unlocks it, saying how much of
// its lease was left. It returns when the Unlock started.
func (d *demo) release(ctx context.Context, who string, m *rlock.Mutex, lease *rlock.Lease) (time.Time, error) {
	if err := sleep(ctx, holderWork); err != nil {
		unlockQuietly(ctx, lease)
		return time.Time{}, err
	}
	ttl, err := m.RemainTTL(ctx)
	if err != nil {
		unlockQuietly(ctx, lease)
		return time.Time{}, err
	}
	d.tl.say(who, "releases %s with %s of its lease left (PTTL): a waiter sleeping on the TTL would wait that long",
		d.short(m.Name()), ms(ttl))
	at := time.Now()
	return at, lease.Unlock(ctx)
}

// woken prints and records how the waiter got the lock after the release at
// released, then releases it.
func (d *demo) woken(ctx context.Context, waiter, holder actor, short string, released time.Time, w wake) error {
	if w.err != nil {
		return w.err
	}
	same := waiter.c == holder.c
	how := "woken by the release's pub/sub message"
	if same {
		how = "handed the lock by the release script, same client"
	}
	d.st.held(w.got.Sub(w.start))
	d.st.passed(w.got.Sub(released), same)
	d.tl.say(waiter.who, "holds %s %s after the release: %s", short, ms(w.got.Sub(released)), how)
	d.tl.say(waiter.who, "releases %s", short)
	return w.lease.Unlock(ctx)
}
