package redistest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// defaultImage is the Redis image used when no redis-server binary is available; it matches the
// Redis version installed by scripts/setup.sh on Debian.
const defaultImage = "redis:7.0"

// containersUsed is set once a container was started; Main then tolerates the goroutines that
// testcontainers-go keeps for its whole session (see goleakOptions).
var containersUsed atomic.Bool

// dockerAvailable is the preflight deciding whether the container fallback can work: it asks
// testcontainers-go for its Docker provider and checks the engine's health. Without an engine
// it returns false quickly; it never lets a testcontainers panic escape.
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

// startContainer runs Redis in a container with the same settings as a local process (except
// --bind and --port, which the container's port mapping replaces).
func startContainer(extraArgs []string) (*Server, error) {
	img := os.Getenv("HOLDFAST_REDIS_IMAGE")
	if img == "" {
		img = defaultImage
	}
	cmd := []string{"redis-server",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--enable-debug-command", "yes", // the client is not local from the container's view
	}
	cmd = append(cmd, extraArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	containersUsed.Store(true)
	ctr, err := tcredis.Run(ctx, img, testcontainers.WithCmd(cmd...))
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("redistest: starting container %s: %w", img, err)
	}
	addr, err := ctr.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("redistest: container address: %w", err)
	}
	if err := waitPing(addr, startDeadline); err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	return &Server{
		Addr:     addr,
		stopHook: func() { _ = testcontainers.TerminateContainer(ctr) },
	}, nil
}
