package cli

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/link"
	"github.com/holdfast-go/holdfast/bench/internal/report"
)

// Flags are the flags the benchmark commands share. A command embeds Flags
// in its options, calls Setup, registers the groups it has (Contended,
// Uncontended) and its own flags, and calls Run, which parses the command
// line, fills in the defaults that depend on -quick and runs the command.
type Flags struct {
	// Out is the report directory (-out), Quick the short run (-quick),
	// RedisBin the redis-server binary (-redis-server), JSON the file for
	// the results as JSON (-json).
	Out      string
	Quick    bool
	RedisBin string
	JSON     string
	// Link is the link profile between every client and the redis-server
	// (-link: loopback, proxy, slow, slower; see link.Profiles).
	Link string
	// Duration and Warmup are the measured window of each contended run and
	// its unmeasured start, Timeout the deadline of each acquire call,
	// LibNames the comma-separated choice of libraries (Contended).
	Duration, Warmup, Timeout time.Duration
	LibNames                  string
	// Rounds and Cycles are the uncontended rounds and the cycles per row
	// and round (Uncontended).
	Rounds, Cycles int

	defaults []func() // set what is still zero after parsing
}

// Setup, in a link process (link.ServeProcess), serves the link and exits.
// Otherwise it sets the log up for the command name (no time stamps, the
// name as the prefix) and, in a worker process (harness.ServeWorker), serves the
// run with serve and exits. Otherwise it registers -out (out says what the
// directory is for), -quick (quick says what it shortens), -redis-server,
// -link and, unless json is empty, -json (json says what is written).
func (f *Flags) Setup(name, out, quick, json string, serve func(harness.Config) error) {
	if link.ServeProcess() {
		os.Exit(0)
	}
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
	if serve != nil && harness.ServeWorker(serve) {
		os.Exit(0)
	}
	flag.StringVar(&f.Out, "out", "out", "directory for "+out)
	flag.BoolVar(&f.Quick, "quick", false, "short run: "+quick)
	flag.StringVar(&f.RedisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
	flag.StringVar(&f.Link, "link", "loopback", "link between the clients and redis-server: loopback (direct), proxy (forwarding proxy, no added delay), "+
		"slow (proxy adding 1 ms each way, PING about 2.3 ms), slower (2 ms each way, PING about 4.5 ms)")
	if json != "" {
		flag.StringVar(&f.JSON, "json", "", "also write the "+json+" as JSON to this file")
	}
}

// Deadline is a flag for the deadline of each acquire call: its name, the
// call ("Lock") and the default.
type Deadline struct {
	Flag, Call string
	Default    time.Duration
}

// Contended registers the flags of contended runs of libraries: -duration
// and -warmup, the measured window of each contended what ("run", "point")
// and its unmeasured start (3 s and 500 ms, with -quick 1 s and 300 ms), the
// deadline d, and -libs (libs says what is chosen and the default, names
// lists the choice).
func (f *Flags) Contended(what string, d Deadline, libs string, names []string) {
	f.DurationVar(&f.Duration, "duration", 3*time.Second, time.Second, "measured window of each contended "+what)
	f.DurationVar(&f.Warmup, "warmup", 500*time.Millisecond, 300*time.Millisecond, "unmeasured start of each contended "+what)
	flag.DurationVar(&f.Timeout, d.Flag, d.Default, "deadline of each "+d.Call+" call")
	flag.StringVar(&f.LibNames, "libs", "", "comma-separated "+libs+": "+strings.Join(names, ","))
}

// Uncontended registers the uncontended rounds, roundsFlag (10, -quick 3),
// and -cycles, per what ("library per round"; full, -quick quick).
func (f *Flags) Uncontended(roundsFlag, what string, full, quick int) {
	f.IntVar(&f.Rounds, roundsFlag, 10, 3, "uncontended rounds")
	f.IntVar(&f.Cycles, "cycles", full, quick, "uncontended cycles per "+what)
}

// IntVar registers an int flag whose default is full, or quick with -quick.
func (f *Flags) IntVar(p *int, name string, full, quick int, usage string) {
	flag.IntVar(p, name, 0, fmt.Sprintf("%s (default %d, -quick %d)", usage, full, quick))
	f.defaults = append(f.defaults, func() { Default(p, full, quick, f.Quick) })
}

// DurationVar registers a duration flag whose default is full, or quick
// with -quick.
func (f *Flags) DurationVar(p *time.Duration, name string, full, quick time.Duration, usage string) {
	flag.DurationVar(p, name, 0, fmt.Sprintf("%s (default %v, -quick %v)", usage, full, quick))
	f.defaults = append(f.defaults, func() { Default(p, full, quick, f.Quick) })
}

// Run parses the command line, fills in the defaults (those of IntVar and
// DurationVar, and the redis-server binary: see RedisServer) and runs run
// with a background context; its error ends the process.
func (f *Flags) Run(run func(ctx context.Context) error) {
	flag.Parse()
	for _, d := range f.defaults {
		d()
	}
	f.RedisBin = RedisServer(f.RedisBin)
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Output is where the report goes: -out and -json.
func (f *Flags) Output() report.Output { return report.Output{Dir: f.Out, JSON: f.JSON} }

// Default sets *v, if it is zero, to quick in a quick run and to full
// otherwise.
func Default[T comparable](v *T, full, quick T, isQuick bool) {
	var zero T
	if *v != zero {
		return
	}
	*v = full
	if isQuick {
		*v = quick
	}
}

// RedisServer returns bin, or if it is empty the redis-server on PATH, or
// else /usr/bin/redis-server.
func RedisServer(bin string) string {
	if bin != "" {
		return bin
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return "/usr/bin/redis-server"
}
