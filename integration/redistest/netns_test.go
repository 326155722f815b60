package redistest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netWorkerMain is the body of the worker processes started by the TestNet tests.
func netWorkerMain(t *testing.T) {
	switch WorkerRole() {
	case "pinger":
		pinger(os.Getenv("ADDR"))
	case "netholder": // makes a Net with a server, says so, and waits to be killed
		n := NewNet(t)
		s := StartIn(t, n.Host("h"))
		fmt.Println("NET", n.prefix, s.Pid())
		<-time.After(time.Minute)
		t.Fatal("not killed")
	default:
		t.Fatalf("unknown role %q", WorkerRole())
	}
}

// pinger PINGs addr every 20 ms for a minute on one connection (a new one after an
// error), each within 300 ms, and prints "ok" or "err <why>" for each. It uses
// plain TCP: a go-redis client would stop dialing for a while after dial errors.
func pinger(addr string) {
	var conn net.Conn
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); <-tick.C {
		err := ping(&conn, addr, 300*time.Millisecond)
		if err == nil {
			fmt.Println("ok")
			continue
		}
		fmt.Println("err", err)
		if conn != nil {
			_ = conn.Close()
			conn = nil
		}
	}
}

// ping sends PING on *conn (dialing addr first when it is nil) and reads +PONG.
func ping(conn *net.Conn, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if *conn == nil {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		*conn = c
	}
	if err := (*conn).SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := io.WriteString(*conn, "PING\r\n"); err != nil {
		return err
	}
	var reply [7]byte
	if _, err := io.ReadFull(*conn, reply[:]); err != nil {
		return err
	}
	if string(reply[:]) != "+PONG\r\n" {
		return fmt.Errorf("reply %q", reply)
	}
	return nil
}

// info returns the fields of the server's INFO section.
func info(t *testing.T, c *redis.Client, section string) map[string]string {
	t.Helper()
	text, err := c.Info(context.Background(), section).Result()
	require.NoError(t, err)
	fields := map[string]string{}
	for _, l := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// replicaLag returns the lag (seconds since its last REPLCONF ACK) the primary
// reports for its first replica, -1 when it has none.
func replicaLag(t *testing.T, primary *redis.Client) int {
	t.Helper()
	for _, kv := range strings.Split(info(t, primary, "replication")["slave0"], ",") {
		if v, ok := strings.CutPrefix(kv, "lag="); ok {
			lag, err := strconv.Atoi(v)
			require.NoError(t, err)
			return lag
		}
	}
	return -1
}

// caughtUp reports whether the primary's first replica has acknowledged all of the
// primary's replication stream.
func caughtUp(t *testing.T, primary *redis.Client) bool {
	t.Helper()
	repl := info(t, primary, "replication")
	return repl["master_repl_offset"] != "0" && strings.Contains(repl["slave0"], ",offset="+repl["master_repl_offset"]+",")
}

// needNet ends the test as NewNet would when a Net cannot be made: for tests that
// make theirs in a subtest or another process.
func needNet(t *testing.T) {
	t.Helper()
	if _, _, err := netTools(); err != nil {
		unavailableOrFatal(t, err)
	}
}

// inNetns reports whether the process pid runs in the network namespace ns.
func inNetns(t *testing.T, pid int, ns string) bool {
	t.Helper()
	a, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/ns/net")
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(netnsDir, ns))
	require.NoError(t, err)
	return os.SameFile(a, b)
}

// rootHasNetAddr reports whether the test process's namespace has an address of a Net.
func rootHasNetAddr(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(findTool("ip"), "-4", "-o", "addr").Output()
	require.NoError(t, err)
	return strings.Contains(string(out), netSubnet)
}

