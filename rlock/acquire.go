package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
)

// attempt makes one acquisition attempt of name for o: one round trip, two when
// the owner's hold count had to be resynchronised. It returns the new lease, or
// an error matching ErrNotAcquired and the holder's remaining lease (-1: none).
func (c *Client) attempt(ctx context.Context, o *owner, name string, lo lockOptions) (*Lease, time.Duration, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	field := c.field(o)
	lease := c.leaseOf(lo)
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("%w: %s: %w", ErrNotAcquired, quote(name), err)
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, 0, ErrClosed
		}
		var expected int64
		if h := c.holds[holdKey{o.id, name}]; h != nil {
			expected = h.count
		}
		c.mu.Unlock()

		sent := time.Now()
		r, err := lua.Acquire(ctx, c.rdb, lua.AcquireArgs{Key: name, Field: field, Lease: lease, Expected: expected})
		if err != nil {
			if lua.IsWrongType(err) {
				return nil, 0, fmt.Errorf("%w: %s", ErrWrongType, quote(name))
			}
			if !isReply(err) {
				// The script may have run and only its reply was lost.
				c.undoAcquire(name, field, expected, lease)
			}
			return nil, 0, fmt.Errorf("rlock: lock %s: %w", quote(name), err)
		}
		switch {
		case r.Acquired:
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				c.undoAcquire(name, field, expected, lease)
				return nil, 0, ErrClosed
			}
			l := c.grant(o, name, expected+1, lo, sent)
			c.mu.Unlock()
			return l, 0, nil
		case r.Resync && try == 0:
			c.mu.Lock()
			lost := c.resync(o, name, r.Count)
			c.mu.Unlock()
			if lost != nil {
				c.reportLost(name, lost)
				return nil, 0, lost
			}
		case r.Resync:
			return nil, 0, fmt.Errorf("rlock: lock %s: hold count changed under a concurrent call of the same owner", quote(name))
		default:
			return nil, r.TTL, fmt.Errorf("%w: %s is held by another owner", ErrNotAcquired, quote(name))
		}
	}
}

// resync sets the owner's hold count to what Redis holds. When the owner's holds
// are gone it ends them and returns the ErrLockLost error. c.mu must be held.
func (c *Client) resync(o *owner, name string, count int64) error {
	h := c.holds[holdKey{o.id, name}]
	if count == 0 {
		if h == nil {
			return nil
		}
		err := fmt.Errorf("%w: %s: the owner's holds expired or were force-unlocked", ErrLockLost, quote(name))
		c.endHold(h, err)
		return err
	}
	if h == nil {
		// Holds left by calls whose reply never arrived: adopt them, so that the
		// owner's last Unlock gives them back too.
		h = &hold{key: holdKey{o.id, name}, name: name, field: c.field(o), owner: o}
		c.holds[h.key] = h
		c.state(name).held++
	}
	h.count = count
	return nil
}

// undoAcquire takes back an acquisition whose outcome is unknown or unwanted: it
// releases one hold if and only if the owner's count is expected+1, so it is a
// no-op when the acquisition did not happen. Failures are ignored: the hold then
// expires with its lease.
func (c *Client) undoAcquire(name, field string, expected int64, lease time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.latchTTL)
	defer cancel()
	_, _ = lua.Release(ctx, c.rdb, lua.ReleaseArgs{
		Key: name, Field: field, RequestID: newRequestID(), Lease: lease,
		Expected: expected + 1, Levels: 1, LatchTTL: c.latchTTL, Publish: c.publish,
	})
}

// isReply reports whether err is an error reply from Redis (the command ran and
// failed), as opposed to a network or context error after which the command may
// or may not have run.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
