package lua

import (
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed sync.lua
var syncPrelude string

// syncScript returns a synchronizer script: src after the prelude every one of
// them shares (counter, reclaim, replayed, record).
func syncScript(name, src string) script { return newScript(name, syncPrelude+src) }

// requestPrefix names the request keys of the synchronizers' calls.
const requestPrefix = "holdfast_request"

// Request identifies one call that changes a synchronizer's count, so that a
// second execution of it (go-redis resending a script whose reply was lost)
// answers as the first did instead of applying the change twice. Its key,
// "holdfast_request:{N}:<32 hex digits>", or "holdfast_request:N:<32 hex
// digits>" when N has a hash tag of its own, so that it shares N's slot
// (requestPrefix), is written by the call and expires after TTL, which must
// outlive the client's retries. It is holdfast's own: Redisson neither writes
// nor reads it.
type Request struct {
	Key string
	TTL Millis
}

// NewRequest returns a new request on the object name, recorded for ttl.
func NewRequest(name string, ttl Millis) Request {
	id := randomID()
	var h [2 * len(id)]byte
	hex.Encode(h[:], id[:])
	return Request{Key: requestKey(name, h[:]), TTL: ttl}
}

// requestKey returns the request key of the object name ending with id: the
// name itself keeps its slot when it has a hash tag; otherwise braces around
// the whole name give the key the name's slot, whatever the name holds ("a{b"
// included, which ChannelName's rule would leave without a tag). It allocates
// the key only (string(id) is not copied apart).
func requestKey(name string, id []byte) string {
	if s := strings.IndexByte(name, '{'); s >= 0 && strings.IndexByte(name[s+1:], '}') > 0 {
		return requestPrefix + ":" + name + ":" + string(id)
	}
	return requestPrefix + ":{" + name + "}:" + string(id)
}

// eval runs s with keys and argv (see script.run).
func eval(ctx context.Context, rdb Processor, s script, keys []string, argv ...any) (any, error) {
	v, _, err := evalAcked(ctx, rdb, s, Acks{}, Request{}, keys, argv...)
	return v, err
}

// evalAcked runs s with keys and argv, as eval, and when acks asks for
// replicas waits for them in the same round trip (callRecorded; req is the
// request s records, the zero Request if it records none). It returns the
// reply and how many replicas acknowledged.
func evalAcked(ctx context.Context, rdb Processor, s script, acks Acks, req Request, keys []string, argv ...any) (any, int, error) {
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, nil, nil, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	return s.callRecorded(ctx, rdb, args, acks, req)
}

// evalInt runs s and reads an integer reply.
func evalInt(ctx context.Context, rdb Processor, s script, keys []string, argv ...any) (int64, error) {
	return asInt(eval(ctx, rdb, s, keys, argv...))
}

// evalIntAcked runs s as evalAcked does and reads an integer reply.
func evalIntAcked(ctx context.Context, rdb Processor, s script, acks Acks, req Request, keys []string, argv ...any) (int64, int, error) {
	v, acked, err := evalAcked(ctx, rdb, s, acks, req, keys, argv...)
	n, err := asInt(v, err)
	return n, acked, err
}

// callRecorded sends args as script.call does: with acks, WAIT follows the
// script in the same round trip on the key's primary. A script that records
// its request req (a counting call's record, see Request) has the record's
// time to live set again between the two (PEXPIRE, same value): WAIT waits
// for the connection's last write, and from Redis 7.0 on a command that wrote
// nothing leaves that mark where it was, so the WAIT behind a second
// execution that answered from the record without writing (go-redis resends
// a pipeline whose reply was lost, on any connection) would count replicas
// that have some older write, not the first execution's. The PEXPIRE writes
// only when the record exists, that is when the call changed the count: a
// call that changed nothing costs no wait. The zero req sends none.
func (s script) callRecorded(ctx context.Context, rdb Processor, args []any, acks Acks, req Request) (any, int, error) {
	if acks.Replicas == 0 || req.Key == "" {
		return s.call(ctx, rdb, args, acks)
	}
	return s.runAckedThen(ctx, rdb, args, acks, []any{"pexpire", req.Key, req.TTL.arg()})
}

// Confirm waits until acks.Replicas replicas of the primary that owns req's
// key have everything that primary has written so far, for at most
// acks.Timeout, and returns how many do: a write of req's key (holdfast's own,
// expiring after req.TTL) and WAIT behind it, in one round trip. It stands in
// for the WAIT of a call whose script found its work already done (an
// expirable semaphore's acquisition executed a second time, which answers from
// the permits' zset and writes nothing), whose WAIT counted nothing of it.
func Confirm(ctx context.Context, rdb Processor, req Request, acks Acks) (int, error) {
	node, err := primaryOf(ctx, rdb, req.Key)
	if err != nil {
		return 0, err
	}
	pipe := node.Pipeline()
	set := redis.NewStatusCmd(ctx, "set", req.Key, "1", "px", req.TTL.arg())
	_ = pipe.Process(ctx, set)
	wait := redis.NewIntCmd(ctx, "wait", acks.Replicas, millis(acks.Timeout))
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx)
	if err := set.Err(); err != nil {
		return 0, err
	}
	return int(wait.Val()), nil
}

// asInt reads the integer reply of a script run.
func asInt(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("lua: unexpected reply %v", v)
	}
	return n, nil
}

// asIntAcked reads the integer reply of a script run with acknowledgements.
func asIntAcked(v any, acked int, err error) (int64, int, error) {
	n, err := asInt(v, err)
	return n, acked, err
}

// ErrNotCount is returned by Count for a string that is not an integer.
var ErrNotCount = errors.New("WRONGTYPE the value is not an integer count")

// Count reads the integer count at key (a semaphore's available permits, a
// latch's count): 0 when the key is absent. A key of another type gives Redis'
// WRONGTYPE error (see IsWrongType), a string that is not an integer
// ErrNotCount, which IsWrongType also recognises.
func Count(ctx context.Context, rdb redis.Cmdable, key string) (int64, error) {
	s, err := rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", ErrNotCount, key)
	}
	return n, nil
}
