package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestParseStatusWatch: --watch and --interval parse anywhere among the names;
// the interval is 1s by default and takes seconds or a Go duration.
func TestParseStatusWatch(t *testing.T) {
	cfg, _, err := parseStatus([]string{"a", "--watch", "--latch", "b"})
	require.NoError(t, err)
	require.True(t, cfg.watch)
	require.Equal(t, time.Second, cfg.interval)
	require.False(t, cfg.intervalSet)
	require.Equal(t, []target{{name: "a"}, {name: "b", as: kindLatch}}, cfg.targets)
	require.NoError(t, cfg.checkWatch())

	for in, want := range map[string]time.Duration{"0.25": 250 * time.Millisecond, "2": 2 * time.Second, "1m": time.Minute, "100ms": 100 * time.Millisecond} {
		cfg, _, err := parseStatus([]string{"--watch", "a", "--interval", in})
		require.NoError(t, err, in)
		require.Equal(t, want, cfg.interval, in)
		require.True(t, cfg.intervalSet, in)
		require.NoError(t, cfg.checkWatch(), in)
	}
	cfg, _, err = parseStatus([]string{"a"})
	require.NoError(t, err)
	require.False(t, cfg.watch)
	require.NoError(t, cfg.checkWatch(), "no --watch, no --interval: plain status")
}

// TestStatusWatchUsage: an interval of 0, a negative or malformed one, and
// --interval without --watch are usage errors (two lines, exit 64) found
// before connecting: the closed port is never dialled.
func TestStatusWatchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--watch", "--interval", "0", "x"}, "--interval must be more than 0"},
		{[]string{"--watch", "--interval", "0s", "x"}, "--interval must be more than 0"},
		{[]string{"--watch", "x", "--interval", "-1"}, `invalid value "-1" for flag --interval: a duration cannot be negative`},
		{[]string{"--watch", "--interval", "-500ms", "x"}, `invalid value "-500ms" for flag --interval: a duration cannot be negative`},
		{[]string{"--watch", "--interval", "soon", "x"}, `invalid value "soon" for flag --interval: not a number of seconds`},
		{[]string{"--interval", "2s", "x"}, "--interval is for --watch"},
		{[]string{"--watch"}, "name at least one lock, or give --scan PATTERN"},
	} {
		var out, errOut bytes.Buffer
		io := stdio{out: &out, err: &errOut, env: func(string) string { return "" }}
		args := append([]string{"--redis", "redis://127.0.0.1:1"}, tc.args...)
		require.Equal(t, exitUsage, statusCommand(context.Background(), args, io), "%q: %s", tc.args, errOut.String())
		require.True(t, strings.HasPrefix(errOut.String(), "holdfast status: "+tc.msg), "%q: %s", tc.args, errOut.String())
		require.True(t, strings.HasSuffix(errOut.String(), "\nrun 'holdfast status -h' for usage\n"), "%q: %s", tc.args, errOut.String())
		require.Equal(t, 2, strings.Count(errOut.String(), "\n"), "%q: %s", tc.args, errOut.String())
		require.Empty(t, out.String(), "%q", tc.args)
	}
}

// TestStatusWatchHelp: -h gives the --watch synopsis and both flags.
func TestStatusWatchHelp(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, exitOK, statusCommand(context.Background(), []string{"-h"}, stdio{out: &out, err: &out}))
	require.Contains(t, out.String(), "       holdfast status --watch [--interval DURATION] [flags] NAME...\n")
	require.Contains(t, out.String(), "  --watch\n")
	require.Contains(t, out.String(), "  --interval DURATION\n")
	require.Contains(t, out.String(), "(default 1s)")
}

// watchSample is a lock held by one owner, as a refresh reads it.
var watchSample = objectStatus{Name: "orders:42", Kind: kindLock, RedisType: "hash", TTLMillis: 29_500,
	Holders: []holder{{Field: "c1:7", ClientID: "c1", OwnerID: "7", Count: 1}}, Channel: "redisson_lock__channel:{orders:42}", Subscribers: 2}

// TestWatchViewText: without a terminal and without --json, each refresh is a
// header line (time, interval), a blank line and what plain status prints;
// refreshes are separated by a blank line, and there is no escape sequence.
func TestWatchViewText(t *testing.T) {
	var out bytes.Buffer
	v := &watchView{out: &out, mode: viewText, interval: 500 * time.Millisecond}
	at := time.Date(2026, 11, 23, 15, 4, 5, 123e6, time.FixedZone("", 3600))
	require.NoError(t, v.show(at, []objectStatus{watchSample}, nil))
	require.NoError(t, v.show(at.Add(time.Second), nil, errors.New("dial tcp: connection refused")))
	var plain bytes.Buffer
	writeHuman(&plain, watchSample)
	want := "holdfast status, every 500ms: 2026-11-23 15:04:05.123 +01:00\n\n" + plain.String() +
		"\nholdfast status, every 500ms: 2026-11-23 15:04:06.123 +01:00\n\nerror: dial tcp: connection refused (trying again in 500ms)\n"
	require.Equal(t, want, out.String())
	require.Contains(t, plain.String(), "  lease:    29.5s left\n  holders:  1\n    held by client c1, owner 7 (no record)  count 1\n  "+noRecord+"\n  waiters:  2 subscribed")
	v.restore()
	require.Equal(t, want, out.String(), "nothing to restore")
}

