package harness

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
)

// TimedRun is how many ops of one Op the commands have TimeInterleaved time
// in a row (loss-bench: 1, op by op).
const TimedRun = 20

// Op is one operation timed on its own: a library's uncontended cycle, or a
// PING.
type Op struct {
	// Name names the op in errors (and the commands' tables).
	Name string
	// Run runs the op once.
	Run func(ctx context.Context) error
}

// Cycle returns the op that takes a hold with acquire and gives it back at
// once.
func Cycle(acquire Acquire) func(context.Context) error {
	return func(ctx context.Context) error {
		release, err := acquire(ctx)
		if err != nil {
			return err
		}
		return release(ctx)
	}
}

// Repeat runs op n times, stopping at the first error.
func (op Op) Repeat(ctx context.Context, n int) error {
	for range n {
		if err := op.Run(ctx); err != nil {
			return fmt.Errorf("%s: %w", op.Name, err)
		}
	}
	return nil
}

// TimeInterleaved times rounds × cycles runs of each op and returns each
// op's times (CLOCK_MONOTONIC ns, round after round), lat[i] for ops[i]. It
// runs short runs of run ops, every op in turn with the order rotating from
// turn to turn, and pauses 1 ms between rounds: so drift of the machine
// (frequency, neighbours) hits every op alike while each run stays warm
// (same connection, same code path).
func TimeInterleaved(ctx context.Context, ops []Op, rounds, cycles, run int) (lat [][]int64, err error) {
	lat = make([][]int64, len(ops))
	turn := 0
	for range rounds {
		for c := 0; c < cycles; c += run {
			for i := range ops {
				k := (i + turn) % len(ops)
				for range min(run, cycles-c) {
					t0 := monoclock.Now()
					if err := ops[k].Run(ctx); err != nil {
						return nil, fmt.Errorf("%s: %w", ops[k].Name, err)
					}
					lat[k] = append(lat[k], monoclock.Now()-t0)
				}
			}
			turn++
		}
		time.Sleep(time.Millisecond)
	}
	return lat, nil
}

// Closers closes what a run opened.
type Closers []func() error

// Add adds what closes one thing.
func (c *Closers) Add(close func() error) { *c = append(*c, close) }

// Close closes everything added, the last added first, and ignores the
// errors.
func (c *Closers) Close() {
	for _, f := range slices.Backward(*c) {
		_ = f()
	}
}

// Matrix runs run for every case with every library, each case starting
// with another library (see Rotate), and returns the results in that
// order.
func Matrix[C, L, R any](cases []C, ls []L, run func(C, L) R) []R {
	var out []R
	for i, c := range cases {
		for _, l := range Rotate(ls, i) {
			out = append(out, run(c, l))
		}
	}
	return out
}

// Rotate returns a copy of s rotated left by k, so that each case or round
// starts with another library.
func Rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return nil
	}
	k %= len(s)
	return append(append([]T{}, s[k:]...), s[:k]...)
}
