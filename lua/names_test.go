package lua

import "testing"

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
