package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

// watchBound bounds every wait of the watch tests: for a refresh showing a
// change, for the exit after SIGINT. Generous: a refresh comes every 100 or
// 200 ms, and a refresh against a server that is down takes a few seconds.
const watchBound = 30 * time.Second

// cliWatchLine is one line of "holdfast status --watch --json", with every
// documented field (decoding fails on any other).
type cliWatchLine struct {
	Time    string            `json:"time"`
	Objects []cliPermitStatus `json:"objects"`
	Error   string            `json:"error"`
}

// watchCLI is a running "holdfast status --watch" whose stdout is a pipe.
type watchCLI struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
	done   chan struct{} // closed once the process has exited; then code is set
	code   int
}

// startWatch starts "holdfast status --watch --redis url args...", killed at
// the end of the test if still running.
func startWatch(t *testing.T, url string, args ...string) *watchCLI {
	t.Helper()
	w := &watchCLI{lines: make(chan string, 4096), stderr: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(holdfastBin(t), append([]string{"status", "--watch", "--redis", url}, args...)...)
	w.cmd.Stderr = w.stderr
	w.cmd.WaitDelay = 5 * time.Second
	stdout, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		_ = w.cmd.Wait()
		w.code = w.cmd.ProcessState.ExitCode()
		close(w.done)
	}()
	t.Cleanup(func() { killIfRunning(t, w.cmd, w.done, w.stderr) })
	return w
}

// killIfRunning kills a holdfast still running at the end of a test.
func killIfRunning(t *testing.T, cmd *exec.Cmd, done <-chan struct{}, stderr *lockedBuffer) {
	select {
	case <-done:
	default:
		_ = cmd.Process.Kill()
		<-done
		t.Logf("holdfast killed at the end of the test; stderr:\n%s", stderr.String())
	}
}

// next returns the next stdout line, failing the test when none comes within
// watchBound or the output ends.
func (w *watchCLI) next(t *testing.T, what string) string {
	t.Helper()
	timer := time.NewTimer(watchBound)
	defer timer.Stop()
	select {
	case l, ok := <-w.lines:
		require.True(t, ok, "waiting for %s: holdfast ended (exit %d); stderr:\n%s", what, w.code, w.stderr.String())
		return l
	case <-timer.C:
		t.Fatalf("waiting for %s: no line within %v; stderr:\n%s", what, watchBound, w.stderr.String())
		return ""
	}
}

// waitJSON reads JSON lines until one matches, and returns it; every line read
// must decode as documented. It fails the test after watchBound.
func (w *watchCLI) waitJSON(t *testing.T, what string, match func(cliWatchLine) bool) cliWatchLine {
	t.Helper()
	deadline := time.Now().Add(watchBound)
	for time.Now().Before(deadline) {
		if l := decodeWatchLine(t, w.next(t, what)); match(l) {
			return l
		}
	}
	t.Fatalf("waiting for %s: no matching line within %v", what, watchBound)
	return cliWatchLine{}
}

// decodeWatchLine decodes one line of --watch --json: a time (RFC 3339, close
// to now), then either the objects or an error, never both.
func decodeWatchLine(t *testing.T, line string) cliWatchLine {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	var l cliWatchLine
	require.NoError(t, dec.Decode(&l), line)
	require.False(t, dec.More(), "one object per line: %s", line)
	at, err := time.Parse(time.RFC3339Nano, l.Time)
	require.NoError(t, err, line)
	require.WithinDuration(t, time.Now(), at, time.Minute, line)
	require.NotEqual(t, l.Error == "", l.Objects == nil, "objects or an error: %s", line)
	return l
}

// interrupt sends SIGINT to holdfast and returns its exit code once it has
// exited, which must be within watchBound; the lines it printed meanwhile are
// handed to each.
func (w *watchCLI) interrupt(t *testing.T, each func(string)) int {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(os.Interrupt))
	timer := time.NewTimer(watchBound)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-w.lines:
			if ok {
				each(l)
				continue
			}
			<-w.done
			return w.code
		case <-timer.C:
			t.Fatalf("holdfast still running %v after SIGINT; stderr:\n%s", watchBound, w.stderr.String())
		}
	}
}

