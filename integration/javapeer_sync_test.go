package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// javaSync simulates a Java process using Redisson's RSemaphore,
// RPermitExpirableSemaphore and RCountDownLatch on the same Redis. Its scripts
// are written here from the protocol facts (shared/redisson-protocol.md §2.11,
// §2.12, §2.13, with the corrections of §9), independently of holdfast's own
// scripts, and called with Java's argument encodings: numbers as decimal ASCII,
// permit ids as 16 raw bytes, the no-lease sentinel as the text
// "922337203685477", the publish command's name as an ARGV element, and "now"
// as the caller's wall clock in epoch milliseconds.
type javaSync struct {
	rdb     redis.UniversalClient
	publish string // PUBLISH, or SPUBLISH on a Redis 7 cluster (Redisson 3.23+)
}

// javaNoLease is the score Redisson gives a permit without lease (§1.9, §2.12).
const javaNoLease = "922337203685477"

// Key and channel names of an object named name without braces (§0.4).
func javaSemaphoreChannel(name string) string { return "redisson_sc:{" + name + "}" }
func javaTimeoutKey(name string) string       { return "{" + name + "}:timeout" }
func javaLatchChannel(name string) string     { return "redisson_countdownlatch__channel__{" + name + "}" }

// javaNewID draws a permit id as Redisson does: 16 random bytes, shown to the
// caller as 32 lowercase hex characters.
func javaNewID(t testing.TB) []byte {
	t.Helper()
	id := make([]byte, 16)
	_, err := rand.Read(id)
	require.NoError(t, err)
	return id
}

// javaID is Java's hex decoding of a permit id (it accepts either case).
func javaID(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	require.Len(t, b, 16)
	return b
}

func javaNow() int64 { return time.Now().UnixMilli() }

