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
		"and who waits for it; for a semaphore its available and acquired permits, for a latch its count\n" +
		"and awaiters. It only reads, and shows Java (Redisson) objects as it shows holdfast's.",
	synopsis: "usage: holdfast status [flags] NAME...\n" +
		"       holdfast status [flags] --scan PATTERN [NAME...]\n" +
		"       holdfast status [flags] [--semaphore NAME] [--latch NAME] [NAME...]\n" +
		"       holdfast status --watch [--interval DURATION] [flags] NAME...",
	notes: "Flags may also follow the names; -- ends them.\n" + durationNote + "\n" +
		"A semaphore and a latch both store an integer: name the kind with --semaphore or --latch,\n" +
		"else status shows both readings.\n" +
		"--watch shows the same every --interval until interrupted (Ctrl-C, SIGTERM; exit 0): redrawn\n" +
		"in place on a terminal, else one block per refresh, or with --json one JSON object per line.\n" +
		"It combines with --scan, --semaphore and --latch. See docs/cli.md for the JSON fields and\n" +
		"the exit codes.",
}

// target is a name status shows, and what the user said it is: "" (nothing),
// kindSema (--semaphore) or kindLatch (--latch).
type target struct{ name, as string }

// kindFlag is the flag.Value of --semaphore and --latch: each use adds a
// target of its kind to list, where the operands go too, in the order given.
type kindFlag struct {
	as   string
	list *[]target
}

// Set adds the target name of the flag's kind.
func (f kindFlag) Set(name string) error {
	*f.list = append(*f.list, target{name: name, as: f.as})
	return nil
}

// String returns "": the flags have no default.
func (f kindFlag) String() string { return "" }

// statusConfig is what the flags and operands of "holdfast status" ask for.
type statusConfig struct {
	conn        connFlags
	targets     []target
	asJSON      bool
	scan        string
	watch       bool          // --watch: show the objects again every interval until interrupted
	interval    time.Duration // --interval
	intervalSet bool          // --interval was given
}

// parseStatus parses the arguments of "holdfast status". The FlagSet is
// returned for the usage message.
func parseStatus(args []string) (*statusConfig, *flag.FlagSet, error) {
	cfg := &statusConfig{}
	fs := newFlagSet("status")
	fs.BoolVar(&cfg.asJSON, "json", false, "print a JSON array, one object per name; with --watch one JSON object per line and refresh (fields: see docs/cli.md)")
	fs.BoolVar(&cfg.watch, "watch", false, "show the objects again every --interval until interrupted: redrawn in place on a terminal")
	durationVar(fs, &cfg.interval, "interval", time.Second, "with --watch, the `DURATION` between two reads, more than 0")
	fs.StringVar(&cfg.scan, "scan", "", "also show the lock objects whose keys match the glob `PATTERN` (SCAN; every primary of a Cluster)")
	fs.Var(kindFlag{kindSema, &cfg.targets}, "semaphore", "show `NAME` as a semaphore (RSemaphore, or RPermitExpirableSemaphore); repeatable")
	fs.Var(kindFlag{kindLatch, &cfg.targets}, "latch", "show `NAME` as a countdown latch (RCountDownLatch); repeatable")
	cfg.conn.register(fs, defaultRedisURL)
	err := parseOperands(fs, args, func(n string) { cfg.targets = append(cfg.targets, target{name: n}) })
	fs.Visit(func(f *flag.Flag) { cfg.intervalSet = cfg.intervalSet || f.Name == "interval" })
	return cfg, fs, err
}

// checkWatch returns the usage error of --watch and --interval, if any: an
// interval of 0, an interval without --watch.
func (cfg *statusConfig) checkWatch() error {
	switch {
	case cfg.interval <= 0:
		return errors.New("--interval must be more than 0")
	case cfg.intervalSet && !cfg.watch:
		return errors.New("--interval is for --watch: add --watch to show the objects again every --interval")
	}
	return nil
}

// statusCommand runs "holdfast status [flags] NAME..." and "holdfast status
// --scan PATTERN": what is at each name, who holds it and who waits.
func statusCommand(ctx context.Context, args []string, io stdio) int {
	cfg, fs, err := parseStatus(args)
	if err != nil {
		return flagError(err, "status", statusHelp, fs, io.out, io.err)
	}
	names := make([]string, len(cfg.targets))
	for i, t := range cfg.targets {
		names[i] = t.name
	}
	if err := checkOperands(cfg.conn, names, len(names) > 0 || cfg.scan != "", "name at least one lock, or give --scan PATTERN", io.env); err != nil {
		return usageError(io.err, "status", err)
	}
	if err := cfg.checkWatch(); err != nil {
		return usageError(io.err, "status", err)
	}
	// A name that lock refuses is refused here too, not shown as free.
	for _, t := range cfg.targets {
		if code := refuseName(io.err, "status", t.as, t.name); code != exitOK {
			return code
		}
	}
	rdb, code := openRedis(ctx, &cfg.conn, io, "status")
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	if cfg.watch {
		return watchStatuses(ctx, rdb, cfg, io)
	}
	list, err := statuses(ctx, rdb, cfg.targets, cfg.scan)
	if err != nil {
		return redisFailure(io, "status", err)
	}
	writeStatuses(io.out, list, cfg)
	return exitOK
}

// writeStatuses writes list on w, in JSON or for humans as cfg asks.
func writeStatuses(w io.Writer, list []objectStatus, cfg *statusConfig) {
	if cfg.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(list)
		return
	}
	if len(list) == 0 {
		fmt.Fprintf(w, "no lock objects match %q\n", cfg.scan)
	}
	for i, st := range list {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeHuman(w, st)
	}
}

// statuses inspects targets, then the lock objects that --scan pattern finds
// (when pattern is not empty) and that are not among targets.
func statuses(ctx context.Context, rdb redis.UniversalClient, targets []target, pattern string) ([]objectStatus, error) {
	list := []objectStatus{}
	seen := make(map[string]bool)
	for _, t := range targets {
		st, err := inspectAs(ctx, rdb, t.name, t.as)
		if err != nil {
			return nil, err
		}
		list, seen[t.name] = append(list, st), true
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
	err := parseOperands(fs, args, func(s string) { operands = append(operands, s) })
	return operands, err
}

// parseOperands is parseInterspersed that hands each operand to add as it
// meets it, so that flags may add to the operands' list in order too.
func parseOperands(fs *flag.FlagSet, args []string, add func(string)) error {
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			for _, s := range rest {
				add(s)
			}
			return nil
		}
		if len(rest) == 0 {
			return nil
		}
		add(rest[0])
		args = rest[1:]
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
