// Package monoclock reads the system-wide CLOCK_MONOTONIC, so that
// timestamps taken in different processes on one host can be compared.
//
// Go's time.Now carries a monotonic reading too, but it is relative to the
// process start and cannot be exchanged between processes.
package monoclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("monoclock: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// SleepUntil sleeps until CLOCK_MONOTONIC reaches t (nanoseconds).
func SleepUntil(t int64) {
	if d := t - Now(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}
