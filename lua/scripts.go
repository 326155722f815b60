package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed release_partial.lua
	releasePartialSrc string
	//go:embed force_release.lua
	forceReleaseSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed fair_acquire.lua
	fairAcquireSrc string
	//go:embed fair_release.lua
	fairReleaseSrc string
	//go:embed fair_leave.lua
	fairLeaveSrc string
	//go:embed fair_force_release.lua
	fairForceReleaseSrc string
	//go:embed read_acquire.lua
	readAcquireSrc string
	//go:embed read_release.lua
	readReleaseSrc string
	//go:embed write_acquire.lua
	writeAcquireSrc string
	//go:embed write_release.lua
	writeReleaseSrc string
	//go:embed lock_shape.lua
	lockShapeSrc string

	acquireScript        = newScript(lockShapeSrc + acquireSrc)
	releaseScript        = newScript(releaseSrc)
	releasePartialScript = newScript(releasePartialSrc)
	forceReleaseScript   = redis.NewScript(lockShapeSrc + forceReleaseSrc)
	renewScript          = redis.NewScript(renewSrc)
	inspectScript        = redis.NewScript(lockShapeSrc + inspectSrc)
	fairAcquireScript    = newScript(lockShapeSrc + fairAcquireSrc)
	fairReleaseScript    = newScript(fairReleaseSrc)
	fairLeaveScript      = redis.NewScript(fairLeaveSrc)
	fairForceScript      = redis.NewScript(lockShapeSrc + fairForceReleaseSrc)
	readAcquireScript    = newScript(lockShapeSrc + readAcquireSrc)
	readReleaseScript    = newScript(readReleaseSrc)
	writeAcquireScript   = newScript(lockShapeSrc + writeAcquireSrc)
	writeReleaseScript   = newScript(writeReleaseSrc)
)

// lockShapeCheck answers whether the key is a lock hash, by lock_shape.lua's rule.
var lockShapeCheck = redis.NewScript(lockShapeSrc + `
if redis.call('type', KEYS[1]).ok ~= 'hash' or not_a_lock(KEYS[1]) then
  return 0
end
return 1`)

// LockShape queues on p (a transaction or pipeline of the caller's) the check of
// whether the key name holds a lock's hash, by the rule every script applies
// (lock_shape.lua): owner fields "<client id>:<owner id>[:write]" with
// positive integer counts, and on a read/write lock a "mode" of "read" or
// "write". After Exec, the command's Val is 1 for a lock hash, 0 for anything
// else (another type, a hash of another shape, no key). It is sent as EVAL, so
// that it works inside MULTI whatever the server's script cache holds.
func LockShape(ctx context.Context, p redis.Pipeliner, name string) *redis.Cmd {
	return lockShapeCheck.Eval(ctx, p, []string{name})
}

// Processor sends a command: a go-redis client of any kind, or a pipeline.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// script is a script of the lock's hot path. Unlike redis.Script.Run, run sends
// the caller's argument slice as it is: one allocation for the arguments, one for
// the command.
type script struct {
	sha, src any // boxed once: EVALSHA's and EVAL's second argument
}

func newScript(src string) script {
	return script{sha: redis.NewScript(src).Hash(), src: src}
}

// call sends args (see run), followed by WAIT when acks asks for replicas
// (runAcked), and returns the reply and the replicas that acknowledged.
func (s script) call(ctx context.Context, rdb Processor, args []any, acks Acks) (any, int, error) {
	if acks.Replicas > 0 {
		return s.runAcked(ctx, rdb, args, acks)
	}
	v, err := s.run(ctx, rdb, args)
	return v, 0, err
}

// run sends args, which must begin with two placeholders and the number of keys,
// as EVALSHA, and as EVAL when the server has not cached the script.
func (s script) run(ctx context.Context, rdb Processor, args []any) (any, error) {
	args[0], args[1] = "evalsha", s.sha
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = rdb.Process(ctx, cmd)
	if IsNoScript(cmd.Err()) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd.Result()
}

// Publish commands accepted by the scripts that announce a release.
const (
	Publish        = "PUBLISH"  // classic pub/sub: standalone, Sentinel
	ShardedPublish = "SPUBLISH" // sharded pub/sub: Redis Cluster 7+
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
	case a.Fenced:
		return acquireScript.call(ctx, rdb, []any{nil, nil, 2, l.key, l.tk, a.Lease.arg(), a.Field.arg(), a.Expected}, a.Acks)
	}
	return acquireScript.call(ctx, rdb, []any{nil, nil, 1, l.key, a.Lease.arg(), a.Field.arg(), a.Expected}, a.Acks)
}

// WriteSuffix turns an owner's field into its field as the holder of a
// read/write lock's write side ("<client uuid>:<owner id>:write").
const WriteSuffix = ":write"

// now returns the client's wall clock as the fair lock's scripts take it, in
// epoch milliseconds: Redisson's clients compare their clocks through it.
func now() int64 { return time.Now().UnixMilli() }

