package rlock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/holdfast-go/holdfast/lua"
)

// unlock gives back one lease: one round trip (two when the owner's count had to
// be resynchronised). The owner's last lease gives back every hold the owner
// still has on the lock.
func (c *Client) unlock(ctx context.Context, l *Lease) error {
	h := l.h
	h.owner.mu.Lock()
	defer h.owner.mu.Unlock()
	for try := 0; ; try++ {
		c.mu.Lock()
		if l.err != nil {
			err := l.err
			c.mu.Unlock()
			return fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(h.name), err)
		}
		if c.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		args := lua.ReleaseArgs{
			Key: h.name, Field: h.field, Expected: h.count, Levels: 1,
			LatchTTL: c.latchTTL, Publish: c.publish,
		}
		if len(h.leases) == 1 {
			args.Levels = h.count
		}
		final := args.Levels >= h.count
		var succ *waiter
		st := c.locks[h.name]
		if final {
			h.releasing = true
			st.releasing++
			if succ = c.successor(st); succ != nil {
				args.Successor = c.field(succ.o)
				args.SuccessorLease = c.leaseOf(succ.lo)
				args.OnlyIfAlone = st.streak >= maxHandOffs
			}
		} else {
			args.Lease = c.remainingLease(h, l)
		}
		if l.releaseID == "" {
			l.releaseID = newRequestID()
		}
		args.RequestID = l.releaseID
		c.mu.Unlock()

		sent := time.Now()
		r, err := lua.Release(ctx, c.rdb, args)

		c.mu.Lock()
		if final {
			h.releasing = false
			st.releasing--
		}
		switch {
		case err != nil && lua.IsWrongType(err):
			err = fmt.Errorf("%w: %s: %w", ErrNotHeld, quote(h.name), ErrWrongType)
			c.endHandOff(succ, false)
			c.endHold(h, fmt.Errorf("%w: %s: the key was replaced by another type", ErrLockLost, quote(h.name)))
			c.mu.Unlock()
			return err
		case err != nil:
			// Outcome unknown: keep the lease open so that Unlock can be retried with
			// the same request id, and let the successor find out by itself.
			c.endHandOff(succ, false)
			if lost := h.lostWhileReleasing; lost != nil {
				c.endHold(h, lost)
			}
			h.lostWhileReleasing = nil
			c.mu.Unlock()
			return fmt.Errorf("rlock: unlock %s: %w", quote(h.name), err)
		}
		h.lostWhileReleasing = nil
		switch r.Outcome {
		case lua.Partial:
			h.count -= args.Levels
			c.removeLease(h, l)
			endLease(l, ErrUnlocked)
			h.wd.Update(sent.Add(args.Lease), h.renewed())
			c.mu.Unlock()
			return nil
		case lua.Released, lua.HandedOff:
			endLease(l, ErrUnlocked)
			c.endHold(h, ErrUnlocked)
			if r.Outcome == lua.HandedOff {
				c.handOff(st, succ, sent)
			} else {
				st.streak = 0
				if len(st.waiters) > 0 {
					st.echoes++
				}
				c.endHandOff(succ, true)
			}
			c.mu.Unlock()
			return nil
		case lua.Resync:
			c.endHandOff(succ, false)
			lost := c.resync(h.owner, h.name, r.Count)
			c.mu.Unlock()
			if try > 0 {
				return fmt.Errorf("rlock: unlock %s: hold count changed under a concurrent call of the same owner", quote(h.name))
			}
			if lost != nil {
				return fmt.Errorf("%w: %w", ErrNotHeld, lost)
			}
		default: // lua.NotHeld: the hold expired or was deleted before this unlock
			c.endHandOff(succ, false)
			lost := fmt.Errorf("%w: %s: the lock expired or was force-unlocked before Unlock", ErrLockLost, quote(h.name))
			c.endHold(h, lost)
			c.mu.Unlock()
			c.reportLost(h.name, lost)
			return fmt.Errorf("%w: %w", ErrNotHeld, lost)
		}
	}
}

// remainingLease returns the lease a partial release re-applies: the watchdog
// timeout while a watchdog lease stays open, else the lease of the latest
// acquisition that stays open (Redisson re-applies the last lease used). c.mu
// must be held.
func (c *Client) remainingLease(h *hold, releasing *Lease) time.Duration {
	var last time.Duration
	for _, l := range h.leases {
		if l == releasing {
			continue
		}
		if l.lease == 0 {
			return c.opts.watchdogTimeout
		}
		last = l.lease
	}
	if last == 0 {
		return c.opts.watchdogTimeout
	}
	return last
}

func (c *Client) removeLease(h *hold, l *Lease) {
	for i, x := range h.leases {
		if x == l {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			return
		}
	}
}

// newRequestID returns 16 random bytes as 32 hex digits, Redisson's request id.
func newRequestID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}
