// Package stats computes the percentiles and summaries the benchmark reports.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the
// nearest-rank method, or 0 when sorted is empty.
func Percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// Dist is a sorted sample of durations in nanoseconds.
type Dist []int64

// NewDist sorts samples (in place) and returns them as a Dist.
func NewDist(samples []int64) Dist {
	slices.Sort(samples)
	return Dist(samples)
}

// N returns the sample size.
func (d Dist) N() int { return len(d) }

// P returns the q-quantile as a time.Duration.
func (d Dist) P(q float64) time.Duration { return time.Duration(Percentile(d, q)) }

// Max returns the largest sample, or 0 for an empty Dist.
func (d Dist) Max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return time.Duration(d[len(d)-1])
}

// Concat returns the samples of d and e together as a Dist. It may reuse
// d's storage.
func Concat(d, e Dist) Dist { return NewDist(append(d, e...)) }

// Summary is a Dist in a few numbers, for JSON.
type Summary struct {
	N             int
	P50, P99, Max time.Duration
}

// Summary returns d's size, median, 99th percentile and largest sample.
func (d Dist) Summary() Summary { return Summary{d.N(), d.P(0.5), d.P(0.99), d.Max()} }

// Spread returns the largest and smallest of per-goroutine counts (0, 0
// for none).
func Spread(perG []int) (maxG, minG int) {
	if len(perG) == 0 {
		return 0, 0
	}
	minG = perG[0]
	for _, n := range perG {
		maxG, minG = max(maxG, n), min(minG, n)
	}
	return maxG, minG
}

// SpreadRatio returns max ÷ min of per-goroutine counts, +Inf when a
// goroutine had none (and others had some), and false when none had any.
func SpreadRatio(perG []int) (float64, bool) {
	maxG, minG := Spread(perG)
	switch {
	case maxG == 0:
		return 0, false
	case minG == 0:
		return math.Inf(1), true
	}
	return float64(maxG) / float64(minG), true
}

// Starved returns how many per-goroutine counts are 0.
func Starved(perG []int) int {
	n := 0
	for _, c := range perG {
		if c == 0 {
			n++
		}
	}
	return n
}
