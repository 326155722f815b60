package rlock

import (
	"time"

	"github.com/holdfast-go/holdfast/watchdog"
)

// follow returns s, which from now on also wakes every waiter of this client
// on channel when the client's tracker hears that key changed with nothing
// published (watchdog.Follow): a lock's or a latch's key gone, a semaphore's
// count above zero (count). That is how a hold that ends from outside (an
// operator's DEL, a FLUSHALL, an eviction, a restart that lost it, a holder
// whose lease ran out unseen) wakes the waiters of every process within a
// round trip, as an unlock's message would, and not at the end of the lease
// they last read; the waiters' queues and scripts then decide who gets in,
// as after a message. Closing the result stops following.
func (c *Client) follow(s subscription, channel, key string, count bool) subscription {
	stop := c.wd.Follow(&watchdog.Follow{Key: key, Count: count, News: func(at time.Time, _ int64) { c.hub.Changed(channel, at) }})
	return &followed{subscription: s, stop: stop}
}

// followed is a subscription whose Close also stops following its key.
type followed struct {
	subscription
	stop func()
}

// Close stops following, then closes the subscription.
func (f *followed) Close() {
	f.stop()
	f.subscription.Close()
}
