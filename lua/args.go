package lua

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"time"
)

// go-redis takes a command's arguments as []any, and putting a string, or an
// integer above 255, into an any allocates. The hot path's arguments are mostly
// the same from call to call (the lock's names, the owner, the lease), so they
// are boxed once, in the types below, and the slice a script call sends is the
// only allocation of its arguments.

// Text is a string argument boxed once. Make one per value sent often; the zero
// Text is the empty string.
type Text struct {
	s string
	v any
}

// NewText returns s as a Text.
func NewText(s string) Text { return Text{s: s, v: s} }

// String returns the text.
func (t Text) String() string { return t.s }

func (t Text) arg() any {
	if t.v == nil {
		return t.s
	}
	return t.v
}

// Millis is a duration argument, sent as whole milliseconds (at least 1), boxed
// once. The zero Millis is 1 ms.
type Millis struct {
	d time.Duration
	v any
}

// NewMillis returns d as a Millis.
func NewMillis(d time.Duration) Millis { return Millis{d: d, v: millis(d)} }

// Duration returns the duration.
func (m Millis) Duration() time.Duration { return m.d }

func (m Millis) arg() any {
	if m.v == nil {
		return millis(m.d)
	}
	return m.v
}

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

// ReadTimeouts returns the prefix of a read hold's timeout keys (see
// ReadTimeoutName) for the watchdog; "" for the other layouts.
func (l *Lock) ReadTimeouts() string {
	if l.layout != LayoutRead {
		return ""
	}
	return readTimeoutPrefix(l.name)
}

// NewLatch returns the unlock latch of a new release request (LatchName): its
// request id is 16 random bytes as 32 hex digits, as Redisson's.
func (l *Lock) NewLatch() string {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	var digits [32]byte
	hex.Encode(digits[:], id[:])
	var b strings.Builder
	b.Grow(len(l.latchPrefix) + len(digits))
	b.WriteString(l.latchPrefix)
	b.Write(digits[:])
	return b.String()
}
