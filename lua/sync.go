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
func syncScript(src string) script { return newScript(syncPrelude + src) }

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
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, nil, nil, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	return s.run(ctx, rdb, args)
}

// evalInt runs s and reads an integer reply.
func evalInt(ctx context.Context, rdb Processor, s script, keys []string, argv ...any) (int64, error) {
	return asInt(eval(ctx, rdb, s, keys, argv...))
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
