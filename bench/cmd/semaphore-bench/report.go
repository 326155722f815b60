package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/link"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// results is everything one run measured.
type results struct {
	Started     time.Time
	Elapsed     time.Duration
	Opts        options
	Libs        []sems.Library
	Env         report.Facts
	Link        link.Info
	Uncontended []*uncRow
	// Contended: the rounds without MONITOR, merged per library;
	// Monitored: the MONITOR round.
	Contended, Monitored map[string]*runStats
}

func (r *results) row(name string) *uncRow {
	for _, u := range r.Uncontended {
		if u.Name == name {
			return u
		}
	}
	return nil
}

// pingP50 is the uncontended PING p50 of this run: the round trip every
// ratio divides by.
func (r *results) pingP50() time.Duration {
	if p := r.row(rowPing); p != nil {
		return p.Lat.P(0.5)
	}
	return 0
}

// cv is the coefficient of variation of per-goroutine acquisitions.
func cv(perG []int) string {
	if len(perG) == 0 {
		return "—"
	}
	var sum, sq float64
	for _, n := range perG {
		sum += float64(n)
	}
	mean := sum / float64(len(perG))
	if mean == 0 {
		return "—"
	}
	for _, n := range perG {
		sq += (float64(n) - mean) * (float64(n) - mean)
	}
	return fmt.Sprintf("%.3f", math.Sqrt(sq/float64(len(perG)))/mean)
}

func (rs *runStats) acqPerSec() float64 {
	if rs.Window == 0 {
		return 0
	}
	return float64(rs.Acq) / (float64(rs.Window) / 1e9)
}

func (rs *runStats) perAcq(v int64) float64 { return float64(v) / float64(max(rs.Acq, 1)) }

// idleShare is the summed idle time of the counted permits over the
// permit-time of the windows.
func (rs *runStats) idleShare(permits int) string {
	if rs.Window == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f %%", 100*float64(rs.IdleSum)/(float64(permits)*float64(rs.Window)))
}

// renderTables returns the tables alone (printed on stdout).
func renderTables(r *results) string {
	var b report.MD
	renderUncontended(&b, r)
	if len(r.Contended) == 0 {
		return b.String()
	}
	o := r.Opts
	b.P("\n## Contended: %d permits, %d processes × %d goroutines, hold %s (%d rounds of %s merged)\n\n",
		o.permits, o.procs, o.goroutines, report.Duration(o.hold), o.contendedRounds, o.Duration)
	renderWaits(&b, r)
	renderIdle(&b, r)
	renderCost(&b, r)
	if len(r.Monitored) > 0 {
		renderMonitored(&b, r)
	}
	renderTargets(&b, r)
	return b.String()
}

// eachRun calls row with every library's statistics in runs, in the order
// of r.Libs. A library whose run failed (or did not run) gets a "run failed"
// row in b if failedRows is set, and is left out otherwise.
func (r *results) eachRun(b *report.MD, runs map[string]*runStats, failedRows bool, row func(name string, rs *runStats)) {
	for _, l := range r.Libs {
		rs := runs[l.Name]
		if rs != nil && rs.Err == "" {
			row(l.Name, rs)
		} else if failedRows {
			b.P("| %s | run failed: %s |\n", l.Name, errOf(rs))
		}
	}
}

// renderUncontended writes the uncontended table.
func renderUncontended(b *report.MD, r *results) {
	b.P("\n## Uncontended: one goroutine, a free permit (or lock)\n\n")
	b.P("| row | p50 | p99 | p50 ÷ PING p50 | p99 ÷ PING p99 | p50 ÷ Mutex p50 | round trips / op | server cmds / op (scripts) | allocs / op |\n")
	b.P("|---|---|---|---|---|---|---|---|---|\n")
	ping, mutex := r.row(rowPing), r.row(rowMutex)
	for _, u := range r.Uncontended {
		toMutex := "—"
		if mutex != nil {
			toMutex = report.DurationRatio(u.Lat.P(0.5), mutex.Lat.P(0.5))
		}
		b.P("| %s | %s | %s | %s | %s | %s | %.2f | %.2f (%.2f) | %.1f |\n", u.Name, report.Duration(u.Lat.P(0.5)), report.Duration(u.Lat.P(0.99)),
			report.DurationRatio(u.Lat.P(0.5), ping.Lat.P(0.5)), report.DurationRatio(u.Lat.P(0.99), ping.Lat.P(0.99)), toMutex, u.RT, u.Cmds, u.Scr, u.Alloc)
	}
}

