// Command testsum runs `go test -json` in one or more module directories, prints what a
// person needs from the run, and closes with one line counting every test of every module:
//
//	N passed, N failed, N skipped
//
// It is what `make test` runs (through scripts/test.sh); it uses the standard library only.
//
// Usage:
//
//	testsum [-go GO] DIR... -- [go test flags]
//
// runs `GO test -json [go test flags] ./...` in each DIR in turn. Without -v among the flags
// it prints, like `go test`, one line per package (ok, FAIL, or no test files), plus the whole
// output of every failed test, build errors, and the package-level output of a failed package
// (a panic, a timeout, a TestMain that failed); with -v it prints all the output as it comes.
// After the last module it lists every skipped test with its reason (no skip is silent), then
// the failures, and prints the closing line.
//
// What counts: every test, subtest and example that reported pass, fail or skip (a subtest's
// parent counts too). A test still running when its package failed (a panic elsewhere, a
// timeout) counts as failed. A package that failed without a failed test (a build failure, a
// TestMain or leak check that failed after the tests passed) counts as one failure, and so
// does a `go test` that exited non-zero without reporting any failure (a bad flag, a broken
// go.mod). testsum exits 1 when anything failed, 2 on a usage error, else 0.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testsum", flag.ContinueOnError)
	fs.SetOutput(stderr)
	goCmd := fs.String("go", "go", "the go command")
	every := fs.Duration("progress", 30*time.Second, "print a progress line after this long without output (0: never)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: testsum [-go GO] DIR... -- [go test flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dirs, testFlags := splitArgs(fs.Args())
	if len(dirs) == 0 || strings.HasPrefix(dirs[0], "-") {
		fs.Usage()
		return 2
	}

	// Ctrl-C reaches go test through the terminal's process group; a signal sent to testsum
	// alone is passed on. Either way testsum runs no further module and still prints what ran.
	var (
		mu          sync.Mutex
		current     *exec.Cmd
		interrupted bool
	)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			mu.Lock()
			interrupted = true
			if current != nil {
				_ = current.Process.Signal(sig)
			}
			mu.Unlock()
		}
	}()

	s := newSummary(stdout, isVerbose(testFlags))
	start := time.Now()
	stopProgress := s.progressEvery(*every, start)
	defer stopProgress()
	for _, dir := range dirs {
		goArgs := append([]string{"test", "-json"}, testFlags...)
		goArgs = append(goArgs, "./...")
		cmd := exec.Command(*goCmd, goArgs...)
		cmd.Dir = dir
		cmd.Stderr = stderr // go's own messages: downloads, flag and go.mod errors
		out, err := cmd.StdoutPipe()
		mu.Lock()
		if interrupted {
			err = errors.New("interrupted")
		} else if err == nil {
			s.locked(func() { s.print(fmt.Sprintf("=== %s %s (in %s)\n", *goCmd, strings.Join(goArgs, " "), dir)) })
			err = cmd.Start()
			current = cmd
		}
		mu.Unlock()
		if err != nil {
			s.locked(func() { s.failRun(fmt.Sprintf("%s: go test did not run: %v", dir, err)) })
			continue
		}
		var failedBefore int
		s.locked(func() { failedBefore = s.failed })
		readErr := s.read(out)
		err = cmd.Wait()
		mu.Lock()
		current = nil
		mu.Unlock()
		s.locked(func() { s.ended(dir, failedBefore, readErr, err) })
	}
	stopProgress()
	s.close(fmt.Sprintf("%s in %s", strings.Join(dirs, " and "), time.Since(start).Round(time.Second)))
	if s.failed > 0 {
		return 1
	}
	return 0
}

// ended settles the run of go test in dir, which read the stream with readErr
// and exited with err, when s.failed was failedBefore at its start. s.mu must
// be held.
func (s *summary) ended(dir string, failedBefore int, readErr, err error) {
	s.endOfStream()
	if readErr != nil {
		s.failRun(fmt.Sprintf("%s: reading go test's output: %v", dir, readErr))
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		if s.failed == failedBefore {
			s.failRun(fmt.Sprintf("%s: go test exited with %v without reporting a failed test or package (see its messages above)", dir, exitErr))
		}
	case err != nil:
		s.failRun(fmt.Sprintf("%s: go test: %v", dir, err))
	}
}