func TestNetServerThroughDialer(t *testing.T) {
	start := time.Now()
	n := NewNet(t)
	h := n.Host("srv")
	s := StartIn(t, h)
	t.Logf("NewNet + host + server in %v", time.Since(start))
	require.Same(t, h, s.Host())
	require.Equal(t, h.IP+":6379", s.Addr)
	require.True(t, strings.HasPrefix(h.IP, "10.99.0."), h.IP)
	ctx := context.Background()
	rdb := s.Client(t)
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, "v", n.Client(t, s.Addr).Get(ctx, "k").Val())
	assert.Equal(t, strconv.Itoa(s.Pid()), info(t, rdb, "server")["process_id"], "ip netns exec runs the server in place")
	assert.True(t, inNetns(t, s.Pid(), h.Netns))
	require.NoError(t, rdb.Do(ctx, "DEBUG", "SLEEP", "0").Err())
	// The test process's namespace has no address of the Net, and the server is not
	// reachable from it (something else may answer there: a sandbox's proxy).
	assert.False(t, rootHasNetAddr(t))
	if pid, err := probe(s.Addr, 300*time.Millisecond); err == nil && pid == s.Pid() {
		t.Errorf("%s reachable without the Net's dialer", s.Addr)
	}
	old := s.Pid()
	s.Restart(t)
	require.NotEqual(t, old, s.Pid())
	require.NoError(t, rdb.Ping(ctx).Err())
	s.Kill()
	assert.Zero(t, s.Pid())
	assert.True(t, processGone(old))
}

func TestNetCutReplica(t *testing.T) {
	n := NewNet(t)
	p := StartIn(t, n.Host("primary"), "--repl-ping-replica-period", "1", "--repl-diskless-sync-delay", "0")
	r := StartIn(t, n.Host("replica"), "--replicaof", p.Host().IP, "6379", "--repl-timeout", "2")
	rc := r.Client(t)
	linkIs := func(status string) func() bool {
		return func() bool { return info(t, rc, "replication")["master_link_status"] == status }
	}
	require.Eventually(t, linkIs("up"), 10*time.Second, 20*time.Millisecond)
	n.Cut(HostsOf(p), HostsOf(r))
	cut := time.Now()
	require.Eventually(t, linkIs("down"), 10*time.Second, 20*time.Millisecond)
	t.Logf("replica saw its link down %v after the cut", time.Since(cut))
	require.NoError(t, p.Client(t).Ping(context.Background()).Err(), "the admin host is not cut")
	n.Heal()
	healed := time.Now()
	require.Eventually(t, linkIs("up"), 15*time.Second, 20*time.Millisecond)
	t.Logf("link up again %v after Heal", time.Since(healed))
}