// renderWaits writes the contended table of waits and starvation.
func renderWaits(b *report.MD, r *results) {
	b.P("Waits and starvation:\n\n")
	b.P("| semaphore | acq/s | Acquire wait p50 | Acquire wait p99 | max wait | Acquire calls | acq / goroutine max / min (max ÷ min) | CV of acq / goroutine | starved goroutines | failed / pending calls |\n")
	b.P("|---|---|---|---|---|---|---|---|---|---|\n")
	r.eachRun(b, r.Contended, true, func(name string, rs *runStats) {
		maxG, minG := stats.Spread(rs.PerG)
		b.P("| %s | %.0f | %s | %s | %s | %d | %d / %d (%s) | %s | %d | %d / %d |\n", name, rs.acqPerSec(),
			report.Duration(rs.Wait.P(0.5)), report.Duration(rs.Wait.P(0.99)), report.Duration(rs.Wait.Max()), rs.Calls,
			maxG, minG, report.Spread(stats.SpreadRatio(rs.PerG)), cv(rs.PerG), rs.Starved, rs.Failed, rs.Pending)
	})
}

// renderIdle writes the contended table of idle permits on the client time
// line.
func renderIdle(b *report.MD, r *results) {
	pp := r.pingP50()
	b.P("\nIdle permits while someone waits (client time line, see *Method*), against one round trip (uncontended PING p50 of this run: %s) "+
		"and against the PING probe's round trip during the same runs:\n\n", report.Duration(pp))
	b.P("| semaphore | releases with a blocked waiter / releases | idle per freed permit p50 | p99 | max | idle p99 ÷ PING p50 | loaded PING p50 / p99 | idle p99 ÷ loaded PING p50 | idle permit-time ÷ all permit-time | taken back by the releasing goroutine | taken before release returned (0) / still free at end |\n")
	b.P("|---|---|---|---|---|---|---|---|---|---|---|\n")
	r.eachRun(b, r.Contended, false, func(name string, rs *runStats) {
		b.P("| %s | %d / %d | %s | %s | %s | %s | %s / %s | %s | %s | %s | %d / %d |\n", name, rs.Contested, rs.Releases,
			report.Duration(rs.Idle.P(0.5)), report.Duration(rs.Idle.P(0.99)), report.Duration(rs.Idle.Max()), report.DurationRatio(rs.Idle.P(0.99), pp),
			report.Duration(rs.Pings.P(0.5)), report.Duration(rs.Pings.P(0.99)), report.DurationRatio(rs.Idle.P(0.99), rs.Pings.P(0.5)),
			rs.idleShare(r.Opts.permits), report.Percent(rs.BackToReleaser, rs.Contested), rs.IdleSkew, rs.IdleCensored)
	})
}

// renderCost writes the contended table of costs and checks.
func renderCost(b *report.MD, r *results) {
	b.P("\nCost and checks:\n\n")
	b.P("| semaphore | client round trips / acq | server cmds / acq | scripts / acq | hold as it came out p50 / p99 | Release call p50 / p99 | most holders at once (limit %d) | acquisitions beyond the limit | free permits after each run (should be %d) | errors |\n", r.Opts.permits, r.Opts.permits)
	b.P("|---|---|---|---|---|---|---|---|---|---|\n")
	r.eachRun(b, r.Contended, false, func(name string, rs *runStats) {
		var errs []string
		for e, n := range rs.Errors {
			errs = append(errs, fmt.Sprintf("%d × `%s`", n, report.Cell(e)))
		}
		if len(errs) == 0 {
			errs = []string{"none"}
		}
		var ends []string
		for _, a := range rs.EndAvailable {
			ends = append(ends, strconv.FormatInt(a, 10))
		}
		b.P("| %s | %.2f | %.2f | %.2f | %s / %s | %s / %s | %d | %d | %s | %s |\n", name, rs.perAcq(rs.RT), rs.perAcq(rs.Cmds), rs.perAcq(rs.Scripts),
			report.Duration(rs.Hold.P(0.5)), report.Duration(rs.Hold.P(0.99)), report.Duration(rs.ReleaseRT.P(0.5)), report.Duration(rs.ReleaseRT.P(0.99)),
			rs.MaxHolders, rs.OverLimit, strings.Join(ends, ", "), strings.Join(errs, "; "))
	})
}

