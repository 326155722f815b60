// Package pubsub is a building block of package rlock: it shares one subscriber
// connection among all the waiters of a client. Applications use rlock (Client,
// Mutex and the other locks), whose waits run on this package, and never this
// package directly.
//
// A Hub is owned by one rlock.Client. Waiters call Subscribe for the channel on
// which a lock announces its releases; every waiter of the client on the same
// channel shares one Redis subscription, counted by reference. When the last
// waiter closes its Subscription the channel stays subscribed for a short linger
// time, so that a lock taken and released in a tight loop does not make the client
// SUBSCRIBE and UNSUBSCRIBE on every cycle; after that the hub unsubscribes.
//
// Wake-ups are tokens, not edges, and the subscriber decides how many a message
// gives: each Subscribe names a WakePolicy, a function from a message's payload
// to the number of subscriptions it wakes (All for every one). The hub reads no
// payload itself. A message gives one token to each of up to that many
// subscriptions of the channel (oldest first) that have room for one; what is
// left is banked on the channel, at most one token per subscription, and handed
// to the next subscription that asks with Ready, so a message that arrives before
// a waiter starts to sleep is not lost. All gives every subscription a token and
// banks nothing; a policy's 0 or less wakes none. (For example rlock's policy
// wakes one waiter per lock release and every waiter when a read/write lock's
// write side is released: that rule is rlock's, not this package's.) When the
// subscriber connection is re-established (go-redis reconnects and re-subscribes
// by itself) every subscription of every channel gets a token, whatever its
// policy, because messages published during the gap are gone and every waiter
// must look again.
//
// The dispatcher goroutine never blocks on a waiter: it only moves tokens under a
// mutex. Pub/sub delivery is at most once, so waiters must also bound every wait
// (by the lock's remaining lease); the hub makes lost messages rare, not impossible.
//
// On a Redis Cluster (7.0 or later) locks announce releases with SPUBLISH on shard
// channels, which stay in the shard that owns the lock's slot. SSubscribe joins
// such a channel through a feed per shard: one connection, subscribed one
// channel per command and rebuilt on any trouble (shard.go).
//
// No pub/sub work happens until the first Subscribe: the subscriber connection is
// opened lazily, and an uncontended lock never touches the hub.
package pubsub
