package chaos

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// netEnv is the network lab of a partition scenario: every server, Sentinel
// and worker process in a namespace of its own, joined by a bridge that the
// faults cut (redistest.Net). The resource lives on the admin host, which no
// fault touches.
type netEnv struct {
	lab      *redistest.Net
	fo       *redistest.Failover
	cl       *redistest.Cluster
	servers  []*redistest.Host // every server and Sentinel
	target   *redistest.Host   // the primary the holder is cut off with: the Sentinels', or the owner of the first object's slot (Cluster)
	moveFrom *redistest.Server // slot-migration: the target's server

	mu      sync.Mutex
	workers map[int]*redistest.Host // by worker index
}

// startLab starts the lab, the deployment in it (Deploy: sentinel, cluster),
// the resource, and the parent's clients.
func (e *env) startLab() {
	t, s := e.t, e.s
	n := &netEnv{lab: redistest.NewNet(t), workers: map[int]*redistest.Host{}}
	e.lab = n
	res := redistest.StartIn(t, n.lab.Admin())
	e.res = Resource{res.Client(t)}
	var args []string
	if s.MinReplicas {
		args = []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"}
	}
	e.cfg = Config{Deploy: s.Deploy, ResourceAddr: res.Addr, Prefix: "chaos:" + s.Name + ":", Kinds: s.Kinds,
		Names: s.Names, Goroutines: s.Goroutines, Lease: s.Lease, Work: s.Work, WaitBound: s.WaitBound,
		ReadTimeout: s.ReadTimeout, Acks: s.Acks, ReleaseTimeout: s.ReleaseTimeout, CloseKey: "chaos:close:" + s.Name,
		Pinned: true, NoFollowers: true, StopKey: "chaos:stop:" + s.Name}
	switch s.Deploy {
	case "sentinel":
		n.fo = redistest.StartFailoverIn(t, n.lab, 2, 3, args...)
		e.fo, e.cfg.Addrs, e.admin = n.fo, n.fo.SentinelAddrs(), n.fo.Client(t)
		for _, srv := range slices.Concat([]*redistest.Server{n.fo.Primary}, n.fo.Replicas, n.fo.Sentinels) {
			n.servers = append(n.servers, srv.Host())
		}
		n.target = n.fo.Primary.Host()
	case "cluster":
		n.cl = redistest.StartClusterIn(t, n.lab, 3, 1, args...)
		e.cl, e.cfg.Addrs, e.admin = n.cl, n.cl.Addrs(), n.cl.Client(t)
		n.servers = redistest.HostsOf(n.cl.Nodes()...)
		n.moveFrom = e.ownerOf(objectName(e.cfg.Prefix, s.Kinds[0], 0))
		n.target = n.moveFrom.Host()
	default:
		t.Fatalf("chaos: a partition scenario needs Deploy sentinel or cluster, not %q", s.Deploy)
	}
	c, err := rlock.New(e.admin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	e.c = c
	require.NoError(t, setUp(e.ctx, c, e.cfg.Prefix, s.Kinds, s.Names, s.Permits))
}

// hostOf returns the host of worker idx, making it on first use.
func (n *netEnv) hostOf(idx int) *redistest.Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h := n.workers[idx]; h != nil {
		return h
	}
	h := n.lab.Host("client" + strconv.Itoa(idx))
	n.workers[idx] = h
	return h
}

// ownerOf returns the Cluster primary that owns name's slot.
func (e *env) ownerOf(name string) *redistest.Server {
	cc := e.admin.(*redis.ClusterClient)
	m, err := cc.MasterForKey(e.ctx, name)
	require.NoError(e.t, err)
	for _, srv := range e.cl.Primaries {
		if srv.Addr == m.Options().Addr {
			return srv
		}
	}
	e.t.Fatalf("chaos: no primary of the cluster is %s", m.Options().Addr)
	return nil
}

// partition runs a partition scenario: worker 0 (the holder) takes every
// object; the other workers start and wait for them; the fault cuts the
// network for Cut (or, slot-migration, moves the objects' slot); then the
// deployment settles and the workers go on until the scenario's end, so
// that the waiters' recovery after the heal is seen.
func (e *env) partition() {
	s := e.s
	e.stop = Mono() + int64(s.Dur)
	e.cfg.Until = e.stop
	e.spawn()
	e.waitFor(30*time.Second, "the holder took every object", func() bool { return e.open[0] >= len(s.Kinds) })
	for range s.Procs - 1 {
		e.spawn()
	}
	e.waitFor(30*time.Second, "every worker started", func() bool { return len(e.started) == s.Procs })
	<-time.After(time.Second) // the waiters queue: the cut comes while they wait, by design
	f := partitions[s.Fault]
	require.NotNil(e.t, f, "partition %q", s.Fault)
	w := &Window{Cut: Mono(), Holder: 0}
	heal := f(e)
	if heal != nil {
		<-time.After(s.Cut) // the partition's length is the fault, by design
		heal()
	}
	w.Heal = Mono()
	e.settle()
	w.Settled = Mono()
	e.window = w
	// A cut can end holds (a failover); a slot migration must not.
	e.record(Op{Op: OpFault, Name: s.Fault, Call: w.Cut, Ret: w.Settled, OK: heal != nil})
	e.recovered(w.Settled, 30*time.Second)
	for range s.Procs {
		require.NoError(e.t, e.res.rdb.RPush(e.ctx, e.cfg.StopKey, "stop").Err())
	}
}

