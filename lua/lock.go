package lua

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lock family's scripts (one .lua file per operation, headed by its KEYS/ARGV
// contract). lock_shape.lua, prepended to the scripts that need it, defines
// not_a_lock: the one rule that tells a lock's hash from any other value.
var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed release_partial.lua
	releasePartialSrc string
	//go:embed force_release.lua
	forceReleaseSrc string
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

	acquireScript        = newScript("acquire", lockShapeSrc+acquireSrc)
	releaseScript        = newScript("release", releaseSrc)
	releasePartialScript = newScript("release_partial", releasePartialSrc)
	forceReleaseScript   = newScript("force_release", lockShapeSrc+forceReleaseSrc)
	inspectScript        = newScript("inspect", lockShapeSrc+inspectSrc)
	fairAcquireScript    = newScript("fair_acquire", lockShapeSrc+fairAcquireSrc)
	fairReleaseScript    = newScript("fair_release", fairReleaseSrc)
	fairLeaveScript      = newScript("fair_leave", fairLeaveSrc)
	fairForceScript      = newScript("fair_force_release", lockShapeSrc+fairForceReleaseSrc)
	readAcquireScript    = newScript("read_acquire", lockShapeSrc+readAcquireSrc)
	readReleaseScript    = newScript("read_release", readReleaseSrc)
	writeAcquireScript   = newScript("write_acquire", lockShapeSrc+writeAcquireSrc)
	writeReleaseScript   = newScript("write_release", writeReleaseSrc)
)

// Layout is which of Redisson's lock objects a Lock's keys belong to: it decides
// the scripts that acquire and release it.
type Layout uint8

// The layouts.
const (
	// LayoutLock is RLock's (also the fenced, spin and non-reentrant locks'): a
	// hash of owner fields and their hold counts; releases are "0" on
	// redisson_lock__channel:{name}.
	LayoutLock Layout = iota
	// LayoutFair is RFairLock's: RLock's hash, plus the waiters' queue (QueueName)
	// and deadlines (TimeoutsName); a release wakes only the queue's head, on its
	// own channel (WaiterChannel).
	LayoutFair
	// LayoutRead and LayoutWrite are the two sides of RReadWriteLock: one hash
	// with a "mode" field ("read" or "write"), read owners' fields, the write
	// owner's field "<owner>:write", a key per read hold (ReadTimeoutName), and
	// the channel redisson_rwlock:{name}, where "1" wakes every waiter.
	LayoutRead
	LayoutWrite
)

// Lock is one lock's names as the scripts use them: its key (the lock's name),
// its release channel and the prefix of its unlock latches, and those of its
// layout, built and boxed once. Make one per lock handle.
type Lock struct {
	layout        Layout
	name, channel string
	latchPrefix   string // "redisson_unlock_latch:{name}:"
	key, ch, tk   any    // the key, the channel and the fencing token key, boxed
	queue, dl     any    // LayoutFair: the queue and the deadlines
	rtPrefix      any    // LayoutRead: the read timeout keys' prefix, "{name}"
}

// NewLock returns the names of the lock called name, of RLock's layout.
func NewLock(name string) *Lock { return NewLayoutLock(name, LayoutLock) }

// NewLayoutLock returns the names of the lock called name, of the layout l.
func NewLayoutLock(name string, l Layout) *Lock {
	channel := ChannelName(name)
	if l == LayoutRead || l == LayoutWrite {
		channel = RWChannelName(name)
	}
	return &Lock{
		layout: l, name: name, channel: channel, latchPrefix: prefixed(latchPrefix, name) + ":",
		key: name, ch: channel, tk: TokenName(name),
		queue: QueueName(name), dl: TimeoutsName(name), rtPrefix: readTimeoutPrefix(name),
	}
}

// Name returns the lock's name, its key.
func (l *Lock) Name() string { return l.name }

// Layout returns the lock's layout.
func (l *Lock) Layout() Layout { return l.layout }

// Channel returns the lock's release channel: ChannelName, or RWChannelName for
// the sides of a read/write lock. A fair lock's waiters listen on their own
// channels instead (WaiterChannel).
func (l *Lock) Channel() string { return l.channel }

// NewLatch returns the unlock latch of a new release request (LatchName): its
// request id is 16 random bytes as 32 hex digits, as Redisson's.
func (l *Lock) NewLatch() string {
	id := randomID()
	var digits [32]byte
	hex.Encode(digits[:], id[:])
	var b strings.Builder
	b.Grow(len(l.latchPrefix) + len(digits))
	b.WriteString(l.latchPrefix)
	b.Write(digits[:])
	return b.String()
}

// randomID returns 16 random bytes: the id of a release request, of a
// synchronizer's request, of a permit (Redisson's ids are 16 bytes from a
// fast, non-cryptographic generator too).
func randomID() [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	return id
}

// lockShapeCheck answers whether the key is a lock hash, by lock_shape.lua's
// rule. It is only ever sent as EVAL (LockShape): it has no digest.
var lockShapeCheck = lockShapeSrc + `
if redis.call('type', KEYS[1]).ok ~= 'hash' or not_a_lock(KEYS[1]) then
  return 0
end
return 1`

// LockShape queues on p (a transaction or pipeline of the caller's) the check of
// whether the key name holds a lock's hash, by the rule every script applies
// (lock_shape.lua): owner fields "<client id>:<owner id>[:write]" with
// positive integer counts, and on a read/write lock a "mode" of "read" or
// "write". After Exec, the command's Val is 1 for a lock hash, 0 for anything
// else (another type, a hash of another shape, no key). It is sent as EVAL, so
// that it works inside MULTI whatever the server's script cache holds.
func LockShape(ctx context.Context, p redis.Pipeliner, name string) *redis.Cmd {
	return p.Eval(ctx, lockShapeCheck, []string{name})
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
	v, err := inspectScript.runScripter(ctx, c, []string{l.name}, field, side).Int64Slice()
	if err != nil {
		return Inspection{}, ScriptError(err)
	}
	if len(v) != 2 {
		return Inspection{}, fmt.Errorf("lua: unexpected inspect reply %v", v)
	}
	if v[0] == -2 {
		return Inspection{Count: v[1]}, nil
	}
	return Inspection{Locked: true, TTL: ttl(v[0]), Count: v[1]}, nil
}
