package lua

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// AcquireArgs are the arguments of Acquire.
type AcquireArgs struct {
	Lock     *Lock  // the lock
	Field    Text   // the owner, "<client uuid>:<owner id>"
	Lease    Millis // time to live given to the lock on success
	Expected int64  // the owner's hold count as the caller knows it
	Acks     Acks   // replica acknowledgements to wait for
	// Fenced makes the acquisition take a fencing token (Redisson's RFencedLock):
	// INCR of the lock's token key, returned in AcquireReply.Token.
	Fenced bool
	// Elect, on a Fenced acquisition, makes it a campaign in an election
	// (elect_acquire.lua): an acquisition that takes a new term records the
	// leader and announces it in the same step.
	Elect *Elect
	// Publish is the command a fair lock's acquisition wakes the next waiter
	// with: Publish or ShardedPublish; "" means Publish.
	Publish string
	// Wait, on a fair lock, queues the owner when the lock is not its to take,
	// and is how long it may then wait once its turn comes before it is skipped
	// as dead (Redisson's thread wait time). Zero: a single attempt that never
	// queues.
	Wait time.Duration
}

// AcquireReply is what Acquire found.
type AcquireReply struct {
	// Acquired reports that the owner now holds the lock Expected+1 times.
	Acquired bool
	// TTL is the holder's remaining lease when the lock is held by another owner;
	// -1 means the holder's key has no expiry.
	TTL time.Duration
	// Resync reports that Redis holds Count for this owner, not Expected, and that
	// nothing was changed. Count == 0 means the owner's holds were lost.
	Resync bool
	Count  int64
	// Acked is how many replicas acknowledged the call's writes, when Acks asked.
	Acked int
	// Token is the fencing token of a fenced acquisition.
	Token int64
}

// Acquire takes the lock for an owner or re-enters it (acquire.lua). A second
// execution of the same call, as go-redis makes after a lost reply, acquires nothing
// more. A value at Key that is not a hash fails with a WRONGTYPE error and stays as it
// was.
func Acquire(ctx context.Context, rdb Processor, a AcquireArgs) (AcquireReply, error) {
	v, acked, err := acquireCall(ctx, rdb, a)
	if err != nil {
		return AcquireReply{}, err
	}
	switch v := v.(type) {
	case string:
		if v == "OK" {
			return AcquireReply{Acquired: true, Acked: acked}, nil
		}
	case int64:
		return AcquireReply{TTL: ttl(v)}, nil
	case []any:
		if n, ok := firstInt(v); ok {
			return AcquireReply{Resync: true, Count: n}, nil
		}
		if len(v) == 2 && v[0] == "OK" {
			if t, ok := v[1].(int64); ok {
				return AcquireReply{Acquired: true, Acked: acked, Token: t}, nil
			}
		}
	}
	return AcquireReply{}, fmt.Errorf("lua: unexpected acquire reply %#v", v)
}

// acquireCall sends the acquire script of a's layout.
func acquireCall(ctx context.Context, rdb Processor, a AcquireArgs) (any, int, error) {
	l := a.Lock
	switch {
	case l.layout == LayoutFair:
		return fairAcquireScript.call(ctx, rdb, []any{nil, nil, 3, l.key, l.queue, l.dl,
			a.Lease.arg(), a.Field.arg(), a.Expected, a.Wait.Milliseconds(), now(), publish(a.Publish), l.ch}, a.Acks)
	case l.layout == LayoutRead:
		return readAcquireScript.call(ctx, rdb, []any{nil, nil, 1, l.key,
			a.Lease.arg(), a.Field.arg(), a.Field.String() + WriteSuffix, a.Expected, l.rtPrefix}, a.Acks)
	case l.layout == LayoutWrite:
		return writeAcquireScript.call(ctx, rdb, []any{nil, nil, 1, l.key, a.Lease.arg(), a.Field.arg(), a.Expected}, a.Acks)
	case a.Fenced && a.Elect != nil:
		return electCall(ctx, rdb, a)
	case a.Fenced:
		return acquireScript.call(ctx, rdb, []any{nil, nil, 2, l.key, l.tk, a.Lease.arg(), a.Field.arg(), a.Expected}, a.Acks)
	}
	return acquireScript.call(ctx, rdb, []any{nil, nil, 1, l.key, a.Lease.arg(), a.Field.arg(), a.Expected}, a.Acks)
}

// Leave takes the waiter field out of the fair lock l's queue, after it gave up
// waiting (fair_leave.lua); wait is the Wait it queued with. When it was the
// queue's head and the lock is free, the next waiter is woken. It reports
// whether the waiter was queued.
func Leave(ctx context.Context, c redis.Scripter, l *Lock, field string, wait time.Duration, publishCmd string) (bool, error) {
	n, err := fairLeaveScript.runScripter(ctx, c, []string{l.name, QueueName(l.name), TimeoutsName(l.name)},
		field, wait.Milliseconds(), publish(publishCmd), ChannelName(l.name)).Int64()
	return n == 1, ScriptError(err)
}