// §2.11 RSemaphore.
var (
	// K1 = N; A1 = n. If K1 exists and its value >= n: DECRBY n, return 1; else 0.
	javaSemTryAcquire = newScript(`
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0`)
	// K1 = N, K2 = channel; A1 = n, A2 = publish command. v = INCRBY n; publish v.
	javaSemRelease = newScript(`
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)`)
	// As release, but only when K1 exists; returns whether it did.
	javaSemReleaseIfExists = newScript(`
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1`)
	// K1, K2; A1 = n, A2 = publish command [, A3 = ttl ms]. If GET is nil: SET n
	// (PX A3), publish n, return 1; else 0.
	javaSemTrySetPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  if ARGV[3] ~= nil then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
  else
    redis.call('set', KEYS[1], ARGV[1])
  end
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
	// K1, K2; A1 = d, A2 = publish command. v = (GET or 0) + d; SET v; publish v.
	javaSemAddPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  value = 0
end
local v = tonumber(value) + tonumber(ARGV[1])
redis.call('set', KEYS[1], v)
redis.call(ARGV[2], KEYS[2], v)`)
	// K1. If GET is nil return 0; else SET 0 and return the previous value.
	javaSemDrainPermits = newScript(`
local value = redis.call('get', KEYS[1])
if (value == false) then
  return 0
end
redis.call('set', KEYS[1], 0)
return value`)
)

// evalVoid runs a script whose Java call decodes no reply (EVAL_VOID).
func evalVoid(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

func (j javaSync) semTryAcquire(ctx context.Context, name string, n int64) (bool, error) {
	return javaSemTryAcquire.Run(ctx, j.rdb, []string{name}, n).Bool()
}

func (j javaSync) semRelease(ctx context.Context, name string, n int64) error {
	return evalVoid(javaSemRelease.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, n, j.publish).Err())
}

func (j javaSync) semReleaseIfExists(ctx context.Context, name string, n int64) (bool, error) {
	return javaSemReleaseIfExists.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, n, j.publish).Bool()
}

func (j javaSync) semTrySetPermits(ctx context.Context, name string, n int64, ttl time.Duration) (bool, error) {
	args := []any{n, j.publish}
	if ttl > 0 {
		args = append(args, ttl.Milliseconds())
	}
	return javaSemTrySetPermits.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, args...).Bool()
}

func (j javaSync) semAddPermits(ctx context.Context, name string, d int64) error {
	return evalVoid(javaSemAddPermits.Run(ctx, j.rdb, []string{name, javaSemaphoreChannel(name)}, d, j.publish).Err())
}

func (j javaSync) semDrainPermits(ctx context.Context, name string) (int64, error) {
	return javaSemDrainPermits.Run(ctx, j.rdb, []string{name}).Int64()
}

// semAvailable is availablePermits: a plain GET, nil -> 0.
func (j javaSync) semAvailable(ctx context.Context, name string) (int64, error) {
	v, err := j.rdb.Get(ctx, name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// javaReclaim is §2.12's reclaim step, shared by the permit-expirable scripts:
// take the members of z with score in [0, now] (at most limit when given), ZREM
// them, INCRBY n by their number, and publish the result on c when it is > 0.
// It returns the INCRBY result, or nil when nothing was reclaimed.
const javaReclaim = `
local function reclaim(n, z, c, now, publish, limit)
  local expired
  if limit ~= nil then
    expired = redis.call('zrangebyscore', z, 0, now, 'limit', 0, limit)
  else
    expired = redis.call('zrangebyscore', z, 0, now)
  end
  if #expired == 0 then
    return nil
  end
  redis.call('zrem', z, unpack(expired))
  local value = redis.call('incrby', n, #expired)
  if value > 0 then
    redis.call(publish, c, value)
  end
  return value
end
`

// §2.12 RPermitExpirableSemaphore.
var (
	// K1 = N, K2 = Z, K3 = C; A1 = count, A2 = expiry (now + lease, or S),
	// A3 = now, A4 = S, A5 = publish command, A6.. = ids.
	javaPESTryAcquire = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5], ARGV[1])
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and first[2] ~= ARGV[4] then
  return ':' .. first[2]
end
return nil`)
	// K1 = N, K2 = C, K3 = Z; A1 = id, A2 = 1, A3 = now, A4 = publish command.
	// No reclaim.
	javaPESTryReleaseOne = newScript(`
local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if removed == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[3]) then
  return 0
end
return 1`)
	// K1 = N, K2 = C, K3 = Z; A1 = number of ids (unused), A2 = now,
	// A3 = publish command, A4.. = ids. All or nothing.
	javaPESTryReleaseList = newScript(javaReclaim + `
for i = 4, #ARGV do
  local expire = redis.call('zscore', KEYS[3], ARGV[i])
  if expire == false or tonumber(expire) <= tonumber(ARGV[2]) then
    return 0
  end
end
reclaim(KEYS[1], KEYS[3], KEYS[2], ARGV[2], ARGV[3], nil)
local r = redis.call('zrem', KEYS[3], unpack(ARGV, 4, #ARGV))
redis.call('incrby', KEYS[1], r)
redis.call(ARGV[3], KEYS[2], r)
return r`)
	// K1 = N, K2 = Z, K3 = C; A1 = now, A2 = publish command.
	javaPESAvailable = newScript(javaReclaim + `
local value = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
if value ~= nil then
  return value
end
value = redis.call('get', KEYS[1])
if value == false then
  return 0
end
return tonumber(value)`)
	javaPESGetPermits = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
local value = redis.call('get', KEYS[1])
if value == false then
  return 0
end
return tonumber(value) + redis.call('zcount', KEYS[2], 0, '+inf')`)
	javaPESAcquired = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
return redis.call('zcount', KEYS[2], 0, '+inf')`)
	// K1 = N, K2 = C, K3 = Z; A1 = n, A2 = publish command. No reclaim.
	javaPESSetPermits = newScript(`
local value = redis.call('get', KEYS[1])
if value == false then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return
end
local total = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(value)
if total ~= tonumber(ARGV[1]) then
  redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1 = N, K2 = C; A1 = d, A2 = publish command. Publishes d when d > 0.
	javaPESAddPermits = newScript(`
local value = redis.call('get', KEYS[1])
if value == false then
  value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1 = N, K2 = Z, K3 = C; A1 = id, A2 = new expiry (now + lease, or S),
	// A3 = now, A4 = publish command.
	javaPESUpdateLeaseTime = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], nil)
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0`)
	// K1 = N, K2 = Z, K3 = C; A1 = id, A2 = S, A3 = now, A4 = publish command.
	javaPESGetLeaseTime = newScript(javaReclaim + `
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], nil)
local expire = redis.call('zscore', KEYS[2], ARGV[1])
if expire == false then
  return 0
