// Package report formats and writes what the benchmark commands report:
// durations, ratios, shares, per-goroutine spreads, the markdown tables of
// the machine a run happened on and of the libraries it ran, the header of
// a report, and the files (markdown, plots, JSON) in the output directory.
package report