// renderMonitored writes the table of the MONITOR round.
func renderMonitored(b *report.MD, r *results) {
	pp := r.pingP50()
	b.P("\nCross-check under MONITOR (one more round per library; the feed slows the server, so compare within this table only): " +
		"idle per freed permit on the server's time line (INCRBY → DECRBY of the semaphore's counter) and on the client time line of the same round:\n\n")
	b.P("| semaphore | acq/s | releases with a blocked waiter | server idle p50 | p99 | max | server idle p99 ÷ PING p50 | client-line idle p50 / p99 in this round |\n")
	b.P("|---|---|---|---|---|---|---|---|\n")
	r.eachRun(b, r.Monitored, true, func(name string, rs *runStats) {
		b.P("| %s | %.0f | %d | %s | %s | %s | %s | %s / %s |\n", name, rs.acqPerSec(), rs.SrvContested,
			report.Duration(rs.SrvIdle.P(0.5)), report.Duration(rs.SrvIdle.P(0.99)), report.Duration(rs.SrvIdle.Max()), report.DurationRatio(rs.SrvIdle.P(0.99), pp),
			report.Duration(rs.Idle.P(0.5)), report.Duration(rs.Idle.P(0.99)))
	})
}

// renderTargets writes the idle target's table, if a holdfast semaphore ran.
func renderTargets(b *report.MD, r *results) {
	ts := r.targets()
	if len(ts) == 0 {
		return
	}
	b.P("\nTarget: no permit idle longer than one round trip (PING p50 of this run) at p99 while someone waits.\n\n")
	b.P("| semaphore | idle p99, client time line | idle p99, server time line (MONITOR round) | limit | met |\n|---|---|---|---|---|\n")
	for _, t := range ts {
		b.P("| %s | %s | %s | %s | %s |\n", t.Lib, t.Client, t.Server, t.Limit, t.Met)
	}
}

func errOf(rs *runStats) string {
	if rs == nil {
		return "not run"
	}
	return report.Cell(rs.Err)
}

// target is the idle target of one holdfast semaphore.
type target struct {
	Lib, Client, Server, Limit, Met string
}

func (r *results) targets() []target {
	pp := r.pingP50()
	var ts []target
	for _, l := range r.Libs {
		if !sems.IsHoldfast(l.Name) {
			continue
		}
		t := target{Lib: l.Name, Client: "n/a", Server: "n/a", Limit: "≤ " + report.Duration(pp), Met: "n/a"}
		met := []bool{}
		if rs := r.Contended[l.Name]; rs != nil && rs.Err == "" && rs.Idle.N() > 0 {
			t.Client = fmt.Sprintf("%s (%s RT)", report.Duration(rs.Idle.P(0.99)), report.DurationRatio(rs.Idle.P(0.99), pp))
			met = append(met, rs.Idle.P(0.99) <= pp)
		}
		if rs := r.Monitored[l.Name]; rs != nil && rs.Err == "" && rs.SrvIdle.N() > 0 {
			t.Server = fmt.Sprintf("%s (%s RT)", report.Duration(rs.SrvIdle.P(0.99)), report.DurationRatio(rs.SrvIdle.P(0.99), pp))
			met = append(met, rs.SrvIdle.P(0.99) <= pp)
		}
		if len(met) > 0 {
			t.Met = "yes"
			for _, m := range met {
				if !m {
					t.Met = "**no**"
				}
			}
		}
		ts = append(ts, t)
	}
	return ts
}

