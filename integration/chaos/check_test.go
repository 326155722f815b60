package chaos

import (
	"context"
	"fmt"
	"github.com/holdfast-go/holdfast/lua"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// nodes runs f on every primary (one client for standalone and Sentinel),
// one at a time: go-redis calls ForEachMaster's function on concurrent
// goroutines, and f's callers add up what it finds.
func (e *env) nodes(f func(ctx context.Context, c redis.Cmdable) error) error {
	if cc, ok := e.admin.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(e.ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return f(ctx, c)
		})
	}
	return f(e.ctx, e.admin)
}

// subscriptions waits up to 5 s for the idle workers' subscriptions to the
// scenario's channels to go, and returns how many are left.
func (e *env) subscriptions() int {
	n := 0
	deadline := time.Now().Add(5 * time.Second)
	for {
		n = 0
		_ = e.nodes(func(ctx context.Context, c redis.Cmdable) error {
			pat := "*" + e.cfg.Prefix + "*"
			n += len(c.PubSubChannels(ctx, pat).Val()) + len(c.PubSubShardChannels(ctx, pat).Val())
			return nil
		})
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		<-time.After(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// kept reports whether a key left after the scenario is meant to stay: a
// semaphore, a latch still counting, a fencing token counter. (Unlock and
// request latches with a time to live are left too: they make a resent call
// count once, and expire after go-redis' retry window.)
func (e *env) kept(key string) bool {
	if strings.HasPrefix(key, "redisson_lock_token:") {
		return true
	}
	// The record of an election's leader that died or lost its lock without
	// resigning: never read (its holder does not hold the lock), overwritten
	// by the next campaign.
	if contains(e.s.Kinds, KindElection) && strings.HasSuffix(key, lua.LeaderSuffix) {
		return true
	}
	// A killed waiter of a FairMutex keeps its place in the queue until the
	// fair wait timeout (5 min) has passed and another caller's script drops
	// it: Redisson's protocol, inherent to the fair lock (docs/safety.md).
	if e.s.Fault == "sigkill" && (strings.HasPrefix(key, "redisson_lock_queue:") || strings.HasPrefix(key, "redisson_lock_timeout:")) {
		return true
	}
	for _, k := range []string{KindSemaphore, KindExpirable, KindLatch} {
		for i := range e.s.Names {
			if key == objectName(e.cfg.Prefix, k, i) {
				return true
			}
		}
	}
	return false
}

// leftovers waits up to a lease and 5 s for the holds of killed or frozen
// workers to expire, and returns the scenario's keys that should be gone but
// are not (with the semaphores' missing permits).
func (e *env) leftovers() []string {
	var left []string
	deadline := time.Now().Add(max(e.s.Lease, e.s.FixedLease) + 5*time.Second)
	for {
		left = left[:0]
		_ = e.nodes(func(ctx context.Context, c redis.Cmdable) error {
			iter := c.Scan(ctx, 0, "*"+e.cfg.Prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				k := iter.Val()
				latch := (strings.HasPrefix(k, "redisson_unlock_latch:") || strings.HasPrefix(k, "holdfast_request:")) &&
					c.PTTL(ctx, k).Val() != -1 // a TTL, or gone since the SCAN
				if !latch && !e.kept(iter.Val()) {
					left = append(left, iter.Val())
				}
			}
			return iter.Err()
		})
		left = append(left, e.permitsMissing()...)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-time.After(100 * time.Millisecond) // polling a condition with a deadline
	}
}

// permitsMissing lists the semaphores that do not have all their permits.
func (e *env) permitsMissing() []string {
	var out []string
	for i := range e.s.Names {
		if contains(e.s.Kinds, KindSemaphore) {
			name := objectName(e.cfg.Prefix, KindSemaphore, i)
			if n, err := e.c.NewSemaphore(name).AvailablePermits(e.ctx); err == nil && n != int64(e.s.Permits) {
				out = append(out, fmt.Sprintf("%s: %d permits of %d", name, n, e.s.Permits))
			}
		}
		if contains(e.s.Kinds, KindExpirable) {
			name := objectName(e.cfg.Prefix, KindExpirable, i)
			if n, err := e.c.NewExpirableSemaphore(name).AvailablePermits(e.ctx); err == nil && n != int64(e.s.Permits) {
				out = append(out, fmt.Sprintf("%s: %d permits of %d", name, n, e.s.Permits))
			}
		}
	}
	return out
}

// check runs the checker on the history and gathers the scenario's line.
func (e *env) check(subs int) result {
	counters, err := e.res.Totals(e.ctx, e.cfg.Prefix)
	require.NoError(e.t, err)
	e.mu.Lock()
	ops := append([]Op(nil), e.ops...)
	e.mu.Unlock()
	rep := Check(ops, Spec{Permits: e.s.Permits, Counters: counters, Strict: e.s.Strict, Partition: e.window})
	left := e.leftovers()
	r := result{Scenario: e.s.Name, Fault: e.s.Fault, Kinds: e.s.Kinds, Report: rep, Orphans: len(left),
		OrphanSubs: subs, LeakedGor: e.leaked, WorkerKilled: e.killed}
	r.Verdict = rep.Verdict()
	if r.Orphans > 0 || r.OrphanSubs > 0 || r.LeakedGor > 0 {
		r.Verdict = "FAIL"
	}
	r.Classified = classify(r)
	for _, l := range left {
		r.Details = append(r.Details, "orphan: "+l)
	}
	for _, d := range r.Details {
		if !strings.HasPrefix(d, "inherent") && len(r.FirstProblems) < 5 {
			r.FirstProblems = append(r.FirstProblems, d)
		}
	}
	return r
}

// classify says what kind of result r is: clean, only effects inherent to
// leases, or a bug.
func classify(r result) string {
	switch {
	case r.Verdict == "FAIL":
		return "bug"
	case r.Inherent > 0 || r.StaleWrites > 0:
		return "inherent to leases"
	}
	return "clean"
}
