package rlock

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff gives the pauses of a SpinMutex waiter between its attempts
// (Redisson's LockOptions.BackOff).
type Backoff interface {
	// Delay returns the pause before attempt n+1, after n+1 failed attempts
	// (n counts from 0).
	Delay(n int) time.Duration
}

// ExponentialBackoff pauses Initial, then Multiplier times longer after each
// failed attempt, plus a random jitter of up to n ms, never longer than Max
// (Redisson's default: 1 ms, 128 ms, ×2).
type ExponentialBackoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier int
}

// DefaultBackoff is Redisson's default back-off of a spin lock.
var DefaultBackoff = ExponentialBackoff{Initial: time.Millisecond, Max: 128 * time.Millisecond, Multiplier: 2}

// Delay implements Backoff.
func (b ExponentialBackoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		if d > b.Max/time.Duration(b.Multiplier) {
			return b.Max // the next step would pass Max (or overflow)
		}
		d *= time.Duration(b.Multiplier)
	}
	if n > 0 {
		d += min(rand.N(time.Duration(n)*time.Millisecond), b.Max-min(d, b.Max))
	}
	return min(d, b.Max)
}

// ConstantBackoff pauses the same time between attempts (Redisson's
// ConstantBackOff; its default is 64 ms).
type ConstantBackoff time.Duration

// Delay implements Backoff.
func (b ConstantBackoff) Delay(int) time.Duration { return time.Duration(b) }

// checkBackoff returns why b cannot pace a spin lock, or nil.
func checkBackoff(b Backoff) error {
	switch b := b.(type) {
	case nil:
		return fmt.Errorf("%w: nil back-off", ErrInvalidArgument)
	case ExponentialBackoff:
		if b.Initial <= 0 || b.Max < b.Initial || b.Multiplier < 1 {
			return fmt.Errorf("%w: exponential back-off needs 0 < Initial <= Max and Multiplier >= 1, not %+v", ErrInvalidArgument, b)
		}
	case ConstantBackoff:
		if b <= 0 {
			return fmt.Errorf("%w: constant back-off %v is not positive", ErrInvalidArgument, time.Duration(b))
		}
	}
	return nil
}
