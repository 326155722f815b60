package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
)

// durationFlag is the flag.Value of every duration flag: a duration of zero or
// more, given as a bare number of seconds, as flock(1) and timeout(1) take it
// ("5", "0.5"), or as a Go duration ("300ms", "1m30s").
type durationFlag time.Duration

// durationVar defines the duration flag name, stored in p, with the default
// value.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationFlag)(p), name, usage)
}

// Set parses s.
func (d *durationFlag) Set(s string) error {
	seconds := isDecimal(s)
	in := s
	if seconds {
		in += "s"
	}
	v, err := time.ParseDuration(in)
	switch {
	case err != nil && seconds: // the only way a number of seconds fails
		return errors.New("too long a duration")
	case err != nil:
		return errors.New("not a number of seconds (5, 0.5) or a duration (300ms, 1m30s)")
	case v < 0:
		return errors.New("a duration cannot be negative")
	}
	*d = durationFlag(v)
	return nil
}

// String returns the duration as Go writes it ("30s").
func (d *durationFlag) String() string { return time.Duration(*d).String() }

// Get returns the time.Duration (flag.Getter).
func (d *durationFlag) Get() any { return time.Duration(*d) }

// isDecimal reports whether s is a decimal number with an optional sign and
// fraction and no unit: "5", "0.5", ".5", "-1".
func isDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// newFlagSet returns the flag set of "holdfast cmd". It prints nothing: the
// command reports errors in one line (usageError) and prints its help itself.
func newFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("holdfast "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// help is what "holdfast cmd -h" prints: what the command does, its synopsis,
// its flags and a closing note.
type help struct {
	about    string // one or two sentences: what the command does
	synopsis string // the usage lines, the first starting "usage: "
	notes    string // after the flags; may be empty
}

// write writes the help of the command whose flags are fs to w.
func (h help) write(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\n%s\n\nflags:\n", strings.TrimSpace(h.about), strings.TrimSpace(h.synopsis))
	printFlags(w, fs)
	if h.notes != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.notes))
	}
}

// usageError reports a usage error of "holdfast cmd" on w, as two lines: what
// is wrong, then where the usage is. It returns exitUsage. cmd is empty for
// holdfast itself.
func usageError(w io.Writer, cmd string, err error) int {
	prog := strings.TrimSpace("holdfast " + cmd)
	fmt.Fprintf(w, "%s: %v\nrun '%s -h' for usage\n", prog, err, prog)
	return exitUsage
}

// flagError is the exit code of a flag parsing error err of "holdfast cmd":
// for -h (flag.ErrHelp) it prints the help on out and returns exitOK, else it
// reports the error on errOut (usageError), its flag written as the help
// writes it (dashedFlagError).
func flagError(err error, cmd string, h help, fs *flag.FlagSet, out, errOut io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		h.write(out, fs)
		return exitOK
	}
	return usageError(errOut, cmd, dashedFlagError(err))
}

// checkLockName returns why name cannot be the name of a lock, or nil: the
// library's own rule (lua.CheckName, which rlock applies to every lock), with
// the error rlock returns for it, matching rlock.ErrInvalidArgument. Checked
// before connecting, it makes lock, status and unlock refuse the same names
// with the same message.
func checkLockName(name string) error {
	return nameError("lock", name, lua.CheckName(name))
}

// refuseNames reports the first of names that cannot be a lock's name, in one
// line on w, and returns exitUsage; it returns exitOK when every name can be.
func refuseNames(w io.Writer, cmd string, names []string) int {
	for _, n := range names {
		if code := refuseName(w, cmd, "", n); code != exitOK {
			return code
		}
	}
	return exitOK
}

// refuseName is refuseNames of one name, which the user says is a lock (as
// ""), a semaphore (kindSema), a permit-expirable semaphore (kindPermits) or a
// latch (kindLatch): see checkName.
func refuseName(w io.Writer, cmd, as, name string) int {
	if err := checkName(as, name); err != nil {
		fmt.Fprintf(w, "holdfast %s: %v\n", cmd, err)
		return exitUsage
	}
	return exitOK
}

// checkName returns why name cannot be the name of an object of kind as (see
// refuseName), or nil: the library's own rule for that kind (lua.CheckName,
// CheckSemaphoreName, CheckExpirableSemaphoreName, CheckLatchName), with the
// error rlock returns for it, matching rlock.ErrInvalidArgument.
func checkName(as, name string) error {
	switch as {
	case kindSema:
		return nameError("semaphore", name, lua.CheckSemaphoreName(name))
	case kindPermits:
		return nameError("semaphore", name, lua.CheckExpirableSemaphoreName(name))
	case kindLatch:
		return nameError("latch", name, lua.CheckLatchName(name))
	}
	return checkLockName(name)
}

// nameError is the error of rlock for the name of a what that its check
// refused with err; nil when err is nil.
func nameError(what, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s name %q: %w", rlock.ErrInvalidArgument, what, name, err)
}

// durationNote says, in the help of the commands, how durations are written.
const durationNote = "A DURATION is a number of seconds (5, 0.5) or a Go duration (300ms, 1m30s, 2h)."
