package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// forceAttempts bounds the inspect-then-release rounds of unlock when the lock
// changes kind or mode between the two.
const forceAttempts = 3

// unlockHelp is the help of "holdfast unlock"; its synopsis is the one of
// docs/cli.md.
var unlockHelp = help{
	about: "Force-releases the lock NAME whoever holds it, and wakes its waiters (Redisson's forceUnlock).\n" +
		"Meant for a lock whose holder is gone or stuck: see who holds it with holdfast status NAME.\n" +
		"With --permit, releases that permit of the permit-expirable semaphore NAME instead.",
	synopsis: "usage: holdfast unlock --force [--yes] [flags] NAME\n" +
		"       holdfast unlock --force [--yes] [flags] --permit ID NAME",
	notes: "Flags may also follow NAME. On a terminal it asks before releasing, unless --yes.\n" +
		durationNote + "\nSee docs/cli.md for the exit codes.",
}

// unlockConfig is what the flags and operand of "holdfast unlock" ask for.
type unlockConfig struct {
	conn   connFlags
	name   string
	force  bool   // --force
	yes    bool   // --yes
	permit string // --permit, in lowercase; "": release the lock NAME
}

// parseUnlock parses the arguments of "holdfast unlock". The FlagSet is
// returned for the usage message.
func parseUnlock(args []string, env func(string) string) (*unlockConfig, *flag.FlagSet, error) {
	cfg := &unlockConfig{}
	fs := newFlagSet("unlock")
	fs.BoolVar(&cfg.force, "force", false, "required: release the lock whoever holds it, and wake its waiters")
	fs.BoolVar(&cfg.yes, "yes", false, "do not ask for confirmation (only asked when stdin is a terminal)")
	fs.StringVar(&cfg.permit, "permit", "", "release the permit `ID` (32 hex characters, as holdfast status NAME lists it) "+
		"of the permit-expirable semaphore NAME, not a lock")
	cfg.conn.register(fs, defaultRedisURL)
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, fs, err
	}
	missing := "missing the lock's NAME"
	if len(names) > 1 {
		missing = fmt.Sprintf("one NAME at a time, not %d", len(names))
	}
	if err := checkOperands(cfg.conn, names, len(names) == 1, missing, env); err != nil {
		return nil, fs, err
	}
	cfg.name = names[0]
	if isSet(fs, "permit") {
		if cfg.permit, err = parsePermitID(cfg.permit); err != nil {
			return nil, fs, err
		}
	}
	return cfg, fs, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// unlockCommand runs "holdfast unlock --force [--yes] [flags] NAME": it deletes
// the lock whoever holds it and wakes its waiters, through the library's
// ForceUnlock of the lock's kind; with --permit ID it releases that permit of
// the permit-expirable semaphore NAME.
func unlockCommand(ctx context.Context, args []string, io stdio) int {
	cfg, fs, err := parseUnlock(args, io.env)
	if err != nil {
		return flagError(err, "unlock", unlockHelp, fs, io.out, io.err)
	}
	as := ""
	if cfg.permit != "" {
		as = kindPermits
	}
	if code := refuseName(io.err, "unlock", as, cfg.name); code != exitOK {
		return code
	}
	if !cfg.force {
		return refuseWithoutForce(io, cfg)
	}
	rdb, code := openRedis(ctx, &cfg.conn, io, "unlock")
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithService(cliService))
	if err != nil {
		return redisFailure(io, "unlock", err)
	}
	defer c.Close()
	ask := !cfg.yes && io.interactive
	if cfg.permit != "" {
		return forceReleasePermit(ctx, c, rdb, cfg.name, cfg.permit, ask, io)
	}
	return forceRelease(ctx, c, rdb, cfg.name, ask, io)
}

// refuseWithoutForce says that unlock does nothing without --force, and
// returns exitUsage.
func refuseWithoutForce(io stdio, cfg *unlockConfig) int {
	if cfg.permit != "" {
		fmt.Fprintf(io.err, "holdfast unlock: refusing to release permit %s of %q without --force: its holder is not told "+
			"(see the permits with: holdfast status %s)\n", cfg.permit, cfg.name, cfg.name)
		return exitUsage
	}
	fmt.Fprintf(io.err, "holdfast unlock: refusing to release %q without --force: it ends the lock whoever holds it "+
		"and wakes its waiters (see who holds it with: holdfast status %s)\n", cfg.name, cfg.name)
	return exitUsage
}

// forceRelease inspects name and force-releases it as its kind says, asking
// first when ask is set. It inspects again when the lock changed in between (it
// was released, or taken in the other mode of a read/write lock).
func forceRelease(ctx context.Context, c *rlock.Client, rdb redis.UniversalClient, name string, ask bool, io stdio) int {
	for range forceAttempts {
		st, err := inspect(ctx, rdb, name)
		if err != nil {
			return redisFailure(io, "unlock", err)
		}
		if code, done := notLocked(io, st); done {
			return code
		}
		if ask && !confirm(io, st) {
			fmt.Fprintf(io.err, "holdfast unlock: %s left as it is\n", name)
			return exitBusy
		}
		ok, err := forceUnlockKind(ctx, c, st)
		if err != nil {
			return releaseFailure(ctx, rdb, name, "", err, io)
		}
		if ok {
			reportReleased(io.out, st)
			return exitOK
		}
	}
	fmt.Fprintf(io.err, "holdfast unlock: %s changed under each of %d attempts; nothing released, try again\n", name, forceAttempts)
	return exitSoftware
}

