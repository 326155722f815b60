package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which a Failover's Sentinels monitor its primary.
const MasterName = "holdfast"

// Failover is a primary with replicas, watched by Sentinels, all redis-server
// processes on loopback owned by one test. The Sentinels declare the primary down
// after 1 s without a reply and promote a replica.
type Failover struct {
	Primary   *Server   // the primary at start; after a failover, see Master
	Replicas  []*Server // replicating Primary at start
	Sentinels []*Server
}

// StartFailover starts a primary, replicas replicas of it and sentinels Sentinels
// (quorum: a majority of them), and waits until the replicas are in sync and every
// Sentinel knows every replica and the other Sentinels. It needs a redis-server
// binary.
func StartFailover(tb testing.TB, replicas, sentinels int) *Failover {
	tb.Helper()
	bin, err := findBinary()
	if err == nil && bin == "" {
		err = &unavailableError{reason: "Sentinel needs redis-server (not found on PATH and $REDIS_SERVER not set)"}
	}
	if err != nil {
		unavailableOrFatal(tb, err)
	}
	args := []string{"--repl-diskless-sync-delay", "0"}
	f := &Failover{Primary: Start(tb, args...)}
	host, port := splitAddr(f.Primary.Addr)
	for range replicas {
		f.Replicas = append(f.Replicas, Start(tb, append(args, "--replicaof", host, port)...))
	}
	quorum := sentinels/2 + 1
	for range sentinels {
		s, err := startSentinel(bin, f.Primary.Addr, quorum)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(func() {
			s.stop()
			if tb.Failed() {
				tb.Logf("redistest: output of sentinel %s:\n%s", s.Addr, s.out.String())
			}
		})
		f.Sentinels = append(f.Sentinels, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	if err := waitFor(ctx, func() error { return f.ready(ctx, replicas, sentinels) }); err != nil {
		tb.Fatalf("redistest: Sentinel set-up: %v", err)
	}
	return f
}

// startSentinel starts a Sentinel monitoring the primary at addr as MasterName.
func startSentinel(bin, addr string, quorum int) (*Server, error) {
	host, port := splitAddr(addr)
	return startOnFreePort(bin, func(p int, dir string) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
			"sentinel monitor %s %s %s %d\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\n",
			p, dir, MasterName, host, port, quorum, MasterName, MasterName)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel"}, nil
	})
}

// ready reports nil once the replicas are in sync and every Sentinel sees them
// and the other Sentinels.
func (f *Failover) ready(ctx context.Context, replicas, sentinels int) error {
	for _, r := range f.Replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr})
		info, err := c.Info(ctx, "replication").Result()
		_ = c.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync", r.Addr)
		}
	}
	for _, s := range f.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		m, err := c.Master(ctx, MasterName).Result()
		_ = c.Close()
		if err != nil {
			return err
		}
		if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
			return fmt.Errorf("sentinel %s sees %s replicas and %s other sentinels", s.Addr, m["num-slaves"], m["num-other-sentinels"])
		}
	}
	return nil
}

// SentinelAddrs returns the Sentinels' addresses.
func (f *Failover) SentinelAddrs() []string {
	var addrs []string
	for _, s := range f.Sentinels {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// Client returns a new go-redis failover client (through the Sentinels), closed at
// the end of the test. opts adjust the options after the master name and the
// Sentinel addresses are set.
func (f *Failover) Client(tb testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	tb.Helper()
	o := &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: f.SentinelAddrs()}
	for _, fn := range opts {
		fn(o)
	}
	c := redis.NewFailoverClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master asks the first Sentinel that answers for the current primary's address.
func (f *Failover) Master(ctx context.Context) (string, error) {
	var lastErr error
	for _, s := range f.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		hp, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1], nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("no sentinel answered: %w", lastErr)
}

// WaitMasterChange waits until the Sentinels name a primary other than old, and
// returns it.
func (f *Failover) WaitMasterChange(ctx context.Context, old string) (string, error) {
	var now string
	err := waitFor(ctx, func() error {
		var err error
		now, err = f.Master(ctx)
		if err == nil && now == old {
			err = fmt.Errorf("primary still %s", old)
		}
		return err
	})
	return now, err
}
