package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hist builds synthetic histories for the checker's own tests: times in ms.
type hist struct{ ops []Op }

// hold records a hold of kind on name by proc: acquired over [c, a], section
// [a, e], released over [e, r] (r 0: never released).
func (h *hist) hold(proc int, id int64, kind, name string, c, a, e, r int64) {
	ms := int64(time.Millisecond)
	h.ops = append(h.ops,
		Op{Proc: proc, Hold: id, Kind: kind, Name: name, Op: OpAcquire, Call: c * ms, Ret: a * ms, OK: true},
		Op{Proc: proc, Hold: id, Kind: kind, Name: name, Op: OpSection, Call: a * ms, Ret: e * ms, Writes: 1})
	if r != 0 {
		h.ops = append(h.ops, Op{Proc: proc, Hold: id, Kind: kind, Name: name, Op: OpRelease, Call: e * ms, Ret: r * ms, OK: true})
	}
}

// A clean mutex history passes every check.
func TestCheckerAcceptsMutualExclusion(t *testing.T) {
	var h hist
	h.hold(0, 1, KindMutex, "m", 0, 1, 5, 6)
	h.hold(1, 1, KindMutex, "m", 2, 6, 9, 10) // acquired as the release returned: closed intervals touch
	h.hold(0, 2, KindMutex, "m", 7, 11, 12, 13)
	r := Check(h.ops, Spec{Permits: 1, Counters: map[string]int64{"m": 3}})
	require.Equal(t, "yes", r.Linearizable, r.Details)
	require.Zero(t, r.Violations, r.Details)
	require.Equal(t, "pass", r.Verdict())
}

// A planted double grant (a second holder while the first had neither
// released nor lost the lock) is caught three ways: the sections overlap, the
// resource lost an increment, and the history is not linearizable.
func TestCheckerCatchesPlantedDoubleGrant(t *testing.T) {
	var h hist
	h.hold(0, 1, KindMutex, "m", 0, 1, 8, 9)
	h.hold(1, 1, KindMutex, "m", 2, 3, 5, 6) // granted while p0 held
	r := Check(h.ops, Spec{Permits: 1, Counters: map[string]int64{"m": 1}})
	require.Equal(t, "no", r.Linearizable)
	require.Equal(t, int64(1), r.LostIncr)
	require.Equal(t, 2, r.Violations, r.Details) // the overlap and the lost increment
	require.Equal(t, "FAIL", r.Verdict())
}

// A semaphore of 2 may have 2 holders, not 3; a read/write lock many readers,
// never a reader beside a writer.
func TestCheckerCapacities(t *testing.T) {
	var h hist
	h.hold(0, 1, KindExpirable, "s", 0, 1, 9, 10)
	h.hold(1, 1, KindExpirable, "s", 0, 2, 9, 10)
	h.hold(2, 1, KindRead, "rw", 0, 1, 9, 10)
	h.hold(3, 1, KindRead, "rw", 0, 2, 9, 10)
	r := Check(h.ops, Spec{Permits: 2})
	require.Equal(t, "yes", r.Linearizable, r.Details)
	require.Zero(t, r.Violations, r.Details)

	h.hold(4, 1, KindExpirable, "s", 0, 3, 9, 10)
	h.hold(5, 1, KindWrite, "rw", 0, 3, 9, 10)
	r = Check(h.ops, Spec{Permits: 2})
	require.Equal(t, "no", r.Linearizable)
	require.Equal(t, 3, r.Violations, r.Details) // the third permit; the writer beside each reader
}

// A holder that learnt of its loss during a fault and whose last write raced
// the successor is an inherent effect of leases, not a violation; the loss
// ends its hold in the linearizability model, and the takeover is measured.
func TestCheckerInherentOverlapAndLatencies(t *testing.T) {
	ms := int64(time.Millisecond)
	var h hist
	h.hold(0, 1, KindMutex, "m", 0, 1, 12, 0)
	h.ops = append(h.ops,
		Op{Proc: -1, Op: OpFault, Name: "flushall", Call: 5 * ms, Ret: 5 * ms, OK: true},
		Op{Proc: 0, Hold: 1, Kind: KindMutex, Name: "m", Op: OpLost, Call: 11 * ms, Ret: 11 * ms})
	h.ops[1].Lost = true
	h.hold(1, 1, KindMutex, "m", 2, 10, 14, 15)
	r := Check(h.ops, Spec{Permits: 1})
	require.Equal(t, "yes", r.Linearizable, r.Details)
	require.Zero(t, r.Violations, r.Details)
	require.Equal(t, 1, r.Inherent, r.Details)
	require.Equal(t, Millis(6), r.DetectP99)
	require.Equal(t, Millis(5), r.TakeoverP99)
}