func renderMarkdown(r *results) string {
	var b report.MD
	o := r.Opts
	b.WriteString(report.Header("Semaphore benchmarks", "`bench/cmd/semaphore-bench` (`make bench-semaphore`, part of `make bench`)",
		r.Started, r.Elapsed, o.Quick))
	b.P("\n%s.\n", r.Link.Line())
	b.P("\nThe machine is small (2 cores) and shared by the redis-server, the worker processes and the coordinator: absolute numbers drift " +
		"from run to run, so compare within this report, where every figure comes from the same run and the libraries are interleaved. " +
		"Other work on the machine shows in the load average at start (*Machine*).\n")
	b.WriteString(renderTables(r))

	b.WriteString(r.Env.Table())
	b.WriteString(report.Libraries("Semaphores and settings", "semaphore", r.Libs))

	b.P("\n## Method\n\n")
	b.P("- **Uncontended**: one goroutine in the coordinating process; a row's op is one PING, one `Mutex.Lock`+`Lease.Unlock` on a free lock, "+
		"or one `Acquire(1)` (or one-attempt `TryAcquire(1)`) plus its release on a semaphore of 4 permits that nobody else uses, "+
		"timed from the call to the release's return. %d rounds × %d ops per row after a warm-up of %d ops per row, interleaved in runs of %d ops "+
		"(every row in turn, the order rotating) so that machine drift hits all rows alike. Then, per row, a separate batch of %d ops alone, "+
		"untimed: *round trips* = commands plus pipelines through the row's go-redis client (a hook); *server cmds* = the change of `calls` summed "+
		"over `INFO commandstats` (the probe's `INFO` left out; commands a script runs count too, so one `EVALSHA` running two commands counts 3); "+
		"*allocs* = the change of `runtime.MemStats.Mallocs` of the whole process.\n",
		o.Rounds, o.Cycles, min(o.Cycles, 50), harness.TimedRun, o.Cycles)
	b.P("- **Contended**: a semaphore of %d permits created before the run (`TrySetPermits`, or `SET` for the peers); %d worker processes "+
		"(the binary re-executes itself), each with one client shared by %d goroutines, each goroutine looping `Acquire(1)` (deadline %s), "+
		"`time.Sleep(%s)`, release. A run has a %s warm-up and a %s measured window; at the window's end the pending `Acquire` calls are "+
		"cancelled. The libraries run in turn, %d rounds in rotating order, merged; then one more round each under MONITOR (below).\n",
		o.permits, o.procs, o.goroutines, o.Timeout, report.Duration(o.hold), o.Warmup, o.Duration, o.contendedRounds)
	b.P("- **Timestamps**: every worker reads `CLOCK_MONOTONIC` (`clock_gettime`), one clock for all processes on the host, " +
		"at `Acquire` call (t0) and return (t1) and at release call (t2) and return (t3).\n")
	b.P("- **Acquire wait** (the waiter wait): t1 − t0 of every `Acquire` call that returned in the window or was still pending at its end "+
		"(counted until the end). With %d goroutines on %d permits every call competes with at least %d others, so every call is a waiter; "+
		"a call that gets a permit at once (one that was free, or that it took before the woken waiters) counts with its one round trip. "+
		"*max wait* is the longest (the starvation bound).\n", o.procs*o.goroutines, o.permits, o.procs*o.goroutines-o.permits)
	b.P("- **Idle permits while someone waits** (client time line). A permit counts as taken when its `Acquire` returns (t1) and as free again " +
		"when its release returns (t3). Taking *returns* on both sides cancels the reply legs: each return is one reply after the server applied " +
		"the command, so t1(next) − t3(release) ≈ the server's gap between applying the release and applying the next acquire, plus the " +
		"difference of the two replies' delays (scheduling on this 2-core machine: it can go either way). Frees and takes are paired first in, " +
		"first out (a take uses the permit free longest; the initial permits first). A freed permit is *measured* when its release returned in the " +
		"window while at least one `Acquire` call begun before that release was called was still pending after it returned (a blocked waiter); " +
		"its idle time is until the take it pairs with, cut at the window's end (*still free at end*). A take that comes before the release it pairs " +
		"with has returned (the waiter's reply read before the releaser's) pairs with that release as idle 0 (*taken before release returned*). " +
		"*idle permit-time ÷ all permit-time* = the measured idle times summed ÷ (permits × window). *Taken back by the releasing goroutine*: " +
		"the measured permits whose paired take was the releasing goroutine's own next `Acquire` (it beat the waiters: barging).\n")
	b.P("- **Idle, server time line** (MONITOR round): every semaphore here keeps its free permits in one string key that only `INCRBY` (release, " +
		"reclaim) and `DECRBY` (acquire) change, also inside scripts (Redisson's layout, and the peers' by design). A `MONITOR` feed read by the " +
		"coordinator gives each of those on the key with the server's clock, taken as the command is fed to monitors right after it ran " +
		"(CLOCK_REALTIME, µs; moved to CLOCK_MONOTONIC by an offset read in the coordinator), in the server's order, so the free-permit time line " +
		"is exact. The same first-in, first-out pairing gives each released permit's idle time; it is measured when an `Acquire` call was pending " +
		"(t0 < release < t1) at the release. MONITOR costs the server time per command (more for the peers, which send more), so that round's " +
		"throughput is lower; it checks the client time line method, it does not replace it.\n")
	b.P("- **Round trip**: the uncontended PING p50 of this run (go-redis client with default options, as every library here). *Loaded PING*: "+
		"the coordinator PINGs every %s on a connection of its own during each contended window (the same for every library).\n", pingProbeEvery)
	b.P("- **Starvation**: *max wait* above; acquisitions per goroutine (whose `Acquire` returned in a window, summed over the rounds): max, min, " +
		"max ÷ min (∞ when a goroutine had none), coefficient of variation; *starved* = goroutine-runs without an acquisition.\n")
	b.P("- **Cost**: client round trips through the library's go-redis client (a hook; pub/sub commands are not counted there), server commands " +
		"and scripts from `INFO commandstats` over the windows, both ÷ acquisitions; background work (watchdog renewals) in the window is included.\n")
	b.P("- **Hold as it came out**: t2 − t1, the fixed `time.Sleep` as the loaded machine delivered it; **Release call**: t3 − t2. "+
		"A permit's cycle is hold + release + idle, so with %d permits the throughput is at most %d ÷ (hold + release + idle).\n", o.permits, o.permits)
	b.P("- **Checks**: *most holders at once* over the intervals t1 → t2 (inside the server's hold, so above the limit is a real excess); "+
		"*free permits after each run*: what Redis holds 100 ms after the workers exited (their pending calls were cancelled): anything but "+
		"%d means a cancelled or failed call left a permit taken (or gave one too many).\n", o.permits)
	b.P("\n## Reproduce\n\n```sh\nmake bench-semaphore          # this report in bench/out/semaphore.md\n" +
		"cd bench && go run ./cmd/semaphore-bench -quick -out /tmp/sb\n" +
		"cd integration && go test -run '^$' -bench 'Semaphore' -benchtime 2000x .   # the Go benchmarks of the uncontended cycle\n```\n")
	return b.String()
}

