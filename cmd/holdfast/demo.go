package main

// "holdfast demo" shows holdfast at work: workers of two clients taking turns on
// a lock, a reentrant section, a waiter woken at release, the watchdog keeping a
// long job's lock, and a lost lock being reported, as a live timeline.
//
// Without --redis or REDIS_URL it runs on an embedded server, miniredis, which
// runs every script holdfast uses (PTTL, redis.status_reply, PUBSUB NUMSUB inside
// the release script's hand-off). Its one gap for the demo is time: by default
// miniredis never expires keys on its own (TTLs only move with FastForward), so
// PTTL would never go down and a lease would never run out. The demo turns on
// miniredis' ClockTTL, which makes TTLs follow the wall clock (expired keys go
// at the next command that touches the database, which is all holdfast needs:
// every acquisition reads PTTL first).

import (
	"context"
	"crypto/fips140"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// errEmbedded is the class of failures to start the embedded server:
// exitSoftware.
var errEmbedded = errors.New("cannot start the embedded Redis")

// demoServer is the Redis the demo runs on: the embedded miniredis, or a real
// server given by the connection flags.
type demoServer struct {
	rdb    redis.UniversalClient
	mr     *miniredis.Miniredis // nil on a real server
	where  string               // says which server, for the intro
	prefix string               // of every key name: "" on miniredis, unique on a real server
}

// demoCommand runs "holdfast demo [flags]" and returns the exit code.
func demoCommand(ctx context.Context, args []string, io stdio) int {
	var cf connFlags
	if code, ok := parseDemoFlags(&cf, args, io); !ok {
		return code
	}
	srv, err := openDemoServer(ctx, &cf, io.env)
	if err != nil {
		fmt.Fprintf(io.err, "holdfast demo: %v\n", err)
		switch {
		case errors.Is(err, errConn):
			return exitUnavailable
		case errors.Is(err, errEmbedded):
			return exitSoftware
		}
		return exitUsage
	}
	defer srv.close()
	tl := newTimeline(io.out, useColor(io.out, io.env))
	err = runDemo(ctx, srv, tl)
	if cerr := srv.cleanup(ctx, tl); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		fmt.Fprintf(io.err, "holdfast demo: %v\n", err)
		return exitSoftware
	}
	return exitOK
}

// demoHelp is the help of "holdfast demo".
var demoHelp = help{
	about: "Shows holdfast's locks at work as a live timeline (about 11 s), on an embedded\n" +
		"Redis, or on a real server with --redis or $REDIS_URL (its keys get a unique\n" +
		"prefix and are all deleted at the end).",
	synopsis: "usage: holdfast demo [flags]",
	notes:    durationNote,
}

// parseDemoFlags parses args into cf. When ok is false the command ends with
// code (help was asked for, on io.out, or the flags are wrong: said on io.err).
func parseDemoFlags(cf *connFlags, args []string, io stdio) (code int, ok bool) {
	fs := newFlagSet("demo")
	cf.register(fs, "an embedded Redis: miniredis, in the process")
	if err := fs.Parse(args); err != nil {
		return flagError(err, "demo", demoHelp, fs, io.out, io.err), false
	}
	var err error
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case (cf.cluster || cf.masterName != "") && cf.urls == "" && io.env("REDIS_URL") == "":
		err = errors.New("--cluster and --master-name need --redis (or $REDIS_URL)")
	default:
		err = cf.check(io.env)
	}
	if err != nil {
		return usageError(io.err, "demo", err), false
	}
	return exitOK, true
}

// openDemoServer starts the embedded server, or connects to the real one when
// --redis or REDIS_URL names it.
func openDemoServer(ctx context.Context, cf *connFlags, env func(string) string) (*demoServer, error) {
	url := cf.urls
	if url == "" {
		url = env("REDIS_URL")
	}
	if url == "" { // parseDemoFlags refused --cluster and --master-name
		return startEmbedded(ctx, cf.timeout)
	}
	rdb, err := cf.open(ctx, env)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("holdfast-demo:%06x:", rand.Uint32()&0xffffff)
	return &demoServer{rdb: rdb, where: "Redis at " + redact(url), prefix: prefix}, nil
}

// startEmbedded starts miniredis on a free loopback port, its TTLs running on
// the wall clock, and connects to it.
func startEmbedded(ctx context.Context, timeout time.Duration) (*demoServer, error) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true) // else keys never expire and PTTL stands still (see the file's comment)
	// The embedded server names each script by the SHA-1 of its source (EVAL,
	// SCRIPT LOAD), as Redis does, with crypto/sha1, which panics under
	// GODEBUG=fips140=only. Its goroutines, all started by Start, run without
	// that enforcement (inherited from WithoutEnforcement); the rest of the
	// process, holdfast included, which computes no SHA-1, keeps it.
	var err error
	fips140.WithoutEnforcement(func() { err = mr.Start() })
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errEmbedded, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		mr.Close()
		return nil, fmt.Errorf("%w: %v", errEmbedded, err)
	}
	return &demoServer{rdb: rdb, mr: mr, where: "an embedded Redis (miniredis at " + mr.Addr() + ")"}, nil
}

// close closes the connection and stops the embedded server.
func (s *demoServer) close() {
	_ = s.rdb.Close()
	if s.mr != nil {
		s.mr.Close()
	}
}

// cleanup deletes, on a real server, every key the demo left: unlock latches
// (which would expire within seconds), and locks if a scene failed half-way.
func (s *demoServer) cleanup(ctx context.Context, tl *timeline) error {
	if s.mr != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n, err := deleteMatching(ctx, s.rdb, "*"+s.prefix+"*")
	if err != nil {
		return fmt.Errorf("deleting the demo's keys (%s*): %w", s.prefix, err)
	}
	tl.note("Cleaned up: %d keys left under %s* (unlock latches) deleted.", n, s.prefix)
	return nil
}

// deleteMatching deletes the keys that match pattern, on every primary of a
// Cluster, and returns how many it deleted.
func deleteMatching(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return deleteScanned(ctx, rdb, pattern)
	}
	var n atomic.Int64 // ForEachMaster runs in parallel
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := deleteScanned(ctx, c, pattern)
		n.Add(int64(k))
		return err
	})
	return int(n.Load()), err
}

// deleteScanned deletes the keys of one server that match pattern.
func deleteScanned(ctx context.Context, c redis.Cmdable, pattern string) (int, error) {
	n := 0
	it := c.Scan(ctx, 0, pattern, 100).Iterator()
	for it.Next(ctx) {
		if err := c.Del(ctx, it.Val()).Err(); err != nil {
			return n, err
		}
		n++
	}
	return n, it.Err()
}

// useColor reports whether w is a terminal that may get ANSI colours (not with
// NO_COLOR set or TERM=dumb).
func useColor(w io.Writer, env func(string) string) bool {
	f, ok := w.(*os.File)
	if !ok || env("NO_COLOR") != "" || env("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
