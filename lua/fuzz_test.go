package lua

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fuzz targets of this package: FuzzNames (a name's keys, channels and
// slots) and FuzzReplies (what every script's Go wrapper makes of any reply).
// Their seeds run with every `go test`; `make fuzz` runs each for FUZZTIME.
// The bugs they found (a latch's request key and untagged names accepted by a
// slot coincidence, a PTTL overflowing a time.Duration) are fixed; their
// inputs stay in the corpus.

// crc16Table is the CRC16 of the Redis Cluster specification (XMODEM:
// polynomial 0x1021, initial value 0, no reflection), one entry per byte,
// built from the polynomial rather than copied from package lua's loop.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			top := crc & 0x8000
			crc <<= 1
			if top != 0 {
				crc ^= 0x1021
			}
		}
		t[i] = crc
	}
	return t
}()

// refSlot is HASH_SLOT of the Redis Cluster specification: when the key has a
// '{' and a '}' after it with at least one byte between, only what lies
// between the first '{' and the first '}' after it is hashed.
func refSlot(key string) int {
	b := []byte(key)
	if open := bytes.IndexByte(b, '{'); open >= 0 {
		rest := b[open+1:]
		if end := bytes.IndexByte(rest, '}'); end >= 1 {
			b = rest[:end]
		}
	}
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return int(crc & 16383)
}

// hasTag reports whether name has a hash tag of its own (refSlot's rule).
func hasTag(name string) bool {
	open := strings.IndexByte(name, '{')
	return open >= 0 && strings.IndexByte(name[open+1:], '}') >= 1
}

