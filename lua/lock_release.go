package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ReleaseArgs are the arguments of Release.
type ReleaseArgs struct {
	Lock     *Lock  // the lock
	Field    Text   // the releasing owner
	Latch    string // the request's unlock latch (Lock.NewLatch), the same for its retries
	Lease    Millis // re-applied to the lock on a partial release
	Expected int64  // the owner's hold count before this release (>= 1)
	Levels   int64  // holds given back, 1 <= Levels <= Expected; 0 means 1
	// Successor, when not empty, is the owner that receives the lock, with count 1
	// and SuccessorLease, if this release ends the owner's last hold. The lock then
	// stays held and nothing is published.
	Successor      Text
	SuccessorLease Millis
	// Streak, when above 0, is how many hand-offs in a row the releasing
	// client made: the hand-off then happens only if no other client, or more
	// other clients than that, listen on the lock's channel, so that other
	// processes get their turn (0: hand off whenever the lock is free).
	Streak   int
	LatchTTL Millis // how long a retried call can still arrive
	Publish  string // Publish or ShardedPublish; "" means Publish
	Quiet    bool   // publish nothing (spin locks have no waiters listening)
	Acks     Acks   // replica acknowledgements to wait for
}

// ReleaseOutcome says what Release did.
type ReleaseOutcome int

// The outcomes of Release.
const (
	NotHeld   ReleaseOutcome = iota // the owner held nothing; the lock is unchanged
	Partial                         // holds given back; the owner still holds the lock
	Released                        // the lock was deleted and the release published
	HandedOff                       // the lock now belongs to the successor
	Resync                          // (partial release) Redis holds Count for the owner, not Expected; nothing changed
)

// ReleaseReply is what Release did.
type ReleaseReply struct {
	Outcome ReleaseOutcome
	Count   int64 // the owner's count in Redis when Outcome is Resync
	Acked   int   // how many replicas acknowledged the call's writes, when Acks asked
}

// Release gives back Levels holds of an owner. A partial release
// (release_partial.lua) re-applies Lease; a release of all the owner's holds
// (Levels == Expected, release.lua) deletes the owner's field, whatever count
// Redis had, and publishes UnlockMessage on the lock's channel, or hands the lock
// to Successor. A retried execution of the same request answers as the first did.
func Release(ctx context.Context, rdb Processor, a ReleaseArgs) (ReleaseReply, error) {
	s, args := releaseCall(a)
	v, acked, err := s.call(ctx, rdb, args, a.Acks)
	return releaseReply(v, acked, err)
}

// ReleaseAll sends the releases as, each as Release would (but for Acks, which
// it ignores), in one pipelined round trip: EVAL rather than EVALSHA, so that a
// server without the scripts cached costs nothing more. It returns each
// release's reply and error, in order. A Client's Close gives back the holds
// still open with it.
func ReleaseAll(ctx context.Context, rdb redis.UniversalClient, as []ReleaseArgs) ([]ReleaseReply, []error) {
	cmds := make([]*redis.Cmd, len(as))
	pipe := rdb.Pipeline()
	for i, a := range as {
		s, args := releaseCall(a)
		args[0], args[1] = "eval", s.src
		cmds[i] = redis.NewCmd(ctx, args...)
		cmds[i].SetFirstKeyPos(3)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	replies, errs := make([]ReleaseReply, len(as)), make([]error, len(as))
	for i, cmd := range cmds {
		replies[i], errs[i] = releaseReply(cmd.Val(), 0, cmd.Err())
	}
	return replies, errs
}

// releaseReply reads what a release script answered.
func releaseReply(v any, acked int, err error) (ReleaseReply, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return ReleaseReply{Outcome: NotHeld, Acked: acked}, nil
	case err != nil:
		return ReleaseReply{}, err
	}
	switch v := v.(type) {
	case int64:
		switch v {
		case 0:
			return ReleaseReply{Outcome: Partial, Acked: acked}, nil
		case 1:
			return ReleaseReply{Outcome: Released, Acked: acked}, nil
		case 2:
			return ReleaseReply{Outcome: HandedOff, Acked: acked}, nil
		}
	case []any:
		if n, ok := firstInt(v); ok {
			return ReleaseReply{Outcome: Resync, Count: n}, nil
		}
	}
	return ReleaseReply{}, fmt.Errorf("lua: unexpected release reply %#v", v)
}

// releaseCall returns the release script of a's layout and its arguments.
func releaseCall(a ReleaseArgs) (script, []any) {
	l, levels := a.Lock, max(a.Levels, 1)
	switch {
	case l.layout == LayoutRead:
		return readReleaseScript, []any{nil, nil, 3, l.key, l.ch, a.Latch,
			a.Field.arg(), a.Expected, levels, a.LatchTTL.arg(), publish(a.Publish), l.rtPrefix}
	case l.layout == LayoutWrite:
		return writeReleaseScript, []any{nil, nil, 3, l.key, l.ch, a.Latch,
			a.Field.arg(), a.Expected, levels, a.Lease.arg(), a.LatchTTL.arg(), publish(a.Publish)}
	case levels < a.Expected:
		return releasePartialScript, []any{nil, nil, 1, l.key, a.Field.arg(), a.Lease.arg(), a.Expected, levels}
	case l.layout == LayoutFair:
		return fairReleaseScript, []any{nil, nil, 4, l.key, l.queue, l.dl, a.Latch,
			a.Field.arg(), a.LatchTTL.arg(), publish(a.Publish), now(), l.ch}
	}
	return releaseScript, releaseArgs(a)
}

// releaseArgs returns release.lua's arguments, without the successor's when
// there is none.
func releaseArgs(a ReleaseArgs) []any {
	pub := any(Publish)
	switch {
	case a.Quiet:
		pub = ""
	case a.Publish == ShardedPublish:
		pub = ShardedPublish
	}
	if a.Successor.String() == "" {
		return []any{nil, nil, 3, a.Lock.key, a.Lock.ch, a.Latch, a.Field.arg(), a.LatchTTL.arg(), pub}
	}
	return []any{nil, nil, 3, a.Lock.key, a.Lock.ch, a.Latch, a.Field.arg(), a.LatchTTL.arg(), pub,
		a.Successor.arg(), a.SuccessorLease.arg(), a.Streak}
}

// ForceRelease deletes the lock whoever holds it and announces the release when
// something was deleted (force_release.lua, fair_force_release.lua): "0" on its
// channel, "1" for the write side of a read/write lock, or "0" on the channel of
// a fair lock's first waiter. A side of a read/write lock is deleted only when
// the lock is in its mode. It reports whether something was deleted.
func ForceRelease(ctx context.Context, c redis.Scripter, l *Lock, publishCmd string) (bool, error) {
	var cmd *redis.Cmd
	switch l.layout {
	case LayoutFair:
		cmd = fairForceScript.runScripter(ctx, c, []string{l.name, QueueName(l.name), TimeoutsName(l.name)},
			now(), publish(publishCmd), l.channel)
	case LayoutRead:
		cmd = forceReleaseScript.runScripter(ctx, c, []string{l.name, l.channel}, UnlockMessage, publish(publishCmd), "read")
	case LayoutWrite:
		cmd = forceReleaseScript.runScripter(ctx, c, []string{l.name, l.channel}, WakeAllMessage, publish(publishCmd), "write")
	default:
		cmd = forceReleaseScript.runScripter(ctx, c, []string{l.name, l.channel}, UnlockMessage, publish(publishCmd), "")
	}
	n, err := cmd.Int64()
	return n == 1, ScriptError(err)
}
