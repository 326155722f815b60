// Command holdfast runs commands under a distributed lock or holding one of N
// permits of a semaphore, inspects locks, semaphores and latches and clears
// stuck locks and permits, on Redisson's layout (Java and Go code see the same
// objects), and shows holdfast at work on an embedded server.
//
//	holdfast lock [flags] NAME [-- COMMAND [ARGS...]]
//	holdfast lock --permits N [flags] NAME [-- COMMAND [ARGS...]]
//	holdfast elect [flags] NAME [-- COMMAND [ARGS...]]
//	holdfast status [flags] NAME...
//	holdfast unlock --force [flags] NAME
//	holdfast unlock --force [flags] --permit ID NAME
//	holdfast demo [flags]
//	holdfast version
//
// See docs/cli.md for every flag, environment variable and exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Exit codes of holdfast itself (a command run by "holdfast lock" passes its own
// status through; see docs/cli.md).
const (
	exitOK          = 0
	exitBusy        = 1  // the lock was busy (-n, -w); -E changes it
	exitUsage       = 64 // bad flags or arguments (sysexits EX_USAGE)
	exitDataErr     = 65 // the key is not a lock (unlock; EX_DATAERR)
	exitUnavailable = 69 // Redis unreachable, authentication refused (EX_UNAVAILABLE)
	exitSoftware    = 70 // an unexpected error (EX_SOFTWARE)
	exitLockLost    = 75 // the lock (or permit) was lost while the command ran (EX_TEMPFAIL)
	exitCannotRun   = 126
	exitNotFound    = 127
)

// stdio is where a subcommand reads and writes: the process's own streams, or a
// test's buffers.
type stdio struct {
	in          io.Reader
	out, err    io.Writer
	env         func(string) string // os.Getenv
	interactive bool                // in is a terminal: unlock asks before it force-releases
}

func main() {
	// go-redis logs every failed dial; a failing command says it in one line.
	redis.SetLogger(silentRedisLog{})
	ctx := interruptContext()
	os.Exit(run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr, env: os.Getenv, interactive: isTerminal(os.Stdin)}))
}

// interruptContext returns a context cancelled by SIGINT or SIGTERM, except
// for a signal the process was started with ignored (a background job of a
// non-interactive shell ignores SIGINT): it stays ignored.
func interruptContext() context.Context {
	var sigs []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return context.Background() // NotifyContext with no signal would catch them all
	}
	ctx, _ := signal.NotifyContext(context.Background(), sigs...)
	return ctx
}

// isTerminal reports whether f is a terminal: a character device other than
// os.DevNull (the stdin of cron jobs and of many services).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// command is one of holdfast's subcommands: its name, the other names it
// answers to, and what runs it with the arguments after its name.
type command struct {
	name    string
	aliases []string
	run     func(ctx context.Context, args []string, io stdio) int
}

// commands are holdfast's subcommands, in the order the help lists them; the
// messages of a missing or unknown command name them from here (commandList).
var commands = []command{
	{name: "lock", run: lockCommand},
	{name: "elect", run: electCommand},
	{name: "status", run: statusCommand},
	{name: "unlock", run: unlockCommand},
	{name: "demo", run: demoCommand},
	{name: "version", aliases: []string{"-version", "--version"}, run: func(_ context.Context, _ []string, io stdio) int {
		return versionCommand(io.out)
	}},
	{name: "help", aliases: []string{"-h", "-help", "--help"}, run: func(_ context.Context, _ []string, io stdio) int {
		usage(io.out)
		return exitOK
	}},
}

// commandList names the commands: "lock, elect, …, version or help".
func commandList() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// run runs the subcommand args[0] and returns the exit code.
func run(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 {
		return usageError(io.err, "", errors.New("missing the command: "+commandList()))
	}
	for _, c := range commands {
		if args[0] == c.name || slices.Contains(c.aliases, args[0]) {
			return c.run(ctx, args[1:], io)
		}
	}
	return usageError(io.err, "", fmt.Errorf("unknown command %q (%s)", args[0], commandList()))
}

// usage writes the help of holdfast itself to w.
func usage(w io.Writer) {
	fmt.Fprint(w, `holdfast runs a command under a distributed lock (a cluster-wide flock(1)) or holding
one of N permits of a semaphore, shows who holds a lock or permits and who waits, and
clears stuck locks and permits. Its locks and semaphores are Redisson's: Java and Go
programs share them.

usage:
  holdfast lock [flags] NAME [-- COMMAND [ARGS...]]               run COMMAND holding the lock NAME
  holdfast lock --permits N [flags] NAME [-- COMMAND [ARGS...]]   run COMMAND holding one of N permits
  holdfast elect [flags] NAME [-- COMMAND [ARGS...]]              run COMMAND while this process leads the election NAME
  holdfast status [flags] NAME...                                 show who holds a lock, and who waits
  holdfast status --watch [flags] NAME...                         the same, shown again every second until interrupted
  holdfast unlock --force [flags] NAME                            force-release a lock, waking its waiters
  holdfast unlock --force [flags] --permit ID NAME                force-release one permit of a semaphore
  holdfast demo [flags]                                           watch holdfast at work (embedded Redis)
  holdfast version                                                print the version it was built from

Run "holdfast COMMAND -h" for the flags of a command; see docs/cli.md.
`)
}