// releaseFailure says why a forced release of name (as: a kind to inspect it
// as, "" for its own) failed with err, and returns the exit code: exitDataErr
// for a name that is not of the kind, exitUsage for an invalid argument.
func releaseFailure(ctx context.Context, rdb redis.UniversalClient, name, as string, err error, io stdio) int {
	switch {
	case errors.Is(err, rlock.ErrWrongType):
		if line, ok := wrongTypeLine(ctx, rdb, name, as); ok {
			fmt.Fprintf(io.err, "holdfast unlock: %s; nothing released\n", line)
			return exitDataErr
		}
		fmt.Fprintf(io.err, "holdfast unlock: %v\n", err)
		return exitDataErr
	case errors.Is(err, rlock.ErrInvalidArgument):
		fmt.Fprintf(io.err, "holdfast unlock: %v\n", err)
		return exitUsage
	}
	return redisFailure(io, "unlock", err)
}

// notLocked says why st cannot be force-released, if it cannot: done is then
// true, with the exit code: 0 when nothing holds it (so that scripts can run
// unlock again), exitDataErr when it is not a lock.
func notLocked(io stdio, st objectStatus) (code int, done bool) {
	switch {
	case st.Kind == kindFree:
		fmt.Fprintf(io.out, "%s is not locked: nothing to release\n", st.Name)
		return exitOK, true
	case st.Kind == kindFair && len(st.Holders) == 0:
		fmt.Fprintf(io.out, "%s is not locked: nothing to release (fair lock; %d queued waiters left in the queue)\n",
			st.Name, len(st.Queue))
		return exitOK, true
	case st.Kind == kindPermits:
		fmt.Fprintf(io.err, "holdfast unlock: %s: %s; nothing released (release one of its permits with --permit ID: "+
			"holdfast status %s lists them)\n", st.Name, headline(st), st.Name)
		return exitDataErr, true
	case st.Kind != kindLock && st.Kind != kindFair && st.Kind != kindRW:
		fmt.Fprintf(io.err, "holdfast unlock: %s: %s; nothing released\n", st.Name, headline(st))
		return exitDataErr, true
	}
	return exitOK, false
}

// forceUnlockKind force-releases the lock st with the ForceUnlock of its kind:
// a fair lock wakes its queue's head, a read/write lock is released in the mode
// it was seen in, any other lock hash as RLock. It reports whether something was
// released (false: the lock was released, or changed mode, meanwhile).
func forceUnlockKind(ctx context.Context, c *rlock.Client, st objectStatus) (bool, error) {
	switch {
	case st.Kind == kindFair:
		return c.NewFairMutex(st.Name).ForceUnlock(ctx)
	case st.Kind == kindRW && st.Mode == "write":
		return c.NewRWMutex(st.Name).WriteLock().ForceUnlock(ctx)
	case st.Kind == kindRW:
		return c.NewRWMutex(st.Name).ReadLock().ForceUnlock(ctx)
	}
	return c.NewMutex(st.Name).ForceUnlock(ctx)
}

// reportReleased says what was released, who held it and whom the release woke.
func reportReleased(w io.Writer, st objectStatus) {
	fmt.Fprintf(w, "force-released %s (%s); it was held by:\n", st.Name, kindLabel(st))
	for _, h := range st.Holders {
		fmt.Fprintf(w, "  %s\n", holderLine(h))
	}
	switch {
	case st.Kind == kindFair && len(st.Queue) > 0:
		fmt.Fprintf(w, "woke the head of the queue (%d waiting)\n", len(st.Queue))
	case st.Kind == kindFair:
		fmt.Fprintln(w, "nobody was queued")
	case st.Kind == kindRW && st.Mode == "write":
		fmt.Fprintf(w, "woke every waiter on %s (%d subscribed)\n", st.Channel, st.Subscribers)
	default:
		fmt.Fprintf(w, "announced the release on %s (%d subscribed)\n", st.Channel, st.Subscribers)
	}
}

// confirm asks on the terminal whether to force-release st, and reports whether
// the answer was yes.
func confirm(io stdio, st objectStatus) bool {
	holding := "held by nobody"
	if len(st.Holders) > 0 {
		h := st.Holders[0]
		holding = holderLine(h)
		if more := len(st.Holders) - 1; more > 0 {
			holding += fmt.Sprintf(" and %d more", more)
		}
	}
	fmt.Fprintf(io.err, "force-release lock %s, %s? [y/N] ", st.Name, holding)
	answer := strings.ToLower(strings.TrimSpace(readLine(io.in)))
	return answer == "y" || answer == "yes"
}

// readLine reads r up to a newline or the end, one byte at a time so that
// nothing after the line is consumed.
func readLine(r io.Reader) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := r.Read(buf)
		if n == 1 && buf[0] != '\n' {
			b.WriteByte(buf[0])
		}
		if err != nil || n == 1 && buf[0] == '\n' {
			return b.String()
		}
	}
}