// recovered waits, at most d, until every worker has acquired something
// that it asked for after since (the checker counts those that did not).
func (e *env) recovered(since int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		after := map[int]bool{}
		for _, op := range e.ops {
			if op.Op == OpAcquire && op.OK && op.Call >= since {
				after[op.Proc] = true
			}
		}
		e.mu.Unlock()
		if len(after) == e.s.Procs {
			return
		}
		<-time.After(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// waitFor waits until cond (called with e.mu held) holds, or fails after d.
func (e *env) waitFor(d time.Duration, what string, cond func() bool) {
	require.Eventually(e.t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return cond()
	}, d, 10*time.Millisecond, "chaos: %s", what)
}

// settle waits until the deployment is whole again after the heal: the
// Sentinels agree on one primary whose replicas are all in sync, or every
// Cluster node says cluster_state:ok.
func (e *env) settle() {
	ctx, cancel := context.WithTimeout(e.ctx, 40*time.Second)
	defer cancel()
	if e.lab.fo != nil {
		_, err := e.lab.fo.WaitSettled(ctx, nil)
		require.NoError(e.t, err)
		return
	}
	require.Eventually(e.t, func() bool {
		for _, n := range e.lab.cl.Nodes() {
			c := n.Client(e.t, func(o *redis.Options) { o.MaxRetries = -1 })
			info, err := c.ClusterInfo(ctx).Result()
			_ = c.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	}, 40*time.Second, 100*time.Millisecond, "chaos: the cluster is ok again")
}

// A partition applies itself and returns the function that heals it (nil:
// nothing to heal, the fault is over when it returns).
type partition func(e *env) (heal func())

// partitions are the partition tier's faults by name.
var partitions = map[string]partition{
	// The holder and the primary on one side, the replicas, the Sentinels
	// (or the other Cluster nodes) and the waiters on the other (Jepsen's
	// 2013 Redis scenario): the majority promotes a replica.
	"primary-with-holder": func(e *env) func() {
		e.lab.lab.Cut(e.holderSide(), e.otherSide())
		return e.lab.lab.Heal
	},
	// The holder alone, cut off from every server: no failover.
	"holder-alone": func(e *env) func() {
		e.lab.lab.Cut([]*redistest.Host{e.lab.hostOf(0)}, e.allBut(0))
		return e.lab.lab.Heal
	},
	// A flaky link between the two sides: 40 % of the packets lost.
	"flaky": func(e *env) func() {
		e.lab.lab.Flaky(e.holderSide(), e.otherSide(), 40)
		return e.lab.lab.Heal
	},
	// An asymmetric link: nothing from the majority reaches the primary's
	// side; what that side sends is delivered.
	"asymmetric": func(e *env) func() {
		e.lab.lab.CutOneWay(e.otherSide(), e.holderSide())
		return e.lab.lab.Heal
	},
	// The first object's slot moved to another primary (MIGRATING,
	// IMPORTING, MIGRATE, SETSLOT NODE) while it is held and waited for.
	"slot-migration": func(e *env) func() {
		e.migrate(lua.Slot(objectName(e.cfg.Prefix, e.s.Kinds[0], 0)))
		return nil
	},
}

// holderSide is the holder's host and the primary it is cut off with.
func (e *env) holderSide() []*redistest.Host {
	return []*redistest.Host{e.lab.hostOf(0), e.lab.target}
}

// otherSide is every server and worker host but the holder's side.
func (e *env) otherSide() []*redistest.Host {
	var out []*redistest.Host
	for _, h := range e.allBut(0) {
		if h != e.lab.target {
			out = append(out, h)
		}
	}
	return out
}

// allBut returns every server host and every worker host but worker idx's.
func (e *env) allBut(idx int) []*redistest.Host {
	out := slices.Clone(e.lab.servers)
	e.lab.mu.Lock()
	defer e.lab.mu.Unlock()
	for i, h := range e.lab.workers {
		if i != idx {
			out = append(out, h)
		}
	}
	return out
}

// migrate moves slot from its owner to another primary, keys and all.
func (e *env) migrate(slot int) {
	from := e.lab.moveFrom
	to := e.cl.Primaries[0]
	if to == from {
		to = e.cl.Primaries[1]
	}
	require.NoError(e.t, e.cl.MoveSlot(e.ctx, slot, from, to))
	e.t.Logf("slot %d moved from %s to %s", slot, from.Addr, to.Addr)
}

// partitionTier reports whether the partition tier runs (HOLDFAST_CHAOS=partition).
func partitionTier() bool { return os.Getenv("HOLDFAST_CHAOS") == "partition" }