// TestCLIWatchJSON: "status --watch --json" on a lock, a semaphore and a latch,
// stdout a pipe: one JSON line per refresh, each with the time and the three
// objects as status --json shows them. The lock taken by the test shows with
// its holder and lease, the semaphore's permits and the latch's count follow
// the test's calls, the released lock shows free; SIGINT ends it with 0.
func TestCLIWatchJSON(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 2*watchBound)
	semName, latchName := name+":sem", name+":latch"
	sem, latch := c.NewSemaphore(semName), c.NewCountDownLatch(latchName)
	answer(sem.TrySetPermits(ctx, 3, 0)).is(t, true)
	answer(latch.TrySetCount(ctx, 2)).is(t, true)
	w := startWatch(t, sharedURL(t), "--json", "--interval", "100ms", name, "--semaphore", semName, "--latch", latchName)

	first := w.waitJSON(t, "the three objects", func(l cliWatchLine) bool { return l.Error == "" })
	require.Len(t, first.Objects, 3)
	got := [][]string{}
	for _, o := range first.Objects {
		got = append(got, []string{o.Name, o.Kind, o.Value, o.Channel})
	}
	require.Equal(t, [][]string{
		{name, "free", "", lua.ChannelName(name)},
		{semName, "semaphore", "3", lua.SemaphoreChannel(semName)},
		{latchName, "latch", "2", lua.LatchChannel(latchName)},
	}, got)

	lease, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	held := w.waitJSON(t, "the holder", func(l cliWatchLine) bool { return l.Objects[0].Kind == "lock" })
	require.Len(t, held.Objects[0].Holders, 1)
	require.Equal(t, c.ID(), held.Objects[0].Holders[0].ClientID)
	require.EqualValues(t, 1, held.Objects[0].Holders[0].Count)
	require.Greater(t, held.Objects[0].TTLMillis, int64(0))
	require.LessOrEqual(t, held.Objects[0].TTLMillis, int64(30_000))

	require.NoError(t, sem.Acquire(ctx, 1))
	require.NoError(t, latch.CountDown(ctx))
	w.waitJSON(t, "2 permits and count 1", func(l cliWatchLine) bool {
		return l.Objects[1].Value == "2" && l.Objects[2].Value == "1"
	})
	require.NoError(t, lease.Unlock(ctx))
	free := w.waitJSON(t, "the lock free again", func(l cliWatchLine) bool { return l.Objects[0].Kind == "free" })
	require.Empty(t, free.Objects[0].Holders)
	require.EqualValues(t, -2, free.Objects[0].TTLMillis)
	require.Zero(t, rdb.Exists(ctx, name).Val())

	start := time.Now()
	code := w.interrupt(t, func(l string) { decodeWatchLine(t, l) })
	require.Equal(t, 0, code, "stderr: %s", w.stderr.String())
	require.Empty(t, w.stderr.String())
	require.Less(t, time.Since(start), 10*time.Second, "SIGINT ends the watch at once")
}

// TestCLIWatchText: without --json and without a terminal, each refresh is a
// header line with the time and the interval, a blank line and what plain
// status prints, refreshes separated by a blank line, without escape
// sequences.
func TestCLIWatchText(t *testing.T) {
	_, _, name := setup(t)
	w := startWatch(t, sharedURL(t), "--interval", "100ms", name)
	header := regexp.MustCompile(`^holdfast status, every 100ms: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d\d:\d\d$`)
	for i := 0; i < 2; i++ {
		if i > 0 {
			require.Empty(t, w.next(t, "the blank line between refreshes"))
		}
		require.Regexp(t, header, w.next(t, "a header"))
		require.Empty(t, w.next(t, "the blank line after the header"))
		require.Equal(t, name+": free (no key)", w.next(t, "the headline"))
		require.Equal(t, "  waiters:  0 subscribed to "+lua.ChannelName(name), w.next(t, "the waiters"))
	}
	code := w.interrupt(t, func(l string) { require.NotContains(t, l, "\x1b") })
	require.Equal(t, 0, code, "stderr: %s", w.stderr.String())
	require.Empty(t, w.stderr.String())
}