// TestNetCutOneWay: cut one way, a replication stream still delivers data the open
// way while the acknowledgements the other way are lost; cut the other way, data
// stops. Nothing is reset: the same connection carries on after Heal.
func TestNetCutOneWay(t *testing.T) {
	n := NewNet(t)
	p := StartIn(t, n.Host("primary"), "--repl-diskless-sync-delay", "0")
	r := StartIn(t, n.Host("replica"), "--replicaof", p.Host().IP, "6379")
	pc, rc := p.Client(t), r.Client(t)
	ctx := context.Background()
	// In sync, as the primary sees it: after a diskless sync the primary streams to
	// the replica only once it has its first REPLCONF ACK. k0 is written once the
	// replica is online: written before its sync, it would travel in the RDB, the
	// stream's offset would stay 0 until the primary's first PING to its replicas
	// (repl-ping-replica-period, 10 s), and caughtUp would wait for that.
	require.Eventually(t, func() bool {
		return strings.Contains(info(t, pc, "replication")["slave0"], "state=online")
	}, 10*time.Second, 20*time.Millisecond, "the replica is online")
	require.NoError(t, pc.Set(ctx, "k0", "v0", 0).Err())
	require.Eventually(t, func() bool { return caughtUp(t, pc) }, 10*time.Second, 20*time.Millisecond)

	n.CutOneWay(HostsOf(r), HostsOf(p))
	require.NoError(t, pc.Set(ctx, "k1", "v1", 0).Err())
	require.Eventually(t, func() bool { return rc.Get(ctx, "k1").Val() == "v1" }, 5*time.Second, 20*time.Millisecond,
		"data still flows from the primary to the replica")
	require.Eventually(t, func() bool { return replicaLag(t, pc) >= 2 }, 10*time.Second, 50*time.Millisecond,
		"the replica's acknowledgements no longer reach the primary")
	n.Heal()
	healed := time.Now()
	require.Eventually(t, func() bool { return replicaLag(t, pc) <= 1 }, 15*time.Second, 50*time.Millisecond)
	t.Logf("acknowledgements flow again %v after Heal", time.Since(healed))

	n.CutOneWay(HostsOf(p), HostsOf(r))
	require.NoError(t, pc.Set(ctx, "k2", "v2", 0).Err())
	require.Eventually(t, func() bool { return replicaLag(t, pc) >= 2 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, redis.Nil, rc.Get(ctx, "k2").Err(), "nothing reaches the replica from the primary")
	n.Heal()
	healed = time.Now()
	require.Eventually(t, func() bool { return rc.Get(ctx, "k2").Val() == "v2" }, 15*time.Second, 20*time.Millisecond)
	t.Logf("k2 reached the replica %v after Heal", time.Since(healed))
	assert.Equal(t, "1", info(t, pc, "stats")["sync_full"], "the replication connection survived the cuts")
}

// TestNetFlaky: a worker in a host of its own PINGs a server in another; with a
// quarter of the packets lost some PINGs fail and some pass; after Heal all pass.
func TestNetFlaky(t *testing.T) {
	if WorkerRole() != "" {
		netWorkerMain(t)
		return
	}
	n := NewNet(t)
	s := StartIn(t, n.Host("server"))
	client := n.Host("client")
	w := StartWorkerIn(t, client, t.Name(), "pinger", 0, "ADDR="+s.Addr)
	w.Expect(t, "ok", 30*time.Second)
	require.True(t, inNetns(t, w.Pid(), client.Netns), "the worker's pid is the test binary's, in its host")
	n.Flaky([]*Host{client}, HostsOf(s), 25)
	w.Expect(t, "err", 10*time.Second)
	var ok, failed int
	readPings(t, w, 15*time.Second, func(line string) bool {
		if line == "ok" {
			ok++
		} else {
			failed++
		}
		return ok >= 5 && failed >= 5
	})
	t.Logf("with 25%% loss: %d PINGs passed, %d failed", ok, failed)
	n.Heal()
	run := 0
	readPings(t, w, 15*time.Second, func(line string) bool {
		if run++; line != "ok" {
			run = 0
		}
		return run >= 20
	})
}

// readPings passes the pinger's lines to done until it returns true; it fails the
// test when timeout passes first.
func readPings(t *testing.T, w *Worker, timeout time.Duration, done func(line string) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-w.Lines():
			require.True(t, ok, "pinger ended:\n%s", w.Output())
			if done(line) {
				return
			}
		case <-deadline:
			t.Fatalf("pings not as expected within %v; output:\n%s", timeout, w.Output())
		}
	}
}

// TestNetFailoverPartition cuts the primary's host from its replicas and Sentinels:
// the Sentinels promote a replica; after Heal the old primary rejoins as a replica.
func TestNetFailoverPartition(t *testing.T) {
	start := time.Now()
	n := NewNet(t)
	f := StartFailoverIn(t, n, 2, 3)
	t.Logf("NewNet + primary + 2 replicas + 3 sentinels up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := f.Client(t)
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	old, err := f.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, f.Primary.Addr, old)

	n.Cut(HostsOf(f.Primary), HostsOf(append(f.Replicas, f.Sentinels...)...))
	cut := time.Now()
	now, err := f.WaitMasterChange(ctx, old)
	require.NoError(t, err)
	t.Logf("sentinels promoted %s %v after the cut", now, time.Since(cut))
	n.Heal()
	healed := time.Now()
	primary, err := f.WaitSettled(ctx, nil)
	require.NoError(t, err)
	require.NotEqual(t, old, primary)
	t.Logf("settled on %s %v after Heal", primary, time.Since(healed))
	require.Eventually(t, func() bool { return rdb.Set(ctx, "k2", "v", 0).Err() == nil }, 10*time.Second, 50*time.Millisecond)
}

