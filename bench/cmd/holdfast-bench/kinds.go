package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// fairSpreadLimit is the limit on holdfast-fair's acquisitions per
// goroutine max ÷ min.
const fairSpreadLimit = 1.2

// fairCases are the cases of the fair lock's spread target; spinCases those
// where SpinMutex is set against Mutex.
var (
	fairCases = []contendedCase{{Procs: 1, Goroutines: 32, CS: time.Millisecond}, {Procs: 4, Goroutines: 8, CS: time.Millisecond}}
	spinCases = []contendedCase{{Procs: 4, Goroutines: 4, CS: time.Millisecond}, {Procs: 4, Goroutines: 4}}
)

// kindTargets returns the targets on the other lock kinds, for the
// JSON summary and the kinds section: holdfast-fair's spread in each of
// fairCases.
func (r *results) kindTargets() []target {
	if !r.hasHoldfast() {
		return nil
	}
	var ts []target
	for _, c := range fairCases {
		name := fmt.Sprintf("holdfast-fair acquisitions per goroutine max ÷ min at %s", c)
		lim := fmt.Sprintf("≤ %.1f", fairSpreadLimit)
		rs := r.run(libs.HoldfastFair, c)
		if rs == nil {
			ts = append(ts, target{name, "n/a", lim, "n/a"})
			continue
		}
		v, ok := stats.SpreadRatio(rs.PerG)
		maxG, minG := rs.spread()
		ts = append(ts, target{name, fmt.Sprintf("%s (%d ÷ %d)", report.Spread(v, ok), maxG, minG), lim,
			yesNo(ok && v <= fairSpreadLimit)})
	}
	return ts
}

// kindCols returns the columns of the contended tables (those of a case
// of several processes) with the heads given, in that order.
func kindCols(heads ...string) []metricCol {
	all := contendedCols(contendedCase{Procs: 4}, 0)
	out := make([]metricCol, len(heads))
	for i, h := range heads {
		out[i] = all[slices.IndexFunc(all, func(c metricCol) bool { return c.head == h })]
	}
	return out
}

// kindTable renders, per case, a row for lib and for holdfast's Mutex and a
// row with lib ÷ Mutex of every column that has a value.
func kindTable(b *report.MD, r *results, lib string, cases []contendedCase, cols []metricCol) {
	b.P("| case | lock |")
	for _, c := range cols {
		b.P(" %s |", c.head)
	}
	b.P("\n|---|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, c := range cases {
		k, m := r.run(lib, c), r.run(libs.Holdfast, c)
		for _, row := range []struct {
			name string
			rs   *runStats
		}{{lib, k}, {libs.Holdfast + " (Mutex)", m}} {
			if row.rs == nil {
				b.P("| %s | %s | run failed: %s |\n", c, row.name, runErr(r, strings.TrimSuffix(row.name, " (Mutex)"), c))
				continue
			}
			b.P("| %s | %s |", c, row.name)
			for _, col := range cols {
				b.P(" %s |", col.cell(row.rs))
			}
			b.P("\n")
		}
		if k == nil || m == nil {
			continue
		}
		b.P("| %s | **%s ÷ Mutex** |", c, lib)
		for _, col := range cols {
			if col.value == nil {
				b.P(" |")
				continue
			}
			kv, ok1 := col.value(k)
			mv, ok2 := col.value(m)
			if !ok1 || !ok2 || kv <= 0 || mv <= 0 {
				b.P(" — |")
				continue
			}
			b.P(" %s |", report.Ratio(kv/mv))
		}
		b.P("\n")
	}
}

// ratioOf returns f(lib) ÷ f(Mutex) in case c as "0.53 (a ÷ b)", or "n/a".
func (r *results) ratioOf(lib string, c contendedCase, f func(*runStats) (time.Duration, bool)) string {
	k, m := r.run(lib, c), r.run(libs.Holdfast, c)
	if k == nil || m == nil {
		return "n/a"
	}
	kv, ok1 := f(k)
	mv, ok2 := f(m)
	if !ok1 || !ok2 || kv <= 0 || mv <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s (%s ÷ %s)", report.Ratio(float64(kv)/float64(mv)), report.Duration(kv), report.Duration(mv))
}

