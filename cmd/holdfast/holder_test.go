package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/identity"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// testIO returns the stdio of a test: buffers, no environment, no terminal.
func testIO(out, errOut *bytes.Buffer) stdio {
	return stdio{in: strings.NewReader(""), out: out, err: errOut, env: func(string) string { return "" }}
}

// TestStatusNamesHolder: status names a holder by its client's record: the
// human line, the JSON "holder" object; a client without a record has
// "holder": null and the note that says why, in JSON and once under the
// holders; the busy line of lock names the holder the same way.
func TestStatusNamesHolder(t *testing.T) {
	mr := miniredis.RunT(t)
	const live, gone = "1a2b3c4d-5e6f-4a0b-8c0d-0e0f10111213", "99999999-5e6f-4a0b-8c0d-0e0f10111213"
	started := time.Date(2026, 11, 28, 12, 3, 11, 0, time.Local)
	rec := identity.Record{Client: live, Service: "orders-svc", Host: "host-3", PID: 4121, Version: "v0.9.0", Started: started}
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, mr.Set(identity.Key(live), string(b)))
	mr.HSet("orders", live+":7", "1")
	mr.HSet("jobs", gone+":8", "2")
	url := "redis://" + mr.Addr()

	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, statusCommand(context.Background(), []string{"--redis", url, "orders", "jobs"}, testIO(&out, &errOut)), errOut.String())
	since := started.Format("15:04:05")
	if time.Since(started) > 24*time.Hour {
		since = started.Format("2006-01-02 15:04:05")
	}
	named := "orders-svc on host-3, pid 4121, since " + since + " (client 1a2b3c4d…, owner 7)"
	require.Contains(t, out.String(), "orders: locked (RLock layout: reentrant, fenced, non-reentrant or spin lock)\n  lease:    no expiry\n  holders:  1\n    held by "+named+"  count 1\n")
	require.Contains(t, out.String(), "  holders:  1\n    held by client "+gone+", owner 8 (no record)  count 2\n  "+noRecord+"\n")
	require.Equal(t, 1, strings.Count(out.String(), noRecord), "the note once, under the holder without a record")

	out.Reset()
	require.Equal(t, exitOK, statusCommand(context.Background(), []string{"--redis", url, "--json", "orders", "jobs"}, testIO(&out, &errOut)))
	var list []objectStatus
	require.NoError(t, json.Unmarshal(out.Bytes(), &list))
	require.Equal(t, &holderRecord{Service: "orders-svc", Host: "host-3", PID: 4121, Version: "v0.9.0", Started: started}, utcStarted(list[0].Holders[0].Holder))
	require.Empty(t, list[0].Holders[0].HolderNote)
	require.Nil(t, list[1].Holders[0].Holder)
	require.Equal(t, noRecord, list[1].Holders[0].HolderNote)
	require.Contains(t, out.String(), `"holder": null,`)
	require.Contains(t, out.String(), `"holder": {
          "service": "orders-svc",
          "host": "host-3",
          "pid": 4121,
          "version": "v0.9.0",
          "started": "`)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	require.Equal(t, "held by "+named, describeHolder(context.Background(), rdb, "orders"))
	require.Equal(t, "held by client "+gone+", owner 8; "+noRecord, describeHolder(context.Background(), rdb, "jobs"))
	mr.HSet("orders", gone+":9", "1")
	require.Equal(t, "held by "+named+" | client "+gone+", owner 9; "+noRecord, describeHolder(context.Background(), rdb, "orders"))
}

// utcStarted is r with Started in the local zone's equal instant normalised,
// for comparisons of decoded times.
func utcStarted(r *holderRecord) *holderRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Started = c.Started.In(time.Local)
	return &c
}

// TestWho: a holder with a record, without one, and whose record could not be
// read; full or short.
func TestWho(t *testing.T) {
	rec := &holderRecord{Service: "svc", Host: "h", PID: 1, Started: time.Now()}
	require.Regexp(t, `^svc on h, pid 1, since \d\d:\d\d:\d\d \(client 1a2b3c4d…, owner 7\)$`, who("1a2b3c4d-0000", "7", rec, "", false))
	require.Equal(t, "client c1, owner 7 (no record)", who("c1", "7", nil, "", false))
	require.Equal(t, "client c1, owner 7; "+noRecord, who("c1", "7", nil, "", true))
	require.Equal(t, "client c1, owner 7 (record not read)", who("c1", "7", nil, "record not read: NOPERM", false))
	require.Equal(t, "ab", shortID("ab"))
}

