package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The holdfast command's binary, built once per test run (holdfastBin).
var cliBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// holdfastBin returns the path of the holdfast command built from this
// repository's cmd/holdfast, building it on first use.
func holdfastBin(t testing.TB) string {
	t.Helper()
	cliBuild.once.Do(func() {
		cliBuild.dir, cliBuild.err = os.MkdirTemp("", "holdfast-cli-")
		if cliBuild.err != nil {
			return
		}
		cliBuild.path = filepath.Join(cliBuild.dir, "holdfast")
		cmd := exec.Command("go", "build", "-o", cliBuild.path, "./cmd/holdfast")
		cmd.Dir = ".."
		cliBuild.out, cliBuild.err = cmd.CombinedOutput()
	})
	if cliBuild.err != nil {
		t.Fatalf("building cmd/holdfast: %v\n%s", cliBuild.err, cliBuild.out)
	}
	return cliBuild.path
}
