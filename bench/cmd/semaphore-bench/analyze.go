package main

import (
	"cmp"
	"slices"

	"github.com/holdfast-go/holdfast/bench/internal/stats"
)

// runStats is what one library did in the contended scenario, over one or
// more runs (rounds) merged.
type runStats struct {
	Lib    string `json:"lib"`
	Runs   int    `json:"runs"`
	Err    string `json:"err,omitempty"`
	Window int64  `json:"windowNs"` // total measured time over the runs

	Acq int `json:"acquisitions"`
	// Calls: Acquire calls that returned in a window or were still pending
	// at its end.
	Calls, Failed, Pending int
	// Wait: Acquire call → return of those calls (pending ones until the
	// window's end).
	Wait stats.Dist `json:"-"`

	// Idle: per permit released in a window while at least one Acquire
	// call was blocked across that release, the time it stayed free (FIFO
	// pairing on the return time line, see idleFIFO).
	Idle         stats.Dist `json:"-"`
	IdleSum      int64      `json:"idleSumNs"`
	IdleCensored int        `json:"idleCensored"` // still free at the window's end
	IdleSkew     int        `json:"idleSkew"`     // taken before its release returned (counted as 0)
	Releases     int        `json:"releases"`     // in the windows
	Contested    int        `json:"releasesWithWaiters"`
	// BackToReleaser: measured permits whose take (as paired) was by the
	// goroutine that released them (its next Acquire beat the waiters).
	BackToReleaser int `json:"backToReleaser"`
	// Hold: Acquire return → Release call (the fixed hold as it came out);
	// ReleaseRT: Release call → return.
	Hold      stats.Dist `json:"-"`
	ReleaseRT stats.Dist `json:"-"`

	// SrvIdle: the same measure on the server's own time line, from the
	// MONITOR rounds (see serverIdle).
	SrvIdle         stats.Dist `json:"-"`
	SrvIdleCensored int        `json:"srvIdleCensored"`
	SrvContested    int        `json:"srvReleasesWithWaiters"`

	PerG         []int          `json:"perGoroutine"` // summed over the runs
	Starved      int            `json:"starved"`      // goroutine-runs with no acquisition
	MaxHolders   int            `json:"maxHolders"`
	OverLimit    int            `json:"overLimit"` // acquisitions that made more than P holders
	RT           int64          `json:"roundTrips"`
	Cmds         int64          `json:"serverCommands"`
	Scripts      int64          `json:"scripts"`
	Pings        stats.Dist     `json:"-"`
	EndAvailable []int64        `json:"availableAfterRuns"`
	Errors       map[string]int `json:"errors,omitempty"`
}

// call is one Acquire call with its process.
type call struct {
	callRec
	proc int
}

