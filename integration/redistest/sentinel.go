package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which a Failover's Sentinels monitor its primary.
const MasterName = "holdfast"

// Failover is a primary with replicas, watched by Sentinels, all redis-server
// processes on loopback owned by one test. The Sentinels declare the primary down
// after 1 s without a reply and promote a replica.
//
// The first replica the Sentinels name is not necessarily the primary the
// failover ends on: a Sentinel that has just adopted a new primary reconnects to
// it about 1 s later, and if that is a little late it declares it down, still
// counts the other Sentinels' votes about the old primary as agreement, and fails
// over again to another replica (seen on a loaded machine, a few runs in a
// hundred). Tests that need the primary of after a failover wait for
// [Failover.Settled] with [Failover.WaitSettled].
type Failover struct {
	Primary   *Server   // the primary at start; after a failover, see Master
	Replicas  []*Server // replicating Primary at start
	Sentinels []*Server

	dial dialFunc // dials the servers (nil: the standard dialer); set in a Net
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
	return startOnFreePort(bin, func(p int, dir string) ([]string, error) {
		return writeSentinelConf(dir, sentinelConf(p, "127.0.0.1", dir, addr, quorum))
	})
}

// sentinelConf is the configuration of a Sentinel listening on bind:port, monitoring
// the primary at addr as MasterName: down after 1 s, failover timeout 5 s.
func sentinelConf(port int, bind, dir, addr string, quorum int) string {
	host, pport := splitAddr(addr)
	return fmt.Sprintf("port %d\nbind %s\ndir %s\n"+
		"sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 5000\n",
		port, bind, dir, MasterName, host, pport, quorum, MasterName, MasterName)
}

// writeSentinelConf writes text to dir/sentinel.conf and returns the arguments
// that run a Sentinel from it.
func writeSentinelConf(dir, text string) ([]string, error) {
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return []string{conf, "--sentinel"}, nil
}

// ready reports nil once the replicas are in sync and every Sentinel sees them
// and the other Sentinels.
func (f *Failover) ready(ctx context.Context, replicas, sentinels int) error {
	for _, r := range f.Replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr, Dialer: f.dial})
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
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Dialer: f.dial})
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
// Sentinel addresses are set. In a [Net] it dials from the admin host (Dialer is
// [Net.Dialer]; go-redis dials the Sentinels and the servers with it).
func (f *Failover) Client(tb testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	tb.Helper()
	o := &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: f.SentinelAddrs(), Dialer: f.dial}
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
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Dialer: f.dial})
		hp, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1], nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("no sentinel answered: %w", lastErr)
}

// WaitMasterChange waits until the first Sentinel that answers names a primary
// other than old, and returns it. That primary may not be the one the failover
// ends on (see [Failover]); [Failover.WaitSettled] waits for that one.
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

// Settled returns the primary the Sentinels have settled on, or an error saying
// what is still moving. Settled means:
//   - every Sentinel names the same primary, in the same configuration epoch,
//     with no flag but "master": not down, its link to it up, no failover
//     under way (a Sentinel that has just adopted a new primary shows it
//     "disconnected" until it reconnects, and that is when it may fail over
//     again; see [Failover]);
//   - the primary answers ROLE as a master;
//   - every other server of f that answers is its replica with the link up.
//
// Servers that do not answer (killed ones) are left out.
func (f *Failover) Settled(ctx context.Context) (string, error) {
	var primary, epoch string
	for _, s := range f.Sentinels {
		c := redis.NewSentinelClient(settleOptions(s.Addr, f.dial))
		m, err := c.Master(ctx, MasterName).Result()
		_ = c.Close()
		if err != nil {
			return "", fmt.Errorf("sentinel %s: %w", s.Addr, err)
		}
		addr := net.JoinHostPort(m["ip"], m["port"])
		switch {
		case primary == "":
			primary, epoch = addr, m["config-epoch"]
		case addr != primary || m["config-epoch"] != epoch:
			return "", fmt.Errorf("sentinels disagree: %s (epoch %s) and %s (epoch %s)", primary, epoch, addr, m["config-epoch"])
		}
		if m["flags"] != "master" {
			return "", fmt.Errorf("sentinel %s: primary %s flagged %s", s.Addr, addr, m["flags"])
		}
	}
	for _, n := range append([]*Server{f.Primary}, f.Replicas...) {
		role, master, link, err := roleOf(ctx, n.Addr, f.dial)
		switch {
		case n.Addr == primary && err != nil:
			return "", fmt.Errorf("primary %s: %w", primary, err)
		case n.Addr == primary && role != "master":
			return "", fmt.Errorf("primary %s says it is a %s", primary, role)
		case n.Addr == primary || err != nil: // the primary, fine; or not answering
		case role != "slave":
			return "", fmt.Errorf("%s is a %s besides primary %s", n.Addr, role, primary)
		case master != primary:
			return "", fmt.Errorf("%s replicates %s, not primary %s", n.Addr, master, primary)
		case link != "connected":
			return "", fmt.Errorf("%s's replication link to primary %s is %s", n.Addr, primary, link)
		}
	}
	return primary, nil
}

// WaitSettled waits until the failover has settled (see [Failover.Settled]) and
// ready, unless nil, accepts the primary, and returns the primary. It reads the
// primary again at every try, so it follows any further failover. When ctx ends
// it returns the last reason for waiting.
func (f *Failover) WaitSettled(ctx context.Context, ready func(primary string) error) (string, error) {
	var primary string
	err := waitFor(ctx, func() error {
		var err error
		if primary, err = f.Settled(ctx); err == nil && ready != nil {
			err = ready(primary)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failover not settled: %w", err)
	}
	return primary, nil
}

// settleOptions are the options of the short-lived clients of Settled: no
// retries, short time-outs, so that a dead server answers at once; dial dials
// (nil: the standard dialer).
func settleOptions(addr string, dial dialFunc) *redis.Options {
	return &redis.Options{Addr: addr, Dialer: dial, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
}

// roleOf returns what the server at addr says it is ("master" or "slave") and,
// for a replica, its primary's address and the state of its link to it
// ("connected" once in sync). dial dials (nil: the standard dialer).
func roleOf(ctx context.Context, addr string, dial dialFunc) (role, master, link string, err error) {
	c := redis.NewClient(settleOptions(addr, dial))
	defer c.Close()
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", "", "", err
	}
	if len(r) == 0 {
		return "", "", "", fmt.Errorf("%s: empty ROLE reply", addr)
	}
	role = fmt.Sprint(r[0])
	if role == "slave" && len(r) >= 4 {
		master, link = net.JoinHostPort(fmt.Sprint(r[1]), fmt.Sprint(r[2])), fmt.Sprint(r[3])
	}
	return role, master, link, nil
}
