package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// shared holds the server of Shared.
var shared struct {
	mu       sync.Mutex
	srv      *Server  // started process or container, nil until first use
	err      error    // why starting failed; Shared fails or skips every caller with it
	external sync.Map // addr -> *Server for $REDIS_ADDR servers already pinged
}

// Shared returns one server shared by every test of the test binary: the external server at
// $REDIS_ADDR when that is set (never stopped, restarted or flushed by this package, and not
// [Server.Controllable]), else a server started on first use like [Start] with no extra
// arguments and stopped by [Main] (use Main in TestMain; without it the server still dies with
// the test binary on Linux).
//
// $REDIS_ADDR is read at every call, so a test may t.Setenv it. Tests using Shared must not
// Kill, Restart or freeze it, and should use [Name] for their keys; use [Start] for a server of
// their own. When no Redis is available, Shared skips (or, under CI, fails) every caller.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		if s, ok := shared.external.Load(addr); ok {
			return s.(*Server)
		}
		if err := waitPing(addr, startDeadline); err != nil {
			tb.Fatalf("redistest: $REDIS_ADDR: %v", err)
		}
		s, _ := shared.external.LoadOrStore(addr, &Server{Addr: addr})
		return s.(*Server)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = launch(nil)
	}
	if shared.err != nil {
		unavailableOrFatal(tb, shared.err)
	}
	return shared.srv
}

// stopShared stops the server started by Shared, if any, and forgets it.
func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.stop()
		shared.srv = nil
	}
	shared.err = nil
}

// Main is for TestMain: it runs m.Run(), stops the server started by [Shared] (if any), checks
// that no goroutine leaked (like goleak.VerifyTestMain: only when the tests passed, failing the
// binary when one did), and exits with the result.
//
// No goroutine is ignored: go-redis clients stop all their goroutines on Close, and this
// package stops its own. The container fallback runs testcontainers-go in processes of its
// own (see ./containers), so its long-lived goroutines are not in the test binary either.
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	removeHelper()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: goroutines leaked after a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
