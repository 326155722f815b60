//go:build containers

package redistest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContainerFallbackBuild builds and runs the ./containers command against a fake engine
// that answers the preflight but nothing else: the command must report that no usable Docker
// engine is there, and Start must skip. It downloads testcontainers-go's modules, so it runs
// only with the build tag containers (make vet-containers): the normal test run must not
// download them.
func TestContainerFallbackBuild(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	t.Setenv("PATH", filepath.Dir(goBin)) // go, but no redis-server
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("CI", "")
	t.Setenv("DOCKER_HOST", fakeDocker(t, "200 OK"))
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")

	_, err = launch(nil)
	require.Error(t, err)
	t.Log(err)
	var ue *unavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("want an unavailableError (no usable Docker engine), got %v", err)
	}
	assert.True(t, strings.Contains(err.Error(), "no Docker engine"), err.Error())
	assert.NotEmpty(t, helper.bin, "the fallback command was not built")
}
