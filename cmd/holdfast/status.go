package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// statusHelp is the help of "holdfast status"; its synopsis is the one of
// docs/cli.md.
var statusHelp = help{
	about: "Shows what is at each lock NAME: the kind of lock, who holds it, how long its lease has left\n" +
		"and who waits for it. It only reads, and shows Java (Redisson) locks as it shows holdfast's.",
	synopsis: "usage: holdfast status [flags] NAME...\n" +
		"       holdfast status [flags] --scan PATTERN [NAME...]",
	notes: "Flags may also follow the names; -- ends them.\n" + durationNote + "\n" +
		"See docs/cli.md for the JSON fields and the exit codes.",
}

// statusCommand runs "holdfast status [flags] NAME..." and "holdfast status
// --scan PATTERN": what is at each name, who holds it and who waits.
func statusCommand(ctx context.Context, args []string, io stdio) int {
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "print a JSON array, one object per name (fields: see docs/cli.md)")
	scan := fs.String("scan", "", "also show the lock objects whose keys match the glob `PATTERN` (SCAN; every primary of a Cluster)")
	var cf connFlags
	cf.register(fs)
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(err, "status", statusHelp, fs, io.out, io.err)
	}
	if err := checkOperands(cf, names, len(names) > 0 || *scan != "", "name at least one lock, or give --scan PATTERN", io.env); err != nil {
		return usageError(io.err, "status", err)
	}
	// A name that lock refuses is refused here too, not shown as free.
	if code := refuseNames(io.err, "status", names); code != exitOK {
		return code
	}
	rdb, code := openRedis(ctx, &cf, io, "status")
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	list, err := statuses(ctx, rdb, names, *scan)
	if err != nil {
		return redisFailure(io, "status", err)
	}
	if *asJSON {
		enc := json.NewEncoder(io.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(list)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintf(io.out, "no lock objects match %q\n", *scan)
	}
	for i, st := range list {
		if i > 0 {
			fmt.Fprintln(io.out)
		}
		writeHuman(io.out, st)
	}
	return exitOK
}

// statuses inspects names, then the lock objects that --scan pattern finds
// (when pattern is not empty) and that are not among names.
func statuses(ctx context.Context, rdb redis.UniversalClient, names []string, pattern string) ([]objectStatus, error) {
	list := []objectStatus{}
	seen := make(map[string]bool)
	for _, n := range names {
		st, err := inspect(ctx, rdb, n)
		if err != nil {
			return nil, err
		}
		list, seen[n] = append(list, st), true
	}
	if pattern == "" {
		return list, nil
	}
	found, err := scanNames(ctx, rdb, pattern)
	if err != nil {
		return nil, err
	}
	for _, n := range found {
		if seen[n] {
			continue
		}
		st, err := inspect(ctx, rdb, n)
		if err != nil {
			return nil, err
		}
		if shownByScan(st) {
			list = append(list, st)
		}
	}
	return list, nil
}

// parseInterspersed parses args with fs, allowing flags after the operands too
// (unlike flag.Parse, which stops at the first operand); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
}

// checkOperands returns the usage error of status or unlock once their flags
// are parsed: !enough (with the message missing), an empty name, a bad
// connection flag.
func checkOperands(cf connFlags, names []string, enough bool, missing string, env func(string) string) error {
	if !enough {
		return errors.New(missing)
	}
	for _, n := range names {
		if n == "" {
			return errors.New("empty lock NAME")
		}
	}
	return cf.check(env)
}

// openRedis opens the client of cf. When it cannot, it says why in one line on
// stderr and returns a nil client and the exit code.
func openRedis(ctx context.Context, cf *connFlags, io stdio, cmd string) (redis.UniversalClient, int) {
	rdb, err := cf.open(ctx, io.env)
	if err == nil {
		return rdb, exitOK
	}
	fmt.Fprintf(io.err, "holdfast %s: %v\n", cmd, err)
	if errors.Is(err, errConn) {
		return nil, exitUnavailable
	}
	return nil, exitUsage
}

// redisFailure reports err, met while talking to Redis, in one line and returns
// the exit code: exitUnavailable when the server stopped answering.
func redisFailure(io stdio, cmd string, err error) int {
	fmt.Fprintf(io.err, "holdfast %s: %s\n", cmd, strings.ReplaceAll(err.Error(), "\n", " "))
	if connFailure(err) {
		return exitUnavailable
	}
	return exitSoftware
}

// connFailure reports whether err says that the server could not be reached or
// stopped answering.
func connFailure(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed)
}

// fmtMillis renders a PTTL-like number of milliseconds.
func fmtMillis(ms int64) string {
	switch {
	case ms == -1:
		return "no expiry"
	case ms < 0:
		return "gone"
	}
	return (time.Duration(ms) * time.Millisecond).String() + " left"
}
