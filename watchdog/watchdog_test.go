package watchdog

import (
	"errors"
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
	w.Watch(lua.Renewal{Key: "k", Member: "f"}, time.Now().Add(100*time.Millisecond), false, lua.Acks{}, func(err error) { lost <- err })
	select {
	case err := <-lost:
		if err != ErrLeaseEnded {
			t.Fatalf("lost with %v, want ErrLeaseEnded", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a fixed lease of 100ms not reported lost after 3s (the loop slept until its first round, 10s)")
	}
}

// Holds finds the holds watched for a renewal; Lose ends one at once with the
// reason given (once: the deadline that follows reports nothing); a stopped
// hold is found no more; SetDeadline moves a deadline.
func TestHoldsLoseSetDeadline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used: fixed leases are not renewed
	defer rdb.Close()
	w := New(rdb, Options{Timeout: 30 * time.Second})
	defer w.Close()
	r := lua.Renewal{Kind: lua.RenewPermit, Key: "{s}:timeout", Member: "id1"}
	other := lua.Renewal{Kind: lua.RenewPermit, Key: "{s}:timeout", Member: "id2"}
	lost := make(chan error, 2)
	far := time.Now().Add(time.Hour)
	h := w.Watch(r, far, false, lua.Acks{}, func(err error) { lost <- err })
	h2 := w.Watch(other, far, false, lua.Acks{}, func(error) {})
	if got := w.Holds(r); len(got) != 1 || got[0] != h {
		t.Fatalf("Holds(r) = %v, want [h]", got)
	}

	soon, later := time.Now().Add(50*time.Millisecond), time.Now().Add(2*time.Hour)
	h2.SetDeadline(later)
	if d := h2.Deadline(); !d.Equal(later) {
		t.Fatalf("a fixed lease's deadline %v after SetDeadline(%v)", d, later)
	}
	renewed := w.Watch(lua.Renewal{Key: "{s}:timeout", Member: "id3"}, far, true, lua.Acks{}, func(error) {})
	renewed.SetDeadline(later)
	if d := renewed.Deadline(); !d.Equal(far) {
		t.Fatalf("a renewed hold's deadline moved back to %v", d)
	}
	renewed.SetDeadline(soon)
	if d := renewed.Deadline(); !d.Equal(soon) {
		t.Fatalf("a renewed hold's deadline %v after SetDeadline(%v)", d, soon)
	}
	renewed.Stop()

	released := errors.New("released here")
	h.Lose(released)
	if err := <-lost; err != released {
		t.Fatalf("lost with %v, want the reason given", err)
	}
	h.Lose(released)
	if len(w.Holds(r)) != 0 {
		t.Fatal("a lost hold is still found")
	}
	select {
	case err := <-lost:
		t.Fatalf("OnLost called twice: %v", err)
	default:
	}
	h2.Stop()
	if len(w.Holds(other)) != 0 {
		t.Fatal("a stopped hold is still found")
	}
}
