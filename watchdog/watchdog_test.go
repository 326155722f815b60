package watchdog

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// A hold watched right after New, before the loop's goroutine has run, is
// still reported at its deadline (not at the first renewal round, Interval later).
func TestWatchRightAfterNewReportsAtDeadline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used: a fixed lease is not renewed
	defer rdb.Close()
	w := New(rdb, Options{Timeout: 30 * time.Second})
	defer w.Close()
	lost := make(chan error, 1)
	w.Watch(lua.Renewal{Key: "k", Member: "f"}, time.Now().Add(100*time.Millisecond), false, func(err error) { lost <- err })
	select {
	case err := <-lost:
		if err != ErrLeaseEnded {
			t.Fatalf("lost with %v, want ErrLeaseEnded", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a fixed lease of 100ms not reported lost after 3s (the loop slept until its first round, 10s)")
	}
}
