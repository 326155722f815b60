package redistest

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDocker serves a unix socket that answers every HTTP request with status, like a Docker
// engine's GET /_ping when status is "200 OK". It returns the socket's DOCKER_HOST form.
func fakeDocker(t *testing.T, status string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fd") // short: a unix socket path has ~100 bytes at most
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			rd := bufio.NewReader(conn)
			for { // read the request head
				line, err := rd.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 "+status+"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")
			_ = conn.Close()
		}
	}()
	return "unix://" + sock
}

func TestDockerPreflight(t *testing.T) {
	t.Run("DOCKER_HOST answering", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", fakeDocker(t, "200 OK"))
		ok, why := dockerAvailable()
		assert.True(t, ok, why)
	})
	t.Run("DOCKER_HOST failing", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", fakeDocker(t, "500 Internal Server Error"))
		ok, why := dockerAvailable()
		assert.False(t, ok)
		assert.Contains(t, why, "500")
	})
	t.Run("DOCKER_HOST missing socket", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/none.sock")
		ok, why := dockerAvailable()
		assert.False(t, ok)
		assert.Contains(t, why, "none.sock")
	})
	t.Run("no DOCKER_HOST, no socket", func(t *testing.T) {
		// The machine-wide sockets are given, absent, so that the test says
		// the same on a machine that runs Docker.
		t.Setenv("DOCKER_HOST", "")
		t.Setenv("HOME", t.TempDir())
		t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
		dir := t.TempDir()
		ok, why := dockerAvailableAt(filepath.Join(dir, "docker.sock"), filepath.Join(dir, "rootless.sock"))
		assert.False(t, ok)
		assert.Contains(t, why, "no Docker socket")
	})
}
