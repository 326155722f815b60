package redistest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

const (
	// netnsDir is where `ip netns` keeps its named network namespaces.
	netnsDir = "/var/run/netns"
	// netnsPrefix begins the name of every namespace of a Net: hf<pid>-<6 hex>.
	netnsPrefix = "hf"
	// netSubnet is the /24 of every Net (each Net is alone in its namespaces).
	netSubnet = "10.99.0."
	// netMaxHosts is how many hosts (admin included) a Net has room for.
	netMaxHosts = 253
	// netHint tells how to make a Net possible.
	netHint = "run the tests as root on Linux with ip (iproute2) and nft (nftables): " +
		"`bash scripts/setup.sh` as root, or `apt-get install iproute2 nftables`"
)

// Net is a private network of network namespaces, for tests that partition servers,
// Sentinels and client processes from each other (see [NewNet]).
type Net struct {
	prefix string // the hub's namespace; a host's is prefix-<name>
	tb     testing.TB
	ip     string // path of ip
	nft    string // path of nft
	admin  *Host

	mu    sync.Mutex
	hosts []*Host
	rules []string // nft rules of the faults in force
}

// Host is one machine of a [Net]: a network namespace of its own, plugged into the
// Net's bridge, with the address IP on its interface eth0 (and 127.0.0.1 on lo).
type Host struct {
	// Name is the name given to [Net.Host] ("admin" for the admin host).
	Name string
	// IP is the host's address, in 10.99.0.0/24.
	IP string
	// Netns is the name of the host's network namespace (`ip netns exec Netns cmd`).
	Netns string

	net *Net
}

// NewNet makes a private network, deleted in tb.Cleanup: a namespace holding a
// bridge, and an admin host (see [Net.Admin]) from which the test process talks
// ([Net.Dialer], [Net.Client]). Add hosts with [Net.Host].
//
// It needs Linux, root, ip and nft; without them the test is skipped, or fails when
// the environment variable CI is non-empty. Namespaces left by a test binary that
// died without its cleanups (their names carry its pid) are deleted first.
func NewNet(tb testing.TB) *Net {
	tb.Helper()
	ip, nft, err := netTools()
	if err != nil {
		unavailableOrFatal(tb, err)
	}
	sweepStaleNets(ip)
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("redistest: random name: %v", err)
	}
	n := &Net{prefix: netnsPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]), tb: tb, ip: ip, nft: nft}
	tb.Cleanup(n.close)
	if err := n.makeHub(); err != nil {
		unavailableOrFatal(tb, &unavailableError{what: "network lab", reason: err.Error(), hint: netHint})
	}
	n.admin = n.Host("admin")
	return n
}

// netTools returns the paths of ip and nft, or an *unavailableError saying what is
// missing.
func netTools() (ip, nft string, err error) {
	missing := func(reason string) error {
		return &unavailableError{what: "network lab", reason: reason, hint: netHint}
	}
	switch {
	case runtime.GOOS != "linux":
		return "", "", missing("network namespaces are Linux-only")
	case os.Geteuid() != 0:
		return "", "", missing("network namespaces and nft need root")
	}
	if ip = findTool("ip"); ip == "" {
		return "", "", missing("ip (iproute2) not found")
	}
	if nft = findTool("nft"); nft == "" {
		return "", "", missing("nft (nftables) not found")
	}
	return ip, nft, nil
}

// findTool returns the path of the command name: on PATH, else in /usr/sbin or
// /sbin (not always on PATH); "" when there is none.
func findTool(name string) string {
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path
		}
	}
	return ""
}

