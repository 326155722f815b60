package chaos

import (
	"cmp"
	"context"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/redis/go-redis/v9"
)

// A fault injects itself once and returns the worker it aimed at (-1: all,
// noFault: nothing done) and whether it can end holds (takeover is measured
// after those).
type fault func(e *env) (target int, endsHolds bool)

// faults are the faults by name.
var faults = map[string]fault{
	"none":               func(*env) (int, bool) { return noFault, false },
	"sigkill":            (*env).killHolder,
	"sigstop":            (*env).stopHolder,
	"client-kill-normal": func(e *env) (int, bool) { return e.clientKill("normal"), false },
	"client-kill-pubsub": func(e *env) (int, bool) { return e.clientKill("pubsub"), false },
	"latency": func(e *env) (int, bool) {
		e.proxy.SetReplyDelay(time.Duration(5+rand.IntN(75)) * time.Millisecond)
		<-time.After(500 * time.Millisecond) // the fault's duration, by design
		e.proxy.SetReplyDelay(0)
		return -1, false
	},
	"drop-replies": func(e *env) (int, bool) { e.proxy.DropReplies(1 + rand.IntN(3)); return -1, false },
	"late-replies": (*env).lateReplies,
	"conn-reset":   func(e *env) (int, bool) { e.proxy.CloseConns(); return -1, false },
	"restart":      func(e *env) (int, bool) { e.srv.Restart(e.t); e.reSetUp(); return -1, true },
	"flushall": func(e *env) (int, bool) {
		e.admin.FlushAll(e.ctx)
		e.reSetUp()
		return -1, true
	},
	"script-flush":      func(e *env) (int, bool) { e.admin.ScriptFlush(e.ctx); return -1, false },
	"sentinel-failover": (*env).sentinelFailover,
	"cluster-failover":  (*env).clusterFailover,
}

// lateReplies holds every reply back past the lease: each command runs at
// once and its reply arrives after the lease its acquisition asked for. While
// the late replies land, no request reaches Redis: the give-backs of late
// acquisitions are lost (the workers' release timeout ends them first), and
// the acquisitions are sent again with the same ids or counts once the
// connections are reset. Holders learn of losses (their renewals do not get
// through), and leases run out in Redis, but no hold is taken from Redis
// before its expiry: two handles that say valid at once are a violation.
func (e *env) lateReplies() (int, bool) {
	lease := cmp.Or(e.s.FixedLease, e.s.Lease)
	delay := lease + rand.N(lease/2)
	e.proxy.SetReplyDelay(delay)
	<-time.After(lease)           // the fault's phases, by design: what is sent now is late
	e.proxy.SetDropRequests(true) // from here on, as its late replies land
	<-time.After(delay + 100*time.Millisecond)
	e.proxy.SetReplyDelay(0)
	e.proxy.SetDropRequests(false)
	e.proxy.CloseConns() // a command cut in the middle leaves its connection unusable
	return -1, false
}

// reSetUp creates the semaphores again after their data was lost.
func (e *env) reSetUp() {
	if err := setUp(e.ctx, e.c, e.cfg.Prefix, e.s.Kinds, e.s.Names, e.s.Permits); err != nil {
		e.t.Logf("set-up after data loss: %v", err)
	}
}

// pick returns a live worker at random, one that holds something (by its
// history so far) when there is one, waiting up to a second for one to hold:
// a fault aimed at a holder is the one that tests the holders.
func (e *env) pick() *redistest.Worker {
	deadline := time.Now().Add(time.Second)
	for {
		live, holding := e.candidates()
		if len(holding) > 0 {
			return holding[rand.IntN(len(holding))]
		}
		if !time.Now().Before(deadline) {
			return live[rand.IntN(len(live))]
		}
		<-time.After(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// candidates returns the live workers, and those of them that hold something.
func (e *env) candidates() (live, holding []*redistest.Worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.workers {
		if !e.dead[w] {
			live = append(live, w)
			if e.open[w.Index] > 0 {
				holding = append(holding, w)
			}
		}
	}
	return live, holding
}

// wasKilled reports whether the parent killed w.
func (e *env) wasKilled(w *redistest.Worker) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dead[w]
}

// killHolder SIGKILLs a worker (holding, most likely: workers hold most of
// the time) and starts another in its place.
func (e *env) killHolder() (int, bool) {
	w := e.pick()
	e.mu.Lock()
	e.dead[w] = true
	e.killed++
	e.mu.Unlock()
	_ = w.Signal(syscall.SIGKILL)
	<-w.Done()
	e.spawn()
	return w.Index, true
}

// stopHolder freezes a worker for twice the lease, then resumes it.
func (e *env) stopHolder() (int, bool) {
	w := e.pick()
	_ = w.Signal(syscall.SIGSTOP)
	<-time.After(2 * e.s.Lease) // the freeze is the fault, by design
	_ = w.Signal(syscall.SIGCONT)
	return w.Index, true
}

// clientKill kills every client connection of type (normal, pubsub) but the parent's.
func (e *env) clientKill(typ string) int {
	var err error
	if cc, ok := e.admin.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(e.ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Do(ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Err()
		})
	} else {
		err = e.admin.Do(e.ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Err()
	}
	if err != nil {
		return noFault
	}
	return -1
}

// sentinelFailover asks the Sentinels for a failover and waits until they
// name another primary.
func (e *env) sentinelFailover() (int, bool) {
	old, err := e.fo.Master(e.ctx)
	if err != nil {
		return noFault, false
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: e.fo.Sentinels[0].Addr})
	defer sc.Close()
	if sc.Failover(e.ctx, redistest.MasterName).Err() != nil {
		return noFault, false
	}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	_, _ = e.fo.WaitMasterChange(ctx, old)
	_, _ = e.fo.WaitSettled(ctx, nil)
	return -1, true
}

// clusterFailover promotes a random replica with CLUSTER FAILOVER and waits
// until it says it is a primary.
func (e *env) clusterFailover() (int, bool) {
	var replicas []*redistest.Server
	for _, n := range e.cl.Nodes() {
		role, err := roleOf(e.ctx, n.Addr)
		if err == nil && role == "slave" {
			replicas = append(replicas, n)
		}
	}
	if len(replicas) == 0 {
		return noFault, false
	}
	r := replicas[rand.IntN(len(replicas))]
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	if rc.Do(e.ctx, "CLUSTER", "FAILOVER").Err() != nil {
		return noFault, false
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if role, err := roleOf(e.ctx, r.Addr); err == nil && role == "master" {
			break
		}
		<-time.After(20 * time.Millisecond) // polling a condition with a deadline
	}
	return -1, true
}

// roleOf returns the ROLE of the server at addr.
func roleOf(ctx context.Context, addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return "", err
	}
	s, _ := v[0].(string)
	return s, nil
}
