package redistest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WorkerEnv is the environment variable that marks a re-executed test binary as a worker; its
// value is the worker's role. See [StartWorker].
const WorkerEnv = "HOLDFAST_WORKER"

// WorkerIndexEnv is the environment variable holding a worker's index (0-based) among the
// workers started by one [RunWorkers] call; [StartWorker] sets it to 0.
const WorkerIndexEnv = "HOLDFAST_WORKER_INDEX"

// workerLineBuffer is how many stdout lines a Worker buffers before the worker blocks writing.
const workerLineBuffer = 1 << 16

// WorkerRole returns the role of this process when it is a worker started by [StartWorker], ""
// in the parent test process.
func WorkerRole() string { return os.Getenv(WorkerEnv) }

// WorkerIndex returns this worker's index (see [WorkerIndexEnv]), 0 when unset.
func WorkerIndex() int {
	i, _ := strconv.Atoi(os.Getenv(WorkerIndexEnv))
	return i
}

// Worker is a child process running one test of the current test binary in a worker role.
//
// Pattern: one test function is both the coordinator and the worker.
//
//	func TestTwoProcesses(t *testing.T) {
//		if redistest.WorkerRole() == "locker" {
//			addr := os.Getenv("ADDR")
//			... // do the work, report on stdout, one line per event:
//			fmt.Println("ACQUIRED", redistest.WorkerIndex())
//			return // t.Fatal in a worker makes Wait return an error
//		}
//		srv := redistest.Start(t)
//		ws := redistest.RunWorkers(t, t.Name(), "locker", 3, "ADDR="+srv.Addr)
//		for _, w := range ws {
//			line := w.Expect(t, "ACQUIRED", 10*time.Second)
//			...
//		}
//		for _, w := range ws {
//			require.NoError(t, w.Wait(), w.Output())
//		}
//	}
//
// The worker runs with -test.run anchored on that test only and -test.count=1, without -v:
// its stdout carries the lines the test prints plus the testing package's final "PASS"/"FAIL"
// and failure reports. Workers still running when the test ends are killed (with their whole
// process group) and reaped; their output is logged when the test failed. On Linux a worker is
// also killed by the kernel when the test binary dies (Pdeathsig).
type Worker struct {
	// Role is the value of WorkerEnv in the worker.
	Role string
	// Index is the value of WorkerIndexEnv in the worker.
	Index int

	cmd   *exec.Cmd
	lines chan string   // stdout lines, closed at EOF
	stop  chan struct{} // closed at cleanup: stop delivering lines
	done  chan struct{} // closed once the process was reaped
	err   error         // cmd.Wait's result, valid after done
	out   *outputBuffer // stdout and stderr transcript
}

// StartWorker re-executes the test binary (os.Args[0]) as a worker running only the test
// testName (a top-level test name or a t.Name() of a subtest), with WorkerEnv=role,
// WorkerIndexEnv=0 and the extra environment entries env ("KEY=value") added to the current
// environment.
func StartWorker(tb testing.TB, testName, role string, env ...string) *Worker {
	tb.Helper()
	return startWorker(tb, nil, testName, role, 0, env)
}

// StartIndexedWorker is [StartWorker] with WorkerIndexEnv (and the Worker's Index) set to
// index: for a test that starts its workers one at a time.
func StartIndexedWorker(tb testing.TB, testName, role string, index int, env ...string) *Worker {
	tb.Helper()
	return startWorker(tb, nil, testName, role, index, env)
}

// RunWorkers starts n workers like [StartWorker], with WorkerIndexEnv set to 0..n-1.
func RunWorkers(tb testing.TB, testName, role string, n int, env ...string) []*Worker {
	tb.Helper()
	ws := make([]*Worker, n)
	for i := range ws {
		ws[i] = startWorker(tb, nil, testName, role, i, env)
	}
	return ws
}

