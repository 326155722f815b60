package rlock

import "github.com/holdfast-go/holdfast/lua"

// FairMutex is a reentrant lock granted in arrival order across every client
// and process, Java ones included (Redisson's getFairLock). Besides the lock's
// hash it keeps, in Redis, the waiters' queue "redisson_lock_queue:{name}" and
// their deadlines "redisson_lock_timeout:{name}".
//
// A Lock, or a TryLock with WithWaitTime, that cannot take the lock at once
// appends its owner to the queue and subscribes to the owner's own channel,
// "redisson_lock__channel:{name}:<owner field>". A free lock goes only to the
// queue's first waiter, and a release wakes only that waiter, on its channel. A
// waiter that gives up (ctx done, wait time over) leaves the queue at once; one
// whose process died is skipped once its deadline passes: its wait time, or
// WithFairWaitTimeout's (5 minutes by default) for Lock, after its turn was due.
// A TryLock without wait time never queues: it fails when the lock is held or
// others are queued.
//
// The deadlines are the clients' wall clocks, as in Redisson: with clocks
// skewed by more than a waiter's wait time, a live waiter can be skipped too
// early or a dead one too late (see docs/safety.md).
//
// Unlike Mutex, a release never hands the lock straight to a waiter of the
// same client: the queue in Redis decides. Otherwise a FairMutex is a Mutex.
type FairMutex struct{ Mutex }

// NewFairMutex returns a handle on the fair lock called name.
func (c *Client) NewFairMutex(name string) *FairMutex {
	return &FairMutex{newLayoutMutex(c, name, lua.LayoutFair, kind{})}
}

// NonReentrantFairMutex is a FairMutex that its owner cannot take twice
// (Redisson's getNonReentrantFairLock): a second Lock or TryLock by the owner
// that holds it fails at once with ErrNonReentrant, and the hold count stays 1.
type NonReentrantFairMutex struct{ Mutex }

// NewNonReentrantFairMutex returns a handle on the non-reentrant fair lock
// called name.
func (c *Client) NewNonReentrantFairMutex(name string) *NonReentrantFairMutex {
	return &NonReentrantFairMutex{newLayoutMutex(c, name, lua.LayoutFair, kind{nonReentrant: true})}
}
