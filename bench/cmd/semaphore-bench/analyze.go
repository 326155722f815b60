package main

import (
	"cmp"
	"slices"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
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

// analyze turns one run into statistics. Every time is CLOCK_MONOTONIC, read
// in the worker processes on one host, so all processes share one time line.
func analyze(raw *rawRun, o options) *runStats {
	P := int64(o.permits)
	rs := &runStats{Lib: raw.lib, Runs: 1, Window: raw.WE - raw.WS, RT: raw.RoundTrips(), Cmds: raw.Commands, Scripts: raw.Scripts,
		Errors: map[string]int{}, EndAvailable: []int64{raw.available}}
	raw.AddErrors(rs.Errors)
	rs.Acq, rs.PerG = raw.Acquisitions()
	rs.Pings = stats.NewDist(slices.Clone(raw.pings))
	rs.Starved = stats.Starved(rs.PerG)
	// Waiters and waits: every call competes, so every call is a waiter.
	rs.Wait, rs.Calls, rs.Failed, rs.Pending = raw.Waits()

	calls := raw.Calls()
	tl := harness.NewTimeline(calls)
	rs.clientIdle(raw, calls, tl, P, o.goroutines)
	if raw.monitor {
		rs.serverIdle(raw, tl, P)
	}
	rs.holders(calls, P)
	return rs
}

// clientIdle measures the idle permits on the client time line: a permit
// is taken at its Acquire's return and free again at its release's return.
func (rs *runStats) clientIdle(raw *rawRun, calls []harness.ProcCall, tl harness.Timeline, permits int64, goroutines int) {
	var units []unitEvent
	var holds, releases []int64
	for _, c := range calls {
		if c.Status() != harness.Acquired {
			continue
		}
		if raw.InWindow(c.T1()) {
			holds, releases = append(holds, c.T2()-c.T1()), append(releases, c.T3()-c.T2())
		}
		owner := int64(c.Proc*goroutines) + c.G()
		units = append(units, unitEvent{t: c.T1(), delta: -1, owner: owner})
		counted := false
		if raw.InWindow(c.T3()) {
			rs.Releases++
			if tl.Blocked(c.T2(), c.T3()) > 0 {
				rs.Contested++
				counted = true
			}
		}
		units = append(units, unitEvent{t: c.T3(), delta: +1, counted: counted, owner: owner})
	}
	rs.Hold, rs.ReleaseRT = stats.NewDist(holds), stats.NewDist(releases)
	idle, censored, skew, back := idleFIFO(units, permits, raw.WE)
	rs.Idle, rs.IdleCensored, rs.IdleSkew, rs.BackToReleaser = stats.NewDist(idle), censored, skew, back
	for _, d := range idle {
		rs.IdleSum += d
	}
}

// serverIdle measures the idle permits on the server's time line, from the
// MONITOR feed of a monitor round.
func (rs *runStats) serverIdle(raw *rawRun, tl harness.Timeline, permits int64) {
	var sev []unitEvent
	for _, e := range raw.counter {
		counted := e.Delta > 0 && raw.InWindow(e.T) && tl.Blocked(e.T, e.T) > 0
		if counted {
			rs.SrvContested += int(e.Delta)
		}
		sev = append(sev, unitEvent{t: e.T, delta: e.Delta, counted: counted, ordered: true})
	}
	sidle, scens, _, _ := idleFIFO(sev, permits, raw.WE)
	rs.SrvIdle, rs.SrvIdleCensored = stats.NewDist(sidle), scens
}

// holders counts the most holders at once and the acquisitions beyond the
// limit: Acquire return → Release call, a sub-interval of the hold on the
// server, so more than the permits here is a real excess.
func (rs *runStats) holders(calls []harness.ProcCall, permits int64) {
	var hev []unitEvent
	for _, c := range calls {
		if c.Status() == harness.Acquired {
			hev = append(hev, unitEvent{t: c.T1(), delta: +1}, unitEvent{t: c.T2(), delta: -1})
		}
	}
	slices.SortStableFunc(hev, func(a, b unitEvent) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta))
	})
	var n int64
	for _, e := range hev {
		n += e.delta
		rs.MaxHolders = max(rs.MaxHolders, int(n))
		if e.delta > 0 && n > permits {
			rs.OverLimit++
		}
	}
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

// merge adds run b's statistics to a (same library): counts add up, samples
// join, MaxHolders is the larger.
func merge(a, b *runStats) *runStats {
	if a == nil {
		return b
	}
	for _, n := range [][2]*int{{&a.Runs, &b.Runs}, {&a.Acq, &b.Acq}, {&a.Calls, &b.Calls}, {&a.Failed, &b.Failed},
		{&a.Pending, &b.Pending}, {&a.IdleCensored, &b.IdleCensored}, {&a.IdleSkew, &b.IdleSkew}, {&a.Releases, &b.Releases},
		{&a.Contested, &b.Contested}, {&a.BackToReleaser, &b.BackToReleaser}, {&a.SrvIdleCensored, &b.SrvIdleCensored},
		{&a.SrvContested, &b.SrvContested}, {&a.Starved, &b.Starved}, {&a.OverLimit, &b.OverLimit}} {
		*n[0] += *n[1]
	}
	for _, n := range [][2]*int64{{&a.Window, &b.Window}, {&a.IdleSum, &b.IdleSum}, {&a.RT, &b.RT}, {&a.Cmds, &b.Cmds},
		{&a.Scripts, &b.Scripts}} {
		*n[0] += *n[1]
	}
	for _, d := range [][2]*stats.Dist{{&a.Wait, &b.Wait}, {&a.Idle, &b.Idle}, {&a.Hold, &b.Hold},
		{&a.ReleaseRT, &b.ReleaseRT}, {&a.SrvIdle, &b.SrvIdle}, {&a.Pings, &b.Pings}} {
		*d[0] = stats.Concat(*d[0], *d[1])
	}
	for i := range a.PerG {
		a.PerG[i] += b.PerG[i]
	}
	a.MaxHolders = max(a.MaxHolders, b.MaxHolders)
	a.EndAvailable = append(a.EndAvailable, b.EndAvailable...)
	for k, v := range b.Errors {
		a.Errors[k] += v
	}
	return a
}
