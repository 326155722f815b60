package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// ANSI escapes of the timeline, used only on a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiPurple = "\x1b[35m"
	ansiCyan   = "\x1b[36m"
)

// timeline prints the demo's events, one line each: the time since the start,
// who acted, and what happened. It is safe for concurrent use.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	color bool
	err   error // the first write error
}

// newTimeline returns a timeline writing to w that starts now.
func newTimeline(w io.Writer, color bool) *timeline {
	return &timeline{w: w, start: time.Now(), color: color}
}

// say prints one event: "+1.234s  who  what".
func (t *timeline) say(who, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	stamp := fmt.Sprintf("%+8.3fs", time.Since(t.start).Seconds())
	t.write(t.paint(ansiDim, stamp) + "  " + t.paint(whoColor(who), fmt.Sprintf("%-12s", who)) + " " + what + "\n")
}

// header prints a scene's title and the notes that say what to watch for.
func (t *timeline) header(title string, notes ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write("\n" + t.paint(ansiBold, title) + "\n")
	for _, n := range notes {
		t.write("   " + n + "\n")
	}
	t.write("\n")
}

// note prints a line of text without a time stamp.
func (t *timeline) note(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write(fmt.Sprintf(format, args...) + "\n")
}

// write writes s, keeping the first error. t.mu must be held.
func (t *timeline) write(s string) {
	if _, err := io.WriteString(t.w, s); err != nil && t.err == nil {
		t.err = err
	}
}

// failed returns the first write error.
func (t *timeline) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// paint wraps s in the escape code when colours are on.
func (t *timeline) paint(code, s string) string {
	if !t.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// whoColor is the colour of an actor: one per client, and one each for
// outsiders and loss reports.
func whoColor(who string) string {
	switch {
	case strings.Contains(who, "OnLost"):
		return ansiRed
	case strings.HasPrefix(who, "A/"):
		return ansiCyan
	case strings.HasPrefix(who, "B/"):
		return ansiPurple
	}
	return ansiYellow
}

// stats are the demo's counts and measures, for the summary. Safe for
// concurrent use.
type stats struct {
	mu       sync.Mutex
	holds    int             // acquisitions, re-entries included
	waits    []time.Duration // acquisitions of a busy lock: from the first attempt to the hold
	passes   []time.Duration // from a release to the next holder's acquisition
	inside   int             // passes between two owners of one client
	across   int             // passes from one client to the other
	renewals int             // watchdog renewals seen (PTTL going back up)
	lost     int             // OnLost calls
}

// held records an acquisition after waiting wait (0: the lock was free).
func (s *stats) held(wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds++
	if wait > 0 {
		s.waits = append(s.waits, wait)
	}
}

// passed records a lock passing from a release to a waiter after latency.
func (s *stats) passed(latency time.Duration, sameClient bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passes = append(s.passes, latency)
	if sameClient {
		s.inside++
	} else {
		s.across++
	}
}

// add runs f on the stats under their lock.
func (s *stats) add(f func(s *stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// percentile returns the p-th percentile (nearest rank) of ds, 0 if empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// ms formats d for the timeline: "0.42 ms", "3.1 ms", "85 ms", "2.50 s".
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", f)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", f)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", f)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
