package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
)

// lockConfig is what the flags and arguments of "holdfast lock" ask for.
type lockConfig struct {
	conn      connFlags
	name      string
	argv      []string      // the command and its arguments; empty: hold until interrupted
	kind      string        // "", "fair", "read", "write" or "fenced"
	permits   int64         // --permits: hold one of this many permits of a semaphore; 0: a lock
	noWait    bool          // -n, or -w 0: one attempt
	wait      time.Duration // -w: the longest wait; 0: no limit
	lease     time.Duration // --lease: a fixed lease; 0: the watchdog's
	watchdog  time.Duration // --watchdog-timeout
	killGrace time.Duration // --kill-grace
	busyCode  int           // -E
	quiet     bool          // -q
	elect     bool          // "holdfast elect": campaign in the election NAME instead of locking it
	value     string        // --value: what the leader proclaims (elect)
}

// cmd is the subcommand, for messages: "lock" or "elect".
func (cfg *lockConfig) cmd() string {
	if cfg.elect {
		return "elect"
	}
	return "lock"
}

// lockKinds are the flags choosing the kind of lock, and the kinds they choose.
var lockKinds = []struct{ flag, help string }{
	{"fair", "take a fair lock (Redisson's RFairLock: first come, first served across processes)"},
	{"read", "take the read side of a read/write lock (Redisson's RReadWriteLock): shared with other readers"},
	{"write", "take the write side of a read/write lock: exclusive"},
	{"fenced", "take a fenced lock (Redisson's RFencedLock); the command gets the fencing token in $HOLDFAST_TOKEN"},
}

// lockHelp is the help of "holdfast lock".
var lockHelp = help{
	about: "Waits for the lock NAME, runs COMMAND holding it (renewed while it runs), releases it and exits\n" +
		"with the command's status. Without COMMAND, holds the lock until interrupted. With --permits N,\n" +
		"holds one of the N permits of the semaphore NAME instead: at most N commands run at once.",
	synopsis: "usage: holdfast lock [flags] NAME [-- COMMAND [ARGS...]]\n" +
		"       holdfast lock --permits N [flags] NAME [-- COMMAND [ARGS...]]\n\nFlags go before NAME.",
	notes: durationNote + "\n" +
		"The command gets $HOLDFAST_LOCK (NAME), $HOLDFAST_OWNER (the lock's owner field in Redis),\n" +
		"with --fenced $HOLDFAST_TOKEN, and with --permits $HOLDFAST_PERMIT (the permit's id) instead of\n" +
		"$HOLDFAST_OWNER. See docs/cli.md for the exit codes.",
}

// lockCommand is "holdfast lock": see docs/cli.md.
func lockCommand(ctx context.Context, args []string, io stdio) int {
	return sessionCommand(ctx, args, io, "lock", lockHelp, parseLock)
}

// sessionCommand runs the command name ("lock", "elect") whose arguments
// parse reads: a session around a command (runSession), once the arguments,
// the connection's settings and the name passed their checks.
func sessionCommand(ctx context.Context, args []string, io stdio, name string, h help,
	parse func([]string) (*lockConfig, *flag.FlagSet, error)) int {
	cfg, fs, err := parse(args)
	if err != nil {
		return flagError(err, name, h, fs, io.out, io.err)
	}
	if err := cfg.conn.check(io.env); err != nil {
		return usageError(io.err, name, err)
	}
	if code := refuseName(io.err, name, cfg.nameKind(), cfg.name); code != exitOK {
		return code
	}
	return runSession(ctx, cfg, io, name)
}

// runSession runs the session of cfg (lock, permits or election: lockSession)
// around cfg's command, if any, and returns the exit code; cmdName names the
// command in messages.
func runSession(ctx context.Context, cfg *lockConfig, io stdio, cmdName string) int {
	var cmd *exec.Cmd
	if len(cfg.argv) > 0 {
		// Resolved before the lock is taken: a typo fails at once, not after the wait.
		if _, err := exec.LookPath(cfg.argv[0]); err != nil {
			return cannotRun(io, cmdName, cfg.argv[0], err)
		}
		cmd = exec.Command(cfg.argv[0], cfg.argv[1:]...)
	}
	sigs := make(chan os.Signal, 8)
	if relay := relayed(); len(relay) > 0 { // none would mean every signal
		signal.Notify(sigs, relay...)
		defer signal.Stop(sigs)
	}
	s := &lockSession{cfg: cfg, io: io, sigs: sigs}
	if code, ok := s.acquire(ctx); !ok {
		return code
	}
	defer s.close()
	code := s.hold(ctx, cmd)
	return s.release(ctx, code)
}

