package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The container fallback (no redis-server binary, a Docker engine) runs Redis through
// testcontainers-go, which lives in the nested module ./containers: a small command that starts
// one container, prints its address, and removes the container when its stdin is closed. This
// package imports none of it, so `go test` in integration/ never downloads the Docker client;
// the command is built (and its modules downloaded) the first time a test needs a container.

const (
	// helperBuildTimeout bounds building ./containers, downloads included.
	helperBuildTimeout = 10 * time.Minute
	// containerStartTimeout bounds how long the command may take to print an address (an image
	// pull included).
	containerStartTimeout = 6 * time.Minute
	// containerStopTimeout bounds how long the command may take to remove its container.
	containerStopTimeout = time.Minute
	// exitNoDocker is the exit status of ./containers when no Docker engine answers.
	exitNoDocker = 3
)

// helper is the ./containers command, built once per test binary into a temporary directory
// (one build, and one testcontainers-go session and reaper for all the containers of the test
// binary: testcontainers-go names its session after the parent process).
var helper struct {
	once sync.Once
	dir  string // temporary directory holding bin, removed by removeHelper
	bin  string
	err  error
}

// helperSource returns the directory of the ./containers module, next to this file.
func helperSource() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("redistest: cannot locate the source of package redistest")
	}
	dir := filepath.Join(filepath.Dir(file), "containers")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("redistest: the container fallback needs its source: %w", err)
	}
	return dir, nil
}

// buildHelper builds the ./containers command once and returns its path.
func buildHelper() (string, error) {
	helper.once.Do(func() {
		src, err := helperSource()
		if err != nil {
			helper.err = err
			return
		}
		goBin, err := exec.LookPath("go") // go test puts its own GOROOT/bin first on PATH
		if err != nil {
			helper.err = fmt.Errorf("redistest: building the container fallback: %w", err)
			return
		}
		helper.dir, err = os.MkdirTemp("", "redistest-containers-")
		if err != nil {
			helper.err = fmt.Errorf("redistest: %w", err)
			return
		}
		bin := filepath.Join(helper.dir, "containers")
		cmd := exec.Command(goBin, "build", "-o", bin, ".")
		cmd.Dir = src
		out := &outputBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := runWithin(cmd, helperBuildTimeout); err != nil {
			helper.err = fmt.Errorf("redistest: building the container fallback in %s: %v\n%s", src, err, out.String())
			return
		}
		helper.bin = bin
	})
	return helper.bin, helper.err
}

// runWithin runs cmd, killing it when it takes longer than timeout.
func runWithin(cmd *exec.Cmd, timeout time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("killed after %v", timeout)
	}
}

// removeHelper deletes the built ./containers command, if any.
func removeHelper() {
	if helper.dir != "" {
		_ = os.RemoveAll(helper.dir)
	}
}

// dockerAvailable is the quick preflight deciding whether the container fallback is worth
// building: it looks for a Docker engine where testcontainers-go would, with the standard
// library only, and answers false with a reason when none answers. $DOCKER_HOST, when set, is
// the only place it looks; with ~/.testcontainers.properties it leaves the decision to
// ./containers, which asks testcontainers-go itself.
func dockerAvailable() (ok bool, reason string) {
	return dockerAvailableAt("/var/run/docker.sock", filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "docker.sock"))
}

// dockerAvailableAt is dockerAvailable with the machine-wide sockets given: the
// system one, looked at first, and the rootless one, looked at last.
func dockerAvailableAt(system, rootless string) (ok bool, reason string) {
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		if err := pingDocker(host); err != nil {
			return false, "$DOCKER_HOST=" + host + ": " + err.Error()
		}
		return true, ""
	}
	home, _ := os.UserHomeDir()
	if home != "" {
		if _, err := os.Stat(filepath.Join(home, ".testcontainers.properties")); err == nil {
			return true, ""
		}
	}
	sockets := []string{system}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		sockets = append(sockets, filepath.Join(d, "docker.sock"))
	}
	if home != "" {
		sockets = append(sockets, filepath.Join(home, ".docker", "run", "docker.sock"),
			filepath.Join(home, ".docker", "desktop", "docker.sock"))
	}
	sockets = append(sockets, rootless)
	var tried []string
	for _, s := range sockets {
		if _, err := os.Stat(s); err != nil {
			continue
		}
		err := pingDocker("unix://" + s)
		if err == nil {
			return true, ""
		}
		tried = append(tried, err.Error())
	}
	if len(tried) == 0 {
		return false, "$DOCKER_HOST is not set and there is no Docker socket (" + strings.Join(sockets, ", ") + ")"
	}
	return false, strings.Join(tried, "; ")
}

// pingDocker checks that a Docker engine answers at host (unix:// or tcp://): GET /_ping over
// a unix socket, a TCP connection for tcp:// (which may need TLS). Other schemes (ssh://,
// npipe://) pass: testcontainers-go decides.
func pingDocker(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "unix":
		conn, err := net.DialTimeout("unix", u.Path, 2*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, "GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"); err != nil {
			return err
		}
		status, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return fmt.Errorf("%s: %w", u.Path, err)
		}
		if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
			return fmt.Errorf("%s: /_ping answered %q", u.Path, strings.TrimSpace(status))
		}
		return nil
	case "tcp":
		conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	default:
		return nil
	}
}

// startContainer runs Redis in a container through the ./containers command, with the same
// settings as a local process (except --bind and --port, which the container's port mapping
// replaces). The command's stdin stays open while the container should run; stop closes it.
func startContainer(extraArgs []string) (*Server, error) {
	bin, err := buildHelper()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, extraArgs...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	cmd.Stdout = pw
	logs := &outputBuffer{} // testcontainers-go logs to stderr
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("redistest: starting the container fallback: %w", err)
	}
	pw.Close()
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	line := make(chan string, 1)
	go func() {
		defer pr.Close()
		l, _ := bufio.NewReader(pr).ReadString('\n') // "" when the command exits first
		line <- strings.TrimSpace(l)
	}()

	stop := func() {
		_ = stdin.Close()
		select {
		case <-done:
		case <-time.After(containerStopTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	var addr string
	select {
	case addr = <-line:
	case <-time.After(containerStartTimeout):
	}
	if addr == "" {
		stop()
		if waitErr == nil {
			waitErr = fmt.Errorf("no address within %v", containerStartTimeout)
		}
		var exitErr *exec.ExitError
		if errors.As(waitErr, &exitErr) && exitErr.ExitCode() == exitNoDocker {
			return nil, &unavailableError{reason: "redis-server not found on PATH and $REDIS_SERVER not set, and no Docker engine (" +
				strings.TrimSpace(logs.String()) + ")"}
		}
		return nil, fmt.Errorf("redistest: the container fallback gave no address (%v):\n%s", waitErr, logs.String())
	}
	if err := waitPing(addr, startDeadline); err != nil {
		stop()
		return nil, err
	}
	return &Server{Addr: addr, stopHook: stop}, nil
}