// locked runs f with s.mu held.
func (s *summary) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// splitArgs splits testsum's positional arguments at "--" into directories and go test flags.
func splitArgs(args []string) (dirs, testFlags []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// isVerbose reports whether the go test flags ask for verbose output.
func isVerbose(flags []string) bool {
	for _, f := range flags {
		f = strings.TrimPrefix(strings.TrimPrefix(f, "-"), "-")
		f = strings.TrimPrefix(f, "test.")
		if f == "v" || f == "v=true" || f == "v=1" {
			return true
		}
	}
	return false
}

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the build events of
// Go 1.24 and later).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string // package fail caused by a build failure
}

// summary follows the events of one or more go test runs. Its methods are
// called on one goroutine but for progress, on a ticker's: mu orders them.
type summary struct {
	mu      sync.Mutex
	out     io.Writer
	verbose bool
	printed time.Time // when the last line was printed

	passed, failed, skipped int
	failures                []string // one line per failure, in order
	skips                   []string // one line per skipped test, with its reason

	pkgs map[string]*pkgState
}

type pkgState struct {
	output []string // package-level output (Test == "")
	tests  map[string]*testState
	order  []string // tests in the order they started
	failed int      // tests of the package counted as failed
}

type testState struct {
	output []string
	done   bool
	failed bool
}

func newSummary(out io.Writer, verbose bool) *summary {
	return &summary{out: out, verbose: verbose, pkgs: map[string]*pkgState{}}
}

// read handles the lines of a go test -json stream until it ends.
func (s *summary) read(r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.line(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// line handles one line of the stream; a line that is not an event is printed as it is.
func (s *summary) line(line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ev event
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil || ev.Action == "" {
		s.print(string(trimmed) + "\n")
		return
	}
	s.event(ev)
}

func (s *summary) print(text string) {
	io.WriteString(s.out, text)
	s.printed = time.Now()
}

// progressEvery prints a progress line (progress) whenever nothing was printed
// for every, until the returned function is called; every <= 0: never. The
// tests of a large package (the integration module's run for minutes) then do
// not leave the terminal silent.
func (s *summary) progressEvery(every time.Duration, start time.Time) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				s.mu.Lock()
				if now.Sub(s.printed) >= every {
					s.progress(now.Sub(start))
				}
				s.mu.Unlock()
			}
		}
	})
	return sync.OnceFunc(func() { close(done); wg.Wait() })
}

// progress prints how far the run is after elapsed: the tests finished, and
// the packages still running with their tests in flight. s.mu must be held.
func (s *summary) progress(elapsed time.Duration) {
	var running []string
	for _, name := range slices.Sorted(maps.Keys(s.pkgs)) {
		p := s.pkgs[name]
		n := 0
		for _, t := range p.tests {
			if !t.done {
				n++
			}
		}
		running = append(running, fmt.Sprintf("%s (%d tests in flight)", name, n))
	}
	s.print(fmt.Sprintf("testsum: %s: %d passed, %d failed, %d skipped so far; running %s\n",
		elapsed.Round(time.Second), s.passed, s.failed, s.skipped, strings.Join(running, ", ")))
}

func (s *summary) pkg(name string) *pkgState {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgState{tests: map[string]*testState{}}
		s.pkgs[name] = p
	}
	return p
}

func (s *summary) event(ev event) {
	switch ev.Action {
	case "build-output":
		s.print(ev.Output) // compiler errors: always worth seeing
		return
	case "build-fail":
		return // the package's fail event follows, with FailedBuild
	}
	if ev.Package == "" {
		return
	}
	p := s.pkg(ev.Package)
	if ev.Test == "" {
		s.packageEvent(ev, p)
		return
	}
	t := p.tests[ev.Test]
	if t == nil {
		t = &testState{}
		p.tests[ev.Test] = t
		p.order = append(p.order, ev.Test)
	}
	switch ev.Action {
	case "output":
		switch {
		case s.verbose:
			s.print(ev.Output)
		case !t.done:
			t.output = append(t.output, ev.Output)
		case t.failed:
			s.print(ev.Output)
		default:
			p.output = append(p.output, ev.Output) // late output of a passed test
		}
	case "pass", "skip", "fail":
		if t.done {
			return
		}
		t.done = true
		switch ev.Action {
		case "pass":
			s.passed++
		case "skip":
			s.skipped++
			s.skips = append(s.skips, fmt.Sprintf("SKIP %s %s: %s", ev.Package, ev.Test, skipReason(t.output)))
		case "fail":
			t.failed = true
			s.failed++
			p.failed++
			s.failures = append(s.failures, fmt.Sprintf("FAIL %s %s", ev.Package, ev.Test))
			if !s.verbose {
				s.printAncestors(p, ev.Test)
				s.printAll(t.output)
			}
		}
		t.output = nil
	}
}

