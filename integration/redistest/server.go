package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startDeadline bounds how long a started server may take to answer PING.
	startDeadline = 10 * time.Second
	// portAttempts is how many free ports are tried when redis-server cannot bind.
	portAttempts = 5
	// maxOutput is how many bytes of server output are kept (the most recent ones).
	maxOutput = 256 << 10
)

// InstallHint tells how to make Redis available to the tests.
const InstallHint = "install Redis with `bash scripts/setup.sh` or `apt-get install redis-server`, " +
	"point $REDIS_SERVER at a redis-server binary, or set $REDIS_ADDR to a running server (Shared only)"

// Server is one Redis server used by tests.
//
// A Server started by [Start] or [Shared] from a redis-server binary is owned by this process
// and is [Server.Controllable]; one reached through $REDIS_ADDR or run in a container is not.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	// Fields of an owned process; immutable after creation except under mu.
	bin  string   // redis-server binary
	args []string // full argument list, including --port
	dir  string   // working directory (--dir), removed at stop
	out  *outputBuffer

	// Set for a server in a host of a [Net] (see [StartIn]); zero for one on loopback.
	host   *Host
	prefix []string // command bin runs under (ip netns exec NS), nil to run bin itself
	dial   dialFunc // dials Addr for the probe and the clients; nil: the standard dialer

	mu       sync.Mutex
	proc     *process // current process, nil when not controllable
	stopped  bool     // stop was called: no more restarts
	stopHook func()   // for non-process servers (containers): how to stop
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returned
	err  error         // cmd.Wait's result, valid after done
}

// Start starts a fresh redis-server process on a free loopback port with
// --save "" --appendonly no --port P --bind 127.0.0.1 (and --enable-debug-command local on
// servers that have that directive, Redis 7.0 and later; see [Server.Version])
// (plus extraArgs, appended, so they override these), waits until it answers PING
// (deadline 10 s), and stops it in tb.Cleanup.
//
// The binary is $REDIS_SERVER if set, else "redis-server" on PATH. If no binary is found and a
// Docker engine is reachable, it starts a Redis container with testcontainers-go instead
// (image $HOLDFAST_REDIS_IMAGE, default "redis:7.0"; not Controllable). If neither is available,
// the test fails when the environment variable CI is non-empty and is skipped otherwise.
//
// The server's output is logged when the test has failed by the time it is stopped.
func Start(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	s, err := launch(extraArgs)
	if err != nil {
		unavailableOrFatal(tb, err)
	}
	tb.Cleanup(func() {
		s.stop()
		if tb.Failed() && s.out != nil {
			tb.Logf("redistest: output of redis-server %s:\n%s", s.Addr, s.out.String())
		}
	})
	return s
}

// StartControllable is Start for a test that freezes, kills or restarts its server: it
// needs a redis-server process of its own ([Server.Controllable]). When Start fell back to a
// container, the test fails when CI is non-empty and is skipped otherwise, as when no Redis
// is available at all.
func StartControllable(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	s := Start(tb, extraArgs...)
	if !s.Controllable() {
		unavailableOrFatal(tb, &unavailableError{reason: "the test needs a redis-server process of its own, not a container"})
	}
	return s
}

// unavailableError says no Redis can be started at all (no binary, no Docker), or, when what
// is set, that something else a test needs is missing (what it is and how to get it in hint).
type unavailableError struct{ reason, what, hint string }

func (e *unavailableError) Error() string {
	if e.what != "" {
		return "redistest: no " + e.what + " available: " + e.reason + "; " + e.hint
	}
	return "redistest: no Redis available: " + e.reason + "; " + InstallHint
}

// unavailableOrFatal ends the test for err: a skip when err is an *unavailableError outside CI,
// a failure otherwise.
func unavailableOrFatal(tb testing.TB, err error) {
	tb.Helper()
	var ue *unavailableError
	if errors.As(err, &ue) && os.Getenv("CI") == "" {
		tb.Skipf("%v (set CI=1 to make this a failure)", err)
	}
	tb.Fatalf("%v", err)
}

