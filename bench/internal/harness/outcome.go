package harness

import "github.com/holdfast-go/holdfast/bench/internal/stats"

// InWindow reports whether t (CLOCK_MONOTONIC ns) lies in the measured
// window.
func (o *Outcome) InWindow(t int64) bool { return t >= o.WS && t < o.WE }

// Calls returns every call of every worker with its process, in the order
// the workers reported them.
func (o *Outcome) Calls() []ProcCall {
	var out []ProcCall
	for _, r := range o.Results {
		for _, c := range r.Calls {
			out = append(out, ProcCall{c, r.Proc})
		}
	}
	return out
}

// RoundTrips returns the library clients' round trips in the window, summed
// over the workers.
func (o *Outcome) RoundTrips() int64 {
	var n int64
	for _, r := range o.Results {
		n += r.RTEnd - r.RTStart
	}
	return n
}

// AddErrors adds the workers' error counts to dst.
func (o *Outcome) AddErrors(dst map[string]int) {
	for _, r := range o.Results {
		for k, v := range r.Errors {
			dst[k] += v
		}
	}
}

// Acquisitions returns the acquisitions whose acquire call returned in the
// window, in total and per goroutine (index proc × Goroutines + goroutine).
func (o *Outcome) Acquisitions() (total int, perG []int) {
	perG = make([]int, o.Procs*o.Goroutines)
	for _, r := range o.Results {
		for _, c := range r.Calls {
			if c.Status() == Acquired && o.InWindow(c.T1()) {
				total++
				perG[r.Proc*o.Goroutines+int(c.G())]++
			}
		}
	}
	return total, perG
}

// Ended is an acquire call counted in a window, with the time its wait
// ended: its return, or the window's end for a call still waiting then.
type Ended struct {
	ProcCall
	End int64
}

// Wait returns how long the call waited.
func (e Ended) Wait() int64 { return e.End - e.T0() }

// WindowCalls returns the acquire calls that returned in the window or were
// still waiting at its end (and began before it), with how many of them
// failed and how many were still waiting.
func (o *Outcome) WindowCalls() (calls []Ended, failed, pending int) {
	for _, c := range o.Calls() {
		end := c.T1()
		switch {
		case c.Status() == Cancelled:
			if c.T0() >= o.WE {
				continue
			}
			end = o.WE
			pending++
		case !o.InWindow(end):
			continue
		case c.Status() == Failed:
			failed++
		}
		calls = append(calls, Ended{c, end})
	}
	return calls, failed, pending
}

// Seconds returns the measured window's length in seconds.
func (o *Outcome) Seconds() float64 { return float64(o.WE-o.WS) / 1e9 }

// Waits returns the waits of the acquire calls WindowCalls returns, with
// how many there were, failed and were still waiting.
func (o *Outcome) Waits() (waits stats.Dist, calls, failed, pending int) {
	ended, failed, pending := o.WindowCalls()
	w := make([]int64, 0, len(ended))
	for _, c := range ended {
		w = append(w, c.Wait())
	}
	return stats.NewDist(w), len(ended), failed, pending
}

// PerAcq returns the round trips, server commands and scripts per
// acquisition (0 without acquisitions).
func PerAcq(acq int, rt, cmds, scripts int64) (rtPer, cmdPer, scrPer float64) {
	if acq == 0 {
		return 0, 0, 0
	}
	n := float64(acq)
	return float64(rt) / n, float64(cmds) / n, float64(scripts) / n
}
