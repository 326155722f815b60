package cli

import (
	"flag"
	"log"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/report"
)

// Flags are the flags the benchmark commands share. A command embeds Flags
// in its options, calls Setup, registers the groups it has (Window, Libs,
// JSONFile, Uncontended) and its own flags, and calls Parse, which fills in
// the defaults of the groups.
type Flags struct {
	// Out is the report directory (-out), Quick the short run (-quick),
	// RedisBin the redis-server binary (-redis-server).
	Out      string
	Quick    bool
	RedisBin string
	// Duration and Warmup are the measured window of each contended run and
	// its unmeasured start, Timeout the deadline of each acquire call
	// (Window).
	Duration, Warmup, Timeout time.Duration
	// LibNames is the comma-separated choice of libraries (Libs).
	LibNames string
	// JSON is the file for the results as JSON (JSONFile).
	JSON string
	// Rounds and Cycles are the uncontended rounds and the cycles per row
	// and round (Uncontended).
	Rounds, Cycles int

	window                  bool
	cyclesFull, cyclesQuick int
}

// Setup sets the log up for the command name (no time stamps, the name as
// the prefix) and registers -out (out says what the directory is for),
// -quick (quick says what it shortens) and -redis-server.
func (f *Flags) Setup(name, out, quick string) {
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
	flag.StringVar(&f.Out, "out", "out", "directory for "+out)
	flag.BoolVar(&f.Quick, "quick", false, "short run: "+quick)
	flag.StringVar(&f.RedisBin, "redis-server", "", "redis-server binary (default: from PATH, else /usr/bin/redis-server)")
}

// Window registers -duration and -warmup, the measured window of each
// contended run (what: "run", "point") and its unmeasured start (defaults
// 3 s and 500 ms, with -quick 1 s and 300 ms), and the flag timeoutFlag,
// the deadline of each call (call: "Lock") with the default timeout.
func (f *Flags) Window(what, timeoutFlag, call string, timeout time.Duration) {
	f.window = true
	flag.DurationVar(&f.Duration, "duration", 0, "measured window of each contended "+what+" (default 3s, -quick 1s)")
	flag.DurationVar(&f.Warmup, "warmup", 0, "unmeasured start of each contended "+what+" (default 500ms, -quick 300ms)")
	flag.DurationVar(&f.Timeout, timeoutFlag, timeout, "deadline of each "+call+" call")
}

// Libs registers -libs, the choice among names; what says what is chosen
// and the default ("libraries to run (default all)").
func (f *Flags) Libs(what string, names []string) {
	flag.StringVar(&f.LibNames, "libs", "", "comma-separated "+what+": "+strings.Join(names, ","))
}

// JSONFile registers -json; what says what is written ("summarised
// results").
func (f *Flags) JSONFile(what string) {
	flag.StringVar(&f.JSON, "json", "", "also write the "+what+" as JSON to this file")
}

// Uncontended registers the uncontended rounds, roundsFlag (default 10,
// -quick 3), and -cycles, per what ("library per round"; default full,
// -quick quick).
func (f *Flags) Uncontended(roundsFlag, what string, full, quick int) {
	f.cyclesFull, f.cyclesQuick = full, quick
	flag.IntVar(&f.Rounds, roundsFlag, 0, "uncontended rounds (default 10, -quick 3)")
	flag.IntVar(&f.Cycles, "cycles", 0, "uncontended cycles per "+what+" (default "+strconv.Itoa(full)+", -quick "+strconv.Itoa(quick)+")")
}

// Parse parses the command line and fills in the defaults of the
// registered groups and the redis-server binary (see RedisServer).
func (f *Flags) Parse() {
	flag.Parse()
	if f.window {
		Default(&f.Duration, 3*time.Second, time.Second, f.Quick)
		Default(&f.Warmup, 500*time.Millisecond, 300*time.Millisecond, f.Quick)
	}
	if f.cyclesFull > 0 {
		Default(&f.Rounds, 10, 3, f.Quick)
		Default(&f.Cycles, f.cyclesFull, f.cyclesQuick, f.Quick)
	}
	f.RedisBin = RedisServer(f.RedisBin)
}

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

// Output is where the report goes: -out and -json.
func (f *Flags) Output() report.Output { return report.Output{Dir: f.Out, JSON: f.JSON} }