// ptyOutput is what holdfast wrote on a pseudo-terminal, read as it comes.
type ptyOutput struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced at each write
}

// Write adds p and wakes the waiters.
func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

// snapshot returns the output so far and a channel closed at the next write.
func (o *ptyOutput) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String(), o.changed
}

// waitFor waits until want appears in the output at or after offset from, and
// returns the offset just past it; it fails the test after watchBound.
func (o *ptyOutput) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	timer := time.NewTimer(watchBound)
	defer timer.Stop()
	for {
		s, changed := o.snapshot()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("no %q on the terminal within %v; output since:\n%q", want, watchBound, s[from:])
		}
	}
}

// frameAround returns the refresh that the terminal output s shows at offset
// i: from the cursor-home sequence before i to the erase-below after it.
func frameAround(s string, i int) string {
	start := strings.LastIndex(s[:i], "\x1b[H")
	end := strings.Index(s[i:], "\x1b[J")
	if start < 0 || end < 0 {
		return ""
	}
	return s[start : i+end]
}

// startWatchPTY starts "holdfast status --watch" with args, its stdout a
// pseudo-terminal (stdin /dev/null, stderr on stderr); it returns the output,
// a channel closed once the process has exited and the terminal is drained,
// and the process.
func startWatchPTY(t *testing.T, stderr *lockedBuffer, args ...string) (*ptyOutput, <-chan struct{}, *exec.Cmd) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ptmx.Close() })
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 60, Cols: 200}))
	cmd := exec.Command(holdfastBin(t), append([]string{"status", "--watch"}, args...)...)
	cmd.Stdout, cmd.Stderr = tty, stderr
	require.NoError(t, cmd.Start())
	require.NoError(t, tty.Close()) // the child has its copy: reads end (EIO) when it exits
	out := &ptyOutput{changed: make(chan struct{})}
	read, done := make(chan struct{}), make(chan struct{})
	go func() { _, _ = io.Copy(out, ptmx); close(read) }()
	go func() { _ = cmd.Wait(); <-read; close(done) }()
	t.Cleanup(func() { killIfRunning(t, cmd, done, stderr) })
	return out, done, cmd
}

// TestCLIWatchTerminal: with a terminal as stdout, --watch clears the screen
// once, then redraws each refresh in place (cursor home, a header with the
// interval); the holder of the lock the test takes appears, then a later
// refresh with the waiter the test starts and the lease left. SIGINT ends it
// with 0, the cursor shown again.
func TestCLIWatchTerminal(t *testing.T) {
	rdb, c, name := setup(t)
	ctx := testCtx(t, 2*watchBound)
	stderr := &lockedBuffer{}
	out, done, cmd := startWatchPTY(t, stderr, "--interval", "200ms", "--redis", sharedURL(t), name)

	at := out.waitFor(t, 0, "\x1b[?25l\x1b[H\x1b[2J")
	at = out.waitFor(t, at, "holdfast status, every 200ms: ")
	at = out.waitFor(t, at, name+": free (no key)\x1b[K")

	held, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Unlock(ctx) }()
	fields := holders(t, rdb, name)
	require.Len(t, fields, 1)
	var owner string
	for f := range fields {
		owner = strings.TrimPrefix(f, c.ID()+":")
	}
	line := "    held by " + holderName(t, rdb, c.ID(), owner) + "  count 1\x1b[K"
	at = out.waitFor(t, at, line)

	waiter := newClient(t, redistest.Shared(t).Client(t))
	wctx, cancel := context.WithCancel(ctx)
	defer stopWaiter(cancel, lockAsync(wctx, waiter.NewMutex(name)))
	awaitSubscribers(t, rdb, lua.ChannelName(name), 1)
	at = out.waitFor(t, at, "  waiters:  1 subscribed to "+lua.ChannelName(name)+"\x1b[K")
	s, _ := out.snapshot()
	frame := frameAround(s, at)
	require.Contains(t, frame, name+": locked (RLock layout")
	require.Regexp(t, `\n  lease:    [0-9.]+m?s left\x1b\[K\r?\n`, frame)
	require.Contains(t, frame, line)

	start := time.Now()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-done:
	case <-time.After(watchBound):
		t.Fatalf("holdfast still running %v after SIGINT; stderr:\n%s", watchBound, stderr.String())
	}
	require.Less(t, time.Since(start), 10*time.Second, "SIGINT ends the watch at once")
	require.Equal(t, 0, cmd.ProcessState.ExitCode(), "stderr: %s", stderr.String())
	require.Empty(t, stderr.String())
	s, _ = out.snapshot()
	require.True(t, strings.HasSuffix(s, "\x1b[J\r\n\x1b[?25h"), "the cursor shown again below the view: %q", s[max(0, len(s)-100):])
}

