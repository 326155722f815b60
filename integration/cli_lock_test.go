package integration

import (
	"bufio"
	"bytes"
	"context"
	"github.com/holdfast-go/holdfast/rlock"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// cliLockTimeout bounds every run of "holdfast lock" in these tests.
const cliLockTimeout = 15 * time.Second

// lockCLI is one run of "holdfast lock" started by a test, with the command's
// standard input, its output lines and holdfast's stderr.
type lockCLI struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
	start  time.Time
	done   chan struct{} // closed once the process has exited; then code and took are set
	code   int
	took   time.Duration
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startLockCLI starts "holdfast lock --redis redis://addr args...", killed at
// the end of the test if still running.
func startLockCLI(t *testing.T, addr string, args ...string) *lockCLI {
	t.Helper()
	return startLockCLIURL(t, "redis://"+addr, args...)
}

// startLockCLIURL starts "holdfast lock --redis url args...".
func startLockCLIURL(t *testing.T, url string, args ...string) *lockCLI {
	t.Helper()
	return startSessionCLI(t, "lock", url, args...)
}

// startSessionCLI starts "holdfast sub --redis url args..." (sub: lock or
// elect), killed at the end of the test if still running.
func startSessionCLI(t *testing.T, sub, url string, args ...string) *lockCLI {
	t.Helper()
	cmd := exec.Command(holdfastBin(t), append([]string{sub, "--redis", url}, args...)...)
	// Variables of an enclosing holdfast must not reach the command.
	cmd.Env = append(os.Environ(), "HOLDFAST_OWNER=stale", "HOLDFAST_TOKEN=stale", "REDIS_URL=")
	p := &lockCLI{cmd: cmd, lines: make(chan string, 100), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	// A process group of its own, holdfast and its command: the cleanup kills
	// both, or the command would hold stdout open and collect never end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.start = time.Now()
	require.NoError(t, cmd.Start())
	go p.collect(stdout)
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			t.Logf("holdfast killed at the end of the test; stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// collect reads the output lines until EOF, then waits for the process.
func (p *lockCLI) collect(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		p.lines <- sc.Text()
	}
	close(p.lines)
	_ = p.cmd.Wait()
	p.took = time.Since(p.start)
	p.code = p.cmd.ProcessState.ExitCode()
	close(p.done)
}

// expect waits for the next output line and requires it to be want.
func (p *lockCLI) expect(t *testing.T, want string) {
	t.Helper()
	require.Equal(t, want, p.next(t))
}

// next returns the next output line.
func (p *lockCLI) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "holdfast's output ended; stderr:\n%s", p.stderr.String())
		return l
	case <-time.After(cliLockTimeout):
		t.Fatalf("no output line from holdfast in %v; stderr:\n%s", cliLockTimeout, p.stderr.String())
	}
	return ""
}

// wait waits for holdfast to exit and returns its exit code.
func (p *lockCLI) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(cliLockTimeout):
		t.Fatalf("holdfast did not exit in %v; stderr:\n%s", cliLockTimeout, p.stderr.String())
	}
	return p.code
}

// finish closes the command's stdin (ending a "read" it waits in) and returns
// holdfast's exit code.
func (p *lockCLI) finish(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	return p.wait(t)
}

// runLockCLI runs "holdfast lock" to its end and returns its exit code and
// stderr.
func runLockCLI(t *testing.T, addr string, args ...string) (int, string) {
	t.Helper()
	p := startLockCLI(t, addr, args...)
	_ = p.stdin.Close()
	return p.wait(t), p.stderr.String()
}

// requireNoLock requires the lock's hash to be gone: holdfast released it.
func requireNoLock(t *testing.T, rdb redis.Cmdable, name string) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), name).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the lock %q is still there: %v", name, holders(t, rdb, name))
}

// loopForever is a shell loop that runs until a signal stops it; sleep's
// children are short-lived, so the output closes soon after the shell dies.
const loopForever = "while :; do sleep 0.05; done"

func TestCLILockExitStatus(t *testing.T) {
	rdb, _, name := setup(t)
	addr := redistest.Shared(t).Addr
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 255", 255},
		{"kill -KILL $$", 128 + 9},
	} {
		code, stderr := runLockCLI(t, addr, name, "--", "sh", "-c", tc.script)
		require.Equal(t, tc.want, code, "sh -c %q; stderr: %s", tc.script, stderr)
		requireNoLock(t, rdb, name)
	}
}