// parseLock parses the arguments of "holdfast lock". The FlagSet is returned
// for the usage message.
func parseLock(args []string) (*lockConfig, *flag.FlagSet, error) {
	cfg := &lockConfig{}
	fs := newFlagSet("lock")
	cfg.conn.register(fs, defaultRedisURL)
	fs.BoolVar(&cfg.noWait, "n", false, "do not wait: exit at once with -E's code when the lock is busy")
	durationVar(fs, &cfg.wait, "w", 0, "wait at most `DURATION` for the lock (e.g. 5, 0.5, 30s, 5m); then exit with -E's code. -w 0 is -n")
	fs.IntVar(&cfg.busyCode, "E", exitBusy, "exit `CODE` when the lock is busy (-n, -w)")
	durationVar(fs, &cfg.lease, "lease", 0, "hold the lock for at most `DURATION`, not renewed: the command is stopped when it runs out "+
		"(default: a watchdog lease, renewed while the command runs)")
	durationVar(fs, &cfg.watchdog, "watchdog-timeout", rlock.DefaultWatchdogTimeout,
		"the watchdog lease, renewed every third of it: if holdfast dies, the lock is free after at most this `DURATION`")
	durationVar(fs, &cfg.killGrace, "kill-grace", 5*time.Second, "when the lock is lost, the `DURATION` the command has between SIGTERM and SIGKILL")
	fs.BoolVar(&cfg.quiet, "q", false, "quiet: no progress line while waiting, no message when the lock is busy, none when holding it without a command")
	kinds := make([]bool, len(lockKinds))
	for i, k := range lockKinds {
		fs.BoolVar(&kinds[i], k.flag, false, k.help)
	}
	fs.Int64Var(&cfg.permits, "permits", 0, "hold one permit of the permit-expirable semaphore NAME of `N` permits (created with N on "+
		"first use; Redisson's RPermitExpirableSemaphore) instead of a lock: at most N commands run at once")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if err := cfg.finish(fs.Args(), kinds, isSet(fs, "w"), isSet(fs, "permits")); err != nil {
		return nil, fs, err
	}
	return cfg, fs, nil
}

// finish checks the flags against each other and takes NAME and the command
// from the arguments left after the flags. waitSet and permitsSet say whether
// -w and --permits were given.
func (cfg *lockConfig) finish(rest []string, kinds []bool, waitSet, permitsSet bool) error {
	for i, on := range kinds {
		switch {
		case on && cfg.kind != "":
			return fmt.Errorf("--%s and --%s exclude each other", cfg.kind, lockKinds[i].flag)
		case on:
			cfg.kind = lockKinds[i].flag
		}
	}
	switch {
	case permitsSet && cfg.permits < 1:
		return fmt.Errorf("--permits %d: a semaphore has 1 permit or more", cfg.permits)
	case cfg.permits > 0 && cfg.kind != "":
		return fmt.Errorf("--permits and --%s exclude each other", cfg.kind)
	case cfg.noWait && waitSet:
		return errors.New("-n and -w exclude each other")
	case cfg.watchdog < 3*time.Millisecond:
		return fmt.Errorf("--watchdog-timeout %v is too short (3ms at least; default %v)", cfg.watchdog, rlock.DefaultWatchdogTimeout)
	case cfg.busyCode < 0 || cfg.busyCode > 255:
		return fmt.Errorf("-E %d: an exit code is between 0 and 255", cfg.busyCode)
	}
	cfg.noWait = cfg.noWait || waitSet && cfg.wait == 0
	return cfg.takeArgs(rest)
}

// takeArgs takes NAME and, after "--", the command from rest.
func (cfg *lockConfig) takeArgs(rest []string) error {
	switch {
	case len(rest) == 0:
		return errors.New("missing the lock's NAME")
	case rest[0] == "":
		return errors.New("empty lock NAME")
	case len(rest) == 1:
		cfg.name = rest[0]
		return nil
	case rest[1] != "--" && strings.HasPrefix(rest[1], "-"):
		return fmt.Errorf("%s after NAME: flags go before NAME", rest[1])
	case rest[1] != "--":
		return fmt.Errorf("expected -- between NAME and the command (holdfast lock [flags] NAME -- %s ...)", rest[1])
	case len(rest) == 2:
		return errors.New("no command after --")
	}
	cfg.name, cfg.argv = rest[0], rest[2:]
	return nil
}

// nameKind is what NAME names, for its check (refuseName): a lock (""), or
// with --permits a permit-expirable semaphore.
func (cfg *lockConfig) nameKind() string {
	if cfg.permits > 0 {
		return kindPermits
	}
	return ""
}

// locker returns the lock the flags ask for.
func (cfg *lockConfig) locker(c *rlock.Client) rlock.Locker {
	switch cfg.kind {
	case "fair":
		return c.NewFairMutex(cfg.name)
	case "read":
		return c.NewRWMutex(cfg.name).ReadLock()
	case "write":
		return c.NewRWMutex(cfg.name).WriteLock()
	case "fenced":
		return c.NewFencedMutex(cfg.name)
	}
	return c.NewMutex(cfg.name)
}

// lockOptions returns the options of the acquisition.
func (cfg *lockConfig) lockOptions() []rlock.AcquireOption {
	var opts []rlock.AcquireOption
	if cfg.lease > 0 {
		opts = append(opts, rlock.WithLeaseTime(cfg.lease))
	}
	return opts
}

// tryLockOptions returns the options of an acquisition that waits at most -w.
func (cfg *lockConfig) tryLockOptions() []rlock.TryOption {
	var opts []rlock.TryOption
	for _, o := range cfg.lockOptions() {
		opts = append(opts, o)
	}
	if cfg.wait > 0 {
		opts = append(opts, rlock.WithWaitTime(cfg.wait))
	}
	return opts
}