// analyze turns one run into statistics. Every time is CLOCK_MONOTONIC, read
// in the worker processes on one host, so all processes share one time line.
func analyze(raw *rawRun, o options) *runStats {
	P := int64(o.permits)
	ws, we := raw.ws, raw.we
	rs := &runStats{Lib: raw.lib, Runs: 1, Window: we - ws, PerG: make([]int, o.procs*o.goroutines),
		Errors: map[string]int{}, EndAvailable: []int64{raw.available}}
	var calls []call
	var starts, ends []int64
	for _, r := range raw.results {
		rs.RT += r.RTEnd - r.RTStart
		for k, v := range r.Errors {
			rs.Errors[k] += v
		}
		for _, c := range r.Calls {
			calls = append(calls, call{c, r.Proc})
			starts, ends = append(starts, c.t0()), append(ends, c.t1())
			if c.status() == statusAcquired && c.t1() >= ws && c.t1() < we {
				rs.Acq++
				rs.PerG[r.Proc*o.goroutines+int(c.g())]++
			}
		}
	}
	rs.Cmds, rs.Scripts = raw.cmds, raw.scripts
	rs.Pings = stats.NewDist(slices.Clone(raw.pings))
	for _, n := range rs.PerG {
		if n == 0 {
			rs.Starved++
		}
	}
	slices.Sort(starts)
	slices.Sort(ends)
	countLE := func(s []int64, t int64) int { i, _ := slices.BinarySearch(s, t+1); return i }
	countLT := func(s []int64, t int64) int { i, _ := slices.BinarySearch(s, t); return i }
	// blockedAcross: a lower bound on the Acquire calls begun before a and
	// still waiting after b (exact unless whole calls fit inside [a, b]).
	blockedAcross := func(a, b int64) int { return countLT(starts, a) - countLE(ends, b) }

	// Waiters and waits.
	var waits []int64
	for _, c := range calls {
		end := c.t1()
		switch {
		case c.status() == statusCancelled:
			if c.t0() >= we {
				continue
			}
			end = we
			rs.Pending++
		case end < ws || end >= we:
			continue
		case c.status() == statusFailed:
			rs.Failed++
		}
		rs.Calls++
		waits = append(waits, end-c.t0())
	}
	rs.Wait = stats.NewDist(waits)

	// Idle permits, client time line.
	var units []unitEvent
	var holds, releases []int64
	for _, c := range calls {
		if c.status() != statusAcquired {
			continue
		}
		if c.t1() >= ws && c.t1() < we {
			holds, releases = append(holds, c.t2()-c.t1()), append(releases, c.t3()-c.t2())
		}
		owner := int64(c.proc*o.goroutines) + c.g()
		units = append(units, unitEvent{t: c.t1(), delta: -1, owner: owner})
		counted := false
		if c.t3() >= ws && c.t3() < we {
			rs.Releases++
			if blockedAcross(c.t2(), c.t3()) > 0 {
				rs.Contested++
				counted = true
			}
		}
		units = append(units, unitEvent{t: c.t3(), delta: +1, counted: counted, owner: owner})
	}
	rs.Hold, rs.ReleaseRT = stats.NewDist(holds), stats.NewDist(releases)
	idle, censored, skew, back := idleFIFO(units, P, we)
	rs.Idle, rs.IdleCensored, rs.IdleSkew, rs.BackToReleaser = stats.NewDist(idle), censored, skew, back
	for _, d := range idle {
		rs.IdleSum += d
	}

	// Idle permits, server time line (MONITOR rounds).
	if raw.monitor {
		var sev []unitEvent
		for _, e := range raw.counter {
			counted := e.Delta > 0 && e.T >= ws && e.T < we && blockedAcross(e.T, e.T) > 0
			if counted {
				rs.SrvContested += int(e.Delta)
			}
			sev = append(sev, unitEvent{t: e.T, delta: e.Delta, counted: counted, ordered: true})
		}
		sidle, scens, _, _ := idleFIFO(sev, P, we)
		rs.SrvIdle, rs.SrvIdleCensored = stats.NewDist(sidle), scens
	}

	// Holders at once: Acquire return → Release call, a sub-interval of
	// the hold on the server, so more than P here is a real excess.
	var hev []unitEvent
	for _, c := range calls {
		if c.status() == statusAcquired {
			hev = append(hev, unitEvent{t: c.t1(), delta: +1}, unitEvent{t: c.t2(), delta: -1})
		}
	}
	slices.SortStableFunc(hev, func(a, b unitEvent) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta))
	})
	var holders int64
	for _, e := range hev {
		holders += e.delta
		rs.MaxHolders = max(rs.MaxHolders, int(holders))
		if e.delta > 0 && holders > P {
			rs.OverLimit++
		}
	}
	return rs
}

// unitEvent is a change of the free permits: delta > 0 frees permits (a
// release; counted: the release is measured), delta < 0 takes them.
type unitEvent struct {
	t       int64
	delta   int64
	counted bool
	ordered bool  // already in order (the server's), do not sort
	owner   int64 // the goroutine (process × goroutines + goroutine); client time line only
}