func TestCLILockEnv(t *testing.T) {
	rdb, _, name := setup(t)
	p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "sh", "-c",
		`echo "$HOLDFAST_LOCK"; echo "$HOLDFAST_OWNER"; echo "${HOLDFAST_TOKEN-unset}"; read x || :`)
	p.expect(t, name)
	owner := p.next(t)
	p.expect(t, "unset")
	require.Equal(t, map[string]string{owner: "1"}, holders(t, rdb, name), "HOLDFAST_OWNER is the hash's field")
	require.Regexp(t, `^[0-9a-f-]{36}:[0-9]+$`, owner)
	require.Equal(t, 0, p.finish(t), p.stderr.String())
	requireNoLock(t, rdb, name)
}

func TestCLILockBusy(t *testing.T) {
	rdb, c, name, lease := setupHeld(t)
	ctx := testCtx(t, 30*time.Second)
	defer func() { require.NoError(t, lease.Unlock(ctx)) }()
	held, holder := holders(t, rdb, name), lease.Holder()
	addr := redistest.Shared(t).Addr

	p := startLockCLI(t, addr, "-n", name, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t))
	require.Less(t, p.took, 3*time.Second)
	require.Regexp(t, "is busy: held by "+holderPattern(c.ID(), strings.TrimPrefix(holder, c.ID()+":")), p.stderr.String())
	require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line: %s", p.stderr.String())

	code, stderr := runLockCLI(t, addr, "-n", "-E", "42", name, "--", "echo", "never")
	require.Equal(t, 42, code, stderr)
	code, stderr = runLockCLI(t, addr, "-n", "-E", "0", "-q", name, "--", "echo", "never")
	require.Equal(t, 0, code)
	require.Empty(t, stderr, "-q")

	p = startLockCLI(t, addr, "-w", "300ms", name, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t), p.stderr.String())
	require.GreaterOrEqual(t, p.took, 300*time.Millisecond)
	require.Less(t, p.took, 5*time.Second)
	require.Contains(t, p.stderr.String(), "still busy after 300ms")
	require.Equal(t, held, holders(t, rdb, name), "holdfast left nothing in the lock")
}

// TestCLILockWaitSeconds: -w takes a bare number of seconds, as flock(1) does:
// "-w 5" waits for a holder that releases within the 5 s, "-w 0.3" gives up
// after 300 ms.
func TestCLILockWaitSeconds(t *testing.T) {
	rdb, c, name, lease := setupHeld(t)
	addr := redistest.Shared(t).Addr
	held := holders(t, rdb, name)

	p := startLockCLI(t, addr, "-w", "0.3", name, "--", "echo", "never")
	require.Equal(t, 1, p.wait(t), p.stderr.String())
	require.GreaterOrEqual(t, p.took, 300*time.Millisecond)
	require.Less(t, p.took, 5*time.Second)
	require.Regexp(t, regexp.QuoteMeta(strconv.Quote(name)+" is still busy after 300ms: held by ")+holderOf(c, lease), p.stderr.String())
	require.Equal(t, held, holders(t, rdb, name), "holdfast left nothing in the lock")

	p = startLockCLI(t, addr, "-w", "5", name, "--", "echo", "got it")
	awaitSubscribers(t, rdb, "redisson_lock__channel:{"+name+"}", 1) // waiting, not refused
	requireServedOnUnlock(t, p, lease, rdb, name)
}

// requireServedOnUnlock unlocks lease, which p waits for, and requires p to run
// its command (echo "got it") and exit 0, leaving the lock free.
func requireServedOnUnlock(t *testing.T, p *lockCLI, lease *rlock.Lease, rdb *redis.Client, name string) {
	t.Helper()
	require.NoError(t, lease.Unlock(testCtx(t, 10*time.Second)))
	p.expect(t, "got it")
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	requireNoLock(t, rdb, name)
}

func TestCLILockWaitsForTheHolder(t *testing.T) {
	rdb, c, name, lease := setupHeld(t)
	p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "echo", "got it")
	// The progress line, after a second, says who holds the lock.
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "waiting for") }, 10*time.Second, 20*time.Millisecond)
	require.Regexp(t, "held by "+holderOf(c, lease), p.stderr.String())
	require.Contains(t, p.stderr.String(), "s left")
	requireServedOnUnlock(t, p, lease, rdb, name)
}

func TestCLILockInterruptedWait(t *testing.T) {
	rdb, _, name, lease := setupHeld(t)
	ctx := testCtx(t, 30*time.Second)
	defer func() { require.NoError(t, lease.Unlock(ctx)) }()
	held := holders(t, rdb, name)
	channel := "redisson_lock__channel:{" + name + "}"
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}, {syscall.SIGHUP, 129}} {
		p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "echo", "never")
		// Waiting: subscribed to the lock's release channel.
		awaitSubscribers(t, rdb, channel, 1)
		require.NoError(t, p.cmd.Process.Signal(tc.sig))
		require.Equal(t, tc.want, p.wait(t), "%v: %s", tc.sig, p.stderr.String())
		require.Equal(t, held, holders(t, rdb, name))
	}
}

