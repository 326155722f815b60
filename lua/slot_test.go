package lua

import "testing"

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{
		"123456789":      12739,
		"foo":            12182,
		"{user1000}.a":   Slot("user1000"),
		"a{}b":           Slot("a{}b"),
		"redisson_x:{N}": Slot("N"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