// runTool runs name with args, stdin (when not "") as its input, and returns an
// error quoting its output when it fails.
func runTool(stdin, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("redistest: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeHub makes the namespace holding the bridge br0.
func (n *Net) makeHub() error {
	if err := runTool("", n.ip, "netns", "add", n.prefix); err != nil {
		return err
	}
	return runTool("link set lo up\nlink add br0 type bridge\nlink set br0 up\n", n.ip, "-n", n.prefix, "-batch", "-")
}

// hostName is what a host name may be: it ends the name of its namespace.
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Host adds a host named name (lower-case letters, digits and dashes, unique in the
// Net) with the next address of 10.99.0.0/24. It fails the test that made the Net
// when the host cannot be made.
func (n *Net) Host(name string) *Host {
	n.tb.Helper()
	h, err := n.addHost(name, false)
	if err != nil {
		n.tb.Fatalf("redistest: %v", err)
	}
	return h
}

// newHost adds a host named base followed by the first number that makes it unique.
func (n *Net) newHost(base string) *Host {
	n.tb.Helper()
	h, err := n.addHost(base, true)
	if err != nil {
		n.tb.Fatalf("redistest: %v", err)
	}
	return h
}

// addHost adds a host named name, or base name plus a number when numbered.
func (n *Net) addHost(name string, numbered bool) (*Host, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	taken := map[string]bool{}
	for _, h := range n.hosts {
		taken[h.Name] = true
	}
	base := name
	for k := 1; numbered && (k == 1 || taken[name]); k++ {
		name = base + strconv.Itoa(k)
	}
	switch {
	case !hostName.MatchString(name):
		return nil, fmt.Errorf("redistest: host name %q: want lower-case letters, digits and dashes (at most 32)", name)
	case taken[name]:
		return nil, fmt.Errorf("redistest: host name %q already used in this Net", name)
	case len(n.hosts) >= netMaxHosts:
		return nil, fmt.Errorf("redistest: a Net has room for %d hosts", netMaxHosts)
	}
	i := len(n.hosts) + 1
	h := &Host{Name: name, IP: netSubnet + strconv.Itoa(i), Netns: n.prefix + "-" + name, net: n}
	if err := n.plug(h, i); err != nil {
		return nil, err
	}
	n.hosts = append(n.hosts, h)
	return h, nil
}

// plug makes h's namespace and joins it to the bridge by a veth pair: vI in the
// hub, eth0 in h. Both ends are made where they live: none ever exists in the
// namespace of the test process.
func (n *Net) plug(h *Host, i int) error {
	if err := runTool("", n.ip, "netns", "add", h.Netns); err != nil {
		return err
	}
	veth := "v" + strconv.Itoa(i)
	hub := fmt.Sprintf("link add %s type veth peer name eth0 netns %s\nlink set %s master br0 up\n", veth, h.Netns, veth)
	if err := runTool(hub, n.ip, "-n", n.prefix, "-batch", "-"); err != nil {
		return err
	}
	host := fmt.Sprintf("addr add %s/24 dev eth0\nlink set eth0 up\nlink set lo up\n", h.IP)
	return runTool(host, n.ip, "-n", h.Netns, "-batch", "-")
}

// Admin returns the admin host, made by [NewNet]: the test process dials from it
// ([Net.Dialer]). No fault cuts it unless a test names it.
func (n *Net) Admin() *Host { return n.admin }

// Hosts returns the hosts of the Net, the admin host first.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Dialer returns a go-redis Dialer that dials from the admin host. addr must be an
// IP address and port (no name is resolved).
func (n *Net) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.admin.Dialer()
}

// Client returns a new go-redis client for the server at addr, dialing from the admin
// host, closed at the end of the test. opts adjust the options after Addr and Dialer
// are set.
func (n *Net) Client(tb testing.TB, addr string, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	o := &redis.Options{Addr: addr, Dialer: n.Dialer()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// SentinelClient is [Net.Client] for a Sentinel.
func (n *Net) SentinelClient(tb testing.TB, addr string, opts ...func(*redis.Options)) *redis.SentinelClient {
	tb.Helper()
	o := &redis.Options{Addr: addr, Dialer: n.Dialer()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewSentinelClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Dialer returns a go-redis Dialer that dials from h: the connection's socket is made
// in h's namespace. addr must be an IP address and port (no name is resolved).
func (h *Host) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	ns := h.Netns
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("redistest: dialing from a Net host needs an IP address, not %q", addr)
		}
		return dialIn(ctx, ns, network, addr)
	}
}

// Command returns a command that runs name with args in h's namespace
// (`ip netns exec`). Whatever still runs in the Net is killed at its cleanup.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command(h.net.ip, append(h.prefix()[1:], append([]string{name}, args...)...)...)
}

// prefix is the command that runs the command after it in h's namespace; it execs
// that command in place, so the process keeps its pid.
func (h *Host) prefix() []string {
	return []string{h.net.ip, "netns", "exec", h.Netns}
}

// Host returns the host of a [Net] the server runs in, nil for a server on loopback.
func (s *Server) Host() *Host { return s.host }

// HostsOf returns the hosts the servers run in (see [Server.Host]), e.g. to cut a
// Failover's primary from its replicas.
func HostsOf(servers ...*Server) []*Host {
	hs := make([]*Host, 0, len(servers))
	for _, s := range servers {
		hs = append(hs, s.Host())
	}
	return hs
}

// close kills what still runs in the Net's namespaces and deletes them.
func (n *Net) close() {
	n.mu.Lock()
	if n.tb.Failed() && len(n.rules) > 0 {
		n.tb.Logf("redistest: faults in force in Net %s:\n%s", n.prefix, strings.Join(n.rules, "\n"))
	}
	n.mu.Unlock()
	names, err := netnsNames(func(name string) bool {
		return name == n.prefix || strings.HasPrefix(name, n.prefix+"-")
	})
	if err == nil {
		err = removeNetns(n.ip, names)
	}
	if err != nil {
		n.tb.Errorf("redistest: deleting Net %s: %v", n.prefix, err)
	}
}

// netnsNames returns the names of the named network namespaces that keep accepts.
func netnsNames(keep func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// removeNetns SIGKILLs the processes in the namespaces names and deletes them.
func removeNetns(ip string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var batch strings.Builder
	for _, name := range names {
		out, _ := exec.Command(ip, "netns", "pids", name).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		fmt.Fprintf(&batch, "netns delete %s\n", name)
	}
	return runTool(batch.String(), ip, "-force", "-batch", "-")
}

// staleNet matches the namespaces of a Net and captures the pid of its test binary.
var staleNet = regexp.MustCompile(`^` + netnsPrefix + `(\d+)-[0-9a-f]{6}(-|$)`)

// sweepStaleNets deletes the namespaces of Nets whose test binary is dead (killed
// before its cleanups ran). Errors are ignored: another test binary may be sweeping.
func sweepStaleNets(ip string) {
	names, err := netnsNames(func(name string) bool {
		m := staleNet.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	if err == nil {
		_ = removeNetns(ip, names)
	}
}