func TestCLILockLease(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	p := startLockCLI(t, redistest.Shared(t).Addr, "--lease", "1500ms", name, "--", "sh", "-c", "echo ready; "+loopForever)
	p.expect(t, "ready")
	ttl, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	require.True(t, ttl > 0 && ttl <= 1500*time.Millisecond, "PTTL %v", ttl)
	// Not renewed: the lease runs down (a renewal would put it back to 30 s).
	require.Eventually(t, func() bool {
		ttl, err := rdb.PTTL(ctx, name).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, 1500*time.Millisecond)
		return ttl > 0 && ttl < 800*time.Millisecond
	}, 5*time.Second, 10*time.Millisecond)
	// When it runs out, the command is stopped (not at the watchdog's first
	// round, 10 s after the client started).
	require.Equal(t, exitLockLost, p.wait(t), p.stderr.String())
	require.Less(t, p.took, 6*time.Second)
	require.Contains(t, p.stderr.String(), "lost "+strconv.Quote(name))
	requireNoLock(t, rdb, name)
}

// exitLockLost is holdfast's exit code when the lock was lost while the command ran.
const exitLockLost = 75

func TestCLILockWatchdogRenews(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	p := startLockCLI(t, redistest.Shared(t).Addr, "--watchdog-timeout", "600ms", name, "--", "sh", "-c", "echo ready; read x || :")
	p.expect(t, "ready")
	ttl, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	require.True(t, ttl > 0 && ttl <= 600*time.Millisecond, "PTTL %v", ttl)
	// Held for more than three times its lease, renewed.
	require.Never(t, func() bool {
		n, err := rdb.Exists(ctx, name).Result()
		return err != nil || n == 0
	}, 2*time.Second, 20*time.Millisecond)
	require.Equal(t, 0, p.finish(t), p.stderr.String())
	requireNoLock(t, rdb, name)
}

func TestCLILockForwardsSignals(t *testing.T) {
	rdb, _, name := setup(t)
	for _, sig := range []string{"TERM", "INT", "HUP", "QUIT", "USR1", "USR2"} {
		p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "sh", "-c",
			`trap "echo got `+sig+`; exit 3" `+sig+`; echo ready; `+loopForever)
		p.expect(t, "ready")
		num := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
			"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2}[sig]
		require.NoError(t, p.cmd.Process.Signal(num))
		p.expect(t, "got "+sig)
		require.Equal(t, 3, p.wait(t), "%s: %s", sig, p.stderr.String())
		requireNoLock(t, rdb, name)
	}
	// A command that does not catch it dies of it: 128 + its number.
	p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "sh", "-c", "echo ready; "+loopForever)
	p.expect(t, "ready")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 143, p.wait(t), p.stderr.String())
	requireNoLock(t, rdb, name)
}

func TestCLILockLost(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		what, trap string
		killed     bool
	}{
		{"stops on SIGTERM", `trap "echo got TERM; exit 0" TERM`, false},
		{"ignores SIGTERM", `trap "echo got TERM" TERM`, true},
	} {
		p := startLockCLI(t, redistest.Shared(t).Addr, "--watchdog-timeout", "600ms", "--kill-grace", "500ms", name, "--",
			"sh", "-c", tc.trap+"; echo ready; "+loopForever)
		p.expect(t, "ready")
		require.NoError(t, rdb.Del(ctx, name).Err())
		p.expect(t, "got TERM")
		termAt := time.Now()
		require.Equal(t, exitLockLost, p.wait(t), "%s: %s", tc.what, p.stderr.String())
		if tc.killed {
			require.GreaterOrEqual(t, time.Since(termAt), 300*time.Millisecond, "SIGKILL after --kill-grace")
		}
		require.Contains(t, p.stderr.String(), "holdfast lock: lost "+strconv.Quote(name)+": ")
		require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line: %s", p.stderr.String())
		requireNoLock(t, rdb, name)
	}
}

