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
// Wake-ups are tokens, not edges. A message "0" (a lock was released) gives one
// token to one subscription of this client; "1" (for read/write locks) gives one
// to every subscription. A token that finds no subscription with room is banked on
// the channel and handed to the next subscription that asks with Ready, so a
// message that arrives before a waiter starts to sleep is not lost. When the
// subscriber connection is re-established (go-redis reconnects and re-subscribes
// by itself) every subscription of every channel gets a token, because messages
// published during the gap are gone and every waiter must check the lock again.
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