// A FLUSHALL that ran after a holder's acquire script but whose reply reached
// the parent before the acquisition's reply reached the holder (seen in CI:
// the fault's Ret before the acquisition's Ret) ended that hold too: the
// overlap with the next holder is inherent, not a violation.
func TestCheckerFaultBeforeTheAcquisitionReturned(t *testing.T) {
	ms := int64(time.Millisecond)
	var h hist
	h.hold(0, 1, KindMutex, "m", 0, 6, 12, 0) // sent at 0, its reply at 6
	h.ops = append(h.ops,
		Op{Proc: -1, Op: OpFault, Name: "flushall", Call: 3 * ms, Ret: 5 * ms, OK: true},
		Op{Proc: 0, Hold: 1, Kind: KindMutex, Name: "m", Op: OpLost, Call: 11 * ms, Ret: 11 * ms})
	h.ops[1].Lost = true
	h.hold(1, 1, KindMutex, "m", 2, 7, 14, 15)
	r := Check(h.ops, Spec{Permits: 1})
	require.Zero(t, r.Violations, r.Details)
	require.Equal(t, 1, r.Inherent, r.Details)
	require.Equal(t, "pass", r.Verdict(), r.Details)
}

// Two handles that said valid at one moment on a semaphore of one permit
// are a violation, even when the first holder later learnt of its loss and
// its fixed lease could have run out by its section's end (a late
// acquisition reply granted an expired permit, and another client reclaimed
// it). Only a fault that can end holds in Redis excuses it.
func TestCheckerBothValid(t *testing.T) {
	ms := int64(time.Millisecond)
	grants := func(aValid int64, fault *Op) Report {
		var h hist
		h.hold(0, 1, KindExpirable, "s", 0, 150, 160, 0) // its reply came past its 100 ms lease
		h.ops[0].Lease = 100 * ms
		h.ops[1].Lost, h.ops[1].Valid = true, aValid*ms
		h.ops = append(h.ops, Op{Proc: 0, Hold: 1, Kind: KindExpirable, Name: "s", Op: OpLost, Call: 161 * ms, Ret: 161 * ms})
		h.hold(1, 1, KindExpirable, "s", 140, 152, 158, 159) // reclaimed the expired permit
		h.ops[len(h.ops)-2].Valid = 153 * ms
		if fault != nil {
			h.ops = append(h.ops, *fault)
		}
		return Check(h.ops, Spec{Permits: 1})
	}
	r := grants(155, nil)
	require.Equal(t, 1, r.Violations, r.Details)
	require.Equal(t, "FAIL", r.Verdict())

	r = grants(151, nil) // the first holder's last valid check came before the second's grant: a race
	require.Zero(t, r.Violations, r.Details)
	require.Equal(t, 1, r.Inherent, r.Details)

	r = grants(155, &Op{Proc: -1, Op: OpFault, Name: "late-replies", Call: 10 * ms, Ret: 300 * ms})
	require.Equal(t, 1, r.Violations, "a fault that cannot end holds in Redis excuses nothing: %v", r.Details)

	r = grants(155, &Op{Proc: -1, Op: OpFault, Name: "flushall", Call: 120 * ms, Ret: 121 * ms, OK: true})
	require.Zero(t, r.Violations, "a FLUSHALL while it held: %v", r.Details)
}

// Calls that never returned, or returned long past their bound, are stuck.
func TestCheckerStuck(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []Op{
		{Op: OpAcquire, Kind: KindMutex, Name: "m", Call: 1, Ret: 0, Bound: 100 * ms},
		{Op: OpWait, Kind: KindLatch, Name: "l", Call: 1, Ret: 5000 * ms, Bound: 100 * ms},
		{Op: OpAcquire, Kind: KindMutex, Name: "m", Call: 1, Ret: 90 * ms, Bound: 100 * ms},
	}
	r := Check(ops, Spec{Permits: 1})
	require.Equal(t, 2, r.Stuck, r.Details)
}