// TestCLILockLostAtOnce: with the default watchdog (renewals every 10 s), the
// command is stopped as soon as the lock is deleted: the client's tracking
// tells the loss within a round trip.
func TestCLILockLostAtOnce(t *testing.T) {
	rdb, _, name := setup(t)
	p := startLockCLI(t, redistest.Shared(t).Addr, name, "--", "sh", "-c", `trap "echo got TERM; exit 0" TERM; echo ready; while :; do sleep 0.05 & wait $!; done`) // wait: the trap runs at once
	p.expect(t, "ready")
	deleted := time.Now()
	require.NoError(t, rdb.Del(context.Background(), name).Err())
	p.expect(t, "got TERM")
	took := time.Since(deleted)
	require.Equal(t, exitLockLost, p.wait(t), p.stderr.String())
	t.Logf("command signalled %v after the deletion: %s", took.Round(time.Microsecond), strings.TrimSpace(p.stderr.String()))
	require.Less(t, took, 2*time.Second, "the first renewal is 10 s away")
	require.Contains(t, p.stderr.String(), "its key changed")
}

func TestCLILockCannotRun(t *testing.T) {
	rdb, _, name := setup(t)
	addr := redistest.Shared(t).Addr
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644))
	notProgram := filepath.Join(dir, "not-a-program")
	require.NoError(t, os.WriteFile(notProgram, []byte("\x00\x01\x02 garbage\n"), 0o755))
	for _, tc := range []struct {
		cmd, msg string
		want     int
	}{
		{"holdfast-no-such-command", "command not found", 127},
		{filepath.Join(dir, "missing"), "command not found", 127},
		{notExec, "cannot run: permission denied", 126},
		{notProgram, "cannot run: exec format error", 126}, // found executable: fails after the lock is taken
	} {
		code, stderr := runLockCLI(t, addr, name, "--", tc.cmd, "arg")
		require.Equal(t, tc.want, code, stderr)
		require.Equal(t, "holdfast lock: "+tc.cmd+": "+tc.msg+"\n", stderr)
		requireNoLock(t, rdb, name)
	}
}

func TestCLILockNotALock(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, rdb.Set(ctx, name, "x", time.Minute).Err())
	code, stderr := runLockCLI(t, redistest.Shared(t).Addr, name, "--", "echo", "never")
	require.Equal(t, 65, code, stderr)
	require.Equal(t, "holdfast lock: "+name+": not a lock: the key holds a string; left alone\n", stderr, "the wording of status and unlock")
	require.Equal(t, "x", rdb.Get(ctx, name).Val(), "the key is left alone")

	// A name whose keys could not share a Cluster slot is refused on any server.
	code, stderr = runLockCLI(t, redistest.Shared(t).Addr, name+"{", "--", "echo", "never")
	require.Equal(t, 64, code, stderr)
	require.Contains(t, stderr, "invalid argument")
}

func TestCLILockBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus", "name"},
		{"-w", "soon", "name"},
		{"-w", "-1s", "name"},
		{"-w", "-1", "name"},
		{"--lease", "5x", "name"},
		{"--watchdog-timeout", "-30", "name"},
		{"--kill-grace", "later", "name"},
		{"--connect-timeout", "0", "name"},
		{"--read", "--write", "name"},
		{"-n", "-w", "1s", "name"},
		{"-E", "300", "name"},
		{},
		{"name", "echo"},
		{"name", "-n", "--", "echo"},
		{"name", "--"},
	} {
		// The server is never dialled: a closed port would do.
		code, stderr := runLockCLI(t, "127.0.0.1:1", args...)
		require.Equal(t, 64, code, "%q: %s", args, stderr)
		requireUsageError(t, "lock", stderr)
	}
}

func TestCLILockUnreachable(t *testing.T) {
	// A closed port: refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := startLockCLI(t, closed, "--connect-timeout", "2s", "name", "--", "echo", "never")
	require.Equal(t, 69, p.wait(t), p.stderr.String())
	require.Less(t, p.took, 5*time.Second)
	require.Regexp(t, `^holdfast lock: cannot reach Redis at redis://`+closed+`: .*\n$`, p.stderr.String())

	// A server that accepts and never answers: the connect timeout bounds the wait.
	silent := newSilentServer(t)
	p = startLockCLI(t, silent, "--connect-timeout", "500ms", "name", "--", "echo", "never")
	require.Equal(t, 69, p.wait(t), p.stderr.String())
	require.Less(t, p.took, 5*time.Second)
	require.Regexp(t, `^holdfast lock: cannot reach Redis at redis://`+silent+`: no answer in time.*\n$`, p.stderr.String())
}

