package observe

// Kind is the kind of object a call, hold or wait is on. The kinds are the
// variables Kind* below, one row each: read them, never assign them.
type Kind uint8

// kinds holds, by Kind, what newKind was given; index 0 is the unknown kind.
var kinds = registry{{"unknown", "Unknown"}}

// newKind adds a kind: its attribute value (AttrKind) and the Go type of its
// objects in package rlock. A new kind of object is one row below.
func newKind(value, typ string) Kind { return Kind(kinds.add(value, typ)) }

// The kinds of objects: their String is the value of AttrKind, their TypeName
// the Go type in package rlock.
var (
	KindMutex                 = newKind("mutex", "Mutex")
	KindNonReentrantMutex     = newKind("non_reentrant_mutex", "NonReentrantMutex")
	KindFencedMutex           = newKind("fenced_mutex", "FencedMutex")
	KindSpinMutex             = newKind("spin_mutex", "SpinMutex")
	KindFairMutex             = newKind("fair_mutex", "FairMutex")
	KindNonReentrantFairMutex = newKind("non_reentrant_fair_mutex", "NonReentrantFairMutex")
	KindReadMutex             = newKind("read_mutex", "ReadMutex")   // a read/write lock's read side
	KindWriteMutex            = newKind("write_mutex", "WriteMutex") // its write side
	KindMultiLock             = newKind("multi_lock", "MultiLock")
	KindRedLock               = newKind("red_lock", "RedLock")
	KindSemaphore             = newKind("semaphore", "Semaphore")
	KindExpirableSemaphore    = newKind("expirable_semaphore", "ExpirableSemaphore")
	KindCountDownLatch        = newKind("count_down_latch", "CountDownLatch")
	KindElection              = newKind("election", "Election") // its terms are holds of its lock
)

// Kinds returns every kind, for an observer that precomputes per kind.
func Kinds() []Kind { return every[Kind](kinds) }

// String returns the kind's attribute value: "mutex", "fair_mutex"...
func (k Kind) String() string { return kinds.at(int(k)).value }

// TypeName returns the Go type of the kind's objects in package rlock:
// "Mutex", "FairMutex"...
func (k Kind) TypeName() string { return kinds.at(int(k)).name }

func (k Kind) index() int { return kinds.index(int(k)) }

// Op is the method of a public call. The operations are the variables Op*
// below, one row each: read them, never assign them. The methods of a Lease, a
// MultiLease and a Permits handle have their own Op, as their span names are
// the handle's.
type Op uint8

// ops holds, by Op, what newOp was given; index 0 is the unknown operation.
var ops = registry{{"unknown", "Unknown"}}

// newOp adds an operation: its attribute value (AttrOperation) and the Go
// method's name. A new method is one row below.
func newOp(value, method string) Op { return Op(ops.add(value, method)) }

// The methods: their String is the value of AttrOperation, their Method the
// Go method's name.
var (
	OpLock             = newOp("lock", "Lock")
	OpTryLock          = newOp("try_lock", "TryLock")
	OpUnlock           = newOp("unlock", "Unlock") // a lock's Unlock
	OpForceUnlock      = newOp("force_unlock", "ForceUnlock")
	OpIsLocked         = newOp("is_locked", "IsLocked")
	OpIsHeld           = newOp("is_held", "IsHeld")
	OpHoldCount        = newOp("hold_count", "HoldCount")
	OpRemainTTL        = newOp("remain_ttl", "RemainTTL")
	OpToken            = newOp("token", "Token")         // FencedMutex.Token
	OpLeaseUnlock      = newOp("lease_unlock", "Unlock") // Lease.Unlock, MultiLease.Unlock
	OpAcquire          = newOp("acquire", "Acquire")
	OpTryAcquire       = newOp("try_acquire", "TryAcquire")
	OpRelease          = newOp("release", "Release") // a semaphore's Release
	OpReleaseIfExists  = newOp("release_if_exists", "ReleaseIfExists")
	OpPermitsRelease   = newOp("permits_release", "Release") // Permits.Release
	OpTrySetPermits    = newOp("try_set_permits", "TrySetPermits")
	OpSetPermits       = newOp("set_permits", "SetPermits")
	OpAddPermits       = newOp("add_permits", "AddPermits")
	OpAvailablePermits = newOp("available_permits", "AvailablePermits")
	OpAcquiredPermits  = newOp("acquired_permits", "AcquiredPermits")
	OpTotalPermits     = newOp("total_permits", "TotalPermits") // ExpirableSemaphore.TotalPermits
	OpDrainPermits     = newOp("drain_permits", "DrainPermits")
	OpUpdateLease      = newOp("update_lease", "UpdateLease")
	OpLeaseTime        = newOp("lease_time", "LeaseTime")
	OpTrySetCount      = newOp("try_set_count", "TrySetCount")
	OpCountDown        = newOp("count_down", "CountDown")
	OpCount            = newOp("count", "Count")
	OpAwait            = newOp("await", "Await")
	OpDelete           = newOp("delete", "Delete")
	OpCampaign         = newOp("campaign", "Campaign")
	OpProclaim         = newOp("proclaim", "Proclaim") // Leadership.Proclaim
	OpResign           = newOp("resign", "Resign")     // Leadership.Resign
	OpLeader           = newOp("leader", "Leader")
)

// Ops returns every operation, for an observer that precomputes per
// operation.
func Ops() []Op { return every[Op](ops) }

// String returns the operation's attribute value: "lock", "try_lock"...
func (o Op) String() string { return ops.at(int(o)).value }

// Method returns the Go method's name: "Lock", "TryLock"...
func (o Op) Method() string { return ops.at(int(o)).name }

// Acquires reports whether the operation is an acquisition: Lock, TryLock,
// Acquire, TryAcquire, Campaign.
func (o Op) Acquires() bool {
	return o == OpLock || o == OpTryLock || o == OpAcquire || o == OpTryAcquire || o == OpCampaign
}

func (o Op) index() int { return ops.index(int(o)) }

// registry holds the rows of an enum made at run time (Kind, Op), by value;
// row 0 is the unknown value, what an out-of-range value reads as.
type registry []struct{ value, name string }

// add appends a row and returns its index, the new value.
func (r *registry) add(value, name string) int {
	*r = append(*r, struct{ value, name string }{value, name})
	return len(*r) - 1
}

// index is i if it is a row, else 0.
func (r registry) index(i int) int {
	if i < 0 || i >= len(r) {
		return 0
	}
	return i
}

func (r registry) at(i int) struct{ value, name string } { return r[r.index(i)] }

// every returns every value of the registry but the unknown one.
func every[T ~uint8](r registry) []T {
	out := make([]T, 0, len(r)-1)
	for i := range len(r) - 1 {
		out = append(out, T(i+1))
	}
	return out
}

// spanNames holds SpanName's answers, by kind and operation, made once by
// init when every row above is there.
var spanNames [][]string

func init() {
	spanNames = make([][]string, len(kinds))
	for k := range kinds {
		spanNames[k] = make([]string, len(ops))
		for o := range ops {
			spanNames[k][o] = "holdfast." + receiver(Kind(k), Op(o)) + "." + Op(o).Method()
		}
	}
}

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
	case op == OpProclaim || op == OpResign:
		return "Leadership"
	}
	return k.TypeName()
}
