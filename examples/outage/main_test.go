package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/holdfast-go/holdfast/rlock"
)

// TestRun stops an embedded Redis under the program's lock: slog.Default()
// (the client's logger when none is given) hears a failed renewal naming the
// lock with its lease left, then the loss, and nothing before the stop.
func TestRun(t *testing.T) {
	// A file takes the program's writes and the test's reads at once.
	logs, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	logged := func() string {
		b, err := os.ReadFile(logs.Name())
		if err != nil {
			t.Error(err)
		}
		return string(b)
	}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	mr := miniredis.RunT(t)
	var out bytes.Buffer
	err = run(context.Background(), "redis://"+mr.Addr(), 2*time.Second, &out, func(string) {
		if s := logged(); s != "" {
			t.Errorf("logged before the outage:\n%s", s)
		}
		mr.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	got := logged()
	t.Logf("log:\n%s", got)
	for _, want := range []string{
		`level=WARN msg=holdfast.watchdog.renewal holdfast.outcome=failed holdfast.kind=mutex holdfast.name=outage:demo holdfast.lease_left=`,
		`level=WARN msg=holdfast.hold.end holdfast.kind=mutex holdfast.name=outage:demo holdfast.outcome=lost holdfast.loss.cause=deadline`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if !strings.Contains(out.String(), rlock.ErrLockLost.Error()) {
		t.Errorf("output: %s", out.String())
	}
}