// renderKinds writes the section on the fair, read/write and spin locks.
func renderKinds(b *report.MD, r *results) {
	b.P("\n## Fair, read/write and spin locks\n\n")
	if !r.hasHoldfast() {
		b.P("holdfast was not part of this run.\n")
		return
	}
	b.P("Measurements of holdfast's other lock kinds, all from this run (terms as in *Definitions* below). " +
		"Each kind is set against holdfast's `Mutex` in the same case of the same run, never against another run.\n")

	// Fair lock.
	b.P("\n### FairMutex: acquisitions per goroutine and waiter wait\n\n")
	b.P("`holdfast-fair` (`Client.NewFairMutex(name)`) and `holdfast` (`Client.NewMutex(name)`) in the contended cases with 32 goroutines " +
		"and a 1 ms critical section, in one process (1 × 32) and over 4 processes (4 × 8). Each goroutine counts its acquisitions " +
		"whose `Lock` returned in the measured window; *max ÷ min* is the most over the fewest (∞ when a goroutine had none).\n\n")
	waitP99 := func(rs *runStats) (time.Duration, bool) { return rs.Wait.P(0.99), rs.Wait.N() > 0 }
	kindTable(b, r, libs.HoldfastFair, fairCases, kindCols("acq/s", "waiter wait p50", "waiter wait p99",
		"acq / goroutine max / min (max ÷ min)", "starved", "failed / pending Lock calls"))
	var met, measured []string
	allMet := true
	for i, t := range r.kindTargets() {
		measured = append(measured, fmt.Sprintf("%s at %s", t.Measured, fairCases[i]))
		met = append(met, t.Met)
		allMet = allMet && t.Met == "yes"
	}
	verdict := "**met**"
	switch {
	case strings.Contains(strings.Join(met, ","), "n/a"):
		verdict = "**not measured** (a run is missing)"
	case !allMet:
		verdict = "**not met**"
	}
	b.P("\n**Target**: holdfast-fair's acquisitions per goroutine max ÷ min ≤ %.1f at 1 × 32, 1 ms and at 4 × 8, 1 ms. "+
		"Measured: %s. Target %s.\n", fairSpreadLimit, strings.Join(measured, "; "), verdict)
	b.P("\nWaiter wait p99, holdfast-fair ÷ holdfast (Mutex) in the same case: %s at %s; %s at %s. "+
		"The issue asks for this comparison and sets no limit on it.\n",
		r.ratioOf(libs.HoldfastFair, fairCases[0], waitP99), fairCases[0], r.ratioOf(libs.HoldfastFair, fairCases[1], waitP99), fairCases[1])

	// Read lock.
	renderReadLock(b, r)

	// Spin lock.
	b.P("\n### SpinMutex against Mutex at 4 × 4\n\n")
	b.P("`holdfast-spin` (`Client.NewSpinMutex(name)`, default back-off) and `holdfast` (`Client.NewMutex(name)`) at 4 processes × 4 goroutines, " +
		"with a 1 ms and with no critical section.\n\n")
	kindTable(b, r, libs.HoldfastSpin, spinCases, kindCols("acq/s", "waiter wait p50", "waiter wait p99", "release → waiter p99",
		"acq / goroutine max / min (max ÷ min)", "round trips / acq", "server cmds / acq"))
	acq := func(rs *runStats) (float64, bool) { return rs.AcqPerSec, rs.Acq > 0 }
	var parts []string
	for _, c := range spinCases {
		parts = append(parts, fmt.Sprintf("at %s acq/s %s, waiter wait p99 %s", c,
			r.rateRatio(libs.HoldfastSpin, c, acq), r.ratioOf(libs.HoldfastSpin, c, waitP99)))
	}
	b.P("\nholdfast-spin ÷ holdfast (Mutex): %s. The issue asks for this comparison and sets no limit on it.\n", strings.Join(parts, "; "))
}

// rateRatio returns f(lib) ÷ f(Mutex) in case c for a rate, as
// "0.53 (a ÷ b)", or "n/a".
func (r *results) rateRatio(lib string, c contendedCase, f func(*runStats) (float64, bool)) string {
	k, m := r.run(lib, c), r.run(libs.Holdfast, c)
	if k == nil || m == nil {
		return "n/a"
	}
	kv, ok1 := f(k)
	mv, ok2 := f(m)
	if !ok1 || !ok2 || mv <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s (%.0f ÷ %.0f)", report.Ratio(kv/mv), kv, mv)
}

