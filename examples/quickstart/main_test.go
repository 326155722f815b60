package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
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
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Errorf("README.md does not show examples/quickstart/main.go verbatim in a go code block: copy the file into it")
	}
}