// summary is the JSON form of the results.
func (r *results) summary() any {
	type unc struct {
		Name                 string
		Latency              stats.Summary
		RoundTrips, Commands float64
		Scripts, Allocs      float64
	}
	type con struct {
		*runStats
		Wait, Idle, ServerIdle, LoadedPing stats.Summary
	}
	conOf := func(rs *runStats) con {
		return con{rs, rs.Wait.Summary(), rs.Idle.Summary(), rs.SrvIdle.Summary(), rs.Pings.Summary()}
	}
	out := struct {
		Started     time.Time
		Elapsed     time.Duration
		PingP50     time.Duration
		Link        link.Info
		Uncontended []unc
		Contended   []con
		Monitored   []con
		Targets     []target
	}{Started: r.Started, Elapsed: r.Elapsed, PingP50: r.pingP50(), Link: r.Link, Targets: r.targets()}
	for _, u := range r.Uncontended {
		out.Uncontended = append(out.Uncontended, unc{u.Name, u.Lat.Summary(), u.RT, u.Cmds, u.Scr, u.Alloc})
	}
	for _, l := range r.Libs {
		if rs := r.Contended[l.Name]; rs != nil {
			out.Contended = append(out.Contended, conOf(rs))
		}
		if rs := r.Monitored[l.Name]; rs != nil {
			out.Monitored = append(out.Monitored, conOf(rs))
		}
	}
	return out
}