// findBinary returns the redis-server binary to run, "" when there is none.
// An explicit $REDIS_SERVER that does not exist is an error, not a reason to fall back.
func findBinary() (string, error) {
	if bin := os.Getenv("REDIS_SERVER"); bin != "" {
		path, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("redistest: $REDIS_SERVER=%q: %w", bin, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil
	}
	return path, nil
}

// launch starts a server: a local process when a binary exists, else a container when Docker
// is healthy, else an *unavailableError.
func launch(extraArgs []string) (*Server, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	if bin == "" {
		reason := "redis-server not found on PATH and $REDIS_SERVER not set"
		ok, why := dockerAvailable()
		if !ok {
			return nil, &unavailableError{reason: reason + ", and no Docker engine (" + why + ")"}
		}
		return startContainer(extraArgs)
	}
	return startProcessServer(bin, extraArgs)
}

// startProcessServer starts bin on a free port, retrying on another port when the chosen one
// was taken in the meantime.
func startProcessServer(bin string, extraArgs []string) (*Server, error) {
	v, err := binaryVersion(bin)
	if err != nil {
		return nil, err
	}
	return startOnFreePort(bin, func(port int, dir string) ([]string, error) {
		args := []string{
			"--save", "", "--appendonly", "no",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir,
		}
		if v.AtLeast(7, 0) { // DEBUG is allowed without it before 7.0, which has no such directive
			args = append(args, "--enable-debug-command", "local")
		}
		return append(args, extraArgs...), nil
	})
}

// startOnFreePort starts bin with the arguments argsFor returns for a free port and a
// new working directory, retrying on another port when the chosen one was taken meanwhile.
func startOnFreePort(bin string, argsFor func(port int, dir string) ([]string, error)) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	out := &outputBuffer{}
	var lastErr error
	for attempt := 0; attempt < portAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		args, err := argsFor(port, dir)
		if err != nil {
			lastErr = err
			break
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			bin:  bin,
			args: args,
			dir:  dir,
			out:  out,
		}
		p, err := s.spawn()
		if err == nil {
			s.proc = p
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("%w\nredis-server output:\n%s", lastErr, out.String())
}

// errPortInUse reports that redis-server could not bind its port.
var errPortInUse = errors.New("redistest: redis-server port already in use")

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	return port, nil
}

// spawn starts one redis-server process with s.args and waits until it answers on s.Addr
// with its own pid (so a foreign server that holds the port is never mistaken for ours).
func (s *Server) spawn() (*process, error) {
	mark := s.out.Len()
	cmd := exec.Command(s.bin, s.args...)
	if len(s.prefix) > 0 { // e.g. ip netns exec NS, which execs bin in place: same pid
		cmd = exec.Command(s.prefix[0], slices.Concat(s.prefix[1:], []string{s.bin}, s.args)...)
	}
	cmd.Dir = s.dir
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	deadline := time.Now().Add(startDeadline)
	for {
		select {
		case <-p.done:
			if strings.Contains(s.out.Since(mark), "Address already in use") {
				return nil, errPortInUse
			}
			return nil, fmt.Errorf("redistest: redis-server on %s exited during startup: %v", s.Addr, p.err)
		default:
		}
		pid, err := probeVia(s.dial, s.Addr, 200*time.Millisecond)
		if err == nil && pid == cmd.Process.Pid {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.kill()
			if err == nil {
				err = fmt.Errorf("answered by another process (pid %d)", pid)
			}
			return nil, fmt.Errorf("redistest: redis-server on %s did not answer within %v: %v", s.Addr, startDeadline, err)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL to the process group of p and waits for the process to exit.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	// The process leads its own group (Setpgid); kill the group so nothing forked survives.
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// probe connects to addr, sends PING and INFO server, and returns the server's process_id.
func probe(addr string, timeout time.Duration) (int, error) {
	return probeVia(nil, addr, timeout)
}

// dialFunc is the type of a go-redis Dialer: how to reach a server's address.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// dialTimeout dials addr with dial (the standard dialer when nil) within timeout.
func dialTimeout(dial dialFunc, addr string, timeout time.Duration) (net.Conn, error) {
	if dial == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dial(ctx, "tcp", addr)
}

// probeVia is probe dialing with dial (the standard dialer when nil).
func probeVia(dial dialFunc, addr string, timeout time.Duration) (int, error) {
	conn, err := dialTimeout(dial, addr, timeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return 0, fmt.Errorf("PING replied %q", strings.TrimSpace(line))
	}
	line, err = rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("INFO replied %q", strings.TrimSpace(line))
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return 0, fmt.Errorf("INFO replied %q", strings.TrimSpace(line))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rd, body); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// waitPing polls addr with PING until it answers or timeout passes.
func waitPing(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := probe(addr, 500*time.Millisecond)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %s does not answer PING within %v: %w", addr, timeout, err)
		}
		<-time.After(20 * time.Millisecond)
	}
}

// stop stops the server for good: kills an owned process, terminates a container, removes the
// data directory. External servers are left alone. Safe to call more than once.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.proc != nil {
		s.proc.kill()
	}
	if s.stopHook != nil {
		s.stopHook()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// Client returns a new go-redis client for the server, closed at the end of the test.
// opts adjust the options after Addr is set (e.g. timeouts, MaxRetries, Protocol).
// For a server in a host of a [Net] the client dials from the Net's admin host
// (Options.Dialer is [Net.Dialer]).
func (s *Server) Client(tb testing.TB, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	o := &redis.Options{Addr: s.Addr, Dialer: s.dial}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Controllable reports whether this process owns the server process, so that [Server.Kill],
// [Server.Restart], [Server.Signal] and [Server.Pid] work. It is false for $REDIS_ADDR and
// container servers; tests that need fault injection should t.Skip then.
func (s *Server) Controllable() bool {
	return s.bin != ""
}

// mustControl panics when s is not Controllable: calling a process operation on an external
// server is a bug in the test.
func (s *Server) mustControl(op string) {
	if !s.Controllable() {
		panic("redistest: " + op + " on a server not owned by this process (" + s.Addr + "); check Controllable first")
	}
}

// Kill sends SIGKILL to the server process and waits for it to exit. The server stays down
// until [Server.Restart]. Killing a server that is already down does nothing.
// It panics when the server is not [Server.Controllable].
func (s *Server) Kill() {
	s.mustControl("Kill")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
	}
}

// Restart kills the server (if running) and starts it again on the same port with the same
// arguments and an empty dataset, then waits until it answers PING. Clients reconnect by
// themselves; their current connections are broken. It fails the test when the port cannot
// be bound again within a few attempts. It panics when the server is not [Server.Controllable].
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mustControl("Restart")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		tb.Fatalf("redistest: Restart of %s after it was stopped", s.Addr)
	}
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
	fmt.Fprintf(s.out, "\n--- redistest: restart ---\n")
	var err error
	for attempt := 0; attempt < portAttempts; attempt++ {
		var p *process
		p, err = s.spawn()
		if err == nil {
			s.proc = p
			return
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
		// Somebody took the port while the server was down: wait for it to be released.
		<-time.After(100 * time.Millisecond)
	}
	tb.Fatalf("redistest: restarting redis-server on %s: %v\noutput:\n%s", s.Addr, err, s.out.String())
}