func TestNetCluster(t *testing.T) {
	start := time.Now()
	n := NewNet(t)
	c := StartClusterIn(t, n, 3, 1, "--cluster-node-timeout", "2000")
	t.Logf("NewNet + 3 primaries + 3 replicas up in %v", time.Since(start))
	ctx := context.Background()
	seen := map[*Host]bool{}
	for _, node := range c.Nodes() {
		require.NotNil(t, node.Host())
		seen[node.Host()] = true
		require.Contains(t, n.Client(t, node.Addr).ClusterInfo(ctx).Val(), "cluster_state:ok")
	}
	require.Len(t, seen, 6, "a host per node")
	rdb := c.Client(t)
	owners := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("k%d", i)
		require.NoError(t, rdb.Set(ctx, key, i, 0).Err())
		m, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		owners[m.Options().Addr] = true
	}
	require.Len(t, owners, 3)
	nodes := rdb.ClusterNodes(ctx).Val()
	for _, node := range c.Nodes() {
		require.Contains(t, nodes, node.Addr, "nodes announce their host's address")
	}
	// Cut a primary from the other nodes: its replica takes over.
	p, r := c.Primaries[0], c.Replicas[0][0]
	n.Cut(HostsOf(p), HostsOf(slices.DeleteFunc(c.Nodes(), func(s *Server) bool { return s == p })...))
	cut := time.Now()
	rc := n.Client(t, r.Addr)
	require.Eventually(t, func() bool {
		role, err := rc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, 15*time.Second, 50*time.Millisecond)
	t.Logf("replica %s promoted %v after its primary was cut", r.Addr, time.Since(cut))
}

// TestNetCleanup: the cleanup of a Net kills what runs in it and deletes its namespaces.
func TestNetCleanup(t *testing.T) {
	needNet(t)
	var names []string
	var pids []int
	var stray *exec.Cmd
	t.Run("net", func(t *testing.T) {
		n := NewNet(t)
		h := n.Host("h")
		s := StartIn(t, h)
		stray = h.Command("sleep", "60") // not stopped by the test: by the Net's cleanup
		require.NoError(t, stray.Start())
		n.Cut([]*Host{h}, []*Host{n.Host("other")})
		for _, x := range n.Hosts() {
			names = append(names, x.Netns)
		}
		names = append(names, n.prefix)
		pids = append(pids, s.Pid(), stray.Process.Pid)
	})
	require.Error(t, stray.Wait(), "killed")
	out, err := exec.Command(findTool("ip"), "netns", "list").Output()
	require.NoError(t, err)
	for _, name := range names {
		assert.NotContains(t, string(out), name)
	}
	for _, pid := range pids {
		assert.True(t, processGone(pid), "process %d survived its Net", pid)
	}
}

// TestNetStaleSwept: the namespaces of a test binary killed with SIGKILL (no cleanup)
// are deleted by the next NewNet; its server dies with it.
func TestNetStaleSwept(t *testing.T) {
	if WorkerRole() != "" {
		netWorkerMain(t)
		return
	}
	needNet(t)
	w := StartWorker(t, t.Name(), "netholder")
	fields := strings.Fields(w.Expect(t, "NET", 30*time.Second))
	require.Len(t, fields, 3)
	prefix := fields[1]
	pid, err := strconv.Atoi(fields[2])
	require.NoError(t, err)
	require.NoError(t, w.Signal(syscall.SIGKILL))
	require.Error(t, w.Wait())
	eventually(t, 10*time.Second, func() bool { return processGone(pid) }, "redis-server killed with the test binary")
	left := func() []string {
		names, err := netnsNames(func(name string) bool { return strings.HasPrefix(name, prefix) })
		require.NoError(t, err)
		return names
	}
	require.Len(t, left(), 3, "hub, admin and h left behind")
	NewNet(t)
	require.Empty(t, left())
	t.Logf("namespaces of %s deleted", prefix)
}
