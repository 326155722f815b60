package main

import (
	"bytes"
	"context"
	"flag"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestDurationFlag: a bare number is seconds, as in flock(1); a Go duration
// is taken as it is; negative or malformed values are refused.
func TestDurationFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5": 5 * time.Second, "0.5": 500 * time.Millisecond, ".25": 250 * time.Millisecond, "0": 0, "+2": 2 * time.Second,
		"300ms": 300 * time.Millisecond, "1m30s": 90 * time.Second, "0.3": 300 * time.Millisecond, "1.": time.Second,
	} {
		var d durationFlag
		require.NoError(t, d.Set(in), in)
		require.Equal(t, want, time.Duration(d), in)
	}
	for in, msg := range map[string]string{
		"-1": "cannot be negative", "-1s": "cannot be negative", "abc": "not a number of seconds", "5x": "not a number of seconds",
		"": "not a number of seconds", "1e3": "not a number of seconds", "1.2.3": "not a number of seconds", ".": "not a number of seconds",
		"99999999999": "too long", "NaN": "not a number of seconds",
	} {
		var d durationFlag
		require.ErrorContains(t, d.Set(in), msg, in)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var d time.Duration
	durationVar(fs, &d, "d", 30*time.Second, "a `DURATION`")
	require.Equal(t, 30*time.Second, d)
	require.Equal(t, "30s", fs.Lookup("d").DefValue)
	require.NoError(t, fs.Parse([]string{"-d", "1.5"}))
	require.Equal(t, 1500*time.Millisecond, d)
}

// TestUsageError: two lines, the command's prefix and where its usage is.
func TestUsageError(t *testing.T) {
	var b bytes.Buffer
	require.Equal(t, exitUsage, usageError(&b, "status", flag.ErrHelp))
	require.Equal(t, "holdfast status: flag: help requested\nrun 'holdfast status -h' for usage\n", b.String())
	b.Reset()
	usageError(&b, "", flag.ErrHelp)
	require.Equal(t, "holdfast: flag: help requested\nrun 'holdfast -h' for usage\n", b.String())
}

// TestCheckLockName: the names the library refuses, with the library's error.
func TestCheckLockName(t *testing.T) {
	c, err := rlock.New(redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()}))
	require.NoError(t, err)
	defer c.Close()
	for _, name := range []string{"a{b", "a}b", "acc:{}:x"} {
		err := checkLockName(name)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, name)
		// The same error as the library's for the same name (Unlock checks the
		// name first, without a round trip).
		require.EqualError(t, c.NewMutex(name).Unlock(context.Background()), err.Error(), name)
	}
	for _, name := range []string{"orders:42", "{a}b", "acc:{7}:x", "{{t}}"} {
		require.NoError(t, checkLockName(name), name)
	}
}

// TestVersionLine: a binary installed at a version prints it; one built in a
// checkout prints "(devel)" and its commit.
func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}}, "holdfast v0.9.0 go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "cb9a4c8aa1b2c3d4e5f6"}, {Key: "vcs.modified", Value: "true"}}}, "holdfast (devel) cb9a4c8aa1b2+modified go1.26.8"},
	} {
		if got := versionLine(&tc.bi, true); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"version"}, stdio{out: &out}); code != exitOK || !strings.HasPrefix(out.String(), "holdfast ") {
		t.Errorf("holdfast version: %d %q", code, out.String())
	}
}