// Signal sends sig to the server process, e.g. syscall.SIGSTOP to freeze it (connections stay
// open, commands time out) and syscall.SIGCONT to resume it. It returns an error when the
// server is not [Server.Controllable] or not running.
func (s *Server) Signal(sig os.Signal) error {
	if !s.Controllable() {
		return fmt.Errorf("redistest: Signal on a server not owned by this process (%s)", s.Addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redistest: server %s is not running", s.Addr)
	}
	select {
	case <-s.proc.done:
		return fmt.Errorf("redistest: server %s has exited", s.Addr)
	default:
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Pid returns the pid of the server process, or 0 when the server is not
// [Server.Controllable] or not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	select {
	case <-s.proc.done:
		return 0
	default:
	}
	return s.proc.cmd.Process.Pid
}

// Output returns the most recent output (stdout and stderr, up to 256 KiB) of the server
// process over all its restarts; "" when the server is not [Server.Controllable].
func (s *Server) Output() string {
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

// Name returns a unique key name for a test: "test:<TestName>:<random hex>".
// Use it as a lock or key name so tests sharing a server never collide.
func Name(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("redistest: random name: %v", err)
	}
	return "test:" + tb.Name() + ":" + hex.EncodeToString(b[:])
}

// outputBuffer is a concurrency-safe buffer that keeps the last maxOutput bytes written.
type outputBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int // bytes discarded from the front
}

// Write implements io.Writer.
func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - maxOutput; over > 0 {
		b.buf.Next(over)
		b.dropped += over
	}
	return len(p), nil
}

// Len returns the total number of bytes ever written.
func (b *outputBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped + b.buf.Len()
}

// Since returns what was written after the first mark bytes (as far as still kept).
func (b *outputBuffer) Since(mark int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	skip := mark - b.dropped
	if skip < 0 {
		skip = 0
	}
	data := b.buf.Bytes()
	if skip > len(data) {
		return ""
	}
	return string(data[skip:])
}

// String returns the kept output.
func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[... %d bytes dropped ...]\n%s", b.dropped, b.buf.String())
	}
	return b.buf.String()
}