// printAncestors prints what the enclosing tests of a failed subtest have printed so far
// ("=== RUN", their logs), outermost first, so that its output reads in order; they print
// the rest when they fail in turn.
func (s *summary) printAncestors(p *pkgState, name string) {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		if a := p.tests[name[:i]]; a != nil && !a.done {
			s.printAll(a.output)
			a.output = nil
		}
	}
}

// packageEvent handles an event of a package as a whole; its end settles the package's tests.
func (s *summary) packageEvent(ev event, p *pkgState) {
	switch ev.Action {
	case "output":
		if s.verbose {
			s.print(ev.Output)
		} else {
			p.output = append(p.output, ev.Output)
		}
		return
	case "pass", "skip", "fail":
	default:
		return // start, and actions of future Go versions
	}
	delete(s.pkgs, ev.Package)
	if ev.Action != "fail" {
		if !s.verbose {
			s.print(lastLine(p.output)) // "ok  pkg 1.2s" or "?   pkg [no test files]"
		}
		return
	}
	s.unfinished(ev.Package, p, "did not finish: its package failed")
	if !s.verbose {
		s.printAll(p.output)
	}
	if p.failed == 0 {
		what := "failed outside any test (TestMain, a leak check, os.Exit, a crash)"
		if ev.FailedBuild != "" {
			what = "build failed"
		}
		s.failed++
		s.failures = append(s.failures, fmt.Sprintf("FAIL %s [%s]", ev.Package, what))
		if len(p.output) == 0 && !s.verbose {
			s.print(fmt.Sprintf("FAIL\t%s [%s]\n", ev.Package, what))
		}
	}
}

// unfinished counts the tests of p that started but never reported a result as failed, and
// prints their output.
func (s *summary) unfinished(pkg string, p *pkgState, why string) {
	for _, name := range p.order {
		t := p.tests[name]
		if t.done {
			continue
		}
		t.done, t.failed = true, true
		s.failed++
		p.failed++
		s.failures = append(s.failures, fmt.Sprintf("FAIL %s %s (%s)", pkg, name, why))
		if !s.verbose {
			s.printAll(t.output)
			s.print(fmt.Sprintf("--- FAIL: %s (%s)\n", name, why))
		}
	}
}

// endOfStream settles the packages that never reported an end, as when go test was killed.
func (s *summary) endOfStream() {
	names := make([]string, 0, len(s.pkgs))
	for name := range s.pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.pkgs[name]
		s.unfinished(name, p, "no result: go test stopped")
		if !s.verbose {
			s.printAll(p.output)
		}
		if p.failed == 0 {
			s.failed++
			s.failures = append(s.failures, fmt.Sprintf("FAIL %s [no result: go test stopped]", name))
		}
		delete(s.pkgs, name)
	}
}

// failRun records a failure of a go test run as a whole.
func (s *summary) failRun(msg string) {
	s.failed++
	s.failures = append(s.failures, "FAIL "+msg)
	s.print("testsum: " + msg + "\n")
}

// close prints the lists of skipped tests and failures, and the closing line.
func (s *summary) close(what string) {
	if len(s.skips) > 0 {
		s.print(fmt.Sprintf("\n=== Skipped (%d)\n", len(s.skips)))
		for _, l := range s.skips {
			s.print(l + "\n")
		}
	}
	if len(s.failures) > 0 {
		s.print(fmt.Sprintf("\n=== Failed (%d)\n", len(s.failures)))
		for _, f := range s.failures {
			s.print(f + "\n")
		}
	}
	s.print(fmt.Sprintf("\ntestsum: %s\n", what))
	s.print(fmt.Sprintf("%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped))
}

func (s *summary) printAll(lines []string) {
	for _, l := range lines {
		s.print(l)
	}
}

// skipReason returns what a skipped test said last (its t.Skip message), without the
// file:line go test puts in front.
func skipReason(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		l := strings.TrimSpace(output[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if at, msg, ok := strings.Cut(l, ": "); ok && strings.Contains(at, ".go:") && !strings.Contains(at, " ") {
			return msg
		}
		return l
	}
	return "(no reason given)"
}

// lastLine returns the last non-blank line of output, with its newline.
func lastLine(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		if strings.TrimSpace(output[i]) != "" {
			l := output[i]
			if !strings.HasSuffix(l, "\n") {
				l += "\n"
			}
			return l
		}
	}
	return ""
}