// newSilentServer returns the address of a listener that accepts connections
// and never answers; it is closed at the end of the test.
func newSilentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestCLILockWrongPassword(t *testing.T) {
	srv := redistest.Start(t) // not with --requirepass: redistest's readiness PING has no password
	require.NoError(t, srv.Client(t).ConfigSet(context.Background(), "requirepass", "s3cret").Err())
	for _, url := range []string{"redis://:wrong@" + srv.Addr, "redis://" + srv.Addr} {
		p := startLockCLIURL(t, url, "name", "--", "echo", "never")
		require.Equal(t, 69, p.wait(t), p.stderr.String())
		require.Contains(t, p.stderr.String(), "authentication refused")
		require.NotContains(t, p.stderr.String(), "wrong@", "the password is not shown")
		require.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line: %s", p.stderr.String())
	}
	p := startLockCLIURL(t, "redis://:s3cret@"+srv.Addr, "name", "--", "echo", "in")
	p.expect(t, "in")
	require.Equal(t, 0, p.wait(t), p.stderr.String())
}

func TestCLILockFair(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	lease, err := c.NewFairMutex(name).Lock(ctx)
	require.NoError(t, err)
	p := startLockCLI(t, redistest.Shared(t).Addr, "--fair", name, "--", "echo", "got it")
	// Queued in Redisson's fair queue, as a Java waiter would be.
	queue := "redisson_lock_queue:{" + name + "}"
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, 10*time.Second, 10*time.Millisecond)
	requireServedOnUnlock(t, p, lease, rdb, name)
	require.Zero(t, rdb.Exists(ctx, queue, "redisson_lock_timeout:{"+name+"}").Val())
}

func TestCLILockReadWrite(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	addr := redistest.Shared(t).Addr
	printOwner := []string{"--", "sh", "-c", `echo "$HOLDFAST_OWNER"; read x || :`}
	r1 := startLockCLI(t, addr, append([]string{"--read", name}, printOwner...)...)
	r2 := startLockCLI(t, addr, append([]string{"--read", name}, printOwner...)...)
	o1, o2 := r1.next(t), r2.next(t)
	require.Equal(t, map[string]string{"mode": "read", o1: "1", o2: "1"}, holders(t, rdb, name), "two readers at once")
	code, stderr := runLockCLI(t, addr, "--write", "-n", name, "--", "echo", "never")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, 0, r1.finish(t), r1.stderr.String())
	require.Equal(t, 0, r2.finish(t), r2.stderr.String())
	requireNoLock(t, rdb, name)
	require.Empty(t, rdb.Keys(ctx, "{"+name+"}:*").Val(), "the read timeout keys are gone")

	w := startLockCLI(t, addr, append([]string{"--write", name}, printOwner...)...)
	ow := w.next(t)
	require.True(t, strings.HasSuffix(ow, ":write"), ow)
	require.Equal(t, map[string]string{"mode": "write", ow: "1"}, holders(t, rdb, name))
	code, stderr = runLockCLI(t, addr, "--read", "-n", name, "--", "echo", "never")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, 0, w.finish(t), w.stderr.String())
	requireNoLock(t, rdb, name)
}

func TestCLILockFenced(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	tokenKey := "redisson_lock_token:{" + name + "}"
	t.Cleanup(func() { rdb.Del(context.Background(), tokenKey) })
	var last int64
	for i := 0; i < 3; i++ {
		p := startLockCLI(t, redistest.Shared(t).Addr, "--fenced", name, "--", "sh", "-c", `echo "$HOLDFAST_TOKEN"`)
		tok, err := strconv.ParseInt(p.next(t), 10, 64)
		require.NoError(t, err)
		require.Greater(t, tok, last, "tokens increase")
		last = tok
		require.Equal(t, 0, p.wait(t), p.stderr.String())
		requireNoLock(t, rdb, name)
	}
	require.Equal(t, strconv.FormatInt(last, 10), rdb.Get(ctx, tokenKey).Val(), "Redisson's token counter")
}

func TestCLILockNoCommand(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		sig  syscall.Signal
		del  bool
		want int
	}{
		{syscall.SIGTERM, false, 0},
		{syscall.SIGINT, false, 0},
		{0, true, exitLockLost},
	} {
		p := startLockCLI(t, redistest.Shared(t).Addr, "--watchdog-timeout", "600ms", name)
		require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "holding") }, 10*time.Second, 10*time.Millisecond)
		require.Len(t, holders(t, rdb, name), 1)
		if tc.del {
			require.NoError(t, rdb.Del(ctx, name).Err())
		} else {
			require.NoError(t, p.cmd.Process.Signal(tc.sig))
		}
		require.Equal(t, tc.want, p.wait(t), "%v: %s", tc.sig, p.stderr.String())
		requireNoLock(t, rdb, name)
	}
}
