package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary stands in for the go command: with TESTSUM_FAKE_GO set it prints the
// events.json of its working directory (a recorded `go test -json` stream) and exits with the
// status in the file exit (0 without one).
func TestMain(m *testing.M) {
	if os.Getenv("TESTSUM_FAKE_GO") != "" {
		data, _ := os.ReadFile("events.json")
		os.Stdout.Write(data)
		code := 0
		if b, err := os.ReadFile("exit"); err == nil {
			code, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runFake runs testsum on the given testdata directories with the fake go command.
func runFake(t *testing.T, args ...string) (code int, out string) {
	t.Helper()
	t.Setenv("TESTSUM_FAKE_GO", "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	full := []string{"-go", exe}
	for _, a := range args {
		if a != "--" && !strings.HasPrefix(a, "-") {
			a = filepath.Join("testdata", a)
		}
		full = append(full, a)
	}
	code = run(full, &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return code, stdout.String()
}

// closing returns the last line of out, which must be the closing count.
func closing(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// runWant runs testsum on the fake go test with args, checks its exit code and
// closing count line, and returns its output.
func runWant(t *testing.T, wantCode int, wantClosing string, args ...string) string {
	t.Helper()
	code, out := runFake(t, args...)
	if code != wantCode {
		t.Errorf("exit code %d, want %d", code, wantCode)
	}
	if got := closing(t, out); got != wantClosing {
		t.Errorf("closing line %q, want %q\n%s", got, wantClosing, out)
	}
	return out
}

func TestPassing(t *testing.T) {
	out := runWant(t, 0, "2 passed, 0 failed, 1 skipped", "passing", "--", "-race", "-count=1")
	if !strings.Contains(out, "ok  \texample.com/b/p\t0.011s\n") {
		t.Errorf("no ok line for the package:\n%s", out)
	}
	if strings.Contains(out, "quietly passing") || strings.Contains(out, "=== Failed") {
		t.Errorf("output of a passing test or a failure list printed:\n%s", out)
	}
	if !strings.Contains(out, "test -json -race -count=1 ./...") {
		t.Errorf("the go test command line is not shown:\n%s", out)
	}
}

func TestVerbosePrintsEverything(t *testing.T) {
	code, out := runFake(t, "passing", "--", "-v")
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if !strings.Contains(out, "quietly passing") {
		t.Errorf("-v did not print the output of a passing test:\n%s", out)
	}
}

// TestFailures: a build failure, a TestMain that fails after its tests passed, a panic, a
// timeout, with a package that passes and one without tests (recorded from go test -json).
func TestFailures(t *testing.T) {
	out := runWant(t, 1, "3 passed, 5 failed, 1 skipped", "mixed", "--")
	for _, want := range []string{
		"declared and not used: x",              // the compiler's message
		"FAIL scratch/buildfail [build failed]", // in the list of failures
		"leak detected!",                        // a TestMain's own message
		"FAIL scratch/mainfail [failed outside any test",
		"before panic", "panic: boom", "FAIL scratch/panicker TestP\n",
		"FAIL scratch/panicker TestPar (did not finish",
		"panic: test timed out after 3s",
		"FAIL scratch/timeout TestSlow (did not finish",
		"?   \tscratch/notests\t[no test files]",
		"ok  \tscratch/okpkg",
		"=== Skipped (1)\nSKIP scratch/okpkg TestSkip: nope\n", // listed with its reason
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hello A") {
		t.Errorf("output of a passing test printed:\n%s", out)
	}
}

// TestExitWithoutFailure: go test exits non-zero though every reported test passed.
func TestExitWithoutFailure(t *testing.T) {
	out := runWant(t, 1, "2 passed, 1 failed, 1 skipped", "exits", "--")
	if !strings.Contains(out, "go test exited with exit status 1 without reporting") {
		t.Errorf("the exit is not reported:\n%s", out)
	}
}

// TestCutStream: go test stopped in the middle of a package.
func TestCutStream(t *testing.T) {
	out := runWant(t, 1, "1 passed, 1 failed, 0 skipped", "cut", "--")
	if !strings.Contains(out, "FAIL example.com/c/q TestHangs (no result: go test stopped)") {
		t.Errorf("the unfinished test is not reported:\n%s", out)
	}
}

// TestModulesAddUp: one closing line for all the directories, failing if any failed.
func TestModulesAddUp(t *testing.T) {
	out := runWant(t, 1, "6 passed, 6 failed, 2 skipped", "passing", "mixed", "cut", "--")
	if n := strings.Count(out, " passed, "); n != 1 {
		t.Errorf("%d count lines, want 1:\n%s", n, out)
	}
}

func TestMissingDir(t *testing.T) {
	runWant(t, 1, "2 passed, 1 failed, 1 skipped", "passing", "no-such-dir", "--")
}

func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--", "-v"}, &stdout, &stderr); code != 2 {
		t.Errorf("exit code %d without a directory, want 2", code)
	}
}

// TestSubtestOrder: a failed subtest's output comes after what its parent printed before it.
func TestSubtestOrder(t *testing.T) {
	out := runWant(t, 1, "1 passed, 2 failed, 0 skipped", "nested", "--")
	order := []string{"=== RUN   TestParent\n", "parent log before", "=== RUN   TestParent/bad", "sub failed",
		"--- FAIL: TestParent/bad", "parent log after", "--- FAIL: TestParent (", "FAIL\tscratch2/nested"}
	rest := out
	for _, want := range order {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
	if strings.Contains(out, "TestParent/ok") {
		t.Errorf("output of a passed subtest printed:\n%s", out)
	}
}

// TestProgress: after the chosen time without output, a line says how far the
// run is: the counts so far and the packages still running, with their tests in
// flight (make test's integration package runs for minutes).
func TestProgress(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out, false)
	for _, l := range []string{
		`{"Action":"run","Package":"ex/slow","Test":"TestDone"}`,
		`{"Action":"pass","Package":"ex/slow","Test":"TestDone"}`,
		`{"Action":"run","Package":"ex/slow","Test":"TestLong"}`,
	} {
		s.line([]byte(l))
	}
	s.printed = time.Time{} // nothing printed for long
	stop := s.progressEvery(20*time.Millisecond, time.Now().Add(-90*time.Second))
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := out.String()
		s.mu.Unlock()
		if strings.Contains(got, "testsum: 1m30s: 1 passed, 0 failed, 0 skipped so far; running ex/slow (1 tests in flight)\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress line in 5s:\n%s", got)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	stop()
}
