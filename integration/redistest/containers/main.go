// Command containers starts one Redis server in a Docker container with testcontainers-go: the
// fallback of package redistest (the real-Redis test harness) when there is no redis-server
// binary. It is a module of its own so that the Docker client and its forty-odd modules are
// downloaded and built only when that fallback is used, never by `go test` in integration/.
//
// redistest builds it once per test binary and runs one per container:
//
//	containers [redis-server arguments...]
//
// It starts image $HOLDFAST_REDIS_IMAGE (default "redis:7.0") running redis-server with
// --save "" --appendonly no --protected-mode no --enable-debug-command yes and the given
// arguments, prints the server's host:port as one line on stdout, and then waits until its
// standard input is closed (the test binary stopped it, or died) or it gets SIGINT or SIGTERM,
// and removes the container. testcontainers-go's reaper (Ryuk) removes the container too if
// this process is killed.
//
// Exit status: 0 after a clean stop, 3 when no Docker engine answers (the reason on stderr),
// 1 on any other failure.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// defaultImage matches the Redis version scripts/setup.sh installs on Debian.
const defaultImage = "redis:7.0"

// exitNoDocker is the exit status that tells redistest no Docker engine is reachable.
const exitNoDocker = 3

func main() {
	if ok, why := dockerAvailable(); !ok {
		fmt.Fprintf(os.Stderr, "containers: no Docker engine: %s\n", why)
		os.Exit(exitNoDocker)
	}
	ctr, addr, err := start(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "containers: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(addr)

	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	select {
	case <-stdinClosed:
	case <-sigs:
	}
	if err := testcontainers.TerminateContainer(ctr); err != nil {
		fmt.Fprintf(os.Stderr, "containers: removing the container: %v\n", err)
		os.Exit(1)
	}
}

// dockerAvailable asks testcontainers-go for its Docker provider and checks the engine's
// health; it never lets a testcontainers panic escape.
func dockerAvailable() (ok bool, reason string) {
	defer func() {
		if r := recover(); r != nil {
			ok, reason = false, fmt.Sprintf("testcontainers panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return false, err.Error()
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// start runs Redis in a container with the settings of redistest's local processes (but
// --bind and --port, which the container's port mapping replaces) and returns its address.
func start(extraArgs []string) (*tcredis.RedisContainer, string, error) {
	img := os.Getenv("HOLDFAST_REDIS_IMAGE")
	if img == "" {
		img = defaultImage
	}
	cmd := []string{"redis-server",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--enable-debug-command", "yes", // the client is not local from the container's view
	}
	cmd = append(cmd, extraArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a first pull takes a while
	defer cancel()
	ctr, err := tcredis.Run(ctx, img, testcontainers.WithCmd(cmd...))
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, "", fmt.Errorf("starting container %s: %w", img, err)
	}
	addr, err := ctr.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, "", fmt.Errorf("container address: %w", err)
	}
	return ctr, addr, nil
}
