package chaos

import (
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability model: one partition per object name; the sequential
// specification is a lock table that knows how many holders an object has,
// not who they are (a release by a non-holder therefore shows up as a grant
// beyond capacity that no release can explain).
//
//   - Exclusive kinds (every lock but a read/write lock's read side): an
//     acquire needs no holder at all.
//   - Shared kinds: a read acquire needs no exclusive holder; a permit
//     acquire needs fewer than Cap permits held.
//   - A release or an expiry (a hold lost: the holder learnt it at some point
//     after its acquisition) needs a holder of its side.
//   - A latch: set(C) succeeds only at count 0; a countdown takes one off (one
//     whose outcome is unknown may or may not have); an await returns only
//     while the count is 0.

// linIn is the input of one operation of the model.
type linIn struct {
	Op    string // acquire, release (expiries are releases), set, countdown, wait
	Excl  bool   // exclusive side
	Cap   int    // shared side: how many holders may share (1<<30 for readers)
	Count int64  // set: the count
}

// linOut is the output of one operation.
type linOut struct {
	OK      bool
	Unknown bool // the outcome is not known (a countdown that failed)
}

// linState is the state of one object.
type linState struct {
	Shared int   // holders of the shared side (readers, permits)
	Excl   bool  // an exclusive holder
	Latch  int64 // latch count
}

// linModel is the porcupine model of every object kind.
func linModel() porcupine.Model {
	m := &porcupine.NondeterministicModel{
		Partition: partitionByName,
		Init:      func() []any { return []any{linState{}} },
		Step: func(state, input, output any) []any {
			return step(state.(linState), input.(linIn), output.(linOut))
		},
	}
	return m.ToModel()
}

// step returns the states the object can be in after one operation (none
// when the operation is impossible from s).
func step(s linState, in linIn, out linOut) []any {
	switch in.Op {
	case OpAcquire:
		if in.Excl && s.Shared == 0 && !s.Excl {
			s.Excl = true
			return []any{s}
		}
		if !in.Excl && !s.Excl && s.Shared < in.Cap {
			s.Shared++
			return []any{s}
		}
	case OpRelease:
		if in.Excl && s.Excl {
			s.Excl = false
			return []any{s}
		}
		if !in.Excl && s.Shared > 0 {
			s.Shared--
			return []any{s}
		}
	case OpSet:
		if out.OK == (s.Latch == 0) {
			if out.OK {
				s.Latch = in.Count
			}
			return []any{s}
		}
	case OpCountDown:
		after := s
		after.Latch = max(s.Latch-1, 0)
		if out.Unknown {
			return []any{s, after}
		}
		return []any{after}
	case OpWait:
		if !out.OK || s.Latch == 0 {
			return []any{s}
		}
	}
	return nil
}

// partitionByName splits a history into one history per object.
func partitionByName(h []porcupine.Operation) [][]porcupine.Operation {
	byName := map[string][]porcupine.Operation{}
	var order []string
	for _, op := range h {
		n := op.Metadata.(string)
		if _, ok := byName[n]; !ok {
			order = append(order, n)
		}
		byName[n] = append(byName[n], op)
	}
	parts := make([][]porcupine.Operation, 0, len(order))
	for _, n := range order {
		parts = append(parts, byName[n])
	}
	return parts
}

// linearizable checks h within timeout: "yes", "no" or "unknown" (timed
// out), and the names of the objects whose histories are not linearizable.
func linearizable(h []porcupine.Operation, timeout time.Duration) (string, []string) {
	m := linModel()
	switch porcupine.CheckOperationsTimeout(m, h, timeout) {
	case porcupine.Ok:
		return "yes", nil
	case porcupine.Illegal:
		var bad []string
		for _, part := range partitionByName(h) {
			if porcupine.CheckOperationsTimeout(m, part, timeout) == porcupine.Illegal {
				bad = append(bad, part[0].Metadata.(string))
			}
		}
		return "no", bad
	default:
		return "unknown", nil
	}
}
