package chaos

// The object kinds a scenario can exercise (Op.Kind).
const (
	KindMutex        = "Mutex"
	KindFair         = "FairMutex"
	KindRead         = "RWMutex.read"
	KindWrite        = "RWMutex.write"
	KindSpin         = "SpinMutex"
	KindFenced       = "FencedMutex"
	KindNonReentrant = "NonReentrantMutex"
	KindSemaphore    = "Semaphore"
	KindExpirable    = "ExpirableSemaphore"
	KindLatch        = "CountDownLatch"
	// KindElection is an Election: Campaign, a critical section that writes
	// with the term's token, Resign; and in each worker a follower per name
	// that records every view Observe delivers (see election.go).
	KindElection = "Election"
)

// AllLocks are the lock kinds; AllKinds every kind.
var (
	AllLocks = []string{KindMutex, KindFair, KindRead, KindWrite, KindSpin, KindFenced, KindNonReentrant}
	AllKinds = append(append([]string{}, AllLocks...), KindSemaphore, KindExpirable, KindLatch)
	// Leased are the kinds whose holds end by themselves (a lease): every
	// kind but the plain Semaphore, whose permits have no owner, and the latch.
	Leased = append(append([]string{}, AllLocks...), KindExpirable)
)

// exclusive reports whether a hold of kind excludes every other hold of its name.
func exclusive(kind string) bool {
	return kind != KindRead && kind != KindSemaphore && kind != KindExpirable
}

// capacity is how many shared holds of kind may coexist.
func capacity(kind string, permits int) int {
	if kind == KindRead {
		return 1 << 30
	}
	return permits
}

// objectName is the Redis name of object i of kind under prefix: both sides of
// a read/write lock share theirs.
func objectName(prefix, kind string, i int) string {
	if kind == KindRead || kind == KindWrite {
		kind = "RWMutex"
	}
	return prefix + kind + ":" + itoa(i)
}

// itoa formats a small non-negative int.
func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
