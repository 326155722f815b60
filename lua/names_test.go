package lua

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct{ name, channel, latch string }{
		{"orders:42", "redisson_lock__channel:{orders:42}", "redisson_unlock_latch:{orders:42}:ab"},
		{"{user1}:lock", "redisson_lock__channel:{user1}:lock", "redisson_unlock_latch:{user1}:lock:ab"},
		{"", "redisson_lock__channel:{}", "redisson_unlock_latch:{}:ab"},
	} {
		if got := ChannelName(tc.name); got != tc.channel {
			t.Errorf("ChannelName(%q) = %q, want %q", tc.name, got, tc.channel)
		}
		if got := LatchName(tc.name, "ab"); got != tc.latch {
			t.Errorf("LatchName(%q) = %q, want %q", tc.name, got, tc.latch)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"orders:42":        true,
		"{user1}:lock":     true,
		"a{b}c":            true,
		"a{b}c}":           true,
		"acc:{}:empty":     false,
		"a}b":              false,
		"a{b":              false,
		"{}":               false,
		"x{}{tag}":         false,
		"lock:{\"id\":1}":  true,
		"ünïcødé:{tag}:ok": true,
	} {
		err := CheckName(name)
		if (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrSlot) {
			t.Errorf("CheckName(%q) = %v, does not match ErrSlot", name, err)
		}
		// The suggested name is accepted.
		s := err.Error()
		sugg := s[strings.LastIndex(s, "such as ")+len("such as "):]
		sugg = sugg[:strings.Index(sugg, ", or")]
		if n, uerr := strconv.Unquote(sugg); uerr != nil || CheckName(n) != nil {
			t.Errorf("CheckName(%q) suggests %s, which is not a valid name", name, sugg)
		}
	}
}

// TestLayoutNames pins the fair and read/write locks' keys and channels to
// Redisson's (shared/redisson-protocol.md §0.4), with and without a hash tag,
// and checks that each shares the name's cluster slot.
func TestLayoutNames(t *testing.T) {
	for _, tc := range []struct{ name, queue, timeouts, waiter, rw, readTimeout string }{
		{"jobs", "redisson_lock_queue:{jobs}", "redisson_lock_timeout:{jobs}",
			"redisson_lock__channel:{jobs}:u:1", "redisson_rwlock:{jobs}", "{jobs}:u:1:rwlock_timeout:2"},
		{"{t}:jobs", "redisson_lock_queue:{t}:jobs", "redisson_lock_timeout:{t}:jobs",
			"redisson_lock__channel:{t}:jobs:u:1", "redisson_rwlock:{t}:jobs", "{t}:jobs:u:1:rwlock_timeout:2"},
	} {
		got := []string{QueueName(tc.name), TimeoutsName(tc.name), WaiterChannel(tc.name, "u:1"),
			RWChannelName(tc.name), ReadTimeoutName(tc.name, "u:1", 2)}
		want := []string{tc.queue, tc.timeouts, tc.waiter, tc.rw, tc.readTimeout}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: got %q, want %q", tc.name, got[i], want[i])
			}
			if Slot(got[i]) != Slot(tc.name) {
				t.Errorf("%q: %q is in slot %d, the name in %d", tc.name, got[i], Slot(got[i]), Slot(tc.name))
			}
		}
	}
}