end
if expire == ARGV[2] then
  return -1
end
return tonumber(expire) - tonumber(ARGV[3])`)
)

// javaAcquired is the reply of pesTryAcquire when the ids are held.
const javaAcquired = "OK"

// javaWaitUntil is the reply of pesTryAcquire that tells its caller the
// earliest expiry, the epoch ms score, to wait until.
func javaWaitUntil(score int64) string { return ":" + strconv.FormatInt(score, 10) }

// pesTryAcquire is tryAcquire(ids, lease): lease <= 0 is a permit without
// lease (score S). It returns the reply as text: javaAcquired ("OK"),
// javaWaitUntil(earliest expiry) (":<ms>") or "" for nil.
func (j javaSync) pesTryAcquire(ctx context.Context, name string, lease time.Duration, ids ...[]byte) (string, error) {
	now := javaNow()
	expiry := javaNoLease
	if lease > 0 {
		expiry = strconv.FormatInt(now+lease.Milliseconds(), 10)
	}
	args := []any{len(ids), expiry, now, javaNoLease, j.publish}
	for _, id := range ids {
		args = append(args, id)
	}
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	v, err := javaPESTryAcquire.Run(ctx, j.rdb, keys, args...).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// pesTryRelease is tryRelease(id): whether the id was held and not expired.
func (j javaSync) pesTryRelease(ctx context.Context, name string, id []byte) (bool, error) {
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return javaPESTryReleaseOne.Run(ctx, j.rdb, keys, id, 1, javaNow(), j.publish).Bool()
}

// pesTryReleaseList is tryRelease(ids): how many were released, 0 when any id
// is unknown or expired.
func (j javaSync) pesTryReleaseList(ctx context.Context, name string, ids ...[]byte) (int64, error) {
	args := []any{len(ids), javaNow(), j.publish}
	for _, id := range ids {
		args = append(args, id)
	}
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return javaPESTryReleaseList.Run(ctx, j.rdb, keys, args...).Int64()
}

func (j javaSync) pesCounter(ctx context.Context, s *redis.Script, name string) (int64, error) {
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return s.Run(ctx, j.rdb, keys, javaNow(), j.publish).Int64()
}

func (j javaSync) pesAvailable(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESAvailable, name)
}

func (j javaSync) pesAcquired(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESAcquired, name)
}

func (j javaSync) pesGetPermits(ctx context.Context, name string) (int64, error) {
	return j.pesCounter(ctx, javaPESGetPermits, name)
}

func (j javaSync) pesSetPermits(ctx context.Context, name string, n int64) error {
	keys := []string{name, javaSemaphoreChannel(name), javaTimeoutKey(name)}
	return evalVoid(javaPESSetPermits.Run(ctx, j.rdb, keys, n, j.publish).Err())
}

// pesTrySetPermits is trySetPermits(n): RSemaphore's script without a TTL
// (K1 = N, K2 = C; A1 = n, A2 = publish command: §2.11 and §2.12 agree).
func (j javaSync) pesTrySetPermits(ctx context.Context, name string, n int64) (bool, error) {
	return j.semTrySetPermits(ctx, name, n, 0)
}

func (j javaSync) pesAddPermits(ctx context.Context, name string, d int64) error {
	keys := []string{name, javaSemaphoreChannel(name)}
	return evalVoid(javaPESAddPermits.Run(ctx, j.rdb, keys, d, j.publish).Err())
}

// pesUpdateLeaseTime is updateLeaseTime(id, lease): lease < 0 is permanent (S).
func (j javaSync) pesUpdateLeaseTime(ctx context.Context, name string, id []byte, lease time.Duration) (bool, error) {
	now := javaNow()
	expiry := javaNoLease
	if lease >= 0 {
		expiry = strconv.FormatInt(now+lease.Milliseconds(), 10)
	}
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return javaPESUpdateLeaseTime.Run(ctx, j.rdb, keys, id, expiry, now, j.publish).Bool()
}

// pesGetLeaseTime is getLeaseTime(id)'s script reply: remaining ms, -1 for no
// lease, 0 for an unknown id (which Java turns into IllegalArgumentException).
func (j javaSync) pesGetLeaseTime(ctx context.Context, name string, id []byte) (int64, error) {
	keys := []string{name, javaTimeoutKey(name), javaSemaphoreChannel(name)}
	return javaPESGetLeaseTime.Run(ctx, j.rdb, keys, id, javaNoLease, javaNow(), j.publish).Int64()
}

// §2.13 RCountDownLatch.
var (
	// K1 = N, K2 = channel; A1 = "0", A2 = publish command.
	javaLatchCountDown = newScript(`
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
end
if v == 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end`)
	// K1, K2; A1 = "1", A2 = count, A3 = publish command.
	javaLatchTrySetCount = newScript(`
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return 1
end
return 0`)
	// K1, K2; A1 = "1", A2 = publish command.
	javaLatchDelete = newScript(`
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)
)

