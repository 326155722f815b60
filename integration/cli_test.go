package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

// The holdfast command's binary, built once per test run (holdfastBin).
var cliBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// holdfastBin returns the path of the holdfast command built from this
// repository's cmd/holdfast, building it on first use. Every test that starts
// the command gets its path here, so this is also where the signals the tests
// send it get their default dispositions back (defaultSignals).
func holdfastBin(t testing.TB) string {
	t.Helper()
	defaultSignals()
	cliBuild.once.Do(func() {
		cliBuild.dir, cliBuild.err = os.MkdirTemp("", "holdfast-cli-")
		if cliBuild.err != nil {
			return
		}
		cliBuild.path = filepath.Join(cliBuild.dir, "holdfast")
		cmd := exec.Command("go", "build", "-o", cliBuild.path, "./cmd/holdfast")
		cmd.Dir = ".."
		cliBuild.out, cliBuild.err = cmd.CombinedOutput()
	})
	if cliBuild.err != nil {
		t.Fatalf("building cmd/holdfast: %v\n%s", cliBuild.err, cliBuild.out)
	}
	return cliBuild.path
}

// defaultSignals makes the signals the tests send holdfast reach it with their
// default dispositions, whatever this test binary inherited. A signal ignored
// here (nohup ignores SIGHUP; a shell's background job, `make test &`, SIGINT
// and SIGQUIT) stays ignored in every process the tests start, and holdfast
// rightly leaves an ignored signal ignored: a test that interrupts it would
// fail or wait forever. Go gives a child the default disposition of every
// signal its parent handles, so the test binary handles those it was started
// with ignored, and drops them (they were ignored).
var defaultSignals = sync.OnceFunc(func() {
	var ignored []os.Signal
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		if signal.Ignored(s) {
			ignored = append(ignored, s)
		}
	}
	if len(ignored) > 0 {
		signal.Notify(make(chan os.Signal, 1), ignored...)
	}
})

// requireUsageError requires stderr to be the usage error of "holdfast cmd"
// (cmd "" for holdfast itself): exactly two lines, what is wrong, then where
// the usage is.
func requireUsageError(t testing.TB, cmd, stderr string) {
	t.Helper()
	prog := strings.TrimSpace("holdfast " + cmd)
	lines := strings.SplitAfter(stderr, "\n")
	require.Len(t, lines, 3, "two lines and the end: %q", stderr)
	require.True(t, strings.HasPrefix(lines[0], prog+": "), "%q", stderr)
	require.Equal(t, "run '"+prog+" -h' for usage\n", lines[1], "%q", stderr)
	require.Empty(t, lines[2], "%q", stderr)
}

// TestCLIUsageErrors: a bad duration, an unknown flag or a missing operand is
// reported in two lines with exit 64 by every subcommand and by holdfast
// itself, before any connection (the closed port is never dialled); -h prints
// the help on stdout, exit 0.
func TestCLIUsageErrors(t *testing.T) {
	closed := "redis://127.0.0.1:1"
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"lock", []string{"lock", "-w", "abc", "name"}},
		{"lock", []string{"lock", "-w", "-5", "name"}},
		{"lock", []string{"lock", "--watchdog-timeout", "1y", "name"}},
		{"lock", []string{"lock", "--redis", closed}},
		{"status", []string{"status", "--connect-timeout", "abc", "name"}},
		{"status", []string{"status", "name", "--connect-timeout", "-1"}},
		{"status", []string{"status", "--bogus", "name"}},
		{"status", []string{"status", "--redis", closed}},
		{"unlock", []string{"unlock", "--force", "--connect-timeout", "abc", "name"}},
		{"unlock", []string{"unlock", "--force", "--redis", closed, "a", "b"}},
		{"unlock", []string{"unlock", "--force", "--redis", closed}},
		{"demo", []string{"demo", "--connect-timeout", "abc"}},
		{"demo", []string{"demo", "extra"}},
		{"", []string{"bogus"}},
		{"", nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := statusCLI(t, tc.args...)
			require.Equal(t, 64, r.code, "stderr: %s", r.stderr)
			requireUsageError(t, tc.cmd, r.stderr)
			require.Empty(t, r.stdout)
			require.Less(t, r.took, 10*time.Second, "no wait, no connection")
		})
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"lock", "-h"}, {"status", "-h"}, {"unlock", "--help"}, {"demo", "-h"}} {
		r := statusCLI(t, args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		require.Empty(t, r.stderr, "%q", args)
		require.Contains(t, r.stdout, "usage:", "%q", args)
	}
}

// demoLimit is how long "holdfast demo" may take.
const demoLimit = 30 * time.Second

