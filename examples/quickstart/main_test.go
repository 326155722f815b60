package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// TestRun runs the quick start against an embedded Redis: it prints what it did
// and leaves the lock free.
func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	var out bytes.Buffer
	if err := run(context.Background(), "redis://"+mr.Addr(), &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	want := `locked "quickstart:orders:42"
re-entered: hold count 2
another owner: busy=true
after processOrder: locked=false
`
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if mr.Exists("quickstart:orders:42") {
		t.Errorf("the lock key is still there after run: %v", mr.Keys())
	}
}

// TestReadmeShowsThisFile keeps the README's quick start identical to main.go.
func TestReadmeShowsThisFile(t *testing.T) {
	readmeShows(t, "main.go", "")
}

// TestReadmeShowsNightly keeps the README's synchronizer example identical to
// nightly.go, from its func on.
func TestReadmeShowsNightly(t *testing.T) {
	readmeShows(t, "nightly.go", "nightly")
}

// readmeShows fails t unless README.md shows file verbatim in a go code
// block: the whole file, or from its func fn on when fn is not "".
func readmeShows(t *testing.T, file, fn string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := string(src)
	if fn != "" {
		_, rest, ok := strings.Cut(shown, "\n\nfunc "+fn+"(")
		if !ok {
			t.Fatalf("%s has no func %s", file, fn)
		}
		shown = "func " + fn + "(" + rest
	}
	if !strings.Contains(string(readme), "```go\n"+shown+"```\n") {
		t.Errorf("README.md does not show %s (from func %q on) verbatim in a go code block: copy it", file, fn)
	}
}

// newTestClient returns an embedded Redis and a client of it, both closed
// at the end of the test.
func newTestClient(t *testing.T) (*miniredis.Miniredis, *rlock.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	c, err := rlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// TestNightly runs the README's synchronizer example against an embedded
// Redis: it gives back every permit it took and leaves the latch open.
func TestNightly(t *testing.T) {
	mr, c := newTestClient(t)
	ctx := context.Background()
	if err := nightly(ctx, c); err != nil {
		t.Fatalf("nightly: %v", err)
	}
	if n, _ := c.NewSemaphore("exports").AvailablePermits(ctx); n != 5 {
		t.Errorf("exports: %d permits available after nightly, want 5", n)
	}
	if n, _ := c.NewExpirableSemaphore("workers").AcquiredPermits(ctx); n != 0 {
		t.Errorf("workers: %d permits still acquired after nightly", n)
	}
	if mr.Exists("import:parts") {
		t.Errorf("the latch is still set after nightly")
	}
}
