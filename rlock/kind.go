package rlock

import "github.com/holdfast-go/holdfast/lua"

// lockDef is one lock handle's view of its lock: the names the scripts use and
// the kind of Redisson lock object it is (Mutex, FencedMutex, SpinMutex,
// NonReentrantMutex). All share RLock's hash layout and scripts.
type lockDef struct {
	*lua.Lock
	kind
}

// kind is what tells the lock objects over RLock's hash apart.
type kind struct {
	// nonReentrant: a second acquisition by the holding owner fails at once with
	// ErrReentry (Redisson's NON_REENTRANT_REACQUIRE).
	nonReentrant bool
	// fenced: every acquisition takes a fencing token. A release never hands
	// the lock over, so that every holder's token comes from its own acquire.
	fenced bool
	// spin: waiters back off and retry instead of listening to pub/sub, and
	// releases publish nothing.
	spin Backoff
}

// handsOff reports whether a release may hand the lock to a waiter of this client.
func (k kind) handsOff() bool { return !k.fenced && k.spin == nil }
