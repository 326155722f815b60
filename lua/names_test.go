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

// TestSynchronizerNames pins the semaphore's, permit-expirable semaphore's and
// countdown latch's names to Redisson's (shared/redisson-protocol.md §0.4,
// §1.8–§1.10, §9): the prefix rule for the semaphore channel, the suffix rule
// for the permits' zset, braces always around the latch's name.
func TestSynchronizerNames(t *testing.T) {
	for _, tc := range []struct{ name, channel, permits, latch string }{
		{"N", "redisson_sc:{N}", "{N}:timeout", "redisson_countdownlatch__channel__{N}"},
		{"exports:eu", "redisson_sc:{exports:eu}", "{exports:eu}:timeout", "redisson_countdownlatch__channel__{exports:eu}"},
		{"{t}:jobs", "redisson_sc:{t}:jobs", "{t}:jobs:timeout", "redisson_countdownlatch__channel__{{t}:jobs}"},
	} {
		got := []string{SemaphoreChannel(tc.name), PermitTimeoutsName(tc.name), LatchChannel(tc.name)}
		want := []string{tc.channel, tc.permits, tc.latch}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: got %q, want %q", tc.name, got[i], want[i])
			}
		}
		// The semaphore's names share the name's slot, with or without a tag.
		for _, k := range got[:2] {
			if Slot(k) != Slot(tc.name) {
				t.Errorf("%q: %q is in slot %d, the name in %d", tc.name, k, Slot(k), Slot(tc.name))
			}
		}
	}
}

// TestFamilyChecks: each family's check accepts exactly the names whose keys
// and channels share the name's slot, matches ErrSlot otherwise, and suggests
// a name it accepts. The semaphores follow the lock's prefix and suffix rules
// and so refuse what CheckName refuses; the latch refuses every name with a
// '}', since its channel always wraps the name in braces (§1.10).
func TestFamilyChecks(t *testing.T) {
	checks := map[string]func(string) error{
		"lock": CheckName, "semaphore": CheckSemaphoreName,
		"expirable": CheckExpirableSemaphoreName, "latch": CheckLatchName,
	}
	derived := map[string]func(string) []string{
		"lock":      func(n string) []string { return []string{ChannelName(n), LatchName(n, "0")} },
		"semaphore": func(n string) []string { return []string{SemaphoreChannel(n)} },
		"expirable": func(n string) []string { return []string{SemaphoreChannel(n), PermitTimeoutsName(n)} },
		"latch":     func(n string) []string { return []string{LatchChannel(n)} },
	}
	for _, tc := range []struct {
		name             string
		lock, sem, latch bool // accepted by the lock and semaphore checks, by the latch's
	}{
		{"N", true, true, true},
		{"exports:eu", true, true, true},
		{"ünïcødé", true, true, true},
		{"{t}:jobs", true, true, false},
		{"a{b}c", true, true, false},
		{"acc:{}:empty", false, false, false},
		{"a}b", false, false, false},
		{"{}", false, false, false},
		{"", false, false, false},
		{"a{b", false, false, true}, // the latch channel's tag is "a{b", the name's whole text
	} {
		for fam, check := range checks {
			want := tc.sem
			switch fam {
			case "lock":
				want = tc.lock
			case "latch":
				want = tc.latch
			}
			err := check(tc.name)
			if (err == nil) != want {
				t.Errorf("%s check of %q = %v, want ok=%v", fam, tc.name, err, want)
				continue
			}
			same := true
			for _, k := range derived[fam](tc.name) {
				same = same && Slot(k) == Slot(tc.name)
			}
			if same != (err == nil) {
				t.Errorf("%s check of %q = %v, but its names share the slot: %v", fam, tc.name, err, same)
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrSlot) {
				t.Errorf("%s check of %q = %v, does not match ErrSlot", fam, tc.name, err)
			}
			s := err.Error()
			sugg := s[strings.LastIndex(s, "such as ")+len("such as "):]
			if i := strings.Index(sugg, ", or"); i >= 0 {
				sugg = sugg[:i]
			}
			if n, uerr := strconv.Unquote(sugg); uerr != nil || check(n) != nil {
				t.Errorf("%s check of %q suggests %s, which it refuses", fam, tc.name, sugg)
			}
		}
	}
}

// TestCheckNameMessage keeps the lock check's message, which docs/cli.md shows.
func TestCheckNameMessage(t *testing.T) {
	want := `its channel and unlock latches would hash to another cluster slot than the name ` +
		`(Redis hashes only the text inside the first {...} when it is not empty): ` +
		`use a name with a non-empty {tag}, such as "{ab}", or one without braces`
	if err := CheckName("a{b"); err == nil || err.Error() != want {
		t.Errorf("CheckName(%q) = %v, want %s", "a{b", err, want)
	}
	if err := CheckLatchName("{t}:done"); err == nil || !strings.Contains(err.Error(), `such as "t:done"`) {
		t.Errorf(`CheckLatchName("{t}:done") = %v, want the suggestion "t:done"`, err)
	}
}

// TestPermitChannel: a Permit's channel is its semaphore's (SemaphoreChannel).
func TestPermitChannel(t *testing.T) {
	for _, name := range []string{"sem", "{t}:sem", "a{b"} {
		if got, want := NewPermit(name).Channel(), SemaphoreChannel(name); got != want {
			t.Errorf("NewPermit(%q).Channel() = %q, want %q", name, got, want)
		}
	}
}
