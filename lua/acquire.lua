-- acquire: take the lock for an owner, or re-enter it; idempotent under client retries.
--
-- KEYS[1]  lock key N (hash: owner field -> hold count), Redisson's RLock layout
-- KEYS[2]  (fenced locks only) token counter redisson_lock_token:{N}
-- ARGV[1]  lease in ms, applied with PEXPIRE on success
-- ARGV[2]  owner field "<client uuid>:<owner id>"
-- ARGV[3]  expected hold count c: the owner's count on N as the client knows it
--
-- Returns
--   "OK"     acquired: the owner's count is now c+1 (also when it already was c+1:
--            a retried execution of this same call, or a hand-off to this owner).
--            Redisson answers nil; a status reply spares go-redis its error path
--            (which allocates a dozen times per nil reply).
--   integer  not acquired: PTTL of N in ms (-1: the holder set no expiry)
--   {n}      the owner's count in Redis is n, not c: nothing changed
--            (n == 0 means the owner's earlier holds were lost)
--   {"OK", t} acquired, on a fenced lock: t is the acquisition's fencing token,
--            INCR of KEYS[2] (Redisson's RFencedLock), raised to the server's
--            clock in microseconds when it is below (next_token); a retried
--            execution reads it back (GET) instead of taking a second token
--
-- Compared with Redisson's acquire (same effect on N), the expected count makes a
-- second execution of the same request, after go-redis retried a call whose reply
-- was lost, a no-op instead of a second hold. The first write to N is HSET or
-- HINCRBY, which fail with WRONGTYPE on a non-hash value before anything changed.
-- A free lock costs three calls (PTTL, HSET, PEXPIRE), as in Redisson. A lock
-- held by another owner is checked to be a lock (not_a_lock, lock_shape.lua):
-- a hash of another shape fails with a WRONGTYPE error and stays as it was.
-- next_token takes a fencing token: INCR of the counter at key, as Java's
-- RFencedLock does, but never below the server's clock in microseconds (TIME):
-- a counter lost with the data (a restart without persistence, FLUSHALL, a
-- failover to a replica that missed INCRs) starts again above every token
-- handed out before, as long as tokens were taken at less than one per
-- microsecond on average and the servers' clocks do not go back. Java's INCR
-- keeps working on the raised counter.
local function next_token(key)
  local now = redis.call('time')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local t = redis.call('incr', key)
  if t < floor then
    redis.call('set', key, string.format('%d', floor))
    return floor
  end
  return t
end

local ttl = redis.call('pttl', KEYS[1])
local c = tonumber(ARGV[3])
if ttl == -2 then
  if c > 0 then
    return {0}
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if KEYS[2] then
    return {'OK', next_token(KEYS[2])}
  end
  return redis.status_reply('OK')
end
local n = redis.call('hget', KEYS[1], ARGV[2])
n = n and tonumber(n) or 0
if n == c + 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  if KEYS[2] then
    return {'OK', tonumber(redis.call('get', KEYS[2]) or 0)}
  end
  return redis.status_reply('OK')
end
if n ~= c then
  return {n}
end
if n == 0 then
  local bad = not_a_lock(KEYS[1])
  if bad then
    return bad
  end
  return ttl
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
if KEYS[2] then
  return {'OK', next_token(KEYS[2])}
end
return redis.status_reply('OK')
