package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Spec is what the checker needs to know besides the history.
type Spec struct {
	// Permits is the capacity of the semaphores (one permit per acquisition).
	Permits int
	// Slack is how far past its bound a call may return before it counts as stuck.
	Slack time.Duration
	// LinTimeout bounds the linearizability check (default 30 s).
	LinTimeout time.Duration
	// Counters are the shared resource's final increments per name, and
	// Fenced the refused fenced writes it counted (see Resource.Totals).
	Counters map[string]int64
}

// Report is the checker's verdict on one history.
type Report struct {
	Acquisitions int      `json:"acquisitions"`
	Faults       int      `json:"faults_injected"`
	Violations   int      `json:"violations"` // overlaps a lease cannot explain, lost increments, peaks above capacity
	Inherent     int      `json:"inherent"`   // overlaps of a holder told it lost its lease, during a fault that can end leases
	LostIncr     int64    `json:"lost_increments"`
	StaleWrites  int64    `json:"stale_fenced_writes"`
	Stuck        int      `json:"stuck"`
	Unexplained  int      `json:"unexplained_losses"` // holds lost with no fault to explain it
	DetectP99    Millis   `json:"p99_detection_ms"`
	TakeoverP99  Millis   `json:"p99_takeover_ms"`
	Linearizable string   `json:"linearizable"`
	Views        int      `json:"election_views,omitempty"` // followers' views of elections checked
	Details      []string `json:"-"`
}

// Millis is a duration printed in milliseconds; -1 when nothing was measured.
type Millis float64

// holdRec is what the history says about one hold.
type holdRec struct {
	acq     Op
	end     int64 // when the holder stopped holding by its own account (release or lost); MaxInt64: never said
	endOp   *Op
	lost    *Op
	section *Op
}

// Check checks a history: see the package documentation for what each figure means.
func Check(ops []Op, spec Spec) Report {
	if spec.Slack == 0 {
		spec.Slack = 2 * time.Second
	}
	if spec.LinTimeout == 0 {
		spec.LinTimeout = 30 * time.Second
	}
	holds, faults := collect(ops)
	r := Report{Faults: len(faults), Acquisitions: len(holds)}
	checkSections(&r, holds, faults, spec)
	checkStuck(&r, ops, spec)
	checkElections(&r, ops, holds)
	r.DetectP99, r.Unexplained = detection(holds, faults)
	r.TakeoverP99 = takeover(holds, faults)
	var bad []string
	r.Linearizable, bad = linearizable(linHistory(ops, holds, spec), spec.LinTimeout)
	for _, name := range bad {
		r.Details = append(r.Details, "not linearizable: "+name)
	}
	return r
}

// Verdict is "pass" when nothing but inherent effects was seen. A loss no
// fault explains is a bug too: a false loss, or a hold that another client
// took away.
func (r Report) Verdict() string {
	if r.Violations > 0 || r.Stuck > 0 || r.Unexplained > 0 || r.Linearizable == "no" {
		return "FAIL"
	}
	return "pass"
}

// holdKey names a hold across processes.
type holdKey struct {
	proc int
	hold int64
}

// collect groups the ops by hold and returns the holds and the faults.
func collect(ops []Op) (map[holdKey]*holdRec, []Op) {
	holds := map[holdKey]*holdRec{}
	var faults []Op
	for _, op := range ops {
		if op.Op == OpAcquire && op.OK && op.Ret != 0 {
			holds[holdKey{op.Proc, op.Hold}] = &holdRec{acq: op, end: math.MaxInt64}
		}
		if op.Op == OpFault {
			faults = append(faults, op)
		}
	}
	for i := range ops {
		op := &ops[i]
		h := holds[holdKey{op.Proc, op.Hold}]
		if h == nil {
			continue
		}
		switch op.Op {
		case OpRelease:
			if h.endOp == nil {
				h.endOp = op
			}
		case OpLost:
			h.lost = op
		case OpSection:
			h.section = op
		}
	}
	for _, h := range holds {
		switch {
		case h.lost != nil:
			h.end = h.lost.Ret
		case h.endOp != nil && h.endOp.Ret != 0:
			h.end = h.endOp.Ret
		}
	}
	return holds, faults
}

// explained reports whether the loss of hold h has a cause the lease model
// allows: its own fixed lease ran out, or a fault that reaches its process
// (global, or aimed at it) happened while it held. The hold may exist in
// Redis from the moment its acquisition was sent: a fault that ran after the
// script but whose reply reached the parent before the acquisition's reached
// its holder (a FLUSHALL, say) ended it too.
func explained(h *holdRec, faults []Op) bool {
	start, end := h.acq.Call, h.end
	if h.section != nil {
		end = max(end, h.section.Ret)
	}
	if h.acq.Lease > 0 && end >= h.acq.Call+h.acq.Lease {
		return true
	}
	for _, f := range faults {
		target := int(f.Bound) - 1
		if (target < 0 || target == h.acq.Proc) && f.Call <= end && f.Ret >= start {
			return true
		}
	}
	return false
}

// p99 returns the 99th percentile of ds in milliseconds, -1 for none.
func p99(ds []int64) Millis {
	if len(ds) == 0 {
		return -1
	}
	slices.Sort(ds)
	i := int(math.Ceil(0.99*float64(len(ds)))) - 1
	return Millis(math.Round(float64(ds[max(i, 0)])/1e4) / 100)
}

// checkStuck counts calls that never returned or returned later than their
// bound allowed.
func checkStuck(r *Report, ops []Op, spec Spec) {
	for _, op := range ops {
		if op.Op != OpAcquire && op.Op != OpWait {
			continue
		}
		late := op.Bound > 0 && op.Ret-op.Call > op.Bound+int64(spec.Slack)
		if op.Ret == 0 || late {
			r.Stuck++
			r.Details = append(r.Details, fmt.Sprintf("stuck: p%d/g%d %s %s %s after %v (bound %v)",
				op.Proc, op.G, op.Kind, op.Name, op.Op, time.Duration(op.Ret-op.Call), time.Duration(op.Bound)))
		}
	}
}

// sortedHolds returns the holds ordered by acquisition.
func sortedHolds(holds map[holdKey]*holdRec) []*holdRec {
	hs := make([]*holdRec, 0, len(holds))
	for _, h := range holds {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].acq.Ret < hs[j].acq.Ret })
	return hs
}

// describe names a hold for the details.
func (h *holdRec) describe() string {
	s := fmt.Sprintf("p%d/g%d/h%d %s %s", h.acq.Proc, h.acq.G, h.acq.Hold, h.acq.Kind, h.acq.Name)
	if h.acq.Token != 0 {
		s += fmt.Sprintf(" token %d", h.acq.Token)
	}
	return s
}