// Redisson's two helpers (shared/redisson-protocol.md §0.2): the prefix form
// and the suffix form.
func prefixForm(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// requestForm is what holdfast's request keys of name begin with: the name
// as it is when it has a hash tag, else in braces (its slot either way).
func requestForm(name string) string {
	if hasTag(name) {
		return "holdfast_request:" + name + ":"
	}
	return "holdfast_request:{" + name + "}:"
}

func suffixForm(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

func TestRefSlot(t *testing.T) {
	// The check value of CRC16/XMODEM and table entries from the specification.
	for _, tc := range []struct {
		got, want uint16
	}{{crc16Table[1], 0x1021}, {crc16Table[2], 0x2042}, {crc16Table[255], 0x1ef0}} {
		if tc.got != tc.want {
			t.Fatalf("crc16 table entry %#04x, want %#04x", tc.got, tc.want)
		}
	}
	for key, want := range map[string]int{"123456789": 0x31c3 & 16383, "foo": 12182, "{user1000}.following": refSlot("user1000"),
		"foo{}{bar}": refSlot("foo{}{bar}"), "foo{{bar}}zap": refSlot("{bar"), "foo{bar}{zap}": refSlot("bar")} {
		if got := refSlot(key); got != want {
			t.Errorf("refSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// derived is one key or channel derived from a name (got), and Redisson's
// name for it (want; "" for holdfast's own keys and random ids).
type derived struct {
	what, got, want string
}

// FuzzNames derives every key and channel of every object from a name (with an
// owner field, a request id and a read hold index), and checks:
//   - each derivation is Redisson's (shared/redisson-protocol.md §0.2, §0.4);
//   - Slot agrees with refSlot, written here from the Redis Cluster
//     specification, on the name and on every derived key;
//   - a name a family's check accepts has every key and channel of that family
//     in its slot, request keys (NewRequest) included; a name it refuses gives
//     an error matching ErrSlot;
//   - nothing panics, whatever the bytes.
func FuzzNames(f *testing.F) {
	for _, name := range []string{"orders:42", "{user1}:lock", "a{b}c", "a{b}c}", "", "a}b", "a{b", "{}", "{",
		"x{}{tag}", "}{a}", "{a", "a{}b}", "acc:{}:x", "lock:{\"id\":1}", "ünïcødé:{tag}:ok", "\xff{\x00}\xfe", "{t}:latch"} {
		f.Add(name, "3edaecd7-8b5a-4c47-bdc6-fff775044369:82", "0", 1)
	}
	f.Add("n", "c:{x}", "{y}", -1)
	f.Fuzz(func(t *testing.T, name, field, reqID string, k int) {
		req := NewRequest(name, NewMillis(time.Second)).Key
		rt := ReadTimeoutName(name, field, k)
		lock := []derived{
			{"ChannelName", ChannelName(name), prefixForm("redisson_lock__channel", name)},
			{"TokenName", TokenName(name), prefixForm("redisson_lock_token", name)},
			{"QueueName", QueueName(name), prefixForm("redisson_lock_queue", name)},
			{"TimeoutsName", TimeoutsName(name), prefixForm("redisson_lock_timeout", name)},
			{"WaiterChannel", WaiterChannel(name, field), prefixForm("redisson_lock__channel", name) + ":" + field},
			{"RWChannelName", RWChannelName(name), prefixForm("redisson_rwlock", name)},
			{"ReadTimeoutName", rt, suffixForm(name, field+":rwlock_timeout:"+strconv.Itoa(k))},
			{"LatchName", LatchName(name, reqID), prefixForm("redisson_unlock_latch", name) + ":" + reqID},
			{"Lock.NewLatch", NewLock(name).NewLatch(), ""},
			{"Lock(read).Channel", NewLayoutLock(name, LayoutRead).Channel(), prefixForm("redisson_rwlock", name)},
			{"Lock(read).Renewal.Prefix+field", NewLayoutLock(name, LayoutRead).Renewal(field).Prefix + ":" + field + ":rwlock_timeout:" + strconv.Itoa(k), rt},
		}
		request := derived{"NewRequest", req, ""}
		semaphore := []derived{{"SemaphoreChannel", SemaphoreChannel(name), prefixForm("redisson_sc", name)}, request}
		expirable := append(semaphore[:1:1],
			derived{"PermitTimeoutsName", PermitTimeoutsName(name), suffixForm(name, "timeout")},
			derived{"PermitRenewal.Key", PermitRenewal(name, reqID).Key, suffixForm(name, "timeout")},
			request)
		latch := []derived{{"LatchChannel", LatchChannel(name), "redisson_countdownlatch__channel__{" + name + "}"}, request}

		// Redisson's names; holdfast's own request key and random latch ids by shape.
		for _, d := range append(append(append(lock, expirable...), latch...), semaphore...) {
			if d.want != "" && d.got != d.want {
				t.Errorf("%s(%q) = %q, Redisson's is %q", d.what, name, d.got, d.want)
			}
		}
		if p := requestForm(name); !strings.HasPrefix(req, p) || !isHex(req[len(p):], 32) {
			t.Errorf("NewRequest(%q).Key = %q, want %q and 32 hex digits", name, req, p)
		}
		if l := NewLock(name).NewLatch(); !strings.HasPrefix(l, LatchName(name, "")) || !isHex(l[len(LatchName(name, "")):], 32) {
			t.Errorf("NewLock(%q).NewLatch() = %q, want %q and 32 hex digits", name, l, LatchName(name, ""))
		}

		// Slot is the specification's.
		for _, key := range []string{name, field, reqID, req, rt, ChannelName(name), LatchChannel(name), PermitTimeoutsName(name)} {
			if got, want := Slot(key), refSlot(key); got != want {
				t.Fatalf("Slot(%q) = %d, the specification says %d", key, got, want)
			}
		}

		// A name a check accepts has its family's keys in its slot.
		for _, fam := range []struct {
			check string
			err   error
			keys  []derived
		}{
			{"CheckName", CheckName(name), lock},
			{"CheckSemaphoreName", CheckSemaphoreName(name), semaphore},
			{"CheckExpirableSemaphoreName", CheckExpirableSemaphoreName(name), expirable},
			{"CheckLatchName", CheckLatchName(name), latch},
		} {
			if fam.err != nil {
				if !errors.Is(fam.err, ErrSlot) {
					t.Errorf("%s(%q) = %v, which does not match ErrSlot", fam.check, name, fam.err)
				}
				continue
			}
			slot := refSlot(name)
			for _, d := range fam.keys {
				if refSlot(d.got) == slot {
					continue
				}
				t.Errorf("%s(%q) accepts the name (slot %d), but its %s %q is in slot %d",
					fam.check, name, slot, d.what, d.got, refSlot(d.got))
			}
		}
	})
}

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// replyError is an error reply of the fake server, a redis.Error as go-redis
// makes of Redis' error replies (also inside arrays).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// reply is what the fake server answers to one command: a value, or an error
// (redis.Nil for a nil reply).
type reply struct {
	val any
	err error
}

// errNoReply is the fake's answer once its replies are used up: a transport
// error, as a connection that closed.
var errNoReply = fmt.Errorf("fake: no reply left: %w", io.ErrUnexpectedEOF)

// fakeServer answers, in a go-redis hook that never calls the transport, each
// command of a client with the next of its replies: it fakes the network,
// not Redis.
type fakeServer struct {
	replies []reply
	sent    int
}

func (s *fakeServer) load(replies []reply) { s.replies, s.sent = replies, 0 }

func (s *fakeServer) next() reply {
	s.sent++
	if s.sent > len(s.replies) {
		return reply{err: errNoReply}
	}
	return s.replies[s.sent-1]
}

func (s *fakeServer) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("fake: no dialing")
	}
}

func (s *fakeServer) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		s.answer(cmd, s.next())
		return cmd.Err()
	}
}

func (s *fakeServer) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.answer(cmd, s.next())
		}
		return nil
	}
}

