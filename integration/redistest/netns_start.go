package redistest

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
)

const (
	// hostPort is the port of a redis-server in a host of a Net.
	hostPort = "6379"
	// hostSentinelPort is the port of a Sentinel in a host of a Net.
	hostSentinelPort = 26379
)

// StartIn starts a redis-server process in the host h of a [Net], listening on
// h.IP:6379 (Addr) and on 127.0.0.1:6379 inside h, with --save "" --appendonly no
// --protected-mode no (and --enable-debug-command yes on Redis 7.0 and later: the
// test process connects from the admin host, not from loopback) plus extraArgs,
// waits until it answers through [Net.Dialer] (deadline 10 s), and stops it in
// tb.Cleanup. The binary is $REDIS_SERVER or redis-server on PATH, run as
// `ip netns exec NS redis-server …`, which execs it in place: [Server.Kill],
// [Server.Restart], [Server.Signal] and [Server.Pid] work as after [Start], and
// [Server.Client] dials from the admin host. No container fallback.
func StartIn(tb testing.TB, h *Host, extraArgs ...string) *Server {
	tb.Helper()
	bin := needBinary(tb, "a server in a Net")
	v, err := binaryVersion(bin)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return h.start(tb, bin, 6379, func(dir string) ([]string, error) {
		args := []string{
			"--save", "", "--appendonly", "no",
			"--port", hostPort, "--bind", h.IP, "127.0.0.1", "--protected-mode", "no",
			"--dir", dir,
		}
		if v.AtLeast(7, 0) {
			args = append(args, "--enable-debug-command", "yes")
		}
		return append(args, extraArgs...), nil
	})
}

// needBinary returns the redis-server binary, ending the test (skip, or failure under
// CI) when there is none; what names what needs it.
func needBinary(tb testing.TB, what string) string {
	tb.Helper()
	bin, err := findBinary()
	if err == nil && bin == "" {
		err = &unavailableError{reason: what + " needs redis-server (not found on PATH and $REDIS_SERVER not set)"}
	}
	if err != nil {
		unavailableOrFatal(tb, err)
	}
	return bin
}

// start runs bin in h with the arguments argsFor returns for a new working
// directory, waits until it answers on h.IP:port with its own pid, and stops it in
// tb.Cleanup.
func (h *Host) start(tb testing.TB, bin string, port int, argsFor func(dir string) ([]string, error)) *Server {
	tb.Helper()
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	args, err := argsFor(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		tb.Fatalf("redistest: %v", err)
	}
	s := &Server{
		Addr: net.JoinHostPort(h.IP, strconv.Itoa(port)), bin: bin, args: args, dir: dir, out: &outputBuffer{},
		host: h, prefix: h.prefix(), dial: h.net.Dialer(),
	}
	p, err := s.spawn()
	if err != nil {
		_ = os.RemoveAll(dir)
		tb.Fatalf("redistest: in host %s: %v\noutput:\n%s", h.Name, err, s.out.String())
	}
	s.proc = p
	tb.Cleanup(func() {
		s.stop()
		if tb.Failed() {
			tb.Logf("redistest: output of %s (host %s):\n%s", s.Addr, h.Name, s.out.String())
		}
	})
	return s
}

// StartFailoverIn is [StartFailover] in the [Net] n: the primary, each replica and
// each Sentinel in a host of its own (named primaryN, replicaN, sentinelN; see
// [Server.Host]), the servers started by [StartIn] with extraArgs (not the
// Sentinels), the Sentinels on port 26379 announcing their host's address. Every
// method of the Failover, its Client included, dials from the admin host.
func StartFailoverIn(tb testing.TB, n *Net, replicas, sentinels int, extraArgs ...string) *Failover {
	tb.Helper()
	bin := needBinary(tb, "Sentinel")
	args := slices.Concat([]string{"--repl-diskless-sync-delay", "0"}, extraArgs)
	f := &Failover{dial: n.Dialer()}
	f.Primary = StartIn(tb, n.newHost("primary"), args...)
	for range replicas {
		more := slices.Concat(args, []string{"--replicaof", f.Primary.Host().IP, hostPort})
		f.Replicas = append(f.Replicas, StartIn(tb, n.newHost("replica"), more...))
	}
	quorum := sentinels/2 + 1
	for range sentinels {
		f.Sentinels = append(f.Sentinels, startSentinelIn(tb, n.newHost("sentinel"), bin, f.Primary.Addr, quorum))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	if err := waitFor(ctx, func() error { return f.ready(ctx, replicas, sentinels) }); err != nil {
		tb.Fatalf("redistest: Sentinel set-up in a Net: %v", err)
	}
	return f
}

// startSentinelIn starts in h a Sentinel monitoring the primary at addr as MasterName.
func startSentinelIn(tb testing.TB, h *Host, bin, addr string, quorum int) *Server {
	tb.Helper()
	return h.start(tb, bin, hostSentinelPort, func(dir string) ([]string, error) {
		text := sentinelConf(hostSentinelPort, h.IP+" 127.0.0.1", dir, addr, quorum) +
			"protected-mode no\nsentinel announce-ip " + h.IP + "\n"
		return writeSentinelConf(dir, text)
	})
}

// StartClusterIn is [StartCluster] in the [Net] n: every node in a host of its own
// (named nodeN; see [Server.Host]) announcing its host's address, started by [StartIn]
// with the arguments of StartCluster plus extraArgs (which override them, e.g.
// "--cluster-node-timeout", "5000"). Its Client and the forming of the cluster dial
// from the admin host.
func StartClusterIn(tb testing.TB, n *Net, primaries, replicasEach int, extraArgs ...string) *Cluster {
	tb.Helper()
	if primaries < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 primaries, not %d", primaries)
	}
	c := &Cluster{Replicas: make([][]*Server, primaries), dial: n.Dialer()}
	node := func() *Server {
		h := n.newHost("node")
		return StartIn(tb, h, slices.Concat(clusterArgs, []string{"--cluster-announce-ip", h.IP}, extraArgs)...)
	}
	for i := range primaries {
		c.Primaries = append(c.Primaries, node())
		for range replicasEach {
			c.Replicas[i] = append(c.Replicas[i], node())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	if err := c.form(ctx); err != nil {
		tb.Fatalf("redistest: forming the cluster in a Net: %v", err)
	}
	return c
}

// StartWorkerIn is [StartIndexedWorker] in the host h of a [Net]: the test binary runs
// as `ip netns exec NS test-binary …`, which execs it in place (Pid, Signal and the
// process-group kill at cleanup reach the test binary itself). Its stdout and
// stderr are pipes, which work across namespaces; it dials from h.
func StartWorkerIn(tb testing.TB, h *Host, testName, role string, index int, env ...string) *Worker {
	tb.Helper()
	return startWorker(tb, h.prefix(), testName, role, index, env)
}
