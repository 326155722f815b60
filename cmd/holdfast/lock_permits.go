package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// takePermit creates the semaphore NAME with --permits permits if it does not
// exist, then waits for one of its permits (at most -w, or one attempt with
// -n) and records it.
func (s *lockSession) takePermit(ctx context.Context) error {
	sem := s.c.NewExpirableSemaphore(s.cfg.name)
	if err := s.initPermits(ctx, sem); err != nil {
		return err
	}
	var p *rlock.Permits
	var err error
	if s.cfg.noWait || s.cfg.wait > 0 {
		p, err = sem.TryAcquire(ctx, 1, s.cfg.tryPermitOptions()...)
	} else {
		p, err = sem.Acquire(ctx, 1, s.cfg.permitOptions()...)
	}
	if err == nil {
		s.held = permitsHeld{p}
	}
	return err
}

// initPermits gives the semaphore --permits permits if it has no key yet
// (TrySetPermits, as "consul lock -n" creates its semaphore on first use). A
// semaphore that exists with another total is used as it is, with a warning
// on stderr (even with -q): its holders may count on that total.
func (s *lockSession) initPermits(ctx context.Context, sem *rlock.ExpirableSemaphore) error {
	created, err := sem.TrySetPermits(ctx, s.cfg.permits)
	if err != nil || created {
		return err
	}
	total, err := sem.TotalPermits(ctx)
	if err != nil {
		return err
	}
	if total != s.cfg.permits {
		fmt.Fprintf(s.io.err, "holdfast lock: warning: the semaphore %q has %d permits in all, not %d (--permits): using it as it is\n",
			s.cfg.name, total, s.cfg.permits)
	}
	return nil
}

// permitOptions returns the options of a permit's acquisition: a fixed lease
// with --lease, else none (a watchdog-renewed permit).
func (cfg *lockConfig) permitOptions() []rlock.AcquireOption {
	if cfg.lease > 0 {
		return []rlock.AcquireOption{rlock.WithLeaseTime(cfg.lease)}
	}
	return nil
}

// tryPermitOptions returns the options of a permit's acquisition that waits
// at most -w.
func (cfg *lockConfig) tryPermitOptions() []rlock.TryOption {
	var opts []rlock.TryOption
	if cfg.lease > 0 {
		opts = append(opts, rlock.WithLeaseTime(cfg.lease))
	}
	if cfg.wait > 0 {
		opts = append(opts, rlock.WithWaitTime(cfg.wait))
	}
	return opts
}

// describePermits says how many permits of the semaphore name are available
// and acquired, and who holds the first ones (their ids and leases, earliest
// expiry first), for a message. It never fails: what it cannot read, it
// leaves out.
func describePermits(ctx context.Context, rdb redis.UniversalClient, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	var (
		value *redis.StringCmd
		count *redis.IntCmd
		first *redis.ZSliceCmd
	)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		value = p.Get(ctx, name)
		count = p.ZCard(ctx, lua.PermitTimeoutsName(name))
		first = p.ZRangeWithScores(ctx, lua.PermitTimeoutsName(name), 0, maxHoldersShown-1)
		return nil
	})
	if err != nil && !absent(err) {
		return "holders unknown (" + err.Error() + ")"
	}
	available := value.Val()
	if value.Err() != nil {
		available = "no semaphore (0)"
	}
	s := fmt.Sprintf("%s available, %d acquired", available, count.Val())
	ps := permitsOf(first.Val(), time.Now())
	if len(ps) == 0 {
		return s
	}
	held := make([]string, len(ps))
	for i, p := range ps {
		held[i] = p.ID + " (" + permitLease(p) + ")"
	}
	s += ": " + strings.Join(held, ", ")
	if more := count.Val() - int64(len(ps)); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
