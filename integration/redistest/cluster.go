package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterDeadline bounds how long a new cluster may take to agree on its slots.
const clusterDeadline = 30 * time.Second

// Cluster is a Redis Cluster of redis-server processes on loopback, owned by one
// test: primaries sharing the 16384 slots evenly, and optional replicas.
type Cluster struct {
	// Primaries own the slots: Primaries[i] the i-th even share, in order.
	Primaries []*Server
	// Replicas[i] are the replicas of Primaries[i] (empty without replicas).
	Replicas [][]*Server

	dial dialFunc // dials the nodes (nil: the standard dialer); set in a Net
}

// clusterArgs are the arguments of every node of a Cluster.
var clusterArgs = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "2000", "--cluster-replica-validity-factor", "0",
	"--repl-diskless-sync-delay", "0"}

// StartCluster starts a cluster of primaries redis-server processes (at least 3)
// with replicasEach replicas each, with a 2 s node timeout, assigns the slots, and
// waits until every node sees cluster_state:ok and every replica is in sync. The
// processes are stopped in tb.Cleanup. It needs a redis-server binary: no
// container fallback.
func StartCluster(tb testing.TB, primaries, replicasEach int) *Cluster {
	tb.Helper()
	if primaries < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 primaries, not %d", primaries)
	}
	bin, err := findBinary()
	if err == nil && bin == "" {
		err = &unavailableError{reason: "a cluster needs redis-server (not found on PATH and $REDIS_SERVER not set)"}
	}
	if err != nil {
		unavailableOrFatal(tb, err)
	}
	c := &Cluster{Replicas: make([][]*Server, primaries)}
	for i := range primaries {
		c.Primaries = append(c.Primaries, Start(tb, clusterArgs...))
		for range replicasEach {
			c.Replicas[i] = append(c.Replicas[i], Start(tb, clusterArgs...))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	if err := c.form(ctx); err != nil {
		tb.Fatalf("redistest: forming the cluster: %v", err)
	}
	return c
}

// Nodes returns every node: the primaries, then the replicas.
func (c *Cluster) Nodes() []*Server {
	nodes := append([]*Server(nil), c.Primaries...)
	for _, rs := range c.Replicas {
		nodes = append(nodes, rs...)
	}
	return nodes
}

// Addrs returns the nodes' addresses, primaries first: the seeds for a client.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// Client returns a new go-redis cluster client, closed at the end of the test.
// opts adjust the options after Addrs is set. In a [Net] it dials from the admin
// host (Dialer is [Net.Dialer]).
func (c *Cluster) Client(tb testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs(), Dialer: c.dial}
	for _, f := range opts {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// form gives every primary its share of the slots, makes the nodes meet, attaches
// the replicas and waits until the cluster is up everywhere.
func (c *Cluster) form(ctx context.Context) error {
	nodes := c.Nodes()
	admins := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		admins[i] = redis.NewClient(&redis.Options{Addr: n.Addr, Dialer: c.dial})
		defer admins[i].Close()
	}
	per := 16384 / len(c.Primaries)
	for i := range c.Primaries {
		first, last := i*per, (i+1)*per-1
		if i == len(c.Primaries)-1 {
			last = 16383
		}
		// ADDSLOTS, not 7.0's ADDSLOTSRANGE: every server of the matrix has it
		args := []any{"CLUSTER", "ADDSLOTS"}
		for slot := first; slot <= last; slot++ {
			args = append(args, slot)
		}
		if err := admins[i].Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("ADDSLOTS on %s: %w", nodes[i].Addr, err)
		}
	}
	host, port := splitAddr(nodes[0].Addr)
	for i := 1; i < len(nodes); i++ {
		if err := admins[i].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET from %s: %w", nodes[i].Addr, err)
		}
	}
	if err := c.attachReplicas(ctx, admins); err != nil {
		return err
	}
	return waitFor(ctx, func() error { return clusterUp(ctx, admins, len(nodes)) })
}

// attachReplicas makes every replica replicate its primary, once it knows it.
func (c *Cluster) attachReplicas(ctx context.Context, admins []*redis.Client) error {
	k := len(c.Primaries)
	for i, rs := range c.Replicas {
		id, err := admins[i].ClusterMyID(ctx).Result()
		if err != nil {
			return err
		}
		for range rs {
			admin := admins[k]
			k++
			err := waitFor(ctx, func() error { return admin.Do(ctx, "CLUSTER", "REPLICATE", id).Err() })
			if err != nil {
				return fmt.Errorf("CLUSTER REPLICATE on %s: %w", admin.Options().Addr, err)
			}
		}
	}
	return nil
}

// clusterUp reports nil when every node sees the cluster up with all n nodes and
// every replica's link to its primary is up.
func clusterUp(ctx context.Context, admins []*redis.Client, n int) error {
	for _, a := range admins {
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r") {
			return fmt.Errorf("%s: not up yet:\n%s", a.Options().Addr, info)
		}
		repl, err := a.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync yet", a.Options().Addr)
		}
	}
	return nil
}

// waitFor calls f every 50 ms until it returns nil or ctx ends, and returns f's
// last error then.
func waitFor(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// splitAddr splits "host:port".
func splitAddr(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// MoveSlot moves slot from the primary from to the primary to, keys and all,
// as redis-cli --cluster reshard does: to IMPORTING, from MIGRATING, MIGRATE
// of the slot's keys in batches, then SETSLOT NODE on every primary. Keys keep
// their time to live; clients learn the new owner from MOVED and ASK replies.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, from, to *Server) error {
	src := redis.NewClient(&redis.Options{Addr: from.Addr, Dialer: c.dial})
	defer src.Close()
	dst := redis.NewClient(&redis.Options{Addr: to.Addr, Dialer: c.dial})
	defer dst.Close()
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return err
	}
	host, port := splitAddr(to.Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil || len(keys) == 0 {
			if err != nil {
				return err
			}
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return err
		}
	}
	for _, p := range c.Primaries {
		pc := redis.NewClient(&redis.Options{Addr: p.Addr, Dialer: c.dial})
		err := pc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
		_ = pc.Close()
		if err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", p.Addr, err)
		}
	}
	return nil
}
