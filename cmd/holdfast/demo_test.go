package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// demoLimit is how long a whole demo may take.
const demoLimit = 30 * time.Second

// runDemoCommand runs "holdfast demo args..." with env as the environment and
// returns the exit code, stdout, stderr and the wall time.
func runDemoCommand(t *testing.T, env map[string]string, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit+5*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	io := stdio{in: strings.NewReader(""), out: &out, err: &errOut, env: func(k string) string { return env[k] }}
	start := time.Now()
	code := demoCommand(ctx, args, io)
	return code, out.String(), errOut.String(), time.Since(start)
}

// TestDemoEmbedded runs the whole demo on the embedded server: it must end
// with exit 0 within 30 s, show every scene's key events, and leave no
// goroutine behind.
func TestDemoEmbedded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	code, out, errOut, took := runDemoCommand(t, nil)
	t.Logf("demo took %v; output:\n%s", took, out)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if took > demoLimit {
		t.Errorf("the demo took %v, more than %v", took, demoLimit)
	}
	for _, want := range []string{
		"on an embedded Redis (miniredis at ",
		"holds orders:42 (count 1)",
		"by pub/sub",                                        // scene 1: a wake-up across clients
		"(inside ",                                          // scene 1: a pass inside a client
		"holds (count 2)",                                   // scene 2: re-entered
		"another owner: busy (ErrNotAcquired)",              // scene 2: others refused
		"outer Unlock: count 0, IsLocked = false",           // scene 2: free after both unlocks
		"after the release: woken by the release's pub/sub", // scene 3
		"after the release: handed the lock by the release script",
		"renewed backup:nightly: PTTL",                           // scene 4
		"past the 1s timeout, still held",                        // scene 4
		"DEL payments:9",                                         // scene 5
		"WithOnLost callback: payments:9 lost: rlock: lock lost", // scene 5
		"lease.Done() closed",                                    // scene 5
		"Unlock returns ErrNotHeld",                              // scene 5
		"Summary", "release → acquire  p50 ", "wait when busy     p50 ", "1 reported",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if n := strings.Count(out, "renewed backup:nightly"); n < 3 {
		t.Errorf("%d watchdog renewals shown, want at least 3 in a 2.5 s job with a 1 s timeout", n)
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("ANSI escapes written to a buffer")
	}
}

// TestDemoFlags checks the exit codes of bad flags and unreachable servers.
func TestDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		err  string
		out  string // the start of stdout
	}{
		{args: []string{"extra"}, code: exitUsage, err: `unexpected argument "extra"`},
		{args: []string{"-h"}, code: exitOK, out: "Shows holdfast's locks at work"},
		{args: []string{"--no-such-flag"}, code: exitUsage, err: "flag provided but not defined"},
		{args: []string{"--cluster"}, code: exitUsage, err: "need --redis"},
		{args: []string{"--redis", "http://x"}, code: exitUsage, err: "bad --redis URL"},
		{args: []string{"--connect-timeout", "abc"}, code: exitUsage, err: `invalid value "abc" for flag --connect-timeout`},
		{args: []string{"--connect-timeout", "2"}, env: map[string]string{"REDIS_URL": "redis://127.0.0.1:1"},
			code: exitUnavailable, err: "cannot reach Redis at redis://127.0.0.1:1"},
	} {
		code, out, errOut, _ := runDemoCommand(t, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.err) || !strings.HasPrefix(out, tc.out) || tc.out == "" && out != "" {
			t.Errorf("demo %q: exit %d, stderr %q, stdout %q; want exit %d, %q and stdout %q", tc.args, code, errOut, out, tc.code, tc.err, tc.out)
		}
		if code == exitUsage && !strings.HasSuffix(errOut, "\nrun 'holdfast demo -h' for usage\n") {
			t.Errorf("demo %q: stderr %q, want two lines", tc.args, errOut)
		}
	}
}

// The demo against a real server is TestCLIDemo in the integration module,
// which starts its own redis-server.

// TestDemoHelpSaysItsDefault: "demo -h" says that without --redis the demo runs
// on an embedded server (it once said localhost, the other commands' default);
// "lock -h" says localhost.
func TestDemoHelpSaysItsDefault(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"demo", "(default $REDIS_URL, else an embedded Redis"},
		{"lock", "(default $REDIS_URL, else " + defaultRedisURL + ")"},
	} {
		var out, errOut strings.Builder
		code := run(context.Background(), []string{tc.cmd, "-h"}, stdio{out: &out, err: &errOut, env: func(string) string { return "" }})
		if code != exitOK || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s -h (exit %d) does not say %q:\n%s%s", tc.cmd, code, tc.want, out.String(), errOut.String())
		}
	}
}
