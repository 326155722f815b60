package watchdog

import "testing"

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{
		"123456789":      12739,
		"foo":            12182,
		"{user1000}.a":   slot("user1000"),
		"a{}b":           slot("a{}b"),
		"redisson_x:{N}": slot("N"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}
