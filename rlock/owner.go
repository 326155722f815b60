package rlock

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/holdfast-go/holdfast/lua"
)

// owner is the Go counterpart of a Java thread: the identity that holds locks and
// re-enters them. Its id is the decimal part of the Redis field
// "<client uuid>:<owner id>".
type owner struct {
	id int64 // random, positive

	// The owner's script calls on one lock of one client are serialized, so that
	// the hold count a call sends as its expected value is never stale because of
	// the owner's own concurrent calls on that lock. Calls on different locks, or
	// on locks of the same name in different clients (a RedLock), run in parallel.
	mu      sync.Mutex
	idle    sync.Cond  // L = &mu; broadcast when a call ends
	busy    []lockRef  // the locks with a call of this owner in flight
	busyBuf [1]lockRef // busy's first backing array: no allocation for one call

	// The owner's field, "<client id>:<owner id>", for the client that used the
	// owner last: built once, not on every call.
	fieldClient string
	fieldText   lua.Text
	writeText   lua.Text // fieldText + ":write", made on first use
}

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries a new owner. Locks taken with that
// ctx, or any ctx derived from it, belong to the owner: taking a lock the owner
// already holds re-enters it (the hold count goes up), and Mutex.Unlock with the
// ctx releases the owner's holds. It is the counterpart of a Java thread in
// Redisson; the owner is identified in Redis as "<client id>:<owner id>", where the
// owner id is a random positive 63-bit decimal number.
//
// An owner may be used from several goroutines: its calls on one lock are then
// serialized (each waits for the round trip of the one before), its calls on
// different locks are not.
//
// A ctx without an owner gets a fresh owner for each acquisition: the lock then
// behaves like a plain non-reentrant mutex (a second Lock waits, like
// sync.Mutex) and is released through the returned Lease.
//
// Two traps, both a nested Lock that waits for its own caller's lock until its
// ctx ends: a nested call whose ctx does not carry the holder's owner (a
// context.Background(), or a ctx not derived from the one WithOwner returned),
// and WithOwner called again on a ctx that already has an owner, which starts a
// new owner that never shares the first one's holds. Call WithOwner once per
// unit of work (where a Java thread would begin) and pass that ctx down. The
// error of such a wait names the holding owner of the same client.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, newOwner())
}

func newOwner() *owner {
	o := &owner{id: rand.Int64()}
	o.idle.L = &o.mu
	o.busy = o.busyBuf[:0]
	return o
}

// field returns the owner's field in locks taken by the client clientID.
func (o *owner) field(clientID string) lua.Text {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fieldClient != clientID {
		var id [20]byte
		o.fieldText = lua.NewText(clientID + ":" + string(strconv.AppendInt(id[:0], o.id, 10)))
		o.writeText = lua.Text{}
		o.fieldClient = clientID
	}
	return o.fieldText
}

// writeField returns the owner's field on a read/write lock's write side.
func (o *owner) writeField(clientID string) lua.Text {
	f := o.field(clientID)
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.writeText.String(); len(w) != len(f.String())+len(lua.WriteSuffix) || w[:len(f.String())] != f.String() {
		o.writeText = lua.NewText(f.String() + lua.WriteSuffix)
	}
	return o.writeText
}

// ownerFrom returns ctx's owner, or nil.
func ownerFrom(ctx context.Context) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	return o
}

// lockRef names one lock of one client.
type lockRef struct {
	client string // the client's id
	name   string
}

// lockCalls waits until no other call of the owner on the lock is in flight,
// and marks this one: the owner's calls on one lock are serialised, so that the
// hold count it sends is never stale because of its own concurrency.
// unlockCalls must follow.
func (o *owner) lockCalls(lock lockRef) {
	o.mu.Lock()
	for slices.Contains(o.busy, lock) {
		o.idle.Wait()
	}
	o.busy = append(o.busy, lock)
	o.mu.Unlock()
}

// unlockCalls marks the owner's call on the lock finished.
func (o *owner) unlockCalls(lock lockRef) {
	o.mu.Lock()
	if i := slices.Index(o.busy, lock); i >= 0 {
		o.busy = slices.Delete(o.busy, i, i+1)
	}
	o.idle.Broadcast()
	o.mu.Unlock()
}
