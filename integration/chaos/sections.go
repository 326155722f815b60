package chaos

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkSections finds overlapping critical sections (more holders than a
// kind allows, on the sections' own monotonic intervals and by the shared
// resource's count), lost increments and stale fenced writes.
func checkSections(r *Report, holds map[holdKey]*holdRec, faults []Op, spec Spec) {
	var active []*holdRec
	reported := map[string]int64{}
	raced := map[string]bool{} // names with an inherent overlap
	for _, h := range sortedHolds(holds) {
		s := h.section
		if s == nil {
			continue
		}
		reported[h.acq.Name] += s.Writes
		r.StaleWrites += s.Stale
		live := active[:0]
		for _, a := range active {
			if a.section.Ret > s.Call {
				live = append(live, a)
			}
		}
		active = append(live, h)
		if overlaps(r, active, faults, spec) {
			raced[h.acq.Name] = true
		}
	}
	for name, n := range reported {
		got, ok := spec.Counters[name]
		if !ok || got >= n {
			continue
		}
		r.LostIncr += n - got
		what := "violation"
		if raced[name] {
			what = "inherent" // a holder's write raced its successor's
			r.Inherent++
		} else {
			r.Violations++
		}
		r.Details = append(r.Details, fmt.Sprintf("%s: %s: %d increments confirmed, the resource has %d", what, name, n, got))
	}
}

// overlaps checks the newest section (last of active) against the sections
// still open when it began, and reports whether it found an inherent overlap.
func overlaps(r *Report, active []*holdRec, faults []Op, spec Spec) (raced bool) {
	h := active[len(active)-1]
	shared := 0
	for _, a := range active[:len(active)-1] {
		if a.acq.Name != h.acq.Name {
			continue
		}
		conflict := exclusive(a.acq.Kind) || exclusive(h.acq.Kind)
		if !conflict {
			shared++
			if shared < capacity(h.acq.Kind, spec.Permits) {
				continue
			}
		}
		inherent := (a.section.Lost && explained(a, faults)) || (h.section.Lost && explained(h, faults)) ||
			(!spec.Strict && within(a, h, spec.Partition))
		if bothValid(a, h) {
			r.ValidOverlap = max(r.ValidOverlap, Millis(math.Round(float64(a.section.Valid-h.acq.Ret)/1e4)/100))
			if spec.Strict || (!endedByFault(a, faults) && !endedByFault(h, faults)) {
				inherent = false // two handles said valid at one moment: no lease explains that
			}
		}
		what := "violation"
		if inherent {
			r.Inherent++
			what, raced = "inherent", true
		} else {
			r.Violations++
		}
		r.Details = append(r.Details, fmt.Sprintf("%s: %s [%d, %d] overlaps %s [%d, %d] by %v",
			what, a.describe(), a.section.Call, a.section.Ret, h.describe(), h.section.Call, h.section.Ret,
			time.Duration(a.section.Ret-h.section.Call)))
	}
	return raced
}

// bothValid reports whether holds a and h (acquired after a) said valid at
// one moment: each handle was valid from its acquisition's return until its
// section's last check that found it valid. A handle never says valid past
// its deadline, which is never after the hold's expiry in Redis, and another
// holder is admitted only after that expiry: so this happens only when a fault
// took the hold from Redis before its expiry (a restart, a FLUSHALL, a
// failover) or a handle lied.
func bothValid(a, h *holdRec) bool {
	return a.section.Valid != 0 && h.section.Valid != 0 && h.acq.Ret <= a.section.Valid
}

// within reports whether the overlap of a and h began in the partition w
// (between its cut and the moment it settled).
func within(a, h *holdRec, w *Window) bool {
	return w != nil && h.section.Call >= w.Cut && h.section.Call <= w.Settled && a.section.Ret >= w.Cut
}

// endedByFault reports whether a fault that can end holds in Redis (Op.OK)
// reached hold h's process while it held.
func endedByFault(h *holdRec, faults []Op) bool {
	end := max(h.end, h.section.Ret)
	for _, f := range faults {
		target := int(f.Bound) - 1
		if f.OK && (target < 0 || target == h.acq.Proc) && f.Call <= end && f.Ret >= h.acq.Call {
			return true
		}
	}
	return false
}

// detection returns the p99 of how long after a fault's end a holder learnt
// its hold was lost, and how many losses no fault explains.
func detection(holds map[holdKey]*holdRec, faults []Op) (Millis, int) {
	var ds []int64
	unexplained := 0
	for _, h := range holds {
		if h.lost == nil {
			continue
		}
		best := int64(-1)
		for _, f := range faults {
			target := int(f.Bound) - 1
			if (target < 0 || target == h.acq.Proc) && f.Call <= h.lost.Ret && f.Ret >= h.acq.Ret {
				best = max(best, f.Ret)
			}
		}
		switch {
		case best >= 0:
			ds = append(ds, max(h.lost.Ret-best, 0))
		case !explained(h, faults):
			unexplained++
		}
	}
	return p99(ds), unexplained
}

// takeover returns the p99 of how long after a fault that ends holds
// (Op.OK on the fault) another holder acquired an object held at the fault.
func takeover(holds map[holdKey]*holdRec, faults []Op) Millis {
	byName := map[string][]*holdRec{}
	for _, h := range sortedHolds(holds) {
		byName[h.acq.Name] = append(byName[h.acq.Name], h)
	}
	var ds []int64
	for _, f := range faults {
		if !f.OK {
			continue
		}
		for _, hs := range byName {
			if d, ok := takenOver(hs, f); ok {
				ds = append(ds, d)
			}
		}
	}
	return p99(ds)
}

// takenOver returns how long after fault f a hold of hs (one name, ordered by
// acquisition) began that was not open at f, when one was open at f.
func takenOver(hs []*holdRec, f Op) (int64, bool) {
	target := int(f.Bound) - 1
	held := false
	for _, h := range hs {
		open := h.acq.Ret <= f.Call && h.end > f.Call
		if open && (target < 0 || target == h.acq.Proc) {
			held = true
		}
		if held && h.acq.Ret > f.Call {
			return h.acq.Ret - f.Call, true
		}
	}
	return 0, false
}

// linHistory turns the history into porcupine operations: one per
// acquisition, one per end of a hold, one per latch call. An end the holder
// never reported (killed, stuck) may come at any time after the acquisition.
func linHistory(ops []Op, holds map[holdKey]*holdRec, spec Spec) []porcupine.Operation {
	var h []porcupine.Operation
	last := int64(0)
	for _, op := range ops {
		last = max(last, op.Ret, op.Call)
	}
	add := func(op Op, in linIn, out linOut, call, ret int64) {
		h = append(h, porcupine.Operation{ClientId: op.Proc*10000 + op.G, Input: in, Output: out,
			Call: call, Return: ret, Metadata: op.Name})
	}
	for _, hr := range holds {
		a := hr.acq
		in := linIn{Op: OpAcquire, Excl: exclusive(a.Kind), Cap: capacity(a.Kind, spec.Permits)}
		add(a, in, linOut{OK: true}, a.Call, a.Ret)
		in.Op = OpRelease
		call, ret := holdEnd(hr, last)
		add(a, in, linOut{OK: true}, call, ret)
	}
	for _, op := range ops {
		switch {
		case op.Op == OpSet && op.Ret != 0:
			add(op, linIn{Op: OpSet, Count: op.Bound}, linOut{OK: op.OK}, op.Call, op.Ret)
		case op.Op == OpCountDown && op.OK:
			add(op, linIn{Op: OpCountDown}, linOut{OK: true}, op.Call, op.Ret)
		case op.Op == OpCountDown:
			// A countdown that failed (a cancelled ctx) may still run on the
			// server after the call returned: its effect may come any time.
			add(op, linIn{Op: OpCountDown}, linOut{Unknown: true}, op.Call, last+1)
		case op.Op == OpWait && op.Ret != 0 && op.OK:
			add(op, linIn{Op: OpWait}, linOut{OK: true}, op.Call, op.Ret)
		}
	}
	return h
}

// holdEnd is the interval in which hold hr ended: a confirmed release's call;
// from the acquisition to when the holder learnt of a loss or was refused; from
// the acquisition to the end of the history when the holder never said.
func holdEnd(hr *holdRec, last int64) (call, ret int64) {
	a := hr.acq
	switch {
	case hr.lost != nil:
		return a.Ret, hr.lost.Ret
	case hr.endOp != nil && hr.endOp.Ret != 0 && hr.endOp.OK:
		return hr.endOp.Call, hr.endOp.Ret
	case hr.endOp != nil && hr.endOp.Ret != 0 && hr.endOp.Lost:
		return a.Ret, hr.endOp.Ret
	}
	return a.Ret, last + 1
}