// idleFIFO pairs frees and takes first in, first out: a take uses the permit
// that has been free longest (the P initial permits first). For every
// counted permit it returns how long it stayed free, cut at we (those still
// free at we are also counted in censored). On a client time line a take can
// come before the release that made it possible has returned (the two
// replies are read by different processes): such a take is owed the next
// permit freed, which then counts as idle for 0 (skew counts them). Events
// not marked ordered are sorted by time, frees first on a tie. back counts
// the counted permits taken by the goroutine that freed them.
func idleFIFO(ev []unitEvent, permits int64, we int64) (idle []int64, censored, skew, back int) {
	if len(ev) > 0 && !ev[0].ordered {
		slices.SortStableFunc(ev, func(a, b unitEvent) int {
			return cmp.Or(cmp.Compare(a.t, b.t), -cmp.Compare(a.delta, b.delta))
		})
	}
	type unit struct {
		t       int64
		counted bool
		owner   int64
	}
	var queue []unit
	for range permits {
		queue = append(queue, unit{t: -1, owner: -1})
	}
	var owed []int64 // owners of the takes owed a permit
	for _, e := range ev {
		if e.delta > 0 {
			for range e.delta {
				if len(owed) > 0 {
					taker := owed[0]
					owed = owed[1:]
					if e.counted {
						idle = append(idle, 0)
						skew++
						if taker == e.owner && e.owner >= 0 && !e.ordered {
							back++
						}
					}
					continue
				}
				queue = append(queue, unit{t: e.t, counted: e.counted, owner: e.owner})
			}
			continue
		}
		for range -e.delta {
			if len(queue) == 0 {
				owed = append(owed, e.owner)
				continue
			}
			u := queue[0]
			queue = queue[1:]
			if !u.counted {
				continue
			}
			if u.owner == e.owner && !e.ordered {
				back++
			}
			if e.t > we {
				idle = append(idle, we-u.t)
				censored++
			} else {
				idle = append(idle, e.t-u.t)
			}
		}
	}
	for _, u := range queue {
		if u.counted {
			idle = append(idle, we-u.t)
			censored++
		}
	}
	return idle, censored, skew, back
}

// merge adds run b's statistics to a (same library).
func merge(a, b *runStats) *runStats {
	if a == nil {
		return b
	}
	a.Runs += b.Runs
	a.Window += b.Window
	a.Acq += b.Acq
	a.Calls += b.Calls
	a.Failed += b.Failed
	a.Pending += b.Pending
	a.Wait = stats.NewDist(append(a.Wait, b.Wait...))
	a.Idle = stats.NewDist(append(a.Idle, b.Idle...))
	a.IdleSum += b.IdleSum
	a.IdleCensored += b.IdleCensored
	a.IdleSkew += b.IdleSkew
	a.Releases += b.Releases
	a.Contested += b.Contested
	a.BackToReleaser += b.BackToReleaser
	a.Hold = stats.NewDist(append(a.Hold, b.Hold...))
	a.ReleaseRT = stats.NewDist(append(a.ReleaseRT, b.ReleaseRT...))
	a.SrvIdle = stats.NewDist(append(a.SrvIdle, b.SrvIdle...))
	a.SrvIdleCensored += b.SrvIdleCensored
	a.SrvContested += b.SrvContested
	for i := range a.PerG {
		a.PerG[i] += b.PerG[i]
	}
	a.Starved += b.Starved
	a.MaxHolders = max(a.MaxHolders, b.MaxHolders)
	a.OverLimit += b.OverLimit
	a.RT += b.RT
	a.Cmds += b.Cmds
	a.Scripts += b.Scripts
	a.Pings = stats.NewDist(append(a.Pings, b.Pings...))
	a.EndAvailable = append(a.EndAvailable, b.EndAvailable...)
	for k, v := range b.Errors {
		a.Errors[k] += v
	}
	return a
}
