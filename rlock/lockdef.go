package rlock

import (
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
)

// lockDef is one lock handle's view of its lock: the names the scripts use, their
// layout (RLock's hash, the fair lock's, a side of a read/write lock) and the
// kind of Redisson lock object it is.
type lockDef struct {
	*lua.Lock
	kind
	// id is the lock's key in Client.locks: its name, preceded for the layouts
	// other than RLock's by a tag, so that a read/write lock's two sides (one
	// Redis key, two kinds of holds) each have their own entry.
	id string
	// seen is the lock object's kind as its observer sees it.
	seen observe.Kind
}

// newLockDef returns the lockDef of the lock name of the layout l and kind k.
func newLockDef(name string, l lua.Layout, k kind) *lockDef {
	return &lockDef{Lock: lua.NewLayoutLock(name, l), kind: k, id: entryID(name, l), seen: k.observed(l)}
}

// observed returns the observer's kind of the lock object of layout l and kind k.
func (k kind) observed(l lua.Layout) observe.Kind {
	switch {
	case l == lua.LayoutRead:
		return observe.KindReadMutex
	case l == lua.LayoutWrite:
		return observe.KindWriteMutex
	case l == lua.LayoutFair && k.nonReentrant:
		return observe.KindNonReentrantFairMutex
	case l == lua.LayoutFair:
		return observe.KindFairMutex
	case k.spin != nil:
		return observe.KindSpinMutex
	case k.elect:
		return observe.KindElection
	case k.fenced:
		return observe.KindFencedMutex
	case k.nonReentrant:
		return observe.KindNonReentrantMutex
	}
	return observe.KindMutex
}

// entryID returns the key in Client.locks of the lock name of the layout l.
func entryID(name string, l lua.Layout) string {
	switch l {
	case lua.LayoutFair:
		return "fair\x00" + name
	case lua.LayoutRead:
		return "read\x00" + name
	case lua.LayoutWrite:
		return "write\x00" + name
	}
	return name
}

// keyIDs returns the ids of the entries whose holds live in the lock's Redis
// key: both sides of a read/write lock, else the lock's own.
func (lk *lockDef) keyIDs() []string {
	switch lk.Layout() {
	case lua.LayoutRead, lua.LayoutWrite:
		return []string{entryID(lk.Name(), lua.LayoutRead), entryID(lk.Name(), lua.LayoutWrite)}
	}
	return []string{lk.id}
}

// kind is what tells the lock objects over one layout apart.
type kind struct {
	// nonReentrant: a second acquisition by the holding owner fails at once with
	// ErrNonReentrant (Redisson's NON_REENTRANT_REACQUIRE).
	nonReentrant bool
	// fenced: every acquisition takes a fencing token. A release never hands
	// the lock over, so that every holder's token comes from its own acquire.
	fenced bool
	// elect: the lock of an Election (fenced too): its holds are terms.
	elect bool
	// spin: waiters back off and retry instead of listening to pub/sub, and
	// releases publish nothing.
	spin Backoff
}

// handsOff reports whether a release may hand the lock to a waiter of this
// client: only RLock's layout has the hand-off in its release script.
func (lk *lockDef) handsOff() bool {
	return lk.Layout() == lua.LayoutLock && !lk.fenced && lk.spin == nil
}

// shared reports whether holds of other owners of this client leave the lock
// free to take: the read side of a read/write lock.
func (lk *lockDef) shared() bool { return lk.Layout() == lua.LayoutRead }

// fieldOf returns the field of owner o of the client id in lk's hash,
// "<client id>:<owner id>", or "<client id>:<owner id>:write" on a read/write
// lock's write side.
func (lk *lockDef) fieldOf(o *owner, id string) lua.Text {
	if lk.Layout() == lua.LayoutWrite {
		return o.writeField(id)
	}
	return o.field(id)
}
