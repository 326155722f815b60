package rlock

import "github.com/holdfast-go/holdfast/watchdog"

// follow returns s, which from now on also wakes every waiter of this client
// on channel when the client's tracker hears that key changed with nothing
// published (watchdog.Follow): a lock's or a latch's key gone, a semaphore's
// count above zero (count). That is how a hold that ends from outside (an
// operator's DEL, a FLUSHALL, an eviction, a restart that lost it, a holder
// whose lease ran out unseen) wakes the waiters of every process within a
// round trip, as an unlock's message would, and not at the end of the lease
// they last read; the waiters' queues and scripts then decide who gets in,
// as after a message. Closing the result stops following.
func (c *core) follow(s subscription, channel, key string, count bool) subscription {
	return c.followWith(s, channel, &watchdog.Follow{Key: key, Count: count,
		News: func(r watchdog.Read) { c.hub.Changed(channel, r.At) },
	})
}

// followFair is follow for a fair lock's waiter whose field is field, on its
// own channel: as the fair lock's release does, only the first waiter of the
// lock's queue (queue) is woken, and only when it is this one, or the queue
// is empty; the others would attempt in vain.
func (c *core) followFair(s subscription, channel, key, queue, field string) subscription {
	return c.followWith(s, channel, &watchdog.Follow{Key: key, Queue: queue,
		News: func(r watchdog.Read) {
			if r.Head == "" || r.Head == field {
				c.hub.Changed(channel, r.At)
			}
		},
	})
}

// followWith starts f, which tells channel, and returns s with it.
func (c *core) followWith(s subscription, channel string, f *watchdog.Follow) subscription {
	return &followed{subscription: s, stop: c.wd.Follow(f)}
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