// answer sets r on cmd as go-redis would after reading it.
func (s *fakeServer) answer(cmd redis.Cmder, r reply) {
	if r.err != nil {
		cmd.SetErr(r.err)
		return
	}
	switch c := cmd.(type) {
	case *redis.Cmd:
		c.SetVal(r.val)
	case *redis.StringCmd: // GET
		switch v := r.val.(type) {
		case string:
			c.SetVal(v)
		case int64:
			c.SetVal(strconv.FormatInt(v, 10))
		default:
			c.SetErr(fmt.Errorf("redis: can't parse string reply %T", v))
		}
	case *redis.IntCmd: // WAIT
		if v, ok := r.val.(int64); ok {
			c.SetVal(v)
		} else {
			c.SetErr(fmt.Errorf("redis: can't parse int reply %T", r.val))
		}
	default:
		cmd.SetErr(fmt.Errorf("fake: unexpected command %v", cmd.Args()))
	}
}

// replyReader builds replies from fuzz bytes; past their end it reads zeros.
type replyReader struct{ b []byte }

func (r *replyReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *replyReader) take(n int) []byte {
	n = min(n, len(r.b))
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *replyReader) uint64() uint64 {
	var b [8]byte
	copy(b[:], r.take(8))
	return binary.LittleEndian.Uint64(b[:])
}

// Error replies the scripts and Redis give, to start a fuzzed error reply.
var errorTexts = []string{"NOSCRIPT No matching script. Please use EVAL.", "ERR NOSCRIPT", "WRONGTYPE Operation against a key holding the wrong kind of value",
	"WRONGTYPE the hash at k is not a lock (field f)", "CROSSSLOT Keys in request don't hash to the same slot", "MOVED 3999 127.0.0.1:6381",
	"READONLY You can't write against a read only replica.", "LOADING Redis is loading the dataset in memory", "ERR ", ""}

// transportErrors are errors of the connection rather than replies.
var transportErrors = []error{io.EOF, context.Canceled, context.DeadlineExceeded, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, errNoReply}

func (r *replyReader) errorReply() replyError {
	return replyError(errorTexts[int(r.byte())%len(errorTexts)] + string(r.take(int(r.byte()%8))))
}

// reply reads one top-level reply: a value, an error reply, nil or a
// transport error.
func (r *replyReader) reply() reply {
	switch r.byte() % 8 {
	case 0:
		return reply{err: redis.Nil}
	case 1:
		return reply{err: r.errorReply()}
	case 2:
		return reply{err: transportErrors[int(r.byte())%len(transportErrors)]}
	}
	if v := r.value(0); v != nil {
		return reply{val: v}
	}
	return reply{err: redis.Nil}
}