// Leave takes the waiter field out of the fair lock l's queue, after it gave up
// waiting (fair_leave.lua); wait is the Wait it queued with. When it was the
// queue's head and the lock is free, the next waiter is woken. It reports
// whether the waiter was queued.
func Leave(ctx context.Context, c redis.Scripter, l *Lock, field string, wait time.Duration, publishCmd string) (bool, error) {
	n, err := fairLeaveScript.Run(ctx, c, []string{l.name, QueueName(l.name), TimeoutsName(l.name)},
		field, wait.Milliseconds(), publish(publishCmd), ChannelName(l.name)).Int64()
	return n == 1, err
}

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
	// OnlyIfAlone limits the hand-off to the case where no other client
	// listens on the lock's channel, so that other processes get their turn.
	OnlyIfAlone bool
	LatchTTL    Millis // how long a retried call can still arrive
	Publish     string // Publish or ShardedPublish; "" means Publish
	Quiet       bool   // publish nothing (spin locks have no waiters listening)
	Acks        Acks   // replica acknowledgements to wait for
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
		a.Successor.arg(), a.SuccessorLease.arg(), flag(a.OnlyIfAlone)}
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
		cmd = fairForceScript.Run(ctx, c, []string{l.name, QueueName(l.name), TimeoutsName(l.name)},
			now(), publish(publishCmd), l.channel)
	case LayoutRead:
		cmd = forceReleaseScript.Run(ctx, c, []string{l.name, l.channel}, UnlockMessage, publish(publishCmd), "read")
	case LayoutWrite:
		cmd = forceReleaseScript.Run(ctx, c, []string{l.name, l.channel}, WakeAllMessage, publish(publishCmd), "write")
	default:
		cmd = forceReleaseScript.Run(ctx, c, []string{l.name, l.channel}, UnlockMessage, publish(publishCmd), "")
	}
	n, err := cmd.Int64()
	return n == 1, err
}

// Inspection is a lock's state as Inspect read it.
type Inspection struct {
	Locked bool          // the lock exists
	TTL    time.Duration // remaining time to live; -1 when the lock has no expiry
	Count  int64         // hold count of the asked owner; 0 when it holds nothing
}

// Inspect reads whether the lock exists, its time to live and the hold count of
// field ("" to skip it) in one round trip (inspect.lua). A side of a read/write
// lock is locked as Redisson's isLocked says (see inspect.lua).
func Inspect(ctx context.Context, c redis.Scripter, l *Lock, field string) (Inspection, error) {
	side := ""
	switch l.layout {
	case LayoutRead:
		side = "read"
	case LayoutWrite:
		side = "write"
	}
	v, err := inspectScript.Run(ctx, c, []string{l.name}, field, side).Int64Slice()
	if err != nil {
		return Inspection{}, err
	}
	if len(v) != 2 {
		return Inspection{}, fmt.Errorf("lua: unexpected inspect reply %v", v)
	}
	if v[0] == -2 {
		return Inspection{Count: v[1]}, nil
	}
	return Inspection{Locked: true, TTL: ttl(v[0]), Count: v[1]}, nil
}

// Renewal is one hold the watchdog renews: the owner's field in the lock key,
// and for a read hold of a read/write lock its timeout keys' prefix
// (Lock.ReadTimeouts; "" for the other holds).
type Renewal struct {
	Key, Field, ReadTimeouts string
}

// RenewCmd queues, as EVALSHA on a pipeline, the extension to lease of every hold
// still in Redis (renew.lua): the watchdog sends many batches in one round trip.
// All keys of one batch must share one hash slot. Read the reply with RenewResult
// after Exec; a NOSCRIPT error (see IsNoScript) means the script must be loaded
// (LoadRenew) and the batch sent again.
func RenewCmd(ctx context.Context, p redis.Pipeliner, holds []Renewal, lease time.Duration) *redis.Cmd {
	keys := make([]string, len(holds))
	args := make([]any, 0, 2*len(holds)+1)
	args = append(args, millis(lease))
	for i, h := range holds {
		keys[i] = h.Key
		args = append(args, h.Field, h.ReadTimeouts)
	}
	return renewScript.EvalSha(ctx, p, keys, args...)
}

// LoadRenew loads the renewal script into the server's script cache, after a
// pipeline of RenewCmd was answered NOSCRIPT.
func LoadRenew(ctx context.Context, c redis.Scripter) error {
	return renewScript.Load(ctx, c).Err()
}

// RenewResult reads the reply of a renewal: per key, whether it was extended.
func RenewResult(cmd *redis.Cmd) ([]bool, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x == 1
	}
	return out, nil
}

// IsNoScript reports whether err says the server does not have the script cached.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// IsWrongType reports whether err is Redis' WRONGTYPE error: the key holds a value
// of another type than the script expects.
func IsWrongType(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "WRONGTYPE")
}

// millis renders d as whole milliseconds, at least 1, as the scripts expect.
func millis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}

func ttl(pttl int64) time.Duration {
	if pttl < 0 {
		return -1
	}
	return time.Duration(pttl) * time.Millisecond
}

func flag(b bool) any {
	if b {
		return "1"
	}
	return "0"
}

func publish(cmd string) string {
	if cmd == ShardedPublish {
		return ShardedPublish
	}
	return Publish
}

func firstInt(v []any) (int64, bool) {
	if len(v) != 1 {
		return 0, false
	}
	n, ok := v[0].(int64)
	return n, ok
}
