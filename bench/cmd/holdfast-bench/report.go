package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/link"
	"github.com/holdfast-go/holdfast/bench/internal/plotting"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// results is everything one run measured.
type results struct {
	Started     time.Time
	Elapsed     time.Duration
	Env         report.Facts
	Link        link.Info
	Libs        []libs.Library
	Opts        options
	Uncontended []*uncontendedStats
	ReadLock    []*throughputStats
	Contended   []*runStats
}

func (r *results) run(lib string, c contendedCase) *runStats {
	for _, rs := range r.Contended {
		if rs.Lib == lib && rs.Case == c && rs.Err == "" {
			return rs
		}
	}
	return nil
}

func (r *results) uncontended(name string) *uncontendedStats {
	for _, u := range r.Uncontended {
		if u.Name == name {
			return u
		}
	}
	return nil
}

func (r *results) hasHoldfast() bool { return hasLib(r.Libs, libs.Holdfast) }

// peers returns the non-holdfast libraries.
func (r *results) peers() []libs.Library {
	var out []libs.Library
	for _, l := range r.Libs {
		if !libs.IsHoldfast(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// bestPeer returns the best peer value of metric in case c (lower is
// better unless higher), its library, and whether any peer had a value.
func (r *results) bestPeer(c contendedCase, metric func(*runStats) (float64, bool), higher bool) (float64, string, bool) {
	best, name, found := 0.0, "", false
	for _, l := range r.peers() {
		rs := r.run(l.Name, c)
		if rs == nil {
			continue
		}
		v, ok := metric(rs)
		if !ok {
			continue
		}
		if !found || (higher && v > best) || (!higher && v < best) {
			best, name, found = v, l.Name, true
		}
	}
	return best, name, found
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// metricCol is one column of a contended table.
type metricCol struct {
	head string
	// value is the number behind the cell (and the ratio), if any.
	value func(*runStats) (float64, bool)
	// format renders value; text, if set, renders the cell instead.
	format func(float64) string
	text   func(*runStats) string
	higher bool // higher is better
	ratio  bool // give holdfast ÷ best peer
}

func (c metricCol) cell(rs *runStats) string {
	if c.text != nil {
		return c.text(rs)
	}
	if v, ok := c.value(rs); ok {
		return c.format(v)
	}
	return "—"
}

func durCol(head string, f func(*runStats) (time.Duration, bool)) metricCol {
	return metricCol{
		head:   head,
		value:  func(rs *runStats) (float64, bool) { d, ok := f(rs); return float64(d), ok },
		format: func(v float64) string { return report.Duration(time.Duration(v)) },
		ratio:  true,
	}
}

// fifoFloor is the least waiter wait a FIFO lock can give in case c over a
// link whose PING p50 is ping (0: unknown): a waiter among the P·G
// goroutines waits for the P·G − 1 others, each holding for the critical
// section and handing off, and a hand-off to another process is at least a
// publish delivery plus one round trip (an acquisition), taken as 1.5 ×
// PING p50.
func fifoFloor(c contendedCase, ping time.Duration) time.Duration {
	return time.Duration(c.Total()-1) * (c.CS + ping*3/2)
}

// contendedCols returns the columns of case c's table; ping is the PING
// p50 through the run's link, for the FIFO floor (see fifoFloor).
func contendedCols(c contendedCase, ping time.Duration) []metricCol {
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	cols := []metricCol{
		{head: "acq/s", value: func(rs *runStats) (float64, bool) { return rs.AcqPerSec, true },
			format: func(v float64) string { return fmt.Sprintf("%.0f", v) }, higher: true, ratio: true},
		durCol("hand-off p50", func(rs *runStats) (time.Duration, bool) { return rs.Handoff.P(0.5), rs.Handoff.N() > 0 }),
		durCol("hand-off p99", func(rs *runStats) (time.Duration, bool) { return rs.Handoff.P(0.99), rs.Handoff.N() > 0 }),
	}
	if c.Procs > 1 {
		cols = append(cols,
			durCol("cross-process hand-off p50", func(rs *runStats) (time.Duration, bool) { return rs.HandoffX.P(0.5), rs.HandoffX.N() > 0 }),
			durCol("cross-process hand-off p99", func(rs *runStats) (time.Duration, bool) { return rs.HandoffX.P(0.99), rs.HandoffX.N() > 0 }),
		)
	}
	cols = append(cols,
		durCol("release → waiter p50", func(rs *runStats) (time.Duration, bool) {
			return rs.ReleaseToWaiter.P(0.5), rs.ReleaseToWaiter.N() > 0
		}),
		durCol("release → waiter p99", func(rs *runStats) (time.Duration, bool) {
			return rs.ReleaseToWaiter.P(0.99), rs.ReleaseToWaiter.N() > 0
		}),
		durCol("waiter wait p50", func(rs *runStats) (time.Duration, bool) { return rs.Wait.P(0.5), rs.Wait.N() > 0 }),
		durCol("waiter wait p99", func(rs *runStats) (time.Duration, bool) { return rs.Wait.P(0.99), rs.Wait.N() > 0 }),
		metricCol{head: "FIFO floor", text: func(*runStats) string {
			if ping <= 0 {
				return "—"
			}
			return report.Duration(fifoFloor(c, ping))
		}},
		metricCol{head: "wait p99 ÷ floor", text: func(rs *runStats) string {
			if ping <= 0 || rs.Wait.N() == 0 {
				return "—"
			}
			return report.DurationRatio(rs.Wait.P(0.99), fifoFloor(c, ping)) + "×"
		}},
		metricCol{head: "waiters / Lock calls", text: func(rs *runStats) string {
			return fmt.Sprintf("%d / %d", rs.Wait.N(), rs.Calls)
		}},
		metricCol{head: "re-acquired by releaser while others waited", text: func(rs *runStats) string {
			return report.Percent(rs.Barged, rs.ContestedReleases)
		}},
		metricCol{head: "acq / goroutine max / min (max ÷ min)", text: func(rs *runStats) string {
			maxG, minG := rs.spread()
			return fmt.Sprintf("%d / %d (%s)", maxG, minG, report.Spread(stats.SpreadRatio(rs.PerG)))
		}},
		metricCol{head: "starved", text: func(rs *runStats) string { return fmt.Sprint(rs.Starved) }},
		metricCol{head: "round trips / acq", value: func(rs *runStats) (float64, bool) { return rs.RTPerAcq, rs.Acq > 0 },
			format: f2, ratio: true},
		metricCol{head: "server cmds / acq", value: func(rs *runStats) (float64, bool) { return rs.CmdPerAcq, rs.Acq > 0 },
			format: f2, ratio: true},
		metricCol{head: "scripts / acq", value: func(rs *runStats) (float64, bool) { return rs.ScrPerAcq, rs.Acq > 0 },
			format: f2},
		metricCol{head: "failed / pending Lock calls", text: func(rs *runStats) string {
			return fmt.Sprintf("%d / %d", rs.Failed, rs.Pending)
		}},
		metricCol{head: "overlaps", text: func(rs *runStats) string { return fmt.Sprint(rs.Overlaps) }},
	)
	return cols
}

func ratioCell(hv, pv float64, peer string) string {
	if hv <= 0 || pv <= 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s)", report.Ratio(hv/pv), peer)
}

func renderMarkdown(r *results, plots []plotting.Ref) string {
	var b report.MD
	b.WriteString(report.Header("Performance", "`bench/cmd/holdfast-bench` (`make bench-docs`)", r.Started, r.Elapsed, r.Opts.Quick))
	b.P("\n%s.\n\n", r.Link.Line())
	b.P("The machine is small (2 cores) and shared: absolute numbers drift from run to run, so every target is a ratio " +
		"measured in the same run, libraries interleaved (each case starts with another library).\n\n")

	b.P("## Targets for holdfast's Mutex\n\n")
	renderTargets(&b, r)
	renderKinds(&b, r)

	b.WriteString(r.Env.Table())

	b.WriteString(report.Libraries("Libraries and settings", "library", r.Libs))

	b.P("\n## Definitions\n\n")
	b.P("- **PING**: one `PING` round trip on the same kind of client the library uses " +
		"(a go-redis client with default options; a rueidis client with `PipelineMultiplex: -1` as rueidislock forces). " +
		"Every latency ratio divides by the PING p50 of the same run.\n")
	b.P("- **Uncontended cycle**: one goroutine, `Lock` then `Unlock` on a lock nobody else uses, measured from the `Lock` call to the `Unlock` return; "+
		"%d rounds × %d cycles per library (after an unmeasured warm-up of %d ops per item), interleaved with the PINGs and the other libraries "+
		"in runs of 20 ops (every item in turn, in a rotating order), so that machine drift hits all alike.\n", r.Opts.Rounds, r.Opts.Cycles, min(r.Opts.Cycles, 50))
	b.P("- **holdfast TryLock (free)**: a cycle like holdfast's, through `Mutex.TryLock(ctx)` (one attempt, fresh owner) on a free lock, then `Lease.Unlock`. " +
		"**holdfast reentrant**: an owner (`ctx = rlock.WithOwner(…)`) takes its own lock once before the warm-up and holds it until the end; " +
		"each op is one reentrant `TryLock(ctx)` of that owner (hold count 1 → 2, one round trip) and that lease's `Unlock` (2 → 1, one round trip). " +
		"Both rows are timed interleaved with the others and counted like them.\n")
	b.P("- **Counting batch**: after the timed rounds, for every row, N = %d ops of that row alone, back to back, untimed, "+
		"in %d slices (the rows in turn, in a rotating order, so that a burst of load does not hit one row alone). "+
		"Round trips, server commands, server µs, server CPU, client CPU, allocations and bytes per cycle are each the change of a counter "+
		"between just before and just after each slice, summed over the slices, ÷ N. The probes (`INFO` on a separate connection, `ReadMemStats`) are read outside "+
		"the process CPU and allocation window; `INFO` is not counted in server commands or server µs.\n", r.Opts.Cycles, countSlices)
	b.P("- **server µs / cycle**: from `INFO commandstats`, the change of `usec` (time the server spent executing the command, " +
		"timed around its execution: not reading, parsing or answering the request) summed over the commands, `INFO` left out, ÷ N. " +
		"A script's `usec` includes the commands it runs, which Redis also counts under their own names (checked on 7.0.15: an `EVAL` " +
		"running 200 000 `SET`s adds 231 ms to `eval` and 52 ms to `set`). The first number counts each command a client sent once: " +
		"every command's `usec` is weighted by the share of its calls that no script made, as seen on a `MONITOR` feed (script calls show " +
		"as `[0 lua]`) during that row's warm-up (the feed is closed before anything is measured). " +
		"In parentheses the plain sum over all commands, which counts the commands scripts run twice.\n")
	b.P("- **server CPU µs / cycle**: the change of `used_cpu_user_main_thread` + `used_cpu_sys_main_thread` (`INFO cpu`: `getrusage` of "+
		"redis-server's main thread, which with the default `io-threads 1` reads, parses, runs and answers every command) ÷ N. Unlike server µs "+
		"it includes the socket reads and writes per round trip; it also includes the server's periodic work (`serverCron`, 10 Hz) "+
		"during the batch, and the tail and head of two `INFO cpu` probes per slice (read after and before the `INFO commandstats` ones; "+
		"about 15 µs per slice, measured on empty slices: %.2f µs per cycle here).\n", 15*float64(countSlices)/float64(r.Opts.Cycles))
	b.P("- **client CPU µs / cycle**: the benchmark process's CPU time (`getrusage(RUSAGE_SELF)`, user + system, all threads) " +
		"over the batch ÷ N. The batch runs one row alone, so this is that row's client cost (library, its Redis client, their " +
		"background goroutines, the garbage collector) plus the harness's loop around the op (a function call and a counter), " +
		"plus whatever the other, idle, clients of the process do meanwhile (timers), and the Go scheduler's spinning " +
		"while it waits for a reply (so it can exceed the cycle's latency minus the server's share).\n")
	b.P("- **allocs / cycle**, **bytes / cycle**: the change of `runtime.MemStats.Mallocs` / `TotalAlloc` over the batch ÷ N: " +
		"heap allocations (count, bytes) of the whole process, so those of that row alone plus any background goroutines'.\n")
	b.P("- **Contended run**: P processes × G goroutines loop on one lock name: `Lock` (with a %s deadline), critical section "+
		"(`time.Sleep` of 0 or 1 ms; 0 means none), `Unlock`. Every contended case runs in worker processes (the binary re-executes itself), "+
		"one `Instance` (client) per process shared by its goroutines. A run has a %s warm-up and a %s measured window; "+
		"at the window's end waiting `Lock` calls are cancelled.\n", r.Opts.Timeout, r.Opts.Warmup, r.Opts.Duration)
	b.WriteString("- **Link** (`-link`; `make bench LINK=…`): what lies between every client of the run (the coordinator's and every worker process's, pub/sub connections included, every library alike) and the private redis-server. `loopback`: direct TCP on 127.0.0.1 (PING 20–60 µs). `proxy`: a TCP proxy (`bench/internal/link`) in a process of its own (the tool's binary re-executed, so that its CPU time and allocations stay out of the coordinator's) that forwards each connection with no added delay (PING some 15–20 µs more). `slow` and `slower`: the same proxy delaying every chunk of bytes by 1 ms or 2 ms in each direction (PING about 2.3 ms and 4.5 ms). Per connection and direction a reader goroutine stamps each chunk it reads with its due time (read time + delay) and queues it, and a writer goroutine sleeps on one timer until the queue's head is due, then writes every chunk that is due in one write: bytes keep their order, and a pipeline of requests crosses the link in one delay, not one per request. Timers on this machine end on about whole milliseconds plus 0.1–0.2 ms and the kernel has no `netem`, so no delaying profile is faster than about 2.3 ms per round trip (and 2.5 ms each way would take 3.2). The proxy never spins or polls: it costs a read, a write and at most one timer per chunk, and the wake-ups of an otherwise idle process: over the contended runs of a short 4 × 4, 1 ms run it used about 7–9 % of one core (180–240 ms of CPU in 2.6 s), some 25 µs per chunk forwarded without delay and 75 µs with one; the coordinator's own CPU stayed as on loopback. The header gives the profile and the PING p50 and p99 through the link (200 PINGs, one at a time, on one go-redis client at the start of the run).\n")
	b.P("- **Timestamps**: `CLOCK_MONOTONIC` read with `clock_gettime` (`golang.org/x/sys/unix`), comparable across processes.\n")
	b.P("- **Failed / pending Lock calls**: calls that returned an error in the window (deadline or library error) / calls still waiting at its end.\n")
	b.P("- **acq/s**: acquisitions whose `Lock` returned in the window ÷ window length.\n")
	b.P("- **Hand-off latency**: previous holder's `Unlock` return → next holder's `Lock` return, for consecutive acquisitions " +
		"(ordered by `Lock` return) where the next holder is another goroutine whose `Lock` call began before that `Unlock` returned " +
		"(a waiter, not a late arrival). *Cross-process*: the subset where the two goroutines are in different processes. " +
		"It can be slightly negative when the next holder's reply is read before the releaser's.\n")
	b.P("- **Waiter wait**: `Lock` call → `Lock` return, over the `Lock` calls that returned in the window or were still waiting at its end " +
		"(those count with their wait so far, from their call, which may lie in the warm-up: a goroutine starved for the whole run shows up " +
		"in the tail), restricted to calls that could not acquire at once (*waiters*): the lock was held when the call began (between another " +
		"holder's `Lock` return and `Unlock` return), or another acquisition returned between the call and its return, or the call did not " +
		"acquire. *waiters / Lock calls* gives their share. The classification uses only the harness's timestamps, so it treats every library alike; " +
		"a call that hits its deadline counts with its full wait.\n")
	b.P("- **FIFO floor**, **wait p99 ÷ floor**: the least waiter wait p99 a first-come-first-served lock can give over this run's link " +
		"(its PING p50 in the header): a waiter among the P·G goroutines waits for the P·G − 1 ahead of it, each holding for the critical section h " +
		"and handing off; an acquisition costs at least one round trip (PING p50) and a hand-off to another process at least a publish delivery " +
		"plus one round trip, taken as 1.5 × PING p50. Floor = (P·G − 1) · (h + 1.5 × PING p50). A lock that lets releasers re-acquire " +
		"(barging) can beat it on average but not for its unlucky waiters; the ratio says how far a library's tail is from the FIFO bound.\n")
	b.P("- **Release → waiter**: for every `Unlock` return while other goroutines had `Lock` calls waiting, the time until one of " +
		"*those* goroutines' `Lock` returns, however often the lock changed hands (or went back to the releaser) in between; " +
		"censored at the window's end. Where nobody barges it equals the hand-off; with polling it shows the cost of the poll interval " +
		"that the hand-off, taken over consecutive holders only, hides (a poller wins only when its poll falls just after a release).\n")
	b.P("- **Re-acquired by releaser while others waited**: among acquisitions whose previous holder's `Unlock` returned while another " +
		"goroutine had a `Lock` call waiting, the share that went back to that same releasing goroutine (barging).\n")
	b.P("- **Acquisitions per goroutine max/min**, **starved**: per goroutine, acquisitions whose `Lock` returned in the window; " +
		"max / min are the most and the fewest of one goroutine, *max ÷ min* their ratio (∞ when a goroutine had none); " +
		"starved = goroutines with 0.\n")
	b.P("- **Client round trips**: commands plus pipelines sent through the library's client: a go-redis `AddHook` (process and pipeline hooks) " +
		"on the client handed to the library; for rueidislock a wrapper around `rueidis.Client` (via `LockerOption.ClientBuilder`) counting " +
		"`Do`/`DoMulti`/`DoCache`/… calls. A script call is 1 (2 on a NOSCRIPT fall-back). Commands of a go-redis `PubSub` " +
		"(SUBSCRIBE/UNSUBSCRIBE) and rueidis' client-tracking set-up do not pass through these and are not counted; they are counted in server commands. " +
		"Background work (watchdog renewals, extensions) in the window is included.\n")
	b.P("- **Server commands**: the change of the sum of `calls` over `INFO commandstats` during the window (the benchmark's own `INFO` left out) " +
		"÷ acquisitions. Redis counts commands that a script runs with `redis.call` too (checked on 7.0.15: an `EVAL` running `SET` and `GET` adds 3), " +
		"so an `EVALSHA` whose script runs two commands counts 3. *scripts* = `EVAL`/`EVALSHA`/`FCALL` calls alone.\n")
	b.P("- **Overlaps** (sanity check, should be 0): acquisitions whose `Lock` returned before the previous holder called `Unlock`.\n")
	b.P("- **holdfast ÷ best peer**: holdfast's value (its `Mutex`) divided by the best of the other libraries in that column (lowest, or highest for acq/s; " +
		"the peers are redsync, redislock and rueidislock, not holdfast-spin or holdfast-fair); " +
		"below 1 is better except for acq/s. For the uncontended table: holdfast's Lock+Unlock row against the other libraries' rows " +
		"(not PING, not holdfast's other rows).\n")

	b.P("\n## PING and uncontended Lock+Unlock\n\n")
	renderUncontended(&b, r)

	b.P("\n## Contended\n")
	var lastCS time.Duration = -1
	for _, c := range contendedCases() {
		if c.CS != lastCS {
			b.P("\n### Critical section %d ms\n", c.CS.Milliseconds())
			lastCS = c.CS
		}
		renderCase(&b, r, c)
	}

	if len(plots) > 0 {
		b.P("\n## Plots\n\n")
		for _, pl := range plots {
			b.P("### %s\n\n![%s](img/%s)\n\n", pl.Title, pl.Title, pl.File)
		}
	}

	b.P("\n## Reproduce\n\n```sh\nmake bench-docs              # full run (< 5 min), rewrites docs/performance.md and docs/img/\n" +
		"make bench                   # the same run, written to bench/out/ instead\n" +
		"cd bench && go run ./cmd/holdfast-bench -quick -out /tmp/hb   # about a minute\n" +
		"cd bench && go run -tags noholdfast ./cmd/holdfast-bench -quick -out /tmp/hb   # competitors only\n```\n")
	return b.String()
}

// uncCol is one column of the PING / uncontended table.
type uncCol struct {
	head string
	cell func(*uncontendedStats) string
	// value, if set, is the number compared in the holdfast ÷ best peer line
	// (lower is better), named there by ratioName.
	value     func(*uncontendedStats) float64
	ratioName string
}

func uncontendedCols(r *results) []uncCol {
	pingOf := func(u *uncontendedStats) *uncontendedStats {
		if u.Client == libs.Rueidis {
			return r.uncontended(pingRueidis)
		}
		return r.uncontended(pingGoRedis)
	}
	p50 := func(u *uncontendedStats) float64 { return float64(u.Lat.P(0.5)) }
	p99 := func(u *uncontendedStats) float64 { return float64(u.Lat.P(0.99)) }
	dur := func(f func(*uncontendedStats) float64) func(*uncontendedStats) string {
		return func(u *uncontendedStats) string { return report.Duration(time.Duration(f(u))) }
	}
	toPing := func(f func(*uncontendedStats) float64) func(*uncontendedStats) string {
		return func(u *uncontendedStats) string { return fmt.Sprintf("%.2f", f(u)/f(pingOf(u))) }
	}
	num := func(format string, f func(*uncontendedStats) float64) func(*uncontendedStats) string {
		return func(u *uncontendedStats) string { return fmt.Sprintf(format, f(u)) }
	}
	serverUs := func(u *uncontendedStats) float64 { return u.ServerUs }
	serverCPU := func(u *uncontendedStats) float64 { return u.ServerCPUUs }
	clientCPU := func(u *uncontendedStats) float64 { return u.ClientCPUUs }
	allocs := func(u *uncontendedStats) float64 { return u.Allocs }
	return []uncCol{
		{head: "client", cell: func(u *uncontendedStats) string { return u.Client }},
		{head: "p50", cell: dur(p50), value: p50, ratioName: "cycle p50"},
		{head: "p99", cell: dur(p99), value: p99, ratioName: "cycle p99"},
		{head: "p50 ÷ PING p50", cell: toPing(p50)},
		{head: "p99 ÷ PING p99", cell: toPing(p99)},
		{head: "round trips / cycle", cell: num("%.2f", func(u *uncontendedStats) float64 { return u.RTPerOp })},
		{head: "server cmds / cycle (scripts)", cell: func(u *uncontendedStats) string {
			return fmt.Sprintf("%.2f (%.2f)", u.CmdPerOp, u.ScriptsPerOp)
		}},
		{head: "server µs / cycle (Σ all cmds)", cell: func(u *uncontendedStats) string {
			return fmt.Sprintf("%.2f (%.2f)", u.ServerUs, u.ServerUsAll)
		}, value: serverUs, ratioName: "server µs / cycle"},
		{head: "server CPU µs / cycle", cell: num("%.1f", serverCPU), value: serverCPU, ratioName: "server CPU µs / cycle"},
		{head: "client CPU µs / cycle", cell: num("%.1f", clientCPU), value: clientCPU, ratioName: "client CPU µs / cycle"},
		{head: "allocs / cycle", cell: num("%.1f", allocs), value: allocs, ratioName: "allocs / cycle"},
		{head: "bytes / cycle", cell: num("%.0f", func(u *uncontendedStats) float64 { return u.Bytes })},
	}
}

func renderUncontended(b *report.MD, r *results) {
	cols := uncontendedCols(r)
	b.P("| |")
	for _, c := range cols {
		b.P(" %s |", c.head)
	}
	b.P("\n|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, u := range r.Uncontended {
		b.P("| %s |", u.Name)
		for _, c := range cols {
			b.P(" %s |", c.cell(u))
		}
		b.P("\n")
	}
	if ratios := uncontendedRatios(r, cols); ratios != "" {
		b.P("\nholdfast ÷ best peer (Lock+Unlock cycle; the peers are the other libraries, not holdfast's other rows): %s.\n", ratios)
	}
	b.P("\nThe ÷ PING columns divide by the PING of the library's own client kind.\n")
}

// uncontendedRatios returns, for each column with a value, holdfast's
// Lock+Unlock row divided by the lowest of the other libraries' rows.
func uncontendedRatios(r *results, cols []uncCol) string {
	h := r.uncontended(libs.Holdfast)
	if h == nil {
		return ""
	}
	var parts []string
	for _, c := range cols {
		if c.value == nil {
			continue
		}
		best, bestName := 0.0, ""
		for _, l := range r.peers() {
			if u := r.uncontended(l.Name); u != nil && (bestName == "" || c.value(u) < best) {
				best, bestName = c.value(u), l.Name
			}
		}
		if bestName != "" {
			parts = append(parts, fmt.Sprintf("%s %s", c.ratioName, ratioCell(c.value(h), best, bestName)))
		}
	}
	return strings.Join(parts, ", ")
}

func renderCase(b *report.MD, r *results, c contendedCase) {
	procs := "one process"
	if c.Procs > 1 {
		procs = fmt.Sprintf("%d processes", c.Procs)
	}
	b.P("\n#### %d × %d goroutines (%s), %d ms\n\n", c.Procs, c.Goroutines, procs, c.CS.Milliseconds())
	cols := contendedCols(c, r.Link.PingP50)
	b.P("| library |")
	for _, col := range cols {
		b.P(" %s |", col.head)
	}
	b.P("\n|---|")
	for range cols {
		b.P("---|")
	}
	b.P("\n")
	for _, l := range r.Libs {
		rs := r.run(l.Name, c)
		if rs == nil {
			b.P("| %s | run failed: %s |\n", l.Name, runErr(r, l.Name, c))
			continue
		}
		b.P("| %s |", l.Name)
		for _, col := range cols {
			b.P(" %s |", col.cell(rs))
		}
		b.P("\n")
	}
	if h := r.run(libs.Holdfast, c); h != nil {
		b.P("| **holdfast ÷ best peer** |")
		for _, col := range cols {
			if !col.ratio {
				b.P(" |")
				continue
			}
			hv, ok := col.value(h)
			pv, peer, found := r.bestPeer(c, col.value, col.higher)
			if !ok || !found {
				b.P(" — |")
				continue
			}
			b.P(" %s |", ratioCell(hv, pv, peer))
		}
		b.P("\n")
	}
	var errs []string
	for _, l := range r.Libs {
		if rs := r.run(l.Name, c); rs != nil {
			for e, n := range rs.Errors {
				errs = append(errs, fmt.Sprintf("%s: %d × `%s`", l.Name, n, e))
			}
		}
	}
	if len(errs) > 0 {
		b.P("\nErrors: %s\n", strings.Join(errs, "; "))
	}
}

func runErr(r *results, lib string, c contendedCase) string {
	for _, rs := range r.Contended {
		if rs.Lib == lib && rs.Case == c {
			return report.Cell(rs.Err)
		}
	}
	return "not run"
}

// target is one of the goals for holdfast.
type target struct {
	Name     string `json:"name"`
	Measured string `json:"measured"`
	Limit    string `json:"limit"`
	Met      string `json:"met"`
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (r *results) targets() []target {
	if !r.hasHoldfast() {
		return nil
	}
	var ts []target
	na := func(name, limit string) { ts = append(ts, target{name, "n/a", limit, "n/a"}) }

	h, ping := r.uncontended(libs.Holdfast), r.uncontended(pingGoRedis)
	if h != nil && ping != nil {
		ratio := float64(h.Lat.P(0.5)) / float64(ping.Lat.P(0.5))
		ts = append(ts, target{"uncontended cycle p50 ÷ PING p50",
			fmt.Sprintf("%.2f (%s ÷ %s)", ratio, report.Duration(h.Lat.P(0.5)), report.Duration(ping.Lat.P(0.5))), "≤ 2.0", yesNo(ratio <= 2.0)})
	} else {
		na("uncontended cycle p50 ÷ PING p50", "≤ 2.0")
	}

	c44 := contendedCase{Procs: 4, Goroutines: 4, CS: time.Millisecond}
	waitQ := func(q float64) func(*runStats) (float64, bool) {
		return func(rs *runStats) (float64, bool) { return float64(rs.Wait.P(q)), rs.Wait.N() > 0 }
	}
	for _, w := range []struct {
		q     float64
		name  string
		limit float64
		lim   string
	}{{0.99, "waiter wait p99 at 4×4, 1 ms ÷ best peer's", 0.1, "≤ 0.10"}, {0.5, "waiter wait p50 at 4×4, 1 ms ÷ best peer's", 1, "≤ 1.0"}} {
		hr := r.run(libs.Holdfast, c44)
		pv, peer, found := r.bestPeer(c44, waitQ(w.q), false)
		if hr == nil || !found || pv <= 0 {
			na(w.name, w.lim)
			continue
		}
		hv := float64(hr.Wait.P(w.q))
		ratio := hv / pv
		ts = append(ts, target{w.name, fmt.Sprintf("%.3f (%s ÷ %s, %s)", ratio, report.Duration(time.Duration(hv)), report.Duration(time.Duration(pv)), peer),
			w.lim, yesNo(ratio <= w.limit)})
	}
	for _, cs := range []time.Duration{time.Millisecond, 0} {
		for _, c := range []contendedCase{{4, 4, cs}, {1, 32, cs}} {
			name := fmt.Sprintf("client round trips / acquisition at %s", c)
			if hr := r.run(libs.Holdfast, c); hr != nil && hr.Acq > 0 {
				ts = append(ts, target{name, fmt.Sprintf("%.2f", hr.RTPerAcq), "≤ 2.5", yesNo(hr.RTPerAcq <= 2.5)})
			} else {
				na(name, "≤ 2.5")
			}
		}
	}
	for _, cs := range []time.Duration{time.Millisecond, 0} {
		c := contendedCase{1, 32, cs}
		name := fmt.Sprintf("starved goroutines at %s", c)
		if hr := r.run(libs.Holdfast, c); hr != nil {
			ts = append(ts, target{name, fmt.Sprintf("%d", hr.Starved), "0", yesNo(hr.Starved == 0)})
		} else {
			na(name, "0")
		}
	}
	return ts
}

func renderTargets(b *report.MD, r *results) {
	ts := r.targets()
	if ts == nil {
		b.P("holdfast was not part of this run (built with `-tags noholdfast` or left out with `-libs`).\n")
		return
	}
	b.P("| target | measured | limit | met |\n|---|---|---|---|\n")
	for _, t := range ts {
		b.P("| %s | %s | %s | %s |\n", t.Name, t.Measured, t.Limit, t.Met)
	}
}

// summary is the JSON form of the results (percentiles instead of samples).
func (r *results) summary() any {
	type unc struct {
		*uncontendedStats
		Latency stats.Summary
	}
	type thr struct {
		*throughputStats
		CycleLatency stats.Summary
	}
	type con struct {
		*runStats
		Handoff, HandoffCrossProcess, ReleaseToWaiter, Wait stats.Summary
		FIFOFloor                                           time.Duration
	}
	out := struct {
		Started     time.Time
		Elapsed     time.Duration
		Env         report.Facts
		Link        link.Info
		Targets     []target
		KindTargets []target
		Uncontended []unc
		ReadLock    []thr
		Contended   []con
	}{Started: r.Started, Elapsed: r.Elapsed, Env: r.Env, Link: r.Link, Targets: r.targets(), KindTargets: r.kindTargets()}
	for _, t := range r.ReadLock {
		out.ReadLock = append(out.ReadLock, thr{t, t.Cycle.Summary()})
	}
	for _, u := range r.Uncontended {
		out.Uncontended = append(out.Uncontended, unc{u, u.Lat.Summary()})
	}
	for _, c := range r.Contended {
		out.Contended = append(out.Contended, con{c, c.Handoff.Summary(), c.HandoffX.Summary(), c.ReleaseToWaiter.Summary(), c.Wait.Summary(), fifoFloor(c.Case, r.Link.PingP50)})
	}
	return out
}