// value reads a value of any type go-redis returns in a *redis.Cmd (RESP2 and
// RESP3), nested up to depth 3.
func (r *replyReader) value(depth int) any {
	switch r.byte() % 13 {
	case 0:
		return int64(int8(r.byte()))
	case 1:
		return int64(r.uint64())
	case 2:
		return "OK"
	case 3:
		return string(r.take(int(r.byte() % 32)))
	case 4:
		return strconv.FormatInt(int64(int16(r.uint64())), 10)
	case 5:
		return ":" + strconv.FormatInt(int64(r.uint64()>>(r.byte()%64)), 10)
	case 6:
		return nil
	case 7:
		return r.errorReply()
	case 8:
		return math.Float64frombits(r.uint64())
	case 9:
		return r.byte()%2 == 0
	case 10:
		if depth < 3 {
			m := map[any]any{}
			for n := r.byte() % 3; n > 0; n-- {
				m[fmt.Sprint(r.value(depth+1))] = r.value(depth + 1)
			}
			return m
		}
	}
	if depth >= 3 {
		return int64(r.byte())
	}
	a := make([]any, r.byte()%4)
	for i := range a {
		a[i] = r.value(depth + 1)
	}
	return a
}

// outcome is what a decoder gave, or should give: a value, an error, or for an
// expected outcome the error the call should wrap, or that the reply is not
// one the script answers (bad).
type outcome struct {
	val         any
	err         error
	bad         bool
	unspecified bool // any value will do, but no error
}

// leaseReply is what Permit.Lease returns.
type leaseReply struct {
	ms int64
	ok bool
}

// isZero reports whether v is nil or its type's zero value.
func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

// wraps reports whether err carries want: the same error, or for NOSCRIPT
// go-redis' ErrNoScript, to which its Eval helpers turn it.
func wraps(err, want error) bool {
	return errors.Is(err, want) || IsNoScript(want) && IsNoScript(err)
}

// decoder is one Go wrapper of a script, fed the fake's replies.
type decoder struct {
	name string
	// run calls the wrapper through rdb.
	run func(ctx context.Context, rdb *redis.Client) (any, error)
	// want is the outcome the script's contract gives for the replies.
	want func(rs []reply) outcome
}

// FuzzReplies feeds every wrapper that turns a script's (or a command's) reply
// into Go values with replies built from the fuzz bytes: integers, strings,
// floats, booleans, nil, error replies, transport errors, and arrays and maps
// of them, up to four per call (a NOSCRIPT answer makes a second call). It
// checks that nothing panics, that a reply the script's contract allows
// (the "Returns" of its .lua file) decodes to what the contract says, that any
// other reply gives an error and a zero value, and that an error reply comes
// back wrapped (so IsWrongType and IsNoScript still see it), but for the nil
// replies some wrappers document as a value.
func FuzzReplies(f *testing.F) {
	// Bytes: the number of replies less one, then per reply its kind and
	// contents (see replyReader).
	f.Add([]byte{0, 3, 2})                                // "OK"
	f.Add([]byte{0, 3, 0, 0xfe})                          // -2
	f.Add([]byte{1, 1, 0, 0, 3, 2})                       // NOSCRIPT, then "OK"
	f.Add([]byte{3, 1, 1, 0, 3, 0, 1, 3, 2, 3, 0, 2})     // NOSCRIPT and WAIT 1, then "OK" and WAIT 2
	f.Add([]byte{0, 3, 11, 2, 2, 0, 7})                   // {"OK", 7}
	f.Add([]byte{0, 3, 11, 1, 0, 3})                      // {3}
	f.Add([]byte{0, 3, 11, 2, 0, 0xfe, 0, 0})             // {-2, 0}
	f.Add([]byte{0, 3, 5, 0, 0, 0, 0, 0, 0, 0, 0x40, 20}) // ":<a large number>"
	f.Add([]byte{0, 1, 2, 0})                             // WRONGTYPE
	f.Add([]byte{0, 2, 3})                                // a transport error
	f.Add([]byte{0, 0})                                   // nil
	f.Add([]byte{0, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0x40})     // a PTTL beyond time.Duration
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	fake := new(fakeServer)
	rdb.AddHook(fake)
	f.Cleanup(func() { _ = rdb.Close() })
	decoders := replyDecoders()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &replyReader{b: data}
		replies := make([]reply, 1+int(r.byte()%4))
		for i := range replies {
			replies[i] = r.reply()
		}
		for _, d := range decoders {
			fake.load(replies)
			val, err := d.run(context.Background(), rdb)
			want := d.want(replies)
			switch {
			case want.err != nil:
				if !wraps(err, want.err) {
					t.Errorf("%s: replies %#v: got (%#v, %v), want an error wrapping %v", d.name, replies, val, err, want.err)
				} else if !isZero(val) {
					t.Errorf("%s: replies %#v: error %v with a value %#v", d.name, replies, err, val)
				}
			case want.bad:
				if err == nil {
					t.Errorf("%s: replies %#v are not the script's, yet decode to %#v", d.name, replies, val)
				} else if !isZero(val) {
					t.Errorf("%s: replies %#v: error %v with a value %#v", d.name, replies, err, val)
				}
			case want.unspecified:
				if err != nil {
					t.Errorf("%s: replies %#v: got error %v, want a value", d.name, replies, err)
				}
			case err != nil || !reflect.DeepEqual(val, want.val):
				t.Errorf("%s: replies %#v: got (%#v, %v), want %#v", d.name, replies, val, err, want.val)
			}
		}
	})
}