// TestHelpWritesDoubleDash: every command's help writes its flags as
// docs/cli.md does: "--name" for a long flag, "-n" for a one-letter one.
func TestHelpWritesDoubleDash(t *testing.T) {
	line := regexp.MustCompile(`^  (-[A-Za-z]|--[a-z][a-z-]+)( [A-Za-z]+)?$`)
	for _, cmd := range []string{"lock", "elect", "status", "unlock", "demo"} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), []string{cmd, "-h"}, testIO(&out, &errOut)), cmd)
		flags := 0
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "  -") {
				require.Regexp(t, line, l, cmd)
				flags++
			}
			require.NotRegexp(t, `(^|[ (])-[a-z][a-z]+`, strings.ReplaceAll(l, "-- ", ""), "%s: a long flag with one dash", cmd)
		}
		require.Greater(t, flags, 3, cmd)
	}
}

// TestDocsAndHelpAgree: docs/cli.md writes every flag of every command as the
// help does (flagName), never with one dash for a long flag.
func TestDocsAndHelpAgree(t *testing.T) {
	docs, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	_, lockFS, _ := parseLock(nil)
	_, electFS, _ := parseElect(nil)
	_, statusFS, _ := parseStatus(nil)
	_, unlockFS, _ := parseUnlock(nil, func(string) string { return "" })
	for _, fs := range []*flag.FlagSet{lockFS, electFS, statusFS, unlockFS} {
		fs.VisitAll(func(f *flag.Flag) {
			require.Contains(t, string(docs), "`"+flagName(f.Name), "%s: %s", fs.Name(), flagName(f.Name))
			if len(f.Name) > 1 {
				require.NotRegexp(t, "(`| )-"+regexp.QuoteMeta(f.Name)+`\b`, string(docs), "docs write -%s", f.Name)
			}
		})
	}
}

// TestDashedFlagError: the flag package's errors name the flag as the help does.
func TestDashedFlagError(t *testing.T) {
	for in, want := range map[string]string{
		`invalid value "-1" for flag -interval: a duration cannot be negative`: `invalid value "-1" for flag --interval: a duration cannot be negative`,
		`invalid value "abc" for flag -w: not a number`:                        `invalid value "abc" for flag -w: not a number`,
		`flag provided but not defined: -bogus`:                                `flag provided but not defined: --bogus`,
		`flag needs an argument: -redis`:                                       `flag needs an argument: --redis`,
		`invalid boolean value "x" for -json: parse error`:                     `invalid boolean value "x" for --json: parse error`,
		`missing the lock's NAME`:                                              `missing the lock's NAME`,
	} {
		require.Equal(t, want, dashedFlagError(errors.New(in)).Error())
	}
	var out, errOut bytes.Buffer
	require.Equal(t, exitUsage, run(context.Background(), []string{"status", "--connect-timeout", "x", "n"}, testIO(&out, &errOut)))
	require.True(t, strings.HasPrefix(errOut.String(), `holdfast status: invalid value "x" for flag --connect-timeout: `), errOut.String())
}

// TestUnknownCommandNamesEveryCommand: the list of an unknown or missing
// command comes from the command table: version is in it.
func TestUnknownCommandNamesEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, nil} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), args, testIO(&out, &errOut)))
		for _, c := range commands {
			require.Contains(t, errOut.String(), c.name, "%q", args)
		}
		require.Contains(t, errOut.String(), "version")
	}
	var out, errOut bytes.Buffer
	run(context.Background(), []string{"bogus"}, testIO(&out, &errOut))
	require.Equal(t, "holdfast: unknown command \"bogus\" (lock, elect, status, unlock, demo, version or help)\nrun 'holdfast -h' for usage\n", errOut.String())
}

// TestNotALockOneWording: status and unlock word a key of another kind the
// same way (notA); lock and elect too (TestCLINotALockOneWording: miniredis
// reports a script's WRONGTYPE as a compile error).
func TestNotALockOneWording(t *testing.T) {
	mr := miniredis.RunT(t)
	require.NoError(t, mr.Set("greeting", "hello"))
	mr.Lpush("queue", "x")
	url := "redis://" + mr.Addr()
	for name, typ := range map[string]string{"greeting": "string", "queue": "list"} {
		want := name + ": not a lock: the key holds a " + typ
		var out, errOut bytes.Buffer
		require.Equal(t, exitOK, statusCommand(context.Background(), []string{"--redis", url, name}, testIO(&out, &errOut)))
		require.Equal(t, want+"\n", out.String())
		out.Reset()
		require.Equal(t, exitDataErr, unlockCommand(context.Background(), []string{"--force", "--redis", url, name}, testIO(&out, &errOut)))
		require.Equal(t, "holdfast unlock: "+want+"; nothing released\n", errOut.String())
	}
	require.Equal(t, "not a semaphore: the key holds a hash", notA(wantOf(kindPermits), "hash"))
}
