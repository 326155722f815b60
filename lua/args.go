package lua

import "time"

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
