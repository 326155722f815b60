//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/stretchr/testify/require"
)

func TestParseLockCommandAndFlags(t *testing.T) {
	cfg, _, err := parseLock([]string{"-w", "3s", "--lease", "10s", "-E", "9", "--fenced", "-q", "jobs:nightly", "--", "sh", "-c", "exit 0"})
	require.NoError(t, err)
	require.Equal(t, "jobs:nightly", cfg.name)
	require.Equal(t, []string{"sh", "-c", "exit 0"}, cfg.argv)
	require.Equal(t, "fenced", cfg.kind)
	require.Equal(t, 3*time.Second, cfg.wait)
	require.Equal(t, 10*time.Second, cfg.lease)
	require.Equal(t, 9, cfg.busyCode)
	require.True(t, cfg.quiet)
	require.False(t, cfg.noWait)
	require.Equal(t, rlock.DefaultWatchdogTimeout, cfg.watchdog)
	require.Equal(t, 5*time.Second, cfg.killGrace)
}

func TestParseLockDefaults(t *testing.T) {
	cfg, _, err := parseLock([]string{"name"})
	require.NoError(t, err)
	require.Equal(t, "name", cfg.name)
	require.Empty(t, cfg.argv)
	require.Equal(t, "", cfg.kind)
	require.Equal(t, exitBusy, cfg.busyCode)
	require.False(t, cfg.noWait)

	cfg, _, err = parseLock([]string{"-w", "0", "name"})
	require.NoError(t, err)
	require.True(t, cfg.noWait, "-w 0 is -n")

	// Seconds, as flock(1) takes them, for every duration flag.
	cfg, _, err = parseLock([]string{"-w", "5", "--lease", "0.5", "--watchdog-timeout", "2", "--kill-grace", ".25", "--connect-timeout", "1.5", "name"})
	require.NoError(t, err)
	require.Equal(t, []time.Duration{5 * time.Second, 500 * time.Millisecond, 2 * time.Second, 250 * time.Millisecond, 1500 * time.Millisecond},
		[]time.Duration{cfg.wait, cfg.lease, cfg.watchdog, cfg.killGrace, cfg.conn.timeout})
}

func TestParseLockErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{""},
		{"--bogus", "name"},
		{"-w", "-1s", "name"},
		{"-w", "-1", "name"},
		{"-w", "5x", "name"},
		{"--lease", "-1s", "name"},
		{"--kill-grace", "-1s", "name"},
		{"--connect-timeout", "-2", "name"},
		{"--watchdog-timeout", "1ms", "name"},
		{"-E", "256", "name"},
		{"-n", "-w", "1s", "name"},
		{"--read", "--write", "name"},
		{"--fair", "--fenced", "name"},
		{"name", "true"},
		{"name", "-n", "--", "true"},
		{"name", "--"},
	} {
		_, _, err := parseLock(args)
		require.Error(t, err, "%q", args)
		require.False(t, errors.Is(err, context.Canceled))
	}
}

func TestLockCommandUsage(t *testing.T) {
	var out, errb bytes.Buffer
	io := stdio{in: strings.NewReader(""), out: &out, err: &errb, env: func(string) string { return "" }}
	require.Equal(t, exitUsage, lockCommand(context.Background(), []string{"name", "true"}, io))
	require.Equal(t, "holdfast lock: expected -- between NAME and the command (holdfast lock [flags] NAME -- true ...)\n"+
		"run 'holdfast lock -h' for usage\n", errb.String())
	require.Empty(t, out.String())

	errb.Reset()
	require.Equal(t, exitOK, lockCommand(context.Background(), []string{"-h"}, io))
	require.True(t, strings.HasPrefix(out.String(), "Waits for the lock NAME"), out.String())
	require.Contains(t, out.String(), "usage: holdfast lock [flags] NAME")
	require.Contains(t, out.String(), "-kill-grace")
	require.Empty(t, errb.String())
}

func TestLockCommandNotFoundBeforeConnecting(t *testing.T) {
	var errb bytes.Buffer
	io := stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb, env: func(string) string { return "" }}
	// The closed port is never dialled: the command is resolved first.
	code := lockCommand(context.Background(), []string{"--redis", "redis://127.0.0.1:1", "name", "--", "holdfast-no-such-command"}, io)
	require.Equal(t, exitNotFound, code)
	require.Equal(t, "holdfast lock: holdfast-no-such-command: command not found\n", errb.String())
}

func TestCannotRun(t *testing.T) {
	dir := t.TempDir()
	plain := dir + "/plain"
	require.NoError(t, os.WriteFile(plain, []byte("echo hi\n"), 0o644))
	var errb bytes.Buffer
	io := stdio{err: &errb}
	require.Equal(t, exitCannotRun, cannotRun(io, "lock", plain, lookErr(plain)))
	require.Equal(t, "holdfast lock: "+plain+": cannot run: permission denied\n", errb.String())

	errb.Reset()
	require.Equal(t, exitNotFound, cannotRun(io, "lock", dir+"/none", lookErr(dir+"/none")))
	require.Contains(t, errb.String(), "command not found")
}

func TestCommandEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOLDFAST_LOCK=outer", "HOLDFAST_OWNER=outer:1", "HOLDFAST_TOKEN=7", "HOLDFAST_PERMIT=ab", "HOME=/root"}
	require.Equal(t, []string{"PATH=/bin", "HOME=/root", "HOLDFAST_LOCK=n", "HOLDFAST_OWNER=id:2"},
		commandEnv(base, "n", "id:2", "", ""))
	require.Equal(t, []string{"PATH=/bin", "HOME=/root", "HOLDFAST_LOCK=n", "HOLDFAST_OWNER=id:2", "HOLDFAST_TOKEN=8"},
		commandEnv(base, "n", "id:2", "8", ""))
	require.Equal(t, []string{"PATH=/bin", "HOME=/root", "HOLDFAST_LOCK=n", "HOLDFAST_PERMIT=0123"},
		commandEnv(base, "n", "", "", "0123"))
}

// TestParseLockPermits: --permits N takes a semaphore's permit instead of a
// lock, with lock's other flags; N < 1 and a lock kind are usage errors.
func TestParseLockPermits(t *testing.T) {
	cfg, _, err := parseLock([]string{"--permits", "3", "-w", "2", "--lease", "1m", "jobs", "--", "true"})
	require.NoError(t, err)
	require.EqualValues(t, 3, cfg.permits)
	require.Equal(t, kindPermits, cfg.nameKind())
	require.Equal(t, 2*time.Second, cfg.wait)
	require.Len(t, cfg.permitOptions(), 1, "--lease: a fixed lease")
	require.Len(t, cfg.tryPermitOptions(), 2, "--lease and -w")

	cfg, _, err = parseLock([]string{"jobs"})
	require.NoError(t, err)
	require.Zero(t, cfg.permits, "a lock by default")
	require.Equal(t, "", cfg.nameKind())
	require.Empty(t, cfg.permitOptions(), "a watchdog lease")

	for args, msg := range map[string]string{
		"--permits 0 jobs":        "--permits 0: a semaphore has 1 permit or more",
		"--permits -2 jobs":       "--permits -2: a semaphore has 1 permit or more",
		"--permits x jobs":        "invalid value",
		"--permits 2 --fair jobs": "--permits and --fair exclude each other",
		"--read --permits 2 jobs": "--permits and --read exclude each other",
	} {
		_, _, err := parseLock(strings.Fields(args))
		require.ErrorContains(t, err, msg, args)
	}
}

// TestLockPermitsUsage: --permits 0 is a usage error in two lines (exit 64),
// before any connection; a name no semaphore may have is refused in one line,
// with the library's error.
func TestLockPermitsUsage(t *testing.T) {
	var errb bytes.Buffer
	io := stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb, env: func(string) string { return "" }}
	closed := "redis://127.0.0.1:1"
	require.Equal(t, exitUsage, lockCommand(context.Background(), []string{"--redis", closed, "--permits", "0", "jobs", "--", "true"}, io))
	require.Equal(t, "holdfast lock: --permits 0: a semaphore has 1 permit or more\nrun 'holdfast lock -h' for usage\n", errb.String())

	errb.Reset()
	require.Equal(t, exitUsage, lockCommand(context.Background(), []string{"--redis", closed, "--permits", "2", "a{b", "--", "true"}, io))
	require.True(t, strings.HasPrefix(errb.String(), `holdfast lock: rlock: invalid argument: semaphore name "a{b": `), errb.String())
	require.Equal(t, 1, strings.Count(errb.String(), "\n"))
}

func TestLockFailureCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("rlock: %w", err) }
	require.Equal(t, 42, lockFailureCode(wrap(rlock.ErrNotAcquired), 42))
	require.Equal(t, exitDataErr, lockFailureCode(wrap(rlock.ErrWrongType), 1))
	require.Equal(t, exitUsage, lockFailureCode(wrap(rlock.ErrInvalidArgument), 1))
	require.Equal(t, exitSoftware, lockFailureCode(wrap(rlock.ErrConflict), 1))
	require.Equal(t, exitUnavailable, lockFailureCode(errors.New("dial tcp: connection refused"), 1))
	require.Equal(t, exitOK, lockFailureCode(nil, 1))
}

func TestSignalCode(t *testing.T) {
	require.Equal(t, 130, signalCode(nil))
	require.Equal(t, 143, signalCode(syscall.SIGTERM))
	require.Equal(t, 129, signalCode(syscall.SIGHUP))
}

func TestInterruptibleBySignal(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	ctx, stop := interruptible(context.Background(), sigs)
	sigs <- syscall.SIGHUP
	<-ctx.Done()
	sig, interrupted := stop()
	require.True(t, interrupted)
	require.Equal(t, syscall.SIGHUP, sig)
}

func TestInterruptibleByParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := interruptible(parent, make(chan os.Signal))
	cancel()
	<-ctx.Done() // after signalLag: no signal came
	sig, interrupted := stop()
	require.True(t, interrupted)
	require.Nil(t, sig)
}

func TestInterruptibleStopped(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	ctx, stop := interruptible(context.Background(), sigs)
	sig, interrupted := stop()
	require.False(t, interrupted)
	require.Nil(t, sig)
	require.Error(t, ctx.Err(), "stop cancels the context")
	sigs <- syscall.SIGTERM // left for the next phase
	require.Len(t, sigs, 1)
}

// lookErr returns the error of exec.LookPath(name).
func lookErr(name string) error {
	_, err := exec.LookPath(name)
	return err
}