// A latch's await may not return while the count is above zero.
func TestCheckerLatch(t *testing.T) {
	ops := []Op{
		{Proc: -1, Op: OpSet, Kind: KindLatch, Name: "l", Call: 0, Ret: 1, OK: true, Bound: 2},
		{Proc: 0, Op: OpCountDown, Kind: KindLatch, Name: "l", Call: 2, Ret: 3, OK: true},
		{Proc: 1, Op: OpWait, Kind: KindLatch, Name: "l", Call: 2, Ret: 4, OK: true}, // one countdown short
		{Proc: 0, Op: OpCountDown, Kind: KindLatch, Name: "l", Call: 5, Ret: 6, OK: true},
	}
	require.Equal(t, "no", Check(ops, Spec{}).Linearizable)
	ops[2].Ret = 7
	require.Equal(t, "yes", Check(ops, Spec{}).Linearizable)
}

// A partition: the holder (p0) cut off with its primary keeps a handle that
// says valid while another process (p1) holds the lock it took on the other
// side. Without the promise (no replica acknowledgements) the overlap is
// inherent and measured; with it (Strict) it is a violation, whatever the
// fault. The report says how long both handles were valid, when the holder
// was told after the cut and the heal, and a process that took nothing after
// the partition settled has not recovered.
func TestCheckerPartition(t *testing.T) {
	ms := int64(time.Millisecond)
	history := func() ([]Op, *Window) {
		var h hist
		h.hold(0, 1, KindMutex, "m", 0, 1, 250, 0) // held across the cut; told at 251
		h.ops[1].Lost, h.ops[1].Valid = true, 240*ms
		h.ops = append(h.ops, Op{Proc: 0, Hold: 1, Kind: KindMutex, Name: "m", Op: OpLost, Call: 251 * ms, Ret: 251 * ms})
		h.hold(1, 1, KindMutex, "m", 50, 100, 120, 121) // took it on the other side at 100
		h.ops[len(h.ops)-2].Valid = 110 * ms
		h.hold(1, 2, KindMutex, "m", 300, 310, 320, 321) // after the partition settled
		w := &Window{Cut: 10 * ms, Heal: 210 * ms, Settled: 290 * ms}
		h.ops = append(h.ops, Op{Proc: -1, Op: OpFault, Name: "primary-with-holder", Call: w.Cut, Ret: w.Settled, OK: true})
		return h.ops, w
	}
	ops, w := history()
	r := Check(ops, Spec{Permits: 1, Partition: w})
	require.Zero(t, r.Violations, r.Details)
	require.Positive(t, r.Inherent, r.Details)
	require.Equal(t, Millis(140), r.ValidOverlap, "valid from 100 (p1's grant) to 240 (p0's last valid check)")
	require.Equal(t, Millis(241), r.ToldAfterCut)
	require.Equal(t, Millis(41), r.ToldAfterHeal)
	require.Equal(t, 1, r.Unrecovered, "p0 took nothing after the partition settled")
	require.Equal(t, "FAIL", r.Verdict(), "a process that did not recover fails the scenario")

	ops, w = history()
	ops = append(ops, Op{Proc: 0, Hold: 9, Kind: KindMutex, Name: "m", Op: OpAcquire, Call: 330 * ms, Ret: 331 * ms, OK: true})
	r = Check(ops, Spec{Permits: 1, Partition: w, Strict: true})
	require.Zero(t, r.Unrecovered, r.Details)
	require.Equal(t, 1, r.Violations, "with acknowledgements, two valid handles are a violation: %v", r.Details)
}

// Fencing tokens that go back (a later holder of a FencedMutex with a
// smaller token) are a violation: the older holder's writes would pass.
func TestCheckerTokensGoingBack(t *testing.T) {
	var h hist
	h.hold(0, 1, KindFenced, "f", 0, 1, 5, 6)
	h.ops[0].Token = 7
	h.hold(1, 1, KindFenced, "f", 7, 8, 9, 10)
	h.ops[len(h.ops)-3].Token = 5
	r := Check(h.ops, Spec{Permits: 1, Counters: map[string]int64{"f": 2}})
	require.Equal(t, 1, r.Violations, r.Details)
}