// effective returns the reply a script call reads from rs: the first, or the
// second when the first is NOSCRIPT (the EVAL fallback).
func effective(rs []reply) reply {
	if IsNoScript(rs[0].err) {
		return at(rs, 1)
	}
	return rs[0]
}

// effectiveAcked returns the script's reply and WAIT's of a call sent with
// Acks: a pipeline of both, sent again with EVAL when the first is NOSCRIPT.
func effectiveAcked(rs []reply) (reply, int) {
	i := 0
	if IsNoScript(rs[0].err) {
		i = 2
	}
	n, _ := at(rs, i+1).val.(int64)
	return at(rs, i), int(n)
}

func at(rs []reply, i int) reply {
	if i < len(rs) {
		return rs[i]
	}
	return reply{err: errNoReply}
}

// wantTTL is the TTL a PTTL reply of ms means: the longest time.Duration for
// one beyond it.
// It finds the overflow by dividing back, not as ttl does.
func wantTTL(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	if d := time.Duration(ms) * time.Millisecond; d/time.Millisecond == time.Duration(ms) {
		return d
	}
	return math.MaxInt64
}

// asInt64 is go-redis' reading of an integer in a *redis.Cmd: an integer or a
// decimal string.
func asInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// asInt64s is go-redis' Int64Slice.
func asInt64s(v any) ([]int64, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(a))
	for i, x := range a {
		if out[i], ok = asInt64(x); !ok {
			return nil, false
		}
	}
	return out, true
}

// errOrBad is the outcome of a reply that is an error, or else not one the
// script answers.
func errOrBad(r reply) outcome {
	if r.err != nil {
		return outcome{err: r.err}
	}
	return outcome{bad: true}
}

// intReply is the outcome of evalInt's scripts: their integer, mapped by f.
func intReply(pick func([]reply) reply, f func(int64) any) func([]reply) outcome {
	return func(rs []reply) outcome {
		r := pick(rs)
		if n, ok := r.val.(int64); ok && r.err == nil {
			return outcome{val: f(n)}
		}
		return errOrBad(r)
	}
}

func wantAcquire(r reply, acked int) outcome {
	switch v := r.val.(type) {
	case string:
		if v == "OK" {
			return outcome{val: AcquireReply{Acquired: true, Acked: acked}}
		}
	case int64:
		return outcome{val: AcquireReply{TTL: wantTTL(v)}}
	case []any:
		if len(v) == 1 {
			if n, ok := v[0].(int64); ok {
				return outcome{val: AcquireReply{Resync: true, Count: n}}
			}
		}
		if len(v) == 2 && v[0] == any("OK") {
			if tok, ok := v[1].(int64); ok {
				return outcome{val: AcquireReply{Acquired: true, Acked: acked, Token: tok}}
			}
		}
	}
	return errOrBad(r)
}