// TestCLIWatchRedisError: a server that goes away during the watch is shown
// as an error line, and the watch goes on: once the server is back, the lines
// show the objects again (a lock taken on the new server among them).
func TestCLIWatchRedisError(t *testing.T) {
	srv := redistest.StartControllable(t)
	c := newClient(t, srv.Client(t))
	name := redistest.Name(t)
	ctx := testCtx(t, 3*watchBound)
	w := startWatch(t, "redis://"+srv.Addr, "--json", "--interval", "100ms", name)
	w.waitJSON(t, "a first read", func(l cliWatchLine) bool { return l.Error == "" && l.Objects[0].Kind == "free" })

	srv.Kill()
	failed := w.waitJSON(t, "an error line", func(l cliWatchLine) bool { return l.Error != "" })
	require.NotContains(t, failed.Error, "\n")

	srv.Restart(t)
	held, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Unlock(ctx) }()
	back := w.waitJSON(t, "the holder once the server is back", func(l cliWatchLine) bool {
		return l.Error == "" && l.Objects[0].Kind == "lock"
	})
	require.Equal(t, c.ID(), back.Objects[0].Holders[0].ClientID)

	code := w.interrupt(t, func(l string) { decodeWatchLine(t, l) })
	require.Equal(t, 0, code, "stderr: %s", w.stderr.String())
	require.Empty(t, w.stderr.String(), "errors are shown on stdout, in the lines")
}

// TestCLIWatchUnreachable: a server that cannot be reached before the first
// refresh ends the watch as it ends plain status: one line on stderr, exit 69,
// nothing on stdout; an --interval of 0 is a usage error (64).
func TestCLIWatchUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	for _, args := range [][]string{{"x"}, {"--json", "x"}, {"--scan", "*"}} {
		r := statusCLI(t, append([]string{"status", "--watch", "--redis", "redis://" + addr, "--connect-timeout", "2s"}, args...)...)
		require.Equal(t, 69, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: %q", args, r.stderr)
		require.Contains(t, r.stderr, "holdfast status: cannot reach Redis")
		require.Empty(t, r.stdout)
		require.Less(t, r.took, 10*time.Second, "%v", args)
	}
	r := statusCLI(t, "status", "--watch", "--interval", "0", "--redis", "redis://"+addr, "x")
	require.Equal(t, 64, r.code, r.stderr)
	requireUsageError(t, "status", r.stderr)
	require.Contains(t, r.stderr, "--interval must be more than 0")
}

// TestCLIWatchHelp: "status -h" gives the --watch synopsis, as docs/cli.md
// does, and both flags.
func TestCLIWatchHelp(t *testing.T) {
	doc, err := os.ReadFile("../docs/cli.md")
	require.NoError(t, err)
	const synopsis = "holdfast status --watch [--interval DURATION] [flags] NAME..."
	r := statusCLI(t, "status", "-h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "       "+synopsis+"\n")
	require.True(t, strings.Contains(string(doc), "\n"+synopsis+"\n"), "docs/cli.md gives the synopsis %q", synopsis)
	require.Contains(t, r.stdout, "\n  --watch\n")
	require.Contains(t, r.stdout, "\n  --interval DURATION\n")
}
