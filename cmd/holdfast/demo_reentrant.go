package main

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// reentrant: an owner in ctx takes a lock it holds again; others stay out.
func (d *demo) reentrant(ctx context.Context) error {
	err := d.begin(ctx, "2/5  Reentrant: a nested critical section of one owner on invoices:7",
		"Watch: rlock.WithOwner(ctx) makes an owner; a nested Lock with that ctx re-enters at once",
		"(hold count 2), other owners are refused, and the lock is free only after both unlocks.")
	if err != nil {
		return err
	}
	const who, short = "A/billing", "invoices:7"
	m := d.a.NewMutex(d.key(short))
	octx := rlock.WithOwner(ctx)
	outer, err := m.Lock(octx)
	if err != nil {
		return err
	}
	d.st.held(0)
	d.tl.say(who, "Lock(%s) with an owner in ctx: holds (count %d)", short, d.holdCount(octx, m))
	if err := d.nested(octx, m, who); err != nil {
		unlockQuietly(octx, outer)
		return err
	}
	d.tl.say(who, "back in the outer section: count %d, still held", d.holdCount(octx, m))
	if err := sleep(ctx, sectionWork); err != nil {
		unlockQuietly(octx, outer)
		return err
	}
	if err := outer.Unlock(octx); err != nil {
		return err
	}
	locked, err := m.IsLocked(ctx)
	d.tl.say(who, "outer Unlock: count %d, IsLocked = %v", d.holdCount(octx, m), locked)
	return err
}

// nested is the inner critical section of the reentrant scene: it takes m again
// with the same owner, and shows other owners being refused.
func (d *demo) nested(octx context.Context, m *rlock.Mutex, who string) error {
	short := d.short(m.Name())
	start := time.Now()
	inner, err := m.Lock(octx)
	if err != nil {
		return err
	}
	d.st.held(0)
	d.tl.say(who, "nested Lock(%s), same ctx: re-entered in %s, holds (count %d)",
		short, ms(time.Since(start)), d.holdCount(octx, m))
	if err := d.refused(octx, short); err != nil {
		unlockQuietly(octx, inner)
		return err
	}
	if err := inner.Unlock(octx); err != nil {
		return err
	}
	d.tl.say(who, "nested Unlock: count %d", d.holdCount(octx, m))
	return nil
}

// refused shows that other owners, in A and in B, cannot take the lock short
// (WithOwner on ctx starts an owner of its own, hiding ctx's).
func (d *demo) refused(ctx context.Context, short string) error {
	for _, x := range []struct {
		who string
		c   *rlock.Client
	}{{"A/other", d.a}, {"B/auditor", d.b}} {
		_, err := x.c.NewMutex(d.key(short)).TryLock(rlock.WithOwner(ctx))
		if !errors.Is(err, rlock.ErrNotAcquired) {
			return d.errorf(short, "TryLock by another owner: got %v, want ErrNotAcquired", err)
		}
		d.tl.say(x.who, "TryLock(%s), another owner: busy (ErrNotAcquired)", short)
	}
	return sleep(ctx, sectionWork)
}

// holdCount returns ctx's owner's hold count on m, or -1 if it cannot be read.
func (d *demo) holdCount(ctx context.Context, m *rlock.Mutex) int {
	n, err := m.HoldCount(ctx)
	if err != nil {
		return -1
	}
	return n
}
