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

// Lock is one lock's names as the scripts use them: its key (the lock's name),
// its release channel and the prefix of its unlock latches, built and boxed
// once. Make one per lock handle.
type Lock struct {
	name, channel string
	latchPrefix   string // "redisson_unlock_latch:{name}:"
	key, ch, tk   any    // the key, the channel and the fencing token key, boxed
}

// NewLock returns the names of the lock called name.
func NewLock(name string) *Lock {
	channel := ChannelName(name)
	return &Lock{
		name: name, channel: channel, latchPrefix: prefixed(latchPrefix, name) + ":",
		key: name, ch: channel, tk: TokenName(name),
	}
}

// Name returns the lock's name, its key.
func (l *Lock) Name() string { return l.name }

// Channel returns the lock's release channel (ChannelName).
func (l *Lock) Channel() string { return l.channel }

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