// renderReadLock writes the read-lock throughput table.
func renderReadLock(b *report.MD, r *results) {
	b.P("\n### RWMutex: read-lock throughput\n\n")
	if len(r.ReadLock) == 0 {
		b.P("Not run (`-readlock=false`).\n")
		return
	}
	win := r.Opts.Duration / readLockRounds
	b.P("Three rows, each run %d times in a worker process of its own (one `rlock.Client` shared by the row's goroutines), the rows in turn, "+
		"each run with a %s warm-up and a %s measured window. The goroutines loop `Lock` then `Lease.Unlock`, with no critical section, "+
		"every `Lock` a fresh owner (plain ctx):\n\n", readLockRounds, r.Opts.Warmup, win)
	b.P("- **%s**: `Client.NewRWMutex(name).ReadLock()`, the same name for all 8: the read holds are shared, so the goroutines never wait for each other's holds.\n", tpRead8)
	b.P("- **%s**: `Client.NewMutex(name)`: the uncontended Lock+Unlock cycle, back to back.\n", tpMutex1)
	b.P("- **%s**: `Client.NewMutex(name)`, each goroutine on a name of its own: 8 uncontended cycles in parallel, the Mutex counterpart of the first row.\n\n", tpMutex8x8)
	b.P("*acq/s*: acquisitions whose `Lock` returned in the windows ÷ their total length (%s); *cycle*: `Lock` call → `Unlock` return of those acquisitions; "+
		"round trips, server commands and scripts per acquisition as in the contended tables.\n\n", time.Duration(readLockRounds)*win)
	b.P("| row | acq/s | cycle p50 | cycle p99 | acq / goroutine max / min (max ÷ min) | round trips / acq | server cmds / acq | scripts / acq | failed Lock calls |\n")
	b.P("|---|---|---|---|---|---|---|---|---|\n")
	for _, ts := range r.ReadLock {
		if ts.Err != "" {
			b.P("| %s | run failed: %s |\n", ts.Case.Name, report.Cell(ts.Err))
			continue
		}
		maxG, minG := stats.Spread(ts.PerG)
		b.P("| %s | %.0f | %s | %s | %d / %d (%s) | %.2f | %.2f | %.2f | %d |\n", ts.Case.Name, ts.AcqPerSec,
			report.Duration(ts.Cycle.P(0.5)), report.Duration(ts.Cycle.P(0.99)), maxG, minG, report.Spread(stats.SpreadRatio(ts.PerG)),
			ts.RTPerAcq, ts.CmdPerAcq, ts.ScrPerAcq, ts.Failed)
	}
	var errs []string
	for _, ts := range r.ReadLock {
		for e, n := range ts.Errors {
			errs = append(errs, fmt.Sprintf("%s: %d × `%s`", ts.Case.Name, n, e))
		}
	}
	if len(errs) > 0 {
		b.P("\nErrors: %s\n", strings.Join(errs, "; "))
	}
	rd, m1, m8 := r.throughput(tpRead8), r.throughput(tpMutex1), r.throughput(tpMutex8x8)
	ratio := func(a, b *throughputStats) string {
		if a == nil || b == nil {
			return "n/a"
		}
		return fmt.Sprintf("%s (%.0f ÷ %.0f acq/s)", report.Ratio(a.AcqPerSec/b.AcqPerSec), a.AcqPerSec, b.AcqPerSec)
	}
	b.P("\nRead-lock acquisitions per second with 8 readers on one RWMutex ÷ Mutex cycles per second of 1 goroutine: %s; "+
		"÷ Mutex cycles per second of 8 goroutines on 8 names: %s.", ratio(rd, m1), ratio(rd, m8))
	if h := r.uncontended(libs.Holdfast); h != nil && h.Lat.P(0.5) > 0 {
		b.P(" For reference, 1 ÷ the uncontended cycle p50 of the table below (one goroutine in the coordinating process, interleaved with the other rows) is %.0f /s.",
			float64(time.Second)/float64(h.Lat.P(0.5)))
	}
	b.P(" The issue asks for this comparison and sets no limit on it.\n")
}