// TestWatchViewJSON: with --json, one JSON object per line: the time and the
// objects as status --json prints them ([] when --scan finds none), or the
// time and the error.
func TestWatchViewJSON(t *testing.T) {
	var out bytes.Buffer
	v := &watchView{out: &out, mode: viewJSON, interval: time.Second}
	at := time.Date(2026, 11, 23, 15, 4, 5, 123456789, time.FixedZone("", 3600))
	require.NoError(t, v.show(at, []objectStatus{watchSample}, nil))
	require.NoError(t, v.show(at, []objectStatus{}, nil))
	require.NoError(t, v.show(at, nil, errors.New("i/o timeout\nagain")))
	lines := strings.Split(out.String(), "\n")
	require.Len(t, lines, 4, out.String())
	require.Empty(t, lines[3])
	single, err := json.Marshal([]objectStatus{watchSample})
	require.NoError(t, err)
	require.Equal(t, `{"time":"2026-11-23T14:04:05.123456789Z","objects":`+string(single)+`}`, lines[0])
	require.Equal(t, `{"time":"2026-11-23T14:04:05.123456789Z","objects":[]}`, lines[1])
	require.Equal(t, `{"time":"2026-11-23T14:04:05.123456789Z","error":"i/o timeout again"}`, lines[2])
}

// TestWatchViewTerminal: on a terminal the first refresh hides the cursor and
// clears the screen; every refresh moves the cursor home, ends each line with
// an erase to its end and erases what is below; the end shows the cursor again
// on a new line.
func TestWatchViewTerminal(t *testing.T) {
	var out bytes.Buffer
	v := &watchView{out: &out, mode: viewTerminal, interval: time.Second}
	at := time.Date(2026, 11, 23, 15, 4, 5, 0, time.UTC)
	require.NoError(t, v.show(at, []objectStatus{watchSample}, nil))
	first := out.String()
	require.True(t, strings.HasPrefix(first, "\x1b[?25l\x1b[H\x1b[2J\x1b[H"), "%q", first)
	require.True(t, strings.HasSuffix(first, "\x1b[K\x1b[J"), "%q", first)
	require.Contains(t, first, "holdfast status, every 1s: 2026-11-23 15:04:05.000 +00:00  (Ctrl-C to stop)\x1b[K\n\x1b[K\n")
	require.Contains(t, first, "\x1b[K\n    held by client c1, owner 7 (no record)  count 1\x1b[K\n")
	out.Reset()
	require.NoError(t, v.show(at, nil, errors.New("LOADING")))
	require.Equal(t, "\x1b[Hholdfast status, every 1s: 2026-11-23 15:04:05.000 +00:00  (Ctrl-C to stop)\x1b[K\n\x1b[K\n"+
		"error: LOADING (trying again in 1s)\x1b[K\x1b[J", out.String())
	out.Reset()
	v.restore()
	require.Equal(t, "\n\x1b[?25h", out.String())
}

// TestNewWatchView: --json gives JSON lines wherever stdout goes; without it a
// file that is not a terminal (or any other writer) gets text blocks.
func TestNewWatchView(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, viewJSON, newWatchView(f, &statusConfig{asJSON: true, interval: time.Second}).mode)
	require.Equal(t, viewText, newWatchView(f, &statusConfig{interval: time.Second}).mode)
	require.Equal(t, viewText, newWatchView(&bytes.Buffer{}, &statusConfig{interval: time.Second}).mode)
	require.False(t, writesToTerminal(f))
}

// TestWatchUnreachable: a server that cannot be reached at the first refresh
// ends the watch as it ends plain status: one line on stderr, exit 69, nothing
// on stdout. A watch interrupted before its first read exits 0.
func TestWatchUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	redis.SetLogger(silentRedisLog{}) // as main does
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	cfg := &statusConfig{targets: []target{{name: "x"}}, watch: true, interval: time.Second}
	var out, errOut bytes.Buffer
	io := stdio{out: &out, err: &errOut}
	require.Equal(t, exitUnavailable, watchStatuses(context.Background(), rdb, cfg, io))
	require.Empty(t, out.String())
	require.Equal(t, 1, strings.Count(errOut.String(), "\n"), errOut.String())
	require.True(t, strings.HasPrefix(errOut.String(), "holdfast status: "), errOut.String())

	errOut.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, exitOK, watchStatuses(ctx, rdb, cfg, io))
	require.Empty(t, out.String())
	require.Empty(t, errOut.String())
}