// runPattern turns a test name into an anchored -test.run pattern.
func runPattern(testName string) string {
	parts := strings.Split(testName, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// startWorker starts a worker; under prefix when not empty (ip netns exec NS, which execs
// the test binary in place: the Worker's pid is the test binary's).
func startWorker(tb testing.TB, prefix []string, testName, role string, index int, env []string) *Worker {
	tb.Helper()
	if role == "" {
		tb.Fatalf("redistest: a worker needs a non-empty role")
	}
	args := []string{os.Args[0], "-test.run=" + runPattern(testName), "-test.count=1"}
	args = append(append([]string(nil), prefix...), args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+role, WorkerIndexEnv+"="+strconv.Itoa(index))
	if os.Getenv("GORACE") == "" {
		// A -race binary sleeps 1 s at exit by default (atexit_sleep_ms); workers need not.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = sysProcAttr()
	// If something the worker started keeps stderr open after the worker exits, do not hang.
	cmd.WaitDelay = 5 * time.Second
	w := &Worker{
		Role:  role,
		Index: index,
		cmd:   cmd,
		lines: make(chan string, workerLineBuffer),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		out:   &outputBuffer{},
	}
	cmd.Stderr = w.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("redistest: worker stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("redistest: starting worker %s[%d]: %v", role, index, err)
	}
	go w.read(stdout)
	tb.Cleanup(func() {
		w.kill()
		if tb.Failed() {
			tb.Logf("redistest: output of worker %s[%d] (pid %d, %v):\n%s", role, index, w.Pid(), w.err, w.Output())
		}
	})
	return w
}

// read delivers stdout lines until EOF (or until cleanup stops delivery), then reaps the process.
func (w *Worker) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	delivering := true
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w.out, line)
		if delivering {
			select {
			case w.lines <- line:
			case <-w.stop:
				delivering = false
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w.out, "[redistest: reading stdout: %v]\n", err)
	}
	_, _ = io.Copy(w.out, stdout) // after an over-long line: keep draining
	close(w.lines)
	w.err = w.cmd.Wait()
	close(w.done)
}

// kill SIGKILLs the worker's process group unless it already exited, and waits until it is
// reaped and its reader goroutine has returned.
func (w *Worker) kill() {
	select {
	case <-w.done:
	default:
		if err := syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			_ = w.cmd.Process.Kill()
		}
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Lines returns the worker's stdout, one line (without the newline) per value; the channel is
// closed when the worker closes its stdout (normally when it exits). Up to 65536 unread lines
// are buffered; beyond that the worker blocks writing until lines are read.
func (w *Worker) Lines() <-chan string { return w.lines }

// Expect reads lines from [Worker.Lines] until one starts with prefix and returns it; lines
// before it are consumed (they stay in [Worker.Output]). It fails the test when the worker's
// stdout ends or timeout passes first. Call it from the test's goroutine.
func (w *Worker) Expect(tb testing.TB, prefix string, timeout time.Duration) string {
	tb.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				<-w.done
				tb.Fatalf("redistest: worker %s[%d] ended (%v) before printing %q; output:\n%s",
					w.Role, w.Index, w.err, prefix, w.Output())
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timer.C:
			tb.Fatalf("redistest: worker %s[%d] did not print %q within %v; output:\n%s",
				w.Role, w.Index, prefix, timeout, w.Output())
		}
	}
}

// Wait waits for the worker to exit and returns its status like exec.Cmd.Wait: nil after a
// passing run, an *exec.ExitError when its test failed or it was killed by a signal.
// Unread lines stay available on [Worker.Lines].
func (w *Worker) Wait() error {
	<-w.done
	return w.err
}

// Done returns a channel closed once the worker has exited and been reaped.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Signal sends sig to the worker process (not to processes it started).
func (w *Worker) Signal(sig os.Signal) error {
	select {
	case <-w.done:
		return fmt.Errorf("redistest: worker %s[%d] has exited", w.Role, w.Index)
	default:
	}
	return w.cmd.Process.Signal(sig)
}

// Pid returns the worker's process id.
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// Output returns the worker's stdout and stderr so far (the most recent 256 KiB).
func (w *Worker) Output() string { return w.out.String() }
