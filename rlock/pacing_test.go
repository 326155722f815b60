package rlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPacing(t *testing.T) {
	const us = time.Microsecond
	// One step of a scenario: the operation, the delay it returns (heard and
	// published only), and the state after it.
	type step struct {
		op    string // heard, published, publishedAlone (no waiter), acquired, handedOff, attemptWon
		delay time.Duration
		seen  int
		alone bool // limit() > 0: the next hand-off only if enough other clients listen
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"heard releases shorten the delay", []step{
			{op: "heard", delay: 300 * us, seen: 1},
			{op: "heard", delay: 150 * us, seen: 2},
			{op: "heard", delay: 0, seen: 3},
			{op: "heard", delay: 0, seen: 4},
		}},
		{"the echo of an own release is not counted", []step{
			{op: "heard", delay: 300 * us, seen: 1},
			{op: "published", delay: echoWait + 450*us, seen: 1},
			{op: "heard", delay: 300 * us, seen: 1}, // the echo
			{op: "heard", delay: 150 * us, seen: 2},
		}},
		{"a release published without waiters has no echo to skip", []step{
			{op: "publishedAlone", delay: echoWait + 450*us, seen: 0},
			{op: "heard", delay: 300 * us, seen: 1},
		}},
		{"echoes are skipped one each", []step{
			{op: "published", delay: echoWait + 450*us},
			{op: "published", delay: echoWait + 450*us},
			{op: "heard", delay: 450 * us, seen: 0},
			{op: "heard", delay: 450 * us, seen: 0},
			{op: "heard", delay: 300 * us, seen: 1},
		}},
		{"acquired resets seen and echoes", []step{
			{op: "heard", delay: 300 * us, seen: 1},
			{op: "heard", delay: 150 * us, seen: 2},
			{op: "published", delay: echoWait + 450*us, seen: 2},
			{op: "acquired", seen: 0},
			{op: "heard", delay: 300 * us, seen: 1}, // no echo left to skip
		}},
		{"a limit after maxHandOffs hand-offs, reset by an attempt", []step{
			{op: "handedOff"},
			{op: "handedOff"},
			{op: "handedOff", alone: true},
			{op: "handedOff", alone: true},
			{op: "attemptWon"},
			{op: "handedOff"},
		}},
		{"the limit reset by a published release", []step{
			{op: "handedOff"},
			{op: "handedOff"},
			{op: "handedOff", alone: true},
			{op: "publishedAlone", delay: echoWait + 450*us},
			{op: "handedOff"},
		}},
		{"a hand-off's acquisition does not reset the streak", []step{
			{op: "acquired"},
			{op: "handedOff"},
			{op: "acquired"},
			{op: "handedOff"},
			{op: "acquired"},
			{op: "handedOff", alone: true},
			{op: "acquired", alone: true},
		}},
		{"heard does not touch the streak", []step{
			{op: "handedOff"},
			{op: "handedOff"},
			{op: "handedOff", alone: true},
			{op: "heard", delay: 300 * us, seen: 1, alone: true},
		}},
	}
	require.Equal(t, 3, maxHandOffs, "the scenarios assume 3")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p pacing
			for i, s := range tt.steps {
				var d time.Duration
				switch s.op {
				case "heard":
					d = p.heard()
				case "published":
					d = p.published(true)
				case "publishedAlone":
					d = p.published(false)
				case "acquired":
					p.acquired()
				case "handedOff":
					p.handedOff()
				case "attemptWon":
					p.attemptWon()
				default:
					t.Fatalf("unknown op %q", s.op)
				}
				require.Equal(t, s.delay, d, "step %d (%s): delay", i, s.op)
				require.Equal(t, s.seen, p.seen, "step %d (%s): seen", i, s.op)
				require.Equal(t, s.alone, p.limit() > 0, "step %d (%s): limit", i, s.op)
				if s.alone {
					require.Equal(t, p.streak, p.limit(), "step %d (%s): the limit sent is the streak", i, s.op)
				}
			}
		})
	}
}
