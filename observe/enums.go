package observe

// Kind is the kind of object a call, hold or wait is on.
type Kind uint8

// The kinds of objects. Their String is the value of AttrKind.
const (
	KindMutex                 Kind = iota + 1 // rlock.Mutex: "mutex"
	KindNonReentrantMutex                     // "non_reentrant_mutex"
	KindFencedMutex                           // "fenced_mutex"
	KindSpinMutex                             // "spin_mutex"
	KindFairMutex                             // "fair_mutex"
	KindNonReentrantFairMutex                 // "non_reentrant_fair_mutex"
	KindReadMutex                             // a read/write lock's read side: "read_mutex"
	KindWriteMutex                            // its write side: "write_mutex"
	KindMultiLock                             // "multi_lock"
	KindRedLock                               // "red_lock"
	KindSemaphore                             // "semaphore"
	KindExpirableSemaphore                    // "expirable_semaphore"
	KindCountDownLatch                        // "count_down_latch"
	numKinds
)

var kinds = [numKinds]struct{ value, typ string }{
	{"unknown", "Unknown"},
	{"mutex", "Mutex"},
	{"non_reentrant_mutex", "NonReentrantMutex"},
	{"fenced_mutex", "FencedMutex"},
	{"spin_mutex", "SpinMutex"},
	{"fair_mutex", "FairMutex"},
	{"non_reentrant_fair_mutex", "NonReentrantFairMutex"},
	{"read_mutex", "ReadMutex"},
	{"write_mutex", "WriteMutex"},
	{"multi_lock", "MultiLock"},
	{"red_lock", "RedLock"},
	{"semaphore", "Semaphore"},
	{"expirable_semaphore", "ExpirableSemaphore"},
	{"count_down_latch", "CountDownLatch"},
}

// Kinds returns every kind, for an observer that precomputes per kind.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds-1)
	for k := KindMutex; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

// String returns the kind's attribute value: "mutex", "fair_mutex"...
func (k Kind) String() string { return kinds[k.index()].value }

// TypeName returns the Go type of the kind's objects in package rlock:
// "Mutex", "FairMutex"...
func (k Kind) TypeName() string { return kinds[k.index()].typ }

func (k Kind) index() Kind {
	if k >= numKinds {
		return 0
	}
	return k
}

// Op is the method of a public call.
type Op uint8

// The methods. Their String is the value of AttrOperation. The methods of a
// Lease, a MultiLease and a Permits handle have their own Op, as their span
// names are the handle's.
const (
	OpLock             Op = iota + 1 // Lock: "lock"
	OpTryLock                        // TryLock: "try_lock"
	OpUnlock                         // a lock's Unlock: "unlock"
	OpForceUnlock                    // "force_unlock"
	OpIsLocked                       // "is_locked"
	OpIsHeld                         // "is_held"
	OpHoldCount                      // "hold_count"
	OpRemainTTL                      // "remain_ttl"
	OpToken                          // FencedMutex.Token: "token"
	OpLeaseUnlock                    // Lease.Unlock, MultiLease.Unlock: "lease_unlock"
	OpAcquire                        // "acquire"
	OpTryAcquire                     // "try_acquire"
	OpRelease                        // a semaphore's Release: "release"
	OpReleaseIfExists                // "release_if_exists"
	OpPermitsRelease                 // Permits.Release: "permits_release"
	OpTrySetPermits                  // "try_set_permits"
	OpSetPermits                     // "set_permits"
	OpAddPermits                     // "add_permits"
	OpAvailablePermits               // "available_permits"
	OpAcquiredPermits                // "acquired_permits"
	OpPermits                        // ExpirableSemaphore.Permits: "permits"
	OpDrainPermits                   // "drain_permits"
	OpUpdateLease                    // "update_lease"
	OpLeaseTime                      // "lease_time"
	OpTrySetCount                    // "try_set_count"
	OpCountDown                      // "count_down"
	OpCount                          // "count"
	OpAwait                          // "await"
	OpDelete                         // "delete"
	numOps
)

var ops = [numOps]struct{ value, method string }{
	{"unknown", "Unknown"},
	{"lock", "Lock"},
	{"try_lock", "TryLock"},
	{"unlock", "Unlock"},
	{"force_unlock", "ForceUnlock"},
	{"is_locked", "IsLocked"},
	{"is_held", "IsHeld"},
	{"hold_count", "HoldCount"},
	{"remain_ttl", "RemainTTL"},
	{"token", "Token"},
	{"lease_unlock", "Unlock"},
	{"acquire", "Acquire"},
	{"try_acquire", "TryAcquire"},
	{"release", "Release"},
	{"release_if_exists", "ReleaseIfExists"},
	{"permits_release", "Release"},
	{"try_set_permits", "TrySetPermits"},
	{"set_permits", "SetPermits"},
	{"add_permits", "AddPermits"},
	{"available_permits", "AvailablePermits"},
	{"acquired_permits", "AcquiredPermits"},
	{"permits", "Permits"},
	{"drain_permits", "DrainPermits"},
	{"update_lease", "UpdateLease"},
	{"lease_time", "LeaseTime"},
	{"try_set_count", "TrySetCount"},
	{"count_down", "CountDown"},
	{"count", "Count"},
	{"await", "Await"},
	{"delete", "Delete"},
}

// Ops returns every operation, for an observer that precomputes per
// operation.
func Ops() []Op {
	out := make([]Op, 0, numOps-1)
	for o := OpLock; o < numOps; o++ {
		out = append(out, o)
	}
	return out
}

// String returns the operation's attribute value: "lock", "try_lock"...
func (o Op) String() string { return ops[o.index()].value }

// Method returns the Go method's name: "Lock", "TryLock"...
func (o Op) Method() string { return ops[o.index()].method }

// Acquires reports whether the operation is an acquisition: Lock, TryLock,
// Acquire, TryAcquire.
func (o Op) Acquires() bool {
	return o == OpLock || o == OpTryLock || o == OpAcquire || o == OpTryAcquire
}

func (o Op) index() Op {
	if o >= numOps {
		return 0
	}
	return o
}

// spanNames holds SpanName's answers, computed once.
var spanNames = func() (t [numKinds][numOps]string) {
	for k := Kind(0); k < numKinds; k++ {
		for o := Op(0); o < numOps; o++ {
			t[k][o] = "holdfast." + receiver(k, o) + "." + o.Method()
		}
	}
	return t
}()

// SpanName returns the name of the span of a call of op on an object of kind
// k, "holdfast.<Type>.<Method>": "holdfast.FairMutex.TryLock",
// "holdfast.Lease.Unlock", "holdfast.Permits.Release". It does not allocate.
func SpanName(k Kind, op Op) string { return spanNames[k.index()][op.index()] }

// receiver is the Go type whose method op is, on an object of kind k.
func receiver(k Kind, op Op) string {
	switch {
	case op == OpLeaseUnlock && (k == KindMultiLock || k == KindRedLock):
		return "MultiLease"
	case op == OpLeaseUnlock:
		return "Lease"
	case op == OpPermitsRelease:
		return "Permits"
	}
	return k.TypeName()
}
