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
	// Strict makes two handles that said valid at one moment a violation
	// whatever the faults: the promise of replica acknowledgements under a
	// partition.
	Strict bool
	// Partition, when set, is a partition scenario's window: overlaps within
	// it are inherent unless Strict (a failover without acknowledgements
	// grants twice: the documented exception), and the report says how
	// soon its holder was told and whether every worker recovered.
	Partition *Window
}

// Window is when a partition began, healed and settled (CLOCK_MONOTONIC),
// and the process of the holder it cut off.
type Window struct {
	Cut, Heal, Settled int64
	Holder             int
}

// Report is the checker's verdict on one history.
type Report struct {
	Acquisitions int    `json:"acquisitions"`
	Faults       int    `json:"faults_injected"`
	Violations   int    `json:"violations"` // overlaps a lease cannot explain, lost increments, peaks above capacity
	Inherent     int    `json:"inherent"`   // overlaps of a holder told it lost its lease, during a fault that can end leases
	LostIncr     int64  `json:"lost_increments"`
	StaleWrites  int64  `json:"stale_fenced_writes"`
	Stuck        int    `json:"stuck"`
	Unexplained  int    `json:"unexplained_losses"` // holds lost with no fault to explain it
	DetectP99    Millis `json:"p99_detection_ms"`
	TakeoverP99  Millis `json:"p99_takeover_ms"`
	Linearizable string `json:"linearizable"`
	Views        int    `json:"election_views,omitempty"` // followers' views of elections checked
	// ValidOverlap is the longest time two handles of one exclusive object
	// both said valid: the later one acquired, the earlier one's Err still
	// nil. -1: never.
	ValidOverlap Millis `json:"valid_overlap_ms"`
	// ToldAfterCut and ToldAfterHeal: for the partition's holder, the latest
	// moment one of the holds it had at the cut was known lost, after the
	// cut and after the heal (negative: before it). -1 after the cut: none.
	ToldAfterCut  Millis `json:"told_after_cut_ms,omitempty"`
	ToldAfterHeal Millis `json:"told_after_heal_ms,omitempty"`
	// Unrecovered counts the workers that acquired nothing after the
	// partition settled: waiters that did not recover.
	Unrecovered int      `json:"unrecovered,omitempty"`
	Details     []string `json:"-"`
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
	r := Report{Faults: len(faults), Acquisitions: len(holds), ValidOverlap: -1}
	checkSections(&r, holds, faults, spec)
	checkStuck(&r, ops, spec)
	checkElections(&r, ops, holds)
	checkTokens(&r, holds)
	checkPartition(&r, holds, spec.Partition)
	r.DetectP99, r.Unexplained = detection(holds, faults)
	r.TakeoverP99 = takeover(holds, faults)
	var bad []string
	r.Linearizable, bad = linearizable(linHistory(ops, holds, spec), spec.LinTimeout)
	what := "not linearizable: "
	if r.Linearizable == "no" && spec.Partition != nil && !spec.Strict {
		// Without replica acknowledgements a failover grants twice, and the
		// holder on the old primary's side may release there, never told:
		// the documented exception (docs/safety.md, "Partitions").
		r.Linearizable, what = "no (inherent: no replica acknowledgements)", "inherent: not linearizable: "
	}
	for _, name := range bad {
		r.Details = append(r.Details, what+name)
	}
	return r
}

// Verdict is "pass" when nothing but inherent effects was seen. A loss no
// fault explains is a bug too: a false loss, or a hold that another client
// took away.
func (r Report) Verdict() string {
	if r.Violations > 0 || r.Stuck > 0 || r.Unexplained > 0 || r.Unrecovered > 0 || r.Linearizable == "no" {
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

// checkTokens checks that fencing tokens only go up: of two holds of one
// fenced lock (or terms of one election), the one acquired after the other
// returned has the greater token. A smaller one would let the older holder's
// writes pass a fenced resource after the newer holder's: stale writes
// accepted.
func checkTokens(r *Report, holds map[holdKey]*holdRec) {
	for _, kind := range []string{KindFenced, KindElection} {
		for name, hs := range byName(holds, kind) {
			for i, a := range hs {
				for _, b := range hs[i+1:] {
					if a.acq.Ret < b.acq.Call && a.acq.Token >= b.acq.Token {
						r.Violations++
						r.Details = append(r.Details, fmt.Sprintf("violation: %s: %s then %s: tokens not increasing",
							name, a.describe(), b.describe()))
					}
				}
			}
		}
	}
}

// byName returns the holds of kind by object name, in acquisition order.
func byName(holds map[holdKey]*holdRec, kind string) map[string][]*holdRec {
	out := map[string][]*holdRec{}
	for _, h := range sortedHolds(holds) {
		if h.acq.Kind == kind {
			out[h.acq.Name] = append(out[h.acq.Name], h)
		}
	}
	return out
}

// checkPartition measures, for a partition w, how soon its holder learnt of
// the holds it had at the cut, and counts the workers that acquired nothing
// after the partition settled.
func checkPartition(r *Report, holds map[holdKey]*holdRec, w *Window) {
	if w == nil {
		return
	}
	told := int64(-1)
	after := map[int]bool{}
	procs := map[int]bool{}
	for _, h := range holds {
		procs[h.acq.Proc] = true
		if h.acq.Call >= w.Settled {
			after[h.acq.Proc] = true
		}
		if h.acq.Proc == w.Holder && h.acq.Ret <= w.Cut && h.end > w.Cut && h.lost != nil {
			told = max(told, h.lost.Ret)
		}
	}
	r.ToldAfterCut, r.ToldAfterHeal = -1, 0
	if told >= 0 {
		r.ToldAfterCut = Millis(math.Round(float64(told-w.Cut)/1e4) / 100)
		r.ToldAfterHeal = Millis(math.Round(float64(told-w.Heal)/1e4) / 100)
	}
	for p := range procs {
		if !after[p] {
			r.Unrecovered++
			r.Details = append(r.Details, fmt.Sprintf("violation: p%d acquired nothing after the partition settled", p))
		}
	}
}
