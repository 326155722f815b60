package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The operations of a history (Op.Op).
const (
	OpAcquire   = "acquire"   // a lock or permit taken: Call..Ret of Lock/Acquire
	OpRelease   = "release"   // Unlock/Release of hold Hold; OK says whether it was confirmed
	OpLost      = "lost"      // the holder learnt its hold Hold was lost (Done closed or Err set), at Ret
	OpSection   = "cs"        // the critical section of hold Hold: Call = acquired, Ret = last write ended
	OpWait      = "wait"      // CountDownLatch.Await
	OpCountDown = "countdown" // CountDownLatch.CountDown
	OpSet       = "set"       // CountDownLatch.TrySetCount by the parent; OK = it set the count
	OpFault     = "fault"     // a fault injected by the parent: Name says which, Call..Ret its span
	// OpView is a follower's view of an election (Observe): delivered at Ret,
	// read in Call..Ret (since the follower's previous view); OK: a leader
	// leads; Token: its term, or without a leader the latest term.
	OpView = "view"
)

// Op is one operation of a history, recorded by a worker process (or by the
// parent for faults and latch counts). Times are CLOCK_MONOTONIC nanoseconds:
// one clock for every process of the host, so intervals of different
// processes compare.
type Op struct {
	Proc  int    `json:"p"`           // worker index; -1 for the parent
	G     int    `json:"g"`           // goroutine within the process
	Kind  string `json:"k"`           // object kind (see kinds.go)
	Name  string `json:"n"`           // object name; for a fault, the fault
	Op    string `json:"op"`          // Op* constant
	Call  int64  `json:"c"`           // invocation time
	Ret   int64  `json:"r"`           // return time; 0: never returned (stuck)
	OK    bool   `json:"ok"`          // outcome
	Err   string `json:"e,omitempty"` // error text when the call failed
	Token int64  `json:"t,omitempty"` // fencing token of the acquisition (FencedMutex)
	Hold  int64  `json:"h,omitempty"` // hold id, unique per process, linking acquire/release/lost/cs
	Bound int64  `json:"b,omitempty"` // acquire/wait: the call's wait bound (ns); fault: target proc + 1 (0: global)
	Lease int64  `json:"l,omitempty"` // acquire: the fixed lease (ns), 0 for a watchdog lease
	// Writes is how many increments a critical section made on the shared
	// resource and the resource confirmed; Stale how many fenced writes it refused.
	Writes int64 `json:"w,omitempty"`
	Stale  int64 `json:"s,omitempty"`
	// Lost: the section ended because the holder learnt its hold was lost.
	Lost bool `json:"lo,omitempty"`
	// Valid is when the section's last check of the hold (Err) that found it
	// valid began: the holder's handle said valid from the acquisition's
	// return until at least then. 0: no check found it valid.
	Valid int64 `json:"v,omitempty"`
	// LastWrite is when the section's last write was sent (after its last Err check).
	LastWrite int64 `json:"lw,omitempty"`
}

// Mono returns CLOCK_MONOTONIC in nanoseconds.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// linePrefix starts every history line a worker prints.
const linePrefix = "OP "

// Recorder writes a process's operations as they happen, one JSON line each,
// so that the parent has the history up to the moment a worker is killed. It
// also tracks calls in flight, so that a worker can report those that never
// returned. Safe for concurrent use.
type Recorder struct {
	Proc int

	mu      sync.Mutex
	w       io.Writer
	next    int64
	pending map[int64]Op
}

// NewRecorder returns a recorder for process proc writing to w.
func NewRecorder(proc int, w io.Writer) *Recorder {
	return &Recorder{Proc: proc, w: w, pending: map[int64]Op{}}
}

// Begin registers a call in flight and returns its key for End.
func (r *Recorder) Begin(op Op) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	r.pending[r.next] = op
	return r.next
}

// End removes the call key from the calls in flight and records op.
func (r *Recorder) End(key int64, op Op) {
	r.mu.Lock()
	delete(r.pending, key)
	r.mu.Unlock()
	r.Record(op)
}

// Record writes op (with the recorder's process).
func (r *Recorder) Record(op Op) {
	op.Proc = r.Proc
	b, err := json.Marshal(op)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, "%s%s\n", linePrefix, b)
}

// FlushPending records every call still in flight with Ret 0 (never
// returned) and returns how many there were.
func (r *Recorder) FlushPending() int {
	r.mu.Lock()
	ops := make([]Op, 0, len(r.pending))
	for _, op := range r.pending {
		ops = append(ops, op)
	}
	r.pending = map[int64]Op{}
	r.mu.Unlock()
	for _, op := range ops {
		op.Ret = 0
		r.Record(op)
	}
	return len(ops)
}

// NewHold returns a hold id unique within the process.
func (r *Recorder) NewHold() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.next
}

// ParseOp reads a history line written by a Recorder; ok is false for other lines.
func ParseOp(line string) (op Op, ok bool, err error) {
	rest, found := strings.CutPrefix(line, linePrefix)
	if !found {
		return Op{}, false, nil
	}
	err = json.Unmarshal([]byte(rest), &op)
	return op, err == nil, err
}
