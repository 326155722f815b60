-- write_acquire: take the write side of a read/write lock for an owner, or
-- re-enter it (Redisson's RedissonWriteLock); idempotent under client retries.
--
-- KEYS[1]  lock key N (hash: "mode" -> "read" or "write", owner fields -> counts)
-- ARGV[1]  lease in ms
-- ARGV[2]  the owner's write field W "<client uuid>:<owner id>:write"
-- ARGV[3]  expected hold count c: W's count on N as the client knows it
--
-- Returns "OK" (acquired: W's count is now c+1, also after a retried execution,
-- which sets the lease again),
-- an integer (not acquired: N's PTTL, -1 when it has no expiry) or {n} (W's
-- count in Redis is n, not c: nothing changed). Granted only when N is free or in
-- write mode held by W: no read -> write upgrade. Unlike Redisson, a reentrant
-- write acquisition sets N's TTL to the lease (as RLock does) instead of adding
-- the lease to it, so that the holder's deadline is the one its client computes.
local c = tonumber(ARGV[3])
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  if redis.call('exists', KEYS[1]) == 1 then
    local bad = not_a_lock(KEYS[1])
    if bad then
      return bad
    end
    return redis.call('pttl', KEYS[1])
  end
  if c > 0 then
    return {0}
  end
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if n == c + 1 then
  -- a second execution: the lease again, from now (see read_acquire.lua)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
if n ~= c then
  return {n}
end
if mode == 'write' and n > 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
local bad = not_a_lock(KEYS[1])
if bad then
  return bad
end
return redis.call('pttl', KEYS[1])
