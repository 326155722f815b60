-- fair_acquire: take a fair lock for an owner, re-enter it, or queue for it
-- (Redisson's RFairLock); idempotent under client retries.
--
-- KEYS[1]  lock key N (hash: owner field -> hold count), as RLock
-- KEYS[2]  queue redisson_lock_queue:{N} (list of waiting owner fields, FIFO)
-- KEYS[3]  deadlines redisson_lock_timeout:{N} (zset: waiting field -> epoch ms
--          after which the waiter is taken for dead and skipped)
-- ARGV[1]  lease in ms, applied with PEXPIRE on success
-- ARGV[2]  owner field "<client uuid>:<owner id>"
-- ARGV[3]  expected hold count c: the owner's count on N as the client knows it
-- ARGV[4]  wait in ms: how long the waiter may wait once its turn comes; 0 for
--          a single attempt, which never queues
-- ARGV[5]  now: the client's wall clock, epoch ms (Redisson compares the
--          clients' clocks; see docs/safety.md)
-- ARGV[6]  publish command: PUBLISH or SPUBLISH
-- ARGV[7]  the waiters' channel prefix redisson_lock__channel:{N}
--
-- Returns
--   "OK"     acquired: the owner's count is now c+1 (also when it already was:
--            a retried execution of this same call)
--   integer  not acquired: ms after which the caller should attempt again at the
--            latest, unless woken before (-1: the holder set no expiry). For the
--            queue's head it is N's PTTL; for a waiter behind it, the time until
--            the waiter ahead of it would be skipped as dead, or N's PTTL if
--            sooner; while N is free and the waiter ahead is the head, at
--            most 1 s.
--   {n}      the owner's count in Redis is n, not c: nothing changed
--
-- As Redisson's script: stale heads (deadline <= now) are dropped first; a free N
-- goes to the queue's head, or to anyone when the queue is empty, and then every
-- deadline comes ARGV[4] sooner; a newcomer's deadline is its predecessor's (or
-- N's PTTL) plus ARGV[4]. Unlike it, a waiter behind the head learns when to
-- look again (Redisson answers it N's PTTL, 0 when N is free: a busy loop), and
-- a waiter that takes the lock with others queued behind it wakes the new head
-- ("0" on its channel), so that the new head reads the new holder's lease: a
-- hold that then ends without a release (lease run out, key deleted) still
-- bounds the new head's sleep. A waiter that Redisson's acquire makes the
-- holder sends no such message: so the waiter right behind a head that has not
-- taken the free lock yet looks again within 1 s (only that one: the others
-- are woken in turn as the queue moves).
local now = tonumber(ARGV[5])
local wait = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local t = redis.call('zscore', KEYS[3], head)
  if not t or tonumber(t) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end

local c = tonumber(ARGV[3])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if n == c + 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
if n ~= c then
  return {n}
end
if n > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end

local ttl = redis.call('pttl', KEYS[1])
if ttl ~= -2 then
  local bad = not_a_lock(KEYS[1])
  if bad then
    return bad
  end
end
local head = redis.call('lindex', KEYS[2], 0)
if ttl == -2 and (not head or head == ARGV[2]) then
  if head then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], ARGV[2])
  local waiting = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #waiting do
    redis.call('zincrby', KEYS[3], -wait, waiting[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  local next = redis.call('lindex', KEYS[2], 0)
  if next then
    redis.call(ARGV[6], ARGV[7] .. ':' .. next, '0')
  end
  return redis.status_reply('OK')
end
if wait == 0 then
  return math.max(ttl, -1)
end

-- bound: when a waiter whose predecessor in the queue is pred looks again
local function bound(pred)
  local t = pred and redis.call('zscore', KEYS[3], pred)
  if not t then
    return ttl
  end
  local b = math.max(tonumber(t) - now, 1)
  if ttl == -2 and pred == head then
    return math.min(b, 1000)
  end
  if ttl > 0 and ttl < b then
    return ttl
  end
  return b
end

local pos = redis.call('lpos', KEYS[2], ARGV[2])
if pos then
  if pos == 0 then
    return ttl
  end
  return bound(redis.call('lindex', KEYS[2], pos - 1))
end
local last = redis.call('lindex', KEYS[2], -1)
local lastDeadline = last and redis.call('zscore', KEYS[3], last)
local start = ttl
if lastDeadline then
  start = tonumber(lastDeadline) - now
end
redis.call('zadd', KEYS[3], start + wait + now, ARGV[2])
redis.call('rpush', KEYS[2], ARGV[2])
if not last then
  return ttl
end
return bound(last)
