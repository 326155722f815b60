package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/holdfast-go/holdfast/watchdog"
)

// watchdog: a job longer than the watchdog timeout keeps its lock, renewed.
func (d *demo) watchdog(ctx context.Context) error {
	err := d.begin(ctx, fmt.Sprintf("4/5  Watchdog: a %v job on backup:nightly, with a %v lease", longJob, demoWatchdog),
		"Watch: Lock without WithLeaseTime gives a watchdog lease. PTTL runs down, and goes back up",
		fmt.Sprintf("at each renewal (every %s): the lock outlives its timeout while the job runs.", ms(demoWatchdog/3)))
	if err != nil {
		return err
	}
	const who, short = "A/backup", "backup:nightly"
	m := d.a.NewMutex(d.key(short))
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	d.st.held(0)
	start := time.Now()
	ttl, err := m.RemainTTL(ctx)
	if err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	d.tl.say(who, "holds %s, PTTL %s; the job starts", short, ms(ttl))
	n, err := d.watchTTL(ctx, m, lease, start, ttl)
	if err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	took := time.Since(start)
	d.tl.say(who, "job done after %s (%.1f× the timeout, %d renewals): unlocks", ms(took), took.Seconds()/demoWatchdog.Seconds(), n)
	return lease.Unlock(ctx)
}

// watchTTL reads m's PTTL every ttlSample until the job is over, printing each
// renewal (PTTL back up) and when the hold outlives the watchdog timeout. It
// returns the renewals seen.
func (d *demo) watchTTL(ctx context.Context, m *rlock.Mutex, lease *rlock.Lease, start time.Time, prev time.Duration) (int, error) {
	short := d.short(m.Name())
	tick := time.NewTicker(ttlSample)
	defer tick.Stop()
	renewals, past := 0, false
	for time.Since(start) < longJob {
		select {
		case <-lease.Done():
			return renewals, fmt.Errorf("%s lost during the job: %w", short, lease.Err())
		case <-ctx.Done():
			return renewals, context.Cause(ctx)
		case <-tick.C:
		}
		ttl, err := m.RemainTTL(ctx)
		if err != nil {
			return renewals, err
		}
		if ttl > prev+20*time.Millisecond {
			renewals++
			d.st.add(func(s *stats) { s.renewals++ })
			d.tl.say("A/watchdog", "renewed %s: PTTL %s → %s", short, ms(prev), ms(ttl))
		}
		if !past && time.Since(start) > demoWatchdog {
			past = true
			d.tl.say("A/backup", "%s into the job: past the %v timeout, still held (PTTL %s)", ms(time.Since(start)), demoWatchdog, ms(ttl))
		}
		prev = ttl
	}
	return renewals, nil
}

// lostLock: the key of a held lock is deleted from outside; the holder learns
// it through WithOnLost and Lease.Done.
func (d *demo) lostLock(ctx context.Context) error {
	err := d.begin(ctx, "5/5  Lost lock: someone deletes payments:9 while its job runs",
		"Watch: the key is deleted from outside (DEL). On a Redis server, client tracking tells the holder",
		"at once; the embedded server has no client tracking, so the watchdog's next renewal finds it gone.",
		"Either way the WithOnLost callback reports it, Lease.Done() closes with Lease.Err() matching",
		"ErrLockLost, and the job stops instead of carrying on without the lock.")
	if err != nil {
		return err
	}
	const who, short = "A/exporter", "payments:9"
	lease, err := d.a.NewMutex(d.key(short)).Lock(ctx)
	if err != nil {
		return err
	}
	d.st.held(0)
	d.tl.say(who, "holds %s; works, watching lease.Done()", short)
	done := lease.Done()
	if err := sleep(ctx, delAfter); err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	d.tl.say("outside", "DEL %s (someone deletes the key by hand)", short)
	deleted := time.Now()
	if err := d.rdb.Del(ctx, d.key(short)).Err(); err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	at, err := d.awaitLoss(ctx, done, short)
	if err != nil {
		unlockQuietly(ctx, lease)
		return err
	}
	if !errors.Is(lease.Err(), rlock.ErrLockLost) {
		return d.errorf(short, "lease.Err() = %v, want ErrLockLost", lease.Err())
	}
	how := "found by the watchdog's next renewal"
	if errors.Is(lease.Err(), watchdog.ErrInvalidated) {
		how = "told by client tracking"
	}
	d.tl.say(who, "lease.Done() closed %s after the DEL (%s), lease.Err() matches ErrLockLost: the job stops",
		ms(at.Sub(deleted)), how)
	return d.unlockLost(ctx, who, lease)
}

// awaitLoss waits until done is closed and OnLost reported the lock short, and
// returns when done was closed.
func (d *demo) awaitLoss(ctx context.Context, done <-chan struct{}, short string) (time.Time, error) {
	deadline := time.NewTimer(lossDeadline)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		return time.Time{}, d.errorf(short, "the loss was not reported within %v", lossDeadline)
	case <-ctx.Done():
		return time.Time{}, context.Cause(ctx)
	}
	at := time.Now()
	for {
		select {
		case name := <-d.lost:
			if name == short {
				return at, nil
			}
		case <-deadline.C:
			return time.Time{}, d.errorf(short, "OnLost was not called within %v", lossDeadline)
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		}
	}
}

// unlockLost shows that the lost lease's Unlock changes nothing.
func (d *demo) unlockLost(ctx context.Context, who string, lease *rlock.Lease) error {
	err := lease.Unlock(ctx)
	if !errors.Is(err, rlock.ErrNotHeld) || !errors.Is(err, rlock.ErrLockLost) {
		return d.errorf(d.short(lease.Name()), "Unlock of the lost lease: got %v, want ErrNotHeld and ErrLockLost", err)
	}
	d.tl.say(who, "Unlock returns ErrNotHeld (and ErrLockLost): nothing to release")
	return nil
}