func wantRelease(r reply, acked int) outcome {
	if errors.Is(r.err, redis.Nil) {
		return outcome{val: ReleaseReply{Outcome: NotHeld, Acked: acked}}
	}
	switch v := r.val.(type) {
	case int64:
		if o, ok := map[int64]ReleaseOutcome{0: Partial, 1: Released, 2: HandedOff}[v]; ok {
			return outcome{val: ReleaseReply{Outcome: o, Acked: acked}}
		}
	case []any:
		if len(v) == 1 {
			if n, ok := v[0].(int64); ok {
				return outcome{val: ReleaseReply{Outcome: Resync, Count: n}}
			}
		}
	}
	return errOrBad(r)
}

// replyDecoders lists every wrapper that reads a reply.
func replyDecoders() []decoder {
	lock := NewLock("fuzz")
	fair := NewLayoutLock("fuzz", LayoutFair)
	read, write := NewLayoutLock("fuzz", LayoutRead), NewLayoutLock("fuzz", LayoutWrite)
	field, lease := NewText("c:1"), NewMillis(time.Second)
	permit := NewPermit("fuzz")
	req := NewRequest("fuzz", lease)
	ids := []string{NewPermitID(), NewPermitID()}
	acks := Acks{Replicas: 1, Timeout: time.Millisecond}
	first := func(rs []reply) reply { return effective(rs) }
	one := func(n int64) any { return n == 1 }
	self := func(n int64) any { return n }
	none := func(int64) any { return nil }
	// isOne: the script's reply, an integer as go-redis reads one, is 1.
	isOne := func(rs []reply) outcome {
		r := effective(rs)
		if n, ok := asInt64(r.val); ok && r.err == nil {
			return outcome{val: n == 1}
		}
		return errOrBad(r)
	}
	var ds []decoder
	for _, a := range []AcquireArgs{
		{Lock: lock, Field: field, Lease: lease},
		{Lock: lock, Field: field, Lease: lease, Expected: 2, Fenced: true},
		{Lock: fair, Field: field, Lease: lease, Wait: time.Second},
		{Lock: read, Field: field, Lease: lease},
		{Lock: write, Field: field, Lease: lease},
	} {
		ds = append(ds, decoder{fmt.Sprintf("Acquire(layout %d, fenced %v)", a.Lock.Layout(), a.Fenced),
			func(ctx context.Context, rdb *redis.Client) (any, error) { return Acquire(ctx, rdb, a) },
			func(rs []reply) outcome { return wantAcquire(effective(rs), 0) }})
	}
	ds = append(ds, decoder{"Acquire(acks)",
		func(ctx context.Context, rdb *redis.Client) (any, error) {
			return Acquire(ctx, rdb, AcquireArgs{Lock: lock, Field: field, Lease: lease, Acks: acks})
		},
		func(rs []reply) outcome { return wantAcquire(effectiveAcked(rs)) }})
	for _, a := range []ReleaseArgs{
		{Lock: lock, Field: field, Expected: 1},
		{Lock: lock, Field: field, Expected: 3, Levels: 1},
		{Lock: lock, Field: field, Expected: 1, Successor: NewText("c:2"), Streak: 3},
		{Lock: fair, Field: field, Expected: 1},
		{Lock: read, Field: field, Expected: 1},
		{Lock: write, Field: field, Expected: 2, Levels: 1},
	} {
		a.Latch, a.Lease, a.LatchTTL = a.Lock.NewLatch(), lease, lease
		ds = append(ds, decoder{fmt.Sprintf("Release(layout %d, %d of %d)", a.Lock.Layout(), a.Levels, a.Expected),
			func(ctx context.Context, rdb *redis.Client) (any, error) { return Release(ctx, rdb, a) },
			func(rs []reply) outcome { return wantRelease(effective(rs), 0) }})
	}
	for i := range 2 {
		ds = append(ds, decoder{fmt.Sprintf("ReleaseAll[%d]", i),
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				a := ReleaseArgs{Lock: lock, Field: field, Expected: 1, Latch: lock.NewLatch()}
				replies, errs := ReleaseAll(ctx, rdb, []ReleaseArgs{a, a})
				return replies[i], errs[i]
			},
			func(rs []reply) outcome { return wantRelease(at(rs, i), 0) }})
	}
	ds = append(ds,
		decoder{"Release(acks)",
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				return Release(ctx, rdb, ReleaseArgs{Lock: lock, Field: field, Expected: 1, Latch: lock.NewLatch(), Acks: acks})
			},
			func(rs []reply) outcome { return wantRelease(effectiveAcked(rs)) }},
		decoder{"Inspect",
			func(ctx context.Context, rdb *redis.Client) (any, error) { return Inspect(ctx, rdb, read, "c:1") },
			func(rs []reply) outcome {
				r := effective(rs)
				v, ok := asInt64s(r.val)
				if !ok || len(v) != 2 || r.err != nil {
					return errOrBad(r)
				}
				if v[0] == -2 {
					return outcome{val: Inspection{Count: v[1]}}
				}
				return outcome{val: Inspection{Locked: true, TTL: wantTTL(v[0]), Count: v[1]}}
			}},
		decoder{"ForceRelease",
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				return ForceRelease(ctx, rdb, fair, Publish)
			},
			isOne},
		decoder{"Leave",
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				return Leave(ctx, rdb, fair, "c:1", time.Second, ShardedPublish)
			},
			isOne},
		decoder{"RenewResult",
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				p := rdb.Pipeline()
				cmd := RenewCmd(ctx, p, []Renewal{lock.Renewal("c:1"), PermitRenewal("fuzz", "id")}, time.Now(), time.Second, false)
				_, _ = p.Exec(ctx)
				return RenewResult(cmd)
			},
			func(rs []reply) outcome {
				r := rs[0]
				v, ok := asInt64s(r.val)
				if !ok || r.err != nil {
					return errOrBad(r)
				}
				out := make([]bool, len(v))
				for i, x := range v {
					out[i] = x == 1
				}
				return outcome{val: out}
			}},
		decoder{"Permit.Acquire",
			func(ctx context.Context, rdb *redis.Client) (any, error) {
				return permit.Acquire(ctx, rdb, 1, Publish, PermitWaiter{IDs: ids, Expiry: NoExpiry})
			},
			func(rs []reply) outcome {
				r := effective(rs)
				if errors.Is(r.err, redis.Nil) {
					return outcome{val: PermitTry{}}
				}
				if n, ok := r.val.(int64); ok && r.err == nil {
					return outcome{val: PermitTry{Served: int(n), Expiry: NoExpiry}}
				}
				s, _ := r.val.(string)
				if s == "absent" && r.err == nil {
					return outcome{val: PermitTry{Absent: true}}
				}
				for _, prefix := range []string{"=", ":"} {
					ms, ok := strings.CutPrefix(s, prefix)
					if !ok || r.err != nil {
						continue
					}
					if x, err := strconv.ParseFloat(ms, 64); err == nil {
						if x < math.MinInt64 || x >= math.MaxInt64 {
							return outcome{unspecified: true} // the conversion is the platform's
						}
						if prefix == "=" {
							return outcome{val: PermitTry{Served: 1, Expiry: int64(x)}}
						}
						return outcome{val: PermitTry{NextExpiry: int64(x)}}
					}
				}
				return errOrBad(r)
			}},
		decoder{"Count",
			func(ctx context.Context, rdb *redis.Client) (any, error) { return Count(ctx, rdb, "fuzz") },
			func(rs []reply) outcome {
				r := rs[0]
				if errors.Is(r.err, redis.Nil) {
					return outcome{val: int64(0)}
				}
				if r.err != nil {
					return outcome{err: r.err}
				}
				switch v := r.val.(type) {
				case int64:
					return outcome{val: v}
				case string:
					if n, err := strconv.ParseInt(v, 10, 64); err == nil {
						return outcome{val: n}
					}
					return outcome{err: ErrNotCount}
				}
				return outcome{bad: true}
			}},
	)
	evals := []struct {
		name string
		run  func(ctx context.Context, rdb *redis.Client) (any, error)
		f    func(int64) any
	}{
		{"Permit.Count", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return permit.Count(ctx, rdb, CountTotal, 1, Publish)
		}, self},
		{"Permit.SetTotal", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return nil, permit.SetTotal(ctx, rdb, 3, Publish)
		}, none},
		{"Permit.Lease", func(ctx context.Context, rdb *redis.Client) (any, error) {
			ms, ok, err := permit.Lease(ctx, rdb, ids[0], 1, Publish)
			return leaseReply{ms, ok}, err
		}, func(n int64) any { return leaseReply{n, n != 0} }},
		{"Permit.SetLease", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return permit.SetLease(ctx, rdb, ids[0], NoExpiry, 1, Publish)
		}, one},
		{"SemaphoreAcquire", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return SemaphoreAcquire(ctx, rdb, "fuzz", req, 2)
		}, self},
		{"SemaphoreRelease", func(ctx context.Context, rdb *redis.Client) (any, error) {
			ok, _, err := SemaphoreRelease(ctx, rdb, "fuzz", 2, true, Publish, req, false)
			return ok, err
		}, func(n int64) any { return n >= 1 }},
		{"SemaphoreTrySet", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return SemaphoreTrySet(ctx, rdb, "fuzz", 2, time.Second, Publish, req)
		}, one},
		{"SemaphoreAdd", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return nil, SemaphoreAdd(ctx, rdb, "fuzz", -2, PublishDelta, Publish, req)
		}, none},
		{"SemaphoreDrain", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return SemaphoreDrain(ctx, rdb, "fuzz", req)
		}, self},
		{"LatchCountDown", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return LatchCountDown(ctx, rdb, "fuzz", Publish, req)
		}, self},
		{"LatchTrySet", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return LatchTrySet(ctx, rdb, "fuzz", 2, Publish, req)
		}, one},
		{"LatchDelete", func(ctx context.Context, rdb *redis.Client) (any, error) {
			return LatchDelete(ctx, rdb, "fuzz", Publish, req)
		}, one},
	}
	for _, e := range evals {
		ds = append(ds, decoder{e.name, e.run, intReply(first, e.f)})
	}
	ds = append(ds,
		decoder{"Permit.Release", func(ctx context.Context, rdb *redis.Client) (any, error) {
			o, n, err := permit.Release(ctx, rdb, ids[0], 1, Publish, req, false)
			return outcomeServedReply{o, n}, err
		}, encodedReply(func(v int64) (any, bool) {
			n := (v + 1) / 4
			return outcomeServedReply{v - 4*n, int(n)}, v >= PermitUnknown
		})},
		decoder{"Permit.ReleaseAll", func(ctx context.Context, rdb *redis.Client) (any, error) {
			r, n, err := permit.ReleaseAll(ctx, rdb, ids, 1, Publish, req, false)
			return outcomeServedReply{r, n}, err
		}, encodedReply(func(v int64) (any, bool) {
			k := int64(len(ids)) + 1
			return outcomeServedReply{v % k, int(v / k)}, v >= 0
		})})
	return ds
}

// encodedReply is the outcome of a permit release's integer reply: what
// decode makes of it, or a reply no script gives when decode says so.
func encodedReply(decode func(int64) (any, bool)) func([]reply) outcome {
	return func(rs []reply) outcome {
		r := effective(rs)
		n, ok := r.val.(int64)
		if !ok || r.err != nil {
			return errOrBad(r)
		}
		v, good := decode(n)
		if !good {
			return outcome{bad: true}
		}
		return outcome{val: v}
	}
}

// outcomeServedReply is what a permit release decodes: its outcome and the
// waiters it served.
type outcomeServedReply struct {
	outcome int64
	served  int
}
