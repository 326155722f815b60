// Package stats computes the percentiles and summaries the benchmark reports.
package stats

import (
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
