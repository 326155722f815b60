package rlock

import (
	"testing"

	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/stretchr/testify/require"
)

// A semaphore message wakes as many waiters as the permits it announces
// (Redisson's rule since 3.15.6), none for a count of 0 or below, one to look
// for a payload that is not a number.
func TestSemaphoreWake(t *testing.T) {
	for payload, want := range map[string]int{
		"0": 0, "-3": 0, "1": 1, "4": 4, "oops": 1, "": 1,
		"9223372036854775807": pubsub.All,
	} {
		require.Equal(t, want, semaphoreWake(payload), "payload %q", payload)
	}
}

// A latch message wakes every awaiter, and each awaiter counts what it hears:
// "0" opened, "1" reset or deleted; others only wake.
func TestLatchNewsWake(t *testing.T) {
	var n latchNews
	seen := n.snapshot()
	for _, payload := range []string{"1", "0", "7"} {
		require.Equal(t, pubsub.All, latchWake(payload))
		n.count(payload)
	}
	now := n.snapshot()
	require.Equal(t, seen.opened+1, now.opened)
	require.Equal(t, seen.reset+1, now.reset)
}
