// Package report formats what the benchmark commands write into their
// markdown reports: durations, ratios, shares, per-goroutine spreads, and
// the tables of the machine a run happened on and of the libraries it ran.
package report