// runDemoCLI runs "holdfast demo args..." without $REDIS_URL in its
// environment, and fails the test unless it exits 0 within demoLimit. It
// returns its output.
func runDemoCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, holdfastBin(t), append([]string{"demo"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	t.Logf("holdfast demo %q took %v", args, time.Since(start))
	require.NoError(t, err, "stderr: %s\nstdout: %s", errOut.String(), out.String())
	require.Empty(t, errOut.String())
	require.Contains(t, out.String(), "Summary")
	return out.String()
}

// TestCLIDemo runs "holdfast demo" on its embedded server and on a real one,
// where it must leave no key behind.
func TestCLIDemo(t *testing.T) {
	srv := redistest.Shared(t)
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		out := runDemoCLI(t)
		require.Contains(t, out, "embedded Redis (miniredis")
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		out := runDemoCLI(t, "--redis", "redis://"+srv.Addr)
		require.Contains(t, out, "on Redis at redis://"+srv.Addr)
		require.Contains(t, out, "Cleaned up:")
		rdb := srv.Client(t)
		keys, err := rdb.Keys(context.Background(), "*holdfast-demo:*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "keys the demo left on the server")
	})
}

// "holdfast elect" and the election part of "holdfast status".

// electScript prints the term's token and value, then waits for stdin to
// close.
const electScript = `echo "lead $HOLDFAST_TOKEN $HOLDFAST_OWNER"; read x || :`

// TestCLIElect: two "holdfast elect" processes: the first leads and runs its
// command, the second waits (status shows the leader, its value, term and one
// candidate); the first's command ends, it resigns, and the second leads at
// once, in a new term; deleting its lock stops its command, exit 75.
func TestCLIElect(t *testing.T) {
	rdb, _, name := setup(t)
	ctx := testCtx(t, 60*time.Second)
	url := sharedURL(t)
	a := startSessionCLI(t, "elect", url, "--value", "first", name, "--", "sh", "-c", electScript)
	f := strings.Fields(a.next(t))
	require.Len(t, f, 3)
	t1, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)

	b := startSessionCLI(t, "elect", url, "--value", "second", "--watchdog-timeout", "600ms", "--kill-grace", "500ms", name, "--",
		"sh", "-c", `trap "echo got TERM; exit 0" TERM; echo "lead $HOLDFAST_TOKEN"; `+loopForever)
	awaitSubscribersAtLeast(t, rdb, lua.ChannelName(name), 1) // the candidate waits
	st := statusOne(t, name)
	require.NotNil(t, st.Election, "status shows the election")
	e := st.Election
	require.Equal(t, "first", e.Value)
	require.Equal(t, t1, e.Term)
	require.Equal(t, f[2], e.Leader, "HOLDFAST_OWNER is the leader's field")
	require.True(t, e.Proclaimed)
	require.EqualValues(t, 1, e.Candidates)
	require.WithinDuration(t, time.Now(), time.UnixMilli(e.SinceUnixMillis), 30*time.Second)
	human := statusHuman(t, name)
	require.Contains(t, human, `election: leader "first", term `+f[1])
	require.Contains(t, human, "candidates: 1 waiting")

	resigned := time.Now()
	require.Equal(t, 0, a.finish(t), a.stderr.String())
	line := b.next(t)
	t.Logf("next leader's command started %v after the first exited", time.Since(resigned))
	t2, err := strconv.ParseInt(strings.TrimPrefix(line, "lead "), 10, 64)
	require.NoError(t, err, line)
	require.Greater(t, t2, t1, "a new term")
	require.Equal(t, "second", statusOne(t, name).Election.Value)

	require.NoError(t, rdb.Del(ctx, name).Err())
	b.expect(t, "got TERM")
	require.Equal(t, exitLockLost, b.wait(t), b.stderr.String())
	require.Contains(t, b.stderr.String(), "holdfast elect: lost "+strconv.Quote(name)+": ")
	st = statusOne(t, name)
	require.Equal(t, "free", st.Kind)
	require.NotNil(t, st.Election)
	require.Empty(t, st.Election.Leader)
	require.True(t, st.Election.StaleRecord, "the lost leader's record is stale, never reported")
	require.Contains(t, statusHuman(t, name), "election: no leader (latest term "+strconv.FormatInt(t2, 10)+")")
}

// TestCLIElectWait: -w bounds the campaign: exit -E's code, the leader named.
func TestCLIElectWait(t *testing.T) {
	_, c, name := setup(t)
	ctx := testCtx(t, 30*time.Second)
	l, err := c.NewElection(name).Campaign(ctx, "incumbent")
	require.NoError(t, err)
	p := startSessionCLI(t, "elect", sharedURL(t), "-w", "300ms", "-E", "3", name, "--", "true")
	_ = p.stdin.Close()
	require.Equal(t, 3, p.wait(t), p.stderr.String())
	require.Contains(t, p.stderr.String(), `led by "incumbent"`)
	require.NoError(t, l.Resign(ctx))
}
