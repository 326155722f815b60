package rlock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
)

// owner is the Go counterpart of a Java thread: the identity that holds locks and
// re-enters them. Its id is the decimal part of the Redis field
// "<client uuid>:<owner id>".
type owner struct {
	id string
	// mu serializes the owner's script calls, so that the hold counts it sends as
	// expected values are never stale because of its own concurrent calls.
	mu sync.Mutex
}

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries a new owner. Locks taken with that
// ctx, or any ctx derived from it, belong to the owner: taking a lock the owner
// already holds re-enters it (the hold count goes up), and Mutex.Unlock with the
// ctx releases the owner's holds. It is the counterpart of a Java thread in
// Redisson; the owner is identified in Redis as "<client id>:<owner id>", where the
// owner id is a random positive 63-bit decimal number.
//
// Use an owner from one goroutine at a time for a given lock, as a Java thread
// would: its calls on one lock are serialized.
//
// A ctx without an owner gets a fresh owner for each acquisition: the lock then
// behaves like a plain non-reentrant mutex (a second Lock waits, like
// sync.Mutex) and is released through the returned Lease.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, newOwner())
}

func newOwner() *owner {
	return &owner{id: strconv.FormatInt(rand.Int64(), 10)}
}

// ownerFrom returns ctx's owner, or nil.
func ownerFrom(ctx context.Context) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	return o
}