func (j javaSync) latchCountDown(ctx context.Context, name string) error {
	return evalVoid(javaLatchCountDown.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 0, j.publish).Err())
}

func (j javaSync) latchTrySetCount(ctx context.Context, name string, n int64) (bool, error) {
	return javaLatchTrySetCount.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 1, n, j.publish).Bool()
}

func (j javaSync) latchDelete(ctx context.Context, name string) (bool, error) {
	return javaLatchDelete.Run(ctx, j.rdb, []string{name, javaLatchChannel(name)}, 1, j.publish).Bool()
}

// latchGetCount is getCount: GET, nil -> 0.
func (j javaSync) latchGetCount(ctx context.Context, name string) (int64, error) {
	return j.semAvailable(ctx, name)
}

// javaSubscriber is a Java subscriber of one channel: it decodes every payload
// as Redisson's LongCodec does (Long.valueOf of the UTF-8 text) and fails the
// test on anything else. Its connection is also subscribed to a marker channel
// in the same slot, so that until can tell exactly which messages were
// published between two points of a test: Redis delivers the messages of one
// connection in the order it executed the publishes.
type javaSubscriber struct {
	t       *testing.T
	msgs    <-chan *redis.Message
	channel string
	marker  string
	pub     func(ctx context.Context, channel, payload string) error
}

// javaDecode is LongCodec's decoder: Long.valueOf(text), which takes an
// optional sign and decimal digits fitting an int64, nothing else.
func javaDecode(t testing.TB, channel, payload string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(payload, 10, 64)
	require.NoError(t, err, "Java's LongCodec cannot decode %q published on %s", payload, channel)
	return v
}

// next returns the next value published on the channel, failing the test when
// none comes within d.
func (s *javaSubscriber) next(d time.Duration) int64 {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		require.True(s.t, ok, "subscription closed")
		require.Equal(s.t, s.channel, m.Channel, "expected a message on %s, got marker", s.channel)
		return javaDecode(s.t, m.Channel, m.Payload)
	case <-time.After(d):
		s.t.Fatalf("no message on %s within %v", s.channel, d)
		return 0
	}
}

// until returns every value published on the channel since the last call (or
// the subscription), in order: it publishes a marker and collects messages up
// to it.
func (s *javaSubscriber) until() []int64 {
	s.t.Helper()
	ctx := testCtx(s.t, 10*time.Second)
	require.NoError(s.t, s.pub(ctx, s.marker, "0"))
	got := []int64{}
	for {
		select {
		case m, ok := <-s.msgs:
			require.True(s.t, ok, "subscription closed")
			if m.Channel == s.marker {
				return got
			}
			got = append(got, javaDecode(s.t, m.Channel, m.Payload))
		case <-ctx.Done():
			s.t.Fatalf("marker not received on %s: %v (so far %v)", s.marker, ctx.Err(), got)
		}
	}
}
